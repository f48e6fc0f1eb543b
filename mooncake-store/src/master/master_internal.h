/* The contracts between the master's files, one section per file, in layers (uses point down):
 * lifecycle (master.c, rpc_server.c, admin_http.c, ...) -> dispatch and replies (ops.c) ->
 * operations (put.c, upsert.c, tasks.c, drain.c, evict.c, restore.c) -> the model (objects.c,
 * segments.c, disk_replicas.c) -> sinks (the metadata log, persist.h; the gauges, gauges.c).
 * The state itself is in master_state.h. */
#ifndef MC_STORE_MASTER_INTERNAL_H
#define MC_STORE_MASTER_INTERNAL_H
#include "master/master_state.h"

/* objects.c */
uint32_t mc__key_hash(const uint8_t *key, uint32_t len);
mc__shard_t *mc__shard_of(mc__master_t *m, uint32_t hash);
int mc__shard_init(mc__shard_t *s);
void mc__shard_destroy(mc__master_t *m, mc__shard_t *s);
/* Start loading, without the shard's lock, the bucket where key would sit, and then the first
 * object in it: a batch asks for the bucket MC__PREFETCH_AHEAD entries ahead and for the object
 * half as far ahead, so that its look-ups overlap their cache misses instead of taking them one
 * after the other (a million objects fit in no cache). mc__prefetch_ahead is that schedule;
 * mc__shard_prefetch_keys applies it to a batch of keys. */
#define MC__PREFETCH_AHEAD 8
void mc__shard_prefetch(const mc__shard_t *s, uint32_t hash);
void mc__shard_prefetch_object(const mc__shard_t *s, uint32_t hash);
/* The key's bucket (object: the first object in it) in the shard the master keeps it in. */
static inline void mc__prefetch_key(mc__master_t *m, const mc__mp_str_t *k, int object) {
    uint32_t hash = mc__key_hash(k->p, k->len);
    if (object)
        mc__shard_prefetch_object(mc__shard_of(m, hash), hash);
    else
        mc__shard_prefetch(mc__shard_of(m, hash), hash);
}
/* What a batch's entry j looks up, started loading: its buckets (object: their first objects). */
typedef void (*mc__prefetch_fn)(mc__master_t *m, const void *batch, uint32_t j, int object);
/* Called before entry i of n is looked up. One entry has nothing to overlap with. */
static inline void mc__prefetch_ahead(mc__master_t *m, uint32_t n, uint32_t i, mc__prefetch_fn fn,
                                      const void *batch) {
    if (n < 2)
        return;
    if (i == 0)
        for (uint32_t j = 0; j < n && j < MC__PREFETCH_AHEAD; j++)
            fn(m, batch, j, 0);
    if (i + MC__PREFETCH_AHEAD < n)
        fn(m, batch, i + MC__PREFETCH_AHEAD, 0);
    if (i + MC__PREFETCH_AHEAD / 2 < n)
        fn(m, batch, i + MC__PREFETCH_AHEAD / 2, 1);
}
static inline void mc__prefetch_key_at(mc__master_t *m, const void *keys, uint32_t j, int object) {
    mc__prefetch_key(m, &((const mc__mp_str_t *)keys)[j], object);
}
static inline void mc__shard_prefetch_keys(mc__master_t *m, const mc__mp_str_t *keys, uint32_t n,
                                           uint32_t i) {
    mc__prefetch_ahead(m, n, i, mc__prefetch_key_at, keys);
}
/* With the shard locked: the object or NULL. */
mc__object_t *mc__shard_find(mc__shard_t *s, uint32_t hash, const uint8_t *key, uint32_t len);
/* With the shard locked: inserts o (caller checked absence). 0 or MC_ERR_MEMORY is never
 * returned: a failed table growth only lengthens chains. */
void mc__shard_insert(mc__shard_t *s, mc__object_t *o);
void mc__shard_unlink(mc__shard_t *s, mc__object_t *o);
mc__object_t *mc__object_new(const uint8_t *key, uint32_t len, uint32_t hash, uint8_t n_replicas);
/* With the shard locked: replaces o (in its chain) by a copy with n_add more replicas, which
 * it returns; o is freed. NULL (o untouched) when memory runs out. */
mc__object_t *mc__object_grow(mc__shard_t *s, mc__object_t *o, const mc__replica_t *add,
                              uint8_t n_add);
