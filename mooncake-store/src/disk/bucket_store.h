/* The on-disk object store under the disk tier: objects appended to bucket files of many
 * objects each, a CRC-32 per object verified on every read, an in-memory index, and a rescan on
 * open that keeps the newest intact copy of each key and drops (and reclaims) what is torn or
 * fails its checksum. Format and policy: docs/disk-tier.md; record layout: bucket_record.h.
 *
 * Keys are NUL-terminated strings of 1..MC_BREC_MAX_KEY bytes (any bytes but NUL). Every call
 * returns 0 or a negative MC_ERR_ code. All calls but close are thread-safe (one mutex per
 * store; a get reads outside it, its bucket pinned); a store directory is held by one open store at
 * a time (an flock on its LOCK file). */
#ifndef MC_DISK_BUCKET_STORE_H
#define MC_DISK_BUCKET_STORE_H
#include <stddef.h>
#include <stdint.h>

#include "disk/bucket_record.h"

#define MC_BSTORE_DEFAULT_BUCKET (64ull << 20)

struct mc__bstore;

struct mc__bstore_opts {
    uint64_t capacity;    /* disk bytes the bucket files may take in all (> 0) */
    uint64_t bucket_size; /* a bucket is sealed once it reaches this; 0: 64 MiB; at most
                             capacity / 8 (min 4 KiB) so compaction has room */
    int no_sync;          /* 1: skip fdatasync after writes (tests, scratch data) */
    int no_direct;        /* 1: never use O_DIRECT (by default, where the file system allows
                             it, writes are O_DIRECT and values of 64 KiB and more are read so) */
};

/* 1 when s writes with O_DIRECT (its directory's file system took it at open: records padded to
 * MC_BREC_ALIGN), 0 when buffered. */
int mc__bstore_direct(struct mc__bstore *s);
/* How s submits its writes: "io_uring" or "pread/pwrite" (disk_io.h). */
const char *mc__bstore_io_mode(struct mc__bstore *s);
/* One line for a log: the write mode and why, and the I/O submission (what open logged). */
void mc__bstore_describe(struct mc__bstore *s, char *out, size_t cap);

/* Opens dir (created if missing; its parent must exist) with the default bucket size, rescanning
 * whatever buckets are there. A store over capacity after the rescan (the limit was lowered)
 * still opens; puts are refused until removals bring it under. INVALID_PARAMS for bad
 * arguments, UNAVAILABLE_IN_CURRENT_STATUS when another store holds dir, FILE_NOT_FOUND /
 * INTERNAL_ERROR for what the file system refuses. */
int mc__bstore_open(const char *dir, uint64_t capacity, struct mc__bstore **out);
int mc__bstore_open_ex(const char *dir, const struct mc__bstore_opts *opts,
                       struct mc__bstore **out);

/* Stores len bytes under key, replacing an existing copy (the old copy's space becomes dead and
 * is reclaimed by compaction). Durable when it returns 0 (unless no_sync).
 * NO_AVAILABLE_HANDLE: it does not fit even after compaction; the caller evicts and retries.
 * INVALID_PARAMS: data NULL with len > 0, or an object that could never fit (its record is over
 * the capacity). INVALID_KEY: key NULL, empty or over MC_BREC_MAX_KEY. WRITE_FAIL: I/O error
 * (nothing is left of the failed copy; an older copy of key is still served unless its space
 * had to be given up first to make room). */
int mc__bstore_put(struct mc__bstore *s, const char *key, const void *data, uint64_t len);

/* The same without the fdatasync: the copy is durable once mc__bstore_flush returned (a crash
 * before that may tear it, and the rescan then drops it). For many small puts in a row, one
 * flush for all. */
int mc__bstore_put_nosync(struct mc__bstore *s, const char *key, const void *data, uint64_t len);
int mc__bstore_flush(struct mc__bstore *s);

/* Copies the value of key into buf (cap bytes) after verifying its checksum; *out_len (may be
 * NULL) is the value's length. OBJECT_NOT_FOUND; BUFFER_OVERFLOW when cap is too small (*out_len
 * says how much is needed; nothing is copied); CHECKSUM_MISMATCH when the bytes on disk fail the
 * checksum: the object is deleted and buf's contents are undefined; INVALID_READ: I/O error. */
int mc__bstore_get(struct mc__bstore *s, const char *key, void *buf, uint64_t cap,
                   uint64_t *out_len);

/* The same without the copy into a caller's buffer: on 0, *val points at the verified value in
 * a buffer of the store's, *own, which the caller mc__free's (the O_DIRECT read's aligned buffer,
 * so a large value is copied once less on its way out). Nothing is allocated on failure. */
int mc__bstore_get_owned(struct mc__bstore *s, const char *key, uint64_t cap, void **own,
                         const uint8_t **val, uint64_t *out_len);

