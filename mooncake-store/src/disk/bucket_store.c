/* The bucket store: append-only bucket files, an in-memory index, compaction on demand and a
 * rescan on open (see bucket_store.h and docs/disk-tier.md).
 *
 * Space accounting: used is the sum of the bucket files' sizes, the number the capacity bounds.
 * A put first makes room (unlinking buckets with nothing live, then rewriting the live records
 * of the most-dead bucket into the active one, only when the copies fit under the capacity
 * too), so used never passes the capacity, not even in the middle of a compaction. */
#include "disk/bucket_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/uio.h>
#include <unistd.h>

#include "disk/bucket_index.h"
#include "disk/disk_io.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/crc32.h"
#include "mooncake/common/log.h"
#include "mooncake/error.h"

#define SCRATCH_LEN (1u << 20)

struct mc__bucket {
    struct mc__bucket *next;
    uint32_t id;
    int fd;
    int dfd;        /* the same file opened O_DIRECT (read-write) for aligned writes and large
                       reads, or -1 */
    uint64_t size;  /* bytes in the file */
    uint64_t live;  /* bytes of indexed records in it */
    uint64_t nlive; /* indexed records in it */
    int pins;       /* gets reading it outside the lock */
    int dirty;      /* written by put_nosync since the last flush */
    int gone;       /* unlinked while pinned: the last unpin closes and frees it */
};

struct mc__bstore {
    pthread_mutex_t mu;
    int dirfd;
    int lockfd;
    struct mc__bstore_opts opts;
    const char *why; /* why writes are buffered (when they are) */
    int direct;      /* 1 when the directory's file system takes O_DIRECT (found once at open; not
                        on tmpfs): values of DIRECT_MIN and more are written and read through the
                        buckets' dfd, their records padded to MC_BREC_ALIGN */
    struct mc__dio *wio; /* the writes' I/O context (used under mu) */
    uint8_t *stage;      /* STAGE_LEN bytes, MC_BREC_ALIGN-aligned: O_DIRECT writes go through it */
    void *stage_raw;     /* its allocation */
    struct mc__bucket *buckets;
    struct mc__bucket *active; /* appended to; NULL until the next put creates one */
    uint32_t next_id;
    uint64_t seq; /* next sequence number */
    uint64_t use; /* the LRU clock: ticks on every put and get */
    uint64_t used;
    uint64_t live;
    uint64_t damaged; /* damaged spans the rescan at open stepped over (see bucket_record.h) */
    uint64_t damaged_bytes; /* their bytes */
    struct mc__bindex ix;
};

static uint64_t rec_size(const struct mc__bentry *e) {
    return mc__brec_size(e->key_len, e->value_len) + e->pad;
}

static uint64_t align_up(uint64_t v) {
    return (v + MC_BREC_ALIGN - 1) & ~(uint64_t)(MC_BREC_ALIGN - 1);
}

/* Values at least this large are written and read with O_DIRECT where the file system allows
 * it: aligned I/O at the device's speed instead of the page cache's (cold 1 MiB reads through
 * readahead ran at about 40% of it on the build host's ext4). Smaller ones stay buffered: padded
 * to a block, a 4 KiB object would take twice its size on disk, and small reads in the order
 * they were written ride the readahead. */
#define DIRECT_MIN (64u << 10)

/* Whether a value of len bytes is written with O_DIRECT in s. */
static int direct_rec(const struct mc__bstore *s, uint64_t len) {
    return s->direct && len >= DIRECT_MIN;
}

/* The space a new record of rs bytes (its value len bytes) takes: for an O_DIRECT one also the
 * zeros that align its start after a buffered record and its own padding to a block. */
static uint64_t space_for(const struct mc__bstore *s, uint64_t rs, uint64_t len) {
    if (!direct_rec(s, len))
        return rs;
    uint64_t start = s->active ? s->active->size : 0;
    return (align_up(start) - start) + align_up(rs);
}

static void bucket_name(uint32_t id, char out[32]) {
    snprintf(out, 32, "bucket-%08" PRIx32 ".mcb", id);
}

