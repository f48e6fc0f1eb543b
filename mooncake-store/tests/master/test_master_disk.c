/* The master's side of the disk tier against a real mooncake_master process: announce, fetch and
 * done as a storage node sends them (the node's own side runs in the Python integration tests),
 * and how LOCAL_DISK copies show in replica lists, exist, put, remove, upsert and expiry. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "master_proc.h"
#include "mooncake/error.h"
#include "proto/disk_proto.h"
#include "proto/master_client.h"

static const char *g_bin;

#define SEG_BASE 0x10000000ull
#define MIB (1ull << 20)
#define ENDPOINT "127.0.0.1:16001"

typedef struct fixture {
    mc_test_master_t m;
    mc__master_client_t *node, *other, *reader;
} fixture_t;

static int start(void **state, const char *const *extra) {
    fixture_t *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(mc_test_master_start(g_bin, 0, extra, &f->m), 0);
    assert_int_equal(mc__master_client_connect(f->m.addr, 3000, NULL, &f->node), 0);
    assert_int_equal(mc__master_client_connect(f->m.addr, 3000, NULL, &f->other), 0);
    assert_int_equal(mc__master_client_connect(f->m.addr, 3000, NULL, &f->reader), 0);
    assert_int_equal(mc__master_client_mount_segment(f->node, "node:1", SEG_BASE, 4 * MIB), 0);
    *state = f;
    return 0;
}

static int setup(void **state) {
    static const char *const extra[] = {"--enable_offload", "--default_kv_lease_ttl=100",
                                        "--promotion_on_hit", "--promotion_admission_threshold=2",
                                        NULL};
    return start(state, extra);
}

static int teardown(void **state) {
    fixture_t *f = *state;
    mc__master_client_close(f->node);
    mc__master_client_close(f->other);
    mc__master_client_close(f->reader);
    assert_int_equal(mc_test_master_stop(&f->m, 0), 0);
    free(f);
    return 0;
}

/* --- the node's RPCs --- */

typedef struct codes {
    uint32_t n;
    int32_t *v;
} codes_t;

static int on_codes(void *ctx, const mc_frame_header_t *h, const uint8_t *body, size_t len) {
    codes_t *c = ctx;
    return mc__mp_decode_codes_reply(h, body, len, c->n, c->v);
}

typedef struct jobs {
    uint32_t n;
    mc__disk_job_t v[MC_DP_MAX_FETCH];
} jobs_t;

static int on_jobs(void *ctx, const mc_frame_header_t *h, const uint8_t *body, size_t len) {
    jobs_t *j = ctx;
    return mc__dp_decode_fetch_reply(h, body, len, MC_DP_MAX_FETCH, j->v, &j->n);
}

/* Announces keys (NULL-terminated, each of size bytes) in one batch; codes into codes. */
static int announce_many(mc__master_client_t *c, uint8_t flags, const char *endpoint, uint64_t id,
                         const char *const *keys, uint64_t size, int32_t *codes) {
    mc__mp_request_t r;
    mc__mp_str_t k[16];
    uint64_t lens[16];
    uint32_t n = 0;
    codes_t cc;
    while (keys[n]) {
        assert_true(n < 16);
        k[n] = (mc__mp_str_t){(const uint8_t *)keys[n], (uint32_t)strlen(keys[n])};
        lens[n] = size;
        n++;
    }
    cc = (codes_t){n, codes};
    memset(&r, 0, sizeof(r));
    r.type = MC_MP_DISK_ANNOUNCE;
    r.mount_flags = flags;
    r.segment_name.p = (const uint8_t *)endpoint;
    r.segment_name.len = (uint32_t)strlen(endpoint);
    r.size = 64 * MIB;
    r.base = id;
    r.n_keys = n;
    r.keys = k;
    r.value_lens = lens;
    return mc__master_client_call(c, &r, on_codes, &cc);
}

/* One key per call keeps most tests short: n 0 (key NULL) or 1. */
static int announce(mc__master_client_t *c, uint8_t flags, const char *endpoint, uint64_t id,
                    const char *key, uint64_t size, int32_t *code) {
    const char *keys[2] = {key, NULL};
    return announce_many(c, flags, endpoint, id, keys, size, code);
}

static int fetch(mc__master_client_t *c, jobs_t *j) {
    mc__mp_request_t r;
    memset(&r, 0, sizeof(r));
    memset(j, 0, sizeof(*j));
    r.type = MC_MP_DISK_FETCH;
    r.max_tasks = MC_DP_MAX_FETCH;
    return mc__master_client_call(c, &r, on_jobs, j);
}

