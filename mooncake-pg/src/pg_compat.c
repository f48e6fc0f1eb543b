/* The reference's mooncake_pg.h calls over mc_pg: argument checks in its terms, its result
 * codes, its coordinator (our control plane, pg_coord.c) and completions that are done. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "mooncake_pg.h"
#include "pg_internal.h"

struct mooncakePgContext {
    int global_rank, max_world;
    int initialized;
    char coordinator[256]; /* "host:port" */
    char host_ip[256];
    void *engine;
    int coll_timeout_ms, p2p_timeout_ms;
    int window_ms;                 /* SetFaultReconciliationWindow (0: the membership timeout) */
    mc_pg_coordinator_t *launched; /* the coordinator this context runs, if any */
    int comms;                     /* alive communicators: the context outlives them */
};

struct mooncakePgComm {
    mooncakePgContext_t ctx;
    mc_pg_comm_t *c;
    int32_t *mirror;
    size_t mirror_n;
};

struct mooncakePgCompletion {
    mooncakePgResult_t result;
};

static _Thread_local char last_error[MOONCAKE_PG_MAX_ERROR_STRING];

static mooncakePgResult_t fail(mooncakePgResult_t r, const char *what) {
    snprintf(last_error, sizeof(last_error), "%s", what);
    return r;
}

static mooncakePgResult_t from_mc(int rc, const char *what) {
    if (rc == 0)
        return mooncakePgSuccess;
    char buf[MOONCAKE_PG_MAX_ERROR_STRING];
    snprintf(buf, sizeof(buf), "%s: %s (%d)", what, mc_strerror(rc), rc);
    switch (rc) {
    case MC_ERR_INVALID_ARGUMENT:
        return fail(mooncakePgInvalidArgument, buf);
    case MC_ERR_NOT_IMPLEMENTED:
        return fail(mooncakePgNotSupported, buf);
    case MC_ERR_ENDPOINT:
        return fail(mooncakePgTimeout, buf);
    case MC_ERR_MEMORY:
        return fail(mooncakePgSystemError, buf);
    default:
        return fail(mooncakePgTransferEngineError, buf);
    }
}

const char *mooncakePgGetErrorString(mooncakePgResult_t r) {
    static const char *const names[] = {
        "success",      "invalid argument", "invalid state",         "not supported",
        "timeout",      "resource busy",    "transfer engine error", "rpc error",
        "system error", "internal error",
    };
    return (unsigned)r < sizeof(names) / sizeof(names[0]) ? names[r] : "unknown result";
}

const char *mooncakePgGetLastError(void) {
    return last_error;
}

mooncakePgResult_t mooncakePgContextCreate(mooncakePgContext_t *out) {
    if (!out)
        return fail(mooncakePgInvalidArgument, "context is NULL");
    *out = mc__calloc(1, sizeof(**out));
    return *out ? mooncakePgSuccess : fail(mooncakePgSystemError, "out of memory");
}

mooncakePgResult_t mooncakePgContextInitialize(mooncakePgContext_t x, int global_rank,
                                               int max_world) {
    if (!x || global_rank < 0 || max_world < 1 || max_world > MOONCAKE_PG_MAX_RANKS ||
        global_rank >= max_world)
        return fail(mooncakePgInvalidArgument, "bad rank or world size");
    if (x->initialized)
        return fail(mooncakePgInvalidState, "context already initialized");
    x->global_rank = global_rank;
    x->max_world = max_world;
    x->initialized = 1;
    return mooncakePgSuccess;
}

