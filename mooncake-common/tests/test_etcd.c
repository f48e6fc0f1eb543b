/* The etcd client against a real etcd started here on loopback: every call, lease expiry, watch
 * events, endpoint failover, deadlines on a stalled endpoint, and answers from a fake server that
 * is not etcd. Exits 77 (skipped) when no etcd binary is installed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "etcd_harness.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/etcd.h"
#include "mooncake/common/http.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"

static th_etcd_t g_etcd;
static char g_ep[64];

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

static mc_etcd_t *client(const char *eps, int timeout_ms) {
    mc_etcd_t *c = NULL;
    assert_int_equal(mc__etcd_open(eps, timeout_ms, &c), 0);
    return c;
}

static void test_open_bad_endpoints(void **state) {
    static const char *const bad[] = {"",           " , ;",       "ftp://127.0.0.1:2379",
                                      "a:b:c",      "h:99999",    "127.0.0.1:2379/v3",
                                      "unix://x:1", "etcd://h:1", "h:1:2",
                                      "::1:2379"};
    char many[1024] = "";
    mc_etcd_t *c = NULL;
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(mc__etcd_open(bad[i], 0, &c), MC_ERR_INVALID_ARGUMENT);
        assert_null(c);
    }
    assert_int_equal(mc__etcd_open(NULL, 0, &c), MC_ERR_INVALID_ARGUMENT);
    for (int i = 0; i <= MC_ETCD_MAX_ENDPOINTS; i++)
        strcat(many, "h:1,");
    assert_int_equal(mc__etcd_open(many, 0, &c), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc__etcd_open("http://127.0.0.1:2379/; h2 ,[::1]:2380", 0, &c), 0);
    assert_int_equal(mc__etcd_endpoint_count(c), 3);
    assert_int_equal(mc__etcd_timeout(c), MC_ETCD_DEFAULT_TIMEOUT_MS);
    mc__etcd_close(c);
    /* https:// (libcurl, from install-deps): certificate files are checked at open */
    assert_int_equal(mc__etcd_open("https://127.0.0.1:2379,http://h:1", 0, &c), 0);
    mc__etcd_close(c);
    setenv("MC_ETCD_CERT", "/dev/null", 1); /* a certificate without its key */
    assert_int_equal(mc__etcd_open("https://127.0.0.1:2379", 0, &c), MC_ERR_INVALID_ARGUMENT);
    assert_null(c);
    unsetenv("MC_ETCD_CERT");
    setenv("MC_ETCD_CACERT", "/nonexistent/ca.crt", 1);
    assert_int_equal(mc__etcd_open("https://127.0.0.1:2379", 0, &c), MC_ERR_INVALID_ARGUMENT);
    unsetenv("MC_ETCD_CACERT");
}

