/* Fuzzes the TE RPC decoders the serving side runs on peer bytes: header check, READ/WRITE
 * addr/len, WRITE_ASK heads, error replies and notifies. Nothing may read past the input; whatever
 * decodes must satisfy the limits the server relies on. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mooncake/common/frame.h"
#include "proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    mc_frame_header_t h;
    const uint8_t *body;
    size_t n;
    uint64_t addr = 0, len = 0, epoch = 0;
    uint32_t msg_len = 0;
    int code = 0;
    char msg[64];
    mc__te_notify_view_t v;
    if (mc__frame_header_decode(data, size, MC__TE_MAX_REQUEST_BODY, &h) != 0)
        return 0;
    body = data + MC_FRAME_HEADER_SIZE;
    n = size - MC_FRAME_HEADER_SIZE;
    /* a heap copy of exactly n bytes so ASan sees any over-read */
    {
        uint8_t *copy = malloc(n ? n : 1);
        memcpy(copy, body, n);
        if (mc__te_check_request(&h) == 0) {
            if ((h.type == MC__TE_READ || h.type == MC__TE_WRITE) &&
                mc__te_decode_rw(&h, copy, n, &addr, &len, &epoch) == 0) {
                if (len == 0 || len > MC__TE_MAX_SLICE)
                    abort();
                if (h.type == MC__TE_WRITE && h.body_len != MC__TE_RW_BODY + len)
                    abort();
            }
            /* the server reads the 28-byte head, then msg_len bytes into a fixed buffer */
            if (h.type == MC__TE_WRITE_ASK &&
                mc__te_decode_ask(&h, copy, n < MC__TE_ASK_BODY ? n : MC__TE_ASK_BODY, &addr, &len,
                                  &epoch, &msg_len) == 0) {
                if (msg_len > MC__TE_MAX_ASK_MSG || len > MC__TE_MAX_SLICE ||
                    h.body_len != MC__TE_ASK_BODY + (uint64_t)msg_len + len)
                    abort();
            }
            if (h.type == MC__TE_NOTIFY && mc__te_decode_notify(copy, n, &v) == 0) {
                if (v.msg_len > MC__TE_MAX_NOTIFY_MSG || v.name_len > MC__TE_MAX_NOTIFY_NAME ||
                    memchr(v.name, 0, v.name_len))
                    abort();
            }
        }
        if (mc__te_decode_error(copy, n, &code, msg, sizeof(msg)) == 0 && code >= 0)
            abort();
        free(copy);
    }
    return 0;
}