mooncakePgResult_t mooncakePgContextLaunchCoordinator(mooncakePgContext_t x, char *buf,
                                                      size_t cap) {
    if (!x || !buf)
        return fail(mooncakePgInvalidArgument, "NULL argument");
    if (x->launched)
        return fail(mooncakePgInvalidState, "this context runs a coordinator already");
    mc_pg_coordinator_t *k = NULL;
    int rc = mc_pg_coordinator_start(x->host_ip[0] ? x->host_ip : NULL, 0, &k);
    if (rc)
        return from_mc(rc, "starting the coordinator");
    if (mc_pg_coordinator_address(k, buf, cap) != 0) {
        mc_pg_coordinator_stop(k);
        return fail(mooncakePgInvalidArgument, "address buffer too small");
    }
    x->launched = k;
    return mooncakePgSuccess;
}

mooncakePgResult_t mooncakePgContextConnectCoordinator(mooncakePgContext_t x, const char *addr) {
    if (!x || !addr)
        return fail(mooncakePgInvalidArgument, "NULL argument");
    const char *a = strncmp(addr, "tcp://", 6) == 0 ? addr + 6 : addr;
    char host[256];
    uint16_t port = 0;
    if (strlen(a) >= sizeof(x->coordinator) ||
        mc__split_host_port(a, host, sizeof(host), &port) != 0 || port == 0)
        return fail(mooncakePgInvalidArgument, "the coordinator address must be host:port");
    /* reachable now, so a wrong address fails here rather than in the first CommCreate */
    int fd = mc__tcp_connect(host, port, mc__now_ms() + 10000);
    if (fd < 0)
        return fail(mooncakePgRpcError, "the coordinator does not answer");
    close(fd);
    strcpy(x->coordinator, a);
    return mooncakePgSuccess;
}

mooncakePgResult_t mooncakePgContextSetHostIp(mooncakePgContext_t x, const char *ip) {
    if (!x || !ip || !*ip || strlen(ip) >= sizeof(x->host_ip))
        return fail(mooncakePgInvalidArgument, "bad host address");
    strcpy(x->host_ip, ip);
    return mooncakePgSuccess;
}

mooncakePgResult_t mooncakePgContextSetTransferEngine(mooncakePgContext_t x, void *engine) {
    if (!x)
        return fail(mooncakePgInvalidArgument, "context is NULL");
    x->engine = engine; /* an mc_engine_t, as mooncake.engine's get_engine_ptr() gives */
    return mooncakePgSuccess;
}

mooncakePgResult_t mooncakePgContextSetDeviceFilter(mooncakePgContext_t x, const char *const *f,
                                                    size_t n) {
    /* tcp and shm use no device; accepted so the reference's callers run unchanged */
    if (!x || (n && !f))
        return fail(mooncakePgInvalidArgument, "bad filter list");
    return mooncakePgSuccess;
}

static int us_to_ms(int64_t us) {
    return us > (int64_t)INT32_MAX * 1000 ? INT32_MAX : (int)((us + 999) / 1000);
}

mooncakePgResult_t mooncakePgContextSetCollectiveTimeout(mooncakePgContext_t x, size_t us) {
    if (!x || us == 0)
        return fail(mooncakePgInvalidArgument, "timeout must be positive");
    x->coll_timeout_ms = us_to_ms((int64_t)(us > INT64_MAX ? INT64_MAX : us));
    return mooncakePgSuccess;
}

mooncakePgResult_t mooncakePgContextSetP2PTimeout(mooncakePgContext_t x, int64_t us) {
    if (!x || us <= 0)
        return fail(mooncakePgInvalidArgument, "timeout must be positive");
    x->p2p_timeout_ms = us_to_ms(us);
    return mooncakePgSuccess;
}

mooncakePgResult_t mooncakePgContextSetFaultReconciliationWindow(mooncakePgContext_t x,
                                                                 int64_t us) {
    /* how long a membership proposal waits for silent members before it drops them */
    if (!x || us <= 0)
        return fail(mooncakePgInvalidArgument, "window must be positive");
    x->window_ms = us_to_ms(us);
    return mooncakePgSuccess;
}

