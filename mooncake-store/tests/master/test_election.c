/* Leader election against a real etcd started here on loopback: one candidate wins; of three,
 * exactly one leads at a time and the others follow it; a stopped leader is replaced within a
 * second; a leader cut off from etcd is deposed before anyone else is elected and within its TTL;
 * a leader process frozen by SIGSTOP never acts after its successor is elected;
 * a deleted key deposes its leader; a 3-member etcd cluster losing a member keeps the leader, and
 * losing all of them deposes it within its TTL.
 * Exits 77 (skipped) when no etcd binary is installed. */
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
#include "master/election.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/etcd.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"

#define TTL_S 2

static th_etcd_t g_etcd;
static char g_ep[64];

/* Leaders of one cluster id at this moment, over all candidates of a test: never above 1. */
static _Atomic int g_leaders, g_overlaps;

typedef struct cand {
    mc_election_t *e;
    char addr[32];
    _Atomic int elected, deposed, leading;
    _Atomic int64_t term;
    _Atomic uint64_t elected_ms, deposed_ms;
} cand_t;

static void cb_elected(void *ctx, int64_t term) {
    cand_t *c = ctx;
    if (atomic_fetch_add(&g_leaders, 1) != 0)
        atomic_fetch_add(&g_overlaps, 1);
    atomic_store(&c->term, term);
    atomic_store(&c->elected_ms, mc__now_ms());
    atomic_store(&c->leading, 1);
    atomic_fetch_add(&c->elected, 1);
}

static void cb_deposed(void *ctx) {
    cand_t *c = ctx;
    atomic_store(&c->deposed_ms, mc__now_ms());
    atomic_store(&c->leading, 0);
    atomic_fetch_sub(&g_leaders, 1);
    atomic_fetch_add(&c->deposed, 1);
}

static void cand_start(cand_t *c, const char *cluster, int i) {
    mc_election_callbacks_t cbs = {.on_elected = cb_elected, .on_deposed = cb_deposed, .ctx = c};
    memset(c, 0, sizeof(*c));
    snprintf(c->addr, sizeof(c->addr), "10.0.0.%d:50051", i + 1);
    assert_int_equal(mc__election_start(g_ep, cluster, c->addr, TTL_S, &cbs, &c->e), 0);
}

static void cand_stop(cand_t *c) {
    mc__election_stop(c->e);
    c->e = NULL;
}

/* Index of the one candidate leading, waiting up to ms; -1 when none or more than one. */
static int wait_leader(cand_t *c, int n, int ms) {
    uint64_t dl = mc__now_ms() + (uint64_t)ms;
    do {
        int found = -1, count = 0;
        for (int i = 0; i < n; i++) {
            if (c[i].e && atomic_load(&c[i].leading)) {
                found = i;
                count++;
            }
        }
        if (count == 1)
            return found;
        usleep(10 * 1000);
    } while (mc__now_ms() < dl);
    return -1;
}

