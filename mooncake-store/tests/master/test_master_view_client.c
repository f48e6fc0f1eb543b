/* An HA client (address "etcd://...") against a real etcd and real masters, when the steps of
 * a reconnect are slow: a stalled etcd must not leave the steps after the leader look-up with a
 * deadline shrunk to nothing (issue 24: "no answer within 1 ms" under load), and an etcd that
 * stays stalled past the call's deadline gives a clear error in bounded time, not a hang.
 * Exits 77 (skipped) when no etcd binary is installed. The first argument is mooncake_master. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>

#include "etcd_harness.h"
#include "master_proc.h"
#include "mooncake/common/etcd.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"
#include "proto/master_client.h"
#include "proto/master_view.h"

#define CLUSTER "slow-steps"
/* The client's call timeout: the steps below are made to take most of it. */
#define CALL_MS 3000
/* What one step of a call may get past the call's deadline (master_client.c). */
#define STEP_MS 2000
#define SEG_BASE 0x40000000ull

static const char *g_bin;
static th_etcd_t g_etcd;
static char g_ep[64], g_addr[80];

static int setup(void **state) {
    (void)state;
    if (th_etcd_cluster(&g_etcd, 1))
        return -1;
    snprintf(g_ep, sizeof(g_ep), "127.0.0.1:%u", (unsigned)g_etcd.client_port);
    snprintf(g_addr, sizeof(g_addr), "%s%s", MC_MASTER_VIEW_SCHEME, g_ep);
    setenv("MC_STORE_CLUSTER_ID", CLUSTER, 1);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    th_etcd_kill(&g_etcd);
    return 0;
}

/* Points the master view at m, as an elected leader would. */
static void set_view(const mc_test_master_t *m) {
    char key[MC_MASTER_VIEW_KEY_MAX];
    mc_etcd_t *c = NULL;
    int kl = mc__master_view_key(CLUSTER, key, sizeof(key));
    assert_true(kl > 0);
    assert_int_equal(mc__etcd_open(g_ep, 10000, &c), 0);
    assert_int_equal(mc__etcd_put(c, key, (size_t)kl, m->addr, strlen(m->addr), 0, NULL), 0);
    mc__etcd_close(c);
}

