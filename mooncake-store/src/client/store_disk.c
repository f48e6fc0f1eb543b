/* The disk tier of a storage node (see store_disk.h). Two parts:
 *
 *   the worker thread announces the directory's intact objects to the master (RESET first, so
 *   the master's view of this node is exactly the disk), then fetches and runs the master's
 *   work: OFFLOAD copies an object out of our own memory segment (checked against its current
 *   incarnation) into the bucket store and reports it durable; DELETE drops a copy the master
 *   let go; PROMOTE puts a copy back into memory. A master that no longer knows us (it
 *   restarted, or expired us) answers a fetch with CLIENT_NOT_FOUND: we announce again.
 *
 *   the read server answers READ requests of any reader with the verified bytes; a copy that
 *   fails its checksum is deleted by the bucket store and dropped from the master's view here.
 *
 * Space: a put that does not fit evicts the least recently used copies first, each dropped from
 * the master's view before its bytes go, so a reader is never sent to a deleted copy by a master
 * that already knew.
 *
 * The same worker runs the shared-filesystem tier (the master's --root_fs_dir): its store is then
 * one file per object in the shared directory (disk/file_store.h) instead of a bucket store, it
 * announces with SHARED, and there is no read server (readers open the files themselves). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "client/store_disk.h"
#include "client/store_internal.h"
#include "disk/bucket_store.h"
#include "disk/file_store.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/auth.h"
#include "mooncake/common/cond.h"
#include "mooncake/common/conn_server.h"
#include "mooncake/common/log.h"
#include "mooncake/common/random.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "proto/disk_proto.h"

#define MC__DT_IDLE_MS 20u   /* the worker's poll when the master had nothing for it */
#define MC__DT_RETRY_MS 500u /* after a failed RPC */
#define MC__DT_IO_TIMEOUT_MS 10000u
#define MC__DT_PROMOTE_QUEUE 256u
#define MC__DT_READERS_IDLE 8u
/* A shared file the master has no record of is deleted at an announce only once it is this old:
 * a younger one may be another node's offload, written but not reported yet. */
#define MC__DT_STALE_AGE_S 120u

struct mc__disk_tier {
    mc_store_t *s;
    /* Its own connection to the master, under the store's client id: the store's is serialised,
     * and a put waiting at the master for offloads to finish must not hold up the very reports
     * it waits for (the tier can live in the process that puts). */
    mc__master_client_t *mc;
    /* Promotions run on a thread (and a connection) of their own: a promotion's put may wait at
     * the master for offloads to make room, and those are the worker's to finish. */
    mc__master_client_t *pmc;
    pthread_t promoter;
    int promoter_started;
    char **pq;                          /* keys to promote, FIFO, at most MC__DT_PROMOTE_QUEUE */
    uint64_t pqv[MC__DT_PROMOTE_QUEUE]; /* the version of each copy (the shared files check it) */
    size_t pq_n;
    uint8_t *pbuf;
    size_t pbuf_cap;
    struct mc__bstore *bs;                  /* a node's own disk; NULL for the shared directory */
    char fsdir[MC_MP_MAX_SEGMENT_NAME + 1]; /* the shared directory (file_store.h), or "" */
    int no_sync;
    mc_conn_server_t *srv;
    mc_auth_t auth;
    char endpoint[MC_MP_MAX_SEGMENT_NAME + 1];
    uint64_t capacity;
    uint64_t disk_id;
    pthread_t worker;
    int worker_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
    /* unmount_local_disk_segment: leaving asks the worker to park between two rounds (parked
     * says it has), so that nothing it does races the LEAVE; left once the master took it. A
     * LEAVE that fails clears leaving and the worker carries on. */
    int leaving, parked, left;
    uint8_t *buf; /* the worker's */
    size_t buf_cap;
    _Atomic uint64_t reads, read_bytes, read_misses, checksum_failures;
    _Atomic uint64_t offloads, offload_bytes, offload_failures, deletes, lru_evictions;
    _Atomic uint64_t promotions, promotion_failures, announces, stale_copies;
    char read_mode[96]; /* how reads are submitted (a probe reader's, at start) */
    /* Idle readers (an I/O ring and ~1 MiB of chunk buffers each) for the read server: a request
     * takes one and gives it back, so their number follows the requests in progress, not the
     * connections readers keep open; at most MC__DT_READERS_IDLE wait here. */
    struct mc__bstore_reader *readers[MC__DT_READERS_IDLE];
    size_t n_readers;
};

/* --- master RPCs --- */

typedef struct mc__codes_ctx {
    uint32_t n;
    int32_t *codes;
} mc__codes_ctx_t;

static int mc__codes_reply(void *ctx, const mc_frame_header_t *h, const uint8_t *body, size_t len) {
    mc__codes_ctx_t *c = ctx;
    return mc__mp_decode_codes_reply(h, body, len, c->n, c->codes);
}

typedef struct mc__fetch_ctx {
    uint32_t max, n;
    mc__disk_job_t *jobs;
} mc__fetch_ctx_t;

static int mc__fetch_reply(void *ctx, const mc_frame_header_t *h, const uint8_t *body, size_t len) {
    mc__fetch_ctx_t *c = ctx;
    return mc__dp_decode_fetch_reply(h, body, len, c->max, c->jobs, &c->n);
}

/* DISK_ANNOUNCE of n keys (sizes in lens, versions unused). */
static int mc__dt_announce_rpc(mc__disk_tier_t *t, uint8_t flags, uint32_t n, mc__mp_str_t *keys,
                               uint64_t *lens, int32_t *codes) {
    mc__mp_request_t r;
    mc__codes_ctx_t c = {n, codes};
    memset(&r, 0, sizeof(r));
    r.type = MC_MP_DISK_ANNOUNCE;
    r.mount_flags = (uint8_t)(flags | (t->fsdir[0] ? MC_DP_ANNOUNCE_SHARED : 0));
    if (!(flags & MC_DP_ANNOUNCE_DROP)) {
        r.segment_name.p = (const uint8_t *)t->endpoint;
        r.segment_name.len = (uint32_t)strlen(t->endpoint);
    }
    r.size = t->capacity;
    r.base = t->fsdir[0] ? 0 : t->disk_id;
    r.n_keys = n;
    r.keys = keys;
    r.value_lens = lens;
    return mc__master_client_call(t->mc, &r, mc__codes_reply, &c);
}

