/* Mooncake Store: the public C client API.
 *
 * A client contributes a global segment of memory to the pool (mounted at mooncake_master), keeps
 * a registered staging buffer for copies, and moves object bytes directly between processes with
 * the Transfer Engine; the master only holds metadata.
 *
 * Return conventions follow the reference Mooncake so Python callers see the same integers:
 * 0 on success, a negative MC_ERR_* (Store meaning, see mooncake/error.h) on error. Calls that
 * return a size return it as int64_t (>= 0) or a negative code. All calls are thread-safe once
 * setup returned 0; none of them keep a pointer to caller memory after they return, except
 * registered buffers (see mc_store_register_buffer). */
#ifndef MOONCAKE_STORE_H
#define MOONCAKE_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "mooncake/error.h"
#include "mooncake/export.h"
#include "mooncake/transfer_engine.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mc_store mc_store_t;

#define MC_STORE_DEFAULT_SEGMENT_SIZE (16ull << 20)
#define MC_STORE_DEFAULT_BUFFER_SIZE (16ull << 20)
#define MC_STORE_DEFAULT_MASTER "127.0.0.1:50051"
#define MC_STORE_DEFAULT_REPLICA_CACHE_ENTRIES 65536u
/* Longest key accepted (bytes). Longer keys fail with MC_ERR_INVALID_KEY before any RPC. */
#define MC_STORE_MAX_KEY_LEN 4096
#define MC_STORE_STR_MAX 256

/* ---- configuration ---------------------------------------------------------------------------
 * Precedence, lowest first: built-in defaults < the JSON file named by MOONCAKE_CONFIG_PATH <
 * MOONCAKE_* environment variables < values the caller sets explicitly. Strings are copied in. */
typedef struct mc_store_config {
    char local_hostname[MC_STORE_STR_MAX];     /* "" = this host's IP */
    char metadata_server[MC_STORE_STR_MAX];    /* "P2PHANDSHAKE" or "http://host:port/metadata" */
    char protocol[32];                         /* "tcp", "shm", "auto", "rdma" (falls back) */
    char device_name[MC_STORE_STR_MAX];        /* rdma_devices; accepted, unused by tcp/shm */
    char master_server_addr[MC_STORE_STR_MAX]; /* "host:port" */
    uint64_t global_segment_size;              /* 0 = pure client (contributes nothing) */
    uint64_t local_buffer_size;                /* 0 = no staging: only zero-copy calls work */
    int heartbeat_interval_ms;                 /* 0 = default (1000) */
    int rpc_timeout_ms;                        /* 0 = default (5000) */
    /* The opt-in cluster secret, or a file holding it ("": MC_CLUSTER_SECRET or
     * MC_CLUSTER_SECRET_FILE, else none): the master and every engine then accept only
     * connections that prove they know it (see docs/security.md). */
    char cluster_secret[MC_STORE_STR_MAX];
    char cluster_secret_file[MC_STORE_STR_MAX];
    mc_engine_t *engine; /* a shared, initialized engine; NULL = the store creates its own */
    /* The disk tier under this client's segment (docs/disk-tier.md): objects the master evicts
     * from it stay readable from ssd_offload_path (the reference's enable_ssd_offload). Needs
     * a segment (global_segment_size > 0) and the master's --enable_offload to fill. */
    int enable_ssd_offload;
    char ssd_offload_path[MC_STORE_STR_MAX];
    uint64_t ssd_offload_capacity; /* disk bytes it may take; 0 = 4 GiB */
    /* Replica locations kept while their leases last, so that gets skip the master (see
     * docs/store.md, "Replica-location cache"); 0 turns that off. At most 4194304. */
    uint64_t replica_cache_entries;
} mc_store_config_t;

