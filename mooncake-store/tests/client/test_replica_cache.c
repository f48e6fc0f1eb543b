/* The replica-location cache on its own: when entries stop serving (expiry counted from the
 * request's send time), what it refuses to hold, its bound, that it frees what it takes, and its
 * renewal: which entries are due, that an answer never overrides newer state, and the renewer's
 * naps. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "client/replica_cache.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"

static void fill(mc__key_replicas_t *kr, uint64_t ttl, uint64_t epoch, uint64_t addr) {
    memset(kr, 0, sizeof(*kr));
    kr->size = 4096;
    kr->lease_ttl_ms = ttl;
    kr->n_replicas = 2;
    for (int i = 0; i < 2; i++) {
        snprintf(kr->replicas[i].segment_name, sizeof(kr->replicas[i].segment_name), "node%d", i);
        kr->replicas[i].addr = addr + (uint64_t)i;
        kr->replicas[i].size = 4096;
        kr->replicas[i].epoch = epoch;
        kr->replicas[i].status = MC_MP_REPLICA_COMPLETE;
    }
}

static void test_window(void **state) {
    uint64_t use = 0, by = 0;
    (void)state;
    /* 10 s lease sent at 1000: drift allowance 10000/64 + 5 = 161, read room 1250 */
    assert_int_equal(mc__replica_cache_window(1000, 10000, &use, &by), 1);
    assert_int_equal(by, 1000 + 10000 - 161);
    assert_int_equal(use, by - 1250);
    assert_true(use > 1000 && use < by && by < 11000);
    /* too short to leave any room, or no lease at all */
    assert_int_equal(mc__replica_cache_window(1000, 0, &use, &by), 0);
    assert_int_equal(mc__replica_cache_window(1000, 6, &use, &by), 0);
    assert_int_equal(mc__replica_cache_window(1000, UINT64_MAX, &use, &by), 0);
    assert_int_equal(mc__replica_cache_window(UINT64_MAX - 5, 10000, &use, &by), 0);
}

static void test_expiry_from_send_time(void **state) {
    mc__replica_cache_t *c = NULL;
    mc__key_replicas_t kr, got;
    uint64_t use = 0, by = 0, read_by = 0, hits = 0, misses = 0;
    int64_t live = mc__alloc_live_bytes();
    (void)state;
    assert_int_equal(mc__replica_cache_create(16, &c), 0);
    assert_non_null(c);
    fill(&kr, 150, 77, 0x1000); /* a lease shorter than MC_MP_CACHED_LEASE_MS */
    assert_int_equal(mc__replica_cache_window(2000, 150, &use, &by), 1);
    mc__replica_cache_put(c, "k", 2000, &kr);
    assert_int_equal(mc__replica_cache_count(c), 1);
    /* the lease counted from the send time, not from when the reply came */
    assert_int_equal(mc__replica_cache_get(c, "k", 2000, &got, &read_by), 1);
    assert_int_equal(read_by, by);
    assert_int_equal(got.code, 0);
    assert_int_equal(got.size, 4096);
    assert_int_equal(got.n_replicas, 2);
    assert_int_equal(got.replicas[1].addr, 0x1001);
    assert_int_equal(got.replicas[0].epoch, 77);
    assert_string_equal(got.replicas[1].segment_name, "node1");
    assert_int_equal(got.lease_ttl_ms, by - 2000);
    assert_int_equal(mc__replica_cache_get(c, "k", use - 1, &got, &read_by), 1);
    assert_int_equal(mc__replica_cache_get(c, "other", 2000, &got, &read_by), 0);
    /* at use_until it stops serving, and the expired entry goes */
    assert_int_equal(mc__replica_cache_get(c, "k", use, &got, &read_by), 0);
    assert_int_equal(mc__replica_cache_count(c), 0);
    assert_int_equal(mc__replica_cache_get(c, "k", 2000, &got, &read_by), 0);
    mc__replica_cache_stats(c, &hits, &misses);
    assert_int_equal(hits, 2);
    assert_int_equal(misses, 3);
    /* a new grant replaces the old entry */
    mc__replica_cache_put(c, "k", 2000, &kr);
    fill(&kr, 150, 78, 0x2000);
    mc__replica_cache_put(c, "k", 2100, &kr);
    assert_int_equal(mc__replica_cache_count(c), 1);
    assert_int_equal(mc__replica_cache_get(c, "k", 2100, &got, &read_by), 1);
    assert_int_equal(got.replicas[0].addr, 0x2000);
    assert_int_equal(got.replicas[0].epoch, 78);
    assert_int_equal(read_by, by + 100);
    /* a long lease serves no longer than the master's forced removals wait */
    fill(&kr, 10000, 79, 0x3000);
    mc__replica_cache_put(c, "long", 5000, &kr);
    assert_int_equal(mc__replica_cache_window(5000, MC_MP_CACHED_LEASE_MS, &use, &by), 1);
    assert_int_equal(mc__replica_cache_get(c, "long", 5000, &got, &read_by), 1);
    assert_int_equal(read_by, by);
    assert_true(read_by <= 5000 + MC_MP_CACHED_LEASE_MS);
    assert_int_equal(mc__replica_cache_get(c, "long", use, &got, &read_by), 0);
    assert_int_equal(mc__replica_cache_window(2000, 500, &use, &by), 1);
    /* expired entries go when new ones come */
    mc__replica_cache_put(c, "late", by + 100, &kr);
    assert_int_equal(mc__replica_cache_count(c), 1);
    assert_int_equal(mc__replica_cache_get(c, "late", by + 100, &got, &read_by), 1);
    mc__replica_cache_destroy(c);
    assert_int_equal(mc__alloc_live_bytes(), live);
}