/* Tells the master one copy left our disk (before its bytes go). */
static int mc__dt_drop(mc__disk_tier_t *t, const char *key) {
    mc__mp_str_t k = {(const uint8_t *)key, (uint32_t)strlen(key)};
    uint64_t len = 0;
    int32_t code = 0;
    return mc__dt_announce_rpc(t, MC_DP_ANNOUNCE_DROP, 1, &k, &len, &code);
}

static int mc__dt_done_rpc(mc__disk_tier_t *t, int ok, uint32_t n, mc__mp_str_t *keys,
                           uint64_t *versions, int32_t *codes) {
    mc__mp_request_t r;
    mc__codes_ctx_t c = {n, codes};
    memset(&r, 0, sizeof(r));
    r.type = MC_MP_DISK_DONE;
    r.force = ok ? 1 : 0;
    r.n_keys = n;
    r.keys = keys;
    r.value_lens = versions;
    return mc__master_client_call(t->mc, &r, mc__codes_reply, &c);
}

/* --- the store: the node's bucket store, or the shared directory's files --- */

/* version: the copy's (a shared file holding another value stays; 0: any). */
static int mc__dt_remove(mc__disk_tier_t *t, const char *key, uint64_t version) {
    return t->bs ? mc__bstore_remove(t->bs, key) : mc__fstore_remove(t->fsdir, key, version);
}

static int mc__dt_size(mc__disk_tier_t *t, const char *key, uint64_t *len) {
    return t->bs ? mc__bstore_size(t->bs, key, len) : mc__fstore_size(t->fsdir, key, len);
}

static int mc__dt_get(mc__disk_tier_t *t, const char *key, uint64_t version, uint8_t *buf,
                      uint64_t *len) {
    struct iovec v = {buf, (size_t)*len};
    if (t->bs)
        return mc__bstore_get(t->bs, key, buf, *len, len);
    return mc__fstore_read(t->fsdir, key, &v, 1, *len, version);
}

/* --- announce --- */

typedef struct mc__ann {
    char **keys;
    uint64_t *lens;
    uint8_t *young; /* shared files too young to be judged stale (MC__DT_STALE_AGE_S) */
    size_t n, cap;
    int oom;
} mc__ann_t;

static int mc__ann_add(void *ctx, const char *key, uint64_t len) {
    mc__ann_t *a = ctx;
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 256;
        char **k = mc__realloc(a->keys, cap * sizeof(*k));
        uint64_t *l = NULL;
        if (!k) {
            a->oom = 1;
            return 1;
        }
        a->keys = k;
        l = mc__realloc(a->lens, cap * sizeof(*l));
        if (!l) {
            a->oom = 1;
            return 1;
        }
        a->lens = l;
        uint8_t *y = mc__realloc(a->young, cap);
        if (!y) {
            a->oom = 1;
            return 1;
        }
        a->young = y;
        a->cap = cap;
    }
    a->young[a->n] = 0;
    a->keys[a->n] = mc__strndup(key, strlen(key));
    if (!a->keys[a->n]) {
        a->oom = 1;
        return 1;
    }
    a->lens[a->n++] = len;
    return 0;
}

static int mc__ann_add_file(void *ctx, const char *key, uint64_t len, uint64_t age_s) {
    mc__ann_t *a = ctx;
    int rc = mc__ann_add(ctx, key, len);
    if (rc == 0)
        a->young[a->n - 1] = age_s < MC__DT_STALE_AGE_S;
    return rc;
}

/* Announces every intact object, RESET first. A copy the master already holds another value of
 * is deleted here. 0 or the RPC's failure (then announced again later). */
static int mc__dt_announce_all(mc__disk_tier_t *t) {
    mc__ann_t a;
    mc__mp_str_t *views = NULL;
    int32_t *codes = NULL;
    int rc = 0;
    size_t kept = 0, dropped = 0;
    memset(&a, 0, sizeof(a));
    if (t->bs)
        mc__bstore_foreach(t->bs, mc__ann_add, &a);
    else
        mc__fstore_foreach(t->fsdir, mc__ann_add_file, &a);
    if (a.oom) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    views = mc__calloc(MC_DP_MAX_ANNOUNCE, sizeof(*views));
    codes = mc__calloc(MC_DP_MAX_ANNOUNCE, sizeof(*codes));
    if (!views || !codes) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    for (size_t off = 0; rc == 0 && (off < a.n || off == 0); off += MC_DP_MAX_ANNOUNCE) {
        uint32_t n = (uint32_t)(a.n - off < MC_DP_MAX_ANNOUNCE ? a.n - off : MC_DP_MAX_ANNOUNCE);
        for (uint32_t i = 0; i < n; i++) {
            views[i].p = (const uint8_t *)a.keys[off + i];
            views[i].len = (uint32_t)strlen(a.keys[off + i]);
        }
        /* RESET on the first batch, END on the last (the master then forgets what this disk
         * no longer has; one batch may be both). */
        uint8_t flags = (uint8_t)((off == 0 ? MC_DP_ANNOUNCE_RESET : 0) |
                                  (off + n >= a.n ? MC_DP_ANNOUNCE_END : 0));
        rc = mc__dt_announce_rpc(t, flags, n, views, a.lens + off, codes);
        for (uint32_t i = 0; rc == 0 && i < n; i++) {
            if (codes[i] == 0) {
                kept++;
            } else if (!a.young[off + i]) {
                (void)mc__dt_remove(t, a.keys[off + i], 0);
                dropped++;
            }
        }
        if (a.n == 0)
            break;
    }
    if (rc == 0) {
        atomic_fetch_add(&t->announces, 1);
        atomic_fetch_add(&t->stale_copies, dropped);
        MC_INFO("disk tier: announced %zu objects on disk to the master (%zu stale copies "
                "deleted)",
                kept, dropped);
    }
out:
    for (size_t i = 0; i < a.n; i++)
        mc__free(a.keys[i]);
    mc__free(a.keys);
    mc__free(a.lens);
    mc__free(a.young);
    mc__free(views);
    mc__free(codes);
    return rc;
}

