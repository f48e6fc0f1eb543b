/* Every master operation through master_client against a real mooncake_master process. */
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

#include "master_proc.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"
#include "proto/master_client.h"

static const char *g_bin;

#define SEG_A_BASE 0x10000000ull
#define SEG_B_BASE 0x20000000ull
#define MIB (1ull << 20)
/* Every test here but the eviction one shares one master, and none of them is about client
 * expiry (test_master_faults.c is): a client_ttl no loaded machine can outlast between two
 * calls of a test, so a slow run is never mistaken for a dead client. */
#define NO_EXPIRY "--client_ttl=3600"
/* The lease that a get grants. Checks that a lease still holds run a few calls after the get:
 * long enough that a loaded machine finishes them inside it; waits for its end sleep past it. */
#define LEASE_MS 2000
#define LEASE_FLAG "--default_kv_lease_ttl=2000"
/* A master call's deadline: generous, so that a starved master is slow, not failed. */
#define CALL_MS 15000

typedef struct fixture {
    mc_test_master_t m;
    mc__master_client_t *a, *b;
} fixture_t;

static int setup_with(void **state, const char *const *extra, uint64_t seg_size) {
    fixture_t *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(mc_test_master_start(g_bin, 0, extra, &f->m), 0);
    assert_int_equal(mc__master_client_connect(f->m.addr, CALL_MS, NULL, &f->a), 0);
    assert_int_equal(mc__master_client_connect(f->m.addr, CALL_MS, NULL, &f->b), 0);
    assert_int_equal(mc__master_client_mount_segment(f->a, "hostA:1", SEG_A_BASE, seg_size), 0);
    assert_int_equal(mc__master_client_mount_segment(f->b, "hostB:2", SEG_B_BASE, seg_size), 0);
    *state = f;
    return 0;
}

static int setup(void **state) {
    static const char *const extra[] = {LEASE_FLAG, NO_EXPIRY,
                                        "--eviction_high_watermark_ratio=1.0", NULL};
    return setup_with(state, extra, 4 * MIB);
}

static int teardown(void **state) {
    fixture_t *f = *state;
    mc__master_client_close(f->a);
    mc__master_client_close(f->b);
    assert_int_equal(mc_test_master_stop(&f->m, 0), 0);
    free(f);
    return 0;
}

/* Sleeps past a lease granted before the call: however slow the machine, it has ended. */
static void wait_lease_end(void) {
    usleep((LEASE_MS + 100) * 1000);
}

static void check_in_segment(const mc__replica_desc_t *d, uint64_t len) {
    uint64_t base = strcmp(d->segment_name, "hostA:1") == 0 ? SEG_A_BASE : SEG_B_BASE;
    assert_true(!strcmp(d->segment_name, "hostA:1") || !strcmp(d->segment_name, "hostB:2"));
    assert_true(d->addr >= base && d->addr + len <= base + 4 * MIB);
    assert_int_equal((d->addr - base) % 64, 0);
    assert_int_equal(d->size, len);
}

static void test_two_phase_put_visibility(void **state) {
    fixture_t *f = *state;
    mc__key_replicas_t r;
    uint64_t version;
    assert_int_equal(mc__master_client_put_start(f->a, "k1", 1000, NULL, &r), 0);
    version = r.version;
    assert_int_equal(r.n_replicas, 1);
    assert_int_equal(r.replicas[0].status, MC_MP_REPLICA_PROCESSING);
    check_in_segment(&r.replicas[0], 1000);
    /* Not visible before put_end, from either client. */
    assert_int_equal(mc__master_client_exist(f->b, "k1"), 0);
    assert_int_equal(mc__master_client_get_replica_list(f->b, "k1", &r), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc__master_client_put_start(f->b, "k1", 10, NULL, &r),
                     MC_ERR_OBJECT_ALREADY_EXISTS);
    assert_int_equal(mc__master_client_put_end(f->a, "k1", version), 0);
    assert_int_equal(mc__master_client_exist(f->b, "k1"), 1);
    memset(&r, 0, sizeof(r));
    assert_int_equal(mc__master_client_get_replica_list(f->b, "k1", &r), 0);
    assert_int_equal(r.size, 1000);
    assert_int_equal(r.lease_ttl_ms, LEASE_MS);
    assert_int_equal(r.n_replicas, 1);
    assert_int_equal(r.replicas[0].status, MC_MP_REPLICA_COMPLETE);
    check_in_segment(&r.replicas[0], 1000);
    assert_int_equal(mc__master_client_put_start(f->a, "k1", 1000, NULL, &r),
                     MC_ERR_OBJECT_ALREADY_EXISTS);
    assert_int_equal(mc__master_client_remove(f->a, "k1", 1), 0);
}

/* Upserts: the old value stays readable until the end swaps in the new one (at other
 * addresses); an end or revoke must name its start's version; a later upsert preempts an
 * unfinished one; replica clearing respects leases. */
static void test_upsert_versions(void **state) {
    fixture_t *f = *state;
    mc__key_replicas_t r, r2, g;
    const char *key = "up";
    int32_t code = 0;
    uint64_t len = 2000, v1, v2;
    assert_int_equal(mc__master_client_batch_start(f->a, 1, 1, &key, &len, NULL, &r), 0);
    assert_int_equal(r.code, 0);
    assert_int_not_equal(r.version, 0);
    /* A new key: a plain put start sees it as taken. */
    assert_int_equal(mc__master_client_put_start(f->b, key, 10, NULL, &g),
                     MC_ERR_OBJECT_ALREADY_EXISTS);
    v1 = r.version + 1000; /* a wrong version ends nothing */
    assert_int_equal(mc__master_client_batch_finish(f->a, 1, 1, 1, &key, &v1, &code), 0);
    assert_int_equal(code, MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc__master_client_batch_finish(f->a, 1, 1, 1, &key, &r.version, &code), 0);
    assert_int_equal(code, 0);
    assert_int_equal(mc__master_client_get_replica_list(f->b, key, &g), 0);
    assert_int_equal(g.size, 2000);

    /* Replace: while it is written, readers get the old placement. */
    len = 3000;
    assert_int_equal(mc__master_client_batch_start(f->a, 1, 1, &key, &len, NULL, &r), 0);
    assert_int_equal(r.code, 0);
    assert_true(r.replicas[0].addr != g.replicas[0].addr);
    assert_int_equal(mc__master_client_get_replica_list(f->b, key, &r2), 0);
    assert_int_equal(r2.size, 2000);
    assert_int_equal(r2.replicas[0].addr, g.replicas[0].addr);
    /* A second upsert preempts the first: the first one's end publishes nothing. */
    v1 = r.version;
    len = 4000;
    assert_int_equal(mc__master_client_batch_start(f->b, 1, 1, &key, &len, NULL, &r2), 0);
    v2 = r2.version;
    assert_int_equal(mc__master_client_batch_finish(f->a, 1, 1, 1, &key, &v1, &code), 0);
    assert_int_equal(code, MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc__master_client_get_replica_list(f->a, key, &g), 0);
    assert_int_equal(g.size, 2000);
    assert_int_equal(mc__master_client_batch_finish(f->b, 1, 1, 1, &key, &v2, &code), 0);
    assert_int_equal(code, 0);
    assert_int_equal(mc__master_client_get_replica_list(f->a, key, &g), 0);
    assert_int_equal(g.size, 4000);
    assert_int_equal(g.replicas[0].addr, r2.replicas[0].addr);

    /* Revoke: the old value stays. */
    len = 100;
    assert_int_equal(mc__master_client_batch_start(f->a, 1, 1, &key, &len, NULL, &r), 0);
    assert_int_equal(mc__master_client_batch_finish(f->a, 1, 0, 1, &key, &r.version, &code), 0);
    assert_int_equal(code, 0);
    assert_int_equal(mc__master_client_get_replica_list(f->a, key, &g), 0);
    assert_int_equal(g.size, 4000);

    /* Replica clear: refused while leased (the get above), done after. */
    assert_int_equal(mc__master_client_batch_replica_clear(f->a, 1, &key, NULL, &code), 0);
    assert_int_equal(code, MC_ERR_OBJECT_HAS_LEASE);
    wait_lease_end();
    assert_int_equal(mc__master_client_batch_replica_clear(f->a, 1, &key, "no-such-seg", &code), 0);
    assert_int_equal(code, MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc__master_client_batch_replica_clear(f->a, 1, &key, "", &code), 0);
    assert_int_equal(code, 0);
    assert_int_equal(mc__master_client_exist(f->a, key), 0);
}