/* A reader's context for streamed gets: an I/O ring (disk_io.h) and its chunk buffers. One per
 * thread; it may serve gets of any store. */
struct mc__bstore_reader;
int mc__bstore_reader_open(struct mc__bstore_reader **out);
void mc__bstore_reader_close(struct mc__bstore_reader *r);
const char *mc__bstore_reader_mode(const struct mc__bstore_reader *r); /* "io_uring", ... */
/* Records r streamed out of its read-ahead (records of one chunk read back to back from one
 * bucket, O_DIRECT, io_uring: the next one is read while the last one's answer travels). */
uint64_t mc__bstore_reader_ahead_used(const struct mc__bstore_reader *r);

/* A streamed get reads a value in pieces of this many bytes of the file (4 in flight). */
#define MC_BSTORE_STREAM_CHUNK (256u << 10)
/* Bytes of room a streamed chunk has after its n bytes (the sink may write a trailer there). */
#define MC_BSTORE_CHUNK_SLACK 64u

/* Where a streamed get's bytes go. begin(ctx, len) once the record's header matched the index;
 * then chunk(ctx, p, n, last, verdict) for consecutive pieces of the value, in order (one call
 * with n == 0 for an empty value). p is writable and has MC_BSTORE_CHUNK_SLACK bytes of room
 * after the n. On the last piece verdict is 0 when every byte of the value passed the checksum,
 * CHECKSUM_MISMATCH when not: bytes already handed over are not to be used then. A non-zero
 * return of either stops the stream with that code. */
struct mc__bstore_sink {
    int (*begin)(void *ctx, uint64_t len);
    int (*chunk)(void *ctx, uint8_t *p, size_t n, int last, int verdict);
    void *ctx;
};

/* Reads key's value in chunks with several reads in flight, checksumming and handing each chunk
 * to the sink as it arrives, so that the device, the checksum and whatever the sink does (a TCP
 * send) overlap. Before begin: OBJECT_NOT_FOUND, BUFFER_OVERFLOW (*out_len set), INVALID_READ,
 * CHECKSUM_MISMATCH (the header on disk fails: deleted). After begin: 0 (verified),
 * CHECKSUM_MISMATCH (the last chunk said so; the object is deleted), INVALID_READ (an I/O error:
 * the stream stopped short, without a last chunk), or the sink's code. */
int mc__bstore_get_stream(struct mc__bstore *s, struct mc__bstore_reader *r, const char *key,
                          uint64_t cap, const struct mc__bstore_sink *sink, uint64_t *out_len);

/* The value length of key: OBJECT_NOT_FOUND if absent. */
int mc__bstore_size(struct mc__bstore *s, const char *key, uint64_t *out_len);

/* Deletes key (its space becomes dead; a bucket with nothing live left is unlinked at once).
 * OBJECT_NOT_FOUND if absent. */
int mc__bstore_remove(struct mc__bstore *s, const char *key);

/* Rewrites buckets that are at least half dead, now (puts also compact on demand). */
int mc__bstore_compact(struct mc__bstore *s);

/* Disk bytes the bucket files take (live, dead and the active bucket's tail), live bytes (the
 * records of indexed objects), object count, capacity. */
uint64_t mc__bstore_used(struct mc__bstore *s);
uint64_t mc__bstore_live(struct mc__bstore *s);
uint64_t mc__bstore_count(struct mc__bstore *s);
uint64_t mc__bstore_capacity(struct mc__bstore *s);
/* Damaged spans (a record whose header failed its check, or garbage between records) that the
 * rescan at open stepped over, and their bytes: each cost what it covers, the records after it
 * were kept (docs/disk-tier.md, "What a rescan keeps"). */
uint64_t mc__bstore_damaged(struct mc__bstore *s);
uint64_t mc__bstore_damaged_bytes(struct mc__bstore *s);

/* Calls fn for every intact object (after open: what the rescan kept, for re-announcing), with
 * the store's lock held: fn must not call back into s. A non-zero return stops the walk and is
 * returned. */
typedef int (*mc__bstore_key_fn)(void *ctx, const char *key, uint64_t value_len);
int mc__bstore_foreach(struct mc__bstore *s, mc__bstore_key_fn fn, void *ctx);

/* The least recently used object (put or read longest ago; after a rescan, the oldest written):
 * its key (copied into key, cap bytes) and value length. OBJECT_NOT_FOUND when the store is
 * empty, BUFFER_OVERFLOW when cap cannot hold the key. A walk of the index: O(objects). */
int mc__bstore_coldest(struct mc__bstore *s, char *key, size_t cap, uint64_t *value_len);

/* Closes the files and frees s (NULL is a no-op); no other call on s may be in flight. */
void mc__bstore_close(struct mc__bstore *s);
#endif
