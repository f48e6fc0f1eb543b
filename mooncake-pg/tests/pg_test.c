/* The PG's C API across real processes: each test forks ranks that meet through a rendezvous
 * directory and run collectives against values every rank can compute; a rank that dies
 * mid-run; arguments a caller gets wrong. */
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "mooncake/pg.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "rank check failed %s:%d: %s\n", __FILE__, __LINE__, #cond);           \
            _exit(1);                                                                              \
        }                                                                                          \
    } while (0)

typedef void (*rank_fn)(mc_pg_comm_t *c, int rank, int n);

static mc_pg_comm_t *join(const char *dir, int rank, int n, int timeout_ms) {
    mc_pg_options_t o = {0};
    o.rank = rank;
    o.size = n;
    o.collective_timeout_ms = timeout_ms;
    o.p2p_timeout_ms = timeout_ms;
    o.slot_bytes = 4096; /* small slots: every operation below runs several rounds */
    o.auto_deactivate_on_failure = 1;
    mc_pg_comm_t *c = NULL;
    CHECK(mc_pg_create(&o, &c) == 0);
    CHECK(mc_pg_rendezvous_dir(c, dir, 60000) == 0);
    return c;
}

/* Forks n ranks running fn; each must exit 0 within the deadline. */
static void run_ranks(int n, rank_fn fn, int timeout_ms, int expect_dead) {
    char dir[] = "/tmp/mc_pg_test_XXXXXX";
    assert_non_null(mkdtemp(dir));
    pid_t pids[8];
    for (int r = 0; r < n; r++) {
        pids[r] = fork();
        assert_true(pids[r] >= 0);
        if (pids[r] == 0) {
            mc_pg_comm_t *c = join(dir, r, n, timeout_ms);
            fn(c, r, n);
            mc_pg_destroy(c);
            _exit(0);
        }
    }
    int bad = 0;
    for (int r = 0; r < n; r++) {
        int st = 0;
        assert_int_equal(waitpid(pids[r], &st, 0), pids[r]);
        if (r == expect_dead)
            continue;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "rank %d ended with status %d\n", r, st);
            bad++;
        }
    }
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(bad, 0);
}

static void no_failures(const int32_t *f, int n) {
    for (int i = 0; i < n; i++)
        CHECK(f[i] == 0);
}

#define N_ELEMS 5000 /* 20 KB of floats: five rounds of 4 KiB slots */

