/* The disk tier of a storage node (store_disk.c) and the reader's side of it
 * (store_disk_read.c). Protocol: proto/disk_proto.h; design: docs/disk-tier.md.
 *
 * A node with a disk tier owns a bucket store directory (disk/bucket_store.h). It announces what
 * the directory holds to the master (after its own start, and whenever the master no longer
 * knows it), runs the work the master queues for it (copy an object from its own memory segment
 * to disk, delete a copy, promote a copy back into memory), keeps its disk under its capacity
 * with its own LRU, and serves reads of disk copies over TCP to any reader the master sent. */
#ifndef MC_STORE_CLIENT_STORE_DISK_H
#define MC_STORE_CLIENT_STORE_DISK_H
#include <stddef.h>
#include <stdint.h>

#include "mooncake/common/frame.h"
#include "mooncake/store.h"
#include "proto/master_proto.h"

typedef struct mc__disk_tier mc__disk_tier_t;

typedef struct mc__disk_tier_opts {
    const char *dir;   /* the bucket store directory (created if missing) */
    uint64_t capacity; /* disk bytes it may take */
    const char *host;  /* the address readers reach the read server at; NULL/"": the host part
                          of the store's segment name */
    uint16_t port;     /* the read server's port; 0: ephemeral */
    int no_sync;       /* skip fdatasync (tests on scratch disks only) */
    /* The shared-filesystem tier instead: the master's root_fs_dir/cluster_id. dir, capacity,
     * host and port are then unused (no read server: readers open the files themselves). */
    const char *shared_dir;
} mc__disk_tier_opts_t;

/* Opens the directory (a rescan: what is torn or fails its checksum is dropped), starts the read
 * server and the worker that announces and runs the master's work. The store must be set up
 * with a segment, and stay so until mc__disk_tier_stop returns. */
int mc__disk_tier_start(mc_store_t *s, const mc__disk_tier_opts_t *o, mc__disk_tier_t **out);
void mc__disk_tier_stop(mc__disk_tier_t *t);
/* Takes the tier off the master (unmount_local_disk_segment): the worker stops between two
 * rounds, then the master drops its queued work and stops sending readers to its copies; the read
 * server keeps answering reads already under way. 0 (also when it was off already) or the RPC's
 * code (the tier then carries on as before). */
int mc__disk_tier_leave(mc__disk_tier_t *t);
/* "host:port" of the read server. */
const char *mc__disk_tier_endpoint(const mc__disk_tier_t *t);
/* How the tier's disk is written and read (for the node's log): see mc__bstore_describe. */
void mc__disk_tier_io_mode(const mc__disk_tier_t *t, char *out, size_t cap);
/* Appends the tier's Prometheus metrics. 0 or MC_ERR_INTERNAL_ERROR. */
int mc__disk_tier_metrics(mc__disk_tier_t *t, mc_buf_t *out);

/* The store's own tier (mc_store_setup with enable_ssd_offload): 0, or INVALID_PARAMS (no
 * path, no segment) or what opening the directory failed with, said in the log. */
int mc__store_disk_start(mc_store_t *s);
/* The shared-filesystem tier, when the master has one (STORAGE_CONFIG) and the store a segment:
 * 0 (also when there is none to start), or the code of a directory this host cannot use or a
 * master that cannot be asked, with the reason in why (cap bytes). */
int mc__store_shared_start(mc_store_t *s, char *why, size_t cap);

/* Reader side: reads key's LOCAL_DISK copy d (d->segment_name is the node's endpoint, or
 * MC_DP_SHARED_PREFIX and the shared directory, whose file is read here) into
 * iov, whose parts hold exactly size bytes. 0 or a negative code (OBJECT_NOT_FOUND when the node
 * no longer holds it, CHECKSUM_MISMATCH when the node found it damaged, TRANSFER_FAIL when the
 * node cannot be reached or breaks off). */
int mc__store_disk_read(mc_store_t *s, const char *key, const mc__replica_desc_t *d,
                        const mc_store_iov_t *iov, size_t iovcnt, uint64_t size);
/* Closes the cached connections to disk read servers (store teardown). */
void mc__store_disk_conns_close(mc_store_t *s);
#endif
