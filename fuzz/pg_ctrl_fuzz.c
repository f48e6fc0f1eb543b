/* The PG's control plane (mooncake-pg/src/pg_ctrl_proto.h): the request decoder the coordinator
 * runs on every frame from a rank, and the reply decoder every rank runs on the coordinator's
 * answers. Input: a 24-byte frame header followed by the body. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mooncake/common/frame.h"
#include "pg_ctrl_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static mc_pgc_req_t req;
    static mc_pgc_view_t view;
    mc_frame_header_t h;
    char err[128];
    if (size < MC_FRAME_HEADER_SIZE)
        return 0;
    (void)mc__frame_header_decode(data, size, MC_PGC_MAX_BODY, &h);
    const uint8_t *body = data + MC_FRAME_HEADER_SIZE;
    size_t len = size - MC_FRAME_HEADER_SIZE;
    if (mc__pgc_decode_request(h.type, body, len, &req, err, sizeof(err)) == 0) {
        /* what decoded is NUL-terminated within its buffers and re-encodes to the same body */
        if (!memchr(req.group, 0, sizeof(req.group)) || !memchr(req.addr, 0, sizeof(req.addr)))
            __builtin_trap();
        mc_buf_t b;
        mc__buf_init(&b);
        if (mc__pgc_encode_request(&req, h.request_id, &b) == 0 &&
            (b.len - MC_FRAME_HEADER_SIZE != len ||
             memcmp(b.data + MC_FRAME_HEADER_SIZE, body, len)))
            __builtin_trap();
        mc__buf_free(&b);
    }
    if (mc__pgc_decode_reply(h.flags, body, len, &view) == 0) {
        for (int i = 0; i < MC_PGC_MAX_SEATS; i++)
            if ((view.known >> i & 1) && !memchr(view.addrs[i], 0, MC_PGC_ADDR_MAX))
                __builtin_trap();
    }
    return 0;
}