static void assert_key(const char *cluster, const char *want, int64_t term) {
    char key[128], got[64];
    mc_etcd_t *c = NULL;
    mc_etcd_kv_t kv;
    int kl = mc__master_view_key(cluster, key, sizeof(key));
    assert_true(kl > 0);
    assert_int_equal(mc__etcd_open(g_ep, 3000, &c), 0);
    if (!want) {
        assert_int_equal(mc__etcd_get(c, key, (size_t)kl, &kv), MC_ERR_ETCD_KEY_NOT_EXIST);
        assert_int_equal(mc__master_view_get(g_ep, cluster, got, sizeof(got), 3000),
                         MC_ERR_ETCD_KEY_NOT_EXIST);
    } else {
        assert_int_equal(mc__etcd_get(c, key, (size_t)kl, &kv), 0);
        assert_string_equal((char *)kv.value, want);
        assert_int_equal(kv.create_revision, term);
        assert_true(kv.lease != 0);
        mc__etcd_kv_free(&kv);
        assert_int_equal(mc__master_view_get(g_ep, cluster, got, sizeof(got), 3000), 0);
        assert_string_equal(got, want);
    }
    mc__etcd_close(c);
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

static void test_key_and_bad_args(void **state) {
    char buf[128], small[8];
    mc_election_t *e = NULL;
    mc_election_callbacks_t cbs = {0};
    uint64_t t0;
    char dead[64];
    (void)state;
    assert_int_equal(mc__master_view_key("prod-a", buf, sizeof(buf)), 33);
    assert_string_equal(buf, "mooncake-store/prod-a/master_view");
    assert_int_equal(mc__master_view_key("prod-a/", buf, sizeof(buf)), 33);
    assert_string_equal(buf, "mooncake-store/prod-a/master_view");
    assert_true(mc__master_view_key(MC_ELECTION_DEFAULT_CLUSTER_ID, buf, sizeof(buf)) > 0);
    assert_string_equal(buf, "mooncake-store/mooncake_cluster/master_view");
    assert_int_equal(mc__master_view_key("", buf, sizeof(buf)), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc__master_view_key("/", buf, sizeof(buf)), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc__master_view_key("x", small, sizeof(small)), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc__master_view_key(NULL, buf, sizeof(buf)), MC_ERR_INVALID_ARGUMENT);

    assert_int_equal(mc__election_start(g_ep, "c", "a:1", 2, &cbs, NULL), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc__election_start(g_ep, "", "a:1", 2, &cbs, &e), MC_ERR_INVALID_ARGUMENT);
    assert_null(e);
    assert_int_equal(mc__election_start(g_ep, "c", "", 2, &cbs, &e), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc__election_start(NULL, "c", "a:1", 2, &cbs, &e), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc__election_start(g_ep, "c", "a:1", MC_ELECTION_MAX_TTL_S + 1, &cbs, &e),
                     MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc__election_start("ftp://h:1", "c", "a:1", 2, &cbs, &e),
                     MC_ERR_INVALID_ARGUMENT);
    assert_null(e);
    mc__election_stop(NULL);

    /* nothing listens there: a clear error at once, not a thread retrying forever */
    snprintf(dead, sizeof(dead), "127.0.0.1:%u", (unsigned)th_free_port());
    t0 = mc__now_ms();
    assert_int_equal(mc__election_start(dead, "c", "a:1", 2, &cbs, &e),
                     MC_ERR_ETCD_OPERATION_ERROR);
    assert_null(e);
    assert_int_equal(mc__master_view_get(dead, "c", buf, sizeof(buf), 1000),
                     MC_ERR_ETCD_OPERATION_ERROR);
    assert_true(mc__now_ms() - t0 < 3000);
    assert_int_equal(mc__master_view_get(g_ep, "", buf, sizeof(buf), 1000),
                     MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc__master_view_get(g_ep, "never-led", buf, sizeof(buf), 1000),
                     MC_ERR_ETCD_KEY_NOT_EXIST);
}

static void test_one_candidate_wins(void **state) {
    cand_t c;
    char buf[64], small[4];
    (void)state;
    atomic_store(&g_overlaps, 0);
    cand_start(&c, "one", 0);
    assert_int_equal(wait_leader(&c, 1, 3000), 0);
    assert_int_equal(atomic_load(&c.elected), 1);
    assert_true(atomic_load(&c.term) > 0);
    assert_int_equal(mc__election_is_leader(c.e), 1);
    assert_int_equal(mc__election_term(c.e), atomic_load(&c.term));
    assert_int_equal(mc__election_leader(c.e, buf, sizeof(buf)), 0);
    assert_string_equal(buf, c.addr);
    assert_int_equal(mc__election_leader(c.e, small, sizeof(small)), MC_ERR_INVALID_ARGUMENT);
    assert_key("one", c.addr, atomic_load(&c.term));
    /* leadership is kept across several TTLs by the refreshes */
    usleep(TTL_S * 1500 * 1000);
    assert_int_equal(atomic_load(&c.deposed), 0);
    assert_key("one", c.addr, atomic_load(&c.term));
    cand_stop(&c);
    assert_int_equal(atomic_load(&c.deposed), 1);
    assert_key("one", NULL, 0);
    assert_int_equal(atomic_load(&g_overlaps), 0);
}

static void test_three_candidates(void **state) {
    cand_t c[3];
    char buf[64];
    int lead, next;
    uint64_t t0;
    (void)state;
    atomic_store(&g_overlaps, 0);
    for (int i = 0; i < 3; i++)
        cand_start(&c[i], "three", i);
    lead = wait_leader(c, 3, 3000);
    assert_true(lead >= 0);
    usleep(500 * 1000);
    assert_int_equal(wait_leader(c, 3, 0), lead);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(atomic_load(&c[i].elected), i == lead);
        assert_int_equal(mc__election_is_leader(c[i].e), i == lead);
        assert_int_equal(mc__election_leader(c[i].e, buf, sizeof(buf)), 0);
        assert_string_equal(buf, c[lead].addr);
    }
    assert_key("three", c[lead].addr, atomic_load(&c[lead].term));

    /* the leader resigns: a standby takes over within about a second */
    t0 = mc__now_ms();
    cand_stop(&c[lead]);
    assert_int_equal(atomic_load(&c[lead].deposed), 1);
    next = wait_leader(c, 3, 1500);
    assert_true(next >= 0 && next != lead);
    fprintf(stderr, "takeover after stop: %llu ms\n", (unsigned long long)(mc__now_ms() - t0));
    assert_true(mc__now_ms() - t0 < 1500);
    assert_true(atomic_load(&c[next].term) > atomic_load(&c[lead].term));
    assert_key("three", c[next].addr, atomic_load(&c[next].term));
    for (int i = 0; i < 3; i++) {
        uint64_t dl = mc__now_ms() + 2000;
        if (!c[i].e)
            continue;
        while (mc__now_ms() < dl && (mc__election_leader(c[i].e, buf, sizeof(buf)) != 0 ||
                                     strcmp(buf, c[next].addr) != 0))
            usleep(10 * 1000);
        assert_string_equal(buf, c[next].addr);
    }
    for (int i = 0; i < 3; i++) {
        if (c[i].e)
            cand_stop(&c[i]);
    }
    assert_int_equal(atomic_load(&g_leaders), 0);
    assert_int_equal(atomic_load(&g_overlaps), 0);
    assert_key("three", NULL, 0);
}