static void collectives(mc_pg_comm_t *c, int rank, int n) {
    int32_t f[MC_PG_MAX_RANKS];
    float *x = malloc(N_ELEMS * sizeof(float));
    for (int i = 0; i < N_ELEMS; i++)
        x[i] = (float)(rank + 1) * (float)(i % 97);
    CHECK(mc_pg_all_reduce(c, x, x, N_ELEMS, MC_PG_FLOAT32, MC_PG_SUM, f) == 0);
    no_failures(f, n);
    float tri = (float)(n * (n + 1) / 2);
    for (int i = 0; i < N_ELEMS; i++)
        CHECK(x[i] == tri * (float)(i % 97));

    int32_t v[3] = {rank + 10, -rank, rank * 2};
    int32_t out[3];
    CHECK(mc_pg_all_reduce(c, v, out, 3, MC_PG_INT32, MC_PG_MAX, f) == 0);
    CHECK(out[0] == n + 9 && out[1] == 0 && out[2] == 2 * (n - 1));
    CHECK(mc_pg_all_reduce(c, v, out, 3, MC_PG_INT32, MC_PG_MIN, f) == 0);
    CHECK(out[0] == 10 && out[1] == -(n - 1) && out[2] == 0);
    int64_t two = 2, prod;
    CHECK(mc_pg_all_reduce(c, &two, &prod, 1, MC_PG_INT64, MC_PG_PRODUCT, f) == 0);
    CHECK(prod == (1 << n));
    double d = rank, avg;
    CHECK(mc_pg_all_reduce(c, &d, &avg, 1, MC_PG_FLOAT64, MC_PG_AVG, f) == 0);
    CHECK(fabs(avg - (n - 1) / 2.0) < 1e-12);
    /* bf16 1.0 = 0x3f80, fp8 e4m3 1.0 = 0x38, e5m2 1.0 = 0x3c; n ones sum exactly */
    uint16_t b = 0x3f80, bs;
    CHECK(mc_pg_all_reduce(c, &b, &bs, 1, MC_PG_BFLOAT16, MC_PG_SUM, f) == 0);
    uint16_t want_bf = n == 2 ? 0x4000 : n == 3 ? 0x4040 : 0x4080;
    CHECK(bs == want_bf);
    uint8_t e = 0x38, es;
    CHECK(mc_pg_all_reduce(c, &e, &es, 1, MC_PG_FLOAT8_E4M3FN, MC_PG_SUM, f) == 0);
    CHECK(es == (n == 2 ? 0x40 : n == 3 ? 0x44 : 0x48));
    uint16_t h = 0x3c00, hs; /* fp16 1.0 */
    CHECK(mc_pg_all_reduce(c, &h, &hs, 1, MC_PG_FLOAT16, MC_PG_SUM, f) == 0);
    CHECK(hs == (n == 2 ? 0x4000 : n == 3 ? 0x4200 : 0x4400));

    /* broadcast from the last rank, chunked */
    for (int i = 0; i < N_ELEMS; i++)
        x[i] = rank == n - 1 ? (float)i : -1.0f;
    CHECK(mc_pg_broadcast(c, x, x, N_ELEMS, MC_PG_FLOAT32, n - 1, f) == 0);
    for (int i = 0; i < N_ELEMS; i++)
        CHECK(x[i] == (float)i);

    /* reduce to rank 1 */
    int32_t *big = malloc(N_ELEMS * sizeof(int32_t) * 8),
            *got = malloc(N_ELEMS * sizeof(int32_t) * 8);
    for (int i = 0; i < N_ELEMS; i++)
        big[i] = i + rank;
    CHECK(mc_pg_reduce(c, big, got, N_ELEMS, MC_PG_INT32, MC_PG_SUM, 1, f) == 0);
    if (rank == 1)
        for (int i = 0; i < N_ELEMS; i++)
            CHECK(got[i] == n * i + n * (n - 1) / 2);

    /* all_gather / gather: block r holds r*1000 + i */
    for (int i = 0; i < N_ELEMS; i++)
        big[i] = rank * 1000 + i;
    CHECK(mc_pg_all_gather(c, big, got, N_ELEMS, MC_PG_INT32, f) == 0);
    for (int r = 0; r < n; r++)
        for (int i = 0; i < N_ELEMS; i++)
            CHECK(got[r * N_ELEMS + i] == r * 1000 + i);
    memset(got, 0, N_ELEMS * sizeof(int32_t) * (size_t)n);
    CHECK(mc_pg_gather(c, big, rank == 0 ? got : NULL, N_ELEMS, MC_PG_INT32, 0, f) == 0);
    if (rank == 0)
        for (int r = 0; r < n; r++)
            for (int i = 0; i < N_ELEMS; i++)
                CHECK(got[r * N_ELEMS + i] == r * 1000 + i);

    /* scatter from 0: block r = r*7 + i; all_to_all: block for r = rank*100 + r*10 + i */
    for (int r = 0; r < n; r++)
        for (int i = 0; i < N_ELEMS; i++)
            big[r * N_ELEMS + i] = r * 7 + i;
    CHECK(mc_pg_scatter(c, rank == 0 ? big : NULL, got, N_ELEMS, MC_PG_INT32, 0, f) == 0);
    for (int i = 0; i < N_ELEMS; i++)
        CHECK(got[i] == rank * 7 + i);
    for (int r = 0; r < n; r++)
        for (int i = 0; i < N_ELEMS; i++)
            big[r * N_ELEMS + i] = rank * 100 + r * 10 + i;
    CHECK(mc_pg_all_to_all(c, big, got, N_ELEMS, MC_PG_INT32, f) == 0);
    for (int r = 0; r < n; r++)
        for (int i = 0; i < N_ELEMS; i++)
            CHECK(got[r * N_ELEMS + i] == r * 100 + rank * 10 + i);
    /* reduce_scatter: block r of every rank's input is r + i; the sum is n * (r + i) */
    for (int r = 0; r < n; r++)
        for (int i = 0; i < N_ELEMS; i++)
            big[r * N_ELEMS + i] = r + i;
    CHECK(mc_pg_reduce_scatter(c, big, got, N_ELEMS, MC_PG_INT32, MC_PG_SUM, f) == 0);
    for (int i = 0; i < N_ELEMS; i++)
        CHECK(got[i] == n * (rank + i));
    CHECK(mc_pg_barrier(c, f) == 0);
    no_failures(f, n);

    /* a ring of sends, three chunks each, and an empty message */
    int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    for (int i = 0; i < 3000; i++)
        big[i] = rank * 5 + i;
    if (rank % 2 == 0) {
        CHECK(mc_pg_send(c, big, 3000 * 4, next, f) == 0);
        CHECK(mc_pg_recv(c, got, 3000 * 4, prev, f) == 0);
    } else {
        CHECK(mc_pg_recv(c, got, 3000 * 4, prev, f) == 0);
        CHECK(mc_pg_send(c, big, 3000 * 4, next, f) == 0);
    }
    for (int i = 0; i < 3000; i++)
        CHECK(got[i] == prev * 5 + i);
    CHECK(mc_pg_barrier(c, f) == 0);
    free(x);
    free(big);
    free(got);
}

