/* The master's data model: objects (in shards), segments (in the registry), clients, and the
 * master that holds them with their locks and totals. No .c file owns this header: each piece of
 * state here is written by the one file named beside it (objects.c the shards and graveyard,
 * segments.c the registry and client table, tasks.c the tasks, gauges.c the totals and
 * counters), and the others reach it through that file's functions in master_internal.h.
 *
 * Lock order, never reversed: tasks -> placement (rw) -> shard -> registry (rw) -> segment; the
 * client table, graveyard and eviction locks are leaves or taken with nothing else held. */
#ifndef MC_STORE_MASTER_STATE_H
#define MC_STORE_MASTER_STATE_H
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "master/master.h"
#include "master/seg_alloc.h"
#include "mooncake/common/auth.h"

#define MC__SHARDS 64
#define MC__OBJ_COMPLETE 0x1u
#define MC__OBJ_HARD_PIN 0x2u
#define MC__OBJ_SOFT_PIN 0x4u
#define MC__OBJ_PIN_KEEP 0x8u   /* an upsert asked to keep the replaced object's soft pin */
#define MC__OBJ_DISCARDED 0x10u /* an unfinished put discarded as stale (graveyard) */
/* Queued for offload to a node's disk (disk.h): not evicted until the node reports. */
#define MC__OBJ_OFFLOAD_PENDING 0x20u
/* A promotion from the disk tier: its disk copy holds the same bytes and stays. */
#define MC__OBJ_PROMOTED 0x40u
#define MC__SHADOW_SUFFIX "\0u"
#define MC__SHADOW_SUFFIX_LEN 2u

typedef struct mc__replica {
    uint32_t seg;   /* registry slot */
    uint32_t block; /* seg_alloc handle */
    uint64_t off;   /* byte offset in the segment (immutable while allocated) */
} mc__replica_t;

/* One object, one allocation: a 56-byte header, the key (padded to 8), then 16 bytes per
 * replica. Replicas shrink in place (segment lost, replica cleared); a copy task that adds some
 * swaps in a bigger record (mc__object_grow) under the shard lock, and no pointer to an object
 * is kept across that lock.
 * An upsert of an existing key writes a shadow object first: its key is the object's key plus
 * MC__SHADOW_SUFFIX (no client key holds a NUL), its hash the object's, so both share a shard. */
typedef struct mc__object {
    struct mc__object *next; /* hash chain, or graveyard chain */
    uint64_t size;
    uint64_t access_ms;   /* last get (LRU clock); for an unfinished put, when put_start ran */
    uint64_t lease_until; /* monotonic ms; 0 = no lease */
    uint64_t soft_pin_until;
    uint64_t version; /* names the writer of an unfinished upsert (its end must name it) */
    uint32_t hash;
    uint16_t key_len; /* MC_MP_MAX_KEY fits */
    uint8_t flags;
    uint8_t n_replicas;
    uint8_t data[]; /* key, then replicas: use mc__obj_reps */
} mc__object_t;

typedef struct mc__shard {
    pthread_mutex_t mu;
    mc__object_t **buckets;
    /* The bucket arrays growth replaced, chained through their first slot: a prefetch reads
     * buckets without the lock and may still be reading one, and a freed array can be unmapped
     * (a fault), so they go only with the shard. Together smaller than buckets. */
    mc__object_t **retired;
    uint32_t mask;       /* buckets - 1 */
    uint64_t count;      /* objects, complete or not */
    uint64_t incomplete; /* unfinished puts, so the monitor can skip idle shards */
    /* No unfinished put here started before this (ms; a lower bound, exact after a scan): the
     * monitor's discard pass walks the shard only once one may have timed out. Put slots keep
     * unfinished puts in most shards all the time, and a walk of every bucket every pass (10 a
     * second) would cost the master a core and hold each shard's lock for long at a million
     * objects. */
    uint64_t incomplete_since;
    /* Keeps neighbouring shards' locks off one cache line without demanding an alignment that
     * the heap would not give the master struct. */
    char pad_[40];
} mc__shard_t;

typedef struct mc__segment {
    pthread_mutex_t mu;
    uint64_t serial; /* names it in the metadata log (persist.h); never reused in a log */
    char name[MC_MP_MAX_SEGMENT_NAME + 1];
    uint32_t name_len;
    uint64_t base, size;
    uint64_t epoch; /* the owner's incarnation of this memory; every placement names it */
    uint8_t owner[MC_MP_CLIENT_ID_LEN];
    int dying; /* being unmounted: no new placements */
    /* A client reported it cannot reach this segment: no new placements until its owner
     * heartbeats again (read and cleared under the registry read lock, hence atomic). */
    _Atomic int unreachable;
    /* Restored from the metadata log and its owner not heard from since (it heartbeats or
     * remounts), or it expires: no placements, and nothing on it is evicted, because its memory
     * may still hold every byte the log says it does (read and cleared under the registry read
     * lock, hence atomic). While any segment awaits its owner the master is recovering. */
    _Atomic int awaiting_owner;
    /* A drain (drain.c) holds it: MC__SEG_DRAINING (readable, no new placements, its objects
     * being moved away) or MC__SEG_DRAINED (empty, awaiting its unmount); 0 otherwise. Written
     * by segments.c under the placement and registry write locks, read under either. */
    _Atomic int drain;
    mc__seg_alloc_t alloc;
} mc__segment_t;

/* A segment's status as the reference numbers it (its SegmentStatus), for the admin routes. */
enum {
    MC__SEG_UNDEFINED = 0,
    MC__SEG_OK = 1,
    MC__SEG_DRAINING = 2,
    MC__SEG_DRAINED = 3,
    MC__SEG_UNMOUNTING = 5
};