static void test_cut_off_leader_is_fenced(void **state) {
    cand_t c[2];
    char buf[64];
    uint64_t t0, dep, won;
    (void)state;
    atomic_store(&g_overlaps, 0);
    cand_start(&c[0], "fence", 0);
    assert_int_equal(wait_leader(c, 1, 3000), 0);
    cand_start(&c[1], "fence", 1);
    usleep(300 * 1000);
    assert_int_equal(wait_leader(c, 2, 0), 0);

    /* the leader stops talking to etcd (a stalled process, a cut link) */
    t0 = mc__now_ms();
    mc__election_test_pause_refresh(c[0].e, 1);
    {
        uint64_t dl = mc__now_ms() + TTL_S * 1000 + 3000;
        while (mc__now_ms() < dl && !atomic_load(&c[1].leading))
            usleep(5 * 1000);
    }
    assert_int_equal(wait_leader(c, 2, 0), 1);
    dep = atomic_load(&c[0].deposed_ms);
    won = atomic_load(&c[1].elected_ms);
    fprintf(stderr, "cut off at 0: deposed at %llu ms, successor elected at %llu ms\n",
            (unsigned long long)(dep - t0), (unsigned long long)(won - t0));
    assert_int_equal(atomic_load(&c[0].deposed), 1);
    assert_true(dep >= t0);
    assert_true(dep <= t0 + TTL_S * 1000); /* no later than its lease expiry */
    assert_true(dep <= won);               /* and before anyone else could lead */
    /* the successor waited for the server-side expiry: the old lease was not cut short */
    assert_true(won >= t0 + TTL_S * 1000 / 2);
    assert_int_equal(atomic_load(&g_overlaps), 0);
    assert_key("fence", c[1].addr, atomic_load(&c[1].term));

    /* back online, the old leader follows the new one */
    mc__election_test_pause_refresh(c[0].e, 0);
    {
        uint64_t dl = mc__now_ms() + 2000;
        while (mc__now_ms() < dl &&
               (mc__election_leader(c[0].e, buf, sizeof(buf)) != 0 || strcmp(buf, c[1].addr)))
            usleep(10 * 1000);
    }
    assert_string_equal(buf, c[1].addr);
    assert_int_equal(mc__election_is_leader(c[0].e), 0);
    cand_stop(&c[0]);
    cand_stop(&c[1]);
    assert_int_equal(atomic_load(&g_overlaps), 0);
}