/* Frees the replicas' space (shard lock may be held) and the record. Updates gauges. */
void mc__object_destroy(mc__master_t *m, mc__object_t *o);
void mc__free_replica(mc__master_t *m, const mc__replica_t *r);
/* o, already out of its shard's table (shard lock held): its space is freed now, or held in the
 * graveyard while a writer (unfinished) or a reader (leased) may still touch it; a complete o
 * stops counting as an object at once. Every path that takes a leased object away (upsert,
 * forced remove) goes through here, which is what lets clients cache replica locations for as
 * long as their lease lasts (see the client's replica_cache.c). */
void mc__object_release(mc__master_t *m, mc__object_t *o, uint64_t now);
/* The moment the request being handled on this thread may be answered: the latest noted by
 * mc__object_release (a leased value taken away waits out the clients' cached replica lists of
 * it), read and reset by mc__master_handle. 0: no wait. */
void mc__reply_hold_note(uint64_t until);
uint64_t mc__reply_hold_take(void);
/* With the shard locked: unlinks o, then mc__object_release. */
void mc__object_retire(mc__master_t *m, mc__shard_t *s, mc__object_t *o, uint64_t now);
/* Iterates every shard under its lock. fn returns MC__SWEEP_DESTROY to unlink and destroy the
 * object, MC__SWEEP_RETIRE to unlink and release it (mc__object_release), 0 to keep it. */
enum { MC__SWEEP_KEEP = 0, MC__SWEEP_DESTROY = 1, MC__SWEEP_RETIRE = 2 };
typedef int (*mc__obj_visit_fn)(mc__master_t *m, mc__object_t *o, void *arg);
void mc__objects_sweep(mc__master_t *m, mc__obj_visit_fn fn, void *arg);
/* The same, letting each shard's lock go and yielding the core every few hundred buckets while
 * *urgent is 0 (NULL: never), so that requests neither wait for the whole shard's walk nor for
 * a core the walk holds: for the monitor's background work. What changes meanwhile may or may
 * not be seen, and when the table grows meanwhile, objects of buckets already walked can be
 * visited again: for scans whose answer is an estimate (background eviction's). */
void mc__objects_sweep_yielding(mc__master_t *m, mc__obj_visit_fn fn, void *arg,
                                const _Atomic int *urgent);
/* The graveyard: objects no reader can find whose space waits for writers and leases. */
/* With the shard locked: an unfinished put older than the discard timeout gives up its key.
 * Its space stays reserved until the release timeout, because the slow writer may still be
 * copying into it. Returns 1 when o was discarded (unlinked). */
int mc__maybe_discard(mc__master_t *m, mc__shard_t *s, mc__object_t *o, uint64_t now);
/* Holds o's space (unlinked) until the monotonic moment hold_until (a writer that may still be
 * copying into it: its put release time; 0 when no writer can be) and its lease have both
 * passed. The hold is stored in o->access_ms, which means nothing else in the graveyard. Never
 * pass a time computed as "now minus something" for "no hold": on a host up for less than that
 * the subtraction has no room (0 is the only "no hold"). */
void mc__grave_add(mc__master_t *m, mc__object_t *o, uint64_t hold_until);
/* The moment a writer that started at start_ms can no longer be copying (start + the put
 * release timeout). */
uint64_t mc__put_release_at(const mc__master_t *m, uint64_t start_ms);
/* Destroys the graveyard's objects whose holds and leases are over (all: every one). */
void mc__grave_release(mc__master_t *m, uint64_t now, int all);
/* Frees, without giving their space back, the graveyard's objects fn returns nonzero for (their
 * segment is gone, and its space with it). */
void mc__grave_filter(mc__master_t *m, mc__obj_visit_fn fn, void *arg);
/* Bytes the graveyard holds for discarded puts (staging, in the reference's metrics). */
uint64_t mc__grave_discarded_bytes(mc__master_t *m);
/* At stop, with nothing else running: frees the graveyard's objects. */
void mc__grave_destroy(mc__master_t *m);

/* ops.c */
/* Appends the replicas of one key to a replicas reply (lease_ms: the u64 after the size). */
void mc__put_replicas(mc__master_t *m, mc_buf_t *out, int32_t code, uint64_t size,
                      uint64_t lease_ms, const mc__replica_t *reps, uint8_t n, uint8_t status);

