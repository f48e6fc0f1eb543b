/* Data movement for the batch calls: the bytes of many keys go to the engine as one batch (or a
 * few bounded chunks), so it runs them concurrently over its pooled connections instead of paying
 * one round trip per key. Only the common case is batched (a healthy peer replica, registered
 * memory or a free staging block); everything else, and every key whose batched transfer failed,
 * takes the per-key path, which keeps replica order, failover and staging waits in one place. */
#include <string.h>

#include "client/store_internal.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/log.h"

/* Requests per engine batch: enough to keep every pooled connection busy, small enough that a
 * chunk's bookkeeping stays a fixed-size allocation. */
#define MC__BATCH_REQS 256
/* Larger objects take the per-key path, which stages them in pieces instead of holding one
 * block of the shared staging buffer for the whole object. */
#define MC__BATCH_STAGE_MAX (1u << 20)

typedef struct mc__bkey {
    size_t item;         /* index into the caller's arrays */
    size_t first, nreqs; /* its requests in the chunk */
    uint8_t *blk;        /* staging block, NULL when the bytes move zero-copy */
    size_t blk_len;
    int rep; /* read: the replica read; write: -1 (every replica) */
} mc__bkey_t;

typedef struct mc__chunk {
    mc_store_t *s;
    int opcode;
    const mc__key_replicas_t *kr; /* indexed like the caller's results */
    const mc_store_item_t *items;
    const size_t *idx; /* write: kr[j] belongs to items[idx[j]]; read: NULL (same index) */
    mc_request_t reqs[MC__BATCH_REQS];
    size_t nreqs;
    mc__bkey_t keys[MC__BATCH_REQS];
    size_t nkeys;
    int nstaged;
    int staging_out; /* staging ran out: the remaining keys take the per-key path */
    uint8_t *defer;  /* per key: 1 = run it through the per-key path at the end */
} mc__chunk_t;

static const mc_store_item_t *mc__item_of(const mc__chunk_t *c, size_t k) {
    return &c->items[c->idx ? c->idx[k] : k];
}

/* Submits the chunk as one engine batch and waits for it; ok[k] tells whether every request of
 * key k completed (1), or a request failed (0), or failed copying our own memory (-1: the
 * caller's buffer, not the peer). Non-zero when the batch could not be submitted at all. */
static int mc__chunk_run(mc__chunk_t *c, int *ok) {
    mc_engine_t *e = c->s->engine;
    mc_batch_id_t id = 0;
    int rc;
    for (size_t k = 0; k < c->nkeys; k++)
        ok[k] = c->keys[k].nreqs == 0;
    if (c->nreqs == 0)
        return 0;
    rc = mc_engine_batch_alloc(e, c->nreqs, &id);
    if (rc != 0)
        return rc;
    rc = mc_engine_batch_submit_ex(e, id, c->reqs, c->nreqs,
                                   mc__store_submit_flags(c->s) | MC_SUBMIT_CALLER_WAITS);
    if (rc == 0) {
        /* Caller memory may not be touched after we return: wait for every task to end. */
        while (mc_engine_batch_wait(e, id, -1) == MC_ERR_BATCH_BUSY)
            ;
        for (size_t k = 0; k < c->nkeys; k++) {
            const mc__bkey_t *b = &c->keys[k];
            ok[k] = 1;
            for (size_t q = b->first; q < b->first + b->nreqs && ok[k]; q++) {
                mc_task_state_t st;
                ok[k] =
                    mc_engine_task_status(e, id, q, &st) == 0 && st.status == MC_STATUS_COMPLETED;
                if (!ok[k] && mc__store_local_fault(st.error))
                    ok[k] = -1;
            }
        }
    } else {
        MC_DEBUG("store: batch submit of %zu requests failed: %s", c->nreqs, mc_strerror(rc));
    }
    (void)mc_engine_batch_free(e, id);
    return rc;
}

/* Copies a staging block out to the caller's parts (object bytes only), or the parts into it
 * (to_block); the parts may be GPU memory (mc__store_stage_copy). 0 or its code. */