/* A leader process frozen by SIGSTOP past its TTL: a successor is elected, and once resumed the
 * old leader's own check (is_leader, stamped before it is asked) never lets it act after that. */
static void test_stopped_process_is_fenced(void **state) {
    int fds[2];
    pid_t pid;
    cand_t c;
    uint64_t t_stop, t_won, last_act = 0;
    int acts = 0, late = 0;
    FILE *f;
    char line[64];
    (void)state;
    atomic_store(&g_overlaps, 0);
    assert_int_equal(pipe(fds), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        mc_election_t *e = NULL;
        close(fds[0]);
        if (mc__election_start(g_ep, "stall", "10.0.0.9:50051", TTL_S, NULL, &e))
            _exit(1);
        for (;;) {
            uint64_t t = mc__now_ms();
            if (mc__election_is_leader(e)) {
                char b[32];
                int n = snprintf(b, sizeof(b), "A %llu\n", (unsigned long long)t);
                if (write(fds[1], b, (size_t)n) != n)
                    _exit(2);
            }
            usleep(5 * 1000);
        }
    }
    close(fds[1]);
    f = fdopen(fds[0], "r");
    assert_non_null(f);
    /* the child leads: its first act */
    assert_non_null(fgets(line, sizeof(line), f));
    assert_int_equal(line[0], 'A');
    cand_start(&c, "stall", 0);
    usleep(300 * 1000);
    assert_int_equal(atomic_load(&c.leading), 0);
    t_stop = mc__now_ms();
    assert_int_equal(kill(pid, SIGSTOP), 0);
    {
        uint64_t dl = t_stop + TTL_S * 1000 + 3000;
        while (mc__now_ms() < dl && !atomic_load(&c.leading))
            usleep(5 * 1000);
    }
    assert_int_equal(atomic_load(&c.leading), 1);
    t_won = atomic_load(&c.elected_ms);
    fprintf(stderr, "leader stopped at 0: successor elected at %llu ms\n",
            (unsigned long long)(t_won - t_stop));
    assert_true(t_won >= t_stop + TTL_S * 1000 / 2);
    usleep(200 * 1000);
    assert_int_equal(kill(pid, SIGCONT), 0);
    usleep(500 * 1000);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    while (fgets(line, sizeof(line), f)) {
        unsigned long long t = 0;
        assert_int_equal(sscanf(line, "A %llu", &t), 1);
        acts++;
        last_act = t;
        if (t >= t_won)
            late++;
    }
    fclose(f);
    fprintf(stderr, "old leader: %d more acts, last at %lld ms; %d after the successor\n", acts,
            (long long)last_act - (long long)t_stop, late);
    assert_int_equal(late, 0);
    assert_int_equal(mc__election_is_leader(c.e), 1);
    assert_key("stall", c.addr, atomic_load(&c.term));
    cand_stop(&c);
}