static int done(mc__master_client_t *c, int ok, const char *key, uint64_t version, int32_t *code) {
    mc__mp_request_t r;
    mc__mp_str_t k = {(const uint8_t *)key, (uint32_t)strlen(key)};
    codes_t cc = {1, code};
    memset(&r, 0, sizeof(r));
    r.type = MC_MP_DISK_DONE;
    r.force = (uint8_t)ok;
    r.n_keys = 1;
    r.keys = &k;
    r.value_lens = &version;
    return mc__master_client_call(c, &r, on_codes, &cc);
}

static uint64_t put(mc__master_client_t *c, const char *key, uint64_t len, int upsert) {
    mc__key_replicas_t r;
    int32_t code = -1;
    assert_int_equal(mc__master_client_batch_start(c, upsert, 1, &key, &len, NULL, &r), 0);
    assert_int_equal(r.code, 0);
    assert_int_equal(mc__master_client_batch_finish(c, upsert, 1, 1, &key, &r.version, &code), 0);
    assert_int_equal(code, 0);
    return r.version;
}

/* The replica list of key: memory replicas counted in *mem, the disk one (if any) copied. */
static int replicas(mc__master_client_t *c, const char *key, int *mem, mc__replica_desc_t *disk,
                    uint64_t *size) {
    mc__key_replicas_t r;
    int rc = mc__master_client_get_replica_list(c, key, &r);
    *mem = 0;
    memset(disk, 0, sizeof(*disk));
    if (rc)
        return rc;
    *size = r.size;
    for (uint32_t i = 0; i < r.n_replicas; i++) {
        if (r.replicas[i].status == MC_MP_REPLICA_DISK)
            *disk = r.replicas[i];
        else
            (*mem)++;
    }
    return 0;
}

/* --- tests --- */

static void test_unknown_node_is_told_to_announce(void **state) {
    fixture_t *f = *state;
    jobs_t j;
    int32_t code = 0;
    assert_int_equal(fetch(f->node, &j), MC_ERR_CLIENT_NOT_FOUND);
    assert_int_equal(done(f->node, 1, "k", 1, &code), 0);
    assert_int_equal(code, MC_ERR_CLIENT_NOT_FOUND);
    /* A flag no node sends (RESET, DROP and END are all there are). */
    assert_int_equal(announce(f->node, 0x8, ENDPOINT, 7, NULL, 0, NULL), MC_ERR_INVALID_PARAMS);
    /* No endpoint: readers could not reach the copies. */
    assert_int_equal(announce(f->node, MC_DP_ANNOUNCE_RESET, "", 1, NULL, 0, NULL),
                     MC_ERR_INVALID_PARAMS);
    /* A drop from a node never announced names nothing. */
    assert_int_equal(announce(f->node, MC_DP_ANNOUNCE_DROP, "", 0, "k", 0, &code), 0);
    assert_int_equal(code, MC_ERR_CLIENT_NOT_FOUND);
    assert_int_equal(announce(f->node, MC_DP_ANNOUNCE_RESET, ENDPOINT, 7, NULL, 0, NULL), 0);
    assert_int_equal(fetch(f->node, &j), 0);
    assert_int_equal(j.n, 0);
}