mooncakePgResult_t mooncakePgContextDestroy(mooncakePgContext_t x) {
    if (!x)
        return fail(mooncakePgInvalidArgument, "context is NULL");
    if (x->comms)
        return fail(mooncakePgInvalidState, "communicators of this context are alive");
    mc_pg_coordinator_stop(x->launched);
    mc__free(x);
    return mooncakePgSuccess;
}

mooncakePgResult_t mooncakePgCommCreate(mooncakePgContext_t x, const mooncakePgCommConfig_t *cfg,
                                        mooncakePgComm_t *out) {
    if (!x || !cfg || !out)
        return fail(mooncakePgInvalidArgument, "NULL argument");
    if (cfg->structSize < sizeof(*cfg) || cfg->magic != MOONCAKE_PG_COMM_CONFIG_MAGIC ||
        cfg->version != MOONCAKE_PG_COMM_CONFIG_VERSION)
        return fail(mooncakePgInvalidArgument,
                    "config not made with MOONCAKE_PG_COMM_CONFIG_INITIALIZER");
    if (!x->initialized || !x->coordinator[0])
        return fail(mooncakePgInvalidState, "context not initialized or not connected");
    if (cfg->deviceType != mooncakePgDeviceCpu)
        return fail(mooncakePgNotSupported, "only CPU communicators are supported");
    if (cfg->rank == MOONCAKE_PG_CONFIG_UNDEF_INT || cfg->size == MOONCAKE_PG_CONFIG_UNDEF_INT ||
        !cfg->globalRanks || cfg->globalRankCount != (size_t)cfg->size)
        return fail(mooncakePgInvalidArgument,
                    "rank, size and globalRanks (size entries) are required");
    if (cfg->activeRanksMirror && cfg->activeRanksMirrorIsDevice)
        return fail(mooncakePgNotSupported, "a device mirror needs device memory support");
    const char *group = cfg->groupId && *cfg->groupId ? cfg->groupId : "default";
    if (strlen(group) >= MC_PG_GROUP_NAME_MAX)
        return fail(mooncakePgInvalidArgument, "groupId too long");
    mc_pg_options_t o = {0};
    o.rank = cfg->rank;
    o.size = cfg->size;
    o.max_group_size = cfg->maxGroupSize == MOONCAKE_PG_CONFIG_UNDEF_INT ? 0 : cfg->maxGroupSize;
    o.engine = x->engine;
    o.host_ip = x->host_ip[0] ? x->host_ip : NULL;
    o.collective_timeout_ms = x->coll_timeout_ms;
    o.p2p_timeout_ms = x->p2p_timeout_ms;
    o.auto_deactivate_on_failure = cfg->autoDeactivateOnFailure;
    mooncakePgComm_t m = mc__calloc(1, sizeof(*m));
    if (!m)
        return fail(mooncakePgSystemError, "out of memory");
    int rc = mc_pg_create(&o, &m->c);
    if (!rc)
        rc = mc_pg_ctrl_register(m->c, x->coordinator, group,
                                 cfg->idResolvePolicy == mooncakePgIdResolveAttachOrExtend,
                                 x->coll_timeout_ms ? x->coll_timeout_ms : 60000);
    if (rc) {
        mc_pg_destroy(m->c);
        mc__free(m);
        return from_mc(rc, "mooncakePgCommCreate");
    }
    m->ctx = x;
    m->mirror = cfg->activeRanksMirror;
    m->mirror_n = cfg->activeRanksMirrorCount;
    x->comms++;
    *out = m;
    return mooncakePgSuccess;
}

mooncakePgResult_t mooncakePgCommDestroy(mooncakePgComm_t m) {
    if (!m)
        return fail(mooncakePgInvalidArgument, "comm is NULL");
    mc_pg_destroy(m->c);
    m->ctx->comms--;
    mc__free(m);
    return mooncakePgSuccess;
}