/* Fills the built-in defaults. */
MC_API void mc_store_config_init(mc_store_config_t *c);
/* Sets one key from a string, as the JSON file, the environment and Python's setup(dict) spell
 * them: local_hostname, metadata_server, protocol, device_name (alias rdma_devices),
 * master_server_address (alias master_server_addr), global_segment_size, local_buffer_size
 * (sizes as integers or "4gb", "512MB", ...), cluster_secret, cluster_secret_file,
 * enable_ssd_offload (a boolean), ssd_offload_path, ssd_offload_capacity (a size),
 * replica_cache_entries (a count; 0 turns the replica-location cache off). Keys of the
 * reference this client accepts but does not use (tenant_id, enable_client_http_server=false,
 * client_http_port) are ignored. Unknown key or bad value: MC_ERR_INVALID_PARAMS. */
MC_API int mc_store_config_set(mc_store_config_t *c, const char *key, const char *value);
/* Applies a JSON object file (values may be strings or numbers). Keys that are no store setting
 * (files shared with vLLM or LMCache carry their own) are ignored, each said once at info; a
 * store key with a bad value fails with MC_ERR_INVALID_PARAMS. */
MC_API int mc_store_config_load_file(mc_store_config_t *c, const char *path);
/* The same, leaving the nskip keys in skip alone (they were given explicitly: those win). */
MC_API int mc_store_config_load_file_ex(mc_store_config_t *c, const char *path,
                                        const char *const *skip, size_t nskip);
/* Applies MOONCAKE_CONFIG_PATH (if set) and then MOONCAKE_MASTER, MOONCAKE_LOCAL_HOSTNAME,
 * MOONCAKE_TE_META_DATA_SERVER, MOONCAKE_PROTOCOL, MOONCAKE_DEVICE,
 * MOONCAKE_GLOBAL_SEGMENT_SIZE, MOONCAKE_LOCAL_BUFFER_SIZE, and for the disk tier
 * MOONCAKE_OFFLOAD_ENABLED, MOONCAKE_OFFLOAD_FILE_STORAGE_PATH,
 * MOONCAKE_OFFLOAD_BUCKET_MAX_TOTAL_SIZE, and MOONCAKE_REPLICA_CACHE_ENTRIES. */
MC_API int mc_store_config_load_env(mc_store_config_t *c);
/* The same, leaving the nskip keys in skip alone (file and environment alike). */
MC_API int mc_store_config_load_env_ex(mc_store_config_t *c, const char *const *skip, size_t nskip);

/* ---- replication ----------------------------------------------------------------------------- */
/* Soft pinning (evicted after every unpinned object), the reference's SoftPinAction numbers:
 * PRESERVE keeps what an upserted object had (a new object is not pinned), ENABLE pins, DISABLE
 * unpins. */
enum { MC_SOFT_PIN_PRESERVE = 0, MC_SOFT_PIN_ENABLE = 1, MC_SOFT_PIN_DISABLE = 2 };
typedef struct mc_replicate_config {
    int replica_num;   /* >= 1; replicas on distinct segments, best effort */
    int with_soft_pin; /* an MC_SOFT_PIN_* action (1 pins, as the older boolean did) */
    int with_hard_pin; /* never evicted */
    /* How long a soft pin lasts: <= 0 the master's default. A TTL without MC_SOFT_PIN_ENABLE
     * fails the call with MC_ERR_INVALID_PARAMS, as the reference's does. */
    int64_t soft_pin_ttl_ms;
    /* Segments (names as mounted, i.e. the owners' local hostnames) tried first, in order. */
    const char *const *preferred_segments;
    size_t preferred_segment_count;
} mc_replicate_config_t;

MC_API void mc_replicate_config_init(mc_replicate_config_t *rc);

/* ---- lifecycle ------------------------------------------------------------------------------- */
MC_API int mc_store_create(mc_store_t **out);
/* Creates or adopts the engine, connects to the master, allocates and mounts the global segment,
 * allocates the staging buffer and starts the heartbeat thread. Once per open: a second setup
 * fails with MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS; after mc_store_close the store sets up again
 * from scratch (a new engine, new memory), unless buffers from mc_store_get_buffer are still
 * alive. Master unreachable: MC_ERR_RPC_FAIL. */
