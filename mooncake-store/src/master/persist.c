/* The master's local log: emitters, group commit, and opening (with replay and compaction); see
 * persist.h. */
#include "master/persist.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "master/master_internal.h"
#include "master/persist_etcd.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/crc32.h"
#include "mooncake/common/log.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"

/* HA: group commits in flight to etcd at once. One at a time bounds a leader to one etcd round
 * trip per commit; a few in flight let etcd batch them (their entries are written side by side
 * and acknowledged in order). */
#define MC__ELOG_INFLIGHT 4

struct mc__persist {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int fd;
    int dir_fd;
    mc_buf_t pending;   /* records not written yet */
    uint64_t appended;  /* bytes of records emitted in all */
    uint64_t synced;    /* of those, bytes on disk */
    int syncing;        /* a thread is writing and syncing */
    uint64_t off;       /* where the next records go in the file */
    uint64_t zeroed;    /* the file is written with zeros up to here (see mc__log_write) */
    uint64_t compacted; /* the file's size when it was last compacted */
    /* While the monitor rewrites the log (mc__persist_maybe_compact), every record emitted is
     * also kept here, to follow the snapshot in the new file. */
    int rewriting;
    mc_buf_t redo;
    /* HA: the log is in etcd (persist_etcd.h) instead of fd; a commit that cannot record makes
     * the log dead: nothing is acknowledged from then on, and the leader gives up its term. */
    mc__elog_t *elog;
    int dead;
    int installing; /* a snapshot is being written to etcd (no redo: see compact_etcd) */
    int marking;    /* a snapshot waits for the commits in flight to end: start no new one */
    /* Commits in flight to etcd, oldest first (a ring): each acknowledges its records (synced
     * moves to its upto) only once every older one has been written. */
    struct {
        uint64_t upto;
        int done, ok;
    } batch[MC__ELOG_INFLIGHT];
    unsigned b_head, b_count;
    mc__persist_state_t state; /* replay and dump, from lifecycle */
};

/* The log is rewritten from the state once it is this much larger than after the last rewrite
 * (and at least --metadata_log_compact_bytes): a long-running master's log stays a few times the
 * size of its state. */
#define MC__COMPACT_GROWTH 4u

/* The log's tail is written with zeros ahead of the records, MC__LOG_AHEAD at a time: a record
 * then lands inside the file's size, so the fdatasync that makes it durable flushes the data
 * only, not the file system's metadata (an append would change the size, and on ext4 a
 * preallocated range would need its extents converted: both cost a journal commit per sync).
 * The replay ends at the first record whose length is 0. */
#define MC__LOG_AHEAD (16ull << 20)

void mc__persist_record_begin(mc_buf_t *b, size_t *at) {
    *at = b->len;
    mc__buf_u32(b, 0); /* length and checksum, filled in by end */
    mc__buf_u32(b, 0);
}

void mc__persist_record_end(mc_buf_t *b, size_t at) {
    size_t body = b->len - at - 8;
    uint32_t len = (uint32_t)body, sum;
    if (b->failed)
        return;
    sum = mc__crc32(0, b->data + at + 8, body);
    for (int i = 0; i < 4; i++) { /* little-endian, as every integer of the log */
        b->data[at + i] = (uint8_t)(len >> (8 * i));
        b->data[at + 4 + i] = (uint8_t)(sum >> (8 * i));
    }
}

/* Emitting: a record is built in a buffer of its own (looking up what it needs, under whatever
 * locks the caller holds), then appended under the log's lock, which is therefore a leaf: it is
 * never held while another lock is taken. */
static void mc__append(mc__master_t *m, mc_buf_t *rec) {
    mc__persist_t *p = m->persist;
    pthread_mutex_lock(&p->mu);
    if (rec->failed)
        p->pending.failed = 1; /* the next commit stops the master: this change is unrecorded */
    else
        mc__buf_put(&p->pending, rec->data, rec->len);
    if (p->rewriting && !rec->failed)
        mc__buf_put(&p->redo, rec->data, rec->len);
    p->appended += rec->failed ? 1 : rec->len; /* a failed one still needs a commit to stop */
    pthread_mutex_unlock(&p->mu);
    mc__buf_free(rec);
}