static void test_refuses_what_it_cannot_vouch_for(void **state) {
    mc__replica_cache_t *c = NULL;
    mc__key_replicas_t kr, got;
    uint64_t read_by = 0;
    (void)state;
    assert_int_equal(mc__replica_cache_create(16, &c), 0);
    fill(&kr, 10000, 5, 0x1000);
    mc__replica_cache_put(c, "k", 0, &kr);
    assert_int_equal(mc__replica_cache_count(c), 1);
    /* each of these is not recorded, and drops what the key had */
    fill(&kr, 10000, 5, 0x1000);
    kr.code = MC_ERR_OBJECT_NOT_FOUND;
    mc__replica_cache_put(c, "k", 0, &kr);
    assert_int_equal(mc__replica_cache_get(c, "k", 1, &got, &read_by), 0);
    fill(&kr, 10000, 0, 0x1000); /* an untagged segment */
    mc__replica_cache_put(c, "k", 0, &kr);
    assert_int_equal(mc__replica_cache_count(c), 0);
    fill(&kr, 10000, 5, 0x1000);
    kr.replicas[1].status = MC_MP_REPLICA_DISK; /* a disk copy: no lease */
    mc__replica_cache_put(c, "k", 0, &kr);
    assert_int_equal(mc__replica_cache_count(c), 0);
    fill(&kr, 10000, 5, 0x1000);
    kr.replicas[0].status = MC_MP_REPLICA_PROCESSING;
    mc__replica_cache_put(c, "k", 0, &kr);
    assert_int_equal(mc__replica_cache_count(c), 0);
    fill(&kr, 10000, 5, 0x1000);
    kr.n_replicas = 0;
    mc__replica_cache_put(c, "k", 0, &kr);
    fill(&kr, 10000, 5, 0x1000);
    kr.n_replicas = MC_MP_MAX_REPLICA_NUM + 1; /* a corrupt count is no list */
    mc__replica_cache_put(c, "k", 0, &kr);
    fill(&kr, 0, 5, 0x1000); /* no lease granted */
    mc__replica_cache_put(c, "k", 0, &kr);
    assert_int_equal(mc__replica_cache_count(c), 0);
    /* NULL arguments do nothing */
    mc__replica_cache_put(c, NULL, 0, &kr);
    mc__replica_cache_put(c, "k", 0, NULL);
    assert_int_equal(mc__replica_cache_get(c, NULL, 0, &got, &read_by), 0);
    mc__replica_cache_drop(c, NULL);
    mc__replica_cache_destroy(c);
}