MC_API int mc_store_setup(mc_store_t *s, const mc_store_config_t *cfg);
/* Why the last setup of s failed, in words ("the transfer engine could not start on ...: socket
 * error"), or "" when it did not fail or failed before any step (a NULL argument). The returned
 * code stays the reference's; this names the cause. Valid until the next setup or destroy. */
MC_API const char *mc_store_setup_error(const mc_store_t *s);
/* Stops heartbeats, unmounts the segment at the master and frees the memory, the staging buffer
 * and its own engine (so its host:port is free at once). Safe to call twice; later calls then
 * fail with MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS. Buffers returned by mc_store_get_buffer stay
 * valid until freed: while one is out, the staging buffer and the engine stay too, until the
 * next setup or destroy. */
MC_API int mc_store_close(mc_store_t *s);
/* Closes and frees. Every mc_store_buffer_t must have been freed before. NULL is accepted. */
MC_API void mc_store_destroy(mc_store_t *s);
/* 0 healthy, 1 not set up (or closed), 2 master unreachable. */
MC_API int mc_store_health_check(mc_store_t *s);
/* Objects this client read from a storage node's disk tier (LOCAL_DISK copies) since setup:
 * the reference's offload RPC read count. */
MC_API uint64_t mc_store_disk_read_count(const mc_store_t *s);
/* The segment name this client mounts and peers open ("host:port"); "" before setup. */
MC_API const char *mc_store_hostname(const mc_store_t *s);
MC_API mc_engine_t *mc_store_engine(mc_store_t *s);

/* ---- buffers ----------------------------------------------------------------------------------
 * Registered user memory is used directly as a transfer source or destination (zero copy); any
 * other memory goes through the staging buffer (or straight to tcp and shm, see
 * mc_store_moves_any_memory). The memory must stay valid until unregistered: the store cannot
 * see it freed, and a transfer into or out of it then faults.
 *
 * Every call that takes caller memory refuses, with MC_ERR_INVALID_PARAMS and before touching
 * anything, a part that starts inside a registered buffer and runs past its end. */
MC_API int mc_store_register_buffer(mc_store_t *s, void *addr, size_t len);
MC_API int mc_store_unregister_buffer(mc_store_t *s, void *addr);
/* For addresses the caller cannot vouch for (an integer from another language): 0 when a call
 * may read (writable = 0) or write (writable = 1) [addr, addr+len), else MC_ERR_INVALID_PARAMS.
 * Inside one buffer registered with the store or its engine (also the staging buffer, and a
 * dummy client's pool): 0 after one O(log n) lookup, no system call. Starting inside one and
 * running past its end: refused. Elsewhere: the range must be mapped and its first and last
 * pages allow the access (populate probes of those pages, plus an msync past two pages: about
 * 1 us, nothing written). Freed memory that is still mapped (a heap block) passes: only a live
 * registration proves memory is the caller's. len 0: 0. The answer holds until the memory is
 * freed or unregistered. A dummy client checks against the pool ranges it mapped. */
MC_API int mc_store_check_memory(mc_store_t *s, const void *addr, size_t len, int writable);

typedef struct mc_store_iov {
    void *base;
    size_t len;
} mc_store_iov_t;

/* One key and its parts: for puts the value is the concatenation of the parts; for get-into the
 * object is scattered into the parts in order. */
typedef struct mc_store_item {
    const char *key;
    const mc_store_iov_t *iov;
    size_t iovcnt;
} mc_store_item_t;

/* ---- writes: 0 or a negative code ------------------------------------------------------------
 * put start at the master, a WRITE of the bytes into every replica, put end; on any failure the
 * put is revoked. A value that fits no segment even after eviction: MC_ERR_NO_AVAILABLE_HANDLE.
 * A zero-length value: MC_ERR_INVALID_PARAMS. An existing key (complete or being put): 0, and
 * the first value stays, as the reference does. */
MC_API int mc_store_put(mc_store_t *s, const char *key, const void *data, size_t len,
                        const mc_replicate_config_t *rc);
MC_API int mc_store_put_parts(mc_store_t *s, const char *key, const mc_store_iov_t *parts,
                              size_t nparts, const mc_replicate_config_t *rc);