static void test_put_get_range_delete(void **state) {
    mc_etcd_t *c = client(g_ep, 3000);
    mc_etcd_kv_t kv;
    mc_etcd_kvs_t r;
    int64_t rev = 0, rev2 = 0, del = 0;
    char key[32], val[32];
    uint8_t end[16];
    static const uint8_t bin_key[] = {'b', 0, 0xff, 1};
    static const uint8_t bin_val[] = {0, 1, 2, 0xfe, 0xff};
    (void)state;
    assert_int_equal(mc__etcd_put(c, "t/a", 3, "1", 1, 0, &rev), 0);
    assert_true(rev > 0);
    assert_int_equal(mc__etcd_put(c, "t/a", 3, "2", 1, 0, &rev2), 0);
    assert_true(rev2 > rev);
    assert_int_equal(mc__etcd_get(c, "t/a", 3, &kv), 0);
    assert_string_equal((char *)kv.value, "2");
    assert_int_equal(kv.version, 2);
    assert_int_equal(kv.mod_revision, rev2);
    assert_int_equal(kv.create_revision, rev);
    mc__etcd_kv_free(&kv);
    assert_int_equal(mc__etcd_get(c, "t/none", 6, &kv), MC_ERR_ETCD_KEY_NOT_EXIST);
    /* binary keys and values, an empty value */
    assert_int_equal(mc__etcd_put(c, bin_key, sizeof(bin_key), bin_val, sizeof(bin_val), 0, NULL),
                     0);
    assert_int_equal(mc__etcd_get(c, bin_key, sizeof(bin_key), &kv), 0);
    assert_int_equal(kv.value_len, sizeof(bin_val));
    assert_memory_equal(kv.value, bin_val, sizeof(bin_val));
    mc__etcd_kv_free(&kv);
    assert_int_equal(mc__etcd_put(c, "t/empty", 7, NULL, 0, 0, NULL), 0);
    assert_int_equal(mc__etcd_get(c, "t/empty", 7, &kv), 0);
    assert_int_equal(kv.value_len, 0);
    mc__etcd_kv_free(&kv);

    /* 25 keys under a prefix, read in pages of 7 */
    for (int i = 0; i < 25; i++) {
        snprintf(key, sizeof(key), "p/k%02d", i);
        snprintf(val, sizeof(val), "v%d", i);
        assert_int_equal(mc__etcd_put(c, key, strlen(key), val, strlen(val), 0, NULL), 0);
    }
    assert_int_equal(mc__etcd_put(c, "p0", 2, "outside", 7, 0, NULL), 0);
    assert_int_equal(mc__etcd_range_prefix(c, "p/", 2, 7, &r), 0);
    assert_int_equal(r.n, 25);
    assert_int_equal(r.count, 25);
    for (int i = 0; i < 25; i++) {
        snprintf(key, sizeof(key), "p/k%02d", i);
        snprintf(val, sizeof(val), "v%d", i);
        assert_string_equal((char *)r.kvs[i].key, key);
        assert_string_equal((char *)r.kvs[i].value, val);
    }
    mc__etcd_kvs_free(&r);
    /* one page: limit and more */
    size_t el = mc__etcd_prefix_end("p/", 2, end);
    assert_int_equal(mc__etcd_range(c, "p/", 2, end, el, 10, 0, &r), 0);
    assert_int_equal(r.n, 10);
    assert_true(r.more);
    assert_int_equal(r.count, 25);
    mc__etcd_kvs_free(&r);
    /* a range at an old revision still sees the old value */
    assert_int_equal(mc__etcd_range(c, "t/a", 3, NULL, 0, 0, rev, &r), 0);
    assert_int_equal(r.n, 1);
    assert_string_equal((char *)r.kvs[0].value, "1");
    mc__etcd_kvs_free(&r);

    assert_int_equal(mc__etcd_delete(c, "t/a", 3, NULL, 0, &del), 0);
    assert_int_equal(del, 1);
    assert_int_equal(mc__etcd_delete(c, "t/a", 3, NULL, 0, &del), 0);
    assert_int_equal(del, 0);
    assert_int_equal(mc__etcd_delete(c, "p/", 2, end, el, &del), 0);
    assert_int_equal(del, 25);
    assert_int_equal(mc__etcd_get(c, "p0", 2, &kv), 0); /* outside the prefix: kept */
    mc__etcd_kv_free(&kv);
    assert_int_equal(mc__etcd_range_prefix(c, "p/", 2, 0, &r), 0);
    assert_int_equal(r.n, 0);
    mc__etcd_kvs_free(&r);

    /* bad arguments fail before any I/O */
    assert_int_equal(mc__etcd_put(c, NULL, 0, "x", 1, 0, NULL), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc__etcd_range(c, "k", 1, NULL, 0, -1, 0, &r), MC_ERR_INVALID_ARGUMENT);
    /* etcd's own refusal: a put on a lease that does not exist */
    assert_int_equal(mc__etcd_put(c, "t/l", 3, "x", 1, 12345, NULL), MC_ERR_ETCD_KEY_NOT_EXIST);
    mc__etcd_close(c);
}

