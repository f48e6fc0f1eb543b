/* The master's view of the disk tier (disk_replicas.c): which storage nodes have a disk, which
 * objects have a LOCAL_DISK copy on which node, and the work (offload, delete, promote) queued
 * for each node. The master never touches data: a node copies its own memory to its disk when
 * the master asks (DISK_FETCH) and says when the copy is durable (DISK_DONE).
 *
 * Disk copies are not in the metadata log: the node is the source of truth for its disk and
 * announces what is intact after its own restart or the master's (DISK_ANNOUNCE with RESET); a
 * copy vanishes from this view when its node expires or leaves, and comes back when it
 * re-announces.
 *
 * Locking: one mutex (leaf after shard and registry: taken under a shard lock, never around
 * one). */
#ifndef MC_STORE_MASTER_DISK_H
#define MC_STORE_MASTER_DISK_H
#include "master/master_internal.h"

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
/* With the shard of key locked: forgets key's disk copy (its node is told to delete it). 1 when
 * there was one. */
int mc__disk_forget(mc__master_t *m, const uint8_t *key, uint32_t len, uint32_t hash);
/* With o's shard locked, as o's put (or upsert, or promotion) is published: an older disk copy
 * of the key goes (unless o is a promotion of it), and with enable_offload (and not
 * offload_on_evict) o is queued for offload when a replica lies on a node with a disk. */
void mc__disk_on_complete(mc__master_t *m, mc__object_t *o);
/* With o's shard locked, when eviction picks o (offload_on_evict): 1 when o was queued for
 * offload instead (it stays, unevictable, until its node reports), 0 to evict it now. */
int mc__disk_evict_offload(mc__master_t *m, mc__object_t *o);
/* Offloads queued or in flight, over all nodes (eviction waits for them in offload_on_evict). */
uint64_t mc__disk_pending(mc__master_t *m);
/* Waits until an offload finishes or timeout_ms passes. */
void mc__disk_wait(mc__master_t *m, uint64_t timeout_ms);
/* REMOVE_ALL's part: forgets the disk copies whose keys match re (NULL: all) and whose objects
 * have no memory copy left (those are counted by the sweep); returns how many. */
int64_t mc__disk_remove_all(mc__master_t *m, const void *re);
/* The client expired or left: its disk copies leave this view, its queued work is dropped. */
void mc__disk_client_gone(mc__master_t *m, const uint8_t *id);

/* The requests. ANNOUNCE and DONE fill codes (n_keys of them); FETCH writes its reply. */
int mc__disk_announce(mc__master_t *m, const mc__mp_request_t *r, int32_t *codes);
int mc__disk_done(mc__master_t *m, const mc__mp_request_t *r, int32_t *codes);
int mc__disk_fetch(mc__master_t *m, const mc__mp_request_t *r, mc_buf_t *out);

/* Gauges and counters for /metrics. */
typedef struct mc__disk_stats {
    uint64_t nodes, objects, bytes, capacity, pending;
    uint64_t offloads, offload_failures, disk_hits, promotions, deletes;
} mc__disk_stats_t;
void mc__disk_stats(mc__master_t *m, mc__disk_stats_t *out);
#endif
