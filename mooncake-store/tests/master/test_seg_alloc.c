/* Segment allocator: exact fill, alignment, no overlap, coalescing, fragmentation under churn. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "master/seg_alloc.h"
#include "mooncake/common/alloc.h"
#include "mooncake/error.h"

static void test_exact_fill(void **state) {
    mc__seg_alloc_t a;
    uint64_t off = 0;
    uint32_t h[10];
    (void)state;
    assert_int_equal(mc__seg_alloc_init(&a, 10 * 4096), 0);
    for (int i = 0; i < 10; i++) {
        h[i] = mc__seg_alloc(&a, 4096, &off);
        assert_int_not_equal(h[i], MC_SEG_NIL);
        assert_int_equal(off, (uint64_t)i * 4096);
    }
    assert_int_equal(a.used_bytes, 10 * 4096);
    assert_int_equal(mc__seg_alloc(&a, 1, &off), MC_SEG_NIL);
    /* Free in an order that needs both-side coalescing, then the whole range is one block. */
    for (int i = 0; i < 10; i += 2)
        mc__seg_free(&a, h[i]);
    for (int i = 1; i < 10; i += 2)
        mc__seg_free(&a, h[i]);
    assert_int_equal(a.used_bytes, 0);
    assert_int_equal(mc__seg_alloc_largest_free(&a), 10 * 4096);
    assert_int_not_equal(mc__seg_alloc(&a, 10 * 4096, &off), MC_SEG_NIL);
    assert_int_equal(off, 0);
    mc__seg_alloc_destroy(&a);
}

static void test_bad_sizes(void **state) {
    mc__seg_alloc_t a;
    uint64_t off = 0;
    (void)state;
    assert_int_equal(mc__seg_alloc_init(&a, 63), MC_ERR_INVALID_PARAMS);
    mc__seg_alloc_destroy(&a);
    assert_int_equal(mc__seg_alloc_init(&a, 1000), 0);
    assert_int_equal(a.total_bytes, 960);
    assert_int_equal(mc__seg_alloc(&a, 0, &off), MC_SEG_NIL);
    assert_int_equal(mc__seg_alloc(&a, 961, &off), MC_SEG_NIL);
    assert_int_equal(mc__seg_alloc(&a, UINT64_MAX, &off), MC_SEG_NIL);
    assert_int_not_equal(mc__seg_alloc(&a, 960, &off), MC_SEG_NIL);
    mc__seg_free(&a, 12345); /* unknown handle: ignored */
    mc__seg_alloc_destroy(&a);
}

/* Random churn of KV-block-like sizes: no overlaps, and after freeing everything the range is
 * whole again (no leaked fragments). */
static void test_churn(void **state) {
    enum { SLOTS = 2000 };
    const uint64_t total = 256ull << 20;
    mc__seg_alloc_t a;
    uint32_t h[SLOTS];
    uint64_t offs[SLOTS], lens[SLOTS];
    uint64_t seed = 42, failures = 0;
    (void)state;
    assert_int_equal(mc__seg_alloc_init(&a, total), 0);
    for (int i = 0; i < SLOTS; i++)
        h[i] = MC_SEG_NIL;
    for (int round = 0; round < 50000; round++) {
        int i;
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        i = (int)((seed >> 33) % SLOTS);
        if (h[i] != MC_SEG_NIL) {
            mc__seg_free(&a, h[i]);
            h[i] = MC_SEG_NIL;
            continue;
        }
        /* 16 KiB .. 512 KiB, typical KV cache block sizes, plus odd tails. */
        lens[i] = (16384ull << ((seed >> 20) % 6)) + ((seed >> 40) % 3) * 100;
        h[i] = mc__seg_alloc(&a, lens[i], &offs[i]);
        if (h[i] == MC_SEG_NIL) {
            failures++;
            continue;
        }
        assert_int_equal(offs[i] % MC_SEG_ALIGN, 0);
        assert_true(offs[i] + lens[i] <= total);
    }
    /* No overlaps among live blocks. */
    for (int i = 0; i < SLOTS; i++) {
        if (h[i] == MC_SEG_NIL)
            continue;
        for (int j = i + 1; j < SLOTS; j++) {
            if (h[j] == MC_SEG_NIL)
                continue;
            assert_true(offs[i] + lens[i] <= offs[j] || offs[j] + lens[j] <= offs[i]);
        }
    }
    /* 2000 slots x at most ~512 KiB average 170 KiB live ~ 170 MiB < 256 MiB: a low-fragmentation
     * allocator must not fail here. */
    assert_int_equal(failures, 0);
    for (int i = 0; i < SLOTS; i++)
        if (h[i] != MC_SEG_NIL)
            mc__seg_free(&a, h[i]);
    assert_int_equal(a.used_bytes, 0);
    assert_int_equal(a.n_allocs, 0);
    assert_int_equal(mc__seg_alloc_largest_free(&a), total);
    mc__seg_alloc_destroy(&a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_fill),
        cmocka_unit_test(test_bad_sizes),
        cmocka_unit_test(test_churn),
    };
    return cmocka_run_group_tests_name("store_master_alloc", tests, NULL, NULL);
}