/* results[i] gets each item's code; returns 0 when every item succeeded, else the first error. */
MC_API int mc_store_batch_put(mc_store_t *s, const mc_store_item_t *items, size_t n,
                              const mc_replicate_config_t *rc, int *results);

/* Upserts insert or replace. The new value is written to new space while readers keep getting
 * the old one; the end swaps them, so a reader sees the old value or the new one, whole, never
 * a mix, and the key stays readable throughout. The old value's space is freed once no reader
 * holds a lease on it. Replacing therefore needs room for both values for a moment. A later
 * upsert of the same key preempts an unfinished one, whose end then fails with
 * MC_ERR_OBJECT_NOT_FOUND (its value is dropped). Otherwise as the puts above. */
MC_API int mc_store_upsert(mc_store_t *s, const char *key, const void *data, size_t len,
                           const mc_replicate_config_t *rc);
MC_API int mc_store_upsert_parts(mc_store_t *s, const char *key, const mc_store_iov_t *parts,
                                 size_t nparts, const mc_replicate_config_t *rc);
MC_API int mc_store_batch_upsert(mc_store_t *s, const mc_store_item_t *items, size_t n,
                                 const mc_replicate_config_t *rc, int *results);

/* ---- put sessions -----------------------------------------------------------------------------
 * A put in steps, for values that arrive piecewise (a KV cache written layer by layer): start
 * reserves each object's replicas (readers do not see it yet), range writes move bytes from
 * caller memory into byte ranges of every replica (any order, any number of calls, from several
 * threads), end publishes the objects, revoke abandons them. Bytes a session never wrote read
 * as whatever the space held. An unfinished session is discarded by the master after its
 * put_start_discard_timeout_sec, and close revokes those still open.
 *
 * start: codes[i] is 0, or MC_ERR_INVALID_PARAMS (size 0, the key already in a session of this
 * client, or named twice), the key's code (INVALID_KEY), OBJECT_ALREADY_EXISTS (the key exists
 * or another client is putting it), NO_AVAILABLE_HANDLE (no room). Returns 0 when the call itself
 * worked. */
MC_API int mc_store_put_session_start(mc_store_t *s, const char *const *keys, const uint64_t *sizes,
                                      size_t n, const mc_replicate_config_t *rc, int *codes);
/* One range of a session's object: len bytes from src to offset dst_off of the object. */
typedef struct mc_store_put_range {
    const void *src;
    uint64_t dst_off;
    uint64_t len;
} mc_store_put_range_t;
/* The ranges written into one key; result (out) is the bytes written, or a negative code:
 * INVALID_PARAMS when the key has no open session (never started, ended, revoked), has no
 * ranges, or a range is empty, runs past the object's end or past the end of the registered
 * buffer it starts in (then none of its ranges is written); TRANSFER_FAIL when a replica could
 * not be written (the session stays open: write again or revoke). All ranges of all keys move
 * in as few engine batches as they allow. Returns 0 when the call itself worked. */
typedef struct mc_store_range_write {
    const char *key;
    const mc_store_put_range_t *ranges;
    size_t n;
    int64_t result;
} mc_store_range_write_t;
MC_API int mc_store_put_session_write(mc_store_t *s, mc_store_range_write_t *writes, size_t n);
/* end publishes, revoke abandons; each first waits for the key's range writes in flight.
 * codes[i]: 0, INVALID_PARAMS (no open session for the key), OBJECT_NOT_FOUND (end only: the
 * master discarded the reservation as stale; its bytes are lost), or the master's code. A call
 * whose master round trip failed leaves its sessions open (sealed to writes) for another end
 * or revoke. */
MC_API int mc_store_put_session_end(mc_store_t *s, const char *const *keys, size_t n, int *codes);
MC_API int mc_store_put_session_revoke(mc_store_t *s, const char *const *keys, size_t n,
                                       int *codes);

/* ---- reads ------------------------------------------------------------------------------------
 * A read asks the master for the replica list (which grants a lease), reads from one replica and
 * falls back to the others when a transfer fails. Returns the object's byte length, or a negative
 * code: MC_ERR_OBJECT_NOT_FOUND on a miss, MC_ERR_BUFFER_OVERFLOW when the buffer is too small. */
