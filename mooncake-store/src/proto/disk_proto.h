/* The disk tier on the wire. No I/O, so that every decoder can be fuzzed.
 *
 * On the master RPC (types MC_MP_DISK_* of master_proto.h), bodies after the 16-byte client id:
 *
 *   DISK_ANNOUNCE  u8 flags, str endpoint (the node's disk read server, "host:port"; may be empty
 *                  only with DROP), u64 disk capacity, u64 disk id (random, kept in the
 *                  directory: a restarted node is the same disk under a new client id, and
 *                  replaces its old self at once), u32 n, n x (str key, u64 size)
 *                  RESET: forget every disk copy the master holds for this client first (the
 *                  first batch of a node's (re-)announce after it (re)started or the master did);
 *                  DROP: these keys left the node's disk (its own LRU made room): forget them.
 *                  Without DROP: these keys are intact on the node's disk.
 *                  END: the last batch of the announce: the master forgets its records of
 *                  this disk's copies that were not announced (they are not on it any more).
 *   DISK_FETCH     u32 max (1..MC_DP_MAX_FETCH)
 *   DISK_DONE      u8 ok (1: the offload is on disk, 0: it failed), u32 n, n x (str key,
 *                  u64 version): offloads the node finished, each named by the version fetched
 *   STORAGE_CONFIG (nothing more): the reference's GetStorageConfig
 *
 *   ANNOUNCE with LEAVE (and no keys): the node takes its disk off the master
 *   (unmount_local_disk_segment): its queued work is dropped and its copies are detached, not
 *   served, as when the node leaves; it announces nothing more in this process (a restart
 *   announces the disk again, and the copies the master holds records of come back).
 *
 *   ANNOUNCE with SHARED: the node's tier is the shared-filesystem one (the master's
 *   --root_fs_dir): its copies are files every node reads itself, so they belong to no node
 *   (a node leaving or restarting takes none of them out of reach), and the endpoint is empty.
 *
 * STORAGE_CONFIG's reply: str fsdir (the shared directory, root_fs_dir/cluster_id; empty when
 * the master has no --root_fs_dir), u8 enable_disk_eviction, u64 quota_bytes (the reference's
 * fields, as the master was given them).
 *
 * Replies: ANNOUNCE and DONE: u32 n, n x i32 code (ANNOUNCE: 0 kept, OBJECT_ALREADY_EXISTS: the
 * master holds another copy of the key, OBJECT_NOT_FOUND: the master has no record of this
 * disk holding the key (it was removed while the node could not be told), delete yours; DONE: 0
 * recorded, OBJECT_NOT_FOUND: the object was removed or replaced meanwhile, delete your copy).
 * FETCH: u32 n, n x job:
 *
 *   job:           u8 kind, str key, u64 size, u64 version, str segment, u64 addr, u64 epoch
 *                  OFFLOAD: copy size bytes at addr of your own segment (named, in that epoch)
 *                  to disk, then report DONE with version; DELETE: drop the key from disk;
 *                  PROMOTE: read the key from disk and put it back into memory (size bytes).
 *                  segment is empty and addr, epoch 0 for DELETE and PROMOTE.
 *
 * A FETCH from a client the master knows no disk for (it restarted, or expired the client) is
 * answered with the error CLIENT_NOT_FOUND: the node announces everything again (RESET).
 *
 * The node's disk read server (TCP, frame.h framing, the cluster secret's handshake first when
 * one is set) takes one request type:
 *
 *   READ           str key, u64 version (0: any), u64 cap (the reader's buffer)
 *   reply          i32 code, u64 len; when code is 0 the len value bytes follow the frame,
 *                  outside it (the body limit does not bound an object), and then an 8-byte
 *                  trailer: u32 magic MC_DP_TRAILER_MAGIC, i32 verdict. The node streams a value
 *                  while it reads it, checksumming chunk by chunk, so the verdict comes after
 *                  the bytes: 0 when every byte passed, CHECKSUM_MISMATCH (the copy is deleted) or
 *                  INVALID_READ (the read failed part way; the rest of the len bytes are zeros)
 *                  when not. A reader uses the bytes only after a trailer with verdict 0. A code
 *                  other than 0 in the reply itself (len > cap is BUFFER_OVERFLOW, a missing key,
 *                  a header that failed its check) comes with no bytes and no trailer.
 */