/* --- the work --- */

static int mc__grow(uint8_t **buf, size_t *cap, uint64_t len) {
    if (len <= *cap)
        return 0;
    uint8_t *p = mc__realloc(*buf, (size_t)len);
    if (!p)
        return MC_ERR_INTERNAL_ERROR;
    *buf = p;
    *cap = (size_t)len;
    return 0;
}

static int mc__dt_buf(mc__disk_tier_t *t, uint64_t len) {
    return mc__grow(&t->buf, &t->buf_cap, len);
}

/* The offloads of one fetch, written without a sync each: one flush makes them all durable,
 * then one report per outcome says so (a small object's offload costs a sync otherwise). */
typedef struct mc__dt_batch {
    uint32_t n;
    const mc__disk_job_t *job[MC_DP_MAX_FETCH];
    int rc[MC_DP_MAX_FETCH];
} mc__dt_batch_t;

static int mc__dt_batch_has(const mc__dt_batch_t *b, const char *key) {
    for (uint32_t i = 0; i < b->n; i++)
        if (strcmp(b->job[i]->key, key) == 0)
            return 1;
    return 0;
}

/* Flushes and reports the batch. A copy whose object went meanwhile is deleted; no later job
 * of this fetch touched its key (mc__dt_run reports first), so the delete cannot take a newer
 * copy. */
static void mc__dt_report(mc__disk_tier_t *t, mc__dt_batch_t *b) {
    mc__mp_str_t keys[MC_DP_MAX_FETCH];
    uint64_t versions[MC_DP_MAX_FETCH];
    int32_t codes[MC_DP_MAX_FETCH];
    uint32_t idx[MC_DP_MAX_FETCH];
    if (b->n == 0)
        return;
    if (t->bs)
        (void)mc__bstore_flush(t->bs); /* shared files are synced as each is written */
    for (int ok = 1; ok >= 0; ok--) {
        uint32_t n = 0;
        for (uint32_t i = 0; i < b->n; i++) {
            if ((b->rc[i] == 0) != ok)
                continue;
            keys[n].p = (const uint8_t *)b->job[i]->key;
            keys[n].len = (uint32_t)strlen(b->job[i]->key);
            versions[n] = b->job[i]->version;
            idx[n++] = i;
        }
        if (n == 0)
            continue;
        if (mc__dt_done_rpc(t, ok, n, keys, versions, codes) != 0) {
            /* Unreported: the master hands these offloads out again later. */
            MC_WARN("disk tier: reporting %u offloads failed", n);
            continue;
        }
        for (uint32_t k = 0; k < n; k++) {
            const mc__disk_job_t *j = b->job[idx[k]];
            if (!ok) {
                atomic_fetch_add(&t->offload_failures, 1);
                MC_DEBUG("disk tier: offload of %s failed: %s", j->key,
                         mc_store_strerror(b->rc[idx[k]]));
            } else if (codes[k] != 0) {
                /* Removed or replaced while we copied it: this copy must not stay. */
                (void)mc__dt_remove(t, j->key, j->version);
                atomic_fetch_add(&t->stale_copies, 1);
            } else {
                atomic_fetch_add(&t->offloads, 1);
                atomic_fetch_add(&t->offload_bytes, j->size);
            }
        }
    }
    b->n = 0;
}

/* Stores len bytes under key (not yet synced: the batch's report flushes), evicting least
 * recently used copies while it does not fit. A victim of the unreported batch is reported
 * first, so that its drop at the master comes after the master learned of it. */
static int mc__dt_put(mc__disk_tier_t *t, const char *key, const void *data, uint64_t len,
                      uint64_t version, mc__dt_batch_t *b) {
    char victim[MC_MP_MAX_KEY + 1];
    if (!t->bs) /* the shared directory has no capacity of ours to keep */
        return mc__fstore_put(t->fsdir, key, data, len, version, !t->no_sync);
    for (;;) {
        uint64_t vlen = 0;
        int rc = mc__bstore_put_nosync(t->bs, key, data, len);
        if (rc != MC_ERR_NO_AVAILABLE_HANDLE)
            return rc;
        if (mc__bstore_coldest(t->bs, victim, sizeof(victim), &vlen) != 0)
            return rc;
        if (mc__dt_batch_has(b, victim))
            mc__dt_report(t, b);
        /* The master forgets the copy first: no reader is sent to it once its bytes are gone. */
        if (mc__dt_drop(t, victim) != 0)
            return MC_ERR_RPC_FAIL;
        (void)mc__bstore_remove(t->bs, victim);
        atomic_fetch_add(&t->lru_evictions, 1);
    }
}

static void mc__dt_offload(mc__disk_tier_t *t, const mc__disk_job_t *j, mc__dt_batch_t *b) {
    int rc = t->bs && j->size > t->capacity ? MC_ERR_INVALID_PARAMS : mc__dt_buf(t, j->size);
    /* Our own segment, in the incarnation the placement names: anything else is refused. */
    if (rc == 0)
        rc = mc__store_local_copy(t->s, MC_OPCODE_READ, &j->src, 0, t->buf, (size_t)j->size);
    if (rc == 0)
        rc = mc__dt_put(t, j->key, t->buf, j->size, j->version, b);
    b->job[b->n] = j;
    b->rc[b->n++] = rc;
}

