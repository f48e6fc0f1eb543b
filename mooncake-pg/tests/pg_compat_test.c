/* The reference's mooncake_pg.h calls across real processes: a coordinator directory, two ranks
 * creating CPU communicators from the initializer config, an all-reduce with a completion, the
 * membership calls, and what the reference's callers can get wrong. */
#include <setjmp.h>
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
    CHECK(mooncakePgContextConnectCoordinator(ctx, "tcp://1.2.3.4:5") == mooncakePgInvalidArgument);
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
    CHECK(mooncakePgCommActivateRanks(comm, ranks, 1, &pr) == mooncakePgNotSupported);
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
    assert_int_equal(strncmp(coord, "file://", 7), 0);
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
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", coord + 7);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(mooncakePgContextDestroy(ctx), mooncakePgSuccess);
    assert_string_equal(mooncakePgGetErrorString(mooncakePgTimeout), "timeout");
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_two_ranks)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
