/* Blocking RPC client for mooncake_master.
 *
 * One client is one identity (a 128-bit client id chosen at connect) and one TCP connection.
 * Calls are serialized on that connection (thread-safe; one call in flight at a time).
 *
 * Deadlines: every call finishes within timeout_ms (given at connect) or fails with
 * MC_ERR_RPC_FAIL.
 *
 * Reconnect: when the connection breaks (master restart, network error), the next call reconnects
 * within its deadline, makes the master hold every segment this client mounted again (a
 * restarted master does not know them; see mc__master_client_set_remount_hook for what happens
 * to a forgotten one), and sends the request once more. Objects stored before a restart are gone
 * unless the master keeps a metadata log (--metadata_dir) or runs with HA.
 *
 * HA: an address "etcd://h1:2379,h2:2379" names a cluster of masters; every connect reads the
 * leader from the master view (proto/master_view.h), so a reconnect after a failover finds the
 * new leader, waiting for one to be elected until the deadline.
 *
 * Return values: 0 or a negative MC_ERR_* (mooncake/error.h, Store meaning). Batch calls return 0
 * when the RPC itself worked and put each key's result in the per-key output; a whole-call failure
 * (RPC_FAIL, INVALID_PARAMS) is returned directly and leaves the per-key outputs undefined.
 * Batches longer than MC_MP_MAX_BATCH are split into several RPCs transparently.
 *
 * Keys are NUL-terminated strings of 1..MC_MP_MAX_KEY bytes (else MC_ERR_INVALID_KEY). */
#ifndef MC_STORE_PROTO_MASTER_CLIENT_H
#define MC_STORE_PROTO_MASTER_CLIENT_H
#include <stddef.h>
#include <stdint.h>

#include "mooncake/common/auth.h"
#include "proto/master_proto.h"
#include "proto/task_proto.h"

typedef struct mc__master_client mc__master_client_t;

/* Fills id with 16 random bytes (a version-4 UUID). */
void mc__uuid_generate(uint8_t id[MC_MP_CLIENT_ID_LEN]);
/* Formats a client id as the canonical 36-char UUID text (out must hold 37 bytes). */
void mc__uuid_format(const uint8_t id[MC_MP_CLIENT_ID_LEN], char out[37]);

/* Connects to addr ("host:port"). client_id NULL: a fresh random id. Fails with MC_ERR_RPC_FAIL
 * when the master cannot be reached within timeout_ms, MC_ERR_INVALID_PARAMS on a bad address. */
int mc__master_client_connect(const char *addr, int timeout_ms,
                              const uint8_t client_id[MC_MP_CLIENT_ID_LEN],
                              mc__master_client_t **out);
/* The same with the cluster secret given (connect takes it from the environment). */
int mc__master_client_connect_auth(const char *addr, int timeout_ms,
                                   const uint8_t client_id[MC_MP_CLIENT_ID_LEN],
                                   const mc_auth_t *auth, mc__master_client_t **out);
void mc__master_client_close(mc__master_client_t *c);
const uint8_t *mc__master_client_id(const mc__master_client_t *c);
void mc__master_client_set_timeout(mc__master_client_t *c, int timeout_ms);
/* Whether another thread waits to make a call on c: a background caller (the replica cache's
 * renewer) lets it go first, so that a user's call does not wait behind its batches. */
int mc__master_client_wanted(mc__master_client_t *c);

/* Segments: a region [base, base+size) of memory that TE segment `segment_name` exposes; replicas
 * placed there are addressed by absolute addresses inside it. Mounting the same (name, base)
 * again is a no-op for the same client; a different client gets MC_ERR_SEGMENT_ALREADY_EXISTS.
 * Unmounting drops every replica on it (objects whose last replica was there disappear). */
int mc__master_client_mount_segment(mc__master_client_t *c, const char *segment_name, uint64_t base,
                                    uint64_t size);
/* The same in incarnation epoch of the memory (0: untagged, as above): replicas placed there
 * name the epoch, and the owner's engine refuses transfers naming another. */
int mc__master_client_mount_segment_epoch(mc__master_client_t *c, const char *segment_name,
                                          uint64_t base, uint64_t size, uint64_t epoch);
/* Called (with the client's lock held: it must not call this client) when the master no longer
 * holds a mount of ours, before it is mounted again: the owner must give the memory a new
 * incarnation, because placements in the old one may still be held by stalled writers and
 * readers. It sets *base and *epoch to the new incarnation's and returns 0, or returns a
 * negative code to drop the mount. Without a hook a forgotten mount is mounted again as it was
 * (for callers that move no data). */
