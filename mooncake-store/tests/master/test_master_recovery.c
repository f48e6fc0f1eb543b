/* A master that restored its state (kill -9, restart with --metadata_dir) while its segments'
 * owners are silent: nothing acknowledged is evicted, puts that find no room are deferred
 * (UNAVAILABLE_IN_CURRENT_STATUS, which clients retry) until the owners are back or declared
 * dead, and /health and the metrics say the master is recovering. Also: a segment name mounted
 * by a new owner (a node restarted under its name) retires the older incarnations' placement.
 *
 * The owners here are plain master clients that heartbeat only when a test says so, which is
 * what makes "silent" deterministic. Each test runs its own mooncake_master process. */
#include <pthread.h>
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
#include "mooncake/common/alloc.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"
#include "proto/master_client.h"

static const char *g_bin;

#define SEG (1u << 20)
#define OBJ (256u << 10)
#define PER_SEG (SEG / OBJ)

typedef struct cluster {
    char dir[64], dir_arg[96];
    const char *extra[8];
    mc_test_master_t m;
    uint16_t port;
    mc__master_client_t *owner[2]; /* each owns one full segment */
    mc__master_client_t *user;     /* mounts nothing */
} cluster_t;

static double metric_at(uint16_t port, const char *name) {
    double v = -1;
    assert_int_equal(mc_test_metric(port, name, &v), 0);
    return v;
}

static double metric(const cluster_t *c, const char *name) {
    return metric_at(c->m.metrics_port, name);
}

static int health_says(const cluster_t *c, const char *needle) {
    char *body = NULL;
    int yes;
    assert_int_equal(mc_test_http_get(c->m.metrics_port, "/health", &body), 200);
    yes = strstr(body, needle) != NULL;
    mc__free(body);
    return yes;
}

/* Starts a logging master (lease 1 ms: leases are not what protects anything here; no
 * background eviction, so the segments stay full), two owners
 * with a 1 MiB segment each, fills both with acknowledged 256 KiB objects, then kills the master
 * with SIGKILL and restarts it on the same port and log. Nobody has talked to the new master. */
static void cluster_up_and_restart(cluster_t *c, const char *client_ttl) {
    static const char *const names[2] = {"owner-a:1", "owner-b:2"};
    memset(c, 0, sizeof(*c));
    snprintf(c->dir, sizeof(c->dir), "/tmp/mc-recovery-XXXXXX");
    assert_non_null(mkdtemp(c->dir));
    snprintf(c->dir_arg, sizeof(c->dir_arg), "--metadata_dir=%s", c->dir);
    c->extra[0] = c->dir_arg;
    c->extra[1] = "--default_kv_lease_ttl=1";
    c->extra[2] = client_ttl;
    c->extra[3] = "--eviction_high_watermark_ratio=1.0"; /* full segments stay full */
    assert_int_equal(mc_test_master_start(g_bin, 0, c->extra, &c->m), 0);
    c->port = c->m.rpc_port;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(mc__master_client_connect(c->m.addr, 5000, NULL, &c->owner[i]), 0);
        assert_int_equal(mc__master_client_mount_segment(c->owner[i], names[i],
                                                         0x10000000ull * (uint64_t)(i + 1), SEG),
                         0);
    }
    assert_int_equal(mc__master_client_connect(c->m.addr, 5000, NULL, &c->user), 0);
    for (unsigned k = 0; k < 2 * PER_SEG; k++) {
        char key[32];
        mc__key_replicas_t r;
        snprintf(key, sizeof(key), "acked-%u", k);
        assert_int_equal(mc__master_client_put_start(c->user, key, OBJ, NULL, &r), 0);
        assert_int_equal(mc__master_client_put_end(c->user, key, r.version), 0);
    }
    assert_int_equal(metric(c, "mooncake_master_objects"), 2 * PER_SEG);
    assert_false(health_says(c, "\"recovering\":true"));
    assert_int_not_equal(mc_test_master_stop(&c->m, 1), 0);
    assert_int_equal(mc_test_master_start(g_bin, c->port, c->extra, &c->m), 0);
}

static void cluster_down(cluster_t *c) {
    char cmd[128];
    for (int i = 0; i < 2; i++)
        mc__master_client_close(c->owner[i]);
    mc__master_client_close(c->user);
    assert_int_equal(mc_test_master_stop(&c->m, 0), 0);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", c->dir);
    assert_int_equal(system(cmd), 0);
}

