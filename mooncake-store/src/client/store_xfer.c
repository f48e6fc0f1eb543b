/* Data movement between caller memory and replicas: registered memory goes straight to the
 * engine; anything else is copied through staging blocks (or registered for the call when the
 * client has no staging buffer). */
#include <string.h>

#include "client/store_disk.h"
#include "client/store_internal.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/log.h"

/* Staged copies move in pieces this large, so big objects need no big staging buffer and several
 * threads can stage at once. */
#define MC__STAGE_CHUNK (4u << 20)
#define MC__STAGE_MIN (64u << 10)
/* How long a staged copy waits for staging space that other calls hold before it registers the
 * caller's memory for itself instead. Short: the space may be held by this very call (a batch
 * whose result buffers fill the staging buffer), and then waiting could only end in a miss. */
#define MC__STAGE_WAIT_MS 200
#define MC__MAX_REQS 64

/* ---- moving bytes ---- */

/* With seg_rw held. */
static int mc__replica_in_segment(const mc_store_t *s, const mc__replica_desc_t *d) {
    uint64_t seg = (uint64_t)(uintptr_t)s->segment;
    return s->segment && d->epoch == s->segment_epoch &&
           strcmp(d->segment_name, s->hostname) == 0 && d->addr >= seg &&
           d->size <= s->segment_size && d->addr - seg <= s->segment_size - d->size;
}

int mc__store_replica_is_local(mc_store_t *s, const mc__replica_desc_t *d) {
    int yes;
    pthread_rwlock_rdlock(&s->seg_rw);
    yes = mc__replica_in_segment(s, d);
    pthread_rwlock_unlock(&s->seg_rw);
    return yes;
}

int mc__store_local_copy(mc_store_t *s, int opcode, const mc__replica_desc_t *d, uint64_t off,
                         void *local, size_t len) {
    int rc;
    /* The engine holds the buffer for the copy and copies only the incarnation the replica
     * names (its epoch), so a new incarnation switched in meanwhile is never written or read as
     * the old one; a placement of another client with the same epoch cannot pass the name. */
    if (d->epoch == 0 || strcmp(d->segment_name, s->hostname) != 0 || off > d->size ||
        len > d->size - off)
        return MC_ERR_TRANSFER_FAIL;
    if (len == 0)
        return 0;
    rc = mc_engine_local_copy(s->engine, opcode, local, d->addr + off, len, d->epoch);
    return mc__store_engine_code_for(rc, MC__ENG_TRANSFER);
}

int mc__store_stage_copy(mc_store_t *s, int to_block, uint8_t *blk, void *user, size_t n) {
    int rc;
    if (n == 0)
        return 0;
    rc = mc_engine_local_copy(s->engine, to_block ? MC_OPCODE_WRITE : MC_OPCODE_READ, user,
                              (uint64_t)(uintptr_t)blk, n, 0);
    if (rc == 0)
        return 0;
    MC_ERROR("store: copying %zu bytes %s the caller's memory at %p failed: %s", n,
             to_block ? "from" : "into", user, mc_strerror(rc));
    /* the caller's buffer, not a peer, failed: no segment is suspected, no placement retried */
    return MC_ERR_INVALID_PARAMS;
}

typedef struct mc__mover {
    mc_store_t *s;
    int opcode;
    const mc__replica_desc_t *reps;
    size_t nreps;
    mc_segment_id_t ids[MC_MP_MAX_REPLICA_NUM];
    int local[MC_MP_MAX_REPLICA_NUM]; /* the replica lies in our own segment */
    uint8_t *failed;                  /* the caller's, or NULL: replicas whose transfer failed */
    mc_request_t reqs[MC__MAX_REQS];
    uint8_t req_rep[MC__MAX_REQS]; /* which replica each request moves */
    size_t nreqs;
} mc__mover_t;

int mc__store_local_fault(int err) {
    return err == MC_ERR_MEMORY || err == MC_ERR_DEVICE_NOT_FOUND;
}

static int mc__flush(mc__mover_t *m) {
    int errors[MC__MAX_REQS];
    int rc = 0, peer_fault = 0;
    if (m->nreqs)
        rc = mc_engine_transfer_sync_each_ex(m->s->engine, m->reqs, m->nreqs, errors,
                                             mc__store_submit_flags(m->s));
    for (size_t i = 0; rc != 0 && i < m->nreqs; i++) {
        if (errors[i] == 0 || mc__store_local_fault(errors[i]))
            continue;
        peer_fault = 1;
        if (m->failed && !m->failed[m->req_rep[i]])
            m->failed[m->req_rep[i]] =
                errors[i] == MC_ERR_ADDRESS_NOT_REGISTERED ? MC__REP_REFUSED : MC__REP_UNREACHABLE;
    }
    m->nreqs = 0;
    if (rc != 0 && !peer_fault) {
        MC_ERROR("store: our own memory could not be copied: %s", mc_strerror(rc));
        return MC_ERR_INVALID_PARAMS; /* no segment suspected, no placement retried */
    }
    if (rc != 0) /* reported by the caller, which knows which segments were involved */
        MC_DEBUG("store: transfer failed: %s", mc_strerror(rc));
    return mc__store_engine_code_for(rc, MC__ENG_TRANSFER);
}