static void test_announced_copies_are_objects(void **state) {
    fixture_t *f = *state;
    mc__key_replicas_t r;
    mc__replica_desc_t d;
    uint64_t size = 0;
    int mem = 0;
    int32_t code = -1;
    assert_int_equal(announce(f->node, MC_DP_ANNOUNCE_RESET, ENDPOINT, 7, "d1", 100, &code), 0);
    assert_int_equal(code, 0);
    assert_int_equal(replicas(f->reader, "d1", &mem, &d, &size), 0);
    assert_int_equal(mem, 0);
    assert_int_equal(size, 100);
    assert_string_equal(d.segment_name, ENDPOINT);
    assert_int_equal(d.size, 100);
    assert_int_equal(d.addr, 0);
    assert_int_equal(mc__master_client_exist(f->reader, "d1"), 1);
    /* It exists: a put keeps the first value (as for any key), an announce by another node of
     * the same key is refused (that node deletes its copy). */
    assert_int_equal(mc__master_client_put_start(f->reader, "d1", 10, NULL, &r),
                     MC_ERR_OBJECT_ALREADY_EXISTS);
    assert_int_equal(
        announce(f->other, MC_DP_ANNOUNCE_RESET, "127.0.0.1:16002", 8, "d1", 100, &code), 0);
    assert_int_equal(code, MC_ERR_OBJECT_ALREADY_EXISTS);
    /* A key the master holds in memory (never offloaded) is not taken from a disk either. */
    put(f->reader, "mem1", 64, 0);
    assert_int_equal(announce(f->node, 0, ENDPOINT, 7, "mem1", 64, &code), 0);
    assert_int_equal(code, MC_ERR_OBJECT_ALREADY_EXISTS);
    /* The node's LRU let d1 go: gone for readers. */
    assert_int_equal(announce(f->node, MC_DP_ANNOUNCE_DROP, "", 0, "d1", 0, &code), 0);
    assert_int_equal(code, 0);
    assert_int_equal(mc__master_client_exist(f->reader, "d1"), 0);
    assert_int_equal(replicas(f->reader, "d1", &mem, &d, &size), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(announce(f->node, MC_DP_ANNOUNCE_DROP, "", 0, "d1", 0, &code), 0);
    assert_int_equal(code, MC_ERR_OBJECT_NOT_FOUND);
}

/* unmount_local_disk_segment: LEAVE takes the node's disk off (its copies detached, its work
 * gone) until it announces again; bad forms are refused and change nothing. */
static void test_leave_takes_the_disk_off(void **state) {
    fixture_t *f = *state;
    mc__replica_desc_t d;
    uint64_t size = 0;
    int mem = 0;
    int32_t code = -1;
    jobs_t j;
    assert_int_equal(announce(f->node, MC_DP_ANNOUNCE_RESET, ENDPOINT, 7, "l1", 100, &code), 0);
    assert_int_equal(code, 0);
    /* LEAVE names no keys and goes with nothing but SHARED; an unknown flag is refused. */
    assert_int_equal(announce(f->node, MC_DP_ANNOUNCE_LEAVE, "", 0, "l1", 0, &code),
                     MC_ERR_INVALID_PARAMS);
    assert_int_equal(
        announce(f->node, MC_DP_ANNOUNCE_LEAVE | MC_DP_ANNOUNCE_RESET, "", 0, NULL, 0, NULL),
        MC_ERR_INVALID_PARAMS);
    assert_int_equal(announce(f->node, 0x20, ENDPOINT, 7, NULL, 0, NULL), MC_ERR_INVALID_PARAMS);
    assert_int_equal(replicas(f->reader, "l1", &mem, &d, &size), 0);
    assert_string_equal(d.segment_name, ENDPOINT);
    /* A client with no disk leaves nothing: done. */
    assert_int_equal(announce(f->other, MC_DP_ANNOUNCE_LEAVE, "", 0, NULL, 0, NULL), 0);
    assert_int_equal(replicas(f->reader, "l1", &mem, &d, &size), 0);
    assert_int_equal(announce(f->node, MC_DP_ANNOUNCE_LEAVE, "", 0, NULL, 0, NULL), 0);
    assert_int_equal(mc__master_client_exist(f->reader, "l1"), 0);
    assert_int_equal(replicas(f->reader, "l1", &mem, &d, &size), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(fetch(f->node, &j), MC_ERR_CLIENT_NOT_FOUND);
    assert_int_equal(announce(f->node, MC_DP_ANNOUNCE_LEAVE, "", 0, NULL, 0, NULL), 0);
    /* The same disk announcing again (a restarted node) is served again. */
    assert_int_equal(announce(f->node, MC_DP_ANNOUNCE_RESET, ENDPOINT, 7, "l1", 100, &code), 0);
    assert_int_equal(code, 0);
    assert_int_equal(replicas(f->reader, "l1", &mem, &d, &size), 0);
    assert_string_equal(d.segment_name, ENDPOINT);
    assert_int_equal(size, 100);
}

static void test_offload_done_and_stale(void **state) {
    fixture_t *f = *state;
    mc__replica_desc_t d;
    uint64_t size = 0, v;
    int mem = 0;
    int32_t code = -1;
    jobs_t j;
    assert_int_equal(announce(f->node, MC_DP_ANNOUNCE_RESET, ENDPOINT, 7, NULL, 0, NULL), 0);
    /* Put on the node's segment: the node is asked to copy it, from its own memory. */
    v = put(f->reader, "o1", 5000, 0);
    assert_int_equal(fetch(f->node, &j), 0);
    assert_int_equal(j.n, 1);
    assert_int_equal(j.v[0].kind, MC_DP_JOB_OFFLOAD);
    assert_string_equal(j.v[0].key, "o1");
    assert_int_equal(j.v[0].size, 5000);
    assert_int_equal(j.v[0].version, v);
    assert_string_equal(j.v[0].src.segment_name, "node:1");
    assert_true(j.v[0].src.addr >= SEG_BASE && j.v[0].src.addr + 5000 <= SEG_BASE + 4 * MIB);
    /* Handed out once. */
    assert_int_equal(fetch(f->node, &j), 0);
    assert_int_equal(j.n, 0);
    /* Not yet durable: memory only. */
    assert_int_equal(replicas(f->reader, "o1", &mem, &d, &size), 0);
    assert_int_equal(mem, 1);
    assert_string_equal(d.segment_name, "");
    /* A report naming another version records nothing. */
    assert_int_equal(done(f->node, 1, "o1", v + 100, &code), 0);
    assert_int_equal(code, MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(done(f->node, 1, "o1", v, &code), 0);
    assert_int_equal(code, 0);
    assert_int_equal(replicas(f->reader, "o1", &mem, &d, &size), 0);
    assert_int_equal(mem, 1);
    assert_string_equal(d.segment_name, ENDPOINT);
    assert_int_equal(d.size, 5000);
    /* Removed while a second copy was being made: that copy must go. */
    v = put(f->reader, "o2", 100, 0);
    assert_int_equal(fetch(f->node, &j), 0);
    assert_int_equal(j.n, 1);
    assert_int_equal(mc__master_client_remove(f->reader, "o2", 1), 0);
    assert_int_equal(done(f->node, 1, "o2", v, &code), 0);
    assert_int_equal(code, MC_ERR_OBJECT_NOT_FOUND);
    /* A failed offload leaves the object in memory, evictable as any. */
    v = put(f->reader, "o3", 100, 0);
    assert_int_equal(fetch(f->node, &j), 0);
    assert_int_equal(done(f->node, 0, "o3", v, &code), 0);
    assert_int_equal(code, 0);
    assert_int_equal(replicas(f->reader, "o3", &mem, &d, &size), 0);
    assert_string_equal(d.segment_name, "");
}

static void test_remove_upsert_and_leave_free_the_disk(void **state) {
    fixture_t *f = *state;
    mc__replica_desc_t d;
    uint64_t size = 0, v;
    int mem = 0;
    int32_t code = -1;
    jobs_t j;
    assert_int_equal(announce(f->node, MC_DP_ANNOUNCE_RESET, ENDPOINT, 7, "r1", 10, &code), 0);
    assert_int_equal(announce(f->node, 0, ENDPOINT, 7, "r2", 10, &code), 0);
    assert_int_equal(announce(f->node, 0, ENDPOINT, 7, "r3", 10, &code), 0);
    assert_int_equal(announce(f->node, 0, ENDPOINT, 7, "r4", 10, &code), 0);
    /* Remove of a disk-only object: the node is told to delete it. */
    assert_int_equal(mc__master_client_remove(f->reader, "r1", 0), 0);
    assert_int_equal(mc__master_client_remove(f->reader, "r1", 0), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(fetch(f->node, &j), 0);
    assert_int_equal(j.n, 1);
    assert_int_equal(j.v[0].kind, MC_DP_JOB_DELETE);
    assert_string_equal(j.v[0].key, "r1");
    /* Upsert of a disk-only object: the old copy is deleted, the new value offloaded. */
    v = put(f->reader, "r2", 300, 1);
    assert_int_equal(fetch(f->node, &j), 0);
    assert_int_equal(j.n, 2);
    assert_int_equal(j.v[0].kind, MC_DP_JOB_DELETE);
    assert_string_equal(j.v[0].key, "r2");
    assert_int_equal(j.v[1].kind, MC_DP_JOB_OFFLOAD);
    assert_int_equal(j.v[1].version, v);
    assert_int_equal(replicas(f->reader, "r2", &mem, &d, &size), 0);
    assert_int_equal(size, 300);
    assert_string_equal(d.segment_name, "");
    /* remove_all counts what only the disk holds. */
    assert_int_equal(mc__master_client_remove_by_regex(f->reader, "^r3$", 0), 1);
    assert_int_equal(mc__master_client_exist(f->reader, "r3"), 0);
    /* A restarted node (a new client, the same disk id) replaces its old self at once; a key
     * this disk has no record of (r5: this master adopted the disk's copies at its first
     * announce only) is refused. */
    assert_int_equal(
        announce(f->other, MC_DP_ANNOUNCE_RESET, "127.0.0.1:16009", 7, "r4", 10, &code), 0);
    assert_int_equal(code, 0);
    assert_int_equal(replicas(f->reader, "r4", &mem, &d, &size), 0);
    assert_string_equal(d.segment_name, "127.0.0.1:16009");
    assert_int_equal(announce(f->other, 0, "127.0.0.1:16009", 7, "r5", 10, &code), 0);
    assert_int_equal(code, MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc__master_client_exist(f->reader, "r5"), 0);
    assert_int_equal(fetch(f->node, &j), MC_ERR_CLIENT_NOT_FOUND);
    /* A node that leaves takes its copies out of the view. */
    assert_int_equal(mc__master_client_unregister(f->other), 0);
    assert_int_equal(mc__master_client_exist(f->reader, "r4"), 0);
}

static void test_promotion_on_hit(void **state) {
    fixture_t *f = *state;
    mc__replicate_config_t cfg;
    mc__key_replicas_t r;
    mc__replica_desc_t d;
    const char *key = "p1";
    uint64_t size = 0, len = 4096;
    int mem = 0;
    int32_t code = -1;
    jobs_t j;
    assert_int_equal(announce(f->node, MC_DP_ANNOUNCE_RESET, ENDPOINT, 7, key, len, &code), 0);
    assert_int_equal(replicas(f->reader, key, &mem, &d, &size), 0); /* hit 1 */
    assert_int_equal(fetch(f->node, &j), 0);
    assert_int_equal(j.n, 0);
    assert_int_equal(replicas(f->reader, key, &mem, &d, &size), 0); /* hit 2: admitted */
    assert_int_equal(fetch(f->node, &j), 0);
    assert_int_equal(j.n, 1);
    assert_int_equal(j.v[0].kind, MC_DP_JOB_PROMOTE);
    assert_string_equal(j.v[0].key, key);
    assert_int_equal(replicas(f->reader, key, &mem, &d, &size), 0); /* queued once */
    assert_int_equal(fetch(f->node, &j), 0);
    assert_int_equal(j.n, 0);
    /* The node puts it back with the promote flag: allowed although the key exists (on disk),
     * and the disk copy stays. A plain put still finds the key taken. */
    memset(&cfg, 0, sizeof(cfg));
    cfg.replica_num = 1;
    assert_int_equal(mc__master_client_batch_start(f->node, 0, 1, &key, &len, &cfg, &r), 0);
    assert_int_equal(r.code, MC_ERR_OBJECT_ALREADY_EXISTS);
    cfg.flags = MC_MP_CFG_PROMOTE;
    assert_int_equal(mc__master_client_batch_start(f->node, 0, 1, &key, &len, &cfg, &r), 0);
    assert_int_equal(r.code, 0);
    assert_int_equal(mc__master_client_batch_finish(f->node, 0, 1, 1, &key, &r.version, &code), 0);
    assert_int_equal(code, 0);
    assert_int_equal(replicas(f->reader, key, &mem, &d, &size), 0);
    assert_int_equal(mem, 1);
    assert_string_equal(d.segment_name, ENDPOINT);
    /* Promoted objects are not offloaded again, and nothing is deleted. */
    assert_int_equal(fetch(f->node, &j), 0);
    assert_int_equal(j.n, 0);
    /* A promotion of what no disk holds is refused; upserts cannot promote. */
    key = "nowhere";
    assert_int_equal(mc__master_client_batch_start(f->node, 0, 1, &key, &len, &cfg, &r), 0);
    assert_int_equal(r.code, MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc__master_client_batch_start(f->node, 1, 1, &key, &len, &cfg, &r), 0);
    assert_int_equal(r.code, MC_ERR_INVALID_PARAMS);
}

/* Eviction never drops an object whose offload is still running: with the pool full of such
 * objects a put waits for the node (bounded), and fails cleanly when the node never reports. */
static void test_eviction_waits_for_offloads(void **state) {
    fixture_t *f = *state;
    mc__key_replicas_t r;
    jobs_t j;
    char key[32];
    int32_t code = -1;
    assert_int_equal(announce(f->node, MC_DP_ANNOUNCE_RESET, ENDPOINT, 7, NULL, 0, NULL), 0);
    for (int i = 0; i < 4; i++) {
        snprintf(key, sizeof(key), "full%d", i);
        put(f->reader, key, MIB, 0);
    }
    assert_int_equal(fetch(f->node, &j), 0);
    assert_int_equal(j.n, 4);
    /* Nothing reported: nothing may be evicted, the put fails after its wait. */
    assert_int_equal(mc__master_client_put_start(f->reader, "more", MIB, NULL, &r),
                     MC_ERR_NO_AVAILABLE_HANDLE);
    for (int i = 0; i < 4; i++)
        assert_int_equal(mc__master_client_exist(f->reader, j.v[i].key), 1);
    /* Once durable they make room; the evicted ones stay readable from disk. */
    for (int i = 0; i < 4; i++) {
        assert_int_equal(done(f->node, 1, j.v[i].key, j.v[i].version, &code), 0);
        assert_int_equal(code, 0);
    }
    assert_int_equal(mc__master_client_put_start(f->reader, "more", MIB, NULL, &r), 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(mc__master_client_exist(f->reader, j.v[i].key), 1);
}

/* Promotion's watermark gate (the reference's): a read of a disk-only object that clears the
 * admission threshold while memory is above the eviction high watermark queues nothing; the
 * object stays a candidate and is promoted, with no further read, once memory has room. */
static void test_promotion_waits_for_room(void **state) {
    fixture_t *f = *state;
    mc__replica_desc_t d;
    uint64_t size = 0;
    int mem = 0;
    int32_t code = -1;
    jobs_t j;
    int promoted = 0;
    assert_int_equal(announce(f->node, MC_DP_ANNOUNCE_RESET, ENDPOINT, 7, "w1", MIB, &code), 0);
    assert_int_equal(code, 0);
    /* 3.7 MiB of the node's 4: above the 0.9 watermark (the offloads queued keep it there). */
    put(f->reader, "f1", MIB, 0);
    put(f->reader, "f2", MIB, 0);
    put(f->reader, "f3", MIB, 0);
    put(f->reader, "f4", 700 * 1024, 0);
    assert_int_equal(replicas(f->reader, "w1", &mem, &d, &size), 0);
    assert_int_equal(replicas(f->reader, "w1", &mem, &d, &size), 0); /* threshold cleared */
    assert_int_equal(fetch(f->node, &j), 0);
    for (uint32_t i = 0; i < j.n; i++)
        assert_int_equal(j.v[i].kind, MC_DP_JOB_OFFLOAD);
    usleep(300 * 1000);
    assert_int_equal(fetch(f->node, &j), 0);
    assert_int_equal(j.n, 0);
    /* Room again: the monitor promotes the candidate by itself. */
    assert_int_equal(mc__master_client_remove(f->reader, "f1", 1), 0);
    assert_int_equal(mc__master_client_remove(f->reader, "f2", 1), 0);
    for (int t = 0; t < 50 && !promoted; t++) {
        usleep(100 * 1000);
        assert_int_equal(fetch(f->node, &j), 0);
        for (uint32_t i = 0; i < j.n; i++)
            if (j.v[i].kind == MC_DP_JOB_PROMOTE && strcmp(j.v[i].key, "w1") == 0)
                promoted = 1;
            else
                assert_int_equal(j.v[i].kind, MC_DP_JOB_DELETE);
    }
    assert_true(promoted);
}

/* A master without a log: a disk-only object removed (or replaced) while its node was away
 * stays removed when the node comes back; the rest come back; a copy of a size other than the
 * record's is refused; END forgets what the disk no longer has. */
static void test_removal_while_the_node_is_away(void **state) {
    fixture_t *f = *state;
    static const char *const first[] = {"a1", "a2", "a3", "a4", "a5", NULL};
    static const char *const back[] = {"a1", "a2", "a3", "a4", "stranger", NULL};
    mc__master_client_t *again = NULL;
    mc__replica_desc_t d;
    double gauge = -1;
    uint64_t size = 0;
    int mem = 0;
    int32_t codes[8];
    assert_int_equal(announce_many(f->other, MC_DP_ANNOUNCE_RESET | MC_DP_ANNOUNCE_END,
                                   "127.0.0.1:16003", 9, first, 100, codes),
                     0);
    for (int i = 0; i < 5; i++)
        assert_int_equal(codes[i], 0);
    /* The node leaves: nothing of its disk is served, but the master remembers its records. */
    assert_int_equal(mc__master_client_unregister(f->other), 0);
    assert_int_equal(mc_test_metric(f->m.metrics_port, "mooncake_disk_detached_objects", &gauge),
                     0);
    assert_true(gauge == 5.0);
    assert_int_equal(mc_test_metric(f->m.metrics_port, "mooncake_disk_objects", &gauge), 0);
    assert_true(gauge == 0.0);
    assert_int_equal(mc__master_client_exist(f->reader, "a1"), 0);
    assert_int_equal(replicas(f->reader, "a1", &mem, &d, &size), MC_ERR_OBJECT_NOT_FOUND);
    /* While it is away: a2 removed, a3 replaced by a value in memory, a4 removed and put
     * again (in memory). A removal of a copy no node can be told of still succeeds. */
    assert_int_equal(mc__master_client_remove(f->reader, "a2", 0), 0);
    assert_int_equal(mc__master_client_remove(f->reader, "a2", 0), MC_ERR_OBJECT_NOT_FOUND);
    put(f->reader, "a3", 64, 0);
    assert_int_equal(mc__master_client_remove(f->reader, "a4", 0), 0);
    put(f->reader, "a4", 100, 0);
    /* Back, as a new client with the same disk (it lost a5 meanwhile). */
    assert_int_equal(mc__master_client_connect(f->m.addr, 3000, NULL, &again), 0);
    assert_int_equal(announce_many(again, MC_DP_ANNOUNCE_RESET | MC_DP_ANNOUNCE_END,
                                   "127.0.0.1:16004", 9, back, 100, codes),
                     0);
    assert_int_equal(codes[0], 0);
    assert_int_equal(codes[1], MC_ERR_OBJECT_NOT_FOUND);      /* removed: never back */
    assert_int_equal(codes[2], MC_ERR_OBJECT_ALREADY_EXISTS); /* replaced */
    assert_int_equal(codes[3], MC_ERR_OBJECT_ALREADY_EXISTS);
    assert_int_equal(codes[4], MC_ERR_OBJECT_NOT_FOUND); /* no record of it: not adopted now */
    /* a1 attached again; a5 (not announced) forgotten at END; the rest went. */
    assert_int_equal(mc_test_metric(f->m.metrics_port, "mooncake_disk_detached_objects", &gauge),
                     0);
    assert_true(gauge == 0.0);
    assert_int_equal(mc_test_metric(f->m.metrics_port, "mooncake_disk_objects", &gauge), 0);
    assert_true(gauge == 1.0);
    assert_int_equal(replicas(f->reader, "a1", &mem, &d, &size), 0);
    assert_int_equal(mem, 0);
    assert_string_equal(d.segment_name, "127.0.0.1:16004");
    assert_int_equal(mc__master_client_exist(f->reader, "a2"), 0);
    assert_int_equal(mc__master_client_exist(f->reader, "stranger"), 0);
    assert_int_equal(replicas(f->reader, "a3", &mem, &d, &size), 0);
    assert_int_equal(size, 64);
    assert_string_equal(d.segment_name, "");
    /* a5's record went with the END: a later announce of it is refused, its key is free. */
    assert_int_equal(announce(again, 0, "127.0.0.1:16004", 9, "a5", 100, &codes[0]), 0);
    assert_int_equal(codes[0], MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc__master_client_remove(f->reader, "a5", 0), MC_ERR_OBJECT_NOT_FOUND);
    /* A record of another size is not this copy. */
    assert_int_equal(mc__master_client_unregister(again), 0);
    mc__master_client_close(again);
    assert_int_equal(mc__master_client_connect(f->m.addr, 3000, NULL, &again), 0);
    assert_int_equal(
        announce(again, MC_DP_ANNOUNCE_RESET, "127.0.0.1:16004", 9, "a1", 99, &codes[0]), 0);
    assert_int_equal(codes[0], MC_ERR_OBJECT_ALREADY_EXISTS);
    mc__master_client_close(again);
}

/* Offloads recorded in the metadata log: a master restarted (kill -9) with --metadata_dir
 * serves the disk-only objects again once the node announces them, and what was removed before
 * the restart (while the node was away, or with its DELETE still queued) stays removed. */
static void test_restart_with_metadata_log(void **state) {
    (void)state;
    char dir[] = "/tmp/mc_disk_meta_XXXXXX";
    char arg[64];
    const char *extra[] = {"--enable_offload", "--default_kv_lease_ttl=100", arg, NULL};
    static const char *const keys[] = {"x1", "x2", "x3", "x4", NULL};
    mc_test_master_t m;
    mc__master_client_t *node = NULL, *reader = NULL;
    mc__replica_desc_t d;
    uint64_t size = 0;
    int mem = 0;
    int32_t code = -1, codes[8];
    jobs_t j;
    assert_non_null(mkdtemp(dir));
    snprintf(arg, sizeof(arg), "--metadata_dir=%s", dir);
    assert_int_equal(mc_test_master_start(g_bin, 0, extra, &m), 0);
    assert_int_equal(mc__master_client_connect(m.addr, 3000, NULL, &node), 0);
    assert_int_equal(mc__master_client_connect(m.addr, 3000, NULL, &reader), 0);
    assert_int_equal(mc__master_client_mount_segment(node, "node:1", SEG_BASE, 4 * MIB), 0);
    /* A master with a log adopts nothing it has no record of, even at a disk's first announce. */
    assert_int_equal(
        announce(node, MC_DP_ANNOUNCE_RESET | MC_DP_ANNOUNCE_END, ENDPOINT, 7, "old", 10, &code),
        0);
    assert_int_equal(code, MC_ERR_OBJECT_NOT_FOUND);
    for (int i = 0; keys[i]; i++)
        put(reader, keys[i], 1000 + (uint64_t)i, 0);
    assert_int_equal(fetch(node, &j), 0);
    assert_int_equal(j.n, 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(done(node, 1, j.v[i].key, j.v[i].version, &code), 0);
        assert_int_equal(code, 0);
    }
    /* x4 removed with the node up, its DELETE never fetched before the master dies. */
    assert_int_equal(mc__master_client_remove(reader, "x4", 1), 0);
    /* The node leaves (its memory with it): x1..x3 live on its disk only, out of reach. */
    assert_int_equal(mc__master_client_unregister(node), 0);
    mc__master_client_close(node);
    assert_int_equal(mc__master_client_exist(reader, "x1"), 0);
    /* x2 removed while the node is away. */
    assert_int_equal(mc__master_client_remove(reader, "x2", 0), 0);
    mc__master_client_close(reader);
    mc_test_master_stop(&m, 1);

    assert_int_equal(mc_test_master_start(g_bin, 0, extra, &m), 0);
    assert_int_equal(mc__master_client_connect(m.addr, 3000, NULL, &node), 0);
    assert_int_equal(mc__master_client_connect(m.addr, 3000, NULL, &reader), 0);
    assert_int_equal(mc__master_client_exist(reader, "x1"), 0); /* not before its node is back */
    assert_int_equal(fetch(node, &j), MC_ERR_CLIENT_NOT_FOUND);
    {
        uint64_t lens[4] = {1000, 1001, 1002, 1003};
        mc__mp_str_t k[4];
        mc__mp_request_t r;
        codes_t cc = {4, codes};
        for (int i = 0; i < 4; i++)
            k[i] = (mc__mp_str_t){(const uint8_t *)keys[i], 2};
        memset(&r, 0, sizeof(r));
        r.type = MC_MP_DISK_ANNOUNCE;
        r.mount_flags = MC_DP_ANNOUNCE_RESET | MC_DP_ANNOUNCE_END;
        r.segment_name.p = (const uint8_t *)ENDPOINT;
        r.segment_name.len = (uint32_t)strlen(ENDPOINT);
        r.size = 64 * MIB;
        r.base = 7;
        r.n_keys = 4;
        r.keys = k;
        r.value_lens = lens;
        assert_int_equal(mc__master_client_call(node, &r, on_codes, &cc), 0);
    }
    assert_int_equal(codes[0], 0);
    assert_int_equal(codes[1], MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(codes[2], 0);
    assert_int_equal(codes[3], MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(replicas(reader, "x1", &mem, &d, &size), 0);
    assert_int_equal(mem, 0);
    assert_int_equal(size, 1000);
    assert_string_equal(d.segment_name, ENDPOINT);
    assert_int_equal(replicas(reader, "x3", &mem, &d, &size), 0);
    assert_int_equal(size, 1002);
    assert_int_equal(mc__master_client_exist(reader, "x2"), 0);
    assert_int_equal(mc__master_client_exist(reader, "x4"), 0);
    /* x3 removed with its DELETE queued; the master dies again; x3 stays removed, and x1
     * (whose record the restart rewrote into the compacted log) is still there. */
    assert_int_equal(mc__master_client_remove(reader, "x3", 0), 0);
    mc__master_client_close(node);
    mc__master_client_close(reader);
    mc_test_master_stop(&m, 1);
    assert_int_equal(mc_test_master_start(g_bin, 0, extra, &m), 0);
    assert_int_equal(mc__master_client_connect(m.addr, 3000, NULL, &node), 0);
    assert_int_equal(mc__master_client_connect(m.addr, 3000, NULL, &reader), 0);
    assert_int_equal(announce_many(node, MC_DP_ANNOUNCE_RESET | MC_DP_ANNOUNCE_END, ENDPOINT, 7,
                                   (const char *const[]){"x1", NULL}, 1000, codes),
                     0);
    assert_int_equal(codes[0], 0);
    assert_int_equal(announce(node, 0, ENDPOINT, 7, "x3", 1002, &code), 0);
    assert_int_equal(code, MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc__master_client_exist(reader, "x1"), 1);
    assert_int_equal(mc__master_client_exist(reader, "x3"), 0);
    mc__master_client_close(node);
    mc__master_client_close(reader);
    assert_int_equal(mc_test_master_stop(&m, 0), 0);
    {
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        assert_int_equal(system(cmd), 0);
    }
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_unknown_node_is_told_to_announce, setup, teardown),
        cmocka_unit_test_setup_teardown(test_announced_copies_are_objects, setup, teardown),
        cmocka_unit_test_setup_teardown(test_leave_takes_the_disk_off, setup, teardown),
        cmocka_unit_test_setup_teardown(test_offload_done_and_stale, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remove_upsert_and_leave_free_the_disk, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_promotion_on_hit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_eviction_waits_for_offloads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_promotion_waits_for_room, setup, teardown),
        cmocka_unit_test_setup_teardown(test_removal_while_the_node_is_away, setup, teardown),
        cmocka_unit_test(test_restart_with_metadata_log),
    };
    if (argc < 2) {
        fprintf(stderr, "usage: %s <path to mooncake_master>\n", argv[0]);
        return 2;
    }
    g_bin = argv[1];
    return cmocka_run_group_tests_name("store_master_disk", tests, NULL, NULL);
}
