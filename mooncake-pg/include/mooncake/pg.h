/* Mooncake PG: collectives and point-to-point messages between the ranks of a group, on the
 * Transfer Engine, for CPU buffers.
 *
 * Each rank owns one communicator. It registers one region with its engine (managed memory, so
 * same-host peers reach it over shm, others over tcp) and every operation moves bytes by WRITEs
 * straight into the peers' regions: a data write into the slot the peer keeps for this rank, then
 * an 8-byte flag carrying the operation's round number. A rank reads a slot only after it saw that
 * slot's flag reach the round it waits for, and a slot is written again only two rounds later,
 * by which time every active peer's flag for the round between proves it consumed the old bytes
 * (so the collectives need no acknowledgements). Point-to-point messages have a slot per sender
 * and receiver-driven credits: the receiver writes back how many chunks it consumed, and the
 * sender writes the next chunk only when the slot is free.
 *
 * The group has max_group_size seats (ranks 0..max_group_size-1); the first size of them are
 * active at creation. A peer that does not deliver its flag within the operation's timeout, or
 * whose transfer fails, is reported in the operation's failed-ranks hint (one int32 per seat,
 * non-zero = failed in this operation); with auto_deactivate_on_failure it also leaves this
 * rank's active set at once (the epoch grows). mc_pg_sync_after_failure makes the survivors agree
 * on one active set. Operations never hang: each wait has the communicator's timeout.
 *
 * Functions return 0 or a negative MC_ERR_* code (mooncake/error.h). An operation that ran but
 * lost peers returns 0 and fills the hint; MC_ERR_INVALID_ARGUMENT is for what the caller got
 * wrong (unknown dtype or op, root outside the group, buffers that overlap the wrong way). One
 * communicator serves one collective at a time (callers serialize them, as torch does); sends to
 * one peer and receives from one peer may run on other threads beside a collective. */
#ifndef MOONCAKE_PG_H
#define MOONCAKE_PG_H

#include <stddef.h>
#include <stdint.h>

#include "mooncake/error.h"
#include "mooncake/export.h"
#include "mooncake/transfer_engine.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MC_PG_MAX_RANKS 64 /* seats of one group, as the reference's MOONCAKE_PG_MAX_RANKS */

/* The reference's mooncakePgDataType numbering. */
enum mc_pg_dtype {
    MC_PG_INT8 = 0,
    MC_PG_UINT8 = 1,
    MC_PG_INT16 = 2,
    MC_PG_UINT16 = 3,
    MC_PG_INT32 = 4,
    MC_PG_UINT32 = 5,
    MC_PG_INT64 = 6,
    MC_PG_UINT64 = 7,
    MC_PG_FLOAT16 = 8,
    MC_PG_FLOAT32 = 9,
    MC_PG_FLOAT64 = 10,
    MC_PG_BFLOAT16 = 11,
    MC_PG_BOOL = 12,
    MC_PG_FLOAT8_E4M3FN = 13,
    MC_PG_FLOAT8_E5M2 = 14,
    /* 15..17 (the fnuz and e8m0 fp8 kinds) move as bytes but cannot be reduced:
     * MC_ERR_NOT_IMPLEMENTED from the reducing operations. */
    MC_PG_FLOAT8_E4M3FNUZ = 15,
    MC_PG_FLOAT8_E5M2FNUZ = 16,
    MC_PG_FLOAT8_E8M0FNU = 17,
};

/* The reference's mooncakePgReduceOp numbering. */
enum mc_pg_reduce_op {
    MC_PG_SUM = 0,
    MC_PG_AVG = 1,
    MC_PG_PRODUCT = 2,
    MC_PG_MIN = 3,
    MC_PG_MAX = 4
};

typedef struct mc_pg_comm mc_pg_comm_t;