/* The integer getters of a communicator. */
#define GETTER(name, call)                                                                         \
    mooncakePgResult_t name(mooncakePgComm_t m, int *v) {                                          \
        if (!m || !v)                                                                              \
            return fail(mooncakePgInvalidArgument, "NULL argument");                               \
        *v = call(m->c);                                                                           \
        return mooncakePgSuccess;                                                                  \
    }
GETTER(mooncakePgCommGetRank, mc_pg_rank)
GETTER(mooncakePgCommGetSize, mc_pg_size)
GETTER(mooncakePgCommGetMaxGroupSize, mc_pg_max_group_size)
GETTER(mooncakePgCommGetNumSyncedRanks, mc_pg_num_synced_ranks)

/* After an operation: the hint into the caller's array (as many entries as it has room for),
 * the mirror refreshed, and a completion that is done. */
static mooncakePgResult_t finish(mooncakePgComm_t m, int rc, const int32_t *hint, int32_t *out,
                                 size_t out_n, mooncakePgCompletion_t *completion,
                                 const char *what) {
    if (out)
        for (size_t i = 0; i < out_n && i < MC_PG_MAX_RANKS; i++)
            out[i] = hint[i];
    if (m->mirror) {
        int32_t act[MC_PG_MAX_RANKS];
        if (mc_pg_active_ranks(m->c, act, MC_PG_MAX_RANKS) == 0)
            for (size_t i = 0; i < m->mirror_n && i < MC_PG_MAX_RANKS; i++)
                m->mirror[i] = act[i];
    }
    mooncakePgResult_t r = from_mc(rc, what);
    if (completion) {
        *completion = mc__calloc(1, sizeof(**completion));
        if (!*completion)
            return fail(mooncakePgSystemError, "out of memory");
        (*completion)->result = r;
    }
    return r;
}

#define HINT_ARGS int32_t *hint_out, size_t hint_n
#define CHECK_COMM(m)                                                                              \
    if (!(m))                                                                                      \
    return fail(mooncakePgInvalidArgument, "comm is NULL")
#define RUN(call, what)                                                                            \
    do {                                                                                           \
        int32_t hint[MC_PG_MAX_RANKS] = {0};                                                       \
        int rc_ = (call);                                                                          \
        return finish(m, rc_, hint, hint_out, hint_n, completion, what);                           \
    } while (0)

mooncakePgResult_t mooncakePgBroadcastCpu(const void *s, void *r, size_t n, mooncakePgDataType_t d,
                                          int root, mooncakePgComm_t m, HINT_ARGS,
                                          mooncakePgCompletion_t *completion) {
    CHECK_COMM(m);
    RUN(mc_pg_broadcast(m->c, s, r, n, d, root, hint), "broadcast");
}

mooncakePgResult_t mooncakePgAllReduceCpu(const void *s, void *r, size_t n, mooncakePgDataType_t d,
                                          mooncakePgReduceOp_t op, mooncakePgComm_t m, HINT_ARGS,
                                          mooncakePgCompletion_t *completion) {
    CHECK_COMM(m);
    RUN(mc_pg_all_reduce(m->c, s, r, n, d, op, hint), "all_reduce");
}

mooncakePgResult_t mooncakePgAllGatherCpu(const void *s, void *r, size_t n, mooncakePgDataType_t d,
                                          mooncakePgComm_t m, HINT_ARGS,
                                          mooncakePgCompletion_t *completion) {
    CHECK_COMM(m);
    RUN(mc_pg_all_gather(m->c, s, r, n, d, hint), "all_gather");
}

mooncakePgResult_t mooncakePgReduceScatterCpu(const void *s, void *r, size_t n,
                                              mooncakePgDataType_t d, mooncakePgReduceOp_t op,
                                              mooncakePgComm_t m, HINT_ARGS,
                                              mooncakePgCompletion_t *completion) {
    CHECK_COMM(m);
    RUN(mc_pg_reduce_scatter(m->c, s, r, n, d, op, hint), "reduce_scatter");
}