MC_API int64_t mc_store_get_into(mc_store_t *s, const char *key, void *buf, size_t cap);
MC_API int64_t mc_store_get_into_parts(mc_store_t *s, const char *key, const mc_store_iov_t *iov,
                                       size_t iovcnt);
/* results[i] gets each item's length or code; returns 0 when all succeeded, else the first
 * error. */
MC_API int mc_store_batch_get_into(mc_store_t *s, const mc_store_item_t *items, size_t n,
                                   int64_t *results);

/* Byte ranges of objects: range i of a read copies len bytes from offset src_off of the object
 * to dst, and its result is len or a negative code (OBJECT_NOT_FOUND, or INVALID_PARAMS for a
 * range past the object's end, or one that starts in a buffer registered with
 * mc_store_register_buffer but ends past it). All ranges of all reads take one master round
 * trip and as few engine batches as the ranges allow. Returns 0 when the call itself worked. */
typedef struct mc_store_range {
    void *dst;
    uint64_t src_off;
    uint64_t len;
    int64_t result; /* out */
} mc_store_range_t;
typedef struct mc_store_range_read {
    const char *key;
    mc_store_range_t *ranges;
    size_t n;
} mc_store_range_read_t;
MC_API int mc_store_batch_get_ranges(mc_store_t *s, mc_store_range_read_t *reads, size_t n);

/* A read into memory the client owns (the staging buffer when it fits, so the bytes are moved
 * once); freed with mc_store_buffer_free. */
typedef struct mc_store_buffer mc_store_buffer_t;
MC_API int mc_store_get_buffer(mc_store_t *s, const char *key, mc_store_buffer_t **out);
/* outs[i] is NULL where results[i] < 0. Returns 0 or the first error. */
MC_API int mc_store_batch_get_buffer(mc_store_t *s, const char *const *keys, size_t n,
                                     mc_store_buffer_t **outs, int *results);
MC_API void *mc_store_buffer_data(const mc_store_buffer_t *b);
MC_API size_t mc_store_buffer_size(const mc_store_buffer_t *b);
MC_API void mc_store_buffer_free(mc_store_buffer_t *b);

/* ---- metadata -------------------------------------------------------------------------------- */
/* 1 exists, 0 not, negative on error. */
MC_API int mc_store_is_exist(mc_store_t *s, const char *key);
MC_API int mc_store_batch_is_exist(mc_store_t *s, const char *const *keys, size_t n, int *results);
/* Size in bytes, or a negative code (MC_ERR_OBJECT_NOT_FOUND). */
MC_API int64_t mc_store_get_size(mc_store_t *s, const char *key);
/* The sizes of n objects (sizes[i]: bytes, or a negative code), with the leases a get takes:
 * from replica locations this client holds under a live lease (see docs/store.md), the rest in
 * one master RPC. A get of these keys right after reads through the same locations, so a caller
 * can size its destinations first without another round trip. Returns 0 or the first error.
 * A dummy client: MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS (it reads the other way). */
MC_API int mc_store_batch_get_size(mc_store_t *s, const char *const *keys, size_t n,
                                   int64_t *sizes);
/* Replica locations this client may keep (replica_cache_entries of a set-up store), 0 when the
 * cache is off or the store is not set up. */
MC_API size_t mc_store_replica_cache_capacity(mc_store_t *s);
/* 1 when this set-up store moves caller memory that is not registered as it is, with no copy
 * through its staging buffer (protocols tcp and shm); 0 otherwise (fabric, a dummy client, a
 * store not set up). A reader can then hand it any destination at no extra cost. */
MC_API int mc_store_moves_any_memory(mc_store_t *s);

/* Where an object's replicas are, as the reference's Replica::Descriptor tells it. Asking grants
 * a lease, as a get does. Statuses are the reference's ReplicaStatus numbers. */