/* On the promoter thread. */
static void mc__dt_promote(mc__disk_tier_t *t, const char *key, uint64_t version) {
    mc__replicate_config_t wc;
    mc__key_replicas_t *kr = NULL;
    uint64_t len = 0;
    int32_t code = 0;
    int rc = mc__dt_size(t, key, &len);
    if (rc == 0)
        rc = mc__grow(&t->pbuf, &t->pbuf_cap, len ? len : 1);
    if (rc == 0)
        rc = mc__dt_get(t, key, version, t->pbuf, &len);
    if (rc == 0 && len == 0)
        rc = MC_ERR_INVALID_PARAMS;
    if (rc == 0 && !(kr = mc__calloc(1, sizeof(*kr))))
        rc = MC_ERR_INTERNAL_ERROR;
    if (rc == 0) {
        memset(&wc, 0, sizeof(wc));
        wc.replica_num = 1;
        wc.flags = MC_MP_CFG_PROMOTE;
        rc = mc__master_client_batch_start(t->pmc, 0, 1, &key, &len, &wc, kr);
        if (rc == 0)
            rc = kr->code;
        if (rc == 0 && kr->n_replicas == 0)
            rc = MC_ERR_NO_AVAILABLE_HANDLE;
    }
    if (rc == 0) {
        mc_store_iov_t v = {t->pbuf, (size_t)len};
        uint8_t failed[MC_MP_MAX_REPLICA_NUM] = {0};
        int end = mc__store_move_each(t->s, MC_OPCODE_WRITE, &v, 1, kr->replicas, kr->n_replicas,
                                      failed) == 0;
        rc = mc__master_client_batch_finish(t->pmc, 0, end, 1, &key, &kr->version, &code);
        if (rc == 0)
            rc = end ? code : MC_ERR_TRANSFER_FAIL;
    }
    mc__free(kr);
    if (rc == 0)
        atomic_fetch_add(&t->promotions, 1);
    else {
        atomic_fetch_add(&t->promotion_failures, 1);
        MC_DEBUG("disk tier: promotion of %s failed: %s", key, mc_store_strerror(rc));
    }
}

static void mc__dt_run(mc__disk_tier_t *t, const mc__disk_job_t *j, mc__dt_batch_t *b) {
    /* Work on a key of the batch waits for the batch's report: jobs run in the master's order. */
    if (mc__dt_batch_has(b, j->key))
        mc__dt_report(t, b);
    switch (j->kind) {
    case MC_DP_JOB_OFFLOAD:
        mc__dt_offload(t, j, b);
        break;
    case MC_DP_JOB_DELETE:
        if (mc__dt_remove(t, j->key, j->version) == 0)
            atomic_fetch_add(&t->deletes, 1);
        break;
    case MC_DP_JOB_PROMOTE: {
        char *k = mc__strndup(j->key, strlen(j->key));
        pthread_mutex_lock(&t->mu);
        if (k && t->pq_n < MC__DT_PROMOTE_QUEUE) {
            t->pqv[t->pq_n] = j->version;
            t->pq[t->pq_n++] = k;
            k = NULL;
            pthread_cond_broadcast(&t->cv);
        }
        pthread_mutex_unlock(&t->mu);
        if (k) { /* the queue is full: this hit is not promoted (a later one may be) */
            mc__free(k);
            atomic_fetch_add(&t->promotion_failures, 1);
        }
        break;
    }
    default:
        break;
    }
}

/* Waits ms unless stopped; 1 when stopping. */
static int mc__dt_sleep(mc__disk_tier_t *t, uint64_t ms) {
    struct timespec ts;
    int stop;
    ts = mc__realtime_after_ms(ms);
    pthread_mutex_lock(&t->mu);
    if (!t->stop)
        pthread_cond_timedwait(&t->cv, &t->mu, &ts);
    stop = t->stop;
    pthread_mutex_unlock(&t->mu);
    return stop;
}

static int mc__dt_stopping(mc__disk_tier_t *t) {
    int stop;
    pthread_mutex_lock(&t->mu);
    stop = t->stop;
    pthread_mutex_unlock(&t->mu);
    return stop;
}

/* The worker's stop between two rounds while a leave is under way: parks until the leave failed
 * (0: carry on) or the tier stops (1). After a leave that succeeded it stays parked until then. */
static int mc__dt_park(mc__disk_tier_t *t) {
    int stop;
    pthread_mutex_lock(&t->mu);
    if (t->leaving && !t->stop) {
        t->parked = 1;
        pthread_cond_broadcast(&t->cv);
        while (t->leaving && !t->stop)
            pthread_cond_wait(&t->cv, &t->mu);
        t->parked = 0;
    }
    stop = t->stop;
    pthread_mutex_unlock(&t->mu);
    return stop;
}

static void *mc__dt_promoter(void *arg) {
    mc__disk_tier_t *t = arg;
    for (;;) {
        char *key = NULL;
        uint64_t version = 0;
        pthread_mutex_lock(&t->mu);
        while (!t->stop && t->pq_n == 0)
            pthread_cond_wait(&t->cv, &t->mu);
        if (!t->stop) {
            key = t->pq[0];
            version = t->pqv[0];
            memmove(t->pq, t->pq + 1, (t->pq_n - 1) * sizeof(*t->pq));
            memmove(t->pqv, t->pqv + 1, (t->pq_n - 1) * sizeof(*t->pqv));
            t->pq_n--;
        }
        pthread_mutex_unlock(&t->mu);
        if (!key)
            break;
        mc__dt_promote(t, key, version);
        mc__free(key);
    }
    return NULL;
}

static void *mc__dt_main(void *arg) {
    mc__disk_tier_t *t = arg;
    mc__disk_job_t *jobs = mc__calloc(MC_DP_MAX_FETCH, sizeof(*jobs));
    mc__dt_batch_t *batch = mc__calloc(1, sizeof(*batch));
    int announced = 0;
    if (!jobs || !batch) {
        mc__free(jobs);
        mc__free(batch);
        MC_ERROR("disk tier: out of memory; the worker stops");
        return NULL;
    }
    while (!mc__dt_stopping(t)) {
        mc__mp_request_t r;
        mc__fetch_ctx_t c = {MC_DP_MAX_FETCH, 0, jobs};
        int rc;
        if (mc__dt_park(t))
            break;
        if (!announced) {
            if (mc__dt_announce_all(t) != 0) {
                mc__dt_sleep(t, MC__DT_RETRY_MS);
                continue;
            }
            announced = 1;
        }
        memset(&r, 0, sizeof(r));
        r.type = MC_MP_DISK_FETCH;
        r.max_tasks = MC_DP_MAX_FETCH;
        rc = mc__master_client_call(t->mc, &r, mc__fetch_reply, &c);
        if (rc == MC_ERR_CLIENT_NOT_FOUND) {
            announced = 0; /* the master forgot us: say again what the disk holds */
            continue;
        }
        if (rc != 0) {
            mc__dt_sleep(t, MC__DT_RETRY_MS);
            continue;
        }
        for (uint32_t i = 0; i < c.n && !mc__dt_stopping(t); i++)
            mc__dt_run(t, &jobs[i], batch);
        mc__dt_report(t, batch);
        if (c.n == 0)
            mc__dt_sleep(t, MC__DT_IDLE_MS);
    }
    mc__free(jobs);
    mc__free(batch);
    return NULL;
}