static int exists(cluster_t *c, unsigned k) {
    char key[32];
    snprintf(key, sizeof(key), "acked-%u", k);
    return mc__master_client_exist(c->user, key);
}

/* The reproduction in miniature: before the fix the put evicted every restored object
 * (room was counted on segments placement refuses) and still failed NO_AVAILABLE_HANDLE. */
static void test_restored_objects_are_not_evicted_while_owners_are_silent(void **state) {
    cluster_t c;
    mc__key_replicas_t r;
    (void)state;
    setenv("MC_STORE_RECOVERY_WAIT_MS", "0", 1); /* see the deferral itself, not the retry */
    cluster_up_and_restart(&c, "--client_ttl=600");
    assert_true(health_says(&c, "\"recovering\":true"));
    assert_int_equal(metric(&c, "mooncake_master_recovering"), 1);
    assert_int_equal(metric(&c, "mooncake_master_segments_awaiting_owner"), 2);
    for (int i = 0; i < 20; i++)
        assert_int_equal(mc__master_client_put_start(c.user, "new", OBJ, NULL, &r),
                         MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS);
    assert_int_equal(metric(&c, "mooncake_master_evictions_total"), 0);
    assert_true(metric(&c, "mooncake_master_placements_deferred_total") >= 20);
    for (unsigned k = 0; k < 2 * PER_SEG; k++)
        assert_int_equal(exists(&c, k), 1);
    /* One owner back: still recovering (the other may bring its memory back too). */
    assert_int_equal(mc__master_client_heartbeat(c.owner[0], NULL), 0);
    assert_int_equal(metric(&c, "mooncake_master_segments_awaiting_owner"), 1);
    assert_int_equal(mc__master_client_put_start(c.user, "new", OBJ, NULL, &r),
                     MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS);
    assert_int_equal(metric(&c, "mooncake_master_evictions_total"), 0);
    /* Both back: recovery is over and the put makes room as any put does. */
    assert_int_equal(mc__master_client_heartbeat(c.owner[1], NULL), 0);
    assert_false(health_says(&c, "\"recovering\":true"));
    assert_int_equal(metric(&c, "mooncake_master_recovering"), 0);
    assert_int_equal(mc__master_client_put_start(c.user, "new", OBJ, NULL, &r), 0);
    assert_int_equal(mc__master_client_put_end(c.user, "new", r.version), 0);
    assert_true(metric(&c, "mooncake_master_evictions_total") >= 1);
    unsetenv("MC_STORE_RECOVERY_WAIT_MS");
    cluster_down(&c);
}

typedef struct put_arg {
    const char *addr;
    int rc;
    uint64_t took_ms;
} put_arg_t;

static void *put_main(void *p) {
    put_arg_t *a = p;
    mc__master_client_t *c = NULL;
    mc__key_replicas_t r;
    uint64_t t0 = mc__now_ms();
    a->rc = mc__master_client_connect(a->addr, 5000, NULL, &c);
    if (a->rc == 0)
        a->rc = mc__master_client_put_start(c, "waited", OBJ, NULL, &r);
    if (a->rc == 0)
        a->rc = mc__master_client_put_end(c, "waited", r.version);
    a->took_ms = mc__now_ms() - t0;
    mc__master_client_close(c);
    return NULL;
}

/* A put during recovery waits (the client retries the deferral) and succeeds once the owners
 * are back; nothing acknowledged is lost on the way. */
static void test_a_put_waits_for_the_owners(void **state) {
    cluster_t c;
    pthread_t th;
    put_arg_t a;
    (void)state;
    setenv("MC_STORE_RECOVERY_WAIT_MS", "60000", 1);
    cluster_up_and_restart(&c, "--client_ttl=600");
    a = (put_arg_t){c.m.addr, 1, 0};
    assert_int_equal(pthread_create(&th, NULL, put_main, &a), 0);
    /* The put has been deferred at least once before the owners speak. */
    for (uint64_t until = mc__now_ms() + 30000;
         metric(&c, "mooncake_master_placements_deferred_total") < 1 && mc__now_ms() < until;)
        usleep(20 * 1000);
    assert_true(metric(&c, "mooncake_master_placements_deferred_total") >= 1);
    assert_int_equal(mc__master_client_heartbeat(c.owner[0], NULL), 0);
    assert_int_equal(mc__master_client_heartbeat(c.owner[1], NULL), 0);
    pthread_join(th, NULL);
    assert_int_equal(a.rc, 0);
    unsetenv("MC_STORE_RECOVERY_WAIT_MS");
    cluster_down(&c);
}

