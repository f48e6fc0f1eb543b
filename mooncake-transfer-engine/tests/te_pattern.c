/* Data patterns shared by the test programs and te_target: position-dependent so misplaced or
 * shifted bytes change the checksum. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define XXH_INLINE_ALL /* header-only: no library to link */
#include <xxhash.h>

#include "te_test_util.h"

static uint8_t te_byte(size_t i, unsigned seed) {
    uint64_t x = (uint64_t)i * 0x9E3779B97F4A7C15ull + seed * 0xD6E8FEB86659FD93ull;
    return (uint8_t)(x >> 56);
}

void te_fill(void *p, size_t len, unsigned seed) {
    uint8_t *b = p;
    for (size_t i = 0; i < len; i++)
        b[i] = te_byte(i, seed);
}

uint64_t te_hash(const void *p, size_t len) {
    return XXH3_64bits(p, len);
}

/* Hash of bytes [offset, offset+len) of the pattern for seed. */
uint64_t te_pattern_hash(size_t len, unsigned seed, size_t offset) {
    uint8_t *tmp = malloc(len ? len : 1);
    uint64_t h;
    for (size_t i = 0; i < len; i++)
        tmp[i] = te_byte(offset + i, seed);
    h = te_hash(tmp, len);
    free(tmp);
    return h;
}

uint64_t te_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void te_ask_answer(uint8_t *out, size_t n, uint64_t payload_hash, uint64_t msg_hash) {
    uint8_t head[16];
    te_fill(out, n, (unsigned)msg_hash);
    memcpy(head, &payload_hash, 8);
    memcpy(head + 8, &msg_hash, 8);
    memcpy(out, head, n < 16 ? n : 16);
}