/* put.c: the put path, one key at a time (ops.c runs the batches and writes the replies). */
/* Places the replicas of a len-byte object (evicting once when nothing fits) and allocates its
 * record under key (not inserted, incomplete, with a new version): 0 or a negative code. */
int32_t mc__place_object(mc__master_t *m, const uint8_t *key, uint32_t key_len, uint32_t hash,
                         uint64_t len, const mc__replicate_config_t *cfg, uint64_t now,
                         mc__object_t **out);
/* With the shard locked: the put of o is finished; readers see it from now on. */
void mc__object_complete(mc__master_t *m, mc__shard_t *s, mc__object_t *o, uint64_t now);
/* With the shard locked: o, a record made finished (a slot's commit, an upsert's end), goes in
 * and is complete at once. */
void mc__object_publish(mc__master_t *m, mc__shard_t *s, mc__object_t *o, uint64_t now);
/* PUT_START of one key: places it and inserts its incomplete record; the caller holds placement
 * (read). 0 with the replicas and the version its end must name, or a code. */
int32_t mc__put_start_one(mc__master_t *m, const mc__mp_str_t *key, uint64_t len,
                          const mc__replicate_config_t *cfg, uint64_t now, mc__replica_t *reps,
                          uint8_t *n_out, uint64_t *version);

/* With s (o's shard) unlocked: inserts the placed, unfinished object o unless its key is taken
 * (OBJECT_ALREADY_EXISTS: o is destroyed); 0 with its replicas and version. */
int32_t mc__insert_placed(mc__master_t *m, mc__shard_t *s, mc__object_t *o, mc__replica_t *reps,
                          uint8_t *n_out, uint64_t *version);

/* put_slots.c. PUT_RESERVE of one slot of len bytes for client (ops.c runs it with the put
 * starts): 0 with its replicas and version, or a code; the caller holds placement (read).
 * PUT_COMMIT (and PUT_COMMIT_FOR, each entry for the client it names) answers a codes reply: 0,
 * OBJECT_ALREADY_EXISTS with the slot still reserved,
 * OBJECT_NOT_FOUND for a slot that is gone, INVALID_PARAMS for a value longer than its slot;
 * it takes placement (read) per slot. *puts gets the entries that were puts (not give-backs),
 * *ended those it finished. */
int32_t mc__put_reserve_one(mc__master_t *m, const uint8_t *client, uint64_t len,
                            const mc__replicate_config_t *cfg, uint64_t now, mc__replica_t *reps,
                            uint8_t *n_out, uint64_t *version);
int mc__op_put_commit(mc__master_t *m, const mc__mp_request_t *r, mc_buf_t *out, uint32_t *errors,
                      uint32_t *puts, uint32_t *ended);

/* upsert.c, one key each (ops.c runs the batches and writes the replies). */
/* UPSERT_START: places the new value (under the shadow key when the key exists); the caller
 * holds placement (read). 0 with the replicas and the version its end must name, or a code. */
int32_t mc__upsert_start_one(mc__master_t *m, const mc__mp_str_t *key, uint64_t len,
                             const mc__replicate_config_t *cfg, uint64_t now, mc__replica_t *reps,
                             uint8_t *n_out, uint64_t *version);
/* PUT_END / UPSERT_END (publish) or PUT_REVOKE / UPSERT_REVOKE of the placement named by
 * version: 0 (also for an end repeated), OBJECT_NOT_FOUND when that placement is no longer there
 * (discarded as stale, removed, preempted by a later upsert: an end never publishes another
 * writer's object), INVALID_PARAMS for a revoke of a finished object. */
int32_t mc__put_finish_one(mc__master_t *m, uint8_t type, const mc__mp_str_t *key, uint64_t version,
                           uint64_t now);
/* REPLICA_CLEAR: an unleased, finished object loses its replicas on segment (all of them when
 * segment is empty) and disappears with the last. OBJECT_NOT_FOUND when there is no such object
 * or no replica on that segment, OBJECT_HAS_LEASE while a reader holds it. */
int32_t mc__replica_clear_one(mc__master_t *m, const mc__mp_str_t *key, const mc__mp_str_t *segment,
                              uint64_t now);

