/* The contract between the PG's files: the communicator's state, the region layout and the round
 * primitive every collective is built from (pg_round.c). */
#ifndef MC_PG_INTERNAL_H
#define MC_PG_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "mooncake/pg.h"

#define MC_PG_GROUP_NAME_MAX 128 /* bytes of a control-plane group name, NUL included */

struct mc_pg_peer {
    mc_segment_id_t seg;
    uint64_t base; /* the peer's region address; 0 = seat unknown */
    char name[256];
};

/* Region layout, offsets from its start:
 *   flags[seats]      round numbers written by each sender (collectives)
 *   p2p_seq[seats]    chunks each sender has written into its p2p slot
 *   p2p_done[seats]   chunks each receiver consumed of what this rank sent (its credits)
 *   sync_flags[seats] sync_after_failure calls each sender made
 *   left[seats]       non-zero once that sender left gracefully (mc_pg_leave)
 *   sync_msg[seats]   MC_PG_SYNC_MSG bytes each: a sender's sync message
 *   coll data         2 buffers x seats slots (round parity picks the buffer)
 *   p2p data          seats slots */
struct mc_pg_comm {
    mc_engine_t *engine;
    int own_engine;
    int rank, size, seats;
    size_t slot;
    uint8_t *region;
    size_t region_len;
    uint64_t *flags, *p2p_seq, *p2p_done, *sync_flags, *left;
    uint64_t syncs; /* sync_after_failure calls made */
    uint8_t *coll_data, *p2p_data;
    struct mc_pg_peer *peers;
    int connected;
    uint64_t round; /* the last round this rank ran */
    void *scratch;  /* one slot: the reduction's accumulator */
    int coll_timeout_ms, p2p_timeout_ms;
    int auto_deactivate;

    pthread_mutex_t lock; /* the membership below and the p2p counters */
    uint8_t active[MC_PG_MAX_RANKS];
    uint8_t pending[MC_PG_MAX_RANKS]; /* seen failing since the last sync */
    uint64_t epoch;
    int num_synced;
    uint64_t p2p_sent[MC_PG_MAX_RANKS], p2p_recvd[MC_PG_MAX_RANKS];
    uint8_t link_fault[MC_PG_MAX_RANKS]; /* mc_pg_inject_link_fault */

    /* The control plane this communicator registered with (mc_pg_ctrl_register; "" = none). */
    char ctrl_addr[256];
    char ctrl_group[MC_PG_GROUP_NAME_MAX];
};

#define MC_PG_OFF_FLAGS(c) 0
#define MC_PG_OFF_P2P_SEQ(c) ((uint64_t)(c)->seats * 8)
#define MC_PG_OFF_P2P_DONE(c) ((uint64_t)(c)->seats * 16)
#define MC_PG_OFF_SYNC_FLAGS(c) ((uint64_t)(c)->seats * 24)
#define MC_PG_OFF_LEFT(c) ((uint64_t)(c)->seats * 32)
#define MC_PG_SYNC_MSG 128 /* the round (8 bytes), "pending" (1), one byte per seat */
#define MC_PG_OFF_SYNC_MSG(c, seat) ((uint64_t)(c)->seats * 40 + (uint64_t)(seat)*MC_PG_SYNC_MSG)
#define MC_PG_CTRL_LEN(c)                                                                          \
    ((((uint64_t)(c)->seats * (40 + MC_PG_SYNC_MSG)) + 4095) & ~(uint64_t)4095)
#define MC_PG_OFF_COLL(c, parity, seat)                                                            \
    (MC_PG_CTRL_LEN(c) + ((uint64_t)(parity) * (c)->seats + (uint64_t)(seat)) * (c)->slot)
#define MC_PG_OFF_P2P(c, seat) (MC_PG_CTRL_LEN(c) + (2ull * (c)->seats + (seat)) * (c)->slot)

/* What this rank writes to one peer in a round (len 0: the flag only). */
struct mc_pg_part {
    const void *src;
    size_t len;
};

/* One round: parts[j] goes into seat j's slot for this rank (j active, j != rank), then the
 * flag; then waits until every active peer's flag reached the round, or the timeout. Peers that
 * failed go into failed[] (and pending/active per the policy). *round receives the round number
 * (the slots to read are MC_PG_OFF_COLL(c, round & 1, j)). alive[j] on return: 1 when seat j's
 * slot holds this round's bytes (j active and delivered). */
int mc__pg_round(mc_pg_comm_t *c, const struct mc_pg_part *parts, int timeout_ms, int32_t *failed,
                 uint64_t *round, uint8_t *alive);
/* The sync_after_failure exchange: msg (MC_PG_SYNC_MSG bytes) to every active peer, on counters of
 * its own so that ranks whose rounds drifted apart (a failure mid-operation) still meet;
 * alive[j] = 1 when seat j's message arrived (at c->region + MC_PG_OFF_SYNC_MSG(c, j)). */
int mc__pg_sync_round(mc_pg_comm_t *c, const uint8_t *msg, uint8_t *alive);
/* The slot seat j wrote in round r. */
static inline const uint8_t *mc__pg_slot(const mc_pg_comm_t *c, uint64_t r, int j) {
    return c->region + MC_PG_OFF_COLL(c, r & 1, j);
}
/* Records that seat j failed in this operation: the hint, pending, and with auto-deactivation
 * the active set. */
void mc__pg_mark_failed(mc_pg_comm_t *c, int j, int32_t *failed);
/* Writes *value into this rank's entry of the 8-byte array at off in every seat with to[j] set;
 * failures mark the seat. */
int mc__pg_write_word(mc_pg_comm_t *c, const uint64_t *value, uint64_t off, const uint8_t *to);
/* Snapshot of the active set; returns how many are active. */
int mc__pg_active_snapshot(mc_pg_comm_t *c, uint8_t *active);

/* The control plane (pg_agent.c): points the seats of `seats` that have a join request waiting at
 * the coordinator at the joiners' addresses (so a probe reaches them before they are admitted).
 * Nothing to do (0) when the communicator has no coordinator. */
int mc__pg_ctrl_connect_joiners(mc_pg_comm_t *c, uint64_t seats);

/* Reductions (pg_reduce.c): acc[i] = acc[i] op in[i] for n elements. MC_ERR_NOT_IMPLEMENTED for a
 * dtype that cannot be reduced, MC_ERR_INVALID_ARGUMENT for an unknown dtype or op. */
int mc__pg_reduce_check(int dtype, int op);
void mc__pg_reduce_into(void *acc, const void *in, size_t n, int dtype, int op);
/* acc[i] /= divisor (AVG's last step). */
void mc__pg_divide(void *acc, size_t n, int dtype, int divisor);

#endif