/* local (registered) bytes <-> object bytes [off, off+len) of every replica. */
static int mc__add(mc__mover_t *m, void *local, uint64_t off, size_t len) {
    for (size_t r = 0; r < m->nreps; r++) {
        int rc;
        if (m->local[r]) {
            /* Our own segment: a plain copy does what the engine would. */
            rc = mc__store_local_copy(m->s, m->opcode, &m->reps[r], off, local, len);
            if (rc != 0)
                return rc;
            continue;
        }
        if (m->nreqs == MC__MAX_REQS && (rc = mc__flush(m)) != 0)
            return rc;
        m->reqs[m->nreqs].opcode = m->opcode;
        m->reqs[m->nreqs].source = local;
        m->reqs[m->nreqs].target_id = m->ids[r];
        m->reqs[m->nreqs].target_offset = m->reps[r].addr + off;
        m->reqs[m->nreqs].length = len;
        m->reqs[m->nreqs].target_epoch = m->reps[r].epoch;
        m->req_rep[m->nreqs] = (uint8_t)r;
        m->nreqs++;
    }
    return 0;
}

/* No staging buffer (a pure storage node): register the caller's memory for this call only. */
static int mc__move_registered_once(mc__mover_t *m, uint8_t *user, uint64_t off, size_t len) {
    int rc = mc_engine_register_memory(m->s->engine, user, len, "*");
    if (rc != 0) {
        MC_ERROR("store: cannot register caller memory: %s", mc_strerror(rc));
        return mc__store_engine_code(rc);
    }
    rc = mc__add(m, user, off, len);
    if (rc == 0)
        rc = mc__flush(m);
    mc_engine_unregister_memory(m->s->engine, user);
    return rc;
}

static int mc__move_staged(mc__mover_t *m, uint8_t *user, uint64_t off, size_t len) {
    mc_store_t *s = m->s;
    while (len > 0) {
        size_t want = len < MC__STAGE_CHUNK ? len : MC__STAGE_CHUNK;
        size_t min = want < MC__STAGE_MIN ? want : MC__STAGE_MIN;
        size_t got = 0;
        int rc;
        uint8_t *blk = mc__staging_alloc_range(&s->staging, min, want, MC__STAGE_WAIT_MS, &got);
        if (!blk) {
            MC_DEBUG("store: no staging space for %zu bytes; registering the caller's memory", min);
            return mc__move_registered_once(m, user, off, len);
        }
        rc = m->opcode == MC_OPCODE_WRITE ? mc__store_stage_copy(s, 1, blk, user, got) : 0;
        if (rc == 0)
            rc = mc__add(m, blk, off, got);
        if (rc == 0)
            rc = mc__flush(m);
        if (rc == 0 && m->opcode == MC_OPCODE_READ)
            rc = mc__store_stage_copy(s, 0, blk, user, got);
        mc__staging_free(&s->staging, blk, got);
        if (rc != 0)
            return rc;
        user += got;
        off += got;
        len -= got;
    }
    return 0;
}

int mc__store_move(mc_store_t *s, int opcode, const mc_store_iov_t *iov, size_t iovcnt,
                   const mc__replica_desc_t *reps, size_t nreps) {
    return mc__store_move_each(s, opcode, iov, iovcnt, reps, nreps, NULL);
}

int mc__store_move_each(mc_store_t *s, int opcode, const mc_store_iov_t *iov, size_t iovcnt,
                        const mc__replica_desc_t *reps, size_t nreps, uint8_t *failed) {
    mc__mover_t *m = NULL;
    uint64_t off = 0;
    int all_local;
    int rc = MC_ERR_INVALID_PARAMS;

    if (nreps == 0 || nreps > MC_MP_MAX_REPLICA_NUM)
        return MC_ERR_INVALID_REPLICA;
    m = mc__calloc(1, sizeof(*m));
    if (!m)
        return MC_ERR_INTERNAL_ERROR;
    m->s = s;
    m->opcode = opcode;
    m->reps = reps;
    m->nreps = nreps;
    m->failed = failed;
    for (size_t r = 0; r < nreps; r++) {
        m->local[r] = mc__store_replica_is_local(s, &reps[r]);
        if (!m->local[r]) {
            rc = mc__store_segment_id(s, reps[r].segment_name, &m->ids[r]);
            if (rc != 0) {
                if (failed)
                    failed[r] = MC__REP_UNREACHABLE;
                rc = MC_ERR_TRANSFER_FAIL;
                goto out;
            }
        }
    }
    all_local = 1;
    for (size_t r = 0; r < nreps; r++)
        all_local &= m->local[r];
    rc = 0;
    for (size_t i = 0; i < iovcnt && rc == 0; i++) {
        uint8_t *p = iov[i].base;
        size_t len = iov[i].len;
        if (len == 0)
            continue;
        for (size_t r = 0; r < nreps; r++) {
            if (off + len > reps[r].size) {
                rc = MC_ERR_INVALID_PARAMS;
                goto out;
            }
        }
        if (all_local || s->direct_mem || mc__store_is_registered(s, p, len))
            rc = mc__add(m, p, off, len);
        else if (mc__staging_present(&s->staging))
            rc = mc__move_staged(m, p, off, len);
        else
            rc = mc__move_registered_once(m, p, off, len);
        off += len;
    }
    if (rc == 0)
        rc = mc__flush(m);
out:
    if (rc == MC_ERR_TRANSFER_FAIL && m) {
        for (size_t r = 0; r < nreps; r++)
            if (!m->local[r])
                mc__store_forget_segment(s, reps[r].segment_name);
    }
    mc__free(m);
    return rc;
}