/* An owner that never comes back is declared dead after client_ttl: its segment goes (its
 * memory went with its process), recovery ends, and the surviving owner's objects are intact. */
static void test_a_dead_owner_ends_recovery_at_its_expiry(void **state) {
    cluster_t c;
    mc__key_replicas_t r;
    uint64_t until;
    (void)state;
    setenv("MC_STORE_RECOVERY_WAIT_MS", "0", 1);
    cluster_up_and_restart(&c, "--client_ttl=2");
    until = mc__now_ms() + 60000;
    while (metric(&c, "mooncake_master_recovering") != 0 && mc__now_ms() < until) {
        assert_int_equal(mc__master_client_heartbeat(c.owner[0], NULL), 0);
        usleep(200 * 1000);
    }
    assert_int_equal(metric(&c, "mooncake_master_recovering"), 0);
    assert_int_equal(metric(&c, "mooncake_master_segments"), 1);
    assert_int_equal(metric(&c, "mooncake_master_evictions_total"), 0);
    /* owner-a's objects are the ones left (the put below may evict one of them: room) */
    assert_int_equal(metric(&c, "mooncake_master_objects"), PER_SEG);
    assert_int_equal(mc__master_client_heartbeat(c.owner[0], NULL), 0);
    assert_int_equal(mc__master_client_put_start(c.user, "after", OBJ, NULL, &r), 0);
    assert_string_equal(r.replicas[0].segment_name, "owner-a:1");
    assert_int_equal(mc__master_client_put_end(c.user, "after", r.version), 0);
    unsetenv("MC_STORE_RECOVERY_WAIT_MS");
    cluster_down(&c);
}

/* A node killed and restarted under its name three times leaves three dead incarnations of the
 * name mounted (their owners never spoke again); new puts all go to the live one. Before the fix
 * the dead ones kept taking placements until their owners expired. */
static void test_a_new_owner_of_a_name_retires_the_old_incarnations(void **state) {
    static const char *const extra[] = {"--client_ttl=600", NULL};
    mc_test_master_t m;
    mc__master_client_t *inc[4] = {NULL}, *user = NULL;
    mc__key_replicas_t r;
    const uint64_t live_base = 0x40000000ull;
    (void)state;
    assert_int_equal(mc_test_master_start(g_bin, 0, extra, &m), 0);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(mc__master_client_connect(m.addr, 5000, NULL, &inc[i]), 0);
        assert_int_equal(mc__master_client_mount_segment(
                             inc[i], "node:7", 0x10000000ull * (uint64_t)(i + 1), 16 * SEG),
                         0);
    }
    assert_int_equal(mc__master_client_connect(m.addr, 5000, NULL, &user), 0);
    assert_int_equal(metric_at(m.metrics_port, "mooncake_master_segments"), 4);
    for (int k = 0; k < 40; k++) {
        char key[32];
        snprintf(key, sizeof(key), "k%d", k);
        assert_int_equal(mc__master_client_put_start(user, key, 4096, NULL, &r), 0);
        assert_int_equal(r.n_replicas, 1);
        assert_true(r.replicas[0].addr >= live_base && r.replicas[0].addr < live_base + 16 * SEG);
        assert_int_equal(mc__master_client_put_end(user, key, r.version), 0);
    }
    /* An old owner that was alive after all heartbeats: its segment takes placements again. */
    assert_int_equal(mc__master_client_heartbeat(inc[0], NULL), 0);
    {
        int seen_old = 0;
        for (int k = 0; k < 40 && !seen_old; k++) {
            char key[32];
            snprintf(key, sizeof(key), "again%d", k);
            assert_int_equal(mc__master_client_put_start(user, key, 4096, NULL, &r), 0);
            seen_old = r.replicas[0].addr < 0x20000000ull;
            assert_int_equal(mc__master_client_put_end(user, key, r.version), 0);
        }
        assert_true(seen_old);
    }
    for (int i = 0; i < 4; i++)
        mc__master_client_close(inc[i]);
    mc__master_client_close(user);
    assert_int_equal(mc_test_master_stop(&m, 0), 0);
}

/* Put slots across a kill -9: a commit that was acknowledged is restored, in the slot's bytes
 * (also one that a holder forwarded for the slot's client, PUT_COMMIT_FOR); a
 * slot reserved but not committed is gone (its commit is told OBJECT_NOT_FOUND, so the client
 * places the put again) and its space is not handed to anyone (the late writer's bytes land on
 * nothing anyone reads). */