/* --- the read server --- */

/* A streamed answer on its way out (mc__bstore_get_stream's sink): the reply frame waits for the
 * first chunk so the two leave in one send, and the trailer rides on the last. */
typedef struct mc__rd_stream {
    int fd;
    uint64_t deadline;
    mc_buf_t head; /* the reply frame, until it is sent */
    uint64_t id, len, sent;
    int begun, done;
    /* the tier's checksum failures: counted before a failed verdict leaves, so that a reader who
     * has it sees the count (the metrics page) already include it */
    _Atomic uint64_t *bad;
    int counted;
} mc__rd_stream_t;

static int mc__rd_begin(void *ctx, uint64_t len) {
    mc__rd_stream_t *c = ctx;
    c->begun = 1;
    c->len = len;
    return mc__dp_encode_read_reply(&c->head, c->id, 0, len) != 0 ? MC_ERR_INTERNAL_ERROR : 0;
}

static int mc__rd_chunk(void *ctx, uint8_t *p, size_t n, int last, int verdict) {
    mc__rd_stream_t *c = ctx;
    size_t out = n;
    if (last) {
        mc__dp_encode_read_trailer(p + n, verdict); /* the slack after the chunk */
        out += MC_DP_TRAILER_SIZE;
        if (verdict == MC_ERR_CHECKSUM_MISMATCH && !c->counted) {
            atomic_fetch_add(c->bad, 1);
            c->counted = 1;
        }
    }
    if (mc__send2(c->fd, c->head.data, c->head.len, p, out, c->deadline) != 0)
        return MC_ERR_TRANSFER_FAIL;
    c->head.len = 0;
    c->sent += n;
    c->done = last;
    return 0;
}

/* A stream that stopped part way (a read error): the rest of the promised bytes as zeros, then
 * the trailer that says they are not to be used. 0, or -1 when the connection failed. */
static int mc__rd_finish_short(mc__rd_stream_t *c, int32_t verdict) {
    static const uint8_t zeros[64 << 10];
    uint8_t tr[MC_DP_TRAILER_SIZE];
    if (mc__send_all(c->fd, c->head.data, c->head.len, c->deadline) != 0)
        return -1;
    c->head.len = 0;
    while (c->sent < c->len) {
        size_t n = c->len - c->sent < sizeof zeros ? (size_t)(c->len - c->sent) : sizeof zeros;
        if (mc__send_all(c->fd, zeros, n, c->deadline) != 0)
            return -1;
        c->sent += n;
    }
    mc__dp_encode_read_trailer(tr, verdict);
    return mc__send_all(c->fd, tr, sizeof tr, c->deadline) != 0 ? -1 : 0;
}

/* An idle reader, or a new one: NULL when out of memory. */
static struct mc__bstore_reader *mc__rd_take(mc__disk_tier_t *t) {
    struct mc__bstore_reader *r = NULL;
    pthread_mutex_lock(&t->mu);
    if (t->n_readers > 0)
        r = t->readers[--t->n_readers];
    pthread_mutex_unlock(&t->mu);
    if (!r && mc__bstore_reader_open(&r) != 0)
        return NULL;
    return r;
}

static void mc__rd_give(mc__disk_tier_t *t, struct mc__bstore_reader *r) {
    pthread_mutex_lock(&t->mu);
    if (t->n_readers < MC__DT_READERS_IDLE) {
        t->readers[t->n_readers++] = r;
        r = NULL;
    }
    pthread_mutex_unlock(&t->mu);
    mc__bstore_reader_close(r);
}

static int mc__rd_answer(mc__disk_tier_t *t, int fd, uint64_t id, const char *key, uint64_t cap) {
    mc__rd_stream_t c = {.fd = fd,
                         .deadline = mc__now_ms() + MC__DT_IO_TIMEOUT_MS,
                         .id = id,
                         .bad = &t->checksum_failures};
    struct mc__bstore_sink sink = {mc__rd_begin, mc__rd_chunk, &c};
    uint64_t len = 0;
    int sent = 0;
    mc__buf_init(&c.head);
    struct mc__bstore_reader *rd = mc__rd_take(t);
    int rc = rd ? mc__bstore_get_stream(t->bs, rd, key, cap, &sink, &len) : MC_ERR_INTERNAL_ERROR;
    if (rd)
        mc__rd_give(t, rd);
    if (rc == MC_ERR_CHECKSUM_MISMATCH) {
        if (!c.counted)
            atomic_fetch_add(&t->checksum_failures, 1);
        MC_WARN("disk tier: a copy failed its checksum and was deleted; dropping it at the master");
        (void)mc__dt_drop(t, key);
    }
    if (rc == MC_ERR_OBJECT_NOT_FOUND)
        atomic_fetch_add(&t->read_misses, 1);
    if (!c.begun) {
        /* Nothing promised yet: the code alone. */
        c.head.len = 0;
        sent = mc__dp_encode_read_reply(&c.head, id, rc, 0) != 0 ||
                       mc__send_all(fd, c.head.data, c.head.len, c.deadline) != 0
                   ? -1
                   : 0;
    } else if (!c.done) {
        /* The sink failed (the connection: nothing more can be said on it), or the read did. */
        sent = rc == MC_ERR_TRANSFER_FAIL || rc == MC_ERR_INTERNAL_ERROR
                   ? -1
                   : mc__rd_finish_short(&c, rc != 0 ? rc : MC_ERR_INVALID_READ);
    }
    mc__buf_free(&c.head);
    if (rc == 0 && sent == 0) {
        atomic_fetch_add(&t->reads, 1);
        atomic_fetch_add(&t->read_bytes, len);
    }
    return sent;
}