static int mc__unstage(mc_store_t *s, const mc_store_item_t *it, uint8_t *blk, size_t len,
                       int to_block) {
    for (size_t i = 0; i < it->iovcnt && len > 0; i++) {
        size_t n = it->iov[i].len < len ? it->iov[i].len : len;
        int rc = mc__store_stage_copy(s, to_block, blk, it->iov[i].base, n);
        if (rc)
            return rc;
        blk += n;
        len -= n;
    }
    return 0;
}

/* A key whose batched transfer failed: its peers are treated as mc__store_move and
 * mc__store_read_replicas treat them (reopened next time; a read peer becomes suspect, so the
 * per-key retry reads the other replicas first). */
static void mc__key_failed(mc__chunk_t *c, const mc__bkey_t *b) {
    const mc__key_replicas_t *kr = &c->kr[b->item];
    if (b->rep >= 0) {
        mc__store_suspect_failed(c->s, kr->replicas[b->rep].segment_name, MC_ERR_TRANSFER_FAIL);
        mc__store_forget_segment(c->s, kr->replicas[b->rep].segment_name);
        return;
    }
    for (uint32_t r = 0; r < kr->n_replicas; r++)
        if (!mc__store_replica_is_local(c->s, &kr->replicas[r]))
            mc__store_forget_segment(c->s, kr->replicas[r].segment_name);
}

/* Runs the chunk and settles each of its keys: done, failed, or deferred to the per-key path
 * (reads that failed, to fail over; anything when the batch never started). */
static void mc__chunk_flush(mc__chunk_t *c, int64_t *rres, int *wres) {
    int ok[MC__BATCH_REQS];
    int rc = mc__chunk_run(c, ok);
    for (size_t k = 0; k < c->nkeys; k++) {
        mc__bkey_t *b = &c->keys[k];
        if (ok[k] < 0) {
            /* our memory failed: a read fails here, a write is revoked and placed again on its
             * own (which reports the caller's fault); no segment is suspected */
            if (b->blk)
                mc__staging_free(&c->s->staging, b->blk, b->blk_len);
            if (rres)
                rres[b->item] = MC_ERR_INVALID_PARAMS;
            else
                wres[b->item] = MC_ERR_TRANSFER_FAIL;
            continue;
        }
        if (ok[k] > 0 && c->opcode == MC_OPCODE_READ && b->blk &&
            mc__unstage(c->s, mc__item_of(c, b->item), b->blk, b->blk_len, 0) != 0) {
            /* the bytes came, the caller's memory did not take them: this key alone fails */
            mc__staging_free(&c->s->staging, b->blk, b->blk_len);
            rres[b->item] = MC_ERR_INVALID_PARAMS;
            continue;
        }
        if (b->blk)
            mc__staging_free(&c->s->staging, b->blk, b->blk_len);
        if (ok[k] && rres)
            rres[b->item] = (int64_t)c->kr[b->item].size;
        else if (ok[k])
            wres[b->item] = 0;
        if (!ok[k] && rc == 0)
            mc__key_failed(c, b);
        if (!ok[k] && (rc != 0 || c->opcode == MC_OPCODE_READ))
            c->defer[b->item] = 1;
        else if (!ok[k])
            wres[b->item] = MC_ERR_TRANSFER_FAIL; /* a failed put is revoked, not retried */
    }
    c->nreqs = 0;
    c->nkeys = 0;
    c->nstaged = 0;
}

/* A staging block of len bytes for the next key; when the chunk's own blocks fill the buffer the
 * chunk runs first to give them back. NULL: the key takes the per-key path (and, when staging is
 * exhausted even so, every later staged key of this call too). */
static uint8_t *mc__chunk_stage(mc__chunk_t *c, size_t len, int64_t *rres, int *wres) {
    uint8_t *blk;
    if (c->staging_out || !mc__staging_present(&c->s->staging) || len > MC__BATCH_STAGE_MAX)
        return NULL; /* a large object alone takes the per-key path; the rest stay batched */
    blk = mc__staging_try_alloc(&c->s->staging, len);
    if (!blk && c->nstaged > 0) {
        mc__chunk_flush(c, rres, wres);
        blk = mc__staging_try_alloc(&c->s->staging, len);
    }
    c->staging_out = blk == NULL;
    return blk;
}

