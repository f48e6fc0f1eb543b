/* The master's view of the disk tier (disk_replicas.c): which storage nodes have a disk, which
 * objects have a LOCAL_DISK copy on which disk, and the work (offload, delete, promote) queued
 * for each node. The master never touches data: a node copies its own memory to its disk when
 * the master asks (DISK_FETCH) and says when the copy is durable (DISK_DONE).
 *
 * Each copy is recorded under the disk's identity (the node's DISK_ID), in the metadata log
 * too when the master keeps one (MC__R_DISK_SET / MC__R_DISK_DEL, persist.h), so the record
 * outlives the node's connection and the master's own restart or failover. A copy whose node
 * expired or left, or that a restarted master restored from its log, is *detached*: remembered,
 * never served, and attached again when its disk re-announces it (DISK_ANNOUNCE).
 *
 * Why nothing removed comes back: the master takes an announced copy only if it holds a record
 * that this very disk has that key, of that size. Every change of a key's disk copy goes through
 * the master (an offload is recorded only once the node reports it durable; a removal or an
 * overwrite deletes the record, logged, before its DELETE is even queued), so a record exists
 * exactly while the latest value the master acknowledged for the key is that disk's copy. A
 * removal the node never heard of (it was down, or the DELETE was still queued when the master
 * stopped) left no record, in memory or in the log; the node's copy is refused (deleted) when it
 * announces it. The one exception is a master without a log (no --metadata_dir, no HA): it
 * remembers nothing across its own restart, so the first announce of a disk it has never seen
 * in this process *adopts* every copy as a disk-only object (objects survive such a restart,
 * removals racing it are not guaranteed); from then on that disk is held to its records.
 *
 * The shared-filesystem tier (the master's --root_fs_dir, the reference's DISK replicas) is one
 * more disk that belongs to no node: the files under root_fs_dir/cluster_id. A node whose tier is
 * that directory (every store client with a segment, when the master has one, unless the node
 * has a disk of its own) announces with SHARED; its offloads are recorded as copies of the
 * shared disk, which readers open themselves, so they stay served whatever happens to the node
 * that wrote them (and a restarted master restores them from its log attached). Its deletes and
 * promotions go to any connected shared node. Without a log, a master adopts the files of the
 * shared directory at the first announce of it in its process, as for a node's disk.
 *
 * Locking: one mutex (leaf after shard and registry: taken under a shard lock, never around
 * one; the log's lock is taken under it). */
#ifndef MC_STORE_MASTER_DISK_H
#define MC_STORE_MASTER_DISK_H
#include "master/master_internal.h"

/* Checks root_fs_dir (which must exist: a missing mount point is not silently replaced by a
 * local directory) and creates its cluster_id subdirectory: 0, or INVALID_PARAMS with a
 * one-line reason in err. */
int mc__disk_root_check(const char *root_fs_dir, const char *cluster_id, char *err, size_t cap);
/* Fails (INVALID_PARAMS, said in the log) when the config's root_fs_dir does not check. */
int mc__disk_init(mc__master_t *m);
void mc__disk_destroy(mc__master_t *m);

/* A LOCAL_DISK copy as a reply names it. */
typedef struct mc__disk_hit {
    char endpoint[MC_MP_MAX_SEGMENT_NAME + 1];
    uint32_t endpoint_len;
    uint64_t size, version;
} mc__disk_hit_t;

/* With the shard of key locked. 1 (and *hit) when key has a disk copy. A read (get = 1) counts
 * a hit; with in_memory 0 and promotion_on_hit it may queue the promotion of the key. */
int mc__disk_find(mc__master_t *m, const uint8_t *key, uint32_t len, uint32_t hash, int get,
                  int in_memory, mc__disk_hit_t *hit);
/* With the shard of key locked: forgets key's disk copy, attached or detached (a connected node
 * is told to delete it; a detached one learns when it announces). 1 when there was one. */
int mc__disk_forget(mc__master_t *m, const uint8_t *key, uint32_t len, uint32_t hash);
/* Whether objects go to disk at all: the reference's --enable_offload for node disks, and every
 * object when there is a shared directory (the reference gives each put a DISK replica). */
int mc__disk_offloading(const mc__master_t *m);
/* With o's shard locked, as o's put (or upsert, or promotion) is published: an older disk copy
 * of the key goes (unless o is a promotion of it), and with enable_offload (and not
 * offload_on_evict) o is queued for offload when a replica lies on a node with a disk. */
void mc__disk_on_complete(mc__master_t *m, mc__object_t *o);
/* With o's shard locked, when eviction picks o (offload_on_evict): 1 when o was queued for
 * offload instead (it stays, unevictable, until its node reports), 0 to evict it now. */
int mc__disk_evict_offload(mc__master_t *m, mc__object_t *o);
/* The monitor's part: queues the promotions that cleared their admission threshold but were
 * refused by the watermark gate, once memory is under the eviction high watermark again. */
void mc__disk_promote_retry(mc__master_t *m);
/* Offloads queued or in flight, over all nodes (eviction waits for them in offload_on_evict). */
uint64_t mc__disk_pending(mc__master_t *m);
/* Waits until an offload finishes or timeout_ms passes. */
void mc__disk_wait(mc__master_t *m, uint64_t timeout_ms);
/* REMOVE_ALL's part: forgets the disk copies whose keys match re (NULL: all) and whose objects
 * have no memory copy left (those are counted by the sweep); returns how many. */
int64_t mc__disk_remove_all(mc__master_t *m, const void *re);
/* The client expired or left: its disk copies are detached (not served until its disk
 * re-announces them), its queued work is dropped. */
void mc__disk_client_gone(mc__master_t *m, const uint8_t *id);

/* The requests. ANNOUNCE and DONE fill codes (n_keys of them); FETCH writes its reply. */
int mc__disk_announce(mc__master_t *m, const mc__mp_request_t *r, int32_t *codes);
int mc__disk_done(mc__master_t *m, const mc__mp_request_t *r, int32_t *codes);
int mc__disk_fetch(mc__master_t *m, const mc__mp_request_t *r, mc_buf_t *out);
/* STORAGE_CONFIG: the shared directory, for a client to start its tier in. */
int mc__disk_storage_config(mc__master_t *m, const mc__mp_request_t *r, mc_buf_t *out);

/* The log's part (restore.c): a replayed record, into the view as a detached copy (0, or
 * MC_ERR_MEMORY) / removing one. The dump writes every copy, attached or not, as records. */
int mc__disk_restore_set(mc__master_t *m, const uint8_t *key, uint32_t len, uint64_t version,
                         uint64_t size, uint64_t disk_id);
void mc__disk_restore_del(mc__master_t *m, const uint8_t *key, uint32_t len);
void mc__disk_dump(mc__master_t *m, mc_buf_t *b);

/* Gauges and counters for /metrics (objects and bytes: the copies readers can reach now;
 * detached: those remembered for a disk that is not connected). */
typedef struct mc__disk_stats {
    uint64_t nodes, objects, bytes, capacity, pending, detached;
    uint64_t offloads, offload_failures, disk_hits, promotions, deletes;
} mc__disk_stats_t;
void mc__disk_stats(mc__master_t *m, mc__disk_stats_t *out);
#endif
