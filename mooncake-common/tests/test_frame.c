#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/frame.h"
#include "mooncake/error.h"

static void test_header_roundtrip(void **state) {
    mc_frame_header_t h = {MC_FRAME_MAGIC,   MC_FRAME_VERSION,      7,
                           MC_FRAME_F_REPLY, 0x1122334455667788ull, 4096};
    mc_frame_header_t d;
    uint8_t raw[MC_FRAME_HEADER_SIZE];
    mc__frame_header_encode(&h, raw);
    /* little-endian on the wire, whatever the host */
    assert_int_equal(raw[0], 'M');
    assert_int_equal(raw[3], '1');
    assert_int_equal(raw[8], 0x88);
    assert_int_equal(mc__frame_header_decode(raw, sizeof(raw), 4096, &d), 0);
    assert_int_equal(d.type, 7);
    assert_int_equal(d.flags, MC_FRAME_F_REPLY);
    assert_true(d.request_id == 0x1122334455667788ull);
    assert_int_equal(d.body_len, 4096);
}

static void test_header_rejects(void **state) {
    mc_frame_header_t h = {MC_FRAME_MAGIC, MC_FRAME_VERSION, 1, 0, 1, 100};
    mc_frame_header_t d;
    uint8_t raw[MC_FRAME_HEADER_SIZE];
    mc__frame_header_encode(&h, raw);
    assert_int_equal(mc__frame_header_decode(raw, 23, 1000, &d), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc__frame_header_decode(raw, 24, 99, &d), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(d.body_len, 100); /* still filled for the error reply */
    raw[4] = 2;
    assert_int_equal(mc__frame_header_decode(raw, 24, 1000, &d), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(d.version, 2);
    raw[4] = 1;
    raw[0] ^= 1;
    assert_int_equal(mc__frame_header_decode(raw, 24, 1000, &d), MC_ERR_INVALID_ARGUMENT);
}

static void test_cursor_bounds(void **state) {
    uint8_t data[] = {1, 2, 0, 3, 0, 0, 0, 'a', 'b', 'c', 9};
    mc_cursor_t c = {data, data + sizeof(data)};
    uint8_t u8;
    uint16_t u16;
    const uint8_t *p;
    uint32_t n;
    uint64_t u64;
    assert_int_equal(mc__cur_u8(&c, &u8), 0);
    assert_int_equal(u8, 1);
    assert_int_equal(mc__cur_u16(&c, &u16), 0);
    assert_int_equal(u16, 2);
    c.pos--; /* re-read the length prefix from the 0 byte: 00 03 00 00 -> 0x300 */
    assert_int_equal(mc__cur_bytes(&c, 1000, &p, &n), -1); /* longer than what is left */
    c.pos++;
    assert_int_equal(mc__cur_bytes(&c, 2, &p, &n), -1); /* over max */
    assert_int_equal(mc__cur_bytes(&c, 10, &p, &n), 0);
    assert_int_equal(n, 3);
    assert_memory_equal(p, "abc", 3);
    assert_int_equal(mc__cur_left(&c), 1);
    assert_int_equal(mc__cur_u64(&c, &u64), -1);
    assert_int_equal(mc__cur_left(&c), 1);
}

static void test_count_cannot_outrun_bytes(void **state) {
    mc_buf_t b;
    uint32_t cnt;
    mc__buf_init(&b);
    mc__buf_u32(&b, 1000000);
    mc__buf_u64(&b, 0);
    mc_cursor_t c = {b.data, b.data + b.len};
    assert_int_equal(mc__cur_count(&c, UINT32_MAX, 8, &cnt), -1);
    assert_int_equal(mc__cur_left(&c), 12);
    mc__buf_reset(&b);
    mc__buf_u32(&b, 2);
    mc__buf_u64(&b, 5);
    mc__buf_u64(&b, 6);
    c.pos = b.data;
    c.end = b.data + b.len;
    assert_int_equal(mc__cur_count(&c, 1, 8, &cnt), -1);
    assert_int_equal(mc__cur_count(&c, 2, 8, &cnt), 0);
    assert_int_equal(cnt, 2);
    mc__buf_free(&b);
}

static void test_buf_and_frame(void **state) {
    mc_buf_t b;
    size_t start;
    mc_frame_header_t h;
    mc_cursor_t c;
    int32_t i32;
    int64_t i64;
    const uint8_t *p;
    uint32_t n;
    mc__buf_init(&b);
    assert_int_equal(mc__buf_put(&b, "xx", 2), 0);
    assert_int_equal(mc__buf_frame_begin(&b, 9, MC_FRAME_F_ERROR, 42, &start), 0);
    assert_int_equal(start, 2);
    mc__buf_i32(&b, -704);
    mc__buf_i64(&b, -5);
    mc__buf_str(&b, "object not found");
    for (int i = 0; i < 1000; i++)
        mc__buf_u8(&b, (uint8_t)i);
    mc__buf_frame_end(&b, start);
    assert_false(b.failed);
    assert_int_equal(mc__frame_header_decode(b.data + 2, b.len - 2, 1 << 20, &h), 0);
    assert_int_equal(h.body_len, b.len - 2 - MC_FRAME_HEADER_SIZE);
    assert_int_equal(h.request_id, 42);
    c.pos = b.data + 2 + MC_FRAME_HEADER_SIZE;
    c.end = b.data + b.len;
    assert_int_equal(mc__cur_i32(&c, &i32), 0);
    assert_int_equal(i32, -704);
    assert_int_equal(mc__cur_i64(&c, &i64), 0);
    assert_int_equal(i64, -5);
    assert_int_equal(mc__cur_bytes(&c, 100, &p, &n), 0);
    assert_int_equal(n, 16);
    assert_int_equal(mc__cur_left(&c), 1000);
    mc__buf_free(&b);
}

static void test_buf_sticky_failure(void **state) {
    mc_buf_t b;
    int64_t base = mc__alloc_live_bytes();
    mc__buf_init(&b);
    mc__alloc_fail_after(1);
    assert_int_equal(mc__buf_u32(&b, 1), MC_ERR_MEMORY);
    mc__alloc_fail_after(0);
    assert_true(b.failed);
    assert_int_equal(mc__buf_u32(&b, 1), MC_ERR_MEMORY); /* sticky */
    mc__buf_free(&b);
    assert_int_equal(mc__alloc_live_bytes(), base);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_roundtrip), cmocka_unit_test(test_header_rejects),
        cmocka_unit_test(test_cursor_bounds),    cmocka_unit_test(test_count_cannot_outrun_bytes),
        cmocka_unit_test(test_buf_and_frame),    cmocka_unit_test(test_buf_sticky_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