/* Adds one request per (part, replica) for key k; the chunk has room for all of them. */
static void mc__chunk_add(mc__chunk_t *c, uint8_t *src, uint64_t off, size_t len,
                          const mc_segment_id_t *ids, const mc__replica_desc_t *const *reps,
                          size_t nreps) {
    for (size_t r = 0; r < nreps; r++) {
        mc_request_t *q = &c->reqs[c->nreqs++];
        q->opcode = c->opcode;
        q->source = src;
        q->target_id = ids[r];
        q->target_offset = reps[r]->addr + off;
        q->length = len;
        q->target_epoch = reps[r]->epoch;
    }
}

static int mc__all_registered(mc_store_t *s, const mc_store_iov_t *iov, size_t iovcnt) {
    for (size_t i = 0; i < iovcnt; i++)
        if (iov[i].len && !mc__store_is_registered(s, iov[i].base, iov[i].len))
            return 0;
    return 1;
}

/* Queues the bytes of key k (object size `size`, first `size` bytes of its parts) between the
 * caller's memory and the given peer replicas: zero-copy when the parts are registered (or the
 * engine moves any memory, s->direct_mem), else
 * through one staging block (copied in here for writes). 0, or 1 when the key must take the
 * per-key path. */
static int mc__chunk_key(mc__chunk_t *c, size_t k, uint64_t size, int rep,
                         const mc_segment_id_t *ids, const mc__replica_desc_t *const *reps,
                         size_t nreps, int64_t *rres, int *wres) {
    const mc_store_item_t *it = mc__item_of(c, k);
    int zero_copy = c->s->direct_mem || mc__all_registered(c->s, it->iov, it->iovcnt);
    size_t need = (zero_copy ? it->iovcnt : 1) * nreps;
    mc__bkey_t *b;
    uint8_t *blk = NULL;
    uint64_t off = 0;

    if (need > MC__BATCH_REQS)
        return 1;
    if (c->nreqs + need > MC__BATCH_REQS || c->nkeys == MC__BATCH_REQS)
        mc__chunk_flush(c, rres, wres);
    if (!zero_copy && !(blk = mc__chunk_stage(c, (size_t)size, rres, wres)))
        return 1;
    /* a write's parts go into the block now; one that cannot be copied takes the per-key path,
     * which reports it */
    if (blk && c->opcode == MC_OPCODE_WRITE && mc__unstage(c->s, it, blk, (size_t)size, 1) != 0) {
        mc__staging_free(&c->s->staging, blk, (size_t)size);
        return 1;
    }
    b = &c->keys[c->nkeys++];
    memset(b, 0, sizeof(*b));
    b->item = k;
    b->first = c->nreqs;
    b->rep = rep;
    if (blk) {
        b->blk = blk;
        b->blk_len = (size_t)size;
        c->nstaged++;
        mc__chunk_add(c, blk, 0, (size_t)size, ids, reps, nreps);
    } else {
        for (size_t i = 0; i < it->iovcnt && off < size; i++) {
            size_t len = size - off < it->iov[i].len ? (size_t)(size - off) : it->iov[i].len;
            if (len)
                mc__chunk_add(c, it->iov[i].base, off, len, ids, reps, nreps);
            off += len;
        }
    }
    b->nreqs = c->nreqs - b->first;
    return 0;
}

/* The replica mc__store_read_replicas would read first, when it is a healthy peer (ours is a
 * memcpy and a suspect one needs its failover order: both take the per-key path); -1 if none. */
static int mc__read_choice(mc_store_t *s, const mc__key_replicas_t *kr) {
    uint32_t n = kr->n_replicas < MC_MP_MAX_REPLICA_NUM ? kr->n_replicas : MC_MP_MAX_REPLICA_NUM;
    for (uint32_t r = 0; r < n; r++)
        if (kr->replicas[r].status == MC_MP_REPLICA_COMPLETE &&
            strcmp(kr->replicas[r].segment_name, s->hostname) == 0)
            return -1;
    for (uint32_t r = 0; r < n; r++)
        if (kr->replicas[r].status == MC_MP_REPLICA_COMPLETE &&
            !mc__store_is_suspect(s, kr->replicas[r].segment_name))
            return (int)r;
    return -1;
}