mooncakePgResult_t mooncakePgAllToAllCpu(const void *s, void *r, size_t n, mooncakePgDataType_t d,
                                         mooncakePgComm_t m, HINT_ARGS,
                                         mooncakePgCompletion_t *completion) {
    CHECK_COMM(m);
    RUN(mc_pg_all_to_all(m->c, s, r, n, d, hint), "all_to_all");
}

mooncakePgResult_t mooncakePgReduceCpu(const void *s, void *r, size_t n, mooncakePgDataType_t d,
                                       mooncakePgReduceOp_t op, int root, mooncakePgComm_t m,
                                       HINT_ARGS, mooncakePgCompletion_t *completion) {
    CHECK_COMM(m);
    RUN(mc_pg_reduce(m->c, s, r, n, d, op, root, hint), "reduce");
}

mooncakePgResult_t mooncakePgGatherCpu(const void *s, void *r, size_t n, mooncakePgDataType_t d,
                                       int root, mooncakePgComm_t m, HINT_ARGS,
                                       mooncakePgCompletion_t *completion) {
    CHECK_COMM(m);
    RUN(mc_pg_gather(m->c, s, r, n, d, root, hint), "gather");
}

mooncakePgResult_t mooncakePgScatterCpu(const void *s, void *r, size_t n, mooncakePgDataType_t d,
                                        int root, mooncakePgComm_t m, HINT_ARGS,
                                        mooncakePgCompletion_t *completion) {
    CHECK_COMM(m);
    RUN(mc_pg_scatter(m->c, s, r, n, d, root, hint), "scatter");
}

mooncakePgResult_t mooncakePgBarrierCpu(mooncakePgComm_t m, HINT_ARGS,
                                        mooncakePgCompletion_t *completion) {
    CHECK_COMM(m);
    RUN(mc_pg_barrier(m->c, hint), "barrier");
}

mooncakePgResult_t mooncakePgSendCpu(const void *s, size_t n, mooncakePgDataType_t d, int peer,
                                     mooncakePgComm_t m, HINT_ARGS,
                                     mooncakePgCompletion_t *completion) {
    CHECK_COMM(m);
    size_t esz = mc_pg_dtype_size(d);
    if (!esz)
        return fail(mooncakePgInvalidArgument, "unknown data type");
    RUN(mc_pg_send(m->c, s, n * esz, peer, hint), "send");
}

mooncakePgResult_t mooncakePgRecvCpu(void *r, size_t n, mooncakePgDataType_t d, int peer,
                                     mooncakePgComm_t m, HINT_ARGS,
                                     mooncakePgCompletion_t *completion) {
    CHECK_COMM(m);
    size_t esz = mc_pg_dtype_size(d);
    if (!esz)
        return fail(mooncakePgInvalidArgument, "unknown data type");
    RUN(mc_pg_recv(m->c, r, n * esz, peer, hint), "recv");
}

static mooncakePgResult_t no_gpu(void) {
    return fail(mooncakePgNotSupported, "device memory is not supported yet: use the *Cpu calls");
}