static void sleep_ms(uint64_t ms) {
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* A child that, at switch_ms after t0, points the view at m and at once stops etcd, then
 * continues etcd and m at resume_ms: the test process itself makes its call meanwhile. */
static pid_t switch_and_stall(uint64_t t0, uint64_t switch_ms, const mc_test_master_t *m,
                              uint64_t resume_ms) {
    pid_t p = fork();
    assert_true(p >= 0);
    if (p == 0) {
        uint64_t now = mc__now_ms();
        if (t0 + switch_ms > now)
            sleep_ms(t0 + switch_ms - now);
        set_view(m);
        kill(g_etcd.pid, SIGSTOP);
        now = mc__now_ms();
        if (t0 + resume_ms > now)
            sleep_ms(t0 + resume_ms - now);
        kill(g_etcd.pid, SIGCONT);
        kill(m->pid, SIGCONT);
        _exit(0);
    }
    return p;
}

/* A failover that ends as the call's deadline comes: the view names the dead old leader (every
 * connect refused, the client asks the view again every 100 ms) until 0.3 s before the deadline,
 * when it names the new leader and etcd stalls for 0.8 s; the new leader is stalled until then
 * too. The look-up made then (or, when the client read the view just before etcd stalled, the
 * remount on the stalled leader) must still get a whole step, not what is left of the deadline:
 * the call succeeds once both answer. Before, it got those last milliseconds and the call failed,
 * with "etcd /v3/kv/range: no answer within N ms" when the look-up was cut short. */
static void test_lookup_at_the_deadline_gets_a_whole_step(void **state) {
    static const char *const extra[] = {"--client_ttl=3600", NULL};
    mc_test_master_t m1, m2;
    mc__master_client_t *c = NULL;
    mc__key_replicas_t r;
    uint64_t t0, took;
    pid_t kid;
    int rc;
    (void)state;
    assert_int_equal(mc_test_master_start(g_bin, 0, extra, &m1), 0);
    set_view(&m1);
    assert_int_equal(mc__master_client_connect(g_addr, CALL_MS, NULL, &c), 0);
    assert_int_equal(mc__master_client_mount_segment(c, "hostS:1", SEG_BASE, 1 << 20), 0);
    assert_int_equal(mc__master_client_exist(c, "k"), 0);
    assert_int_equal(mc_test_master_start(g_bin, 0, extra, &m2), 0);
    mc_test_master_stop(&m1, 1);
    assert_int_equal(kill(m2.pid, SIGSTOP), 0);
    t0 = mc__now_ms();
    kid = switch_and_stall(t0, CALL_MS - 300, &m2, CALL_MS + 500);
    rc = mc__master_client_exist(c, "k");
    took = mc__now_ms() - t0;
    assert_int_equal(waitpid(kid, NULL, 0), kid);
    fprintf(stderr, "call across a failover at its deadline: rc %d after %llu ms\n", rc,
            (unsigned long long)took);
    assert_int_equal(rc, 0);
    /* the reconnect remounted our segment on the new leader */
    assert_int_equal(mc__master_client_put_start(c, "after", 4096, NULL, &r), 0);
    assert_string_equal(r.replicas[0].segment_name, "hostS:1");
    assert_int_equal(mc__master_client_put_end(c, "after", r.version), 0);
    mc__master_client_close(c);
    mc_test_master_stop(&m2, 0);
}

/* etcd stalled past the call's deadline and the leader gone: the call fails with RPC_FAIL after
 * about its deadline and one step at most, never hangs; once etcd answers again, the next call
 * succeeds. */
static void test_stalled_etcd_fails_in_bounded_time(void **state) {
    static const char *const extra[] = {"--client_ttl=3600", NULL};
    mc_test_master_t m1, m2;
    mc__master_client_t *c = NULL;
    uint64_t t0, took;
    pid_t kid;
    int rc;
    (void)state;
    assert_int_equal(mc_test_master_start(g_bin, 0, extra, &m1), 0);
    set_view(&m1);
    assert_int_equal(mc__master_client_connect(g_addr, CALL_MS, NULL, &c), 0);
    assert_int_equal(mc_test_master_start(g_bin, 0, extra, &m2), 0);
    mc_test_master_stop(&m1, 1);
    assert_int_equal(kill(g_etcd.pid, SIGSTOP), 0);
    t0 = mc__now_ms();
    kid = fork();
    assert_true(kid >= 0);
    if (kid == 0) {
        sleep_ms(CALL_MS + STEP_MS + 4000);
        kill(g_etcd.pid, SIGCONT);
        _exit(0);
    }
    rc = mc__master_client_exist(c, "k");
    took = mc__now_ms() - t0;
    fprintf(stderr, "call with etcd stalled: rc %d after %llu ms\n", rc, (unsigned long long)took);
    assert_int_equal(rc, MC_ERR_RPC_FAIL);
    assert_true(took >= CALL_MS - 100);
    /* the bound a loaded machine can still meet: deadline, one step, and slack */
    assert_true(took < CALL_MS + STEP_MS + 3000);
    assert_int_equal(waitpid(kid, NULL, 0), kid);
    set_view(&m2);
    assert_int_equal(mc__master_client_exist(c, "k"), 0);
    mc__master_client_close(c);
    mc_test_master_stop(&m2, 0);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookup_at_the_deadline_gets_a_whole_step),
        cmocka_unit_test(test_stalled_etcd_fails_in_bounded_time),
    };
    if (argc < 2) {
        fprintf(stderr, "usage: %s <path to mooncake_master>\n", argv[0]);
        return 2;
    }
    g_bin = argv[1];
    if (!th_etcd_available()) {
        fprintf(stderr, "no etcd binary (install etcd-server or set MC_ETCD_BIN): skipped\n");
        return 77;
    }
    return cmocka_run_group_tests_name("store_master_view_client", tests, setup, teardown);
}