/* Queues key i of a batch read; 1 when it takes the per-key path instead. */
static int mc__read_key(mc__chunk_t *c, size_t i, int64_t *res) {
    const mc__key_replicas_t *kr = &c->kr[i];
    const mc_store_item_t *it = &c->items[i];
    const mc__replica_desc_t *d;
    mc_segment_id_t id;
    uint64_t cap = 0;
    int r;
    if (kr->code != 0 || kr->size == 0)
        return 1;
    for (size_t p = 0; p < it->iovcnt; p++)
        cap += it->iov[p].len;
    if (cap < kr->size || (r = mc__read_choice(c->s, kr)) < 0)
        return 1;
    d = &kr->replicas[r];
    if (d->size < kr->size || mc__store_segment_id(c->s, d->segment_name, &id) != 0)
        return 1;
    return mc__chunk_key(c, i, kr->size, r, &id, &d, 1, res, NULL);
}

static mc__chunk_t *mc__chunk_new(mc_store_t *s, int opcode, size_t n, const mc__key_replicas_t *kr,
                                  const mc_store_item_t *items, const size_t *idx) {
    mc__chunk_t *c = mc__calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->defer = mc__calloc(n, 1);
    if (!c->defer) {
        mc__free(c);
        return NULL;
    }
    c->s = s;
    c->opcode = opcode;
    c->kr = kr;
    c->items = items;
    c->idx = idx;
    return c;
}

/* One key on its own path (no batch): a read's size or code, a write's code. */
static int64_t mc__key_alone(mc_store_t *s, int opcode, const mc__key_replicas_t *kr,
                             const mc_store_item_t *it) {
    if (opcode == MC_OPCODE_READ)
        return mc__store_read_replicas(s, kr, it->iov, it->iovcnt);
    return mc__store_move(s, opcode, it->iov, it->iovcnt, kr->replicas, kr->n_replicas);
}

/* Runs what is still queued, then the deferred keys one by one (after the batch, so these never
 * wait for staging blocks the batch still holds), and frees c. Results go to rres (reads) or
 * wres (writes), indexed like c->kr. */
static void mc__chunk_finish(mc__chunk_t *c, size_t n, int64_t *rres, int *wres) {
    mc__chunk_flush(c, rres, wres);
    for (size_t i = 0; i < n; i++) {
        if (!c->defer[i])
            continue;
        int64_t r = mc__key_alone(c->s, c->opcode, &c->kr[i], mc__item_of(c, i));
        if (rres)
            rres[i] = r;
        else
            wres[i] = (int)r;
    }
    mc__free(c->defer);
    mc__free(c);
}

void mc__store_batch_read(mc_store_t *s, const mc__key_replicas_t *kr, const mc_store_item_t *items,
                          size_t n, int64_t *results) {
    mc__chunk_t *c = mc__chunk_new(s, MC_OPCODE_READ, n, kr, items, NULL);
    for (size_t i = 0; i < n; i++) {
        results[i] = 0;
        if ((items[i].iovcnt && !items[i].iov) ||
            mc__store_iovs_overrun(s, items[i].iov, items[i].iovcnt))
            results[i] = MC_ERR_INVALID_PARAMS;
        else if (!c) /* no memory for the batch: every key on its own */
            results[i] = mc__store_read_replicas(s, &kr[i], items[i].iov, items[i].iovcnt);
        else if (mc__read_key(c, i, results) != 0)
            c->defer[i] = 1;
    }
    if (c)
        mc__chunk_finish(c, n, results, NULL);
}

/* Copies the parts straight into a replica in our own segment, as mc__store_move does. */
static int mc__write_local(mc_store_t *s, const mc__replica_desc_t *d, const mc_store_item_t *it) {
    uint64_t off = 0;
    for (size_t i = 0; i < it->iovcnt; i++) {
        int rc = mc__store_local_copy(s, MC_OPCODE_WRITE, d, off, it->iov[i].base, it->iov[i].len);
        if (rc != 0)
            return rc;
        off += it->iov[i].len;
    }
    return 0;
}

