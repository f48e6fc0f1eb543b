/* msgpack: each encoding picks msgpack's smallest form (the bytes Python's msgpack writes), the
 * decoder reads every form back, and refuses short input, the reserved byte, and a container
 * whose count promises more items than bytes are left. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "mooncake/common/msgpack.h"

static void expect_bytes(mc_buf_t *b, const char *hex) {
    char got[512] = {0};
    for (size_t i = 0; i < b->len && i < 255; i++)
        snprintf(got + 2 * i, 3, "%02x", b->data[i]);
    assert_string_equal(got, hex);
    mc__buf_reset(b);
}

static void test_encode_forms(void **state) {
    (void)state;
    mc_buf_t b;
    mc__buf_init(&b);
    mc__mp_uint(&b, 5);
    expect_bytes(&b, "05");
    mc__mp_uint(&b, 200);
    expect_bytes(&b, "ccc8");
    mc__mp_uint(&b, 65535);
    expect_bytes(&b, "cdffff");
    mc__mp_uint(&b, 1ull << 32);
    expect_bytes(&b, "cf0000000100000000");
    mc__mp_int(&b, -1);
    expect_bytes(&b, "ff");
    mc__mp_int(&b, -33);
    expect_bytes(&b, "d0df");
    mc__mp_int(&b, -40000);
    expect_bytes(&b, "d2ffff63c0");
    mc__mp_cstr(&b, "ab");
    expect_bytes(&b, "a26162");
    mc__mp_cstr(&b, NULL);
    expect_bytes(&b, "c0");
    mc__mp_array(&b, 3);
    expect_bytes(&b, "93");
    mc__mp_map(&b, 20);
    expect_bytes(&b, "de0014");
    mc__mp_bin(&b, "x", 1);
    expect_bytes(&b, "c40178");
    mc__mp_bool(&b, 1);
    expect_bytes(&b, "c3");
    mc__mp_double(&b, 1.5);
    expect_bytes(&b, "cb3ff8000000000000");
    char big[300];
    memset(big, 'z', sizeof(big));
    mc__mp_str(&b, big, 40);
    assert_int_equal(b.data[0], 0xd9);
    mc__buf_reset(&b);
    mc__mp_str(&b, big, 300);
    assert_int_equal(b.data[0], 0xda);
    mc__buf_free(&b);
}

static void test_roundtrip(void **state) {
    (void)state;
    mc_buf_t b;
    mc__buf_init(&b);
    mc__mp_array(&b, 6);
    mc__mp_int(&b, INT64_MIN);
    mc__mp_uint(&b, UINT64_MAX);
    mc__mp_cstr(&b, "stored");
    mc__mp_map(&b, 1);
    mc__mp_cstr(&b, "k");
    mc__mp_array(&b, 0);
    mc__mp_double(&b, -2.25);
    mc__mp_nil(&b);
    assert_false(b.failed);
    mc_cursor_t c = {b.data, b.data + b.len};
    mc_mp_item_t it;
    int64_t i;
    uint64_t u;
    const uint8_t *p;
    uint32_t n;
    assert_int_equal(mc__mp_next(&c, &it), 0);
    assert_int_equal(it.type, MC_MP_ARRAY);
    assert_int_equal(it.n, 6);
    assert_int_equal(mc__mp_read_i64(&c, &i), 0);
    assert_true(i == INT64_MIN);
    assert_int_equal(mc__mp_read_i64(&c, &i), -1); /* UINT64_MAX is no int64 */
    assert_int_equal(mc__mp_read_u64(&c, &u), 0);
    assert_true(u == UINT64_MAX);
    assert_int_equal(mc__mp_read_str(&c, &p, &n), 0);
    assert_int_equal(n, 6);
    assert_memory_equal(p, "stored", 6);
    const uint8_t *map_at = c.pos;
    assert_int_equal(mc__mp_skip(&c, 4), 0);
    mc_cursor_t again = {map_at, c.end};
    assert_int_equal(mc__mp_skip(&again, 1), -1); /* the map holds an array: depth 2 */
    assert_int_equal(mc__mp_next(&c, &it), 0);
    assert_int_equal(it.type, MC_MP_FLOAT);
    assert_true(it.f == -2.25);
    assert_int_equal(mc__mp_next(&c, &it), 0);
    assert_int_equal(it.type, MC_MP_NIL);
    assert_int_equal(mc__mp_next(&c, &it), -1); /* end */
    mc__buf_free(&b);
}

static void test_refuses(void **state) {
    (void)state;
    static const uint8_t reserved[] = {0xc1};
    static const uint8_t short_str[] = {0xa5, 'a', 'b'};
    static const uint8_t short_u32[] = {0xce, 0, 1};
    static const uint8_t huge_array[] = {0xdd, 0xff, 0xff, 0xff, 0xff, 1, 2};
    static const uint8_t huge_map[] = {0x83, 1, 2, 3, 4};
    const uint8_t *cases[] = {reserved, short_str, short_u32, huge_array, huge_map};
    size_t lens[] = {sizeof(reserved), sizeof(short_str), sizeof(short_u32), sizeof(huge_array),
                     sizeof(huge_map)};
    for (size_t k = 0; k < 5; k++) {
        mc_cursor_t c = {cases[k], cases[k] + lens[k]};
        mc_mp_item_t it;
        assert_int_equal(mc__mp_next(&c, &it), -1);
        assert_ptr_equal(c.pos, cases[k]); /* a refusal consumes nothing */
    }
    /* ext and float32 forms decode */
    static const uint8_t ext[] = {0xd4, 0x05, 0x99, 0xca, 0x3f, 0xc0, 0x00, 0x00};
    mc_cursor_t c = {ext, ext + sizeof(ext)};
    mc_mp_item_t it;
    assert_int_equal(mc__mp_next(&c, &it), 0);
    assert_int_equal(it.type, MC_MP_EXT);
    assert_int_equal(it.ext_type, 5);
    assert_int_equal(it.n, 1);
    assert_int_equal(mc__mp_next(&c, &it), 0);
    assert_true(it.f == 1.5);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encode_forms),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_refuses),
    };
    return cmocka_run_group_tests_name("common_msgpack", tests, NULL, NULL);
}