static void test_txn_both_branches(void **state) {
    mc_etcd_t *c = client(g_ep, 3000);
    mc_etcd_cmp_t absent = {
        .target = MC_ETCD_CMP_VERSION, .result = MC_ETCD_EQUAL, .key = "view", .key_len = 4};
    mc_etcd_op_t claim = {
        .type = MC_ETCD_OP_PUT, .key = "view", .key_len = 4, .value = "A", .value_len = 1};
    mc_etcd_op_t claim_b = {
        .type = MC_ETCD_OP_PUT, .key = "view", .key_len = 4, .value = "B", .value_len = 1};
    mc_etcd_op_t read = {.type = MC_ETCD_OP_RANGE, .key = "view", .key_len = 4};
    mc_etcd_op_t both[2] = {{.type = MC_ETCD_OP_DELETE, .key = "view", .key_len = 4},
                            {.type = MC_ETCD_OP_RANGE, .key = "view", .key_len = 4}};
    mc_etcd_cmp_t is_a = {.target = MC_ETCD_CMP_VALUE,
                          .result = MC_ETCD_EQUAL,
                          .key = "view",
                          .key_len = 4,
                          .value = "A",
                          .value_len = 1};
    mc_etcd_txn_result_t t;
    mc_etcd_kv_t kv;
    (void)state;
    mc__etcd_delete(c, "view", 4, NULL, 0, NULL);
    assert_int_equal(mc__etcd_txn(c, &absent, 1, &claim, 1, &read, 1, &t), 0);
    assert_true(t.succeeded);
    assert_int_equal(t.n, 1);
    mc__etcd_txn_result_free(&t);
    /* the second claimant loses and reads the winner */
    assert_int_equal(mc__etcd_txn(c, &absent, 1, &claim_b, 1, &read, 1, &t), 0);
    assert_false(t.succeeded);
    assert_int_equal(t.n, 1);
    assert_int_equal(t.ranges[0].n, 1);
    assert_string_equal((char *)t.ranges[0].kvs[0].value, "A");
    mc__etcd_txn_result_free(&t);
    assert_int_equal(mc__etcd_get(c, "view", 4, &kv), 0);
    assert_string_equal((char *)kv.value, "A");
    /* compare on the mod revision */
    mc_etcd_cmp_t mod = {.target = MC_ETCD_CMP_MOD,
                         .result = MC_ETCD_EQUAL,
                         .key = "view",
                         .key_len = 4,
                         .number = kv.mod_revision};
    mc__etcd_kv_free(&kv);
    assert_int_equal(mc__etcd_txn(c, &mod, 1, NULL, 0, NULL, 0, &t), 0);
    assert_true(t.succeeded);
    mc__etcd_txn_result_free(&t);
    /* value compare, several ops in the branch */
    assert_int_equal(mc__etcd_txn(c, &is_a, 1, both, 2, NULL, 0, &t), 0);
    assert_true(t.succeeded);
    assert_int_equal(t.n, 2);
    assert_int_equal(t.deleted[0], 1);
    assert_int_equal(t.ranges[1].n, 0);
    mc__etcd_txn_result_free(&t);
    assert_int_equal(mc__etcd_txn(c, &is_a, 1, both, 2, NULL, 0, NULL), 0);
    /* a txn etcd refuses (one key put twice) */
    mc_etcd_op_t twice[2] = {claim, claim_b};
    assert_int_equal(mc__etcd_txn(c, NULL, 0, twice, 2, NULL, 0, &t), MC_ERR_ETCD_OPERATION_ERROR);
    mc__etcd_close(c);
}

static _Atomic int g_lost;
static void on_lost(void *ctx, int64_t id, int err) {
    (void)ctx;
    (void)id;
    atomic_store(&g_lost, err);
}