/* Queues key j of a batch write to all its peer replicas (ours are written here); 1 when it
 * takes the per-key path instead. res[j] is set when nothing was left to queue. */
static int mc__write_key(mc__chunk_t *c, size_t j, int *res) {
    const mc__key_replicas_t *kr = &c->kr[j];
    const mc_store_item_t *it = mc__item_of(c, j);
    const mc__replica_desc_t *reps[MC_MP_MAX_REPLICA_NUM];
    mc_segment_id_t ids[MC_MP_MAX_REPLICA_NUM];
    int local[MC_MP_MAX_REPLICA_NUM];
    size_t nremote = 0;
    uint64_t total = 0;
    if (kr->n_replicas > MC_MP_MAX_REPLICA_NUM)
        return 1;
    for (size_t i = 0; i < it->iovcnt; i++)
        total += it->iov[i].len;
    for (uint32_t r = 0; r < kr->n_replicas; r++) {
        const mc__replica_desc_t *d = &kr->replicas[r];
        if (total > d->size)
            return 1;
        local[r] = mc__store_replica_is_local(c->s, d);
        if (local[r])
            continue;
        if (mc__store_segment_id(c->s, d->segment_name, &ids[nremote]) != 0)
            return 1;
        reps[nremote++] = d;
    }
    for (uint32_t r = 0; r < kr->n_replicas; r++) {
        if (local[r] && mc__write_local(c->s, &kr->replicas[r], it) != 0) {
            res[j] = MC_ERR_TRANSFER_FAIL; /* our segment changed incarnation under the put */
            return 0;
        }
    }
    if (nremote == 0) {
        res[j] = 0;
        return 0;
    }
    return mc__chunk_key(c, j, total, -1, ids, reps, nremote, NULL, res);
}

void mc__store_batch_write(mc_store_t *s, const mc_store_item_t *items, const size_t *idx, size_t m,
                           const mc__key_replicas_t *kr, int *results) {
    mc__chunk_t *c = mc__chunk_new(s, MC_OPCODE_WRITE, m, kr, items, idx);
    for (size_t j = 0; j < m; j++) {
        const mc_store_item_t *it = &items[idx[j]];
        results[j] = kr[j].code;
        if (results[j] == 0 && kr[j].n_replicas == 0)
            results[j] = MC_ERR_NO_AVAILABLE_HANDLE; /* started nothing: nothing to revoke */
        else if (results[j] == 0 && !c)
            results[j] = mc__store_move(s, MC_OPCODE_WRITE, it->iov, it->iovcnt, kr[j].replicas,
                                        kr[j].n_replicas);
        else if (results[j] == 0 && mc__write_key(c, j, results) != 0)
            c->defer[j] = 1;
    }
    if (c)
        mc__chunk_finish(c, m, NULL, results);
}

int mc__put_batch_init(mc_store_t *s, size_t n, int have_arrays, const mc_replicate_config_t *rc,
                       mc__put_batch_t *b) {
    int code = mc__store_batch_check(s, n, have_arrays);
    memset(b, 0, sizeof(*b));
    if (code != 0)
        return code;
    if (mc__store_wire_config(rc, &b->wc) != 0)
        return MC_ERR_INVALID_PARAMS;
    if (n == 0)
        return 0;
    b->keys = mc__calloc(n, sizeof(*b->keys));
    b->lens = mc__calloc(n, sizeof(*b->lens));
    b->idx = mc__calloc(n, sizeof(*b->idx));
    b->kr = mc__calloc(n, sizeof(*b->kr));
    return b->keys && b->lens && b->idx && b->kr ? 0 : MC_ERR_INTERNAL_ERROR;
}

void mc__put_batch_free(mc__put_batch_t *b) {
    mc__free(b->kr);
    mc__free(b->idx);
    mc__free(b->lens);
    mc__free(b->keys);
}