typedef int (*mc__remount_fn)(void *ctx, const char *segment_name, uint64_t size, uint64_t *base,
                              uint64_t *epoch);
void mc__master_client_set_remount_hook(mc__master_client_t *c, mc__remount_fn fn, void *ctx);
int mc__master_client_unmount_segment(mc__master_client_t *c, const char *segment_name,
                                      uint64_t base);

/* Two-phase put. put_start allocates replicas (status PROCESSING) and returns where to write and
 * the version of that placement (out->version); the object stays invisible to readers until
 * put_end names that version; put_revoke (with it) abandons the placement, freeing its space.
 * An end or revoke of a placement that is gone (discarded as stale, removed, replaced) is
 * OBJECT_NOT_FOUND: it never touches another writer's object. cfg NULL means replica_num 1, no
 * pins, no preference. value_len 0 is MC_ERR_INVALID_PARAMS. */
int mc__master_client_put_start(mc__master_client_t *c, const char *key, uint64_t value_len,
                                const mc__replicate_config_t *cfg, mc__key_replicas_t *out);
int mc__master_client_put_end(mc__master_client_t *c, const char *key, uint64_t version);
int mc__master_client_put_revoke(mc__master_client_t *c, const char *key, uint64_t version);
/* The same in batches, for puts (upsert = 0) and upserts (1, which may replace an existing
 * key): finish ends (end = 1) or revokes (0) each key's placement, named by versions[i]. A key
 * the master defers because it is recovering (UNAVAILABLE_IN_CURRENT_STATUS: restored segments
 * await their owners) is asked for again, alone, until MC_STORE_RECOVERY_WAIT_MS (default 30 s)
 * has passed; then it keeps that code. */
int mc__master_client_batch_start(mc__master_client_t *c, int upsert, size_t n,
                                  const char *const *keys, const uint64_t *value_lens,
                                  const mc__replicate_config_t *cfg, mc__key_replicas_t *out);
/* PUT_RESERVE: n (1..MC_MP_MAX_SLOTS) slots of len bytes; out[i].version names slot i (its
 * code 0) or out[i].code says why there is none. Nothing is waited for while the master
 * recovers: the caller takes the start path then. */
int mc__master_client_put_reserve(mc__master_client_t *c, uint32_t n, uint64_t len,
                                  const mc__replicate_config_t *cfg, mc__key_replicas_t *out);
/* PUT_COMMIT: keys[i] with lens[i] bytes into slot slots[i] (lens[i] 0 gives the slot back),
 * in chunks of MC_MP_MAX_BATCH; codes[i] per key. */
int mc__master_client_put_commit(mc__master_client_t *c, size_t n, const char *const *keys,
                                 const uint64_t *lens, const uint64_t *slots, int32_t *codes);
/* PUT_COMMIT_FOR: the same for other clients' slots, forwarded by their holder in one request:
 * entry i commits keys[i] with lens[i] bytes into slot slots[i] of client clients[i] (lens[i] 0
 * gives it back), exactly as that client's PUT_COMMIT would; codes[i] per entry. 0 when the
 * master answered every chunk (codes filled), else the transport or master error (the codes of
 * the chunks not answered are untouched). A call broken in transit is resent once, as every
 * call is; an entry the first send applied then answers OBJECT_NOT_FOUND (its slot is gone). */
int mc__master_client_put_commit_for(mc__master_client_t *c, size_t n,
                                     const uint8_t (*clients)[MC_MP_CLIENT_ID_LEN],
                                     const char *const *keys, const uint64_t *lens,
                                     const uint64_t *slots, int32_t *codes);
int mc__master_client_batch_finish(mc__master_client_t *c, int upsert, int end, size_t n,
                                   const char *const *keys, const uint64_t *versions,
                                   int32_t *codes);
int mc__master_client_batch_put_start(mc__master_client_t *c, size_t n, const char *const *keys,
                                      const uint64_t *value_lens, const mc__replicate_config_t *cfg,
                                      mc__key_replicas_t *out);
/* Drops the replicas of unleased objects: those on segment, or all ("" or NULL). codes[i] is 0
 * for a key cleared, else why not (OBJECT_NOT_FOUND, OBJECT_HAS_LEASE). */
int mc__master_client_batch_replica_clear(mc__master_client_t *c, size_t n, const char *const *keys,
                                          const char *segment, int32_t *codes);

/* Replica list of a complete object; grants a lease (out->lease_ttl_ms) during which the object
 * is neither removed (without force) nor evicted. Missing or incomplete: MC_ERR_OBJECT_NOT_FOUND.
 */