static void test_committed_slots_survive_a_restart(void **state) {
    char dir[64], dir_arg[96];
    const char *extra[4] = {NULL, "--client_ttl=600", "--eviction_high_watermark_ratio=1.0", NULL};
    mc_test_master_t m;
    mc__master_client_t *owner = NULL, *user = NULL;
    mc__key_replicas_t sl[4], r;
    mc__replicate_config_t cfg = {.replica_num = 1};
    const char *keys[2] = {"slot-c0", "slot-c1"}, *late = "slot-late", *fwd = "slot-fwd";
    uint64_t lens[2] = {OBJ / 4, 100}, vers[2], len = 10, fwd_len = 200;
    int32_t codes[2] = {1, 1}, code = 1;
    uint16_t port;
    char cmd[128];
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/mc-recovery-XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(dir_arg, sizeof(dir_arg), "--metadata_dir=%s", dir);
    extra[0] = dir_arg;
    assert_int_equal(mc_test_master_start(g_bin, 0, extra, &m), 0);
    port = m.rpc_port;
    assert_int_equal(mc__master_client_connect(m.addr, 5000, NULL, &owner), 0);
    assert_int_equal(mc__master_client_mount_segment(owner, "owner:1", 0x10000000ull, SEG), 0);
    assert_int_equal(mc__master_client_connect(m.addr, 5000, NULL, &user), 0);
    assert_int_equal(mc__master_client_put_reserve(user, 4, OBJ / 4, &cfg, sl), 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(sl[i].code, 0);
    vers[0] = sl[0].version;
    vers[1] = sl[1].version;
    assert_int_equal(mc__master_client_put_commit(user, 2, keys, lens, vers, codes), 0);
    assert_int_equal(codes[0], 0);
    assert_int_equal(codes[1], 0);
    /* the owner (the slot's holder) forwards a commit of the user's slot */
    assert_int_equal(mc__master_client_put_commit_for(
                         owner, 1,
                         (const uint8_t(*)[MC_MP_CLIENT_ID_LEN])mc__master_client_id(user), &fwd,
                         &fwd_len, &sl[3].version, &code),
                     0);
    assert_int_equal(code, 0);

    assert_int_not_equal(mc_test_master_stop(&m, 1), 0);
    assert_int_equal(mc_test_master_start(g_bin, port, extra, &m), 0);
    assert_int_equal(mc__master_client_heartbeat(owner, NULL), 0);
    for (int i = 0; i < 2; i++) {
        memset(&r, 0, sizeof(r));
        assert_int_equal(mc__master_client_get_replica_list(user, keys[i], &r), 0);
        assert_int_equal(r.size, lens[i]);
        assert_int_equal(r.replicas[0].addr, sl[i].replicas[0].addr);
    }
    memset(&r, 0, sizeof(r));
    assert_int_equal(mc__master_client_get_replica_list(user, fwd, &r), 0);
    assert_int_equal(r.size, fwd_len);
    assert_int_equal(r.replicas[0].addr, sl[3].replicas[0].addr);
    assert_int_equal(mc__master_client_put_commit(user, 1, &late, &len, &sl[2].version, &code), 0);
    assert_int_equal(code, MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc__master_client_exist(user, late), 0);
    /* The rest of the segment (12 of its 16 quarters of OBJ) goes to new puts; the open slots'
     * space is not among it. */
    for (int k = 0; k < 12; k++) {
        char key[32];
        snprintf(key, sizeof(key), "after-%d", k);
        assert_int_equal(mc__master_client_put_start(user, key, OBJ / 4, NULL, &r), 0);
        for (int i = 0; i < 4; i++)
            assert_true(r.replicas[0].addr != sl[i].replicas[0].addr);
        assert_int_equal(mc__master_client_put_end(user, key, r.version), 0);
    }
    mc__master_client_close(owner);
    mc__master_client_close(user);
    assert_int_equal(mc_test_master_stop(&m, 0), 0);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_restored_objects_are_not_evicted_while_owners_are_silent),
        cmocka_unit_test(test_a_put_waits_for_the_owners),
        cmocka_unit_test(test_a_dead_owner_ends_recovery_at_its_expiry),
        cmocka_unit_test(test_a_new_owner_of_a_name_retires_the_old_incarnations),
        cmocka_unit_test(test_committed_slots_survive_a_restart),
    };
    if (argc < 2) {
        fprintf(stderr, "usage: %s <path to mooncake_master>\n", argv[0]);
        return 2;
    }
    g_bin = argv[1];
    return cmocka_run_group_tests_name("store_master_recovery", tests, NULL, NULL);
}