#ifndef MC_STORE_PROTO_DISK_PROTO_H
#define MC_STORE_PROTO_DISK_PROTO_H
#include "proto/master_proto.h"

#define MC_DP_ANNOUNCE_RESET 0x1u
#define MC_DP_ANNOUNCE_DROP 0x2u
#define MC_DP_ANNOUNCE_END 0x4u
#define MC_DP_ANNOUNCE_SHARED 0x8u
#define MC_DP_ANNOUNCE_LEAVE 0x10u
#define MC_DP_ANNOUNCE_FLAGS                                                                       \
    (MC_DP_ANNOUNCE_RESET | MC_DP_ANNOUNCE_DROP | MC_DP_ANNOUNCE_END | MC_DP_ANNOUNCE_SHARED |     \
     MC_DP_ANNOUNCE_LEAVE)
/* A shared-filesystem copy in a replica list: segment_name is this prefix and the shared
 * directory (the reader opens the key's file there itself; file_store.h). */
#define MC_DP_SHARED_PREFIX "file:"
#define MC_DP_MAX_FETCH 64u
#define MC_DP_MAX_ANNOUNCE 4096u /* keys per announce batch a node sends */

enum { MC_DP_JOB_OFFLOAD = 1, MC_DP_JOB_DELETE = 2, MC_DP_JOB_PROMOTE = 3 };

typedef struct mc__disk_job {
    uint8_t kind;
    char key[MC_MP_MAX_KEY + 1];
    uint64_t size;
    uint64_t version;
    mc__replica_desc_t src; /* OFFLOAD: where the bytes are (size set to size) */
} mc__disk_job_t;

/* FETCH replies: begin (n), n x job, frame_end. */
int mc__dp_fetch_reply_begin(mc_buf_t *b, uint64_t request_id, uint32_t n, size_t *frame_start);
int mc__dp_fetch_reply_job(mc_buf_t *b, const mc__disk_job_t *j);
/* 0, the error reply's code, or MC_ERR_RPC_FAIL for a malformed reply. out holds max jobs. */
int mc__dp_decode_fetch_reply(const mc_frame_header_t *h, const uint8_t *body, size_t len,
                              uint32_t max, mc__disk_job_t *out, uint32_t *n);

/* STORAGE_CONFIG's reply. fsdir holds MC_MP_MAX_SEGMENT_NAME + 1 bytes. */
int mc__dp_encode_storage_config(mc_buf_t *b, uint64_t request_id, const char *fsdir,
                                 uint8_t enable_disk_eviction, uint64_t quota_bytes);
int mc__dp_decode_storage_config(const mc_frame_header_t *h, const uint8_t *body, size_t len,
                                 char *fsdir, uint8_t *enable_disk_eviction, uint64_t *quota_bytes);

/* The read server's messages. */
#define MC_DP_READ 1u
#define MC_DP_MAX_READ_BODY (MC_MP_MAX_KEY + 32u)
int mc__dp_encode_read(mc_buf_t *b, uint64_t request_id, const char *key, uint64_t version,
                       uint64_t cap);
/* key gets a NUL-terminated copy (MC_MP_MAX_KEY + 1 bytes). 0 or MC_ERR_INVALID_PARAMS (and
 * MC_ERR_INVALID_KEY for an empty, long or NUL-holding key). */
int mc__dp_decode_read(const uint8_t *body, size_t len, char *key, uint64_t *version,
                       uint64_t *cap);
int mc__dp_encode_read_reply(mc_buf_t *b, uint64_t request_id, int32_t code, uint64_t len);
/* 0 with *code and *len, or MC_ERR_RPC_FAIL for a malformed reply. */
int mc__dp_decode_read_reply(const mc_frame_header_t *h, const uint8_t *body, size_t len,
                             int32_t *code, uint64_t *vlen);
#define MC_DP_TRAILER_MAGIC 0x5452434Du /* "MCRT" */
#define MC_DP_TRAILER_SIZE 8u
void mc__dp_encode_read_trailer(uint8_t out[MC_DP_TRAILER_SIZE], int32_t verdict);
/* 0 with *verdict (0 or a negative code), or MC_ERR_RPC_FAIL for bytes that are no trailer. */
int mc__dp_decode_read_trailer(const uint8_t *in, size_t len, int32_t *verdict);
#endif