int mc__master_client_get_replica_list(mc__master_client_t *c, const char *key,
                                       mc__key_replicas_t *out);
int mc__master_client_batch_get_replica_list(mc__master_client_t *c, size_t n,
                                             const char *const *keys, mc__key_replicas_t *out);

/* 1 if a complete object exists, 0 if not, negative on error. */
int mc__master_client_exist(mc__master_client_t *c, const char *key);
/* results[i] = 1 / 0 / negative code. */
int mc__master_client_batch_exist(mc__master_client_t *c, size_t n, const char *const *keys,
                                  int32_t *results);

/* Removes an object. Leased: MC_ERR_OBJECT_HAS_LEASE unless force. An unfinished put:
 * MC_ERR_REPLICA_IS_NOT_READY unless force. Missing: MC_ERR_OBJECT_NOT_FOUND. */
int mc__master_client_remove(mc__master_client_t *c, const char *key, int force);
int mc__master_client_batch_remove(mc__master_client_t *c, size_t n, const char *const *keys,
                                   int force, int32_t *codes);
/* Removes every complete object (leased ones only with force). Returns the count removed or a
 * negative code. */
int64_t mc__master_client_remove_all(mc__master_client_t *c, int force);
/* The same for the complete objects whose keys match regex (POSIX extended, anywhere in the key;
 * 1..MC_MP_MAX_KEY bytes): the count, or INVALID_PARAMS for a bad expression. */
int64_t mc__master_client_remove_by_regex(mc__master_client_t *c, const char *regex, int force);

/* Tells the master that transfers with these segments failed: it places nothing more on them
 * until their owners heartbeat again. codes[i]: 0, or SEGMENT_NOT_FOUND (no such segment). */
int mc__master_client_segment_unreachable(mc__master_client_t *c, size_t n,
                                          const char *const *names, int32_t *codes);

/* Replica tasks (see master/tasks.c). create: a copy (source NULL or "") or a move (source, one
 * target) of key to the target segments; id gets the task's id. OBJECT_NOT_FOUND, INVALID_PARAMS
 * (a segment unknown, a move onto its source), OBJECT_HAS_REPLICATION_TASK, or 0. query: the
 * task's state, or TASK_NOT_FOUND. fetch: up to max (1..MC_TP_MAX_FETCH) of this client's tasks,
 * started (their targets reserved); report: the outcome of one (0: every target written). */
int mc__master_client_task_create(mc__master_client_t *c, uint8_t type, const char *key,
                                  const char *source, size_t n, const char *const *targets,
                                  uint8_t id[MC_MP_CLIENT_ID_LEN]);
int mc__master_client_task_query(mc__master_client_t *c, const uint8_t id[MC_MP_CLIENT_ID_LEN],
                                 mc__task_info_t *out);
int mc__master_client_task_fetch(mc__master_client_t *c, uint32_t max, mc__task_work_t *out,
                                 uint32_t *n);
int mc__master_client_task_report(mc__master_client_t *c, const uint8_t id[MC_MP_CLIENT_ID_LEN],
                                  int32_t code, const char *message);

/* Keeps this client alive (the master expires clients after client_ttl without one). When the
 * master did not know the client (restart, expiry) the segments are mounted again here and
 * *status (may be NULL) reports MC_MP_CLIENT_NEED_REMOUNT. */
int mc__master_client_heartbeat(mc__master_client_t *c, uint8_t *status);
/* The master's segment view version from the last heartbeat reply (0 before one): it changes
 * whenever a segment is mounted or dropped (an owner expired), so a client that waits on a
 * segment knows when to ask whether it is still there. No I/O. */
uint64_t mc__master_client_view_version(mc__master_client_t *c);
/* A clean leave: the master unmounts every segment of this client and forgets it at once (not
 * counted as expired). The client's mount list is cleared first, so nothing is remounted. 0, or the
 * master's code (NOT_IMPLEMENTED from a master that predates it), or RPC_FAIL. */
int mc__master_client_unregister(mc__master_client_t *c);

/* Any request (the disk tier's, disk_proto.h): r is sent as this client (its client and request
 * ids are filled in) and its reply handed to fn, which must decode what it needs before it
 * returns (the body is the client's buffer). Returns fn's result, or the call's failure. */
typedef int (*mc__reply_fn)(void *ctx, const mc_frame_header_t *h, const uint8_t *body, size_t len);
int mc__master_client_call(mc__master_client_t *c, mc__mp_request_t *r, mc__reply_fn fn, void *ctx);
#endif