static void test_leases(void **state) {
    mc_etcd_t *c = client(g_ep, 3000);
    mc_etcd_keeper_t *k = NULL;
    mc_etcd_kv_t kv;
    int64_t id = 0, ttl = 0, rem = 0, granted = 0;
    uint64_t t0;
    (void)state;
    assert_int_equal(mc__etcd_lease_grant(c, 1, &id, &ttl), 0);
    assert_true(id > 0);
    assert_int_equal(ttl, 1);
    assert_int_equal(mc__etcd_put(c, "lease/k", 7, "v", 1, id, NULL), 0);
    assert_int_equal(mc__etcd_get(c, "lease/k", 7, &kv), 0);
    assert_int_equal(kv.lease, id);
    mc__etcd_kv_free(&kv);
    assert_int_equal(mc__etcd_lease_keepalive(c, id, &ttl), 0);
    assert_int_equal(ttl, 1);
    /* kept alive for three TTLs: the key stays */
    assert_int_equal(mc__etcd_keeper_start(c, id, 1, on_lost, NULL, &k), 0);
    usleep(3000 * 1000);
    assert_true(mc__etcd_keeper_alive(k));
    assert_int_equal(mc__etcd_get(c, "lease/k", 7, &kv), 0);
    mc__etcd_kv_free(&kv);
    mc__etcd_keeper_stop(k);
    /* left alone it expires and takes the key with it */
    t0 = mc__now_ms();
    while (mc__etcd_get(c, "lease/k", 7, &kv) == 0) {
        mc__etcd_kv_free(&kv);
        assert_true(mc__now_ms() - t0 < 4000);
        usleep(100 * 1000);
    }
    assert_int_equal(mc__etcd_lease_keepalive(c, id, &ttl), MC_ERR_ETCD_KEY_NOT_EXIST);
    assert_int_equal(mc__etcd_lease_ttl(c, id, &rem, &granted), 0);
    assert_int_equal(rem, -1);

    /* revoke: keys go at once */
    id = 0;
    assert_int_equal(mc__etcd_lease_grant(c, 30, &id, NULL), 0);
    assert_int_equal(mc__etcd_lease_ttl(c, id, &rem, &granted), 0);
    assert_int_equal(granted, 30);
    assert_true(rem > 0 && rem <= 30);
    assert_int_equal(mc__etcd_put(c, "lease/r", 7, "v", 1, id, NULL), 0);
    assert_int_equal(mc__etcd_keeper_start(c, id, 30, on_lost, NULL, &k), 0);
    assert_int_equal(mc__etcd_lease_revoke(c, id), 0);
    assert_int_equal(mc__etcd_get(c, "lease/r", 7, &kv), MC_ERR_ETCD_KEY_NOT_EXIST);
    assert_int_equal(mc__etcd_lease_revoke(c, id), MC_ERR_ETCD_KEY_NOT_EXIST);
    mc__etcd_keeper_stop(k); /* it had not noticed yet: stop is fine either way */

    /* the keeper notices a lease revoked behind its back */
    id = 0;
    atomic_store(&g_lost, 0);
    assert_int_equal(mc__etcd_lease_grant(c, 1, &id, NULL), 0);
    assert_int_equal(mc__etcd_keeper_start(c, id, 1, on_lost, NULL, &k), 0);
    assert_int_equal(mc__etcd_lease_revoke(c, id), 0);
    t0 = mc__now_ms();
    while (!atomic_load(&g_lost) && mc__now_ms() - t0 < 3000)
        usleep(20 * 1000);
    assert_int_equal(atomic_load(&g_lost), MC_ERR_ETCD_KEY_NOT_EXIST);
    assert_false(mc__etcd_keeper_alive(k));
    mc__etcd_keeper_stop(k);
    /* a keeper whose endpoints all died: lost once a whole TTL went by without a refresh */
    {
        char dead[32];
        mc_etcd_t *gone;
        id = 0;
        atomic_store(&g_lost, 0);
        assert_int_equal(mc__etcd_lease_grant(c, 1, &id, NULL), 0);
        snprintf(dead, sizeof(dead), "127.0.0.1:%u", (unsigned)th_free_port());
        gone = client(dead, 500);
        assert_int_equal(mc__etcd_keeper_start(gone, id, 1, on_lost, NULL, &k), 0);
        t0 = mc__now_ms();
        while (!atomic_load(&g_lost) && mc__now_ms() - t0 < 4000)
            usleep(20 * 1000);
        assert_int_equal(atomic_load(&g_lost), MC_ERR_ETCD_CTX_CANCELLED);
        assert_true(mc__now_ms() - t0 >= 900);
        mc__etcd_keeper_stop(k);
        mc__etcd_close(gone);
    }
    /* a chosen lease id */
    id = 4242;
    assert_int_equal(mc__etcd_lease_grant(c, 5, &id, NULL), 0);
    assert_int_equal(id, 4242);
    assert_int_equal(mc__etcd_lease_grant(c, 5, &id, NULL), MC_ERR_ETCD_OPERATION_ERROR);
    assert_int_equal(mc__etcd_lease_revoke(c, id), 0);
    assert_int_equal(mc__etcd_lease_grant(c, 0, &id, NULL), MC_ERR_INVALID_ARGUMENT);
    mc__etcd_close(c);
}