enum { MC_STORE_REPLICA_PROCESSING = 2, MC_STORE_REPLICA_COMPLETE = 3 };
#define MC_STORE_MAX_REPLICAS 8
typedef struct mc_store_replica {
    char transport_endpoint[MC_STORE_STR_MAX]; /* the owner's segment name ("host:port") */
    uint64_t buffer_address;                   /* where the bytes are in the owner's memory */
    uint64_t size;
    int status; /* MC_STORE_REPLICA_* */
    /* 1: a LOCAL_DISK replica (the reference's replica type): transport_endpoint is the owning
     * storage node's disk read server, buffer_address 0. 2: a DISK replica, a file in the
     * master's shared directory (--root_fs_dir) that every client reads itself: transport_endpoint
     * is "file:" and the directory, and mc_store_disk_file_path names the key's file.
     * 0: a MEMORY replica. */
    int is_disk;
} mc_store_replica_t;
/* The file of key's DISK replica (is_disk 2) whose transport_endpoint is endpoint, into out (cap
 * bytes, with its NUL): 0, or INVALID_PARAMS (not a DISK replica's endpoint, an empty key, or
 * out too small). No I/O: the file may have gone since the replica was listed. */
MC_API int mc_store_disk_file_path(const char *endpoint, const char *key, char *out, size_t cap);
typedef struct mc_store_replica_list {
    int code; /* 0, or this key's code (OBJECT_NOT_FOUND, INVALID_KEY, ...) */
    size_t n;
    mc_store_replica_t replicas[MC_STORE_MAX_REPLICAS];
} mc_store_replica_list_t;
/* out[i] for keys[i], in one master round trip. Returns 0 when the call itself worked (per-key
 * codes in out[i].code), else the code that failed it. */
MC_API int mc_store_batch_get_replica_desc(mc_store_t *s, const char *const *keys, size_t n,
                                           mc_store_replica_list_t *out);
/* MC_ERR_OBJECT_HAS_LEASE while a reader holds a lease, unless force. */
MC_API int mc_store_remove(mc_store_t *s, const char *key, int force);
MC_API int mc_store_batch_remove(mc_store_t *s, const char *const *keys, size_t n, int force,
                                 int *results);
/* Drops the replicas of keys whose leases have expired: those on segment (a segment name as
 * get_hostname() gives it), or every replica when segment is NULL or "" (the object goes with
 * its last replica). codes[i]: 0 cleared, MC_ERR_OBJECT_HAS_LEASE (a reader holds it),
 * MC_ERR_OBJECT_NOT_FOUND (no such object, or no replica on segment), or the key's error. */
MC_API int mc_store_batch_replica_clear(mc_store_t *s, const char *const *keys, size_t n,
                                        const char *segment, int *codes);
/* Number of objects removed, or a negative code. */
MC_API int64_t mc_store_remove_all(mc_store_t *s, int force);
/* Removes the objects whose keys match regex (POSIX extended, matched anywhere in the key, as
 * std::regex_search would; leased ones only with force). The count, or a negative code
 * (INVALID_PARAMS for an empty or malformed expression). */
MC_API int64_t mc_store_remove_by_regex(mc_store_t *s, const char *regex, int force);

/* ---- extra segments ---------------------------------------------------------------------------
 * Memory contributed beside the global segment, mounted under this client's segment name and
 * named by an id (36-character UUID text, written to id with its NUL). mount_segment maps
 * [offset, offset+size) of a regular file shared (offset page-aligned) and serves those pages;
 * allocate_and_mount_segment allocates size bytes, rounded up to 4 MiB (*allocated, may be
 * NULL). Errors: INVALID_PARAMS (size 0, a range outside the file, an unaligned offset),
 * FILE_NOT_FOUND, NO_AVAILABLE_HANDLE (no memory), the master's code.
 *
 * unmount_segment takes mount_segment's ids, unmount_and_free_segment allocate_and_mount's
 * (each refuses the other's with SEGMENT_NOT_FOUND); both return 0 or the first error. The
 * master drops the objects' replicas on the segment (objects without another replica go), then
 * the memory is released. With grace_s > 0 the segment stays mounted and readable for that many
 * seconds first (it still takes new placements meanwhile). close() unmounts every one. A segment
 * the master forgets (restart, expiry) comes back in a new incarnation if allocated; a file
 * segment is dropped (its pages cannot change, and stale placements could reach them). */