mooncakePgResult_t mooncakePgBroadcastGpu(const void *s, void *r, size_t n, mooncakePgDataType_t d,
                                          int root, mooncakePgComm_t m, mooncakePgStream_t st,
                                          HINT_ARGS) {
    return no_gpu();
}
mooncakePgResult_t mooncakePgAllReduceGpu(const void *s, void *r, size_t n, mooncakePgDataType_t d,
                                          mooncakePgReduceOp_t op, mooncakePgComm_t m,
                                          mooncakePgStream_t st, HINT_ARGS) {
    return no_gpu();
}
mooncakePgResult_t mooncakePgAllGatherGpu(const void *s, void *r, size_t n, mooncakePgDataType_t d,
                                          mooncakePgComm_t m, mooncakePgStream_t st, HINT_ARGS) {
    return no_gpu();
}
mooncakePgResult_t mooncakePgReduceScatterGpu(const void *s, void *r, size_t n,
                                              mooncakePgDataType_t d, mooncakePgReduceOp_t op,
                                              mooncakePgComm_t m, mooncakePgStream_t st,
                                              HINT_ARGS) {
    return no_gpu();
}
mooncakePgResult_t mooncakePgAllToAllGpu(const void *s, void *r, size_t n, mooncakePgDataType_t d,
                                         mooncakePgComm_t m, mooncakePgStream_t st, HINT_ARGS) {
    return no_gpu();
}
mooncakePgResult_t mooncakePgReduceGpu(const void *s, void *r, size_t n, mooncakePgDataType_t d,
                                       mooncakePgReduceOp_t op, int root, mooncakePgComm_t m,
                                       mooncakePgStream_t st, HINT_ARGS) {
    return no_gpu();
}
mooncakePgResult_t mooncakePgGatherGpu(const void *s, void *r, size_t n, mooncakePgDataType_t d,
                                       int root, mooncakePgComm_t m, mooncakePgStream_t st,
                                       HINT_ARGS) {
    return no_gpu();
}
mooncakePgResult_t mooncakePgScatterGpu(const void *s, void *r, size_t n, mooncakePgDataType_t d,
                                        int root, mooncakePgComm_t m, mooncakePgStream_t st,
                                        HINT_ARGS) {
    return no_gpu();
}
mooncakePgResult_t mooncakePgBarrierGpu(mooncakePgComm_t m, mooncakePgStream_t st, HINT_ARGS) {
    return no_gpu();
}
mooncakePgResult_t mooncakePgSendGpu(const void *s, size_t n, mooncakePgDataType_t d, int peer,
                                     mooncakePgComm_t m, mooncakePgStream_t st, HINT_ARGS,
                                     mooncakePgCompletion_t *completion) {
    return no_gpu();
}
mooncakePgResult_t mooncakePgRecvGpu(void *r, size_t n, mooncakePgDataType_t d, int peer,
                                     mooncakePgComm_t m, mooncakePgStream_t st, HINT_ARGS,
                                     mooncakePgCompletion_t *completion) {
    return no_gpu();
}

mooncakePgResult_t mooncakePgCompletionIsCompleted(mooncakePgCompletion_t c, int *done) {
    if (!c || !done)
        return fail(mooncakePgInvalidArgument, "NULL argument");
    *done = 1;
    return mooncakePgSuccess;
}

mooncakePgResult_t mooncakePgCompletionWait(mooncakePgCompletion_t c, int64_t timeout_us) {
    if (!c)
        return fail(mooncakePgInvalidArgument, "completion is NULL");
    return c->result;
}

mooncakePgResult_t mooncakePgCompletionDestroy(mooncakePgCompletion_t c) {
    if (!c)
        return fail(mooncakePgInvalidArgument, "completion is NULL");
    mc__free(c);
    return mooncakePgSuccess;
}

mooncakePgResult_t mooncakePgCommGetActiveRanks(mooncakePgComm_t m, int32_t *out, size_t n) {
    if (!m || !out)
        return fail(mooncakePgInvalidArgument, "NULL argument");
    int32_t act[MC_PG_MAX_RANKS];
    int rc = mc_pg_active_ranks(m->c, act, MC_PG_MAX_RANKS);
    if (rc)
        return from_mc(rc, "active ranks");
    for (size_t i = 0; i < n && i < MC_PG_MAX_RANKS; i++)
        out[i] = act[i];
    return mooncakePgSuccess;
}

mooncakePgResult_t mooncakePgCommGetPeerState(mooncakePgComm_t m, const int32_t *ranks, size_t n,
                                              int32_t *states) {
    if (!m)
        return fail(mooncakePgInvalidArgument, "comm is NULL");
    return from_mc(mc_pg_peer_state(m->c, ranks, n, states), "peer state");
}