static void mc__rd_serve(void *ctx, int fd) {
    mc__disk_tier_t *t = ctx;
    uint8_t body[MC_DP_MAX_READ_BODY];
    char key[MC_MP_MAX_KEY + 1];
    if (t->auth.enabled && mc__auth_server(&t->auth, fd, mc__now_ms() + MC__DT_IO_TIMEOUT_MS) != 0)
        return;
    for (;;) {
        uint8_t hdr[MC_FRAME_HEADER_SIZE];
        mc_frame_header_t h;
        uint64_t version = 0, cap = 0;
        mc__conn_idle(1);
        /* The wait spins before it sleeps, as the engine's server does after a reply
         * (MC_TCP_REPLY_SPIN_US, sock.h): a reader going through objects in turn sends its next
         * read one master lookup later, and a read thread that slept for it paid a wake-up on
         * every get (one reader's 64 KiB gets on the 2-core AMD guest, p50 107-167 us against
         * 82-159 us spinning; docs/perf/issue26-amd/ab.md, section 12). A new connection's
         * first read comes at once too. */
        if (mc__recv_reply(fd, hdr, sizeof(hdr), 0, mc__reply_spin_for(0)))
            break;
        mc__conn_idle(0);
        if (mc__frame_header_decode(hdr, sizeof(hdr), MC_DP_MAX_READ_BODY, &h) != 0 ||
            h.type != MC_DP_READ || (h.flags & MC_FRAME_F_REPLY))
            break; /* not our framing: nothing sensible can follow */
        if (mc__recv_all(fd, body, (size_t)h.body_len, mc__now_ms() + MC__DT_IO_TIMEOUT_MS))
            break;
        int rc = mc__dp_decode_read(body, (size_t)h.body_len, key, &version, &cap);
        if (rc != 0) {
            mc_buf_t out;
            int bad;
            mc__buf_init(&out);
            bad = mc__dp_encode_read_reply(&out, h.request_id, rc, 0) != 0 ||
                  mc__send_all(fd, out.data, out.len, mc__now_ms() + MC__DT_IO_TIMEOUT_MS) != 0;
            mc__buf_free(&out);
            if (bad)
                break;
            continue;
        }
        if (mc__rd_answer(t, fd, h.request_id, key, cap) != 0)
            break;
    }
}

/* --- lifecycle --- */

/* The directory's identity (dir/DISK_ID, 16 hex digits, made once): a restarted node announces
 * it so the master lets go of its old self at once. 0 or a negative code. */
static int mc__dt_disk_id(const char *dir, uint64_t *id) {
    char path[4096 + 16], text[32];
    FILE *f = NULL;
    int rc = MC_ERR_INTERNAL_ERROR;
    *id = 0;
    if (snprintf(path, sizeof(path), "%s/DISK_ID", dir) >= (int)sizeof(path))
        return MC_ERR_INVALID_PARAMS;
    f = fopen(path, "r");
    if (f) {
        if (fgets(text, sizeof(text), f) && sscanf(text, "%16" SCNx64, id) == 1 && *id != 0)
            rc = 0;
        fclose(f);
        if (rc == 0)
            return 0;
    }
    while (*id == 0)
        mc__random_fill(id, sizeof(*id));
    f = fopen(path, "w");
    if (!f)
        return MC_ERR_INTERNAL_ERROR;
    rc = fprintf(f, "%016" PRIx64 "\n", *id) > 0 && fflush(f) == 0 && fsync(fileno(f)) == 0
             ? 0
             : MC_ERR_INTERNAL_ERROR;
    if (fclose(f) != 0)
        rc = MC_ERR_INTERNAL_ERROR;
    return rc;
}

int mc__disk_tier_start(mc_store_t *s, const mc__disk_tier_opts_t *o, mc__disk_tier_t **out) {
    mc__disk_tier_t *t = NULL;
    struct mc__bstore_opts bo;
    char host[MC_MP_MAX_SEGMENT_NAME - 8];
    uint16_t port = 0;
    int rc = MC_ERR_INVALID_PARAMS;
    int shared = o && o->shared_dir && *o->shared_dir;
    *out = NULL;
    if (!s || !o || (!shared && (!o->dir || !*o->dir || o->capacity == 0)) || !s->master ||
        !s->segment)
        return MC_ERR_INVALID_PARAMS;
    if (shared && strlen(o->shared_dir) > MC_MP_MAX_SEGMENT_NAME)
        return MC_ERR_INVALID_PARAMS;
    if (!shared && s->disk_tier && s->disk_tier->fsdir[0]) {
        /* A node with a disk of its own keeps its objects there: one tier per client (the master
         * knows a node by its client id), so the store's shared-directory tier goes. */
        mc__disk_tier_stop(s->disk_tier);
        s->disk_tier = NULL;
    }
    t = mc__calloc(1, sizeof(*t));
    if (!t)
        return MC_ERR_INTERNAL_ERROR;
    t->s = s;
    t->capacity = o->capacity;
    t->no_sync = o->no_sync;
    if (shared)
        snprintf(t->fsdir, sizeof(t->fsdir), "%s", o->shared_dir);
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    rc = mc__auth_init(&t->auth, s->cfg.cluster_secret, s->cfg.cluster_secret_file);
    if (rc)
        goto fail;
    t->pq = mc__calloc(MC__DT_PROMOTE_QUEUE, sizeof(*t->pq));
    if (!t->pq) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto fail;
    }
    rc = mc__master_client_connect_auth(s->cfg.master_server_addr,
                                        s->cfg.rpc_timeout_ms > 0 ? s->cfg.rpc_timeout_ms : 5000,
                                        mc__master_client_id(s->master), &t->auth, &t->mc);
    if (rc == 0)
        rc = mc__master_client_connect_auth(
            s->cfg.master_server_addr, s->cfg.rpc_timeout_ms > 0 ? s->cfg.rpc_timeout_ms : 5000,
            mc__master_client_id(s->master), &t->auth, &t->pmc);
    if (rc) {
        MC_ERROR("disk tier: cannot reach the master at %s", s->cfg.master_server_addr);
        goto fail;
    }
    if (shared)
        goto workers;
    memset(&bo, 0, sizeof(bo));
    bo.capacity = o->capacity;
    bo.no_sync = o->no_sync;
    /* Buckets of 64 MiB unless the disk is small: compaction needs bucket <= capacity / 8. */
    rc = mc__bstore_open_ex(o->dir, &bo, &t->bs);
    if (rc) {
        MC_ERROR("disk tier: cannot open %s: %s", o->dir, mc_store_strerror(rc));
        goto fail;
    }
    {
        /* The first reader, kept for the first request: its I/O mode goes into the node's log. */
        struct mc__bstore_reader *r = NULL;
        if (mc__bstore_reader_open(&r) == 0) {
            snprintf(t->read_mode, sizeof(t->read_mode), "%s", mc__bstore_reader_mode(r));
            t->readers[t->n_readers++] = r;
        }
    }
    rc = mc__dt_disk_id(o->dir, &t->disk_id);
    if (rc) {
        MC_ERROR("disk tier: cannot keep the disk id in %s", o->dir);
        goto fail;
    }
    if (o->host && *o->host) {
        snprintf(host, sizeof(host), "%.*s", (int)sizeof(host) - 1, o->host);
    } else if (mc__split_host_port(s->hostname, host, sizeof(host), &port) != 0) {
        snprintf(host, sizeof(host), "%.*s", (int)sizeof(host) - 1, s->hostname);
    }
    mc_conn_server_opts_t so = {.name = "disk",
                                .listen_fd = -1,
                                .host = NULL,
                                .port = o->port,
                                .backlog = 128,
                                .max_conns = 256,
                                .idle_timeout_ms = 300000,
                                .serve = mc__rd_serve,
                                .ctx = t};
    rc = mc__conn_server_start(&so, &t->srv);
    if (rc < 0) {
        MC_ERROR("disk tier: cannot listen on port %u", (unsigned)o->port);
        goto fail;
    }
    snprintf(t->endpoint, sizeof(t->endpoint), "%s:%u", host,
             (unsigned)mc__conn_server_port(t->srv));