/* segments.c */
/* Mounts (name, base, size) in incarnation epoch for client. The same mount again is a no-op;
 * the same (name, base) of the same client in another epoch replaces the old incarnation (its
 * replicas are dropped first); a range that overlaps another mount of that name is refused
 * (SEGMENT_ALREADY_EXISTS). With MC_MP_MOUNT_F_CHECK nothing is mounted: 0 when exactly this
 * mount is held, else SEGMENT_NOT_FOUND. */
int mc__segment_mount(mc__master_t *m, const uint8_t *client, const mc__mp_str_t *name,
                      uint64_t base, uint64_t size, uint64_t epoch, uint8_t flags);
int mc__segment_unmount(mc__master_t *m, const uint8_t *client, const mc__mp_str_t *name,
                        uint64_t base);
void mc__segments_destroy(mc__master_t *m);
/* 1 while a segment restored from the metadata log awaits its owner (restore.c): puts that find
 * no room then wait for it instead of evicting (UNAVAILABLE_IN_CURRENT_STATUS, retried by
 * clients), and /health and the metrics say "recovering". */
int mc__master_recovering(const mc__master_t *m);
/* Marks a segment rebuilt by restore (registry write lock held, or no server running yet). */
void mc__segment_restored(mc__master_t *m, mc__segment_t *seg);
/* Restore's way into the registry (before any server runs): adds seg, its fields and allocator
 * filled, under a new slot (*slot); 0 or MC_ERR_MEMORY. segments.c stays its only writer. */
int mc__segment_restore_add(mc__master_t *m, mc__segment_t *seg, uint32_t *slot);
/* Registry read lock held: 1 when placement may use s (live, reachable, its owner heard from).
 * Eviction makes room only in such segments, and never evicts an object that has a replica in
 * any other (see evict.c). */
static inline int mc__seg_placeable(const mc__segment_t *s) {
    return s && !s->dying && !atomic_load_explicit(&s->unreachable, memory_order_relaxed) &&
           !atomic_load_explicit(&s->awaiting_owner, memory_order_relaxed) &&
           !atomic_load_explicit(&s->drain, memory_order_relaxed);
}
/* Places up to cfg->replica_num replicas of len bytes. Returns count placed (>= 1) or a negative
 * code (NO_AVAILABLE_HANDLE). Caller holds placement (read). */
int mc__place(mc__master_t *m, uint64_t len, const mc__replicate_config_t *cfg, mc__replica_t *out);
/* Fills a reply replica descriptor's name, base and epoch (both may be NULL) for slot; returns the
 * name length (0 if gone). With the registry read lock taken inside. */
uint32_t mc__segment_name(mc__master_t *m, uint32_t slot, char *out, uint64_t *base,
                          uint64_t *epoch);
int mc__client_touch(mc__master_t *m, const uint8_t *id);         /* 1 when it was unknown */
uint32_t mc__segments_of(mc__master_t *m, const uint8_t *client); /* live segments it owns */
/* Marks every segment named name unreachable: 0, or SEGMENT_NOT_FOUND when none has the name. */
int32_t mc__segment_unreachable(mc__master_t *m, const mc__mp_str_t *name);
/* The owner is alive (it heartbeats): its segments take placements again. */
void mc__segments_reachable(mc__master_t *m, const uint8_t *client);
/* 1 when slot holds a live segment (owned by client): registry read lock taken inside. */
int mc__segment_owned_by(mc__master_t *m, uint32_t slot, const uint8_t *client);
int mc__segment_live(mc__master_t *m, uint32_t slot);
/* 1 when a live segment is named name (its owner copied to owner, may be NULL). */
int mc__segment_named(mc__master_t *m, const mc__mp_str_t *name, uint8_t *owner);
/* 1 when slot's segment (live or dying) is named name. */
int mc__slot_named(mc__master_t *m, uint32_t slot, const mc__mp_str_t *name);
/* Places one replica of len bytes on a live segment named name, in none of avoid's slots:
 * 0, or NO_AVAILABLE_HANDLE. Caller holds placement (read). */
int mc__place_on(mc__master_t *m, uint64_t len, const mc__mp_str_t *name,
                 const mc__replica_t *avoid, int n_avoid, mc__replica_t *out);
void mc__clients_expire(mc__master_t *m, uint64_t now);
/* A clean leave: forgets the client and unmounts its segments now (objects on them handled as an
 * expiry handles them), counted in left_clients, never as expired. Returns 1 when it was known;
 * an unknown or repeated leave is harmless. */
