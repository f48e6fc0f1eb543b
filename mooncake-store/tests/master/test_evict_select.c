/* The eviction threshold (evict.c's selection) against its definition computed by sorting: over
 * random candidate sets with repeated access times, zero-byte candidates and targets from 0 to
 * past the total, the selection answers what a sorted walk answers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "master/master_internal.h"

static int by_access(const void *a, const void *b) {
    uint64_t x = ((const mc__cand_t *)a)->access_ms, y = ((const mc__cand_t *)b)->access_ms;
    return x < y ? -1 : x > y;
}

/* The definition: walk the candidates oldest first until target bytes are passed. */
static uint64_t by_sorting(const mc__cand_t *v, size_t n, uint64_t target) {
    mc__cand_t *s = malloc((n ? n : 1) * sizeof(*s));
    uint64_t sum = 0, t = 0;
    memcpy(s, v, n * sizeof(*s));
    qsort(s, n, sizeof(*s), by_access);
    t = n ? s[n - 1].access_ms : 0;
    for (size_t i = 0; i < n; i++) {
        sum += s[i].bytes;
        if (sum >= target) {
            t = s[i].access_ms;
            break;
        }
    }
    free(s);
    return t;
}

static uint64_t next_rand(uint64_t *x) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static void test_matches_sorted_walk(void **state) {
    (void)state;
    uint64_t seed = 0x1234567u;
    for (int round = 0; round < 2000; round++) {
        size_t n = (size_t)(next_rand(&seed) % 200);
        uint64_t spread = 1 + next_rand(&seed) % (round % 3 ? 1000 : 4); /* many ties, or few */
        mc__cand_t *v = calloc(n ? n : 1, sizeof(*v));
        mc__cand_t *w = calloc(n ? n : 1, sizeof(*w));
        uint64_t total = 0;
        for (size_t i = 0; i < n; i++) {
            v[i].access_ms = next_rand(&seed) % spread;
            v[i].bytes = next_rand(&seed) % 5 == 0 ? 0 : 64 * (1 + next_rand(&seed) % 100);
            total += v[i].bytes;
        }
        uint64_t targets[] = {0,
                              1,
                              total / 3,
                              total / 2,
                              total ? total - 1 : 0,
                              total,
                              total + 1,
                              next_rand(&seed) % (total + 2)};
        for (size_t k = 0; k < sizeof(targets) / sizeof(targets[0]); k++) {
            memcpy(w, v, n * sizeof(*w));
            assert_int_equal(mc__evict_threshold(w, n, targets[k]), by_sorting(v, n, targets[k]));
        }
        free(v);
        free(w);
    }
}

/* A million candidates, all distinct and in reverse order (a sort's worst input for a naive
 * pivot): the answer for 5% of the bytes is the 5% oldest's access time. */
static void test_large_reverse(void **state) {
    (void)state;
    size_t n = 1000000;
    mc__cand_t *v = malloc(n * sizeof(*v));
    for (size_t i = 0; i < n; i++) {
        v[i].access_ms = (uint64_t)(n - i);
        v[i].bytes = 64;
    }
    assert_int_equal(mc__evict_threshold(v, n, 64u * 50000u), 50000u);
    free(v);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_sorted_walk),
        cmocka_unit_test(test_large_reverse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
