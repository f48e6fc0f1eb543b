/* The reference's mooncake_pg.h calls across real processes: a coordinator directory, two ranks
 * creating CPU communicators from the initializer config, an all-reduce with a completion, the
 * membership calls, and what the reference's callers can get wrong. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "mooncake_pg.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "rank check failed %s:%d: %s (%s)\n", __FILE__, __LINE__, #cond,       \
                    mooncakePgGetLastError());                                                     \
            _exit(1);                                                                              \
        }                                                                                          \
    } while (0)

static void rank_body(const char *coord, int rank) {
    mooncakePgContext_t ctx = NULL;
    CHECK(mooncakePgContextCreate(&ctx) == mooncakePgSuccess);
    CHECK(mooncakePgContextInitialize(ctx, rank, 2) == mooncakePgSuccess);
    CHECK(mooncakePgContextInitialize(ctx, rank, 2) == mooncakePgInvalidState);
    CHECK(mooncakePgContextConnectCoordinator(ctx, "file:///tmp") == mooncakePgInvalidArgument);
    CHECK(mooncakePgContextConnectCoordinator(ctx, "127.0.0.1") == mooncakePgInvalidArgument);
    CHECK(mooncakePgContextConnectCoordinator(ctx, "127.0.0.1:1") == mooncakePgRpcError);
    CHECK(mooncakePgContextConnectCoordinator(ctx, coord) == mooncakePgSuccess);
    CHECK(mooncakePgContextSetCollectiveTimeout(ctx, 20 * 1000 * 1000) == mooncakePgSuccess);
    CHECK(mooncakePgContextSetP2PTimeout(ctx, -1) == mooncakePgInvalidArgument);

    int32_t ranks[2] = {0, 1};
    mooncakePgCommConfig_t cfg = MOONCAKE_PG_COMM_CONFIG_INITIALIZER;
    cfg.groupId = "g";
    cfg.rank = rank;
    cfg.size = 2;
    cfg.globalRanks = ranks;
    cfg.globalRankCount = 2;
    mooncakePgComm_t comm = NULL;
    /* the initializer asks for a GPU communicator, which this build refuses clearly */
    CHECK(mooncakePgCommCreate(ctx, &cfg, &comm) == mooncakePgNotSupported);
    cfg.deviceType = mooncakePgDeviceCpu;
    cfg.globalRankCount = 1;
    CHECK(mooncakePgCommCreate(ctx, &cfg, &comm) == mooncakePgInvalidArgument);
    cfg.globalRankCount = 2;
    int32_t mirror[2] = {-1, -1};
    cfg.activeRanksMirror = mirror;
    cfg.activeRanksMirrorCount = 2;
    CHECK(mooncakePgCommCreate(ctx, &cfg, &comm) == mooncakePgSuccess);
    CHECK(mooncakePgContextDestroy(ctx) == mooncakePgInvalidState); /* a comm is alive */

    int v = 0;
    CHECK(mooncakePgCommGetRank(comm, &v) == mooncakePgSuccess && v == rank);
    CHECK(mooncakePgCommGetSize(comm, &v) == mooncakePgSuccess && v == 2);
    float x[3] = {1.0f + (float)rank, 2, 3}, y[3];
    int32_t hint[2] = {-1, -1};
    mooncakePgCompletion_t done = NULL;
    CHECK(mooncakePgAllReduceCpu(x, y, 3, mooncakePgFloat32, mooncakePgSum, comm, hint, 2, &done) ==
          mooncakePgSuccess);
    CHECK(mooncakePgCompletionWait(done, 1000000) == mooncakePgSuccess);
    int completed = 0;
    CHECK(mooncakePgCompletionIsCompleted(done, &completed) == mooncakePgSuccess && completed);
    CHECK(mooncakePgCompletionDestroy(done) == mooncakePgSuccess);
    CHECK(y[0] == 3 && y[1] == 4 && y[2] == 6 && hint[0] == 0 && hint[1] == 0);
    CHECK(mirror[0] == 1 && mirror[1] == 1);
    CHECK(mooncakePgAllReduceCpu(x, y, 3, (mooncakePgDataType_t)77, mooncakePgSum, comm, hint, 2,
                                 NULL) == mooncakePgInvalidArgument);
    CHECK(strlen(mooncakePgGetLastError()) > 0);
    CHECK(mooncakePgAllReduceGpu(x, y, 3, mooncakePgFloat32, mooncakePgSum, comm, NULL, hint, 2) ==
          mooncakePgNotSupported);
    int32_t msg = 40 + rank, got = 0;
    if (rank == 0) {
        CHECK(mooncakePgSendCpu(&msg, 1, mooncakePgInt32, 1, comm, hint, 2, NULL) ==
              mooncakePgSuccess);
        CHECK(mooncakePgRecvCpu(&got, 1, mooncakePgInt32, 1, comm, hint, 2, NULL) ==
              mooncakePgSuccess);
    } else {
        CHECK(mooncakePgRecvCpu(&got, 1, mooncakePgInt32, 0, comm, hint, 2, NULL) ==
              mooncakePgSuccess);
        CHECK(mooncakePgSendCpu(&msg, 1, mooncakePgInt32, 0, comm, hint, 2, NULL) ==
              mooncakePgSuccess);
    }
    CHECK(got == 41 - rank);
    int32_t act[2], alive[2];
    CHECK(mooncakePgCommGetActiveRanks(comm, act, 2) == mooncakePgSuccess && act[0] && act[1]);
    CHECK(mooncakePgCommGetPeerState(comm, ranks, 2, alive) == mooncakePgSuccess && alive[0] &&
          alive[1]);
    mooncakePgSyncAfterFailureResponse_t sr;
    CHECK(mooncakePgCommSyncAfterFailure(comm, &sr) == mooncakePgSuccess &&
          sr.status == mooncakePgSyncNoPending);
    uint64_t epoch = 0;
    CHECK(mooncakePgCommGetEpoch(comm, &epoch) == mooncakePgSuccess && epoch >= 1);
    CHECK(mooncakePgCommGetNumSyncedRanks(comm, &v) == mooncakePgSuccess && v == 2);
    mooncakePgProposalResponse_t pr;
    /* every rank named is active already: nothing to decide */
    CHECK(mooncakePgCommActivateRanks(comm, ranks, 2, &pr) == mooncakePgSuccess &&
          pr.status == mooncakePgProposalApplied && pr.droppedRankCount == 0);
    int32_t outside = 5;
    CHECK(mooncakePgCommActivateRanks(comm, &outside, 1, &pr) == mooncakePgInvalidArgument);
    CHECK(mooncakePgBarrierCpu(comm, hint, 2, NULL) == mooncakePgSuccess);
    CHECK(mooncakePgCommDestroy(comm) == mooncakePgSuccess);
    CHECK(mooncakePgContextDestroy(ctx) == mooncakePgSuccess);
}