typedef struct mc_pg_options {
    int rank;           /* 0 <= rank < max_group_size */
    int size;           /* ranks active at creation: 0..size-1 */
    int max_group_size; /* seats; 0 = size; at most MC_PG_MAX_RANKS */
    /* An initialized engine to use (it must outlive the communicator); NULL: the communicator
     * starts its own on host_ip (NULL: "127.0.0.1") with protocol (NULL: "auto"; MC_FORCE_TCP=1
     * forces tcp). */
    mc_engine_t *engine;
    const char *host_ip;
    const char *protocol;
    int collective_timeout_ms; /* how long a collective waits for a peer (0: 30000) */
    int p2p_timeout_ms;        /* how long a send waits for credit, a recv for data (0: 30000) */
    /* Bytes of the slot each peer gets per round (0: MC_PG_SLOT_BYTES from the environment, else
     * 1 MiB); the region is 3 * max_group_size slots plus the flags. */
    size_t slot_bytes;
    int auto_deactivate_on_failure; /* drop a failed peer from the active set at once */
} mc_pg_options_t;

/* Starts the engine (unless given), allocates and registers the region. The communicator is not
 * usable until mc_pg_connect. */
MC_API int mc_pg_create(const mc_pg_options_t *o, mc_pg_comm_t **out);
/* This rank's address for the rendezvous: "<segment name>#<region address>", NUL-terminated
 * into buf (MC_ERR_INVALID_ARGUMENT when cap is too small). */
MC_API int mc_pg_local_address(mc_pg_comm_t *c, char *buf, size_t cap);
/* Connects to the peers: addrs[i] is rank i's mc_pg_local_address for i < n (n >= size; seats
 * past n stay unknown until mc_pg_set_peer). Opens their segments; a malformed address:
 * MC_ERR_INVALID_ARGUMENT. */
MC_API int mc_pg_connect(mc_pg_comm_t *c, const char *const *addrs, size_t n);
/* Exchanges the addresses through a directory shared by the ranks (a FileStore's kind of
 * rendezvous, for C callers without a store): writes this rank's address into dir, waits up to
 * timeout_ms for the first size ranks', then connects. */
MC_API int mc_pg_rendezvous_dir(mc_pg_comm_t *c, const char *dir, int timeout_ms);
/* Frees the communicator (and the engine when it started one). NULL is accepted. */
MC_API void mc_pg_destroy(mc_pg_comm_t *c);

MC_API int mc_pg_rank(const mc_pg_comm_t *c);
MC_API int mc_pg_size(const mc_pg_comm_t *c);
MC_API int mc_pg_max_group_size(const mc_pg_comm_t *c);
MC_API mc_engine_t *mc_pg_engine(const mc_pg_comm_t *c);
MC_API int mc_pg_set_timeouts(mc_pg_comm_t *c, int collective_timeout_ms, int p2p_timeout_ms);
/* Bytes of one element; 0 for an unknown dtype. */
MC_API size_t mc_pg_dtype_size(int dtype);

/* The collectives. count is in elements: of each rank's contribution for all_gather, gather,
 * scatter and all_to_all (one block per peer), of the output for reduce_scatter. Buffers hold
 * size (not max_group_size) blocks where an operation takes one block per rank. send and recv may
 * be the same buffer for all_reduce, broadcast and reduce. failed (seats entries, may be NULL)
 * receives the failed-ranks hint. Ranks outside the active set neither send nor receive; their
 * blocks of the output are left as they were. */
MC_API int mc_pg_broadcast(mc_pg_comm_t *c, const void *send, void *recv, size_t count, int dtype,
                           int root, int32_t *failed);
MC_API int mc_pg_all_reduce(mc_pg_comm_t *c, const void *send, void *recv, size_t count, int dtype,
                            int op, int32_t *failed);
MC_API int mc_pg_reduce(mc_pg_comm_t *c, const void *send, void *recv, size_t count, int dtype,
                        int op, int root, int32_t *failed);
MC_API int mc_pg_all_gather(mc_pg_comm_t *c, const void *send, void *recv, size_t count, int dtype,
                            int32_t *failed);
MC_API int mc_pg_reduce_scatter(mc_pg_comm_t *c, const void *send, void *recv, size_t count,
                                int dtype, int op, int32_t *failed);