/* How long a membership change may wait: the members' decision on a joiner, a joiner that is
 * slow to ask (as mooncake.pg's membership timeout: twice the collective timeout, 60 s at least).
 */
static int membership_timeout_ms(const mooncakePgContext_t x) {
    int t = x->coll_timeout_ms ? x->coll_timeout_ms : 30000;
    return t > 30000 ? (t > INT32_MAX / 2 ? INT32_MAX : 2 * t) : 60000;
}

mooncakePgResult_t mooncakePgCommActivateRanks(mooncakePgComm_t m, const int32_t *ranks, size_t n,
                                               mooncakePgProposalResponse_t *resp) {
    if (!m || !resp || (n && !ranks))
        return fail(mooncakePgInvalidArgument, "NULL argument");
    mc_pg_proposal_result_t res;
    int timeout = membership_timeout_ms(m->ctx);
    int window = m->ctx->window_ms ? m->ctx->window_ms : timeout;
    int rc = mc_pg_ctrl_activate(m->c, ranks, n, window, timeout, &res);
    memset(resp, 0, sizeof(*resp));
    if (rc) {
        snprintf(resp->rejectReason, sizeof(resp->rejectReason), "%s", res.reason);
        return from_mc(rc, res.reason[0] ? res.reason : "activate ranks");
    }
    resp->status = (mooncakePgProposalStatus_t)res.status;
    resp->newEpoch = res.epoch;
    for (int i = 0; i < MC_PG_MAX_RANKS; i++)
        if (res.dropped[i])
            resp->droppedRanks[resp->droppedRankCount++] = i;
    snprintf(resp->rejectReason, sizeof(resp->rejectReason), "%s", res.reason);
    finish(m, 0, (const int32_t[MC_PG_MAX_RANKS]){0}, NULL, 0, NULL, "activate ranks");
    return mooncakePgSuccess;
}

mooncakePgResult_t mooncakePgCommDeactivateRanks(mooncakePgComm_t m, const int32_t *ranks, size_t n,
                                                 mooncakePgProposalResponse_t *resp) {
    if (!m || !resp)
        return fail(mooncakePgInvalidArgument, "NULL argument");
    int rc = mc_pg_deactivate(m->c, ranks, n);
    if (rc)
        return from_mc(rc, "deactivate");
    memset(resp, 0, sizeof(*resp));
    resp->status = mooncakePgProposalApplied;
    resp->newEpoch = mc_pg_epoch(m->c);
    return mooncakePgSuccess;
}

mooncakePgResult_t mooncakePgCommJoin(mooncakePgComm_t m) {
    if (!m)
        return fail(mooncakePgInvalidArgument, "comm is NULL");
    int rc = mc_pg_ctrl_join(m->c, membership_timeout_ms(m->ctx));
    finish(m, 0, (const int32_t[MC_PG_MAX_RANKS]){0}, NULL, 0, NULL, "join");
    return from_mc(rc, "join");
}

mooncakePgResult_t mooncakePgCommSyncAfterFailure(mooncakePgComm_t m,
                                                  mooncakePgSyncAfterFailureResponse_t *resp) {
    if (!m || !resp)
        return fail(mooncakePgInvalidArgument, "NULL argument");
    int st = 0;
    int rc = mc_pg_sync_after_failure(m->c, &st);
    if (rc)
        return from_mc(rc, "sync after failure");
    memset(resp, 0, sizeof(*resp));
    resp->status = (mooncakePgSyncAfterFailureStatus_t)st;
    return mooncakePgSuccess;
}

mooncakePgResult_t mooncakePgCommGetEpoch(mooncakePgComm_t m, uint64_t *e) {
    if (!m || !e)
        return fail(mooncakePgInvalidArgument, "NULL argument");
    *e = mc_pg_epoch(m->c);
    return mooncakePgSuccess;
}