static void test_bound_drop_clear(void **state) {
    mc__replica_cache_t *c = NULL;
    mc__key_replicas_t kr, got;
    uint64_t read_by = 0;
    char key[32];
    int64_t live = mc__alloc_live_bytes();
    (void)state;
    assert_int_equal(mc__replica_cache_create(4, &c), 0);
    fill(&kr, 10000, 9, 0x1000);
    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof(key), "key-%d", i);
        kr.replicas[0].addr = (uint64_t)i;
        mc__replica_cache_put(c, key, (uint64_t)i, &kr);
        assert_true(mc__replica_cache_count(c) <= 4);
    }
    assert_int_equal(mc__replica_cache_count(c), 4);
    /* the oldest went first */
    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof(key), "key-%d", i);
        assert_int_equal(mc__replica_cache_get(c, key, 10, &got, &read_by), i >= 6);
        if (i >= 6)
            assert_int_equal(got.replicas[0].addr, (uint64_t)i);
    }
    mc__replica_cache_drop(c, "key-7");
    mc__replica_cache_drop(c, "key-7");
    mc__replica_cache_drop(c, "never");
    assert_int_equal(mc__replica_cache_count(c), 3);
    assert_int_equal(mc__replica_cache_get(c, "key-7", 10, &got, &read_by), 0);
    assert_int_equal(mc__replica_cache_get(c, "key-8", 10, &got, &read_by), 1);
    mc__replica_cache_clear(c);
    assert_int_equal(mc__replica_cache_count(c), 0);
    assert_int_equal(mc__replica_cache_get(c, "key-9", 10, &got, &read_by), 0);
    /* long keys are held whole: two keys that share a long prefix stay apart */
    {
        static char a[MC_MP_MAX_KEY + 1], b[MC_MP_MAX_KEY + 1];
        memset(a, 'x', MC_MP_MAX_KEY);
        memcpy(b, a, sizeof(b));
        b[MC_MP_MAX_KEY - 1] = 'y';
        kr.replicas[0].addr = 1;
        mc__replica_cache_put(c, a, 0, &kr);
        kr.replicas[0].addr = 2;
        mc__replica_cache_put(c, b, 0, &kr);
        assert_int_equal(mc__replica_cache_get(c, a, 1, &got, &read_by), 1);
        assert_int_equal(got.replicas[0].addr, 1);
        assert_int_equal(mc__replica_cache_get(c, b, 1, &got, &read_by), 1);
        assert_int_equal(got.replicas[0].addr, 2);
    }
    mc__replica_cache_destroy(c);
    assert_int_equal(mc__alloc_live_bytes(), live);
}

static void test_sizes(void **state) {
    mc__replica_cache_t *c = (mc__replica_cache_t *)(uintptr_t)1;
    mc__key_replicas_t kr;
    uint64_t read_by = 0, hits = 1, misses = 1;
    (void)state;
    /* 0 is off: no cache, and every call accepts that */
    assert_int_equal(mc__replica_cache_create(0, &c), 0);
    assert_null(c);
    fill(&kr, 10000, 9, 0x1000);
    mc__replica_cache_put(NULL, "k", 0, &kr);
    assert_int_equal(mc__replica_cache_get(NULL, "k", 0, &kr, &read_by), 0);
    mc__replica_cache_drop(NULL, "k");
    mc__replica_cache_clear(NULL);
    assert_int_equal(mc__replica_cache_count(NULL), 0);
    mc__replica_cache_stats(NULL, &hits, &misses);
    assert_int_equal(hits + misses, 0);
    mc__replica_cache_destroy(NULL);
    assert_int_equal(mc__replica_cache_create(MC__REPLICA_CACHE_MAX_ENTRIES + 1, &c),
                     MC_ERR_INVALID_PARAMS);
    assert_null(c);
    assert_int_equal(mc__replica_cache_create(1, &c), 0);
    mc__replica_cache_put(c, "a", 0, &kr);
    mc__replica_cache_put(c, "b", 0, &kr);
    assert_int_equal(mc__replica_cache_count(c), 1);
    assert_int_equal(mc__replica_cache_get(c, "b", 0, &kr, &read_by), 1);
    mc__replica_cache_destroy(c);
}