static void test_collectives_2(void **state) {
    run_ranks(2, collectives, 30000, -1);
}
static void test_collectives_4(void **state) {
    run_ranks(4, collectives, 30000, -1);
}

/* Rank 2 of 3 dies after a barrier; the survivors see it in the next operation's hint within
 * the timeout, agree in sync_after_failure, and go on as two. */
static void dead_rank(mc_pg_comm_t *c, int rank, int n) {
    int32_t f[MC_PG_MAX_RANKS];
    CHECK(mc_pg_barrier(c, f) == 0);
    if (rank == 2)
        _exit(0);
    int32_t v = rank + 1, s = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK(mc_pg_all_reduce(c, &v, &s, 1, MC_PG_INT32, MC_PG_SUM, f) == 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    CHECK(f[2] == 1 && f[0] == 0 && f[1] == 0);
    double took = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    CHECK(took < 20.0); /* the timeout is 1.5 s; a busy host gets slack, a hang does not */
    int32_t act[MC_PG_MAX_RANKS];
    CHECK(mc_pg_active_ranks(c, act, MC_PG_MAX_RANKS) == 0);
    CHECK(act[2] == 0);
    uint64_t e0 = mc_pg_epoch(c);
    int st = -1;
    CHECK(mc_pg_sync_after_failure(c, &st) == 0);
    CHECK(st == MC_PG_SYNC_RECONCILED);
    CHECK(mc_pg_num_synced_ranks(c) == 2);
    CHECK(mc_pg_epoch(c) > e0);
    CHECK(mc_pg_all_reduce(c, &v, &s, 1, MC_PG_INT32, MC_PG_SUM, f) == 0);
    CHECK(s == 3 && f[2] == 0);
    CHECK(mc_pg_sync_after_failure(c, &st) == 0);
    CHECK(st == MC_PG_SYNC_NO_PENDING);
    int32_t ranks[3] = {0, 1, 2}, alive[3];
    CHECK(mc_pg_peer_state(c, ranks, 3, alive) == 0);
    CHECK(alive[0] == 1 && alive[1] == 1 && alive[2] == 0);
    CHECK(mc_pg_barrier(c, f) == 0); /* neither leaves while the other probes it */
    no_failures(f, n);
}

static void test_dead_rank(void **state) {
    run_ranks(3, dead_rank, 1500, 2);
}

/* A sender that leaves as soon as its last chunk landed: the receiver still gets every byte
 * (its credit back to the gone sender fails nothing). */
static void sender_leaves(mc_pg_comm_t *c, int rank, int n) {
    int32_t f[MC_PG_MAX_RANKS];
    CHECK(mc_pg_barrier(c, f) == 0);
    int32_t buf[3000];
    if (rank == 0) {
        for (int i = 0; i < 3000; i++)
            buf[i] = i * 3;
        for (int m = 0; m < 4; m++)
            CHECK(mc_pg_send(c, buf, sizeof(buf), 1, f) == 0);
        return; /* destroyed and gone at once */
    }
    for (int m = 0; m < 4; m++) {
        memset(buf, 0, sizeof(buf));
        CHECK(mc_pg_recv(c, buf, sizeof(buf), 0, f) == 0);
        for (int i = 0; i < 3000; i++)
            CHECK(buf[i] == i * 3);
    }
}

static void test_sender_leaves(void **state) {
    run_ranks(2, sender_leaves, 10000, -1);
}

static void bad_arguments(mc_pg_comm_t *c, int rank, int n) {
    int32_t f[MC_PG_MAX_RANKS];
    CHECK(mc_pg_barrier(c, f) == 0); /* both have connected before either leaves */
    float x = 1;
    CHECK(mc_pg_all_reduce(c, &x, &x, 1, 99, MC_PG_SUM, f) == MC_ERR_INVALID_ARGUMENT);
    CHECK(mc_pg_all_reduce(c, &x, &x, 1, MC_PG_FLOAT32, 9, f) == MC_ERR_INVALID_ARGUMENT);
    CHECK(mc_pg_all_reduce(c, &x, &x, 1, MC_PG_FLOAT8_E8M0FNU, MC_PG_SUM, f) ==
          MC_ERR_NOT_IMPLEMENTED);
    CHECK(mc_pg_broadcast(c, &x, &x, 1, MC_PG_FLOAT32, n, f) == MC_ERR_INVALID_ARGUMENT);
    CHECK(mc_pg_broadcast(c, &x, &x, 1, MC_PG_FLOAT32, -1, f) == MC_ERR_INVALID_ARGUMENT);
    CHECK(mc_pg_send(c, &x, 4, rank, f) == MC_ERR_INVALID_ARGUMENT);
    CHECK(mc_pg_recv(c, &x, 4, 7, f) == MC_ERR_INVALID_ARGUMENT);
    CHECK(mc_pg_all_reduce(NULL, &x, &x, 1, MC_PG_FLOAT32, MC_PG_SUM, f) ==
          MC_ERR_INVALID_ARGUMENT);
    int32_t one = 1 - rank;
    CHECK(mc_pg_deactivate(c, &one, 1) == 0);
    int32_t act[MC_PG_MAX_RANKS];
    CHECK(mc_pg_active_ranks(c, act, MC_PG_MAX_RANKS) == 0 && act[one] == 0 && act[rank] == 1);
    CHECK(mc_pg_active_ranks(c, act, 1) == MC_ERR_INVALID_ARGUMENT);
    int32_t self = rank;
    CHECK(mc_pg_deactivate(c, &self, 1) == MC_ERR_INVALID_ARGUMENT);
}

static void test_bad_arguments(void **state) {
    run_ranks(2, bad_arguments, 5000, -1);
    mc_pg_options_t o = {0};
    mc_pg_comm_t *c = NULL;
    o.rank = 2;
    o.size = 2;
    assert_int_equal(mc_pg_create(&o, &c), MC_ERR_INVALID_ARGUMENT);
    o.rank = 0;
    o.max_group_size = MC_PG_MAX_RANKS + 1;
    assert_int_equal(mc_pg_create(&o, &c), MC_ERR_INVALID_ARGUMENT);
    o.max_group_size = 0;
    o.slot_bytes = 10;
    assert_int_equal(mc_pg_create(&o, &c), MC_ERR_INVALID_ARGUMENT);
    o.slot_bytes = 0;
    assert_int_equal(mc_pg_create(&o, &c), 0);
    const char *bad[2] = {"no-address-here", "x#1"};
    assert_int_equal(mc_pg_connect(c, bad, 2), MC_ERR_INVALID_ARGUMENT);
    int32_t f[MC_PG_MAX_RANKS];
    assert_int_equal(mc_pg_barrier(c, f), MC_ERR_INVALID_ARGUMENT); /* not connected */
    mc_pg_destroy(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_collectives_2), cmocka_unit_test(test_collectives_4),
        cmocka_unit_test(test_dead_rank),     cmocka_unit_test(test_sender_leaves),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