/* --- watch --- */
typedef struct seen {
    pthread_mutex_t lock;
    char log[64][48];
    int n;
    int err;
    int64_t last_rev;
} seen_t;

static void on_events(void *ctx, const mc_etcd_event_t *ev, size_t n, int64_t rev, int err) {
    seen_t *s = ctx;
    pthread_mutex_lock(&s->lock);
    if (err)
        s->err = err;
    for (size_t i = 0; i < n && s->n < 64; i++) {
        snprintf(s->log[s->n++], sizeof(s->log[0]), "%s %s=%s",
                 ev[i].type == MC_ETCD_EVENT_PUT ? "PUT" : "DEL", (const char *)ev[i].kv.key,
                 (const char *)ev[i].kv.value);
        s->last_rev = ev[i].kv.mod_revision;
    }
    (void)rev;
    pthread_mutex_unlock(&s->lock);
}

static int wait_events(seen_t *s, int n, int ms) {
    uint64_t t0 = mc__now_ms();
    for (;;) {
        pthread_mutex_lock(&s->lock);
        int got = s->n;
        pthread_mutex_unlock(&s->lock);
        if (got >= n)
            return got;
        if (mc__now_ms() - t0 > (uint64_t)ms)
            return got;
        usleep(10 * 1000);
    }
}

static void test_watch(void **state) {
    mc_etcd_t *c = client(g_ep, 3000);
    mc_etcd_watch_t *w = NULL, *w2 = NULL;
    seen_t s = {.lock = PTHREAD_MUTEX_INITIALIZER}, h = {.lock = PTHREAD_MUTEX_INITIALIZER};
    uint8_t end[8];
    size_t el = mc__etcd_prefix_end("w/", 2, end);
    int64_t rev0 = 0;
    (void)state;
    assert_int_equal(mc__etcd_put(c, "w/before", 8, "0", 1, 0, &rev0), 0);
    assert_int_equal(mc__etcd_watch_start(c, "w/", 2, end, el, 0, on_events, &s, &w), 0);
    assert_int_equal(mc__etcd_put(c, "w/a", 3, "1", 1, 0, NULL), 0);
    assert_int_equal(mc__etcd_put(c, "w/b", 3, "2", 1, 0, NULL), 0);
    assert_int_equal(mc__etcd_put(c, "x/out", 5, "3", 1, 0, NULL), 0);
    assert_int_equal(mc__etcd_delete(c, "w/a", 3, NULL, 0, NULL), 0);
    assert_int_equal(wait_events(&s, 3, 3000), 3);
    usleep(100 * 1000);
    pthread_mutex_lock(&s.lock);
    assert_int_equal(s.n, 3);
    assert_string_equal(s.log[0], "PUT w/a=1");
    assert_string_equal(s.log[1], "PUT w/b=2");
    assert_string_equal(s.log[2], "DEL w/a=");
    pthread_mutex_unlock(&s.lock);
    /* from a past revision: history replayed first */
    assert_int_equal(mc__etcd_watch_start(c, "w/", 2, end, el, rev0, on_events, &h, &w2), 0);
    assert_int_equal(wait_events(&h, 4, 3000), 4);
    pthread_mutex_lock(&h.lock);
    assert_string_equal(h.log[0], "PUT w/before=0");
    assert_string_equal(h.log[3], "DEL w/a=");
    pthread_mutex_unlock(&h.lock);
    mc__etcd_watch_stop(w2);
    mc__etcd_watch_stop(w);
    assert_int_equal(s.err, 0);
    /* history compacted away: a watch from before it is ended by etcd with the compact
     * revision, and the caller learns it */
    {
        seen_t old = {.lock = PTHREAD_MUTEX_INITIALIZER};
        int64_t now_rev = 0;
        uint64_t t1;
        assert_int_equal(mc__etcd_put(c, "w/c", 3, "x", 1, 0, &now_rev), 0);
        assert_int_equal(mc__etcd_compact(c, now_rev), 0);
        assert_int_equal(mc__etcd_compact(c, now_rev), MC_ERR_ETCD_OPERATION_ERROR);
        w2 = NULL;
        int rc = mc__etcd_watch_start(c, "w/", 2, end, el, rev0, on_events, &old, &w2);
        if (rc == 0) {
            t1 = mc__now_ms();
            for (;;) {
                pthread_mutex_lock(&old.lock);
                int err = old.err;
                pthread_mutex_unlock(&old.lock);
                if (err)
                    break;
                assert_true(mc__now_ms() - t1 < 3000);
                usleep(10 * 1000);
            }
            assert_int_equal(old.err, MC_ERR_ETCD_OPERATION_ERROR);
            assert_int_equal(old.n, 0);
            mc__etcd_watch_stop(w2);
        } else {
            assert_int_equal(rc, MC_ERR_ETCD_OPERATION_ERROR);
        }
    }
    /* a watch with no endpoint: a clear error, within the deadline */
    mc__etcd_close(c);
    char dead[32];
    snprintf(dead, sizeof(dead), "127.0.0.1:%u", (unsigned)th_free_port());
    c = client(dead, 800);
    uint64_t t0 = mc__now_ms();
    assert_int_not_equal(mc__etcd_watch_start(c, "w/", 2, NULL, 0, 0, on_events, &s, &w), 0);
    assert_null(w);
    assert_true(mc__now_ms() - t0 < 3000);
    mc__etcd_close(c);
}