typedef struct mc__client_rec {
    uint8_t id[MC_MP_CLIENT_ID_LEN];
    uint64_t last_seen_ms;
} mc__client_rec_t;

#define MC__LAT_BUCKETS 12
#define MC__SIZE_BUCKETS 7
/* Per message type. A request naming one key is counted as the reference's single-key call
 * (single_*), one naming more as its batch call (batch_*): on the wire both are batches. */
typedef struct mc__op_stats {
    _Atomic uint64_t ops;    /* keys processed */
    _Atomic uint64_t errors; /* keys that failed */
    _Atomic uint64_t rpcs;
    _Atomic uint64_t lat_sum_us;
    _Atomic uint64_t lat_bucket[MC__LAT_BUCKETS + 1];
    _Atomic uint64_t single, single_failed;
    _Atomic uint64_t batch, batch_items, batch_failed, batch_partial, batch_failed_items;
} mc__op_stats_t;

typedef struct mc__rpc_server mc__rpc_server_t;
struct mc__disk;
typedef struct mc__persist mc__persist_t;
typedef struct mc_http_server mc_http_server_t;

struct mc__master {
    mc__master_config_t cfg;
    mc_auth_t auth; /* the cluster secret: every RPC and metadata connection proves it */
    uint64_t start_ms;
    mc__shard_t shards[MC__SHARDS];

    pthread_rwlock_t placement;
    pthread_rwlock_t registry;
    mc__segment_t **slots;
    uint32_t n_slots;
    uint32_t place_cursor; /* spreads placements across segments */
    _Atomic uint64_t view_version;
    _Atomic uint64_t next_version; /* objects' versions (upserts name theirs) */
    _Atomic int64_t n_unreachable; /* segments marked unreachable (heartbeats skip the scan at 0) */
    _Atomic int64_t n_awaiting;    /* segments awaiting their owner: > 0 while recovering */
    _Atomic uint64_t placements_deferred; /* put keys answered "recovering" (retry) */

    pthread_mutex_t clients_mu;
    mc__client_rec_t *clients;
    size_t n_clients, cap_clients;

    pthread_mutex_t grave_mu;
    mc__object_t *grave; /* discarded puts whose space is held until release time */
    /* Told when segments.c drops a slot, before the slot can be reused (lifecycle wires
     * tasks.c here, whose pending targets may lie in it): segments.c names nothing above it. */
    void (*slot_dropped)(struct mc__master *m, uint32_t slot);

    pthread_mutex_t evict_mu;
    /* puts waiting for evict_mu to make room for themselves: while any does, a background
     * pass that holds it stops yielding its core to requests (evict.c) */
    _Atomic int evict_waiting;

    /* Replica copy / move tasks (tasks.c). */
    pthread_mutex_t tasks_mu;
    struct mc__task **tasks;
    size_t n_tasks, cap_tasks;
    size_t tasks_in[4]; /* listed tasks by status (MC_TASK_*), so no request counts them */
    uint64_t tasks_checked_ms;

    /* gauges and counters */
    _Atomic int64_t n_objects;    /* complete objects */
    _Atomic int64_t object_bytes; /* their sizes */
    _Atomic int64_t n_segments;
    _Atomic int64_t capacity_bytes;
    _Atomic int64_t used_bytes;
    _Atomic uint64_t evictions, evicted_bytes, eviction_runs;
    _Atomic uint64_t discarded_puts, expired_clients, left_clients;
    _Atomic uint64_t eviction_successes;            /* passes that evicted something */
    _Atomic uint64_t released_puts;                 /* discarded puts whose space was given back */
    _Atomic uint64_t stale_put_sweep_objects;       /* objects the sweep for stale puts walked */
    _Atomic uint64_t put_alloc_failures;            /* keys a put or upsert found no space for */
    _Atomic uint64_t put_partial_allocs;            /* keys placed with fewer replicas than asked */
    _Atomic uint64_t gets, get_hits, get_hit_bytes; /* GET_REPLICA_LIST keys, found, bytes */
    _Atomic uint64_t remove_all_regex;              /* REMOVE_ALL requests with a pattern */
    _Atomic uint64_t remove_all_regex_failed;
    _Atomic uint64_t value_size_bucket[MC__SIZE_BUCKETS + 1]; /* finished puts by size */
    _Atomic uint64_t value_size_sum;
    _Atomic uint64_t task_creates[2], task_create_failures[2]; /* by MC_TASK_COPY / _MOVE */
    mc__op_stats_t op[MC_MP_TYPE_MAX_];

    pthread_t monitor;
    int monitor_started;
    pthread_mutex_t mon_mu;
    pthread_cond_t mon_cv;
    int stopping;
    int evict_wanted;

    struct mc__disk *disk;        /* the disk tier's view (disk.h) */
    mc__persist_t *persist;       /* the metadata log (local or in etcd), or NULL (persist.h) */
    _Atomic int fenced;           /* the log could not record a change: serve nothing more */
    _Atomic uint64_t next_serial; /* segments' log serials */
    struct mc__kv_events *kv;     /* the KV-event publisher or NULL (kv_events.c, started and
                                   * stopped by master.c) */
    mc__rpc_server_t *rpc;
    mc_http_server_t *admin;
    void *meta_store;
    struct mc__drain *drain; /* drain jobs and their thread (drain.c) */
};

static inline mc__replica_t *mc__obj_reps(mc__object_t *o) {
    return (mc__replica_t *)(void *)(o->data + (((size_t)o->key_len + 7u) & ~(size_t)7u));
}
#endif