static void test_two_ranks(void **state) {
    mooncakePgContext_t ctx = NULL;
    char coord[512];
    assert_int_equal(mooncakePgContextCreate(&ctx), mooncakePgSuccess);
    assert_int_equal(mooncakePgContextLaunchCoordinator(ctx, coord, 8), mooncakePgInvalidArgument);
    assert_int_equal(mooncakePgContextLaunchCoordinator(ctx, coord, sizeof(coord)),
                     mooncakePgSuccess);
    assert_non_null(strchr(coord, ':'));
    pid_t pids[2];
    for (int r = 0; r < 2; r++) {
        pids[r] = fork();
        assert_true(pids[r] >= 0);
        if (pids[r] == 0) {
            rank_body(coord, r);
            _exit(0);
        }
    }
    for (int r = 0; r < 2; r++) {
        int st = 0;
        assert_int_equal(waitpid(pids[r], &st, 0), pids[r]);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    assert_int_equal(mooncakePgContextDestroy(ctx), mooncakePgSuccess);
    assert_string_equal(mooncakePgGetErrorString(mooncakePgTimeout), "timeout");
}

/* --- membership through the coordinator: extension, a silent member dropped, recovery --- */

#define SEATS 4
#define WINDOW_US (5 * 1000 * 1000) /* how long a proposal waits for a silent member */

static mooncakePgComm_t open_comm(const char *coord, int rank, mooncakePgContext_t *ctx_out,
                                  int extension) {
    mooncakePgContext_t ctx = NULL;
    CHECK(mooncakePgContextCreate(&ctx) == mooncakePgSuccess);
    CHECK(mooncakePgContextInitialize(ctx, rank, SEATS) == mooncakePgSuccess);
    CHECK(mooncakePgContextConnectCoordinator(ctx, coord) == mooncakePgSuccess);
    CHECK(mooncakePgContextSetCollectiveTimeout(ctx, 30 * 1000 * 1000) == mooncakePgSuccess);
    CHECK(mooncakePgContextSetFaultReconciliationWindow(ctx, WINDOW_US) == mooncakePgSuccess);
    int32_t ranks[3] = {0, 1, 2};
    mooncakePgCommConfig_t cfg = MOONCAKE_PG_COMM_CONFIG_INITIALIZER;
    cfg.groupId = "elastic";
    cfg.rank = rank;
    cfg.size = 3;
    cfg.maxGroupSize = SEATS;
    cfg.globalRanks = ranks;
    cfg.globalRankCount = 3;
    cfg.deviceType = mooncakePgDeviceCpu;
    if (extension)
        cfg.idResolvePolicy = mooncakePgIdResolveAttachOrExtend;
    mooncakePgComm_t comm = NULL;
    CHECK(mooncakePgCommCreate(ctx, &cfg, &comm) == mooncakePgSuccess);
    *ctx_out = ctx;
    return comm;
}

static void close_comm(mooncakePgContext_t ctx, mooncakePgComm_t comm) {
    CHECK(mooncakePgCommDestroy(comm) == mooncakePgSuccess);
    CHECK(mooncakePgContextDestroy(ctx) == mooncakePgSuccess);
}

/* All-reduce of rank + 1 over the active seats; checks the sum and the active map. */
static void sum_check(mooncakePgComm_t comm, int rank, const int32_t *want_active) {
    int32_t act[SEATS], hint[SEATS], x = rank + 1, y = 0, want = 0;
    CHECK(mooncakePgCommGetActiveRanks(comm, act, SEATS) == mooncakePgSuccess);
    for (int i = 0; i < SEATS; i++) {
        CHECK(act[i] == want_active[i]);
        want += want_active[i] ? i + 1 : 0;
    }
    CHECK(mooncakePgAllReduceCpu(&x, &y, 1, mooncakePgInt32, mooncakePgSum, comm, hint, SEATS,
                                 NULL) == mooncakePgSuccess);
    for (int i = 0; i < SEATS; i++)
        CHECK(hint[i] == 0);
    if (y != want)
        fprintf(stderr, "rank %d: sum %d, want %d\n", rank, y, want);
    CHECK(y == want);
}

static void wait_peer(mooncakePgComm_t comm, int32_t seat) {
    int32_t alive = 0;
    for (int i = 0; i < 6000 && !alive; i++) {
        CHECK(mooncakePgCommGetPeerState(comm, &seat, 1, &alive) == mooncakePgSuccess);
        if (!alive)
            usleep(10000);
    }
    CHECK(alive);
}

static void say(int fd) {
    CHECK(write(fd, "x", 1) == 1);
}

static const int32_t three[SEATS] = {1, 1, 1, 0}, without2[SEATS] = {1, 1, 0, 1},
                     all4[SEATS] = {1, 1, 1, 1};

/* Ranks 0 and 1: the group of three, then admit seat 3 while rank 2 is paused (it is dropped
 * after the window), then recover seat 2 with a new process. */
static void member(const char *coord, int rank, int done_fd) {
    mooncakePgContext_t ctx;
    mooncakePgComm_t comm = open_comm(coord, rank, &ctx, 0);
    sum_check(comm, rank, three);
    say(done_fd);
    uint64_t e0 = 0, e1 = 0;
    CHECK(mooncakePgCommGetEpoch(comm, &e0) == mooncakePgSuccess);
    mooncakePgProposalResponse_t pr;
    int32_t seat3 = 3, seat2 = 2;
    wait_peer(comm, seat3); /* the joiner asked: its seat answers a probe */
    CHECK(mooncakePgCommActivateRanks(comm, &seat3, 1, &pr) == mooncakePgSuccess);
    CHECK(pr.status == mooncakePgProposalAppliedWithDroppedRanks && pr.droppedRankCount == 1 &&
          pr.droppedRanks[0] == 2 && pr.newEpoch > e0);
    CHECK(mooncakePgCommGetEpoch(comm, &e1) == mooncakePgSuccess && e1 == pr.newEpoch);
    sum_check(comm, rank, without2);
    say(done_fd);
    CHECK(mooncakePgCommActivateRanks(comm, &seat2, 1, &pr) == mooncakePgSuccess);
    CHECK(pr.status == mooncakePgProposalApplied && pr.droppedRankCount == 0 && pr.newEpoch > e1);
    sum_check(comm, rank, all4);
    close_comm(ctx, comm);
}

/* Rank 2: in the group of three, then paused (SIGSTOP) before it could propose; resumed, it
 * finds the group moved on without it. */
static void paused(const char *coord, int done_fd) {
    mooncakePgContext_t ctx;
    mooncakePgComm_t comm = open_comm(coord, 2, &ctx, 0);
    sum_check(comm, 2, three);
    say(done_fd);
    raise(SIGSTOP);
    mooncakePgProposalResponse_t pr;
    int32_t seat3 = 3;
    CHECK(mooncakePgCommActivateRanks(comm, &seat3, 1, &pr) == mooncakePgSuccess);
    CHECK(pr.status == mooncakePgProposalRejected && strstr(pr.rejectReason, "dropped"));
    close_comm(ctx, comm);
}

/* A joiner: seat 3 by extension (then a member when seat 2 is recovered), or the new process in
 * seat 2. */
static void joiner(const char *coord, int rank, int done_fd) {
    mooncakePgContext_t ctx;
    mooncakePgComm_t comm = open_comm(coord, rank, &ctx, 1);
    int32_t act[SEATS];
    CHECK(mooncakePgCommGetActiveRanks(comm, act, SEATS) == mooncakePgSuccess);
    for (int i = 0; i < SEATS; i++)
        CHECK(act[i] == (i == rank)); /* alone until admitted */
    CHECK(mooncakePgCommJoin(comm) == mooncakePgSuccess);
    if (rank == 3) {
        sum_check(comm, rank, without2);
        say(done_fd);
        mooncakePgProposalResponse_t pr;
        int32_t seat2 = 2;
        CHECK(mooncakePgCommActivateRanks(comm, &seat2, 1, &pr) == mooncakePgSuccess);
        CHECK(pr.status == mooncakePgProposalApplied);
    }
    sum_check(comm, rank, all4);
    close_comm(ctx, comm);
}

static pid_t spawn(void (*body)(const char *, int, int), const char *coord, int rank, int fd) {
    pid_t p = fork();
    assert_true(p >= 0);
    if (p == 0) {
        body(coord, rank, fd);
        _exit(0);
    }
    return p;
}

static void paused_body(const char *coord, int rank, int fd) {
    paused(coord, fd);
}

static void await_bytes(int fd, int n) {
    char b;
    for (int i = 0; i < n; i++)
        assert_int_equal(read(fd, &b, 1), 1);
}

static void reap(pid_t p) {
    int st = 0;
    assert_int_equal(waitpid(p, &st, 0), p);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void test_membership(void **state) {
    mooncakePgContext_t ctx = NULL;
    char coord[128];
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    assert_int_equal(mooncakePgContextCreate(&ctx), mooncakePgSuccess);
    assert_int_equal(mooncakePgContextLaunchCoordinator(ctx, coord, sizeof(coord)),
                     mooncakePgSuccess);
    assert_int_equal(mooncakePgContextLaunchCoordinator(ctx, coord, sizeof(coord)),
                     mooncakePgInvalidState);
    pid_t m0 = spawn(member, coord, 0, fds[1]), m1 = spawn(member, coord, 1, fds[1]);
    pid_t p2 = spawn(paused_body, coord, 2, fds[1]);
    await_bytes(fds[0], 3); /* the group of three ran its all-reduce */
    int st = 0;
    assert_int_equal(waitpid(p2, &st, WUNTRACED), p2);
    assert_true(WIFSTOPPED(st));
    pid_t j3 = spawn(joiner, coord, 3, fds[1]);
    await_bytes(fds[0], 3); /* 0, 1 and 3 went on without the paused rank */
    kill(p2, SIGCONT);
    reap(p2); /* rejected: the group moved on */
    pid_t j2 = spawn(joiner, coord, 2, fds[1]);
    reap(m0);
    reap(m1);
    reap(j3);
    reap(j2);
    close(fds[0]);
    close(fds[1]);
    assert_int_equal(mooncakePgContextDestroy(ctx), mooncakePgSuccess);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_two_ranks),
                                       cmocka_unit_test(test_membership)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