MC_API int mc_pg_all_to_all(mc_pg_comm_t *c, const void *send, void *recv, size_t count, int dtype,
                            int32_t *failed);
MC_API int mc_pg_gather(mc_pg_comm_t *c, const void *send, void *recv, size_t count, int dtype,
                        int root, int32_t *failed);
MC_API int mc_pg_scatter(mc_pg_comm_t *c, const void *send, void *recv, size_t count, int dtype,
                         int root, int32_t *failed);
MC_API int mc_pg_barrier(mc_pg_comm_t *c, int32_t *failed);

/* Point-to-point: len bytes, in order per (sender, receiver) pair. A send returns once the last
 * chunk is in the receiver's slot; a recv once the bytes are in buf. A peer that gives no credit
 * (send) or no data (recv) within the p2p timeout fails the call with its seat in the hint and
 * MC_ERR_ENDPOINT. */
MC_API int mc_pg_send(mc_pg_comm_t *c, const void *buf, size_t len, int peer, int32_t *failed);
MC_API int mc_pg_recv(mc_pg_comm_t *c, void *buf, size_t len, int peer, int32_t *failed);

/* Membership. active receives max_group_size entries (1 = active). */
MC_API int mc_pg_active_ranks(mc_pg_comm_t *c, int32_t *active, size_t n);
MC_API uint64_t mc_pg_epoch(mc_pg_comm_t *c);
/* Number of ranks that took part in the last successful mc_pg_sync_after_failure (size before
 * any). */
MC_API int mc_pg_num_synced_ranks(mc_pg_comm_t *c);
/* alive[i] = 1 when rank ranks[i]'s engine answers a probe now. */
MC_API int mc_pg_peer_state(mc_pg_comm_t *c, const int32_t *ranks, size_t n, int32_t *alive);
/* Takes ranks out of (deactivate) this rank's active set; the epoch grows when it changes. */
MC_API int mc_pg_deactivate(mc_pg_comm_t *c, const int32_t *ranks, size_t n);

enum mc_pg_sync_status {
    MC_PG_SYNC_RECONCILED = 0,
    MC_PG_SYNC_NO_PENDING = 1,
    MC_PG_SYNC_REJECTED = 2
};
/* The survivors' agreement after failures: every rank in this rank's active set sends the ranks
 * it saw fail since the last sync; the union (and any rank that does not answer within the
 * collective timeout) leaves the active set of all of them, and the epoch grows. *status:
 * RECONCILED when a failure was pending anywhere, NO_PENDING when none was. */
MC_API int mc_pg_sync_after_failure(mc_pg_comm_t *c, int *status);

/* Membership changes: recovery (a new process takes a failed seat), in-place rejoin (the same
 * process comes back) and extension (a seat never used before). The agreement itself (who is
 * admitted, from which round) is the caller's (mooncake.pg does it through the group's store);
 * these calls apply it.
 *
 * mc_pg_set_peer points seat `rank` at a new address (mc_pg_local_address of the process now in
 * the seat); the seat's active bit is not changed. */
MC_API int mc_pg_set_peer(mc_pg_comm_t *c, int rank, const char *addr);
/* This rank's counters: the last collective round it ran and its sync_after_failure calls. A
 * rank admitted into a group must continue from counters no lower than anyone's. */
MC_API int mc_pg_counters(mc_pg_comm_t *c, uint64_t *round, uint64_t *syncs);
/* Starts seats over: their point-to-point counters both ways, their leave marks and pending
 * failures in this rank's region and state are cleared. A member calls it for the seats it is
 * about to admit, an admitted rank for every other seat, each before it tells the others it is
 * ready (so no message of the new incarnation can be cleared). */
MC_API int mc_pg_reset_seats(mc_pg_comm_t *c, const int32_t *seats, size_t n);
/* Applies an agreed view: active[i] for every seat (n = max_group_size), the counters to go on
 * from (raised, never lowered) and the epoch. */