/* Threads putting, reading, dropping and clearing the same few keys at once: every hit is a
 * whole entry of that key, and the bound holds (the sanitizer builds run this too). */
typedef struct churn {
    mc__replica_cache_t *c;
    unsigned seed;
    int bad;
} churn_t;

static void *churn_main(void *arg) {
    churn_t *ch = arg;
    mc__key_replicas_t kr, got;
    uint64_t read_by;
    char key[16];
    for (int i = 0; i < 20000; i++) {
        unsigned r = rand_r(&ch->seed);
        unsigned k = r % 24;
        snprintf(key, sizeof(key), "c%u", k);
        switch ((r >> 8) % 8) {
        case 0:
            mc__replica_cache_drop(ch->c, key);
            break;
        case 7: { /* a renewal of whatever is due, answered with each key's own location */
            mc__rc_due_t due[4];
            size_t n = mc__replica_cache_due(ch->c, (uint64_t)i + 6000, due, 4);
            for (size_t j = 0; j < n; j++) {
                unsigned dk = (unsigned)atoi(due[j].key + 1);
                fill(&kr, 10000, 1000 + dk, 0x1000 * dk);
                mc__replica_cache_renew(ch->c, due[j].key, due[j].seq, (uint64_t)i, &kr);
                mc__free(due[j].key);
            }
            break;
        }
        case 1:
            if ((r >> 12) % 64 == 0)
                mc__replica_cache_clear(ch->c);
            break;
        case 2:
        case 3:
            fill(&kr, 10000, 1000 + k, 0x1000 * k); /* each key's own epoch and address */
            mc__replica_cache_put(ch->c, key, (uint64_t)i, &kr);
            break;
        default:
            if (mc__replica_cache_get(ch->c, key, (uint64_t)i, &got, &read_by) &&
                (got.replicas[0].epoch != 1000 + k || got.replicas[1].addr != 0x1000 * k + 1))
                ch->bad++;
            break;
        }
        if (mc__replica_cache_count(ch->c) > 8)
            ch->bad++;
    }
    return NULL;
}

