/* Fuzzes the ZMTP stream parser as a PUB and as a SUB would run it over a peer's bytes: every
 * event's parts lie inside the input, consumption never passes the end, and a message never holds
 * more than max_msg bytes or MC_ZMTP_MAX_PARTS parts. The first byte picks the side. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mooncake/common/zmtp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    uint8_t *buf = malloc(size);
    memcpy(buf, data, size);
    mc_zmtp_stream_t st;
    const uint64_t max_msg = 4096;
    mc__zmtp_stream_init(&st, (buf[0] & 1) ? "SUB" : "PUB", max_msg);
    size_t off = 1;
    for (;;) {
        int ev;
        mc_zmtp_msg_t m;
        const uint8_t *cmd, *d;
        size_t cl, dl;
        int64_t used =
            mc__zmtp_stream_next(&st, buf + off, size - off, &ev, &m, &cmd, &cl, &d, &dl);
        if (used <= 0)
            break;
        if ((uint64_t)used > size - off)
            abort();
        if (ev == MC_ZMTP_EV_MSG) {
            size_t total = 0;
            if (m.nparts < 1 || m.nparts > MC_ZMTP_MAX_PARTS)
                abort();
            for (int i = 0; i < m.nparts; i++) {
                if (m.part[i] < buf + off || m.part[i] + m.len[i] > buf + off + used)
                    abort();
                total += m.len[i];
            }
            if (total > max_msg)
                abort();
        } else if (ev == MC_ZMTP_EV_CMD) {
            if (cmd < buf + off || d + dl > buf + off + used || cmd + cl > d)
                abort();
        } else if (ev == MC_ZMTP_EV_READY && st.peer_type[sizeof(st.peer_type) - 1] != 0) {
            abort();
        }
        off += (size_t)used;
    }
    free(buf);
    return 0;
}