MC_API int mc_pg_admit(mc_pg_comm_t *c, const int32_t *active, size_t n, uint64_t round,
                       uint64_t syncs, uint64_t epoch);
/* A graceful leave: writes this rank's leave mark into every active peer (which drop it from
 * their active sets the next time they look, without waiting for a timeout) and keeps only
 * itself active. */
MC_API int mc_pg_leave(mc_pg_comm_t *c);
/* The control plane: a coordinator that holds every group's view (seats, addresses, active set,
 * epoch) and decides membership changes, reached over our framed RPC (the protocol is in
 * mooncake-pg/src/pg_ctrl_proto.h). One process runs it; ranks reach it at "host:port".
 *
 * mc_pg_coordinator_start listens on host (NULL: 127.0.0.1) and port (0: any free one). */
typedef struct mc_pg_coordinator mc_pg_coordinator_t;
MC_API int mc_pg_coordinator_start(const char *host, uint16_t port, mc_pg_coordinator_t **out);
/* "host:port" of a started coordinator. */
MC_API int mc_pg_coordinator_address(const mc_pg_coordinator_t *k, char *buf, size_t cap);
/* Stops it: calls it holds fail, every connection thread is joined. NULL is accepted. */
MC_API void mc_pg_coordinator_stop(mc_pg_coordinator_t *k);

/* Enters group `group` at coordinator `coordinator` ("host:port", "tcp://" accepted) instead of
 * mc_pg_connect. Without extension: waits up to timeout_ms until the first size ranks registered,
 * then connects to them (a rank that registers again for a group that was complete makes the
 * group anew: destroy and re-create under one name). With extension: attaches to an existing
 * group at once and runs alone (only its own seat active) until mc_pg_ctrl_join admits it. */
MC_API int mc_pg_ctrl_register(mc_pg_comm_t *c, const char *coordinator, const char *group,
                               int extension, int timeout_ms);
/* An inactive rank (a new process in a failed or unused seat, or a deactivated one coming back)
 * asks to be admitted and waits up to timeout_ms for the members' decision, then applies it:
 * MC_ERR_ENDPOINT when no member admitted it in time. */
MC_API int mc_pg_ctrl_join(mc_pg_comm_t *c, int timeout_ms);

enum mc_pg_proposal_status {
    MC_PG_PROPOSAL_REJECTED = 0, /* as the reference's mooncakePgProposalStatus */
    MC_PG_PROPOSAL_APPLIED = 1,
    MC_PG_PROPOSAL_APPLIED_WITH_DROPPED = 2,
};
typedef struct mc_pg_proposal_result {
    int status;                       /* enum mc_pg_proposal_status */
    uint64_t epoch;                   /* the epoch this rank is at afterwards */
    int32_t dropped[MC_PG_MAX_RANKS]; /* 1 = a member dropped as silent */
    char reason[256];                 /* why, when rejected */
} mc_pg_proposal_result_t;
/* A member's proposal to admit ranks (those already active are skipped). Every member of this
 * rank's active set proposes the same ranks; the coordinator decides once all did and every
 * joiner asked (mc_pg_ctrl_join), or once window_ms after the first proposal passed: members that
 * did not propose by then are dropped (APPLIED_WITH_DROPPED, dropped[] names them). Every member
 * and joiner then holds one active set, epoch and round counters. REJECTED (0 returned) when
 * another proposal is in progress, members disagree on the active set, or the group moved on
 * without this rank (it was dropped); MC_ERR_ENDPOINT when a joiner did not ask within timeout_ms.
 */
MC_API int mc_pg_ctrl_activate(mc_pg_comm_t *c, const int32_t *ranks, size_t n, int window_ms,
                               int timeout_ms, mc_pg_proposal_result_t *out);

/* Fault injection for tests: while on, every transfer this rank makes to seat `peer` fails as a
 * dead link would (peer -1: every seat). */
MC_API int mc_pg_inject_link_fault(mc_pg_comm_t *c, int peer, int on);

#ifdef __cplusplus
}
#endif
#endif