int mc__client_unregister(mc__master_t *m, const uint8_t *id);

/* Sets the drain state (0, MC__SEG_DRAINING, MC__SEG_DRAINED) of every live mount named name
 * (from holds only mounts in that state: -1 any). Taken under the placement write lock, so that
 * once DRAINING is set no put is between placing a replica there and inserting its object.
 * Returns how many mounts changed. */
int mc__segment_set_drain(mc__master_t *m, const char *name, int from, int state);
/* The reference's status of the segment named name (MC__SEG_*, its first live mount's; a name
 * only dying mounts hold is MC__SEG_UNMOUNTING), or -1 when no mount has that name. */
int mc__segment_status(mc__master_t *m, const char *name);

/* evict.c */
/* Frees at least need bytes (and eviction_ratio of capacity). Returns bytes freed. With fit > 0
 * (a put that found no space for one replica of fit bytes) it evicts only objects with a replica
 * in a segment where that much room can be made, and nothing at all when no segment can. */
uint64_t mc__evict(mc__master_t *m, uint64_t need, uint64_t fit, int blocking);
void mc__discard_stale_puts(mc__master_t *m, uint64_t now);
void *mc__monitor_main(void *arg);
/* An eviction candidate: when it was last used, and the bytes evicting it frees. */
typedef struct mc__cand {
    uint64_t access_ms;
    uint64_t bytes;
} mc__cand_t;
/* The least access time T such that the candidates last used at or before T hold at least
 * target bytes (the newest one's when all of them together hold less; 0 for none). v[0..n) is
 * reordered. */
uint64_t mc__evict_threshold(mc__cand_t *v, size_t n, uint64_t target);

/* tasks.c: the TASK_* requests (reply written to out), and the monitor's and a segment drop's
 * part in them. */
void mc__op_task(mc__master_t *m, const mc__mp_request_t *r, mc_buf_t *out, uint32_t *errors);
/* Fails tasks whose client never fetched them or never reported, once a second. */
void mc__tasks_expire(mc__master_t *m, uint64_t now);
/* Forgets the reserved replicas that lie in slot (its segment goes away). */
void mc__tasks_drop_slot(mc__master_t *m, uint32_t slot);
void mc__tasks_destroy(mc__master_t *m);
/* A move of key from the segment named source to the one named target, made as TASK_CREATE
 * makes it (drain.c): 0 with its id, or the code TASK_CREATE would answer. */
int32_t mc__task_move(mc__master_t *m, const uint8_t *key, uint32_t key_len, const char *source,
                      const char *target, uint8_t *id_out);
/* The status (MC_TASK_*) of task id, or -1 when it is not (or no longer) kept. */
int mc__move_task_status(mc__master_t *m, const uint8_t *id);

/* drain.c: drain jobs (the reference's /api/v1/drain_jobs), moving every object off segments
 * through move tasks, one thread running them. Codes as the reference answers them. */
typedef struct mc__drain_request {
    const char **segments, **targets; /* names (borrowed) */
    uint32_t n_segments, n_targets;
    uint32_t max_concurrency; /* move tasks in flight at once (the reference's default: 4) */
} mc__drain_request_t;
typedef struct mc__drain_info {
    uint8_t status;                 /* MC_DRAIN_JOB_* */
    int64_t created_ms, updated_ms; /* Unix epoch */
    uint64_t succeeded_units, failed_units, blocked_units, active_units, migrated_bytes;
    char message[128];
} mc__drain_info_t;
enum {
    MC_DRAIN_JOB_CREATED = 0,
    MC_DRAIN_JOB_PLANNING,
    MC_DRAIN_JOB_RUNNING,
    MC_DRAIN_JOB_SUCCEEDED,
    MC_DRAIN_JOB_FAILED,
    MC_DRAIN_JOB_CANCELED
};
int mc__drain_init(mc__master_t *m);
/* Joins the thread and frees every job (at stop, servers already stopped). */
void mc__drain_destroy(mc__master_t *m);
int32_t mc__drain_create(mc__master_t *m, const mc__drain_request_t *r, uint8_t id[16]);
/* Fills info; segments (may be NULL) gets the job's source names appended, one per call of
 * seg_fn. 0 or JOB_NOT_FOUND. */
