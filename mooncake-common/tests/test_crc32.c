/* CRC-32: the check value, zlib's results (Python's zlib.crc32 reads the disk tier's records),
 * and the sliced loop against the bytewise definition at every alignment and length around its
 * 8-byte steps, also when continued from an earlier CRC. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "mooncake/common/crc32.h"

static uint32_t bytewise(uint32_t crc, const uint8_t *p, size_t n) {
    crc = ~crc;
    while (n--) {
        crc ^= *p++;
        for (int k = 0; k < 8; k++)
            crc = (crc & 1u) ? 0xEDB88320u ^ (crc >> 1) : crc >> 1;
    }
    return ~crc;
}

static void test_known_values(void **state) {
    (void)state;
    assert_int_equal(mc__crc32(0, "123456789", 9), 0xCBF43926u);
    assert_int_equal(mc__crc32(0, "", 0), 0);
    assert_int_equal(mc__crc32(0, "a", 1), 0xE8B7BE43u);
    /* zlib.crc32(b"The quick brown fox jumps over the lazy dog") */
    assert_int_equal(mc__crc32(0, "The quick brown fox jumps over the lazy dog", 43), 0x414FA339u);
    /* continued: crc32(b"world", crc32(b"hello ")) == crc32(b"hello world") */
    assert_int_equal(mc__crc32(mc__crc32(0, "hello ", 6), "world", 5),
                     mc__crc32(0, "hello world", 11));
}

static void test_matches_bytewise(void **state) {
    static uint8_t buf[4096 + 16];
    uint32_t x = 12345;
    (void)state;
    for (size_t i = 0; i < sizeof(buf); i++) {
        x = x * 1103515245u + 12345u;
        buf[i] = (uint8_t)(x >> 16);
    }
    /* Below and above the length where the folding path (x86-64 with PCLMULQDQ) starts, at
     * every alignment, every tail length after its 16-byte blocks. */
    for (size_t off = 0; off < 16; off++)
        for (size_t len = 0; len < 80; len++)
            assert_int_equal(mc__crc32(0xDEADBEEFu, buf + off, len),
                             bytewise(0xDEADBEEFu, buf + off, len));
    for (size_t off = 0; off < 16; off += 3)
        for (size_t len = 240; len < 600; len++)
            assert_int_equal(mc__crc32(0xDEADBEEFu, buf + off, len),
                             bytewise(0xDEADBEEFu, buf + off, len));
    assert_int_equal(mc__crc32(0, buf + 3, 4096), bytewise(0, buf + 3, 4096));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_values),
        cmocka_unit_test(test_matches_bytewise),
    };
    return cmocka_run_group_tests_name("common_crc32", tests, NULL, NULL);
}