#define MC__EMIT(m, body)                                                                          \
    do {                                                                                           \
        mc_buf_t rec_;                                                                             \
        size_t at_ = 0;                                                                            \
        if (!(m)->persist)                                                                         \
            break;                                                                                 \
        mc__buf_init(&rec_);                                                                       \
        mc__persist_record_begin(&rec_, &at_);                                                     \
        {                                                                                          \
            mc_buf_t *b = &rec_;                                                                   \
            body;                                                                                  \
        }                                                                                          \
        mc__persist_record_end(&rec_, at_);                                                        \
        mc__append((m), &rec_);                                                                    \
    } while (0)

/* Record bodies, shared by the emitters and the dump of a compaction (restore.c). */
void mc__persist_put_seg(mc_buf_t *b, const mc__segment_t *seg) {
    mc__buf_u8(b, MC__R_SEG_MOUNT);
    mc__buf_u64(b, seg->serial);
    mc__buf_bytes(b, seg->name, seg->name_len);
    mc__buf_u64(b, seg->base);
    mc__buf_u64(b, seg->size);
    mc__buf_u64(b, seg->epoch);
    mc__buf_put(b, seg->owner, MC_MP_CLIENT_ID_LEN);
}

void mc__persist_put_alloc(mc_buf_t *b, uint64_t serial, uint64_t off, uint64_t len) {
    mc__buf_u8(b, MC__R_ALLOC);
    mc__buf_u64(b, serial);
    mc__buf_u64(b, off);
    mc__buf_u64(b, len);
}

void mc__persist_seg_mount(mc__master_t *m, const mc__segment_t *seg) {
    MC__EMIT(m, mc__persist_put_seg(b, seg));
}

void mc__persist_seg_drop(mc__master_t *m, const mc__segment_t *seg) {
    MC__EMIT(m, {
        mc__buf_u8(b, MC__R_SEG_DROP);
        mc__buf_u64(b, seg->serial);
    });
}

void mc__persist_alloc(mc__master_t *m, const mc__segment_t *seg, uint64_t off, uint64_t len) {
    MC__EMIT(m, mc__persist_put_alloc(b, seg->serial, off, len));
}

void mc__persist_free(mc__master_t *m, const mc__segment_t *seg, uint64_t off) {
    MC__EMIT(m, {
        mc__buf_u8(b, MC__R_FREE);
        mc__buf_u64(b, seg->serial);
        mc__buf_u64(b, off);
    });
}

/* The registry read lock is taken for the replicas' serials; a replica whose segment is gone is
 * left out. */
void mc__persist_put_obj(mc__master_t *m, mc_buf_t *b, const mc__object_t *o, uint64_t now) {
    const mc__replica_t *reps = mc__obj_reps((mc__object_t *)o);
    uint64_t serial[MC_MP_MAX_REPLICA_NUM];
    uint32_t n = 0;
    pthread_rwlock_rdlock(&m->registry);
    for (uint8_t i = 0; i < o->n_replicas && i < MC_MP_MAX_REPLICA_NUM; i++) {
        const mc__segment_t *s = reps[i].seg < m->n_slots ? m->slots[reps[i].seg] : NULL;
        serial[i] = s ? s->serial : 0;
    }
    pthread_rwlock_unlock(&m->registry);
    for (uint8_t i = 0; i < o->n_replicas; i++)
        n += serial[i] != 0;
    mc__buf_u8(b, MC__R_OBJ_SET);
    mc__buf_u64(b, o->version);
    mc__buf_bytes(b, o->data, o->key_len);
    mc__buf_u64(b, o->size);
    mc__buf_u8(b, o->flags);
    mc__buf_u64(
        b, (o->flags & MC__OBJ_SOFT_PIN) && o->soft_pin_until > now ? o->soft_pin_until - now : 0);
    mc__buf_u32(b, n);
    for (uint8_t i = 0; i < o->n_replicas; i++) {
        if (!serial[i])
            continue;
        mc__buf_u64(b, serial[i]);
        mc__buf_u64(b, reps[i].off);
        mc__buf_u64(b, o->size);
    }
}

void mc__persist_obj_set(mc__master_t *m, mc__object_t *o) {
    MC__EMIT(m, mc__persist_put_obj(m, b, o, mc__now_ms())); /* no clock read with no log */
}

void mc__persist_obj_del(mc__master_t *m, const mc__object_t *o) {
    MC__EMIT(m, {
        mc__buf_u8(b, MC__R_OBJ_DEL);
        mc__buf_u64(b, o->version);
    });
}