/* A put's end names its placement: after a force-remove and another client's put of the same
 * key, the first writer's end and revoke answer OBJECT_NOT_FOUND and leave the second writer's
 * object (whose bytes are not written yet) unfinished and untouched. */
static void test_put_end_names_its_placement(void **state) {
    fixture_t *f = *state;
    mc__key_replicas_t first, second;
    assert_int_equal(mc__master_client_put_start(f->a, "race", 100, NULL, &first), 0);
    assert_int_equal(mc__master_client_remove(f->b, "race", 1), 0);
    assert_int_equal(mc__master_client_put_start(f->b, "race", 200, NULL, &second), 0);
    assert_int_not_equal(first.version, second.version);
    assert_int_equal(mc__master_client_put_end(f->a, "race", first.version),
                     MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc__master_client_put_revoke(f->a, "race", first.version),
                     MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc__master_client_exist(f->a, "race"), 0);
    assert_int_equal(mc__master_client_put_end(f->b, "race", second.version), 0);
    assert_int_equal(mc__master_client_exist(f->a, "race"), 1);
    assert_int_equal(mc__master_client_put_end(f->b, "race", second.version), 0); /* repeated */
    assert_int_equal(mc__master_client_remove(f->a, "race", 1), 0);
}

static void test_lease_blocks_remove(void **state) {
    fixture_t *f = *state;
    mc__key_replicas_t r;
    assert_int_equal(mc__master_client_put_start(f->a, "leased", 4096, NULL, &r), 0);
    /* Unfinished puts are not removable without force. */
    assert_int_equal(mc__master_client_remove(f->a, "leased", 0), MC_ERR_REPLICA_IS_NOT_READY);
    assert_int_equal(mc__master_client_put_end(f->a, "leased", r.version), 0);
    assert_int_equal(mc__master_client_remove(f->a, "leased", 0), 0); /* no lease yet */
    assert_int_equal(mc__master_client_remove(f->a, "leased", 0), MC_ERR_OBJECT_NOT_FOUND);

    assert_int_equal(mc__master_client_put_start(f->a, "leased", 4096, NULL, &r), 0);
    assert_int_equal(mc__master_client_put_end(f->a, "leased", r.version), 0);
    assert_int_equal(mc__master_client_get_replica_list(f->b, "leased", &r), 0);
    assert_int_equal(mc__master_client_remove(f->a, "leased", 0), MC_ERR_OBJECT_HAS_LEASE);
    assert_int_equal(mc__master_client_exist(f->a, "leased"), 1);
    wait_lease_end();
    assert_int_equal(mc__master_client_remove(f->a, "leased", 0), 0);

    assert_int_equal(mc__master_client_put_start(f->a, "leased", 4096, NULL, &r), 0);
    assert_int_equal(mc__master_client_put_end(f->a, "leased", r.version), 0);
    assert_int_equal(mc__master_client_get_replica_list(f->b, "leased", &r), 0);
    assert_int_equal(mc__master_client_remove(f->a, "leased", 1), 0); /* force */
    assert_int_equal(mc__master_client_exist(f->a, "leased"), 0);
}

static void test_bad_input(void **state) {
    fixture_t *f = *state;
    mc__key_replicas_t r;
    mc__replicate_config_t cfg;
    char *long_key = malloc(MC_MP_MAX_KEY + 2);
    memset(long_key, 'x', MC_MP_MAX_KEY + 1);
    long_key[MC_MP_MAX_KEY + 1] = '\0';
    assert_int_equal(mc__master_client_put_start(f->a, "", 10, NULL, &r), MC_ERR_INVALID_KEY);
    assert_int_equal(mc__master_client_put_start(f->a, long_key, 10, NULL, &r), MC_ERR_INVALID_KEY);
    assert_int_equal(mc__master_client_exist(f->a, long_key), MC_ERR_INVALID_KEY);
    long_key[MC_MP_MAX_KEY] = '\0'; /* exactly the limit is fine */
    assert_int_equal(mc__master_client_put_start(f->a, long_key, 10, NULL, &r), 0);
    assert_int_equal(mc__master_client_put_end(f->a, long_key, r.version), 0);
    /* A soft pin longer than max_kv_soft_pin_ttl (24 h by default) is refused; at it, fine. */
    memset(&cfg, 0, sizeof(cfg));
    cfg.replica_num = 1;
    cfg.flags = MC_MP_CFG_SOFT_PIN;
    cfg.soft_pin_ttl_ms = 24ull * 3600 * 1000 + 1;
    assert_int_equal(mc__master_client_put_start(f->a, "pin-too-long", 10, &cfg, &r),
                     MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc__master_client_exist(f->a, "pin-too-long"), 0);
    cfg.soft_pin_ttl_ms = 24ull * 3600 * 1000;
    assert_int_equal(mc__master_client_put_start(f->a, "pin-max", 10, &cfg, &r), 0);
    assert_int_equal(mc__master_client_put_end(f->a, "pin-max", r.version), 0);
    assert_int_equal(mc__master_client_exist(f->a, long_key), 1);
    assert_int_equal(mc__master_client_remove(f->a, long_key, 0), 0);
    free(long_key);

    assert_int_equal(mc__master_client_put_start(f->a, "zero", 0, NULL, &r), MC_ERR_INVALID_PARAMS);
    /* larger than any segment could be: refused, not placed or evicted for */
    assert_int_equal(mc__master_client_put_start(f->a, "4eib", 1ull << 62, NULL, &r),
                     MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc__master_client_put_start(f->a, "max", UINT64_MAX, NULL, &r),
                     MC_ERR_INVALID_PARAMS);
    memset(&cfg, 0, sizeof(cfg));
    assert_int_equal(mc__master_client_put_start(f->a, "cfg0", 10, &cfg, &r),
                     MC_ERR_INVALID_PARAMS);
    cfg.replica_num = MC_MP_MAX_REPLICA_NUM + 1;
    assert_int_equal(mc__master_client_put_start(f->a, "cfg9", 10, &cfg, &r),
                     MC_ERR_INVALID_PARAMS);
    /* Larger than any segment: no eviction can help. */
    assert_int_equal(mc__master_client_put_start(f->a, "huge", 5 * MIB, NULL, &r),
                     MC_ERR_NO_AVAILABLE_HANDLE);
    assert_int_equal(mc__master_client_exist(f->a, "huge"), 0);
    assert_int_equal(mc__master_client_put_end(f->a, "nope", r.version), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc__master_client_put_revoke(f->a, "nope", r.version),
                     MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc__master_client_get_replica_list(f->a, "nope", &r), MC_ERR_OBJECT_NOT_FOUND);

    assert_int_equal(mc__master_client_put_start(f->a, "done", 10, NULL, &r), 0);
    assert_int_equal(mc__master_client_put_end(f->a, "done", r.version), 0);
    assert_int_equal(mc__master_client_put_end(f->a, "done", r.version), 0); /* idempotent */
    assert_int_equal(mc__master_client_put_revoke(f->a, "done", r.version), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc__master_client_remove(f->a, "done", 0), 0);

    assert_int_equal(mc__master_client_mount_segment(f->a, "bad", 0x1000, 0),
                     MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc__master_client_mount_segment(f->a, "bad", UINT64_MAX - 10, 4096),
                     MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc__master_client_mount_segment(f->a, "", 0x1000, 4096),
                     MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc__master_client_mount_segment(f->a, "hostB:2", SEG_B_BASE, 4 * MIB),
                     MC_ERR_SEGMENT_ALREADY_EXISTS);
    assert_int_equal(mc__master_client_mount_segment(f->a, "hostA:1", SEG_A_BASE, 4 * MIB), 0);
    assert_int_equal(mc__master_client_unmount_segment(f->a, "nowhere", 0x1000),
                     MC_ERR_SEGMENT_NOT_FOUND);
    /* The master still serves. */
    assert_int_equal(mc__master_client_heartbeat(f->a, NULL), 0);
}

