/* The HA metadata log in etcd (persist_etcd.h) against a real etcd on loopback: what is appended
 * and installed reads back in order (a large group commit split at record boundaries, entries
 * after a snapshot); a writer whose term is no longer the master view's is refused by etcd
 * itself (fencing, whatever the writer believes); one that no longer leads gives up while etcd
 * is away; entries after a missing one (commits in flight beside a failed one, never
 * acknowledged) are dropped at open, never replayed across the hole.
 * Exits 77 (skipped) when no etcd binary is installed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "etcd_harness.h"
#include "master/persist.h"
#include "master/persist_etcd.h"
#include "mooncake/common/etcd.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"
#include "proto/master_view.h"

static th_etcd_t g_etcd;
static char g_ep[64];
static _Atomic int g_leading = 1;

static int leads(void *ctx, int64_t term) {
    (void)ctx;
    (void)term;
    return atomic_load(&g_leading);
}

/* Creates the cluster's view key as a leader would; its create_revision is the term. */
static int64_t make_view(const char *cluster) {
    char key[MC_MASTER_VIEW_KEY_MAX];
    int kl = mc__master_view_key(cluster, key, sizeof(key));
    mc_etcd_t *c = NULL;
    mc_etcd_kv_t kv;
    int64_t term;
    assert_true(kl > 0);
    assert_int_equal(mc__etcd_open(g_ep, 3000, &c), 0);
    (void)mc__etcd_delete(c, key, (size_t)kl, NULL, 0, NULL);
    assert_int_equal(mc__etcd_put(c, key, (size_t)kl, "127.0.0.1:1", 11, 0, NULL), 0);
    assert_int_equal(mc__etcd_get(c, key, (size_t)kl, &kv), 0);
    term = kv.create_revision;
    mc__etcd_kv_free(&kv);
    mc__etcd_close(c);
    return term;
}

/* n records of about size bytes each, tagged with first.. */
static void records(mc_buf_t *b, int first, int n, size_t size) {
    for (int i = first; i < first + n; i++) {
        size_t at;
        mc__persist_record_begin(b, &at);
        mc__buf_u32(b, (uint32_t)i);
        for (size_t j = 4; j < size; j++)
            mc__buf_u8(b, (uint8_t)(i * 31 + j));
        mc__persist_record_end(b, at);
    }
}

static mc__elog_t *open_log(const char *cluster, int64_t term, mc_buf_t *loaded, int *rc) {
    mc__elog_opts_t o = {
        .endpoints = g_ep, .cluster_id = cluster, .term = term, .is_leader = leads, .ctx = NULL};
    mc__elog_t *l = NULL;
    char err[256] = "";
    mc__buf_init(loaded);
    *rc = mc__elog_open(&o, &l, loaded, err, sizeof(err));
    if (*rc)
        fprintf(stderr, "open: %s\n", err);
    return l;
}

