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

/* The rebuild a restart does: ranges taken in offset order leave exactly the gaps free, the
 * allocator then behaves as one built by allocations (frees coalesce, gaps are found), and
 * unsorted or overlapping input is refused. */
static void test_take_sorted(void **state) {
    mc__seg_alloc_t a;
    uint32_t tail = 0, h[4];
    uint64_t offs[4] = {0, 4096, 64 * 1024, 100 * 1024}, lens[4] = {4096, 100, 8192, 4096};
    uint64_t off = 0;
    (void)state;
    assert_int_equal(mc__seg_alloc_init(&a, 128 * 1024), 0);
    for (int i = 0; i < 4; i++) {
        h[i] = mc__seg_alloc_take(&a, &tail, offs[i], lens[i]);
        assert_int_not_equal(h[i], MC_SEG_NIL);
        assert_int_equal(a.blocks[h[i]].off * MC_SEG_ALIGN, offs[i]);
    }
    assert_int_equal(h[0], 0); /* the block at offset 0 keeps handle 0 */
    assert_int_equal(a.used_bytes, 4096 + 128 + 8192 + 4096);
    assert_int_equal(a.n_allocs, 4);
    /* Out of order, overlapping, unaligned: refused, nothing changed. */
    assert_int_equal(mc__seg_alloc_take(&a, &tail, 64 * 1024, 64), MC_SEG_NIL);
    assert_int_equal(mc__seg_alloc_take(&a, &tail, 100 * 1024 + 64, 64), MC_SEG_NIL);
    assert_int_equal(mc__seg_alloc_take(&a, &tail, 110 * 1024 + 1, 64), MC_SEG_NIL);
    assert_int_equal(mc__seg_alloc_take(&a, &tail, 127 * 1024, 4096), MC_SEG_NIL);
    assert_int_equal(a.n_allocs, 4);
    /* Walking from handle 0 visits the blocks in offset order, used and free alternating. */
    {
        uint64_t expect = 0;
        for (uint32_t b = 0; b != MC_SEG_NIL; b = a.blocks[b].next_phys) {
            assert_int_equal(a.blocks[b].off, expect);
            expect += mc__seg_block_size(&a.blocks[b]);
        }
        assert_int_equal(expect * MC_SEG_ALIGN, 128 * 1024);
    }
    /* The gap between the 2nd and 3rd range (4096+128 .. 64 KiB) can be allocated. */
    assert_int_not_equal(mc__seg_alloc(&a, 32 * 1024, &off), MC_SEG_NIL);
    assert_true(off >= 4096 + 128 && off + 32 * 1024 <= 64 * 1024);
    /* Frees coalesce back to one block. */
    for (int i = 0; i < 4; i++)
        mc__seg_free(&a, h[i]);
    assert_int_equal(a.n_allocs, 1);
    mc__seg_alloc_destroy(&a);
    /* A range that ends the segment leaves no tail. */
    assert_int_equal(mc__seg_alloc_init(&a, 8192), 0);
    tail = 0;
    assert_int_not_equal(mc__seg_alloc_take(&a, &tail, 4096, 4096), MC_SEG_NIL);
    assert_int_equal(tail, MC_SEG_NIL);
    assert_int_equal(mc__seg_alloc_take(&a, &tail, 8192, 64), MC_SEG_NIL);
    assert_int_equal(mc__seg_alloc_largest_free(&a), 4096);
    mc__seg_alloc_destroy(&a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_fill),
        cmocka_unit_test(test_bad_sizes),
        cmocka_unit_test(test_churn),
        cmocka_unit_test(test_take_sorted),
    };
    return cmocka_run_group_tests_name("store_master_alloc", tests, NULL, NULL);
}