void mc__persist_put_disk(mc_buf_t *b, const uint8_t *key, uint32_t len, uint64_t version,
                          uint64_t size, uint64_t disk_id) {
    mc__buf_u8(b, MC__R_DISK_SET);
    mc__buf_u64(b, version);
    mc__buf_bytes(b, key, len);
    mc__buf_u64(b, size);
    mc__buf_u64(b, disk_id);
}

void mc__persist_disk_set(mc__master_t *m, const uint8_t *key, uint32_t len, uint64_t version,
                          uint64_t size, uint64_t disk_id) {
    MC__EMIT(m, mc__persist_put_disk(b, key, len, version, size, disk_id));
}

void mc__persist_disk_del(mc__master_t *m, const uint8_t *key, uint32_t len) {
    MC__EMIT(m, {
        mc__buf_u8(b, MC__R_DISK_DEL);
        mc__buf_bytes(b, key, len);
    });
}

/* Writes all n bytes at off, or at the file position when off is negative (a new file). */
static int mc__pwrite_all(int fd, const uint8_t *p, size_t n, int64_t off) {
    while (n > 0) {
        ssize_t w = off < 0 ? write(fd, p, n) : pwrite(fd, p, n, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
        if (off >= 0)
            off += (int64_t)w;
    }
    return 0;
}

static int mc__write_all(int fd, const uint8_t *p, size_t n) {
    return mc__pwrite_all(fd, p, n, -1);
}

/* Writes n bytes of records at the log's end (syncing is the caller's). */
static int mc__log_write(mc__persist_t *p, const uint8_t *data, size_t n) {
    static const uint8_t zeros[1 << 16];
    if (p->off + n + 8 > p->zeroed) {
        uint64_t end = p->zeroed + MC__LOG_AHEAD;
        while (end < p->off + n + 8)
            end += MC__LOG_AHEAD;
        for (uint64_t at = p->zeroed; at < end; at += sizeof(zeros))
            if (mc__pwrite_all(p->fd, zeros, sizeof(zeros), (int64_t)at) != 0)
                return -1;
        if (fsync(p->fd) != 0) /* the new size, once per MC__LOG_AHEAD */
            return -1;
        p->zeroed = end;
    }
    if (mc__pwrite_all(p->fd, data, n, (int64_t)p->off) != 0)
        return -1;
    p->off += n;
    return 0;
}

/* Writes out (one group commit) to the local log; one that cannot be written stops the
 * process. */
static void mc__log_commit(mc__persist_t *p, const mc_buf_t *out) {
    if (out->failed || mc__log_write(p, out->data, out->len) != 0 || fdatasync(p->fd) != 0) {
        /* Fail-stop: the log holds exactly what was acknowledged so far. */
        MC_ERROR("master: cannot write its metadata log (%s); stopping so that nothing "
                 "unrecorded is acknowledged (restart with --enable_snapshot_restore)",
                 out->failed ? "out of memory" : strerror(errno));
        _exit(70);
    }
}

/* The HA log refused a commit: this master serves nothing more and gives its term up. */
static void mc__persist_died(mc__master_t *m) {
    atomic_store(&m->fenced, 1);
    MC_ERROR("master: the metadata log in etcd cannot record changes any more; this master "
             "serves nothing from now on and gives up its leadership (term %lld)",
             (long long)m->cfg.ha_term);
    if (m->cfg.ha_lost)
        m->cfg.ha_lost(m->cfg.ha_ctx, m->cfg.ha_term);
}

/* HA commit: like the local one, but up to MC__ELOG_INFLIGHT group commits are written at once,
 * each taking the records pending when it starts; they are acknowledged in the order they were
 * taken, and the first that fails makes the log dead (none after it is acknowledged). */
static int mc__commit_etcd(mc__master_t *m, mc__persist_t *p) {
    uint64_t target;
    int rc, died = 0;
    pthread_mutex_lock(&p->mu);
    target = p->appended;
    while (p->synced < target && !p->dead) {
        mc_buf_t out;
        uint64_t upto, seq;
        unsigned slot;
        size_t k;
        if ((p->pending.len == 0 && !p->pending.failed) || p->b_count == MC__ELOG_INFLIGHT ||
            p->marking) {
            pthread_cond_wait(&p->cv, &p->mu); /* ours is in flight, or no room for it yet */
            continue;
        }
        out = p->pending;
        mc__buf_init(&p->pending);
        upto = p->appended;
        k = out.failed ? 0 : mc__elog_entries(out.data, out.len);
        seq = mc__elog_reserve(p->elog, k);
        slot = (p->b_head + p->b_count++) % MC__ELOG_INFLIGHT;
        p->batch[slot].upto = upto;
        p->batch[slot].done = p->batch[slot].ok = 0;
        pthread_mutex_unlock(&p->mu);
        rc = out.failed || k == 0 ? -1 : mc__elog_write(p->elog, seq, out.data, out.len);
        mc__buf_free(&out);
        pthread_mutex_lock(&p->mu);
        p->batch[slot].done = 1;
        p->batch[slot].ok = rc == 0;
        while (p->b_count && p->batch[p->b_head].done) {
            if (!p->batch[p->b_head].ok) {
                died |= !p->dead;
                p->dead = 1;
            } else if (!p->dead) {
                p->synced = p->batch[p->b_head].upto;
            }
            p->b_head = (p->b_head + 1) % MC__ELOG_INFLIGHT;
            p->b_count--;
        }
        pthread_cond_broadcast(&p->cv);
    }
    rc = p->dead ? -1 : 0;
    pthread_mutex_unlock(&p->mu);
    if (died)
        mc__persist_died(m);
    return rc;
}

int mc__persist_commit(mc__master_t *m) {
    mc__persist_t *p = m->persist;
    uint64_t target;
    if (!p)
        return 0;
    if (p->elog)
        return mc__commit_etcd(m, p);
    pthread_mutex_lock(&p->mu);
    target = p->appended;
    while (p->synced < target) {
        mc_buf_t out;
        uint64_t upto;
        if (p->syncing) {
            pthread_cond_wait(&p->cv, &p->mu);
            continue;
        }
        /* This thread writes everything pending, for itself and everyone waiting. */
        p->syncing = 1;
        out = p->pending;
        mc__buf_init(&p->pending);
        upto = p->appended;
        pthread_mutex_unlock(&p->mu);
        mc__log_commit(p, &out);
        mc__buf_free(&out);
        pthread_mutex_lock(&p->mu);
        p->synced = upto;
        p->syncing = 0;
        pthread_cond_broadcast(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
    return 0;
}

/* HA: the snapshot is written beside the log in etcd (persist_etcd.h), outside the log's lock.
 * Its mark is taken with no commit in flight (new ones wait for it), so every record emitted from
 * the snapshot's start on lands in an entry at or after the mark; entries there that hold older
 * records are replayed after the snapshot too, which the replay's idempotent records allow (as for
 * the local log). */
static void mc__persist_compact_etcd(mc__master_t *m, mc__persist_t *p) {
    mc_buf_t body;
    uint64_t mark, limit = mc__elog_snapshot_bytes(p->elog) * MC__COMPACT_GROWTH;
    if (limit < (uint64_t)m->cfg.metadata_compact_bytes)
        limit = (uint64_t)m->cfg.metadata_compact_bytes;
    pthread_mutex_lock(&p->mu);
    if (p->dead || p->installing || mc__elog_appended(p->elog) < limit) {
        pthread_mutex_unlock(&p->mu);
        return;
    }
    p->marking = 1; /* no new commit starts until the mark is taken */
    while (p->b_count)
        pthread_cond_wait(&p->cv, &p->mu);
    p->installing = 1;
    p->marking = 0;
    mark = mc__elog_mark(p->elog);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    mc__buf_init(&body);
    if (p->state.dump(m, &body) == 0 && !body.failed &&
        mc__elog_install(p->elog, body.data, body.len, mark) == 0)
        MC_INFO("master: metadata log in etcd compacted to a %zu-byte snapshot", body.len);
    else
        MC_WARN("master: compacting the metadata log in etcd failed; it keeps growing");
    mc__buf_free(&body);
    pthread_mutex_lock(&p->mu);
    p->installing = 0;
    pthread_mutex_unlock(&p->mu);
}

/* Rewrites the log from the state while the master serves (from the monitor thread), once it
 * grew past its limit. The snapshot is fuzzy: it reads each segment and shard in turn while
 * changes go on; every record emitted from its start on is kept (redo) and follows it in the new
 * file, and the replay builds the master only from the final tables, so a change the snapshot
 * saw and also replays, or saw half of, comes out as the change (records are idempotent). The
 * switch to the new file happens under the log's lock with no commit writing, after the new file
 * holds the snapshot and every record emitted so far and is synced and renamed over the old. */
void mc__persist_maybe_compact(mc__master_t *m) {
    mc__persist_t *p = m->persist;
    mc_buf_t body;
    uint64_t size, limit;
    int fd = -1, ok = 0;
    if (!p)
        return;
    if (p->elog) {
        mc__persist_compact_etcd(m, p);
        return;
    }
    pthread_mutex_lock(&p->mu);
    size = p->off;
    limit = p->compacted * MC__COMPACT_GROWTH;
    if (limit < (uint64_t)m->cfg.metadata_compact_bytes)
        limit = (uint64_t)m->cfg.metadata_compact_bytes;
    if (size < limit || p->rewriting) {
        pthread_mutex_unlock(&p->mu);
        return;
    }
    p->rewriting = 1;
    mc__buf_init(&p->redo);
    pthread_mutex_unlock(&p->mu);
    mc__buf_init(&body);
    if (p->state.dump(m, &body) == 0) {
        fd = openat(p->dir_fd, MC__LOG_FILE ".tmp", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        ok = fd >= 0 && mc__write_all(fd, (const uint8_t *)MC__LOG_MAGIC, 8) == 0 &&
             mc__write_all(fd, body.data, body.len) == 0;
    }
    pthread_mutex_lock(&p->mu);
    while (p->syncing)
        pthread_cond_wait(&p->cv, &p->mu);
    /* Everything emitted since the snapshot began, committed or not, goes after it. */
    ok = ok && !p->redo.failed && mc__write_all(fd, p->redo.data, p->redo.len) == 0 &&
         fsync(fd) == 0 && renameat(p->dir_fd, MC__LOG_FILE ".tmp", p->dir_fd, MC__LOG_FILE) == 0;
    if (ok && fsync(p->dir_fd) != 0) {
        /* The new file has the name, but the rename may not survive a crash, and the old file
         * no longer takes records anyone would replay: stop, as for any write that fails. */
        MC_ERROR("master: cannot sync the metadata log's directory (%s); stopping so that "
                 "nothing unrecorded is acknowledged",
                 strerror(errno));
        _exit(70);
    }
    if (ok) {
        uint64_t new_size = 8 + body.len + p->redo.len;
        close(p->fd);
        p->fd = fd;
        fd = -1;
        p->off = p->zeroed = p->compacted = new_size;
        mc__buf_free(&p->pending); /* all of it is in the new file, synced */
        mc__buf_init(&p->pending);
        p->synced = p->appended;
        MC_INFO("master: metadata log compacted from %llu to %llu bytes", (unsigned long long)size,
                (unsigned long long)new_size);
    } else {
        MC_WARN("master: compacting the metadata log failed (%s); it keeps growing",
                strerror(errno));
        p->compacted = size; /* not again before it grew that much more */
    }
    p->rewriting = 0;
    mc__buf_free(&p->redo);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    if (fd >= 0) {
        close(fd);
        unlinkat(p->dir_fd, MC__LOG_FILE ".tmp", 0);
    }
    mc__buf_free(&body);
}

/* Writes data (magic + records) to dir/master.log through a temporary file and a rename, both
 * synced, so a crash leaves the old log or the new one whole. */
static int mc__write_log_file(int dir_fd, const mc_buf_t *body, char *err, size_t cap) {
    int fd = openat(dir_fd, MC__LOG_FILE ".tmp", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || mc__write_all(fd, (const uint8_t *)MC__LOG_MAGIC, 8) != 0 ||
        mc__write_all(fd, body->data, body->len) != 0 || fsync(fd) != 0) {
        snprintf(err, cap, "cannot write %s.tmp: %s", MC__LOG_FILE, strerror(errno));
        if (fd >= 0)
            close(fd);
        return MC_ERR_INTERNAL_ERROR;
    }
    close(fd);
    if (renameat(dir_fd, MC__LOG_FILE ".tmp", dir_fd, MC__LOG_FILE) != 0 || fsync(dir_fd) != 0) {
        snprintf(err, cap, "cannot replace %s: %s", MC__LOG_FILE, strerror(errno));
        return MC_ERR_INTERNAL_ERROR;
    }
    return 0;
}

int mc__persist_open(mc__master_t *m, const char *dir, int restore,
                     const mc__persist_state_t *state, char *err, size_t cap) {
    mc__persist_t *p = NULL;
    mc_buf_t body;
    char path[4096];
    int rc = 0;
    struct stat st;
    mc__buf_init(&body);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        snprintf(err, cap, "cannot create %s: %s", dir, strerror(errno));
        return MC_ERR_INVALID_PARAMS;
    }
    errno = 0; /* an existing directory is no error for whoever reports one later */
    snprintf(path, sizeof(path), "%s/%s", dir, MC__LOG_FILE);
    if (restore && stat(path, &st) == 0) {
        rc = state->replay(m, path, err, cap);
        if (rc != 0)
            return rc;
    } else if (!restore && stat(path, &st) == 0 && st.st_size > 8) {
        /* Starting empty over a log that holds objects would lose them at the next restore. */
        MC_WARN("master: %s holds an earlier run's metadata; starting empty replaces it (use "
                "--enable_snapshot_restore to restore it)",
                path);
    }
    p = mc__calloc(1, sizeof(*p));
    if (!p)
        return MC_ERR_INTERNAL_ERROR;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    mc__buf_init(&p->pending);
    p->state = *state;
    p->fd = -1;
    p->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (p->dir_fd < 0) {
        snprintf(err, cap, "cannot open %s: %s", dir, strerror(errno));
        rc = MC_ERR_INVALID_PARAMS;
        goto fail;
    }
    /* The restored state, compacted: the new log starts as one record per live thing. */
    rc = state->dump(m, &body);
    if (rc == 0)
        rc = mc__write_log_file(p->dir_fd, &body, err, cap);
    if (rc != 0)
        goto fail;
    p->fd = openat(p->dir_fd, MC__LOG_FILE, O_WRONLY | O_CLOEXEC);
    p->off = p->zeroed = p->compacted = 8 + body.len; /* the compacted log just written */
    if (p->fd < 0) {
        snprintf(err, cap, "cannot open %s: %s", path, strerror(errno));
        rc = MC_ERR_INVALID_PARAMS;
        goto fail;
    }
    mc__buf_free(&body);
    m->persist = p;
    return 0;
fail:
    mc__buf_free(&body);
    if (p->dir_fd >= 0)
        close(p->dir_fd);
    mc__buf_free(&p->pending);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    mc__free(p);
    return rc;
}

int mc__persist_open_ha(mc__master_t *m, const mc__persist_state_t *st, char *err, size_t cap) {
    const mc__master_config_t *c = &m->cfg;
    mc__elog_opts_t o = {.endpoints = c->ha_etcd_endpoints,
                         .cluster_id = c->cluster_id,
                         .term = c->ha_term,
                         .is_leader = c->ha_is_leader,
                         .ctx = c->ha_ctx};
    mc__persist_t *p = NULL;
    mc__elog_t *l = NULL;
    mc_buf_t loaded, body;
    int rc;
    mc__buf_init(&loaded);
    mc__buf_init(&body);
    rc = mc__elog_open(&o, &l, &loaded, err, cap);
    if (rc == 0)
        rc = st->replay_buf(m, loaded.data, loaded.len, "the metadata log in etcd", err, cap);
    mc__buf_free(&loaded);
    /* the restored state, compacted, becomes this term's snapshot: from here on only this
     * leader's entries follow it */
    if (rc == 0)
        rc = st->dump(m, &body);
    if (rc == 0 && (body.failed || mc__elog_install(l, body.data, body.len, mc__elog_mark(l)))) {
        snprintf(err, cap, "cannot write the restored state to etcd as term %lld's snapshot",
                 (long long)c->ha_term);
        rc = MC_ERR_ETCD_OPERATION_ERROR;
    }
    mc__buf_free(&body);
    if (rc == 0 && !(p = mc__calloc(1, sizeof(*p))))
        rc = MC_ERR_MEMORY;
    if (rc) {
        mc__elog_close(l);
        return rc;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    mc__buf_init(&p->pending);
    p->state = *st;
    p->fd = p->dir_fd = -1;
    p->elog = l;
    m->persist = p;
    return 0;
}

void mc__persist_close(mc__master_t *m) {
    mc__persist_t *p = m->persist;
    if (!p)
        return;
    (void)mc__persist_commit(m); /* a dead log has told its callers already */
    m->persist = NULL;
    if (p->fd >= 0)
        close(p->fd);
    if (p->dir_fd >= 0)
        close(p->dir_fd);
    mc__elog_close(p->elog);
    mc__buf_free(&p->pending);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    mc__free(p);
}