/* --- failover and deadlines --- */
static void test_failover_and_deadlines(void **state) {
    char eps[160];
    uint16_t dead = th_free_port();
    mc_etcd_t *c;
    mc_etcd_kv_t kv;
    uint64_t t0;
    int stall;
    uint16_t stall_port = 0;
    (void)state;
    /* the first endpoint refuses connections, the second answers */
    snprintf(eps, sizeof(eps), "127.0.0.1:%u,%s", (unsigned)dead, g_ep);
    c = client(eps, 3000);
    t0 = mc__now_ms();
    assert_int_equal(mc__etcd_put(c, "f/k", 3, "v", 1, 0, NULL), 0);
    assert_int_equal(mc__etcd_get(c, "f/k", 3, &kv), 0);
    mc__etcd_kv_free(&kv);
    assert_true(mc__now_ms() - t0 < 1500);
    mc__etcd_close(c);

    /* nothing listening anywhere: an error soon, not after the whole deadline */
    snprintf(eps, sizeof(eps), "127.0.0.1:%u;127.0.0.1:%u", (unsigned)dead,
             (unsigned)th_free_port());
    c = client(eps, 10000);
    t0 = mc__now_ms();
    assert_int_equal(mc__etcd_put(c, "f/k", 3, "v", 1, 0, NULL), MC_ERR_ETCD_OPERATION_ERROR);
    assert_true(mc__now_ms() - t0 < 2000);
    mc__etcd_close(c);

    /* a listening socket that never answers: the deadline holds */
    stall = mc__tcp_listen("127.0.0.1", 0, 16, &stall_port);
    assert_true(stall >= 0);
    snprintf(eps, sizeof(eps), "127.0.0.1:%u", (unsigned)stall_port);
    c = client(eps, 700);
    t0 = mc__now_ms();
    assert_int_equal(mc__etcd_get(c, "f/k", 3, &kv), MC_ERR_ETCD_CTX_CANCELLED);
    assert_true(mc__now_ms() - t0 >= 600);
    assert_true(mc__now_ms() - t0 < 2000);
    /* a txn sent to it is not repeated elsewhere: its fate is unknown */
    mc__etcd_close(c);
    snprintf(eps, sizeof(eps), "127.0.0.1:%u,%s", (unsigned)stall_port, g_ep);
    c = client(eps, 2000);
    t0 = mc__now_ms();
    assert_int_equal(mc__etcd_get(c, "f/k", 3, &kv), 0); /* stalled first, then the live one */
    mc__etcd_kv_free(&kv);
    assert_true(mc__now_ms() - t0 < 1800);
    /* the live one answered last, so it goes first now */
    t0 = mc__now_ms();
    assert_int_equal(mc__etcd_get(c, "f/k", 3, &kv), 0);
    mc__etcd_kv_free(&kv);
    assert_true(mc__now_ms() - t0 < 300);
    mc__etcd_close(c);
    snprintf(eps, sizeof(eps), "127.0.0.1:%u", (unsigned)stall_port);
    c = client(eps, 700);
    assert_int_equal(mc__etcd_txn(c, NULL, 0, NULL, 0, NULL, 0, NULL),
                     MC_ERR_ETCD_TRANSACTION_FAIL);
    mc__etcd_close(c);
    close(stall);
}