/* 1 and *id when name is a bucket file's name exactly as bucket_name writes it. */
static int parse_bucket_name(const char *name, uint32_t *id) {
    if (strlen(name) != 19 || strncmp(name, "bucket-", 7) != 0 || strcmp(name + 15, ".mcb") != 0)
        return 0;
    uint32_t v = 0;
    for (int i = 7; i < 15; i++) {
        char c = name[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            return 0;
        v = (v << 4) | (uint32_t)d;
    }
    *id = v;
    return 1;
}

static void sync_fd(const struct mc__bstore *s, int fd) {
    if (!s->opts.no_sync && fdatasync(fd) != 0)
        MC_WARN("bucket store: fdatasync: %s", strerror(errno));
}

/* All of iov[0..cnt) read (preadv) or written (pwritev) at off, across short transfers and
 * EINTR: 0, or -1 on an error or a read that meets the end of the file. iov is consumed. */
static int pio_full(int fd, uint64_t off, struct iovec *iov, int cnt, int is_write) {
    while (cnt > 0) {
        ssize_t n = is_write ? pwritev(fd, iov, cnt, (off_t)off) : preadv(fd, iov, cnt, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        off += (uint64_t)n;
        while (cnt > 0 && (size_t)n >= iov->iov_len) {
            n -= (ssize_t)iov->iov_len;
            iov++;
            cnt--;
        }
        if (cnt > 0) {
            iov->iov_base = (uint8_t *)iov->iov_base + n;
            iov->iov_len -= (size_t)n;
        }
    }
    return 0;
}

static int pread_full(int fd, uint64_t off, void *buf, size_t len) {
    struct iovec iov = {buf, len};
    return len ? pio_full(fd, off, &iov, 1, 0) : 0;
}

static int pwritev_full(int fd, uint64_t off, struct iovec *iov, int cnt) {
    return pio_full(fd, off, iov, cnt, 1);
}

static struct mc__bucket *bucket_new(struct mc__bstore *s, uint32_t id, int fd, uint64_t size) {
    struct mc__bucket *b = mc__calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->id = id;
    b->fd = fd;
    b->dfd = -1;
    if (s->direct) {
        char name[32];
        bucket_name(id, name);
        b->dfd = openat(s->dirfd, name, O_RDWR | O_DIRECT | O_CLOEXEC);
        if (b->dfd < 0 && errno == EINVAL)
            s->direct = 0; /* refused after all (the probe said yes): buffered from now on */
    }
    b->size = size;
    b->next = s->buckets;
    s->buckets = b;
    s->used += size;
    return b;
}

static void bucket_close(struct mc__bucket *b) {
    close(b->fd);
    if (b->dfd >= 0)
        close(b->dfd);
    mc__free(b);
}

/* Unlinks b's file and forgets it; its records must no longer be indexed. */
static void bucket_drop(struct mc__bstore *s, struct mc__bucket *b) {
    char name[32];
    bucket_name(b->id, name);
    if (unlinkat(s->dirfd, name, 0) != 0)
        MC_WARN("bucket store: unlink %s: %s", name, strerror(errno));
    sync_fd(s, s->dirfd);
    s->used -= b->size;
    if (s->active == b)
        s->active = NULL;
    for (struct mc__bucket **pp = &s->buckets; *pp; pp = &(*pp)->next)
        if (*pp == b) {
            *pp = b->next;
            break;
        }
    if (b->pins > 0) {
        b->gone = 1; /* its fd still reads the unlinked file's bytes */
        return;
    }
    bucket_close(b);
}

static void bucket_unpin(struct mc__bucket *b) {
    if (--b->pins == 0 && b->gone)
        bucket_close(b);
}

static int bucket_create(struct mc__bstore *s, struct mc__bucket **out) {
    char name[32];
    bucket_name(s->next_id, name);
    int fd = openat(s->dirfd, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        MC_ERROR("bucket store: create %s: %s", name, strerror(errno));
        return MC_ERR_WRITE_FAIL;
    }
    sync_fd(s, s->dirfd);
    struct mc__bucket *b = bucket_new(s, s->next_id, fd, 0);
    if (!b) {
        close(fd);
        unlinkat(s->dirfd, name, 0);
        return MC_ERR_INTERNAL_ERROR;
    }
    s->next_id++;
    *out = b;
    return 0;
}

/* Stops appending to the active bucket; one with nothing live left goes at once. */
static void seal_active(struct mc__bstore *s) {
    struct mc__bucket *b = s->active;
    s->active = NULL;
    if (b && b->nlive == 0)
        bucket_drop(s, b);
}

#define STAGE_LEN (1u << 20)

/* Writes the pieces of a record and pad zero bytes after them at b->size through b->dfd, via the
 * aligned staging buffer (O_DIRECT takes only aligned memory, offsets and lengths). */
static int write_direct(struct mc__bstore *s, struct mc__bucket *b, const struct iovec *iov,
                        int cnt, uint32_t pad) {
    if (!s->stage) {
        s->stage_raw = mc__malloc(STAGE_LEN + MC_BREC_ALIGN);
        if (!s->stage_raw)
            return MC_ERR_INTERNAL_ERROR;
        s->stage = (uint8_t *)(((uintptr_t)s->stage_raw + MC_BREC_ALIGN - 1) &
                               ~(uintptr_t)(MC_BREC_ALIGN - 1));
    }
    uint64_t off = b->size;
    size_t fill = 0;
    for (int i = 0; i <= cnt; i++) {
        const uint8_t *src = i < cnt ? iov[i].iov_base : NULL; /* the last piece: the padding */
        size_t left = i < cnt ? iov[i].iov_len : pad;
        while (left > 0) {
            size_t n = STAGE_LEN - fill < left ? STAGE_LEN - fill : left;
            if (src) {
                memcpy(s->stage + fill, src, n);
                src += n;
            } else {
                memset(s->stage + fill, 0, n);
            }
            fill += n;
            left -= n;
            if (fill == STAGE_LEN) {
                if (mc__dio_write_full(s->wio, b->dfd, s->stage, fill, off) != 0)
                    return MC_ERR_WRITE_FAIL;
                off += fill;
                fill = 0;
            }
        }
    }
    /* The record with its padding ends on a boundary, so fill is aligned here. */
    if (fill > 0 && mc__dio_write_full(s->wio, b->dfd, s->stage, fill, off) != 0)
        return MC_ERR_WRITE_FAIL;
    return 0;
}

/* Appends one record (with O_DIRECT and padded when direct_rec says so); *ob, *ooff and *opad
 * say where it went and how much padding follows it. On failure the bucket is cut back. */
static int append(struct mc__bstore *s, const char *key, uint32_t klen, const void *data,
                  uint64_t len, uint64_t seq, struct mc__bucket **ob, uint64_t *ooff,
                  uint32_t *opad) {
    uint64_t rs = mc__brec_size(klen, len);
    if (s->active && s->active->size > 0 && s->active->size + rs > s->opts.bucket_size)
        seal_active(s);
    if (!s->active) {
        int rc = bucket_create(s, &s->active);
        if (rc != 0)
            return rc;
    }
    struct mc__bucket *b = s->active;
    struct mc__brec r = {.magic = MC_BREC_LIVE, .key_len = klen, .value_len = len, .seq = seq};
    uint32_t crc = mc__crc32(0, key, klen);
    r.data_crc = mc__crc32(crc, data, (size_t)len);
    uint8_t hdr[MC_BREC_HDR];
    mc__brec_encode(&r, hdr);
    int dio = direct_rec(s, len) && b->dfd >= 0;
    uint32_t pad = dio ? (uint32_t)(align_up(rs) - rs) : 0;
    struct iovec iov[3] = {{hdr, sizeof hdr}, {(void *)key, klen}, {(void *)data, (size_t)len}};
    int wr = 0;
    if (dio && b->size % MC_BREC_ALIGN != 0) {
        /* After a buffered record: zeros up to the boundary, which a rescan reads as that
         * record's padding. Counted as dead space here (the store does not track which record
         * ends a bucket); at most 4 KiB per switch from small to large values. */
        static const uint8_t zeros[MC_BREC_ALIGN];
        struct iovec z = {(void *)zeros, (size_t)(align_up(b->size) - b->size)};
        if (pwritev_full(b->fd, b->size, &z, 1) != 0) {
            MC_ERROR("bucket store: write to bucket %" PRIu32 ": %s", b->id, strerror(errno));
            if (ftruncate(b->fd, (off_t)b->size) != 0)
                MC_WARN("bucket store: truncate after a failed write: %s", strerror(errno));
            return MC_ERR_WRITE_FAIL;
        }
        b->size += z.iov_len;
        s->used += z.iov_len;
    }
    if (dio)
        wr = write_direct(s, b, iov, 3, pad);
    else
        wr = pwritev_full(b->fd, b->size, iov, len > 0 ? 3 : 2) != 0 ? MC_ERR_WRITE_FAIL : 0;
    if (wr != 0) {
        MC_ERROR("bucket store: write to bucket %" PRIu32 ": %s", b->id, strerror(errno));
        if (ftruncate(b->fd, (off_t)b->size) != 0)
            MC_WARN("bucket store: truncate after a failed write: %s", strerror(errno));
        return wr;
    }
    *ob = b;
    *ooff = b->size;
    *opad = pad;
    b->size += rs + pad;
    s->used += rs + pad;
    return 0;
}

/* Rewrites a record's magic so no rescan takes it again. Best effort: a failure is logged and
 * the seq rule still hides an overwritten copy; a removed one could come back after a crash. */
static void mark_dead(struct mc__bstore *s, struct mc__bucket *b, uint64_t off) {
    uint8_t m[4] = {MC_BREC_DEAD & 0xff, (MC_BREC_DEAD >> 8) & 0xff, (MC_BREC_DEAD >> 16) & 0xff,
                    MC_BREC_DEAD >> 24};
    if (pwrite(b->fd, m, sizeof m, (off_t)off) != (ssize_t)sizeof m)
        MC_WARN("bucket store: mark dead in bucket %" PRIu32 ": %s", b->id, strerror(errno));
}

/* A bucket whose last live record just went: a sealed one is unlinked, the active one is cut
 * back to empty (appending after dead bytes would only make work for compaction). */
static void bucket_emptied(struct mc__bstore *s, struct mc__bucket *b) {
    if (b != s->active) {
        bucket_drop(s, b);
        return;
    }
    if (b->pins > 0)
        return; /* a get is reading it: the dead bytes wait for a compaction */
    if (ftruncate(b->fd, 0) != 0) {
        MC_WARN("bucket store: truncate an empty bucket: %s", strerror(errno));
        return;
    }
    s->used -= b->size;
    b->size = 0;
}

/* Detaches e's record from its bucket's counts (the bucket may go or be emptied). */
static void unaccount(struct mc__bstore *s, struct mc__bentry *e) {
    struct mc__bucket *b = e->b;
    uint64_t rs = rec_size(e);
    b->live -= rs;
    b->nlive--;
    s->live -= rs;
    e->b = NULL;
    if (b->nlive == 0)
        bucket_emptied(s, b);
}

/* Deletes an indexed object: its record dies on disk and its entry goes. */
static void kill_entry(struct mc__bstore *s, struct mc__bentry *e) {
    mark_dead(s, e->b, e->off);
    sync_fd(s, e->b->fd);
    unaccount(s, e);
    mc__bindex_del(&s->ix, e);
}

/* Checks a record header read from disk against its index entry. */
static int head_matches(const uint8_t *head, const struct mc__bentry *e) {
    struct mc__brec r;
    return mc__brec_decode(head, &r) == 0 && r.magic == MC_BREC_LIVE && r.key_len == e->key_len &&
           r.value_len == e->value_len && r.seq == e->seq && r.data_crc == e->data_crc &&
           memcmp(head + MC_BREC_HDR, e->key, e->key_len) == 0;
}

#define DIRECT_ALIGN 4096u

/* read_verify through b->dfd: 0, a code, or 1 when the direct read was refused (the caller
 * reads buffered instead). With own set the value is left in the aligned buffer (*own, which the
 * caller frees; *val points at the value in it) instead of copied to buf. */
static int read_verify_direct(int dfd, const struct mc__bentry *e, void *buf, void **own,
                              const uint8_t **val) {
    uint64_t start = e->off & ~(uint64_t)(DIRECT_ALIGN - 1);
    uint64_t rec_end = e->off + MC_BREC_HDR + e->key_len + e->value_len;
    uint64_t end = (rec_end + DIRECT_ALIGN - 1) & ~(uint64_t)(DIRECT_ALIGN - 1);
    size_t n = (size_t)(end - start), got = 0;
    uint8_t *raw = mc__malloc(n + DIRECT_ALIGN);
    uint8_t *ab = NULL, *rec = NULL;
    int rc = 0;
    if (!raw)
        return 1;
    ab = (uint8_t *)(((uintptr_t)raw + DIRECT_ALIGN - 1) & ~(uintptr_t)(DIRECT_ALIGN - 1));
    while (got < (size_t)(rec_end - start)) {
        ssize_t k = pread(dfd, ab + got, n - got, (off_t)(start + got));
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && errno == EINVAL) {
            rc = 1;
            goto out;
        }
        if (k <= 0 || ((size_t)k & (DIRECT_ALIGN - 1)) != 0) {
            /* an error, or a short read short of the record (the file is shorter) */
            if (k > 0 && got + (size_t)k >= (size_t)(rec_end - start)) {
                got += (size_t)k;
                break;
            }
            rc = MC_ERR_INVALID_READ;
            goto out;
        }
        got += (size_t)k;
    }
    rec = ab + (e->off - start);
    if (!head_matches(rec, e)) {
        rc = MC_ERR_CHECKSUM_MISMATCH;
        goto out;
    }
    if (mc__crc32(mc__crc32(0, e->key, e->key_len), rec + MC_BREC_HDR + e->key_len,
                  (size_t)e->value_len) != e->data_crc) {
        rc = MC_ERR_CHECKSUM_MISMATCH;
        goto out;
    }
    if (own) {
        *own = raw;
        *val = rec + MC_BREC_HDR + e->key_len;
        return 0;
    }
    memcpy(buf, rec + MC_BREC_HDR + e->key_len, (size_t)e->value_len);
out:
    mc__free(raw);
    return rc;
}

/* Reads e's value into buf (value_len bytes) and checks the header and checksum on disk. */
static int read_verify_buffered(int fd, const struct mc__bentry *e, void *buf);

/* The same, with the value in a buffer of the store's (*own, freed by the caller; *val points
 * at the value in it) when own is set. */
static int read_verify(const struct mc__bucket *b, const struct mc__bentry *e, void *buf,
                       void **own, const uint8_t **val) {
    int rc;
    if (b->dfd >= 0 && e->value_len >= DIRECT_MIN) {
        rc = read_verify_direct(b->dfd, e, buf, own, val);
        if (rc != 1)
            return rc;
    }
    if (!own)
        return read_verify_buffered(b->fd, e, buf);
    buf = mc__malloc(e->value_len ? (size_t)e->value_len : 1);
    if (!buf)
        return MC_ERR_INTERNAL_ERROR;
    rc = read_verify_buffered(b->fd, e, buf);
    if (rc != 0) {
        mc__free(buf);
        return rc;
    }
    *own = buf;
    *val = buf;
    return 0;
}

static int read_verify_buffered(int fd, const struct mc__bentry *e, void *buf) {
    uint8_t head[MC_BREC_HDR + MC_BREC_MAX_KEY];
    size_t hl = MC_BREC_HDR + e->key_len;
    if (pread_full(fd, e->off, head, hl) != 0 ||
        pread_full(fd, e->off + hl, buf, (size_t)e->value_len) != 0)
        return MC_ERR_INVALID_READ;
    if (!head_matches(head, e))
        return MC_ERR_CHECKSUM_MISMATCH;
    uint32_t crc = mc__crc32(0, e->key, e->key_len);
    if (mc__crc32(crc, buf, (size_t)e->value_len) != e->data_crc)
        return MC_ERR_CHECKSUM_MISMATCH;
    return 0;
}

/* Moves the live records of b into the active bucket and unlinks b. */
static int compact_bucket(struct mc__bstore *s, struct mc__bucket *b) {
    int rc = 0;
    struct mc__bentry **list = NULL;
    void *buf = NULL;
    if (s->active == b)
        s->active = NULL;
    list = mc__calloc(b->nlive ? b->nlive : 1, sizeof *list);
    if (!list) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    size_t n = 0;
    struct mc__bindex_iter it = {0};
    for (struct mc__bentry *e; (e = mc__bindex_next(&s->ix, &it)) != NULL;)
        if (e->b == b && n < b->nlive)
            list[n++] = e;
    for (size_t i = 0; i < n; i++) {
        struct mc__bentry *e = list[i];
        mc__free(buf);
        buf = mc__malloc(e->value_len ? (size_t)e->value_len : 1);
        if (!buf) {
            rc = MC_ERR_INTERNAL_ERROR;
            goto out;
        }
        int vr = read_verify(e->b, e, buf, NULL, NULL);
        if (vr == MC_ERR_CHECKSUM_MISMATCH) {
            /* Not kill_entry: that could drop b under this loop. */
            MC_WARN("bucket store: dropping a corrupt object while compacting");
            mark_dead(s, b, e->off);
            b->live -= rec_size(e);
            b->nlive--;
            s->live -= rec_size(e);
            mc__bindex_del(&s->ix, e);
            continue;
        }
        if (vr != 0) {
            rc = vr;
            goto out;
        }
        struct mc__bucket *nb;
        uint64_t off;
        uint32_t npad;
        rc = append(s, e->key, e->key_len, buf, e->value_len, e->seq, &nb, &off, &npad);
        if (rc != 0)
            goto out;
        uint64_t ors = rec_size(e);
        b->live -= ors;
        b->nlive--;
        s->live -= ors;
        e->pad = npad; /* the padding may differ in its new place */
        nb->live += rec_size(e);
        nb->nlive++;
        s->live += rec_size(e);
        e->b = nb;
        e->off = off;
    }
    if (s->active)
        sync_fd(s, s->active->fd);
    if (b->nlive == 0 && s->active != b)
        bucket_drop(s, b);
out:
    mc__free(buf);
    mc__free(list);
    return rc;
}

/* Frees space until need more bytes fit under the capacity. */
static int make_room(struct mc__bstore *s, uint64_t need) {
    while (s->used + need > s->opts.capacity) {
        struct mc__bucket *best = NULL;
        for (struct mc__bucket *b = s->buckets; b; b = b->next) {
            uint64_t dead = b->size - b->live;
            if (dead == 0 || s->used + b->live > s->opts.capacity)
                continue;
            if (!best || dead > best->size - best->live)
                best = b;
        }
        if (!best)
            return MC_ERR_NO_AVAILABLE_HANDLE;
        if (best->nlive == 0) {
            bucket_drop(s, best);
            continue;
        }
        int rc = compact_bucket(s, best);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* The arguments every call on a key takes: a store, and a key of 1..MC_BREC_MAX_KEY bytes. */
static int check_key(const struct mc__bstore *s, const char *key, size_t *klen) {
    if (!s)
        return MC_ERR_INVALID_PARAMS;
    if (!key)
        return MC_ERR_INVALID_KEY;
    *klen = strnlen(key, MC_BREC_MAX_KEY + 1);
    if (*klen == 0 || *klen > MC_BREC_MAX_KEY)
        return MC_ERR_INVALID_KEY;
    return 0;
}

/* After a put's write: synced now, or (nosync) left for mc__bstore_flush. */
static void put_sync(struct mc__bstore *s, struct mc__bucket *b, int sync) {
    if (sync)
        sync_fd(s, b->fd);
    else
        b->dirty = 1;
}

static int put_impl(struct mc__bstore *s, const char *key, const void *data, uint64_t len,
                    int sync);

int mc__bstore_put(struct mc__bstore *s, const char *key, const void *data, uint64_t len) {
    return put_impl(s, key, data, len, 1);
}

int mc__bstore_put_nosync(struct mc__bstore *s, const char *key, const void *data, uint64_t len) {
    return put_impl(s, key, data, len, 0);
}

int mc__bstore_flush(struct mc__bstore *s) {
    if (!s)
        return MC_ERR_INVALID_PARAMS;
    pthread_mutex_lock(&s->mu);
    for (struct mc__bucket *b = s->buckets; b; b = b->next) {
        if (b->dirty) {
            sync_fd(s, b->fd);
            b->dirty = 0;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return 0;
}

static int put_impl(struct mc__bstore *s, const char *key, const void *data, uint64_t len,
                    int sync) {
    size_t klen;
    int rc = check_key(s, key, &klen);
    if (rc != 0)
        return rc;
    if (!data && len > 0)
        return MC_ERR_INVALID_PARAMS;
    uint64_t rs = mc__brec_size(klen, len);
    if (len > s->opts.capacity || rs > s->opts.capacity ||
        (direct_rec(s, len) && align_up(rs) > s->opts.capacity))
        return MC_ERR_INVALID_PARAMS;
    pthread_mutex_lock(&s->mu);
    struct mc__bentry *old = mc__bindex_find(&s->ix, key, klen);
    uint64_t old_rs = old ? rec_size(old) : 0;
    uint64_t need = space_for(s, rs, len);
    if (s->live - old_rs + need > s->opts.capacity) {
        rc = MC_ERR_NO_AVAILABLE_HANDLE;
        goto out;
    }
    rc = make_room(s, need);
    old = mc__bindex_find(&s->ix, key, klen); /* a compaction may have dropped a corrupt copy */
    if (rc == MC_ERR_NO_AVAILABLE_HANDLE && old) {
        /* Only the old copy's space is in the way: give it up before the new one is written. */
        kill_entry(s, old);
        old = NULL;
        rc = make_room(s, space_for(s, rs, len));
    }
    if (rc != 0)
        goto out;
    struct mc__bucket *b;
    uint64_t off;
    uint32_t pad;
    rc = append(s, key, (uint32_t)klen, data, len, s->seq, &b, &off, &pad);
    if (rc != 0)
        goto out;
    put_sync(s, b, sync);
    struct mc__bentry *e = old;
    if (!old && !(e = mc__bindex_add(&s->ix, key, klen))) {
        mark_dead(s, b, off);
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    /* The new copy is counted before the old one is let go, so sharing a bucket with it
     * cannot make that bucket look empty. */
    b->live += rs + pad;
    b->nlive++;
    s->live += rs + pad;
    if (old) {
        mark_dead(s, old->b, old->off);
        put_sync(s, old->b, sync);
        unaccount(s, old);
    }
    e->b = b;
    e->off = off;
    e->pad = pad;
    e->value_len = len;
    e->seq = s->seq++;
    e->last_use = ++s->use;
    uint32_t crc = mc__crc32(0, key, klen);
    e->data_crc = mc__crc32(crc, data, (size_t)len);
out:
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* A copy of an index entry with its key: reads run outside the lock on a snapshot, with the
 * bucket pinned so that it stays open, while the entry itself may move or go. */
union bentry_snap {
    struct mc__bentry e;
    uint8_t bytes[sizeof(struct mc__bentry) + MC_BREC_MAX_KEY + 1];
};

/* With s->mu held: key's entry copied into snap and its bucket pinned (*b), for a read of at
 * most cap bytes; MC_ERR_OBJECT_NOT_FOUND or MC_ERR_BUFFER_OVERFLOW otherwise. *out_len (may be
 * NULL) gets the value's length whenever there is an entry. */
static int pin_entry(struct mc__bstore *s, const char *key, size_t klen, uint64_t cap,
                     uint64_t *out_len, union bentry_snap *snap, struct mc__bucket **b) {
    struct mc__bentry *e = mc__bindex_find(&s->ix, key, klen);
    if (!e)
        return MC_ERR_OBJECT_NOT_FOUND;
    if (out_len)
        *out_len = e->value_len;
    if (e->value_len > cap)
        return MC_ERR_BUFFER_OVERFLOW;
    memcpy(snap, e, sizeof *e + e->key_len + 1);
    *b = e->b;
    (*b)->pins++;
    return 0;
}

/* With s->mu held, after a read of snap from b: key's entry now (*e, NULL when gone), and 1 when
 * it is still the copy that was read (not overwritten, moved or removed meanwhile). */
static int still_indexed(struct mc__bstore *s, const char *key, size_t klen,
                         const struct mc__bucket *b, const union bentry_snap *snap,
                         struct mc__bentry **e) {
    *e = mc__bindex_find(&s->ix, key, klen);
    return *e && (*e)->b == b && (*e)->off == snap->e.off && (*e)->seq == snap->e.seq;
}

/* One read of the copy snap of key pinned in b, with s->mu not held: 0 or an error, and *no_retry
 * set when a failure must not be retried on the entry's newer copy. */
typedef int (*pinned_read_fn)(void *ctx, const struct mc__bucket *b, const struct mc__bentry *snap,
                              int *no_retry);

/* Reads key's indexed copy with fn, outside s->mu (the bucket pinned). A copy overwritten, moved
 * or removed while it was read is looked up and read again (up to 16 times) unless fn sets
 * no_retry; the indexed copy failing its checksum is on the disk and is deleted. */
static int read_indexed(struct mc__bstore *s, const char *key, size_t klen, uint64_t cap,
                        uint64_t *out_len, pinned_read_fn fn, void *ctx) {
    union bentry_snap snap;
    int rc;
    pthread_mutex_lock(&s->mu);
    for (int attempt = 0;; attempt++) {
        struct mc__bucket *b;
        struct mc__bentry *e;
        int no_retry = 0;
        rc = pin_entry(s, key, klen, cap, out_len, &snap, &b);
        if (rc != 0)
            break;
        pthread_mutex_unlock(&s->mu);
        rc = fn(ctx, b, &snap.e, &no_retry);
        pthread_mutex_lock(&s->mu);
        bucket_unpin(b);
        int same = still_indexed(s, key, klen, b, &snap, &e);
        if (rc == 0) {
            if (e)
                e->last_use = ++s->use;
            break;
        }
        if (same && rc == MC_ERR_CHECKSUM_MISMATCH) {
            /* The copy read is still the indexed one: what failed is on the disk. */
            MC_WARN("bucket store: an object failed its checksum on read: deleted");
            kill_entry(s, e);
            break;
        }
        if (same || no_retry)
            break;
        /* It was overwritten, moved or removed while it was read: look again. */
        if (attempt == 16) {
            rc = MC_ERR_INVALID_READ;
            break;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

struct get_read {
    void *buf, **own;
    const uint8_t **val;
};

static int get_read(void *ctx, const struct mc__bucket *b, const struct mc__bentry *snap,
                    int *no_retry) {
    struct get_read *g = ctx;
    uint8_t none;
    (void)no_retry;
    return read_verify(b, snap, snap->value_len ? g->buf : &none, g->own, g->val);
}

/* get and get_owned: into buf, or (own set) into a buffer of the store's. */
static int get_impl(struct mc__bstore *s, const char *key, void *buf, uint64_t cap,
                    uint64_t *out_len, void **own, const uint8_t **val) {
    size_t klen;
    int rc = check_key(s, key, &klen);
    if (rc != 0)
        return rc;
    if (!own && !buf && cap > 0)
        return MC_ERR_INVALID_PARAMS;
    struct get_read g = {buf, own, val};
    return read_indexed(s, key, klen, cap, out_len, get_read, &g);
}

int mc__bstore_get(struct mc__bstore *s, const char *key, void *buf, uint64_t cap,
                   uint64_t *out_len) {
    return get_impl(s, key, buf, cap, out_len, NULL, NULL);
}

int mc__bstore_get_owned(struct mc__bstore *s, const char *key, uint64_t cap, void **own,
                         const uint8_t **val, uint64_t *out_len) {
    if (!own || !val)
        return MC_ERR_INVALID_PARAMS;
    *own = NULL;
    *val = NULL;
    return get_impl(s, key, NULL, cap, out_len, own, val);
}

/* --- streamed gets ------------------------------------------------------------------------------
 */

/* A value is read in chunks of STREAM_CHUNK with up to STREAM_DEPTH of them in flight: a 1 MiB
 * value is one burst of reads the device serves together, and its first chunk is checksummed and
 * sent while the rest are still on their way. On the build host's virtual disk, with the node's
 * send to a reader in the loop, 4 x 256 KiB and 8 x 128 KiB did about equally (a 1 MiB value in
 * 1.2x the time of one bare 1 MiB O_DIRECT pread), 2 in flight of any size worse, and one 1 MiB
 * read (no overlap) 1.7x: what counts is the whole value in flight at once. */
#define STREAM_CHUNK MC_BSTORE_STREAM_CHUNK
#define STREAM_DEPTH 4u
#define STREAM_SLOT (STREAM_CHUNK + MC_BREC_ALIGN) /* a chunk and room after it (the slack) */

/* Read-ahead: after two records read back to back from one bucket (the next one starting
 * where the last ended, as objects read in the order they were offloaded do), the region a record
 * of the same size would take right after it is read while the answer travels and the client
 * asks its master for the next key. A small value's get is then one device read's time rather
 * than that plus both round trips (64 KiB gets ran at 0.5x a plain O_DIRECT dd, one reader;
 * docs/perf/issue26-speed.md). Records of one chunk at most; the prefetched bytes are used once,
 * and only after the record's header and checksum match (otherwise it is read again). Two slots
 * take turns: the read ahead of the next record goes into one while the record in the other is
 * checked and sent, so the device reads while we serve (one slot left the device idle for the
 * send and the CRC: 64 KiB gets at 0.6-0.7x dd, p50 130-150 us against dd's ~100). */
#define RA_TAG UINT64_MAX

struct mc__bstore_reader {
    struct mc__dio *io;
    void *raw;
    uint8_t *buf[STREAM_DEPTH];
    uint8_t *ra_slot[2]; /* the read-ahead slots (STREAM_SLOT bytes each) */
    uint8_t *ra;         /* the one in use: ra_slot[0] or [1] */
    int ra_busy;         /* its read is in flight */
    int ra_have;         /* the slot holds (or is reading) ra_bid's [ra_off, +ra_len) */
    uint32_t ra_bid;
    uint64_t ra_off; /* its file range */
    uint64_t ra_len;
    int64_t ra_got;    /* its result once done */
    uint32_t last_bid; /* the last direct record streamed: its bucket and aligned end */
    uint64_t last_end;
    int last_set;
    uint64_t ra_used; /* records streamed out of the read-ahead slot */
};

int mc__bstore_reader_open(struct mc__bstore_reader **out) {
    if (!out)
        return MC_ERR_INVALID_PARAMS;
    *out = NULL;
    struct mc__bstore_reader *r = mc__calloc(1, sizeof *r);
    if (!r)
        return MC_ERR_INTERNAL_ERROR;
    r->raw = mc__malloc((size_t)(STREAM_DEPTH + 2) * STREAM_SLOT + MC_BREC_ALIGN);
    int rc = r->raw ? mc__dio_open(STREAM_DEPTH + 1, &r->io) : MC_ERR_INTERNAL_ERROR;
    if (rc != 0) {
        mc__bstore_reader_close(r);
        return rc;
    }
    uint8_t *base =
        (uint8_t *)(((uintptr_t)r->raw + MC_BREC_ALIGN - 1) & ~(uintptr_t)(MC_BREC_ALIGN - 1));
    for (unsigned i = 0; i < STREAM_DEPTH; i++)
        r->buf[i] = base + (size_t)i * STREAM_SLOT;
    r->ra_slot[0] = base + (size_t)STREAM_DEPTH * STREAM_SLOT;
    r->ra_slot[1] = base + (size_t)(STREAM_DEPTH + 1) * STREAM_SLOT;
    r->ra = r->ra_slot[0];
    *out = r;
    return 0;
}

void mc__bstore_reader_close(struct mc__bstore_reader *r) {
    if (!r)
        return;
    mc__dio_close(r->io); /* waits for reads still in flight into r->raw */
    mc__free(r->raw);
    mc__free(r);
}

const char *mc__bstore_reader_mode(const struct mc__bstore_reader *r) {
    return r ? mc__dio_mode(r->io) : "";
}

uint64_t mc__bstore_reader_ahead_used(const struct mc__bstore_reader *r) {
    return r ? r->ra_used : 0;
}

/* A read that returned got of the want bytes asked for, need of which matter (the rest is
 * alignment past the record, possibly past the file's end): 0 once need bytes are in. */
static int read_rest(int fd, uint8_t *buf, uint64_t off, int64_t got, size_t want, size_t need) {
    if (got < 0)
        return -1;
    size_t have = (size_t)got;
    while (have < need) {
        ssize_t n = pread(fd, buf + have, want - have, (off_t)(off + have));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        have += (size_t)n;
    }
    return 0;
}

struct stream_state {
    struct mc__bstore_reader *r;
    int fd;
    uint64_t start, end; /* the file range read: the record, aligned out for O_DIRECT */
    uint64_t nchunks, next;
};

static int stream_submit(struct stream_state *st) {
    uint64_t k = st->next++;
    uint64_t cs = st->start + k * STREAM_CHUNK;
    uint64_t ce = cs + STREAM_CHUNK < st->end ? cs + STREAM_CHUNK : st->end;
    return mc__dio_read(st->r->io, st->fd, st->r->buf[k % STREAM_DEPTH], (size_t)(ce - cs), cs, k);
}

/* Waits for one read of r's context; the read-ahead's completion is noted in r and reported
 * with its tag like any other. */
static int stream_reap(struct mc__bstore_reader *r, uint64_t *tag, int64_t *res) {
    if (mc__dio_reap(r->io, tag, res) != 0)
        return -1;
    if (*tag == RA_TAG) {
        r->ra_busy = 0;
        r->ra_got = *res;
    }
    return 0;
}

static void stream_read_ahead(struct mc__bstore_reader *r, int dfd, uint32_t bid, uint64_t start,
                              uint64_t end);

/* Streams e's record (the file range [start, end) of bucket b) out of the read-ahead slot: 0 or
 * the sink's code once handed over, 1 when the slot does not hold it whole and intact (nothing was
 * handed over: read it from the disk). The slot is used up either way; once it checks out, the
 * next read-ahead goes into the other slot before this record is sent. */
static int stream_from_ra(struct mc__bstore_reader *r, const struct mc__bucket *b,
                          const struct mc__bentry *e, uint64_t start, uint64_t end,
                          const struct mc__bstore_sink *sink, int *begun) {
    uint64_t tag;
    int64_t res;
    uint64_t rec_end = e->off + MC_BREC_HDR + e->key_len + e->value_len;
    while (r->ra_busy)
        if (stream_reap(r, &tag, &res) != 0)
            return 1;
    r->ra_have = 0;
    if (r->ra_got < 0 || (uint64_t)r->ra_got < rec_end - r->ra_off)
        return 1;
    uint8_t *rec = r->ra + (e->off - r->ra_off);
    uint8_t *vp = rec + MC_BREC_HDR + e->key_len;
    /* The next read goes to the device before this record is checked: the check (a CRC of the
     * whole value) and the send then overlap it, where issued after the check it added the
     * CRC's time to every get of a sequential reader (docs/perf/issue26-spin150). A record that
     * fails its check is read again by the caller; the read ahead stays in flight and is
     * dropped unused, but this record still counts as the one before the next on the disk. */
    r->ra = r->ra == r->ra_slot[0] ? r->ra_slot[1] : r->ra_slot[0]; /* rec stays where it is */
    stream_read_ahead(r, b->dfd, b->id, start, end);
    if (!head_matches(rec, e) ||
        mc__crc32(mc__crc32(0, e->key, e->key_len), vp, (size_t)e->value_len) != e->data_crc)
        return 1;
    *begun = 1;
    r->ra_used++;
    int rc = sink->begin(sink->ctx, e->value_len);
    if (rc == 0)
        rc = sink->chunk(sink->ctx, vp, (size_t)e->value_len, 1, 0);
    return rc;
}

/* After a direct record of one chunk at [start, end) of bucket bid: when it followed the one
 * before it on the disk, reads the next region of its size ahead (ring mode only: without a ring
 * the read would hold up this answer). */
static void stream_read_ahead(struct mc__bstore_reader *r, int dfd, uint32_t bid, uint64_t start,
                              uint64_t end) {
    int sequential = r->last_set && r->last_bid == bid && r->last_end == start;
    r->last_set = 1;
    r->last_bid = bid;
    r->last_end = end;
    if (!sequential || r->ra_busy || !mc__dio_uring(r->io))
        return;
    if (mc__dio_read(r->io, dfd, r->ra, (size_t)(end - start), end, RA_TAG) != 0)
        return;
    r->ra_busy = 1;
    r->ra_have = 1;
    r->ra_bid = bid;
    r->ra_off = end;
    r->ra_len = end - start;
    r->ra_got = -1;
}

/* Streams e's record of b to sink (see mc__bstore_get_stream); *begun says whether begin was
 * called. 1: the O_DIRECT read was refused before anything was handed over (read buffered). */
static int stream_record(struct mc__bstore_reader *r, const struct mc__bucket *b,
                         const struct mc__bentry *e, int direct, const struct mc__bstore_sink *sink,
                         int *begun) {
    struct stream_state st = {.r = r, .fd = direct ? b->dfd : b->fd};
    uint64_t rec_end = e->off + MC_BREC_HDR + e->key_len + e->value_len;
    uint64_t val_start = e->off + MC_BREC_HDR + e->key_len;
    st.start = direct ? e->off & ~(uint64_t)(MC_BREC_ALIGN - 1) : e->off;
    st.end = direct ? align_up(rec_end) : rec_end;
    st.nchunks = (st.end - st.start + STREAM_CHUNK - 1) / STREAM_CHUNK;
    int have[STREAM_DEPTH] = {0};
    int64_t got[STREAM_DEPTH];
    uint32_t crc = mc__crc32(0, e->key, e->key_len);
    int rc = 0;
    if (direct && st.nchunks == 1 && r->ra_have && r->ra_bid == b->id && st.start >= r->ra_off &&
        st.end <= r->ra_off + r->ra_len) {
        rc = stream_from_ra(r, b, e, st.start, st.end, sink, begun);
        if (rc != 1)
            return rc;
        rc = 0;
    }
    r->ra_have = 0; /* not this record's: whatever it holds is of no use now */
    while (rc == 0 && st.next < st.nchunks && st.next < STREAM_DEPTH)
        rc = stream_submit(&st);
    for (uint64_t k = 0; rc == 0 && k < st.nchunks; k++) {
        unsigned slot = (unsigned)(k % STREAM_DEPTH);
        while (!have[slot]) {
            uint64_t tag;
            int64_t res;
            if (stream_reap(r, &tag, &res) != 0) {
                rc = MC_ERR_INVALID_READ;
                goto out;
            }
            if (tag == RA_TAG)
                continue;
            have[tag % STREAM_DEPTH] = 1;
            got[tag % STREAM_DEPTH] = res;
        }
        have[slot] = 0;
        uint8_t *p = r->buf[slot];
        uint64_t cs = st.start + k * STREAM_CHUNK;
        uint64_t ce = cs + STREAM_CHUNK < st.end ? cs + STREAM_CHUNK : st.end;
        uint64_t ve = ce < rec_end ? ce : rec_end;
        if (got[slot] == -EINVAL && direct && !*begun) {
            rc = 1;
            goto out;
        }
        if (read_rest(st.fd, p, cs, got[slot], (size_t)(ce - cs), (size_t)(ve - cs)) != 0) {
            rc = MC_ERR_INVALID_READ;
            goto out;
        }
        if (k == 0) {
            if (!head_matches(p + (e->off - cs), e)) {
                rc = MC_ERR_CHECKSUM_MISMATCH;
                goto out;
            }
            *begun = 1;
            rc = sink->begin(sink->ctx, e->value_len);
            if (rc != 0)
                goto out;
        }
        uint64_t vs = cs > val_start ? cs : val_start;
        size_t n = ve > vs ? (size_t)(ve - vs) : 0;
        uint8_t *vp = p + (vs - cs);
        crc = mc__crc32(crc, vp, n);
        int last = k + 1 == st.nchunks;
        int verdict = last && crc != e->data_crc ? MC_ERR_CHECKSUM_MISMATCH : 0;
        rc = sink->chunk(sink->ctx, vp, n, last, verdict);
        if (rc == 0)
            rc = verdict;
        /* This slot's buffer is free again: the next chunk goes into it. */
        if (rc == 0 && st.next < st.nchunks)
            rc = stream_submit(&st);
    }
out:
    /* the chunks' reads still in flight (a read-ahead may stay in flight) */
    while (mc__dio_inflight(r->io) > (unsigned)r->ra_busy) {
        uint64_t tag;
        int64_t res;
        if (stream_reap(r, &tag, &res) != 0)
            break;
    }
    if (rc == 0 && direct && st.nchunks == 1)
        stream_read_ahead(r, b->dfd, b->id, st.start, st.end);
    return rc;
}

struct stream_read {
    struct mc__bstore_reader *r;
    const struct mc__bstore_sink *sink;
    int begun;
};

static int stream_read(void *ctx, const struct mc__bucket *b, const struct mc__bentry *snap,
                       int *no_retry) {
    struct stream_read *st = ctx;
    int direct = b->dfd >= 0 && snap->value_len >= DIRECT_MIN;
    int rc = stream_record(st->r, b, snap, direct, st->sink, &st->begun);
    if (rc == 1)
        rc = stream_record(st->r, b, snap, 0, st->sink, &st->begun);
    /* Once handed over, or failing other than as a record that moved: nothing to retry. */
    *no_retry = st->begun || rc != MC_ERR_CHECKSUM_MISMATCH;
    return rc;
}

int mc__bstore_get_stream(struct mc__bstore *s, struct mc__bstore_reader *r, const char *key,
                          uint64_t cap, const struct mc__bstore_sink *sink, uint64_t *out_len) {
    size_t klen;
    if (!s || !r || !sink || !sink->begin || !sink->chunk)
        return MC_ERR_INVALID_PARAMS;
    int rc = check_key(s, key, &klen);
    if (rc != 0)
        return rc;
    struct stream_read st = {r, sink, 0};
    return read_indexed(s, key, klen, cap, out_len, stream_read, &st);
}

/* size and remove: key's entry looked up under s->mu, then its length read (out_len) or, without
 * out_len, the entry removed. */
static int entry_op(struct mc__bstore *s, const char *key, uint64_t *out_len) {
    size_t klen;
    int rc = check_key(s, key, &klen);
    if (rc != 0)
        return rc;
    pthread_mutex_lock(&s->mu);
    struct mc__bentry *e = mc__bindex_find(&s->ix, key, klen);
    if (e && out_len)
        *out_len = e->value_len;
    else if (e)
        kill_entry(s, e);
    pthread_mutex_unlock(&s->mu);
    return e ? 0 : MC_ERR_OBJECT_NOT_FOUND;
}

int mc__bstore_size(struct mc__bstore *s, const char *key, uint64_t *out_len) {
    return out_len ? entry_op(s, key, out_len) : MC_ERR_INVALID_PARAMS;
}

int mc__bstore_remove(struct mc__bstore *s, const char *key) {
    return entry_op(s, key, NULL);
}

int mc__bstore_compact(struct mc__bstore *s) {
    if (!s)
        return MC_ERR_INVALID_PARAMS;
    int rc = 0;
    pthread_mutex_lock(&s->mu);
    for (int again = 1; again && rc == 0;) {
        again = 0;
        for (struct mc__bucket *b = s->buckets; b; b = b->next) {
            uint64_t dead = b->size - b->live;
            if (b == s->active || dead == 0 || dead < b->size / 2 ||
                s->used + b->live > s->opts.capacity)
                continue;
            rc = compact_bucket(s, b); /* the list changed: walk it again */
            again = 1;
            break;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

#define GETTER(name, expr)                                                                         \
    uint64_t mc__bstore_##name(struct mc__bstore *s) {                                             \
        if (!s)                                                                                    \
            return 0;                                                                              \
        pthread_mutex_lock(&s->mu);                                                                \
        uint64_t v = (expr);                                                                       \
        pthread_mutex_unlock(&s->mu);                                                              \
        return v;                                                                                  \
    }
GETTER(used, s->used)
GETTER(live, s->live)
GETTER(count, (uint64_t)s->ix.count)
GETTER(capacity, s->opts.capacity)
GETTER(damaged, s->damaged)
GETTER(damaged_bytes, s->damaged_bytes)
#undef GETTER

int mc__bstore_coldest(struct mc__bstore *s, char *key, size_t cap, uint64_t *value_len) {
    struct mc__bentry *best = NULL;
    int rc = MC_ERR_OBJECT_NOT_FOUND;
    if (!s || !key || !value_len)
        return MC_ERR_INVALID_PARAMS;
    pthread_mutex_lock(&s->mu);
    struct mc__bindex_iter it = {0};
    for (struct mc__bentry *e; (e = mc__bindex_next(&s->ix, &it)) != NULL;)
        if (!best || e->last_use < best->last_use)
            best = e;
    if (best && best->key_len + 1 > cap) {
        rc = MC_ERR_BUFFER_OVERFLOW;
    } else if (best) {
        memcpy(key, best->key, best->key_len + 1);
        *value_len = best->value_len;
        rc = 0;
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int mc__bstore_foreach(struct mc__bstore *s, mc__bstore_key_fn fn, void *ctx) {
    if (!s || !fn)
        return MC_ERR_INVALID_PARAMS;
    int rc = 0;
    pthread_mutex_lock(&s->mu);
    struct mc__bindex_iter it = {0};
    for (struct mc__bentry *e; rc == 0 && (e = mc__bindex_next(&s->ix, &it)) != NULL;)
        rc = fn(ctx, e->key, e->value_len);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* --- open and rescan -------------------------------------------------------------------------- */

#define SCAN_NOMEM 1

struct scan_ctx {
    struct mc__bstore *s;
    struct mc__bucket *b;
    uint64_t max_seq;
    uint64_t dropped;
    uint64_t spans;      /* damaged spans in this bucket, for its one log line */
    uint64_t span_bytes; /* their bytes */
    char where[128];     /* the first few as " offset+length" */
};

static int scan_read(void *ctx, uint64_t off, void *buf, size_t len) {
    return pread_full(((struct scan_ctx *)ctx)->b->fd, off, buf, len);
}

/* A damaged span: counted, and a dead header written over the damage that covers the span
 * exactly, so the next rescan steps over it as over any dead record (and never has to resync
 * there again). Its bytes are dead space, which compaction reclaims. Best effort: a failed write
 * leaves the damage, found the same way next time. */
static void note_damage(struct scan_ctx *c, uint64_t off, const struct mc__brec *r) {
    c->spans++;
    c->span_bytes += r->span;
    size_t n = strlen(c->where);
    if (c->spans <= 4)
        snprintf(c->where + n, sizeof c->where - n, " %" PRIu64 "+%" PRIu64, off, r->span);
    else if (c->spans == 5)
        snprintf(c->where + n, sizeof c->where - n, " ...");
    if (r->key_len == 0)
        return; /* too short to hold a header: left as it is */
    uint8_t h[MC_BREC_HDR];
    mc__brec_encode(r, h);
    if (pwrite(c->b->fd, h, sizeof h, (off_t)off) != (ssize_t)sizeof h)
        MC_WARN("bucket store: mark a damaged span dead in bucket %" PRIu32 ": %s", c->b->id,
                strerror(errno));
}

static int scan_visit(void *ctx, uint64_t off, const struct mc__brec *r, const char *key,
                      enum mc__brec_verdict v) {
    struct scan_ctx *c = ctx;
    struct mc__bstore *s = c->s;
    /* Every verified header's seq counts, dead ones too: a copy whose dead mark was lost can
     * never outrank a later write. */
    if (r->seq >= c->max_seq && r->seq < UINT64_MAX)
        c->max_seq = r->seq + 1;
    if (v == MC_BREC_DEADREC)
        return 0;
    if (v == MC_BREC_DAMAGED) {
        note_damage(c, off, r);
        return 0;
    }
    if (v == MC_BREC_BADCRC) {
        c->dropped++;
        mark_dead(s, c->b, off);
        return 0;
    }
    uint64_t rs = mc__brec_size(r->key_len, r->value_len) + r->pad;
    struct mc__bentry *e = mc__bindex_find(&s->ix, key, r->key_len);
    if (e && e->seq >= r->seq) {
        mark_dead(s, c->b, off); /* an older copy, or a duplicate left by a compaction */
        return 0;
    }
    if (e) {
        mark_dead(s, e->b, e->off);
        struct mc__bucket *ob = e->b;
        ob->live -= rec_size(e);
        ob->nlive--;
        s->live -= rec_size(e);
    } else if (!(e = mc__bindex_add(&s->ix, key, r->key_len))) {
        return SCAN_NOMEM; /* not -1: the scanner's own read error */
    }
    e->b = c->b;
    e->off = off;
    e->pad = r->pad;
    e->value_len = r->value_len;
    e->seq = r->seq;
    e->last_use = r->seq;
    e->data_crc = r->data_crc;
    c->b->live += rs;
    c->b->nlive++;
    s->live += rs;
    return 0;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Bucket ids in dir, ascending. */
static int list_buckets(struct mc__bstore *s, uint32_t **out, size_t *n) {
    int fd = dup(s->dirfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return MC_ERR_INTERNAL_ERROR;
    }
    uint32_t *ids = NULL;
    size_t cnt = 0, cap = 0;
    int rc = 0;
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        uint32_t id;
        if (!parse_bucket_name(de->d_name, &id))
            continue;
        uint32_t *n2 = mc__array_grow(ids, cnt, &cap, sizeof *ids, 16);
        if (!n2) {
            rc = MC_ERR_INTERNAL_ERROR;
            break;
        }
        ids = n2;
        ids[cnt++] = id;
    }
    closedir(d);
    if (rc != 0) {
        mc__free(ids);
        return rc;
    }
    if (cnt)
        qsort(ids, cnt, sizeof *ids, cmp_u32);
    *out = ids;
    *n = cnt;
    return 0;
}

static int rescan(struct mc__bstore *s) {
    uint32_t *ids = NULL;
    size_t n = 0;
    uint8_t *scratch = NULL;
    int rc = list_buckets(s, &ids, &n);
    if (rc != 0)
        return rc;
    scratch = mc__malloc(SCRATCH_LEN);
    if (!scratch) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    struct scan_ctx c = {.s = s};
    struct mc__bucket *last = NULL;
    for (size_t i = 0; i < n; i++) {
        char name[32];
        bucket_name(ids[i], name);
        int fd = openat(s->dirfd, name, O_RDWR | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) != 0) {
            MC_ERROR("bucket store: open %s: %s", name, strerror(errno));
            if (fd >= 0)
                close(fd);
            rc = MC_ERR_INTERNAL_ERROR;
            goto out;
        }
        struct mc__bucket *b = bucket_new(s, ids[i], fd, (uint64_t)st.st_size);
        if (!b) {
            close(fd);
            rc = MC_ERR_INTERNAL_ERROR;
            goto out;
        }
        c.b = b;
        c.spans = c.span_bytes = 0;
        c.where[0] = '\0';
        uint64_t end = 0;
        rc = mc__brec_scan(scan_read, &c, b->size, scratch, SCRATCH_LEN, scan_visit, &c, &end);
        if (rc != 0) {
            rc = rc == SCAN_NOMEM ? MC_ERR_INTERNAL_ERROR : MC_ERR_INVALID_READ;
            goto out;
        }
        if (c.spans) {
            MC_WARN("bucket store: %s: %" PRIu64 " damaged span(s) of %" PRIu64
                    " bytes skipped (offset+length:%s); the records after them kept",
                    name, c.spans, c.span_bytes, c.where);
            s->damaged += c.spans;
            s->damaged_bytes += c.span_bytes;
        }
        if (end < b->size) {
            MC_WARN("bucket store: %s: %" PRIu64 " torn or unreadable bytes at %" PRIu64
                    ": cut off",
                    name, b->size - end, end);
            if (ftruncate(fd, (off_t)end) != 0) {
                rc = MC_ERR_WRITE_FAIL;
                goto out;
            }
            s->used -= b->size - end;
            b->size = end;
        }
        sync_fd(s, fd);
        if (ids[i] >= s->next_id)
            s->next_id = ids[i] + 1;
        last = b;
    }
    if (c.dropped)
        MC_WARN("bucket store: %" PRIu64 " objects failed their checksum on rescan: dropped",
                c.dropped);
    s->seq = c.max_seq > s->seq ? c.max_seq : s->seq;
    s->use = s->seq;
    /* The newest bucket keeps taking appends while it has room; the rest are sealed. A bucket
     * with nothing live goes now (the active one is cut back to empty). */
    if (last && last->size < s->opts.bucket_size)
        s->active = last;
    for (struct mc__bucket *b = s->buckets, *next; b; b = next) {
        next = b->next;
        if (b->nlive == 0 && (b != s->active || b->size > 0))
            bucket_emptied(s, b);
    }
out:
    mc__free(scratch);
    mc__free(ids);
    return rc;
}

/* Whether the store in dirfd writes with O_DIRECT: 1, or 0 with *why saying what refused it.
 * Asked once per store, of its LOCK file. tmpfs refuses the open with EINVAL before Linux 6.6
 * and takes it since; with no device under it, O_DIRECT only adds the staging copy, so tmpfs
 * (and ramfs) stay buffered either way. */
static int probe_direct(int dirfd, const char **why) {
    struct statfs sf;
    if (fstatfs(dirfd, &sf) == 0 && (sf.f_type == TMPFS_MAGIC || sf.f_type == RAMFS_MAGIC)) {
        *why = "memory file system: no device to bypass the page cache for";
        return 0;
    }
    *why = "the file system refuses O_DIRECT";
    int fd = openat(dirfd, "LOCK", O_RDONLY | O_DIRECT | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int ok = 1;
#ifdef STATX_DIOALIGN
    /* Kernels that say what alignment direct I/O needs (6.1+): more than ours is refused. */
    struct statx sx;
    if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 && (sx.stx_mask & STATX_DIOALIGN))
        ok = sx.stx_dio_offset_align != 0 && sx.stx_dio_offset_align <= MC_BREC_ALIGN &&
             sx.stx_dio_mem_align <= MC_BREC_ALIGN;
#endif
    close(fd);
    return ok;
}

void mc__bstore_describe(struct mc__bstore *s, char *out, size_t cap) {
    if (!out || cap == 0)
        return;
    if (!s)
        *out = '\0';
    else if (s->direct)
        snprintf(out, cap,
                 "O_DIRECT writes and reads of values of %u KiB and more, records padded to %u "
                 "bytes; writes through %s",
                 DIRECT_MIN >> 10, MC_BREC_ALIGN, mc__dio_mode(s->wio));
    else
        snprintf(out, cap, "buffered writes and reads (%s)", s->why);
}

int mc__bstore_direct(struct mc__bstore *s) {
    return s ? s->direct : 0;
}

const char *mc__bstore_io_mode(struct mc__bstore *s) {
    return s ? mc__dio_mode(s->wio) : "";
}

int mc__bstore_open_ex(const char *dir, const struct mc__bstore_opts *opts,
                       struct mc__bstore **out) {
    if (!dir || !*dir || !opts || !out || opts->capacity == 0)
        return MC_ERR_INVALID_PARAMS;
    *out = NULL;
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        MC_ERROR("bucket store: mkdir %s: %s", dir, strerror(errno));
        return errno == ENOENT ? MC_ERR_FILE_NOT_FOUND : MC_ERR_INTERNAL_ERROR;
    }
    struct mc__bstore *s = mc__calloc(1, sizeof *s);
    if (!s)
        return MC_ERR_INTERNAL_ERROR;
    int rc = 0;
    s->dirfd = -1;
    s->lockfd = -1;
    s->opts = *opts;
    if (!s->opts.bucket_size)
        s->opts.bucket_size = MC_BSTORE_DEFAULT_BUCKET;
    /* Compaction copies a bucket's live records before it unlinks the bucket, under the same
     * limit: buckets well below the capacity keep that headroom small. */
    if (s->opts.bucket_size > opts->capacity / 8)
        s->opts.bucket_size = opts->capacity / 8 > 4096 ? opts->capacity / 8 : 4096;
    s->seq = 1;
    s->direct = !opts->no_direct;
    pthread_mutex_init(&s->mu, NULL);
    if (mc__bindex_init(&s->ix) != 0) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    s->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s->dirfd < 0) {
        MC_ERROR("bucket store: open %s: %s", dir, strerror(errno));
        rc = errno == ENOENT || errno == ENOTDIR ? MC_ERR_FILE_NOT_FOUND : MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    s->lockfd = openat(s->dirfd, "LOCK", O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (s->lockfd < 0) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    if (flock(s->lockfd, LOCK_EX | LOCK_NB) != 0) {
        MC_ERROR("bucket store: %s is held by another store", dir);
        rc = MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS;
        goto out;
    }
    const char *why = "O_DIRECT turned off";
    if (s->direct)
        s->direct = probe_direct(s->dirfd, &why);
    rc = mc__dio_open(2, &s->wio);
    if (rc != 0)
        goto out;
    s->why = why;
    char mode[160];
    mc__bstore_describe(s, mode, sizeof mode);
    MC_INFO("bucket store: %s: %s", dir, mode);
    rc = rescan(s);
out:
    if (rc != 0) {
        mc__bstore_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

int mc__bstore_open(const char *dir, uint64_t capacity, struct mc__bstore **out) {
    struct mc__bstore_opts o = {.capacity = capacity};
    return mc__bstore_open_ex(dir, &o, out);
}

void mc__bstore_close(struct mc__bstore *s) {
    if (!s)
        return;
    for (struct mc__bucket *b = s->buckets, *next; b; b = next) {
        next = b->next;
        sync_fd(s, b->fd);
        bucket_close(b);
    }
    mc__bindex_free(&s->ix);
    mc__dio_close(s->wio);
    mc__free(s->stage_raw);
    if (s->lockfd >= 0)
        close(s->lockfd); /* releases the flock */
    if (s->dirfd >= 0)
        close(s->dirfd);
    pthread_mutex_destroy(&s->mu);
    mc__free(s);
}