workers:
    if (pthread_create(&t->worker, NULL, mc__dt_main, t) != 0) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto fail;
    }
    t->worker_started = 1;
    if (pthread_create(&t->promoter, NULL, mc__dt_promoter, t) != 0) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto fail;
    }
    t->promoter_started = 1;
    if (shared)
        MC_INFO("shared fs tier: objects of this node's segment are copied to %s", t->fsdir);
    else
        MC_INFO("disk tier: %s (%llu bytes, %llu objects intact) served at %s", o->dir,
                (unsigned long long)o->capacity, (unsigned long long)mc__bstore_count(t->bs),
                t->endpoint);
    *out = t;
    return 0;
fail:
    mc__disk_tier_stop(t);
    return rc < 0 ? rc : MC_ERR_INTERNAL_ERROR;
}

/* STORAGE_CONFIG's reply into a buffer of MC_MP_MAX_SEGMENT_NAME + 1 bytes. */
static int mc__scfg_reply(void *ctx, const mc_frame_header_t *h, const uint8_t *body, size_t len) {
    uint8_t eviction = 0;
    uint64_t quota = 0;
    return mc__dp_decode_storage_config(h, body, len, ctx, &eviction, &quota);
}

int mc__store_shared_start(mc_store_t *s, char *why, size_t cap) {
    char fsdir[MC_MP_MAX_SEGMENT_NAME + 1] = "", bad[512];
    mc__disk_tier_opts_t o;
    mc__mp_request_t r;
    int rc;
    if (!s->segment || !s->master)
        return 0; /* nothing of ours to copy: reading the shared files needs no tier */
    memset(&r, 0, sizeof(r));
    r.type = MC_MP_STORAGE_CONFIG;
    rc = mc__master_client_call(s->master, &r, mc__scfg_reply, fsdir);
    if (rc == MC_ERR_NOT_IMPLEMENTED || rc == MC_ERR_INVALID_PARAMS)
        return 0; /* a master from before the shared tier: it has none */
    if (rc != 0) {
        snprintf(why, cap, "cannot ask the master for its storage config: %s",
                 mc_store_strerror(rc));
        return rc;
    }
    if (!fsdir[0])
        return 0;
    if (mc__fstore_check(fsdir, bad, sizeof(bad)) != 0) {
        snprintf(why, cap, "the master's shared directory (--root_fs_dir) is not usable here: %s",
                 bad);
        return MC_ERR_INVALID_PARAMS;
    }
    memset(&o, 0, sizeof(o));
    o.shared_dir = fsdir;
    rc = mc__disk_tier_start(s, &o, &s->disk_tier);
    if (rc != 0)
        snprintf(why, cap, "the shared fs tier in %s cannot start: %s", fsdir,
                 mc_store_strerror(rc));
    return rc;
}

int mc__store_disk_start(mc_store_t *s) {
    mc__disk_tier_opts_t o;
    if (!s->cfg.ssd_offload_path[0]) {
        MC_ERROR("store: enable_ssd_offload needs ssd_offload_path (or "
                 "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH): the disk tier's directory");
        return MC_ERR_INVALID_PARAMS;
    }
    if (!s->segment) {
        MC_ERROR("store: enable_ssd_offload needs a segment (global_segment_size > 0): the disk "
                 "tier keeps what the master evicts from it");
        return MC_ERR_INVALID_PARAMS;
    }
    memset(&o, 0, sizeof(o));
    o.dir = s->cfg.ssd_offload_path;
    o.capacity = s->cfg.ssd_offload_capacity ? s->cfg.ssd_offload_capacity : 4ull << 30;
    return mc__disk_tier_start(s, &o, &s->disk_tier);
}