/* --- a server that is not etcd --- */
static _Atomic int g_fake_mode;
static void fake(void *ctx, const mc_http_request_t *req, mc_http_response_t *resp) {
    static const char *const bodies[] = {
        "{\"header\":{\"revision\":\"2\"},\"kvs\":[{\"key\":\"Zm9v\",\"val", /* truncated */
        "{\"kvs\":[{\"key\":\"Zm9v\",\"value\":\"%%%%\"}]}",                 /* bad base64 */
        "<html>not found</html>",                                            /* 404 page */
        "{\"error\":\"etcdserver: mvcc: required revision has been compacted\",\"code\":11}",
        "", /* 4: a body past the size bound */
        "{\"error\":\"etcdserver: no leader\",\"message\":\"etcdserver: no leader\",\"code\":14}",
        "{\"error\":\"etcdserver: request timed out\",\"code\":14}",
        "{\"kvs\":[],\"deleted\":\"1\"}", /* 7: JSON, but not etcd's (no header) */
    };
    int m = atomic_load(&g_fake_mode);
    (void)ctx;
    (void)req;
    if (m == 4) {
        size_t n = MC_ETCD_MAX_RESPONSE + 16;
        resp->status = 200;
        resp->body = mc__malloc(n);
        if (resp->body) {
            memset(resp->body, ' ', n);
            resp->body[0] = '{';
            resp->body[n - 1] = '}';
            resp->body_len = n;
        }
        return;
    }
    mc__http_respond(resp,
                     m == 2             ? 404
                     : m == 3           ? 400
                     : m == 5 || m == 6 ? 503
                                        : 200,
                     "application/json", bodies[m], strlen(bodies[m]));
}

static void test_fake_server_answers(void **state) {
    mc_http_server_t *srv = NULL;
    mc_etcd_t *c;
    mc_etcd_kv_t kv;
    mc_etcd_kvs_t r;
    char eps[160];
    static const int want[] = {MC_ERR_MALFORMED_JSON, MC_ERR_MALFORMED_JSON,
                               MC_ERR_ETCD_OPERATION_ERROR, MC_ERR_ETCD_OPERATION_ERROR,
                               MC_ERR_MALFORMED_JSON};
    (void)state;
    assert_int_equal(mc__http_server_start("127.0.0.1", 0, 1 << 20, fake, NULL, &srv), 0);
    snprintf(eps, sizeof(eps), "127.0.0.1:%u", (unsigned)mc__http_server_port(srv));
    c = client(eps, 3000);
    for (int m = 0; m < 5; m++) {
        atomic_store(&g_fake_mode, m);
        assert_int_equal(mc__etcd_get(c, "foo", 3, &kv), want[m]);
        assert_null(kv.key);
        assert_int_equal(mc__etcd_range_prefix(c, "f", 1, 0, &r), want[m]);
        assert_null(r.kvs);
    }
    atomic_store(&g_fake_mode, 7);
    assert_int_equal(mc__etcd_get(c, "foo", 3, &kv), MC_ERR_MALFORMED_JSON);
    assert_int_equal(mc__etcd_put(c, "foo", 3, "v", 1, 0, NULL), MC_ERR_MALFORMED_JSON);
    assert_int_equal(mc__etcd_delete(c, "foo", 3, NULL, 0, NULL), MC_ERR_MALFORMED_JSON);
    assert_int_equal(mc__etcd_txn(c, NULL, 0, NULL, 0, NULL, 0, NULL), MC_ERR_MALFORMED_JSON);
    mc__etcd_close(c);
    /* an Unavailable member is skipped for the next one; a txn only when etcd said "no leader",
     * since a timed out proposal may have been applied */
    snprintf(eps, sizeof(eps), "127.0.0.1:%u,%s", (unsigned)mc__http_server_port(srv), g_ep);
    for (int m = 5; m <= 6; m++) {
        atomic_store(&g_fake_mode, m);
        c = client(eps, 3000);
        assert_int_equal(mc__etcd_put(c, "fk", 2, "v", 1, 0, NULL), 0);
        mc__etcd_close(c);
        c = client(eps, 3000);
        assert_int_equal(mc__etcd_txn(c, NULL, 0, NULL, 0, NULL, 0, NULL),
                         m == 5 ? 0 : MC_ERR_ETCD_TRANSACTION_FAIL);
        mc__etcd_close(c);
    }
    mc__http_server_stop(srv);
}