/* Put slots: reserved ahead with no key, invisible until a commit names the key, the client's
 * own, at most their length, given back once; a commit of a taken key keeps the slot. */
static void test_put_slots(void **state) {
    fixture_t *f = *state;
    mc__key_replicas_t sl[3], r;
    mc__replicate_config_t cfg;
    const char *k1 = "slot-1", *k2 = "slot-2", *label = "-";
    uint64_t len, ver;
    int32_t code = 1;
    memset(&cfg, 0, sizeof(cfg));
    cfg.replica_num = 1;
    assert_int_equal(mc__master_client_put_reserve(f->a, 3, 4096, &cfg, sl), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(sl[i].code, 0);
        assert_int_equal(sl[i].n_replicas, 1);
        assert_int_equal(sl[i].replicas[0].status, MC_MP_REPLICA_PROCESSING);
        check_in_segment(&sl[i].replicas[0], 4096);
    }
    assert_true(sl[0].replicas[0].addr != sl[1].replicas[0].addr);
    assert_true(sl[0].version != sl[1].version && sl[1].version != sl[2].version);
    assert_int_equal(mc__master_client_exist(f->b, k1), 0);
    /* Committed: visible with the commit's length, in the slot's bytes. */
    len = 4000;
    assert_int_equal(mc__master_client_put_commit(f->a, 1, &k1, &len, &sl[0].version, &code), 0);
    assert_int_equal(code, 0);
    assert_int_equal(mc__master_client_exist(f->b, k1), 1);
    memset(&r, 0, sizeof(r));
    assert_int_equal(mc__master_client_get_replica_list(f->b, k1, &r), 0);
    assert_int_equal(r.size, 4000);
    assert_int_equal(r.replicas[0].addr, sl[0].replicas[0].addr);
    assert_int_equal(r.replicas[0].status, MC_MP_REPLICA_COMPLETE);
    /* A slot is used once. */
    assert_int_equal(mc__master_client_put_commit(f->a, 1, &k2, &len, &sl[0].version, &code), 0);
    assert_int_equal(code, MC_ERR_OBJECT_NOT_FOUND);
    /* The key exists: the first value stays, and so does the slot, for another key. */
    len = 10;
    assert_int_equal(mc__master_client_put_commit(f->a, 1, &k1, &len, &sl[1].version, &code), 0);
    assert_int_equal(code, MC_ERR_OBJECT_ALREADY_EXISTS);
    assert_int_equal(mc__master_client_get_replica_list(f->b, k1, &r), 0);
    assert_int_equal(r.size, 4000);
    assert_int_equal(mc__master_client_put_commit(f->a, 1, &k2, &len, &sl[1].version, &code), 0);
    assert_int_equal(code, 0);
    /* Another client's slot is not found; a value longer than its slot is refused and the slot
     * stays; a give-back frees it once. */
    assert_int_equal(mc__master_client_put_commit(f->b, 1, &k1, &len, &sl[2].version, &code), 0);
    assert_int_equal(code, MC_ERR_OBJECT_NOT_FOUND);
    len = 4097;
    assert_int_equal(mc__master_client_put_commit(f->a, 1, &label, &len, &sl[2].version, &code), 0);
    assert_int_equal(code, MC_ERR_INVALID_PARAMS);
    len = 0;
    assert_int_equal(mc__master_client_put_commit(f->a, 1, &label, &len, &sl[2].version, &code), 0);
    assert_int_equal(code, 0);
    assert_int_equal(mc__master_client_put_commit(f->a, 1, &label, &len, &sl[2].version, &code), 0);
    assert_int_equal(code, MC_ERR_OBJECT_NOT_FOUND);
    /* A slot that never was. */
    ver = UINT64_MAX;
    assert_int_equal(mc__master_client_put_commit(f->a, 1, &k1, &len, &ver, &code), 0);
    assert_int_equal(code, MC_ERR_OBJECT_NOT_FOUND);
    /* Bad reserves: each slot gets the code; the master still serves. */
    cfg.flags = MC_MP_CFG_PROMOTE;
    assert_int_equal(mc__master_client_put_reserve(f->a, 2, 4096, &cfg, sl), 0);
    assert_int_equal(sl[0].code, MC_ERR_INVALID_PARAMS);
    assert_int_equal(sl[1].code, MC_ERR_INVALID_PARAMS);
    cfg.flags = 0;
    cfg.replica_num = 0;
    assert_int_equal(mc__master_client_put_reserve(f->a, 1, 4096, &cfg, sl), 0);
    assert_int_equal(sl[0].code, MC_ERR_INVALID_PARAMS);
    cfg.replica_num = 1;
    assert_int_equal(mc__master_client_put_reserve(f->a, 1, 0, &cfg, sl), 0);
    assert_int_equal(sl[0].code, MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc__master_client_put_reserve(f->a, 1, 5 * MIB, &cfg, sl), 0);
    assert_int_equal(sl[0].code, MC_ERR_NO_AVAILABLE_HANDLE);
    assert_int_equal(mc__master_client_put_reserve(f->a, 0, 4096, &cfg, sl), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc__master_client_heartbeat(f->a, NULL), 0);
    wait_lease_end();
    assert_int_equal(mc__master_client_remove(f->a, k1, 0), 0);
    assert_int_equal(mc__master_client_remove(f->a, k2, 0), 0);
}

/* A labelled counter of the master's /metrics, as a number (the test fails when it is absent). */
static double metric(const fixture_t *f, const char *name) {
    double v = -1;
    assert_int_equal(mc_test_metric(f->m.metrics_port, name, &v), 0);
    return v;
}