int64_t mc__store_read_replicas(mc_store_t *s, const mc__key_replicas_t *kr,
                                const mc_store_iov_t *iov, size_t iovcnt) {
    mc_store_iov_t *sub = NULL;
    size_t cap = 0, nsub = 0;
    uint64_t left = kr->size;
    int64_t rc = MC_ERR_OBJECT_NOT_FOUND;
    uint32_t n = kr->n_replicas < MC_MP_MAX_REPLICA_NUM ? kr->n_replicas : MC_MP_MAX_REPLICA_NUM;
    int tried[MC_MP_MAX_REPLICA_NUM] = {0};

    if (kr->code != 0)
        return kr->code;
    for (size_t i = 0; i < iovcnt; i++)
        cap += iov[i].len;
    if (cap < kr->size)
        return MC_ERR_BUFFER_OVERFLOW;
    /* Only the object's bytes: the caller's buffers may be larger. */
    sub = mc__calloc(iovcnt ? iovcnt : 1, sizeof(*sub));
    if (!sub)
        return MC_ERR_INTERNAL_ERROR;
    for (size_t i = 0; i < iovcnt && left > 0; i++) {
        sub[nsub].base = iov[i].base;
        sub[nsub].len = iov[i].len < left ? iov[i].len : (size_t)left;
        left -= sub[nsub].len;
        nsub++;
    }
    /* Ours first (a memcpy), then healthy peers in the master's order, then peers that failed
     * lately: a dead owner stays in replica lists until the master expires it, and trying it
     * first would cost every read a failed transfer. */
    for (int pass = 0; pass < 3; pass++) {
        for (uint32_t r = 0; r < n; r++) {
            const mc__replica_desc_t *d = &kr->replicas[r];
            int ours = strcmp(d->segment_name, s->hostname) == 0;
            int suspect;
            if (tried[r] || d->status != MC_MP_REPLICA_COMPLETE || (pass == 0 && !ours))
                continue;
            suspect = !ours && mc__store_is_suspect(s, d->segment_name);
            if (pass == 1 && suspect)
                continue;
            tried[r] = 1;
            rc = mc__store_move(s, MC_OPCODE_READ, sub, nsub, d, 1);
            if (rc == 0) {
                if (suspect)
                    mc__store_suspect_clear(s, d->segment_name);
                rc = (int64_t)kr->size;
                goto out;
            }
            if (rc == MC_ERR_TRANSFER_FAIL && !ours)
                mc__store_suspect_failed(s, d->segment_name, (int)rc);
            else
                MC_WARN("store: reading a replica from %s failed (%s); trying another",
                        d->segment_name, mc_store_strerror((int)rc));
        }
    }
    /* Last, LOCAL_DISK copies: the owning node reads and verifies them and sends the bytes. */
    for (uint32_t r = 0; kr->key && r < n; r++) {
        const mc__replica_desc_t *d = &kr->replicas[r];
        int64_t drc;
        if (d->status != MC_MP_REPLICA_DISK)
            continue;
        drc = mc__store_disk_read(s, kr->key, d, sub, nsub, kr->size);
        if (drc == 0) {
            rc = (int64_t)kr->size;
            goto out;
        }
        MC_WARN("store: reading %s from the disk of %s failed (%s)", kr->key, d->segment_name,
                mc_store_strerror((int)drc));
        /* The node answered: its answer is what the reader gets, unless memory gave one. */
        if (rc == MC_ERR_OBJECT_NOT_FOUND && drc != MC_ERR_TRANSFER_FAIL)
            goto out_code;
        rc = MC_ERR_TRANSFER_FAIL;
    }
    if (rc != MC_ERR_OBJECT_NOT_FOUND)
        rc = MC_ERR_TRANSFER_FAIL;
out:
    mc__free(sub);
    return rc;
out_code:
    mc__free(sub);
    return MC_ERR_OBJECT_NOT_FOUND;
}