static void test_append_install_reload(void **state) {
    mc_buf_t snap, more, big, loaded, want;
    int64_t term = make_view("log-a");
    int rc;
    mc__elog_t *l;
    (void)state;
    atomic_store(&g_leading, 1);
    l = open_log("log-a", term, &loaded, &rc);
    assert_int_equal(rc, 0);
    assert_int_equal(loaded.len, 8); /* a new cluster: the magic alone */
    assert_memory_equal(loaded.data, MC__LOG_MAGIC, 8);
    mc__buf_free(&loaded);
    mc__buf_init(&snap);
    mc__buf_init(&more);
    mc__buf_init(&big);
    records(&snap, 0, 100, 200);
    assert_int_equal(mc__elog_install(l, snap.data, snap.len, mc__elog_mark(l)), 0);
    records(&more, 100, 10, 64);
    assert_int_equal(mc__elog_append(l, more.data, more.len), 0);
    /* one group commit of 1.5 MiB: several entries, each of whole records */
    records(&big, 110, 300, 5000);
    assert_int_equal(mc__elog_append(l, big.data, big.len), 0);
    assert_int_equal(mc__elog_appended(l), more.len + big.len);
    mc__elog_close(l);

    l = open_log("log-a", term, &loaded, &rc);
    assert_int_equal(rc, 0);
    mc__buf_init(&want);
    mc__buf_put(&want, MC__LOG_MAGIC, 8);
    mc__buf_put(&want, snap.data, snap.len);
    mc__buf_put(&want, more.data, more.len);
    mc__buf_put(&want, big.data, big.len);
    assert_int_equal(loaded.len, want.len);
    assert_memory_equal(loaded.data, want.data, want.len);
    /* a new snapshot replaces the old one and the entries before its mark */
    mc__buf_free(&loaded);
    assert_int_equal(mc__elog_install(l, more.data, more.len, mc__elog_mark(l)), 0);
    assert_int_equal(mc__elog_append(l, snap.data, snap.len), 0);
    mc__elog_close(l);
    l = open_log("log-a", term, &loaded, &rc);
    assert_int_equal(rc, 0);
    mc__buf_reset(&want);
    mc__buf_put(&want, MC__LOG_MAGIC, 8);
    mc__buf_put(&want, more.data, more.len);
    mc__buf_put(&want, snap.data, snap.len);
    assert_int_equal(loaded.len, want.len);
    assert_memory_equal(loaded.data, want.data, want.len);
    mc__elog_close(l);
    mc__buf_free(&loaded);
    mc__buf_free(&want);
    mc__buf_free(&snap);
    mc__buf_free(&more);
    mc__buf_free(&big);
}

static void test_a_newer_term_fences_the_old_writer(void **state) {
    mc_buf_t rec, loaded;
    int64_t term = make_view("log-b"), newer;
    int rc;
    mc__elog_t *old, *cur;
    (void)state;
    atomic_store(&g_leading, 1); /* the old writer still believes it leads */
    old = open_log("log-b", term, &loaded, &rc);
    assert_int_equal(rc, 0);
    mc__buf_free(&loaded);
    mc__buf_init(&rec);
    records(&rec, 0, 3, 100);
    assert_int_equal(mc__elog_append(old, rec.data, rec.len), 0);
    newer = make_view("log-b"); /* a new leader was elected meanwhile */
    assert_true(newer > term);
    assert_int_equal(mc__elog_append(old, rec.data, rec.len), -1);
    assert_int_equal(mc__elog_install(old, rec.data, rec.len, mc__elog_mark(old)), -1);
    /* the new leader reads exactly what the old one got recorded */
    cur = open_log("log-b", newer, &loaded, &rc);
    assert_int_equal(rc, 0);
    assert_int_equal(loaded.len, 8 + rec.len);
    assert_memory_equal(loaded.data + 8, rec.data, rec.len);
    assert_int_equal(mc__elog_append(cur, rec.data, rec.len), 0);
    mc__buf_free(&loaded);
    mc__elog_close(cur);
    mc__elog_close(old);
    mc__buf_free(&rec);
}

static void test_a_writer_that_stops_leading_gives_up(void **state) {
    mc_buf_t rec, loaded;
    int64_t term = make_view("log-c");
    int rc;
    mc__elog_t *l;
    (void)state;
    atomic_store(&g_leading, 1);
    l = open_log("log-c", term, &loaded, &rc);
    assert_int_equal(rc, 0);
    mc__buf_free(&loaded);
    mc__buf_init(&rec);
    records(&rec, 0, 2, 100);
    atomic_store(&g_leading, 0);
    assert_int_equal(mc__elog_append(l, rec.data, rec.len), -1);
    atomic_store(&g_leading, 1);
    /* not a record: refused before anything is sent */
    assert_int_equal(mc__elog_append(l, (const uint8_t *)"\xff\xff\x00\x00garbage", 11), -1);
    mc__elog_close(l);
    mc__buf_free(&rec);
}