/* PUT_COMMIT_FOR: a third process (the holder of the slots' bytes) commits the slots of two
 * clients in one request; each entry is served as its client's own PUT_COMMIT entry would be. */
static void test_put_commit_for(void **state) {
    enum { N = 7 };
    fixture_t *f = *state;
    mc__master_client_t *fw = NULL;
    mc__key_replicas_t sa[3], sb[2], r;
    mc__replicate_config_t cfg;
    uint8_t ids[N][MC_MP_CLIENT_ID_LEN];
    const uint8_t *ida = mc__master_client_id(f->a), *idb = mc__master_client_id(f->b);
    const char *keys[N] = {"fwd-a", "fwd-b", "fwd-taken", "fwd-gone", "fwd-long", "-", "fwd-wrong"};
    uint64_t lens[N] = {4000, 2048, 10, 10, 4097, 0, 10}, slots[N];
    int32_t codes[N], code = 1;
    const int32_t want[N] = {0,
                             0,
                             MC_ERR_OBJECT_ALREADY_EXISTS,
                             MC_ERR_OBJECT_NOT_FOUND,
                             MC_ERR_INVALID_PARAMS,
                             0,
                             MC_ERR_OBJECT_NOT_FOUND};
    const char *later = "fwd-later", *later2 = "fwd-later2";
    uint64_t len = 0;
    double reqs, starts, ends, ops, errs, single_ends;
    memset(&cfg, 0, sizeof(cfg));
    cfg.replica_num = 1;
    assert_int_equal(mc__master_client_connect(f->m.addr, CALL_MS, NULL, &fw), 0);
    assert_int_equal(mc__master_client_put_reserve(f->a, 3, 4096, &cfg, sa), 0);
    assert_int_equal(mc__master_client_put_reserve(f->b, 2, 4096, &cfg, sb), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(sa[i].code, 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(sb[i].code, 0);
    assert_int_equal(mc__master_client_put_start(f->b, "fwd-taken", 100, NULL, &r), 0);
    assert_int_equal(mc__master_client_put_end(f->b, "fwd-taken", r.version), 0);
    /* Entry by entry: a's, b's, a's on a taken key, b's on a slot that never was, a's too long
     * for its slot, b's give-back, and one naming b for a's slot. */
    memcpy(ids[0], ida, MC_MP_CLIENT_ID_LEN);
    slots[0] = sa[0].version;
    memcpy(ids[1], idb, MC_MP_CLIENT_ID_LEN);
    slots[1] = sb[0].version;
    memcpy(ids[2], ida, MC_MP_CLIENT_ID_LEN);
    slots[2] = sa[1].version;
    memcpy(ids[3], idb, MC_MP_CLIENT_ID_LEN);
    slots[3] = UINT64_MAX;
    memcpy(ids[4], ida, MC_MP_CLIENT_ID_LEN);
    slots[4] = sa[2].version;
    memcpy(ids[5], idb, MC_MP_CLIENT_ID_LEN);
    slots[5] = sb[1].version;
    memcpy(ids[6], idb, MC_MP_CLIENT_ID_LEN);
    slots[6] = sa[2].version;
    reqs = metric(f, "mooncake_master_requests_total{op=\"put_commit_for\"}");
    ops = metric(f, "mooncake_master_ops_total{op=\"put_commit_for\"}");
    errs = metric(f, "mooncake_master_errors_total{op=\"put_commit_for\"}");
    starts = metric(f, "mooncake_master_ops_total{op=\"put_start\"}");
    ends = metric(f, "mooncake_master_ops_total{op=\"put_end\"}");
    single_ends = metric(f, "master_put_end_requests_total");
    assert_int_equal(mc__master_client_put_commit_for(fw, N,
                                                      (const uint8_t(*)[MC_MP_CLIENT_ID_LEN])ids,
                                                      keys, lens, slots, codes),
                     0);
    for (int i = 0; i < N; i++)
        assert_int_equal(codes[i], want[i]);
    /* The committed objects, in their clients' slots, with their lengths; the taken key kept
     * its first value. */
    memset(&r, 0, sizeof(r));
    assert_int_equal(mc__master_client_get_replica_list(fw, "fwd-a", &r), 0);
    assert_int_equal(r.size, 4000);
    assert_int_equal(r.replicas[0].addr, sa[0].replicas[0].addr);
    assert_int_equal(r.replicas[0].status, MC_MP_REPLICA_COMPLETE);
    assert_int_equal(mc__master_client_get_replica_list(f->a, "fwd-b", &r), 0);
    assert_int_equal(r.size, 2048);
    assert_int_equal(r.replicas[0].addr, sb[0].replicas[0].addr);
    assert_int_equal(mc__master_client_get_replica_list(f->a, "fwd-taken", &r), 0);
    assert_int_equal(r.size, 100);
    for (int i = 3; i < N; i++)
        if (strcmp(keys[i], "-") != 0)
            assert_int_equal(mc__master_client_exist(fw, keys[i]), 0);
    /* The kept slots are still theirs: a's own commit of the taken-key slot, and a forwarded
     * one (a batch of one) of the slot that was too short and wrongly named. The given-back
     * slot is gone. */
    len = 100;
    assert_int_equal(mc__master_client_put_commit(f->a, 1, &later, &len, &sa[1].version, &code), 0);
    assert_int_equal(code, 0);
    len = 4096;
    code = 1;
    assert_int_equal(mc__master_client_put_commit_for(fw, 1,
                                                      (const uint8_t(*)[MC_MP_CLIENT_ID_LEN])ida,
                                                      &later2, &len, &sa[2].version, &code),
                     0);
    assert_int_equal(code, 0);
    assert_int_equal(mc__master_client_get_replica_list(f->b, later2, &r), 0);
    assert_int_equal(r.size, 4096);
    assert_int_equal(r.replicas[0].addr, sa[2].replicas[0].addr);
    len = 0;
    assert_int_equal(mc__master_client_put_commit(f->b, 1, &keys[5], &len, &sb[1].version, &code),
                     0);
    assert_int_equal(code, MC_ERR_OBJECT_NOT_FOUND);
    /* Each entry counts as PUT_COMMIT's do: a put start per entry that was a put (6 + 1 here,
     * the own commit is put_commit's), a put end per one finished (2 + 1); the messages and
     * their entries under op="put_commit_for". */
    assert_true(metric(f, "mooncake_master_requests_total{op=\"put_commit_for\"}") == reqs + 2);
    assert_true(metric(f, "mooncake_master_ops_total{op=\"put_commit_for\"}") == ops + N + 1);
    assert_true(metric(f, "mooncake_master_errors_total{op=\"put_commit_for\"}") == errs + 4);
    assert_true(metric(f, "mooncake_master_ops_total{op=\"put_start\"}") == starts + 6 + 1 + 1);
    assert_true(metric(f, "mooncake_master_ops_total{op=\"put_end\"}") == ends + 2 + 1 + 1);
    /* each forwarded entry is its client's single put, not an item of a batch */
    assert_true(metric(f, "master_put_end_requests_total") == single_ends + 2 + 1 + 1);
    /* The client's checks: no ids, nothing sent; no entries, nothing to do. */
    assert_int_equal(mc__master_client_put_commit_for(fw, 1, NULL, keys, lens, slots, codes),
                     MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc__master_client_put_commit_for(fw, 0, NULL, NULL, NULL, NULL, NULL), 0);
    /* The master still serves. */
    assert_int_equal(mc__master_client_heartbeat(fw, NULL), 0);
    mc__master_client_close(fw);
    wait_lease_end();
    assert_int_equal(mc__master_client_remove(f->a, "fwd-a", 0), 0);
    assert_int_equal(mc__master_client_remove(f->a, "fwd-b", 0), 0);
    assert_int_equal(mc__master_client_remove(f->a, "fwd-taken", 0), 0);
    assert_int_equal(mc__master_client_remove(f->a, later, 0), 0);
    assert_int_equal(mc__master_client_remove(f->a, later2, 0), 0);
}

static int cmp_u64(const void *x, const void *y) {
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

static void test_batches(void **state) {
    fixture_t *f = *state;
    enum { N = 200 };
    char names[N][16];
    const char *keys[N];
    uint64_t lens[N], addrs[N];
    int32_t codes[N];
    mc__key_replicas_t *reps = calloc(N, sizeof(*reps));
    uint64_t vers[N];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof(names[i]), "b%03d", i);
        keys[i] = names[i];
        lens[i] = 100 + (uint64_t)i * 37;
    }
    assert_int_equal(mc__master_client_batch_put_start(f->a, N, keys, lens, NULL, reps), 0);
    for (int i = 0; i < N; i++) {
        assert_int_equal(reps[i].code, 0);
        assert_int_equal(reps[i].n_replicas, 1);
        check_in_segment(&reps[i].replicas[0], lens[i]);
        /* Address space is global here (distinct bases), so overlap checks are direct. */
        addrs[i] = reps[i].replicas[0].addr;
    }
    qsort(addrs, N, sizeof(addrs[0]), cmp_u64);
    for (int i = 1; i < N; i++)
        assert_true(addrs[i] - addrs[i - 1] >= 100);
    assert_int_equal(mc__master_client_batch_exist(f->b, N, keys, codes), 0);
    for (int i = 0; i < N; i++)
        assert_int_equal(codes[i], 0);
    for (int i = 0; i < N; i++)
        vers[i] = reps[i].version;
    assert_int_equal(mc__master_client_batch_finish(f->a, 0, 1, N, keys, vers, codes), 0);
    for (int i = 0; i < N; i++)
        assert_int_equal(codes[i], 0);
    assert_int_equal(mc__master_client_batch_exist(f->b, N, keys, codes), 0);
    for (int i = 0; i < N; i++)
        assert_int_equal(codes[i], 1);
    memset(reps, 0, N * sizeof(*reps));
    assert_int_equal(mc__master_client_batch_get_replica_list(f->b, N, keys, reps), 0);
    for (int i = 0; i < N; i++) {
        assert_int_equal(reps[i].code, 0);
        assert_int_equal(reps[i].size, lens[i]);
    }
    wait_lease_end();
    assert_int_equal(mc__master_client_batch_remove(f->a, N, keys, 0, codes), 0);
    for (int i = 0; i < N; i++)
        assert_int_equal(codes[i], 0);
    assert_int_equal(mc__master_client_batch_exist(f->b, N, keys, codes), 0);
    for (int i = 0; i < N; i++)
        assert_int_equal(codes[i], 0);
    /* Mixed results in one batch. */
    assert_int_equal(mc__master_client_put_start(f->a, keys[0], 10, NULL, reps), 0);
    vers[0] = reps[0].version;
    assert_int_equal(mc__master_client_batch_finish(f->a, 0, 1, 2, keys, vers, codes), 0);
    assert_int_equal(codes[0], 0);
    assert_int_equal(codes[1], MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc__master_client_remove(f->a, keys[0], 1), 0);
    free(reps);
}

static void test_replicas_distinct(void **state) {
    fixture_t *f = *state;
    mc__key_replicas_t r;
    mc__replicate_config_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.replica_num = 2;
    for (int i = 0; i < 10; i++) {
        char key[16];
        snprintf(key, sizeof(key), "r2-%d", i);
        assert_int_equal(mc__master_client_put_start(f->a, key, 5000, &cfg, &r), 0);
        assert_int_equal(r.n_replicas, 2);
        assert_string_not_equal(r.replicas[0].segment_name, r.replicas[1].segment_name);
        check_in_segment(&r.replicas[0], 5000);
        check_in_segment(&r.replicas[1], 5000);
        assert_int_equal(mc__master_client_put_end(f->a, key, r.version), 0);
        assert_int_equal(mc__master_client_get_replica_list(f->b, key, &r), 0);
        assert_int_equal(r.n_replicas, 2);
    }
    /* Best effort: 3 asked, 2 segments exist. */
    cfg.replica_num = 3;
    assert_int_equal(mc__master_client_put_start(f->a, "r3", 5000, &cfg, &r), 0);
    assert_int_equal(r.n_replicas, 2);
    assert_int_equal(mc__master_client_put_revoke(f->a, "r3", r.version), 0);
    assert_int_equal(mc__master_client_exist(f->a, "r3"), 0);
    /* Preferred segment honoured. */
    cfg.replica_num = 1;
    cfg.n_preferred = 1;
    cfg.preferred[0].p = (const uint8_t *)"hostB:2";
    cfg.preferred[0].len = 7;
    for (int i = 0; i < 5; i++) {
        char key[16];
        snprintf(key, sizeof(key), "pref-%d", i);
        assert_int_equal(mc__master_client_put_start(f->a, key, 100, &cfg, &r), 0);
        assert_string_equal(r.replicas[0].segment_name, "hostB:2");
        assert_int_equal(mc__master_client_put_revoke(f->a, key, r.version), 0);
    }
    /* Losing one segment leaves the other replica readable. */
    assert_int_equal(mc__master_client_unmount_segment(f->a, "hostA:1", SEG_A_BASE), 0);
    assert_int_equal(mc__master_client_get_replica_list(f->b, "r2-0", &r), 0);
    assert_int_equal(r.n_replicas, 1);
    assert_string_equal(r.replicas[0].segment_name, "hostB:2");
    assert_int_equal(mc__master_client_put_start(f->a, "afterA", 100, NULL, &r), 0);
    assert_string_equal(r.replicas[0].segment_name, "hostB:2");
    assert_int_equal(mc__master_client_put_revoke(f->a, "afterA", r.version), 0);
    /* Losing the last one drops the objects. */
    assert_int_equal(mc__master_client_unmount_segment(f->b, "hostB:2", SEG_B_BASE), 0);
    assert_int_equal(mc__master_client_exist(f->b, "r2-0"), 0);
    assert_int_equal(mc__master_client_put_start(f->a, "none", 100, NULL, &r),
                     MC_ERR_NO_AVAILABLE_HANDLE);
    /* Put the fixture back. */
    assert_int_equal(mc__master_client_mount_segment(f->a, "hostA:1", SEG_A_BASE, 4 * MIB), 0);
    assert_int_equal(mc__master_client_mount_segment(f->b, "hostB:2", SEG_B_BASE, 4 * MIB), 0);
}

static void test_revoke_frees_space(void **state) {
    fixture_t *f = *state;
    mc__key_replicas_t r;
    /* A whole-segment object twice on the same segment only fits if revoke freed it. */
    mc__replicate_config_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.replica_num = 2;
    for (int i = 0; i < 5; i++) {
        assert_int_equal(mc__master_client_put_start(f->a, "whole", 4 * MIB, &cfg, &r), 0);
        assert_int_equal(r.n_replicas, 2);
        assert_int_equal(mc__master_client_put_revoke(f->a, "whole", r.version), 0);
    }
}

static void test_remove_all(void **state) {
    fixture_t *f = *state;
    mc__key_replicas_t r, open;
    char key[16];
    for (int i = 0; i < 5; i++) {
        snprintf(key, sizeof(key), "ra-%d", i);
        assert_int_equal(mc__master_client_put_start(f->a, key, 64, NULL, &r), 0);
        assert_int_equal(mc__master_client_put_end(f->a, key, r.version), 0);
    }
    assert_int_equal(mc__master_client_put_start(f->a, "ra-open", 64, NULL, &open), 0);
    assert_int_equal(mc__master_client_get_replica_list(f->a, "ra-0", &r), 0);
    assert_int_equal(mc__master_client_remove_all(f->a, 0), 4);
    assert_int_equal(mc__master_client_exist(f->a, "ra-0"), 1);
    assert_int_equal(mc__master_client_remove_all(f->a, 1), 1);
    assert_int_equal(mc__master_client_exist(f->a, "ra-0"), 0);
    /* The unfinished put is untouched and can still finish. */
    assert_int_equal(mc__master_client_put_end(f->a, "ra-open", open.version), 0);
    assert_int_equal(mc__master_client_remove_all(f->a, 0), 1);
}

/* A put that eviction cannot make fit must fail with NO_AVAILABLE_HANDLE and leave every object
 * in place: evicting first and failing anyway would lose data for nothing. */
static void test_no_pointless_eviction(void **state) {
    fixture_t *f = *state;
    mc__key_replicas_t r;
    mc__replicate_config_t cfg;
    static const char *const segs[2] = {"hostA:1", "hostB:2"};
    const char *keys[4] = {"pin-A", "pin-B", "plain-A", "plain-B"};
    int32_t codes[4];
    for (int i = 0; i < 3; i++) {
        char key[16];
        snprintf(key, sizeof(key), "small-%d", i);
        assert_int_equal(mc__master_client_put_start(f->a, key, MIB, NULL, &r), 0);
        assert_int_equal(mc__master_client_put_end(f->a, key, r.version), 0);
    }
    /* Larger than every segment. */
    assert_int_equal(mc__master_client_put_start(f->a, "huge", 4 * MIB + 64, NULL, &r),
                     MC_ERR_NO_AVAILABLE_HANDLE);
    for (int i = 0; i < 3; i++) {
        char key[16];
        snprintf(key, sizeof(key), "small-%d", i);
        assert_int_equal(mc__master_client_exist(f->a, key), 1);
        assert_int_equal(mc__master_client_remove(f->a, key, 1), 0);
    }
    /* Fits a segment, but hard-pinned objects leave each only 1 MiB of which half is
     * evictable: 2 MiB cannot be made room for in either one. */
    memset(&cfg, 0, sizeof(cfg));
    cfg.replica_num = 1;
    cfg.n_preferred = 1;
    for (int i = 0; i < 4; i++) {
        cfg.flags = i < 2 ? MC_MP_CFG_HARD_PIN : 0;
        cfg.preferred[0].p = (const uint8_t *)segs[i % 2];
        cfg.preferred[0].len = 7;
        assert_int_equal(
            mc__master_client_put_start(f->a, keys[i], i < 2 ? 3 * MIB : MIB / 2, &cfg, &r), 0);
        assert_string_equal(r.replicas[0].segment_name, segs[i % 2]);
        assert_int_equal(mc__master_client_put_end(f->a, keys[i], r.version), 0);
    }
    assert_int_equal(mc__master_client_put_start(f->a, "two", 2 * MIB, NULL, &r),
                     MC_ERR_NO_AVAILABLE_HANDLE);
    assert_int_equal(mc__master_client_batch_exist(f->a, 4, keys, codes), 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(codes[i], 1);
    /* 1 MiB can be made room for: eviction runs and the put succeeds. */
    assert_int_equal(mc__master_client_put_start(f->a, "one", MIB, NULL, &r), 0);
    assert_int_equal(mc__master_client_put_revoke(f->a, "one", r.version), 0);
    assert_int_equal(mc__master_client_batch_exist(f->a, 2, keys, codes), 0);
    assert_int_equal(codes[0], 1);
    assert_int_equal(codes[1], 1);
    /* The pinned pair, and whichever plain object eviction left. */
    assert_true(mc__master_client_remove_all(f->a, 1) >= 2);
}

static void test_heartbeat(void **state) {
    fixture_t *f = *state;
    uint8_t st = 9;
    mc__master_client_t *c = NULL;
    assert_int_equal(mc__master_client_heartbeat(f->a, &st), 0);
    assert_int_equal(st, MC_MP_CLIENT_OK);
    /* A pure client (no segment) is fine from its first heartbeat on, every time. */
    assert_int_equal(mc__master_client_connect(f->m.addr, CALL_MS, NULL, &c), 0);
    for (int i = 0; i < 3; i++) {
        st = 9;
        assert_int_equal(mc__master_client_heartbeat(c, &st), 0);
        assert_int_equal(st, MC_MP_CLIENT_OK);
    }
    /* A segment the master holds is no reason to remount (losing one is: test_client_expiry). */
    assert_int_equal(mc__master_client_mount_segment(c, "hostC:3", 0x30000000ull, MIB), 0);
    assert_int_equal(mc__master_client_heartbeat(c, &st), 0);
    assert_int_equal(st, MC_MP_CLIENT_OK);
    assert_int_equal(mc__master_client_unmount_segment(c, "hostC:3", 0x30000000ull), 0);
    mc__master_client_close(c);
    assert_int_equal(mc__master_client_connect("127.0.0.1:notaport", 500, NULL, &c),
                     MC_ERR_INVALID_PARAMS);
}

/* A segment a client reports unreachable takes no placements until its owner heartbeats. */
static void test_unreachable_segments_take_no_placements(void **state) {
    fixture_t *f = *state;
    const char *a_name[] = {"hostA:1"};
    const char *both[] = {"hostA:1", "hostB:2"};
    const char *unknown[] = {"nowhere:9"};
    mc__replicate_config_t two = {.replica_num = 2};
    mc__key_replicas_t r;
    int32_t codes[2] = {1, 1};
    uint8_t st = 0;
    char key[32];
    assert_int_equal(mc__master_client_segment_unreachable(f->b, 1, unknown, codes), 0);
    assert_int_equal(codes[0], MC_ERR_SEGMENT_NOT_FOUND);
    assert_int_equal(mc__master_client_segment_unreachable(f->b, 1, a_name, codes), 0);
    assert_int_equal(codes[0], 0);
    for (int i = 0; i < 8; i++) {
        snprintf(key, sizeof(key), "unreach-%d", i);
        assert_int_equal(mc__master_client_put_start(f->b, key, 4096, &two, &r), 0);
        assert_int_equal(r.n_replicas, 1); /* best effort: only the reachable one */
        assert_string_equal(r.replicas[0].segment_name, "hostB:2");
        assert_int_equal(mc__master_client_put_revoke(f->b, key, r.version), 0);
    }
    /* its owner is alive after all: placements come back with its next heartbeat */
    assert_int_equal(mc__master_client_heartbeat(f->a, &st), 0);
    assert_int_equal(mc__master_client_put_start(f->b, "unreach-back", 4096, &two, &r), 0);
    assert_int_equal(r.n_replicas, 2);
    assert_int_equal(mc__master_client_put_revoke(f->b, "unreach-back", r.version), 0);
    /* nothing reachable: no placement at all */
    assert_int_equal(mc__master_client_segment_unreachable(f->a, 2, both, codes), 0);
    assert_int_equal(mc__master_client_put_start(f->b, "unreach-none", 4096, NULL, &r),
                     MC_ERR_NO_AVAILABLE_HANDLE);
    assert_int_equal(mc__master_client_heartbeat(f->a, &st), 0);
    assert_int_equal(mc__master_client_heartbeat(f->b, &st), 0);
    assert_int_equal(mc__master_client_put_start(f->b, "unreach-none", 4096, NULL, &r), 0);
    assert_int_equal(mc__master_client_put_revoke(f->b, "unreach-none", r.version), 0);
}

/* Mounts name their incarnation; aliases of mounted memory and absurd sizes are refused. */
static void test_mount_incarnations(void **state) {
    fixture_t *f = *state;
    mc__master_client_t *c = NULL, *d = NULL;
    mc__replicate_config_t cfg = {.replica_num = 1, .n_preferred = 1};
    mc__key_replicas_t r;
    const uint64_t base = 0x30000000ull;
    cfg.preferred[0].p = (const uint8_t *)"hostC:3";
    cfg.preferred[0].len = 7;
    assert_int_equal(mc__master_client_connect(f->m.addr, CALL_MS, NULL, &c), 0);
    assert_int_equal(mc__master_client_connect(f->m.addr, CALL_MS, NULL, &d), 0);
    assert_int_equal(mc__master_client_mount_segment_epoch(c, "hostC:3", base, MIB, 7), 0);
    assert_int_equal(mc__master_client_mount_segment_epoch(c, "hostC:3", base, MIB, 7), 0);
    assert_int_equal(mc__master_client_put_start(c, "inc-old", 4096, &cfg, &r), 0);
    assert_string_equal(r.replicas[0].segment_name, "hostC:3");
    assert_true(r.replicas[0].epoch == 7);
    /* another client's alias of the same memory, or an overlapping range of the owner's own */
    assert_int_equal(mc__master_client_mount_segment_epoch(d, "hostC:3", base + 4096, MIB, 9),
                     MC_ERR_SEGMENT_ALREADY_EXISTS);
    assert_int_equal(mc__master_client_mount_segment_epoch(d, "hostC:3", base, MIB, 7),
                     MC_ERR_SEGMENT_ALREADY_EXISTS);
    assert_int_equal(mc__master_client_mount_segment_epoch(c, "hostC:3", base - 4096, 8192, 7),
                     MC_ERR_SEGMENT_ALREADY_EXISTS);
    assert_int_equal(mc__master_client_mount_segment_epoch(d, "hostD:4", 0x1000, 1ull << 63, 1),
                     MC_ERR_INVALID_PARAMS);
    /* the owner's new incarnation replaces the old one, whose placements go with it */
    assert_int_equal(mc__master_client_mount_segment_epoch(c, "hostC:3", base, MIB, 8), 0);
    assert_int_equal(mc__master_client_put_end(c, "inc-old", r.version), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc__master_client_put_start(c, "inc-new", 4096, &cfg, &r), 0);
    assert_true(r.replicas[0].epoch == 8);
    assert_int_equal(mc__master_client_put_end(c, "inc-new", r.version), 0);
    assert_int_equal(mc__master_client_remove(c, "inc-new", 1), 0);
    assert_int_equal(mc__master_client_unmount_segment(c, "hostC:3", base), 0);
    mc__master_client_close(c);
    mc__master_client_close(d);
}

/* --- eviction, on a master of its own with a small pool --- */

/* Leases long enough for every step below to run while they hold on a loaded machine; the forced
 * removal must give their space back well before they would have ended. */
#define EVICT_LEASE_MS 30000

static int setup_evict(void **state) {
    static const char *const extra[] = {"--default_kv_lease_ttl=30000", NO_EXPIRY,
                                        "--eviction_high_watermark_ratio=1.0",
                                        "--eviction_ratio=0.05", NULL};
    return setup_with(state, extra, 10 * 4096);
}

static void test_eviction_lru_skips_leased(void **state) {
    fixture_t *f = *state;
    mc__key_replicas_t r;
    mc__replicate_config_t pin;
    char key[16];
    int32_t codes[24];
    const char *keys[24];
    uint64_t forced;
    int rc = 0;
    char names[24][16];
    /* Fill both segments: 20 blocks of 4 KiB, accessed in key order. */
    for (int i = 0; i < 20; i++) {
        snprintf(names[i], sizeof(names[i]), "e%02d", i);
        keys[i] = names[i];
        assert_int_equal(mc__master_client_put_start(f->a, names[i], 4096, NULL, &r), 0);
        assert_int_equal(mc__master_client_put_end(f->a, names[i], r.version), 0);
        usleep(3000);
    }
    /* e00 becomes leased (and most recently used); e01 is now the oldest unleased. */
    assert_int_equal(mc__master_client_get_replica_list(f->b, "e00", &r), 0);
    assert_int_equal(mc__master_client_put_start(f->a, "new0", 4096, NULL, &r), 0);
    assert_int_equal(mc__master_client_put_end(f->a, "new0", r.version), 0);
    assert_int_equal(mc__master_client_batch_exist(f->a, 20, keys, codes), 0);
    assert_int_equal(codes[0], 1);
    /* 5% of 80 KiB rounds to one 4 KiB block, but every eviction frees at least the need. */
    assert_int_equal(codes[1], 0);
    for (int i = 2; i < 20; i++)
        assert_int_equal(codes[i], 1);
    assert_int_equal(mc__master_client_put_start(f->a, "new1", 4096, NULL, &r), 0);
    assert_int_equal(mc__master_client_put_end(f->a, "new1", r.version), 0);
    assert_int_equal(mc__master_client_batch_exist(f->a, 20, keys, codes), 0);
    assert_int_equal(codes[0], 1);
    assert_int_equal(codes[2], 0);
    for (int i = 4; i < 20; i++)
        assert_int_equal(codes[i], 1);
    /* Hard-pinned objects are never evicted; leased ones neither: lease everything, and a new
     * put finds no room. */
    memset(&pin, 0, sizeof(pin));
    pin.replica_num = 1;
    pin.flags = MC_MP_CFG_HARD_PIN;
    snprintf(key, sizeof(key), "pinned");
    for (int i = 0; i < 20; i++)
        (void)mc__master_client_get_replica_list(f->b, names[i], &r);
    (void)mc__master_client_get_replica_list(f->b, "new0", &r);
    (void)mc__master_client_get_replica_list(f->b, "new1", &r);
    assert_int_equal(mc__master_client_put_start(f->a, key, 4096, &pin, &r),
                     MC_ERR_NO_AVAILABLE_HANDLE);
    /* Force takes the keys away, but answers only once no reader can start a read through a
     * location it cached from the gets just made (MC_MP_CACHED_LEASE_MS + slack after them),
     * and their space stays held until then. The monitor (every 100 ms) then frees it, before
     * the leases would have ended (polled: a loaded machine may take seconds, not 30). */
    forced = mc__now_ms();
    assert_int_equal(mc__master_client_remove_all(f->a, 1), 20);
    assert_true(mc__now_ms() - forced >= MC_MP_CACHED_LEASE_MS);
    assert_int_equal(mc__master_client_exist(f->a, names[3]), 0);
    do {
        rc = mc__master_client_put_start(f->a, key, 4096, &pin, &r);
        if (rc != MC_ERR_NO_AVAILABLE_HANDLE)
            break;
        usleep(50 * 1000);
    } while (mc__now_ms() - forced < EVICT_LEASE_MS - 2000);
    assert_int_equal(rc, 0);
    assert_true(mc__now_ms() - forced < EVICT_LEASE_MS - 1000);
    assert_int_equal(mc__master_client_put_end(f->a, key, r.version), 0);
    for (int i = 0; i < 19; i++) {
        assert_int_equal(mc__master_client_put_start(f->a, names[i], 4096, NULL, &r), 0);
        assert_int_equal(mc__master_client_put_end(f->a, names[i], r.version), 0);
    }
    for (int i = 0; i < 30; i++) {
        snprintf(key, sizeof(key), "more%d", i);
        assert_int_equal(mc__master_client_put_start(f->a, key, 4096, NULL, &r), 0);
        assert_int_equal(mc__master_client_put_end(f->a, key, r.version), 0);
    }
    assert_int_equal(mc__master_client_exist(f->a, "pinned"), 1);
}

/* Batched look-ups prefetch the table without its shards' locks (objects.c), while puts grow it:
 * a reader that loaded a bucket array just before a growth replaced it must find it still there.
 * The master of this test grows each shard's table from 64 buckets to 2048 while one client
 * looks up keys in batches, and must answer every batch and end with every key. */
#define GROW_KEYS 100000
#define GROW_BATCH 500

static int setup_growth(void **state) {
    static const char *const extra[] = {NO_EXPIRY, "--eviction_high_watermark_ratio=1.0", NULL};
    return setup_with(state, extra, 1ull << 32); /* room for every key (the bytes are not used) */
}

typedef struct reader {
    mc__master_client_t *c;
    _Atomic int stop;
    int rc;
} reader_t;

static void grow_key(char *out, size_t cap, long i) {
    snprintf(out, cap, "grow-%ld", i);
}

static void *grow_reader(void *arg) {
    reader_t *r = arg;
    char names[GROW_BATCH][24];
    const char *keys[GROW_BATCH];
    int32_t codes[GROW_BATCH];
    uint64_t seed = 12345;
    do { /* at least once, however late this thread gets a core */
        for (int i = 0; i < GROW_BATCH; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            grow_key(names[i], sizeof(names[i]), (long)((seed >> 20) % GROW_KEYS));
            keys[i] = names[i];
        }
        r->rc = mc__master_client_batch_exist(r->c, GROW_BATCH, keys, codes);
        for (int i = 0; r->rc == 0 && i < GROW_BATCH; i++)
            if (codes[i] != 0 && codes[i] != 1)
                r->rc = codes[i];
    } while (!atomic_load(&r->stop) && r->rc == 0);
    return NULL;
}

static void test_lookups_while_table_grows(void **state) {
    fixture_t *f = *state;
    char names[GROW_BATCH][24];
    const char *keys[GROW_BATCH];
    uint64_t lens[GROW_BATCH], vers[GROW_BATCH];
    int32_t codes[GROW_BATCH];
    mc__key_replicas_t *reps = calloc(GROW_BATCH, sizeof(*reps));
    reader_t rd = {.c = f->b};
    pthread_t t;
    assert_non_null(reps);
    assert_int_equal(pthread_create(&t, NULL, grow_reader, &rd), 0);
    /* Half the keys through put_start / put_end, half through put slots and their commits: the
     * two put paths that prefetch. */
    for (long done = 0; done < GROW_KEYS; done += GROW_BATCH) {
        int slots = done >= GROW_KEYS / 2;
        mc__replicate_config_t cfg = {.replica_num = 1};
        for (int i = 0; i < GROW_BATCH; i++) {
            grow_key(names[i], sizeof(names[i]), done + i);
            keys[i] = names[i];
            lens[i] = 64;
        }
        if (slots) {
            for (int i = 0; i < GROW_BATCH; i += 50)
                assert_int_equal(mc__master_client_put_reserve(f->a, 50, 64, &cfg, reps + i), 0);
        } else {
            assert_int_equal(
                mc__master_client_batch_put_start(f->a, GROW_BATCH, keys, lens, NULL, reps), 0);
        }
        for (int i = 0; i < GROW_BATCH; i++) {
            assert_int_equal(reps[i].code, 0);
            vers[i] = reps[i].version;
        }
        if (slots)
            assert_int_equal(
                mc__master_client_put_commit(f->a, GROW_BATCH, keys, lens, vers, codes), 0);
        else
            assert_int_equal(
                mc__master_client_batch_finish(f->a, 0, 1, GROW_BATCH, keys, vers, codes), 0);
        for (int i = 0; i < GROW_BATCH; i++)
            assert_int_equal(codes[i], 0);
    }
    atomic_store(&rd.stop, 1);
    pthread_join(t, NULL);
    assert_int_equal(rd.rc, 0);
    for (long done = 0; done < GROW_KEYS; done += GROW_BATCH) {
        for (int i = 0; i < GROW_BATCH; i++) {
            grow_key(names[i], sizeof(names[i]), done + i);
            keys[i] = names[i];
        }
        assert_int_equal(mc__master_client_batch_exist(f->b, GROW_BATCH, keys, codes), 0);
        for (int i = 0; i < GROW_BATCH; i++)
            assert_int_equal(codes[i], 1);
    }
    free(reps);
}

int main(int argc, char **argv) {
    const struct CMUnitTest ops[] = {
        cmocka_unit_test(test_two_phase_put_visibility),
        cmocka_unit_test(test_lease_blocks_remove),
        cmocka_unit_test(test_upsert_versions),
        cmocka_unit_test(test_put_end_names_its_placement),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_put_slots),
        cmocka_unit_test(test_put_commit_for),
        cmocka_unit_test(test_batches),
        cmocka_unit_test(test_replicas_distinct),
        cmocka_unit_test(test_revoke_frees_space),
        cmocka_unit_test(test_remove_all),
        cmocka_unit_test(test_heartbeat),
        cmocka_unit_test(test_no_pointless_eviction),
        cmocka_unit_test(test_unreachable_segments_take_no_placements),
        cmocka_unit_test(test_mount_incarnations),
    };
    const struct CMUnitTest evict[] = {
        cmocka_unit_test_setup_teardown(test_eviction_lru_skips_leased, setup_evict, teardown),
    };
    const struct CMUnitTest growth[] = {
        cmocka_unit_test_setup_teardown(test_lookups_while_table_grows, setup_growth, teardown),
    };
    int failed = 0;
    if (argc < 2) {
        fprintf(stderr, "usage: %s <path to mooncake_master>\n", argv[0]);
        return 2;
    }
    g_bin = argv[1];
    failed += cmocka_run_group_tests_name("store_master_ops", ops, setup, teardown);
    failed += cmocka_run_group_tests_name("store_master_evict", evict, NULL, NULL);
    failed += cmocka_run_group_tests_name("store_master_growth", growth, NULL, NULL);
    return failed;
}
