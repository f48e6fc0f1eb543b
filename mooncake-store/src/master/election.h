/* Leader election for master HA, over etcd (the reference's layout, so its tools read it).
 *
 * Key: the master view key (proto/master_view.h, which also reads it for clients; an empty
 * cluster_id is refused). Value: the leader's address as raw bytes, no framing, no NUL (the
 * reference writes its master's "host:port" RPC address there). The key is put on the leader's
 * lease, so it disappears when the leader stops refreshing. The key's create_revision is the
 * leader's term (the reference's view_version): it grows with every election.
 *
 * A candidate campaigns with one txn: if the key's create_revision is 0 (absent), put it with my
 * address on my lease; else read it. The winner refreshes its lease and watches the key; the
 * others watch the key and campaign again when it is deleted.
 *
 * Fencing: the leader counts its lease as valid until (the send time of its last acknowledged
 * refresh + the granted TTL - a margin). The servers' expiry is never earlier than that, so no
 * other candidate can win before on_deposed has been called. on_deposed also comes when the key
 * is deleted or holds another's lease, when the lease is found gone, or on mc__election_stop.
 *
 * Callbacks run on the election's own thread, one at a time, in order (elected, deposed,
 * elected, ...); they should return quickly (the fence is not watched while one runs) and may
 * call mc__election_leader / _is_leader, not mc__election_stop. */
#ifndef MC_STORE_MASTER_ELECTION_H
#define MC_STORE_MASTER_ELECTION_H
#include <stddef.h>
#include <stdint.h>

#include "proto/master_view.h"

#define MC_ELECTION_DEFAULT_CLUSTER_ID MC_MASTER_VIEW_DEFAULT_CLUSTER_ID
#define MC_ELECTION_DEFAULT_TTL_S 5
#define MC_ELECTION_MAX_TTL_S 3600
#define MC_ELECTION_MAX_ADDR 256

typedef struct mc_election_callbacks {
    void (*on_elected)(void *ctx, int64_t term); /* may be NULL */
    void (*on_deposed)(void *ctx);               /* may be NULL */
    void *ctx;
} mc_election_callbacks_t;

typedef struct mc_election mc_election_t;

/* Starts campaigning for cluster_id's leadership as my_address (1..MC_ELECTION_MAX_ADDR-1
 * bytes). lease_ttl_s <= 0 picks MC_ELECTION_DEFAULT_TTL_S; above MC_ELECTION_MAX_TTL_S is refused.
 * Reads the key once before returning: an unreachable etcd is an error here
 * (MC_ERR_ETCD_OPERATION_ERROR / _CTX_CANCELLED), later outages are retried by the election thread.
 * MC_ERR_INVALID_ARGUMENT for a bad endpoint list, an empty cluster id or address. */
int mc__election_start(const char *endpoints, const char *cluster_id, const char *my_address,
                       int lease_ttl_s, const mc_election_callbacks_t *cbs, mc_election_t **out);

/* The leader's address as last seen (NUL-terminated): 0, MC_ERR_ETCD_KEY_NOT_EXIST when none is
 * known, MC_ERR_INVALID_ARGUMENT when cap is too small. */
int mc__election_leader(mc_election_t *e, char *buf, size_t cap);
/* 1 while this candidate holds leadership: between on_elected and on_deposed, and only while
 * the fence deadline has not passed (so a process resumed after a stall sees 0 at once, before
 * the election thread has run). A leader checks this before each act that needs leadership. */
int mc__election_is_leader(mc_election_t *e);
/* 1 while this candidate holds the leadership of term (as _is_leader, for that term only: a
 * master started for an earlier term never sees a later one as its own). */
int mc__election_leads(mc_election_t *e, int64_t term);
/* The term of the current leadership, 0 when not leader. */
int64_t mc__election_term(mc_election_t *e);

/* Gives up the leadership of term (if still held) from any thread, without waiting: on_deposed
 * comes from the election thread, the key is deleted and the lease revoked, and the candidate
 * campaigns again half a second later (a standby usually wins first). A leader that can no
 * longer record what it acknowledges calls this. */
void mc__election_resign(mc_election_t *e, int64_t term);

/* Resigns and frees: a leader gets on_deposed first, then its key is deleted and its lease
 * revoked, so a standby can take over at once. NULL is a no-op. */
void mc__election_stop(mc_election_t *e);

/* Test hook: while paused the candidate sends nothing to etcd (no refreshes, no resignation, no
 * campaign), as if its process were stalled or cut off, so a leader's lease runs out. */
void mc__election_test_pause_refresh(mc_election_t *e, int paused);

#endif