int mc__disk_tier_leave(mc__disk_tier_t *t) {
    mc__mp_request_t r;
    mc__codes_ctx_t c = {0, NULL};
    int rc;
    pthread_mutex_lock(&t->mu);
    if (t->left) {
        pthread_mutex_unlock(&t->mu);
        return 0; /* already off, as the reference's repeated call */
    }
    t->leaving = 1;
    pthread_cond_broadcast(&t->cv);
    while (t->worker_started && !t->parked && !t->stop)
        pthread_cond_wait(&t->cv, &t->mu);
    /* Promotions still queued would put copies the master is about to stop serving. */
    for (size_t i = 0; i < t->pq_n; i++)
        mc__free(t->pq[i]);
    t->pq_n = 0;
    pthread_mutex_unlock(&t->mu);
    memset(&r, 0, sizeof(r));
    r.type = MC_MP_DISK_ANNOUNCE;
    r.mount_flags = (uint8_t)(MC_DP_ANNOUNCE_LEAVE | (t->fsdir[0] ? MC_DP_ANNOUNCE_SHARED : 0));
    r.size = t->capacity;
    r.base = t->fsdir[0] ? 0 : t->disk_id;
    rc = mc__master_client_call(t->mc, &r, mc__codes_reply, &c);
    pthread_mutex_lock(&t->mu);
    if (rc == 0)
        t->left = 1;
    else
        t->leaving = 0; /* the master still has us: keep serving it */
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    if (rc == 0)
        MC_INFO("disk tier: taken off the master (unmount_local_disk_segment); %s keeps its "
                "copies, served again after a restart announces them",
                t->fsdir[0] ? t->fsdir : "the disk");
    else
        MC_ERROR("disk tier: the master did not take the disk off: %s", mc_store_strerror(rc));
    return rc;
}

static void mc__grace_sleep(uint64_t seconds) {
    struct timespec ts = {(time_t)seconds, 0};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static int mc__disk_leave_impl(mc_store_t *s) {
    if (!s->disk_tier) {
        MC_WARN("store: unmount_local_disk_segment: this store has no disk tier (nothing to take "
                "off the master)");
        return 0;
    }
    return mc__disk_tier_leave(s->disk_tier);
}

int mc_store_unmount_local_disk_segment(mc_store_t *s, uint64_t grace_s) {
    int rc;
    MC__STORE_HELD(s, rc, mc__disk_leave_impl(s));
    /* Outside the store's hold, so that close() need not wait for the grace period. */
    if (rc == 0 && grace_s > 0)
        mc__grace_sleep(grace_s);
    return rc;
}

void mc__disk_tier_stop(mc__disk_tier_t *t) {
    if (!t)
        return;
    mc__cond_raise(&t->mu, &t->cv, &t->stop);
    if (t->worker_started)
        pthread_join(t->worker, NULL);
    if (t->promoter_started)
        pthread_join(t->promoter, NULL);
    for (size_t i = 0; i < t->pq_n; i++)
        mc__free(t->pq[i]);
    mc__free(t->pq);
    mc__free(t->pbuf);
    mc__master_client_close(t->pmc);
    if (t->srv)
        mc__conn_server_stop(t->srv);
    mc__master_client_close(t->mc);
    for (size_t i = 0; i < t->n_readers; i++)
        mc__bstore_reader_close(t->readers[i]);
    mc__bstore_close(t->bs);
    mc__free(t->buf);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    mc__free(t);
}

void mc__disk_tier_io_mode(const mc__disk_tier_t *t, char *out, size_t cap) {
    char w[224];
    if (!out || cap == 0)
        return;
    mc__bstore_describe(t ? t->bs : NULL, w, sizeof(w));
    snprintf(out, cap, "%s; reads streamed through %s", w, t ? t->read_mode : "");
}

const char *mc__disk_tier_endpoint(const mc__disk_tier_t *t) {
    return t ? t->endpoint : "";
}

int mc__disk_tier_metrics(mc__disk_tier_t *t, mc_buf_t *out) {
    char line[256];
    if (!t->bs)
        return 0; /* the shared directory's tier: the master counts its copies */
    struct {
        const char *name, *type, *help;
        uint64_t v;
    } rows[] = {
        {"mooncake_disk_capacity_bytes", "gauge", "disk bytes this node's tier may take",
         t->capacity},
        {"mooncake_disk_used_bytes", "gauge", "disk bytes the bucket files take",
         mc__bstore_used(t->bs)},
        {"mooncake_disk_live_bytes", "gauge", "bytes of the objects on disk",
         mc__bstore_live(t->bs)},
        {"mooncake_disk_objects", "gauge", "objects on disk", mc__bstore_count(t->bs)},
        {"mooncake_disk_reads_total", "counter", "disk objects served to readers",
         atomic_load(&t->reads)},
        {"mooncake_disk_read_bytes_total", "counter", "bytes served from disk",
         atomic_load(&t->read_bytes)},
        {"mooncake_disk_read_misses_total", "counter", "reads of objects no longer on disk",
         atomic_load(&t->read_misses)},
        {"mooncake_disk_checksum_failures_total", "counter",
         "disk objects that failed their checksum (deleted, never served)",
         atomic_load(&t->checksum_failures)},
        {"mooncake_disk_damaged_spans_total", "counter",
         "damaged spans of bucket files stepped over by the rescan at start (never served)",
         mc__bstore_damaged(t->bs)},
        {"mooncake_disk_damaged_bytes_total", "counter", "bytes of those damaged spans",
         mc__bstore_damaged_bytes(t->bs)},
        {"mooncake_disk_offloads_total", "counter", "objects copied from memory to disk",
         atomic_load(&t->offloads)},
        {"mooncake_disk_offload_bytes_total", "counter", "bytes copied from memory to disk",
         atomic_load(&t->offload_bytes)},
        {"mooncake_disk_offload_failures_total", "counter", "offloads that failed",
         atomic_load(&t->offload_failures)},
        {"mooncake_disk_deletes_total", "counter", "copies deleted at the master's request",
         atomic_load(&t->deletes)},
        {"mooncake_disk_lru_evictions_total", "counter", "copies evicted to make room",
         atomic_load(&t->lru_evictions)},
        {"mooncake_disk_promotions_total", "counter", "copies put back into memory",
         atomic_load(&t->promotions)},
        {"mooncake_disk_promotion_failures_total", "counter", "promotions that failed",
         atomic_load(&t->promotion_failures)},
        {"mooncake_disk_announces_total", "counter",
         "times this node told the master everything its disk holds", atomic_load(&t->announces)},
        {"mooncake_disk_stale_copies_total", "counter",
         "copies deleted because the master holds a newer value (or none)",
         atomic_load(&t->stale_copies)},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        int n = snprintf(line, sizeof(line), "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", rows[i].name,
                         rows[i].help, rows[i].name, rows[i].type, rows[i].name,
                         (unsigned long long)rows[i].v);
        mc__buf_put(out, line, (size_t)n);
    }
    return out->failed ? MC_ERR_INTERNAL_ERROR : 0;
}