/* --- a 3-member cluster losing one member --- */
static th_etcd_t m[3];
static int teardown_cluster(void **state) {
    (void)state;
    for (int i = 0; i < 3; i++)
        th_etcd_kill(&m[i]);
    return 0;
}

static void test_cluster_member_killed(void **state) {
    char eps[200];
    mc_etcd_t *c;
    mc_etcd_kv_t kv;
    mc_etcd_watch_t *w = NULL;
    seen_t s = {.lock = PTHREAD_MUTEX_INITIALIZER};
    mc_etcd_cmp_t absent = {
        .target = MC_ETCD_CMP_VERSION, .result = MC_ETCD_EQUAL, .key = "c/view", .key_len = 6};
    mc_etcd_op_t claim = {
        .type = MC_ETCD_OP_PUT, .key = "c/view", .key_len = 6, .value = "me", .value_len = 2};
    mc_etcd_txn_result_t t;
    int64_t id = 0;
    uint8_t end[8];
    size_t el = mc__etcd_prefix_end("c/", 2, end);
    (void)state;
    assert_int_equal(th_etcd_cluster(m, 3), 0);
    snprintf(eps, sizeof(eps), "127.0.0.1:%u,127.0.0.1:%u,127.0.0.1:%u", (unsigned)m[0].client_port,
             (unsigned)m[1].client_port, (unsigned)m[2].client_port);
    c = client(eps, 5000);
    assert_int_equal(mc__etcd_put(c, "c/a", 3, "1", 1, 0, NULL), 0);
    /* the first endpoint served that; the watch stream is on it too */
    assert_int_equal(mc__etcd_watch_start(c, "c/", 2, end, el, 0, on_events, &s, &w), 0);
    assert_int_equal(mc__etcd_lease_grant(c, 5, &id, NULL), 0);
    th_etcd_kill(&m[0]);
    assert_int_equal(mc__etcd_put(c, "c/b", 3, "2", 1, id, NULL), 0);
    assert_int_equal(mc__etcd_get(c, "c/a", 3, &kv), 0);
    assert_string_equal((char *)kv.value, "1");
    mc__etcd_kv_free(&kv);
    assert_int_equal(mc__etcd_txn(c, &absent, 1, &claim, 1, NULL, 0, &t), 0);
    assert_true(t.succeeded);
    mc__etcd_txn_result_free(&t);
    assert_int_equal(mc__etcd_lease_keepalive(c, id, NULL), 0);
    /* the watch resumed on a live member and missed nothing */
    assert_int_equal(wait_events(&s, 2, 8000), 2);
    pthread_mutex_lock(&s.lock);
    assert_string_equal(s.log[0], "PUT c/b=2");
    assert_string_equal(s.log[1], "PUT c/view=me");
    pthread_mutex_unlock(&s.lock);
    mc__etcd_watch_stop(w);
    assert_int_equal(mc__etcd_lease_revoke(c, id), 0);
    mc__etcd_close(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open_bad_endpoints),
        cmocka_unit_test(test_put_get_range_delete),
        cmocka_unit_test(test_txn_both_branches),
        cmocka_unit_test(test_leases),
        cmocka_unit_test(test_watch),
        cmocka_unit_test(test_failover_and_deadlines),
        cmocka_unit_test(test_fake_server_answers),
    };
    const struct CMUnitTest cluster[] = {
        cmocka_unit_test(test_cluster_member_killed),
    };
    int rc;
    if (!th_etcd_available()) {
        fprintf(stderr, "no etcd binary (install etcd-server or set MC_ETCD_BIN): skipped\n");
        return 77;
    }
    rc = cmocka_run_group_tests_name("etcd", tests, setup_one, teardown_one);
    rc |= cmocka_run_group_tests_name("etcd_cluster", cluster, NULL, teardown_cluster);
    return rc;
}