static void test_deleted_key_deposes(void **state) {
    cand_t c;
    char key[128];
    mc_etcd_t *cl = NULL;
    int64_t term1;
    int kl = mc__master_view_key("del", key, sizeof(key));
    uint64_t dl;
    (void)state;
    cand_start(&c, "del", 0);
    assert_int_equal(wait_leader(&c, 1, 3000), 0);
    term1 = atomic_load(&c.term);
    assert_int_equal(mc__etcd_open(g_ep, 3000, &cl), 0);
    assert_int_equal(mc__etcd_delete(cl, key, (size_t)kl, NULL, 0, NULL), 0);
    dl = mc__now_ms() + 1000;
    while (mc__now_ms() < dl && atomic_load(&c.deposed) == 0)
        usleep(10 * 1000);
    assert_int_equal(atomic_load(&c.deposed), 1);
    /* it campaigns again and wins a new term */
    dl = mc__now_ms() + 2000;
    while (mc__now_ms() < dl && atomic_load(&c.elected) < 2)
        usleep(10 * 1000);
    assert_int_equal(atomic_load(&c.elected), 2);
    assert_true(atomic_load(&c.term) > term1);
    assert_key("del", c.addr, atomic_load(&c.term));
    mc__etcd_close(cl);
    cand_stop(&c);
}

static th_etcd_t m[3];

static int teardown_cluster(void **state) {
    (void)state;
    for (int i = 0; i < 3; i++)
        th_etcd_kill(&m[i]);
    return 0;
}

static void test_cluster_member_lost(void **state) {
    cand_t c[2];
    (void)state;
    atomic_store(&g_overlaps, 0);
    assert_int_equal(th_etcd_cluster(m, 3), 0);
    snprintf(g_ep, sizeof(g_ep), "127.0.0.1:%u,127.0.0.1:%u,127.0.0.1:%u",
             (unsigned)m[0].client_port, (unsigned)m[1].client_port, (unsigned)m[2].client_port);
    cand_start(&c[0], "ha", 0);
    assert_int_equal(wait_leader(c, 1, 3000), 0);
    cand_start(&c[1], "ha", 1);
    th_etcd_kill(&m[0]); /* the member every call went to first */
    usleep((TTL_S * 1000 + 1000) * 1000);
    assert_int_equal(atomic_load(&c[0].deposed), 0);
    assert_int_equal(atomic_load(&c[1].elected), 0);
    assert_key("ha", c[0].addr, atomic_load(&c[0].term));
    cand_stop(&c[0]);
    {
        uint64_t dl = mc__now_ms() + 1500, t0;
        while (mc__now_ms() < dl && !atomic_load(&c[1].leading))
            usleep(5 * 1000);
        assert_int_equal(atomic_load(&c[1].leading), 1);
        /* etcd gone altogether: the leader steps down within its TTL */
        t0 = mc__now_ms();
        th_etcd_kill(&m[1]);
        th_etcd_kill(&m[2]);
        dl = t0 + TTL_S * 1000 + 1000;
        while (mc__now_ms() < dl && atomic_load(&c[1].deposed) == 0)
            usleep(5 * 1000);
        assert_int_equal(atomic_load(&c[1].deposed), 1);
        fprintf(stderr, "etcd lost at 0: deposed at %llu ms\n",
                (unsigned long long)(atomic_load(&c[1].deposed_ms) - t0));
        assert_true(atomic_load(&c[1].deposed_ms) <= t0 + TTL_S * 1000);
        assert_int_equal(mc__election_is_leader(c[1].e), 0);
    }
    cand_stop(&c[1]);
    assert_int_equal(atomic_load(&g_overlaps), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_and_bad_args),
        cmocka_unit_test(test_one_candidate_wins),
        cmocka_unit_test(test_three_candidates),
        cmocka_unit_test(test_cut_off_leader_is_fenced),
        cmocka_unit_test(test_stopped_process_is_fenced),
        cmocka_unit_test(test_deleted_key_deposes),
        /* one per line */
    };
    const struct CMUnitTest cluster[] = {
        cmocka_unit_test(test_cluster_member_lost),
    };
    int rc;
    if (!th_etcd_available()) {
        fprintf(stderr, "no etcd binary (install etcd-server or set MC_ETCD_BIN): skipped\n");
        return 77;
    }
    rc = cmocka_run_group_tests_name("election", tests, setup_one, teardown_one);
    rc |= cmocka_run_group_tests_name("election_cluster", cluster, NULL, teardown_cluster);
    return rc;
}