MC_API int mc_store_mount_segment(mc_store_t *s, const char *path, uint64_t offset, uint64_t size,
                                  char id[37]);
MC_API int mc_store_allocate_and_mount_segment(mc_store_t *s, uint64_t size, char id[37],
                                               uint64_t *allocated);
MC_API int mc_store_unmount_segment(mc_store_t *s, const char *const *ids, size_t n,
                                    uint64_t grace_s);
MC_API int mc_store_unmount_and_free_segment(mc_store_t *s, const char *const *ids, size_t n,
                                             uint64_t grace_s);
/* Takes this node's disk tier (enable_ssd_offload, or the shared directory's) off the master, as
 * a preStop hook does before the node goes: the master stops queueing work for it and stops
 * sending readers to its disk copies (they are kept on disk, and served again once a restarted
 * node announces them), then the call waits grace_s seconds so that reads already sent there
 * finish. The tier does no more work in this process; a second call returns 0 (after its own
 * grace period, as the reference's). A store
 * without a disk tier has nothing to take off: 0 (logged). Errors: the master's, RPC_FAIL (the
 * tier then carries on as before), UNAVAILABLE_IN_CURRENT_STATUS (not set up, closed). */
MC_API int mc_store_unmount_local_disk_segment(mc_store_t *s, uint64_t grace_s);

/* ---- replica tasks ----------------------------------------------------------------------------
 * The master moves replicas for you: a copy adds replicas of an object on target segments, a
 * move puts its replica on one segment onto another. The task runs on the client that owns the
 * source replica (it takes its tasks with its heartbeats, so within about a heartbeat interval),
 * and fails, leaving the object as it was, when the object is removed, replaced or loses that
 * replica meanwhile. Ids and numbers are the reference's (TaskType, TaskStatus, UUID). */
typedef struct mc_store_task_id {
    uint64_t hi, lo;
} mc_store_task_id_t;
enum { MC_STORE_TASK_REPLICA_COPY = 0, MC_STORE_TASK_REPLICA_MOVE = 1 };
enum {
    MC_STORE_TASK_PENDING = 0,
    MC_STORE_TASK_PROCESSING = 1,
    MC_STORE_TASK_FAILED = 2,
    MC_STORE_TASK_SUCCESS = 3
};
typedef struct mc_store_task_info {
    mc_store_task_id_t id;
    int type;   /* MC_STORE_TASK_REPLICA_* */
    int status; /* MC_STORE_TASK_* */
    int64_t created_at_ms_epoch, last_updated_at_ms_epoch;
    mc_store_task_id_t assigned_client; /* the client id of the one that runs it */
    char message[256];                  /* why it failed, or a note */
} mc_store_task_info_t;
/* 0 and the task's id, or: OBJECT_NOT_FOUND (no such complete object), INVALID_PARAMS (no
 * targets, more than 8, a target that is no mounted segment, a move whose source holds no replica
 * of the object or equals its target, or replicas beyond 8), OBJECT_HAS_REPLICATION_TASK (one is
 * unfinished for the key), TASK_PENDING_LIMIT_EXCEEDED. Targets that hold a replica already are
 * skipped (a task with nothing left to move succeeds at once). */
MC_API int mc_store_create_copy_task(mc_store_t *s, const char *key, const char *const *targets,
                                     size_t n, mc_store_task_id_t *id);
MC_API int mc_store_create_move_task(mc_store_t *s, const char *key, const char *source,
                                     const char *target, mc_store_task_id_t *id);
/* 0 with the task's state, or TASK_NOT_FOUND (the master keeps the last
 * --max_total_finished_tasks finished ones, 10000 by default). */
MC_API int mc_store_query_task(mc_store_t *s, const mc_store_task_id_t *id,
                               mc_store_task_info_t *out);

#ifdef __cplusplus
}
#endif
#endif
