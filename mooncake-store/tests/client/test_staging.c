/* The staging allocator: exact blocks, coalescing, waiting for space, no leaks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client/staging.h"
#include "mooncake/common/alloc.h"

#define REGION (1u << 20)

static void test_alloc_free_coalesce(void **state) {
    static uint8_t region[REGION] __attribute__((aligned(64)));
    mc__staging_t st;
    void *blocks[16];
    int64_t live = mc__alloc_live_bytes();
    assert_int_equal(mc__staging_init(&st, region, REGION), 0);
    for (int i = 0; i < 16; i++) {
        blocks[i] = mc__staging_try_alloc(&st, REGION / 16);
        assert_non_null(blocks[i]);
        assert_int_equal(((uintptr_t)blocks[i]) % 64, 0);
        memset(blocks[i], i, REGION / 16); /* inside the region: ASan would object otherwise */
    }
    assert_null(mc__staging_try_alloc(&st, 1));
    /* free every other block: 8 holes of 64 KiB, none large enough for 128 KiB */
    for (int i = 0; i < 16; i += 2)
        mc__staging_free(&st, blocks[i], REGION / 16);
    assert_null(mc__staging_try_alloc(&st, 2 * (REGION / 16)));
    for (int i = 1; i < 16; i += 2)
        mc__staging_free(&st, blocks[i], REGION / 16);
    /* everything coalesced back into one extent */
    void *all = mc__staging_try_alloc(&st, REGION);
    assert_ptr_equal(all, region);
    mc__staging_free(&st, all, REGION);
    assert_null(mc__staging_try_alloc(&st, REGION + 1));
    size_t got = 0;
    void *p = mc__staging_alloc_range(&st, 4096, 4 * REGION, 10, &got);
    assert_non_null(p);
    assert_int_equal(got, REGION);
    /* full: a bounded wait, then NULL */
    assert_null(mc__staging_alloc_range(&st, 4096, 8192, 20, &got));
    mc__staging_free(&st, p, REGION);
    mc__staging_fini(&st);
    assert_int_equal(mc__alloc_live_bytes(), live);
}

static void test_random_churn(void **state) {
    static uint8_t region[REGION] __attribute__((aligned(64)));
    mc__staging_t st;
    struct {
        void *p;
        size_t n;
    } live[64] = {{0}};
    srand(7);
    assert_int_equal(mc__staging_init(&st, region, REGION), 0);
    for (int iter = 0; iter < 20000; iter++) {
        int i = rand() % 64;
        if (live[i].p) {
            mc__staging_free(&st, live[i].p, live[i].n);
            live[i].p = NULL;
        } else {
            size_t n = 1 + (size_t)(rand() % 40000);
            live[i].p = mc__staging_try_alloc(&st, n);
            live[i].n = n;
            if (live[i].p) {
                /* no two live blocks overlap */
                for (int j = 0; j < 64; j++) {
                    if (j == i || !live[j].p)
                        continue;
                    uintptr_t a = (uintptr_t)live[i].p, b = (uintptr_t)live[j].p;
                    assert_true(a + n <= b || b + live[j].n <= a);
                }
            }
        }
    }
    for (int i = 0; i < 64; i++)
        if (live[i].p)
            mc__staging_free(&st, live[i].p, live[i].n);
    assert_ptr_equal(mc__staging_try_alloc(&st, REGION), region);
    mc__staging_fini(&st);
}

static void test_no_region(void **state) {
    mc__staging_t st;
    size_t got;
    assert_int_equal(mc__staging_init(&st, NULL, 0), 0);
    assert_null(mc__staging_try_alloc(&st, 1));
    assert_null(mc__staging_alloc_range(&st, 1, 1, 10, &got));
    mc__staging_fini(&st);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc_free_coalesce),
        cmocka_unit_test(test_random_churn),
        cmocka_unit_test(test_no_region),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
