/* The PG's control plane on the wire: the messages between a rank's agent calls (pg_agent.c) and
 * the coordinator (pg_coord.c), framed with the one frame header (mooncake/common/frame.h).
 *
 * Every request is one frame whose type is an mc_pgc_type and whose body starts with the group's
 * name (str) and the sender's seat (u32); the rest per type, little-endian:
 *   REGISTER  u32 size | u32 seats | u8 extension | str addr | u32 timeout_ms
 *   JOIN      str addr | u64 round | u64 syncs | u32 timeout_ms
 *   ACTIVATE  str addr | u64 joiners | u64 active | u64 round | u64 syncs | u64 epoch |
 *             u32 window_ms | u32 timeout_ms
 *   VIEW      (nothing more)
 * Seat sets are u64 bit masks (MC_PG_MAX_RANKS is 64). The reply (MC_FRAME_F_REPLY, same
 * request_id) is a view:
 *   u8 status | u32 seats | u64 epoch | u64 active | u64 dropped | u64 joining | u64 round |
 *   u64 syncs |
 *   u32 count | count x (u32 seat | str addr) | str reason
 * or, with MC_FRAME_F_ERROR too, i32 code | str message. The decoders do no I/O and never read
 * past the body they are given (fuzz/pg_ctrl_fuzz.c drives them). */
#ifndef MC_PG_CTRL_PROTO_H
#define MC_PG_CTRL_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "mooncake/common/frame.h"

/* seats of a group, as MC_PG_MAX_RANKS (mooncake/pg.h; pg_coord.c checks they agree): a seat
 * set is one u64 */
#define MC_PGC_MAX_SEATS 64
#define MC_PGC_MAX_BODY 65536u /* a full view is about 64 x 330 bytes */
#define MC_PGC_GROUP_MAX 128   /* bytes of a group name, NUL included */
#define MC_PGC_ADDR_MAX 320    /* bytes of a rank's address, NUL included */
#define MC_PGC_REASON_MAX 256

enum mc_pgc_type {
    MC_PGC_REGISTER = 1, /* a rank's communicator enters the group (creation or attach) */
    MC_PGC_JOIN = 2,     /* an inactive rank asks to be admitted; answered by the decision */
    MC_PGC_ACTIVATE = 3, /* a member's proposal to admit joiners; answered by the decision */
    MC_PGC_VIEW = 4,     /* the group's current view */
};

enum mc_pgc_status {
    MC_PGC_APPLIED = 1,      /* mooncakePgProposalApplied */
    MC_PGC_APPLIED_DROP = 2, /* mooncakePgProposalAppliedWithDroppedRanks */
    MC_PGC_REJECTED = 3,     /* mooncakePgProposalRejected; reason says why */
};

typedef struct mc_pgc_req {
    uint8_t type;
    char group[MC_PGC_GROUP_MAX];
    uint32_t rank;
    uint32_t size, seats;         /* REGISTER */
    uint8_t extension;            /* REGISTER: attach without waiting for the first size ranks */
    char addr[MC_PGC_ADDR_MAX];   /* REGISTER, JOIN, ACTIVATE: the sender's mc_pg_local_address */
    uint64_t joiners, active;     /* ACTIVATE */
    uint64_t round, syncs, epoch; /* JOIN (round, syncs), ACTIVATE */
    uint32_t window_ms;           /* ACTIVATE: how long to wait for the other members */
    uint32_t timeout_ms;          /* REGISTER, JOIN, ACTIVATE: how long the call may be held */
} mc_pgc_req_t;

typedef struct mc_pgc_view {
    uint8_t status;
    uint32_t seats;
    uint64_t epoch, active, dropped, round, syncs;
    uint64_t joining; /* seats with a join request waiting for a decision */
    uint64_t known;   /* seats whose address is in addrs */
    char addrs[MC_PGC_MAX_SEATS][MC_PGC_ADDR_MAX];
    char reason[MC_PGC_REASON_MAX];
} mc_pgc_view_t;

/* Appends one request frame (request_id id) to b; MC_ERR_MEMORY when b failed. */
int mc__pgc_encode_request(const mc_pgc_req_t *r, uint64_t id, mc_buf_t *b);
/* Decodes a request body of the given frame type: 0, or MC_ERR_INVALID_ARGUMENT with why in err
 * (an unknown type, a short or overlong body, a field out of range). */
int mc__pgc_decode_request(uint8_t type, const uint8_t *body, size_t len, mc_pgc_req_t *out,
                           char *err, size_t err_cap);
int mc__pgc_encode_view(const mc_pgc_view_t *v, uint64_t id, mc_buf_t *b);
int mc__pgc_encode_error(int code, const char *msg, uint64_t id, mc_buf_t *b);
/* Decodes a reply body: 0 with *out filled; the peer's negative code (message in out->reason)
 * for an error reply; MC_ERR_INVALID_ARGUMENT for a malformed one. */
int mc__pgc_decode_reply(uint16_t flags, const uint8_t *body, size_t len, mc_pgc_view_t *out);

#endif
