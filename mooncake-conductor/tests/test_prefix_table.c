/* The prefix table: longest leading run per source and per medium, removals and clears, contexts
 * kept apart, sources kept apart, and the bound forgetting the coldest blocks first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "kv_event_decode.h"
#include "mooncake/error.h"
#include "prefix_table.h"

static const mc_pt_match_t *of(const mc_pt_match_t *m, size_t n, int src) {
    for (size_t i = 0; i < n; i++)
        if ((int)m[i].source == src)
            return &m[i];
    return NULL;
}

static void test_prefixes(void **state) {
    (void)state;
    mc_prefix_table_t *t;
    mc_pt_match_t m[8];
    const uint64_t chain[] = {11, 12, 13, 14};
    assert_int_equal(mc__pt_new(0, &t), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc__pt_new(1000, &t), 0);
    int ctx = mc__pt_context(t, "default", "m", "", 16, "");
    int other = mc__pt_context(t, "default", "m", "lora-x", 16, "");
    assert_true(ctx >= 0 && other >= 0 && ctx != other);
    assert_int_equal(mc__pt_context(t, "default", "m", "", 16, ""), ctx);
    int a = mc__pt_source(t, "engine-a", 0), a1 = mc__pt_source(t, "engine-a", 1);
    int pool = mc__pt_source(t, "pool", 0);
    assert_true(a != a1 && a1 != pool);
    mc__pt_stored(t, ctx, a, MC_KV_MEDIUM_GPU, chain, 3);
    mc__pt_stored(t, ctx, pool, MC_KV_MEDIUM_CPU, chain, 2);
    mc__pt_stored(t, ctx, pool, MC_KV_MEDIUM_DISK, chain, 4);
    size_t n = mc__pt_query(t, ctx, chain, 4, m, 8);
    assert_int_equal(n, 2);
    assert_int_equal(m[0].source, pool); /* longest first */
    assert_int_equal(of(m, n, pool)->any, 4);
    assert_int_equal(of(m, n, pool)->medium[MC_KV_MEDIUM_CPU], 2);
    assert_int_equal(of(m, n, pool)->medium[MC_KV_MEDIUM_DISK], 4);
    assert_int_equal(of(m, n, a)->any, 3);
    assert_int_equal(of(m, n, a)->medium[MC_KV_MEDIUM_GPU], 3);
    assert_null(of(m, n, a1)); /* another DP rank holds nothing */
    /* the same hashes in another context are other blocks */
    assert_int_equal(mc__pt_query(t, other, chain, 4, m, 8), 0);
    /* a hole ends the run */
    mc__pt_removed(t, ctx, a, MC_KV_MEDIUM_GPU, &chain[1], 1);
    n = mc__pt_query(t, ctx, chain, 4, m, 8);
    assert_int_equal(of(m, n, a)->any, 1);
    /* removing one medium keeps the other */
    mc__pt_removed(t, ctx, pool, MC_KV_MEDIUM_CPU, chain, 2);
    n = mc__pt_query(t, ctx, chain, 4, m, 8);
    assert_int_equal(of(m, n, pool)->any, 4);
    assert_int_equal(of(m, n, pool)->medium[MC_KV_MEDIUM_CPU], 0);
    /* a cleared source holds nothing; blocks nobody holds are gone */
    mc__pt_clear_source(t, pool);
    n = mc__pt_query(t, ctx, chain, 4, m, 8);
    assert_int_equal(n, 1);
    mc_pt_stats_t st;
    mc__pt_stats(t, &st);
    assert_int_equal(st.blocks, 2); /* 11 and 13, engine-a's */
    /* unknown ids are ignored */
    mc__pt_stored(t, -1, a, 1, chain, 1);
    mc__pt_stored(t, ctx, a, 9, chain, 1);
    mc__pt_free(t);
}

static void test_bound(void **state) {
    (void)state;
    mc_prefix_table_t *t;
    mc_pt_match_t m[4];
    uint64_t h[6] = {1, 2, 3, 4, 5, 6};
    assert_int_equal(mc__pt_new(4, &t), 0);
    int ctx = mc__pt_context(t, NULL, "m", NULL, 16, NULL);
    int s = mc__pt_source(t, "e", 0);
    mc__pt_stored(t, ctx, s, MC_KV_MEDIUM_GPU, h, 6);
    mc_pt_stats_t st;
    mc__pt_stats(t, &st);
    assert_int_equal(st.blocks, 4);
    assert_int_equal(st.evicted, 2);
    /* the coldest (1, 2) went: a query from the start finds nothing, from 3 finds four */
    assert_int_equal(mc__pt_query(t, ctx, h, 6, m, 4), 0);
    assert_int_equal(mc__pt_query(t, ctx, h + 2, 4, m, 4), 1);
    assert_int_equal(m[0].any, 4);
    mc__pt_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prefixes),
        cmocka_unit_test(test_bound),
    };
    return cmocka_run_group_tests_name("conductor_prefix_table", tests, NULL, NULL);
}
