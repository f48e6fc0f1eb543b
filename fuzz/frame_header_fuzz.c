/* Fuzzes the frame header decoder and the body cursor: no input may read past the end, and a
 * header that decodes must re-encode to the same bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mooncake/common/frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    mc_frame_header_t h;
    uint8_t again[MC_FRAME_HEADER_SIZE];
    /* copy so ASan flags any read past the input */
    uint8_t *buf = malloc(size ? size : 1);
    memcpy(buf, data, size);
    if (mc__frame_header_decode(buf, size, 1u << 20, &h) == 0) {
        mc__frame_header_encode(&h, again);
        if (memcmp(again, buf, MC_FRAME_HEADER_SIZE) != 0 || h.body_len > (1u << 20))
            abort();
    }
    /* The tail drives a sequence of cursor reads chosen by the bytes themselves. */
    if (size > MC_FRAME_HEADER_SIZE) {
        mc_cursor_t c = {buf + MC_FRAME_HEADER_SIZE, buf + size};
        uint8_t op = 0;
        while (mc__cur_u8(&c, &op) == 0) {
            uint64_t u64;
            uint32_t u32, n;
            uint16_t u16;
            int64_t i64;
            int32_t i32;
            const uint8_t *p;
            size_t before = mc__cur_left(&c);
            int rc = 0;
            switch (op % 7) {
            case 0:
                rc = mc__cur_u16(&c, &u16);
                break;
            case 1:
                rc = mc__cur_u32(&c, &u32);
                break;
            case 2:
                rc = mc__cur_u64(&c, &u64);
                break;
            case 3:
                rc = mc__cur_i32(&c, &i32);
                break;
            case 4:
                rc = mc__cur_i64(&c, &i64);
                break;
            case 5:
                rc = mc__cur_bytes(&c, 4096, &p, &n);
                if (rc == 0 && (p < buf || p + n > buf + size))
                    abort();
                break;
            case 6:
                rc = mc__cur_count(&c, 1u << 20, 8, &n);
                if (rc == 0 && (uint64_t)n * 8 > mc__cur_left(&c))
                    abort();
                break;
            }
            if (c.pos > c.end || (rc != 0 && mc__cur_left(&c) != before))
                abort();
        }
    }
    /* Builder: the same bytes framed and decoded back. */
    {
        mc_buf_t b;
        size_t start;
        mc_frame_header_t d;
        mc__buf_init(&b);
        mc__buf_frame_begin(&b, size ? data[0] : 0, 0, size, &start);
        mc__buf_bytes(&b, data, (uint32_t)size);
        mc__buf_frame_end(&b, start);
        if (b.failed || mc__frame_header_decode(b.data, b.len, UINT64_MAX, &d) != 0 ||
            d.body_len != size + 4 || d.request_id != size)
            abort();
        mc__buf_free(&b);
    }
    free(buf);
    return 0;
}