/* Commits in flight at once are acknowledged in order: when one never landed, the ones after it
 * (written beside it) were never acknowledged. The next open drops them and writes its own. */
static void test_entries_after_a_missing_one_are_dropped(void **state) {
    mc_buf_t rec, later, loaded, want;
    int64_t term = make_view("log-d");
    int rc;
    uint64_t seq;
    mc__elog_t *l;
    (void)state;
    atomic_store(&g_leading, 1);
    l = open_log("log-d", term, &loaded, &rc);
    assert_int_equal(rc, 0);
    mc__buf_free(&loaded);
    mc__buf_init(&rec);
    mc__buf_init(&later);
    records(&rec, 0, 1, 100);
    records(&later, 1, 2, 100);
    assert_int_equal(mc__elog_append(l, rec.data, rec.len), 0);
    /* two commits reserved in order; only the second one lands */
    seq = mc__elog_reserve(l, 1);
    assert_int_equal(mc__elog_reserve(l, 1), seq + 1);
    assert_int_equal(mc__elog_write(l, seq + 1, later.data, later.len), 0);
    mc__elog_close(l);
    l = open_log("log-d", term, &loaded, &rc);
    assert_int_equal(rc, 0);
    assert_int_equal(loaded.len, 8 + rec.len);
    assert_memory_equal(loaded.data + 8, rec.data, rec.len);
    mc__buf_free(&loaded);
    /* the dropped entry's number is free again: this writer's next commit takes it */
    assert_int_equal(mc__elog_append(l, later.data, later.len), 0);
    mc__elog_close(l);
    l = open_log("log-d", term, &loaded, &rc);
    assert_int_equal(rc, 0);
    mc__buf_init(&want);
    mc__buf_put(&want, MC__LOG_MAGIC, 8);
    mc__buf_put(&want, rec.data, rec.len);
    mc__buf_put(&want, later.data, later.len);
    assert_int_equal(loaded.len, want.len);
    assert_memory_equal(loaded.data, want.data, want.len);
    assert_int_equal(mc__elog_entries(later.data, later.len), 1);
    assert_int_equal(mc__elog_entries((const uint8_t *)"\x05\0\0\0abcd", 8), 0);
    mc__elog_close(l);
    mc__buf_free(&loaded);
    mc__buf_free(&want);
    mc__buf_free(&rec);
    mc__buf_free(&later);
}

static void test_bad_options(void **state) {
    mc_buf_t loaded;
    int rc;
    (void)state;
    assert_null(open_log("", 5, &loaded, &rc));
    assert_int_equal(rc, MC_ERR_INVALID_PARAMS);
    mc__buf_free(&loaded);
    assert_null(open_log("x", 0, &loaded, &rc));
    assert_int_equal(rc, MC_ERR_INVALID_PARAMS);
    mc__buf_free(&loaded);
}

static int setup_one(void **state) {
    (void)state;
    if (th_etcd_cluster(&g_etcd, 1))
        return -1;
    snprintf(g_ep, sizeof(g_ep), "127.0.0.1:%u", (unsigned)g_etcd.client_port);
    return 0;
}

static int teardown_one(void **state) {
    (void)state;
    th_etcd_kill(&g_etcd);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_append_install_reload),
        cmocka_unit_test(test_a_newer_term_fences_the_old_writer),
        cmocka_unit_test(test_a_writer_that_stops_leading_gives_up),
        cmocka_unit_test(test_entries_after_a_missing_one_are_dropped),
        cmocka_unit_test(test_bad_options),
    };
    if (!th_etcd_available()) {
        fprintf(stderr, "no etcd binary (install etcd-server or set MC_ETCD_BIN): skipped\n");
        return 77;
    }
    return cmocka_run_group_tests_name("ha_log", tests, setup_one, teardown_one);
}