static void test_threads(void **state) {
    mc__replica_cache_t *c = NULL;
    pthread_t th[4];
    churn_t ch[4];
    int64_t live = mc__alloc_live_bytes();
    (void)state;
    assert_int_equal(mc__replica_cache_create(8, &c), 0);
    for (int i = 0; i < 4; i++) {
        ch[i] = (churn_t){c, (unsigned)i + 1, 0};
        assert_int_equal(pthread_create(&th[i], NULL, churn_main, &ch[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(ch[i].bad, 0);
    }
    mc__replica_cache_destroy(c);
    assert_int_equal(mc__alloc_live_bytes(), live);
}

static uint64_t cached_addr(mc__replica_cache_t *c, const char *key, uint64_t now) {
    mc__key_replicas_t got;
    uint64_t read_by = 0;
    return mc__replica_cache_get(c, key, now, &got, &read_by) ? got.replicas[0].addr : 0;
}

static void free_due(mc__rc_due_t *d, size_t n) {
    for (size_t i = 0; i < n; i++)
        mc__free(d[i].key);
}

/* Renewal picks the entries read since their grant, once past half their life, and a renewed
 * entry serves past the old one's end; entries nobody read are left to run out. */
static void test_renew_due_hot_only(void **state) {
    mc__replica_cache_t *c = NULL;
    mc__key_replicas_t kr;
    mc__rc_due_t due[4];
    uint64_t use = 0, by = 0;
    int64_t live = mc__alloc_live_bytes();
    (void)state;
    assert_int_equal(mc__replica_cache_create(16, &c), 0);
    assert_int_equal(mc__replica_cache_window(1000, MC_MP_CACHED_LEASE_MS, &use, &by), 1);
    fill(&kr, 10000, 5, 0x1000); /* a long lease: the cached window is MC_MP_CACHED_LEASE_MS */
    mc__replica_cache_put(c, "hot", 1000, &kr);
    mc__replica_cache_put(c, "cold", 1000, &kr);
    assert_int_equal(mc__replica_cache_due(c, 1000, due, 4), 0);
    assert_int_equal(cached_addr(c, "hot", 1010), 0x1000); /* read: hot */
    /* before half its life nothing is due */
    assert_int_equal(mc__replica_cache_due(c, 1000 + (use - 1000) / 2 - 1, due, 4), 0);
    assert_int_equal(mc__replica_cache_due(c, 1000 + (use - 1000) / 2, due, 4), 1);
    assert_string_equal(due[0].key, "hot");
    /* the master's new grant, sent at 1100, with the value at a new address */
    fill(&kr, 10000, 5, 0x2000);
    mc__replica_cache_renew(c, due[0].key, due[0].seq, 1100, &kr);
    free_due(due, 1);
    assert_int_equal(cached_addr(c, "hot", use), 0x2000); /* past the first grant's end */
    assert_int_equal(cached_addr(c, "cold", use), 0);     /* ran out */
    assert_int_equal(mc__replica_cache_count(c), 1);
    /* the renewed entry (read again above) is due at half its own life */
    assert_int_equal(mc__replica_cache_due(c, 1100 + (use - 1000) / 2 - 1, due, 4), 0);
    assert_int_equal(mc__replica_cache_due(c, 1100 + (use - 1000) / 2, due, 4), 1);
    free_due(due, 1);
    mc__replica_cache_put(c, "hot", 1100, &kr); /* a get's new grant: cold until read */
    assert_int_equal(mc__replica_cache_due(c, 1100 + (use - 1000) / 2, due, 4), 0);
    /* an entry of a short lease is never renewed, however often it is read */
    fill(&kr, MC__RC_RENEW_MIN_LEASE_MS - 1, 5, 0x4000);
    mc__replica_cache_put(c, "short", 2000, &kr);
    assert_int_equal(cached_addr(c, "short", 2001), 0x4000);
    assert_int_equal(cached_addr(c, "short", 2002), 0x4000);
    assert_int_equal(mc__replica_cache_due(c, 2000 + (use - 1000) / 2, due, 4), 0);
    fill(&kr, MC__RC_RENEW_MIN_LEASE_MS, 5, 0x2000);
    /* a full batch stops at max */
    for (int i = 0; i < 6; i++) {
        char key[8];
        snprintf(key, sizeof(key), "b%d", i);
        mc__replica_cache_put(c, key, 3000, &kr);
        assert_int_equal(cached_addr(c, key, 3001), 0x2000);
    }
    assert_int_equal(mc__replica_cache_due(c, 3000 + (use - 1000) / 2, due, 4), 4);
    assert_string_equal(due[0].key, "b0");
    free_due(due, 4);
    mc__replica_cache_destroy(c);
    assert_int_equal(mc__alloc_live_bytes(), live);
}

/* A renewal's answer never overrides what this client did or learnt after it was sent, and an
 * answer the cache cannot vouch for (the key gone) drops the entry it was for. */
static void test_renew_keeps_newer_state(void **state) {
    mc__replica_cache_t *c = NULL;
    mc__key_replicas_t kr;
    mc__rc_due_t due[4];
    uint64_t half =
        (MC_MP_CACHED_LEASE_MS - MC_MP_CACHED_LEASE_MS / 64u - 5u - MC_MP_CACHED_LEASE_MS / 8u) /
        2u;
    int64_t live = mc__alloc_live_bytes();
    (void)state;
    assert_int_equal(mc__replica_cache_create(16, &c), 0);
    fill(&kr, 10000, 5, 0x1000);
    /* dropped meanwhile (this client's own upsert, put or remove): stays dropped */
    mc__replica_cache_put(c, "dropped", 1000, &kr);
    assert_int_equal(cached_addr(c, "dropped", 1001), 0x1000);
    assert_int_equal(mc__replica_cache_due(c, 1000 + half, due, 4), 1);
    mc__replica_cache_drop(c, "dropped");
    fill(&kr, 10000, 5, 0x2000);
    mc__replica_cache_renew(c, due[0].key, due[0].seq, 1000 + half, &kr);
    free_due(due, 1);
    assert_int_equal(mc__replica_cache_count(c), 0);
    /* granted anew meanwhile (a get that missed): the newer grant stays */
    fill(&kr, 10000, 5, 0x1000);
    mc__replica_cache_put(c, "regranted", 2000, &kr);
    assert_int_equal(cached_addr(c, "regranted", 2001), 0x1000);
    assert_int_equal(mc__replica_cache_due(c, 2000 + half, due, 4), 1);
    fill(&kr, 10000, 5, 0x3000);
    mc__replica_cache_put(c, "regranted", 2000 + half, &kr);
    fill(&kr, 10000, 5, 0x2000);
    mc__replica_cache_renew(c, due[0].key, due[0].seq, 2000 + half, &kr);
    free_due(due, 1);
    assert_int_equal(cached_addr(c, "regranted", 2000 + half + 1), 0x3000);
    /* cleared meanwhile (remove_all): stays cleared */
    assert_int_equal(mc__replica_cache_due(c, 2000 + 2 * half, due, 4), 1);
    mc__replica_cache_clear(c);
    mc__replica_cache_renew(c, due[0].key, due[0].seq, 2000 + 2 * half, &kr);
    free_due(due, 1);
    assert_int_equal(mc__replica_cache_count(c), 0);
    /* the key went at the master: the entry goes */
    fill(&kr, 10000, 5, 0x1000);
    mc__replica_cache_put(c, "gone", 3000, &kr);
    assert_int_equal(cached_addr(c, "gone", 3001), 0x1000);
    assert_int_equal(mc__replica_cache_due(c, 3000 + half, due, 4), 1);
    memset(&kr, 0, sizeof(kr));
    kr.code = MC_ERR_OBJECT_NOT_FOUND;
    mc__replica_cache_renew(c, due[0].key, due[0].seq, 3000 + half, &kr);
    free_due(due, 1);
    assert_int_equal(cached_addr(c, "gone", 3000 + half), 0);
    mc__replica_cache_destroy(c);
    assert_int_equal(mc__alloc_live_bytes(), live);
}

typedef struct {
    mc__replica_cache_t *c;
    _Atomic int naps;
} napper_t;

static void *napper_main(void *arg) {
    napper_t *n = arg;
    while (mc__replica_cache_nap(n->c, 1))
        atomic_fetch_add(&n->naps, 1);
    return NULL;
}

/* The renewer sleeps without a timer while no entry was read, naps while some were, and stops
 * when woken for the close. */
static void test_nap(void **state) {
    mc__replica_cache_t *c = NULL;
    mc__key_replicas_t kr;
    napper_t n;
    pthread_t th;
    (void)state;
    assert_int_equal(mc__replica_cache_create(16, &c), 0);
    n.c = c;
    atomic_init(&n.naps, 0);
    assert_int_equal(pthread_create(&th, NULL, napper_main, &n), 0);
    fill(&kr, 10000, 5, 0x1000);
    mc__replica_cache_put(c, "k", mc__now_ms(), &kr); /* held, but not read: no nap ends */
    usleep(50 * 1000);
    assert_int_equal(atomic_load(&n.naps), 0);
    assert_int_equal(cached_addr(c, "k", mc__now_ms()), 0x1000);
    for (uint64_t until = mc__now_ms() + 60000; atomic_load(&n.naps) < 3 && mc__now_ms() < until;)
        usleep(1000);
    assert_true(atomic_load(&n.naps) >= 3);
    mc__replica_cache_drop(c, "k"); /* nothing hot any more: the naps stop */
    mc__replica_cache_wake_renewer(c);
    pthread_join(th, NULL);
    assert_int_equal(mc__replica_cache_nap(c, 1), 0); /* a closed cache's renewer does not wait */
    mc__replica_cache_destroy(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_window),
        cmocka_unit_test(test_expiry_from_send_time),
        cmocka_unit_test(test_refuses_what_it_cannot_vouch_for),
        cmocka_unit_test(test_bound_drop_clear),
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_renew_due_hot_only),
        cmocka_unit_test(test_renew_keeps_newer_state),
        cmocka_unit_test(test_nap),
    };
    return cmocka_run_group_tests_name("store_client_replica_cache", tests, NULL, NULL);
}
