/* Fuzzes the msgpack pull decoder: no item points outside the input, a refusal consumes nothing,
 * skipping never recurses past its depth, and a scalar re-encodes to an item that decodes equal. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mooncake/common/msgpack.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *buf = malloc(size ? size : 1);
    memcpy(buf, data, size);
    mc_cursor_t c = {buf, buf + size};
    while (mc__cur_left(&c)) {
        const uint8_t *at = c.pos;
        mc_mp_item_t it;
        if (mc__mp_next(&c, &it) != 0) {
            if (c.pos != at)
                abort();
            break;
        }
        if ((it.type == MC_MP_STR || it.type == MC_MP_BIN || it.type == MC_MP_EXT) &&
            (it.p < buf || it.p + it.n > buf + size))
            abort();
        if ((it.type == MC_MP_ARRAY && it.n > mc__cur_left(&c)) ||
            (it.type == MC_MP_MAP && 2ull * it.n > mc__cur_left(&c)))
            abort();
        if (it.type == MC_MP_UINT || it.type == MC_MP_INT) {
            mc_buf_t b;
            mc_mp_item_t back;
            mc__buf_init(&b);
            if (it.type == MC_MP_UINT)
                mc__mp_uint(&b, it.u);
            else
                mc__mp_int(&b, it.i);
            mc_cursor_t r = {b.data, b.data + b.len};
            if (b.failed || mc__mp_next(&r, &back) != 0 || back.type != it.type ||
                (it.type == MC_MP_UINT ? back.u != it.u : back.i != it.i) || r.pos != r.end)
                abort();
            mc__buf_free(&b);
        }
    }
    /* whole values, skipped from the start */
    mc_cursor_t s = {buf, buf + size};
    while (mc__cur_left(&s) && mc__mp_skip(&s, 32) == 0)
        if (s.pos > s.end)
            abort();
    free(buf);
    return 0;
}