int32_t mc__drain_query(mc__master_t *m, const uint8_t id[16], mc__drain_info_t *info,
                        void (*seg_fn)(void *ctx, const char *name), void *ctx);
/* 0, JOB_NOT_FOUND, or UNAVAILABLE_IN_CURRENT_STATUS for a job already over. */
int32_t mc__drain_cancel(mc__master_t *m, const uint8_t id[16]);

/* rpc_server.c */
int mc__rpc_server_start(mc__master_t *m, const char *host, uint16_t port, mc__rpc_server_t **out);
uint16_t mc__rpc_server_port(const mc__rpc_server_t *s);
void mc__rpc_server_stop(mc__rpc_server_t *s);

/* meta_http.c: the TE's HTTP metadata store inside the master (--enable_http_metadata_server). */
int mc__meta_start(mc__master_t *m);
void mc__meta_stop(mc__master_t *m);
uint16_t mc__meta_port(const mc__master_t *m);

/* admin_http.c */
int mc__admin_http_start(mc__master_t *m, uint16_t port);

/* key_text.c */
/* Text for n bytes of a key or name: valid UTF-8 passes unchanged (control characters too when
 * ctl is 0), any other byte becomes the four characters \xNN. out holds 4 * n + 1 bytes. */
void mc__key_text(const uint8_t *p, size_t n, char *out, int ctl);

/* admin_compat.c: one object as the admin endpoints show it, copied under its shard's lock. */
typedef struct mc__key_view {
    uint64_t size;
    uint64_t lease_left_ms;
    uint8_t flags; /* MC__OBJ_* */
    uint8_t n;
    mc__replica_t reps[MC_MP_MAX_REPLICA_NUM];
} mc__key_view_t;
int mc__key_view(mc__master_t *m, const char *key, int complete_only, mc__key_view_t *v);

/* admin_compat.c: answers the endpoints in the reference's shapes; 0 when path is not one.
 * arg (cap bytes) and b are the caller's scratch. */
struct mc_http_request;
struct mc_http_response;
int mc__admin_compat(mc__master_t *m, const struct mc_http_request *req,
                     struct mc_http_response *resp, char *arg, size_t cap, mc_buf_t *b);
/* JSON answers in the reference's shapes: j (freed), or {success: false, error_code,
 * error_message: msg or the code's name} with status (0: the reference's status for code). */
struct cJSON;
void mc__admin_send_json(struct mc_http_response *resp, int status, struct cJSON *j);
void mc__admin_send_error(struct mc_http_response *resp, int status, int code, const char *msg);

/* admin_api.c: the reference's /api/v1/ routes (drain jobs, segment status, tenant quotas,
 * remove_all), each with its methods; 0 when path is not one. arg (cap bytes) is scratch. */
int mc__admin_api(mc__master_t *m, const struct mc_http_request *req, struct mc_http_response *resp,
                  char *arg, size_t cap);

/* gauges.c */
/* One request served: keys named, keys that failed, time taken. */
void mc__op_record(mc__master_t *m, uint8_t type, uint32_t keys, uint32_t errors,
                   uint64_t elapsed_ns);
/* A put (or upsert) of size bytes was published. */
void mc__value_size_record(mc__master_t *m, uint64_t size);
/* The model's totals, by how much each changed (negative: went down). */
void mc__gauge_objects(mc__master_t *m, int64_t n, int64_t bytes);
void mc__gauge_space(mc__master_t *m, int64_t segments, int64_t capacity, int64_t used);
/* A stale unfinished put gave up its key; the space of one came back. */
void mc__gauge_put_discarded(mc__master_t *m);
void mc__gauge_put_released(mc__master_t *m);
/* One eviction run took objects values of bytes in all. */
void mc__gauge_eviction(mc__master_t *m, uint64_t objects, uint64_t bytes);
/* A client went: its heartbeats stopped (expired) or it unregistered. */
void mc__gauge_client_gone(mc__master_t *m, int expired);
/* Upper bounds of the latency (microseconds) and value-size (bytes) histogram buckets. */
extern const uint64_t mc__lat_le_us[MC__LAT_BUCKETS];
extern const uint64_t mc__size_le[MC__SIZE_BUCKETS];

/* metrics.c */
/* Appends the Prometheus text exposition of every metric. */
void mc__metrics_render(mc__master_t *m, mc_buf_t *b);
#endif
