/* Data movement between caller memory and replicas: registered memory goes straight to the
 * engine; anything else is copied through staging blocks (or registered for the call when the
 * client has no staging buffer). */
#include <stdio.h>
#include <string.h>

#include "client/backend.h"
#include "client/direct.h"
#include "client/store_disk.h"
#include "client/store_internal.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/log.h"
#include "mooncake/common/mem_probe.h"
#include "mooncake/common/time.h"

/* Staged copies move in pieces this large, so big objects need no big staging buffer and several
 * threads can stage at once. */
#define MC__STAGE_CHUNK (4u << 20)
#define MC__STAGE_MIN (64u << 10)
/* How long a staged copy waits for staging space that other calls hold before it registers the
 * caller's memory for itself instead. Short: the space may be held by this very call (a batch
 * whose result buffers fill the staging buffer), and then waiting could only end in a miss. */
#define MC__STAGE_WAIT_MS 200
#define MC__MAX_REQS 64
/* Long enough that a burst of reads after a peer died pays for one failed attempt, short enough
 * that a peer that failed only briefly is soon read from again; the warning interval keeps a
 * dead peer that is the last replica of many objects to one line every few seconds. */
#define MC__SUSPECT_MS 3000
#define MC__SUSPECT_WARN_MS 5000

int mc__store_check_key(const char *key) {
    size_t n;
    if (!key)
        return MC_ERR_INVALID_KEY;
    n = strnlen(key, MC_STORE_MAX_KEY_LEN + 1);
    if (n == 0 || n > MC_STORE_MAX_KEY_LEN)
        return MC_ERR_INVALID_KEY;
    return 0;
}

int mc__store_wire_config(const mc_replicate_config_t *rc, mc__replicate_config_t *out) {
    memset(out, 0, sizeof(*out));
    out->replica_num = 1;
    if (!rc)
        return 0;
    if (rc->replica_num < 1 || rc->replica_num > (int)MC_MP_MAX_REPLICA_NUM ||
        rc->preferred_segment_count > MC_MP_MAX_PREFERRED ||
        (rc->preferred_segment_count && !rc->preferred_segments) ||
        rc->with_soft_pin < MC_SOFT_PIN_PRESERVE || rc->with_soft_pin > MC_SOFT_PIN_DISABLE ||
        (rc->soft_pin_ttl_ms > 0 && rc->with_soft_pin != MC_SOFT_PIN_ENABLE))
        return MC_ERR_INVALID_PARAMS;
    out->replica_num = (uint32_t)rc->replica_num;
    out->flags = (uint8_t)((rc->with_soft_pin == MC_SOFT_PIN_ENABLE ? MC_MP_CFG_SOFT_PIN : 0) |
                           (rc->with_soft_pin == MC_SOFT_PIN_DISABLE ? MC_MP_CFG_SOFT_UNPIN : 0) |
                           (rc->with_hard_pin ? MC_MP_CFG_HARD_PIN : 0));
    out->soft_pin_ttl_ms = rc->soft_pin_ttl_ms > 0 ? (uint64_t)rc->soft_pin_ttl_ms : 0;
    for (size_t i = 0; i < rc->preferred_segment_count; i++) {
        const char *name = rc->preferred_segments[i];
        size_t n = name ? strlen(name) : 0;
        if (n == 0 || n > MC_MP_MAX_SEGMENT_NAME)
            return MC_ERR_INVALID_PARAMS;
        out->preferred[out->n_preferred].p = (const uint8_t *)name;
        out->preferred[out->n_preferred].len = (uint32_t)n;
        out->n_preferred++;
    }
    return 0;
}

/* ---- registered user buffers ---- */

unsigned mc__store_submit_flags(const mc_store_t *s) {
    return s->direct_mem ? MC_SUBMIT_UNREGISTERED_LOCAL : 0;
}

int mc__store_is_registered(mc_store_t *s, const void *p, size_t len) {
    uintptr_t a = (uintptr_t)p;
    /* the staging buffer is the common case and needs no lookup */
    if (s->staging_mem && a >= (uintptr_t)s->staging_mem &&
        a + len <= (uintptr_t)s->staging_mem + s->cfg.local_buffer_size)
        return 1;
    return s->be->is_registered(s, p, len);
}

int mc__direct_is_registered(mc_store_t *s, const void *p, size_t len) {
    return s->engine && len > 0 && mc_engine_is_registered(s->engine, p, len) == 0;
}

int mc__store_registered_overrun(mc_store_t *s, const void *p, size_t len) {
    /* Registered ranges never overlap, so the one holding p is the only one that could hold the
     * whole range. The whole range first: registered memory, the zero-copy fast path, then
     * takes one lookup. */
    return !mc__store_is_registered(s, p, len) && mc__store_is_registered(s, p, 1);
}

int mc__store_iovs_overrun(mc_store_t *s, const mc_store_iov_t *iov, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (iov[i].len && mc__store_registered_overrun(s, iov[i].base, iov[i].len))
            return 1;
    return 0;
}

/* Registered memory needs one lookup and no system call: the fast path of every zero-copy
 * caller. A range that starts in a registered buffer and runs past it is a caller's error
 * (the next bytes belong to someone else, if to anyone). Other memory is probed, since the
 * store moves unregistered memory as it is (tcp, shm) and a bad address would fault inside. */
static int mc__check_memory_impl(mc_store_t *s, const void *addr, size_t len, int writable) {
    if (len == 0)
        return 0;
    if (!addr || (uintptr_t)addr + len < (uintptr_t)addr)
        return MC_ERR_INVALID_PARAMS;
    if (mc__store_is_registered(s, addr, len))
        return 0;
    if (mc__store_is_registered(s, addr, 1))
        return MC_ERR_INVALID_PARAMS;
    return mc__mem_probe(addr, len, writable) == 0 ? 0 : MC_ERR_INVALID_PARAMS;
}

int mc_store_check_memory(mc_store_t *s, const void *addr, size_t len, int writable) {
    /* a dummy client too: its registrations are the pool ranges it mapped */
    int rc = mc__store_enter_any(s);
    if (rc != 0)
        return rc;
    rc = mc__check_memory_impl(s, addr, len, writable);
    mc__store_leave(s);
    return rc;
}

static int mc__register_buffer_impl(mc_store_t *s, void *addr, size_t len) {
    int rc = mc__store_ready(s);
    if (rc != 0)
        return rc;
    if (!addr || len == 0)
        return MC_ERR_INVALID_PARAMS;
    pthread_rwlock_wrlock(&s->reg_lock);
    if (s->nregs == s->regs_cap) {
        size_t cap = s->regs_cap ? s->regs_cap * 2 : 8;
        mc_store_iov_t *n = mc__realloc(s->regs, cap * sizeof(*n));
        if (!n) {
            rc = MC_ERR_INTERNAL_ERROR;
            goto out;
        }
        s->regs = n;
        s->regs_cap = cap;
    }
    rc = mc_engine_register_memory(s->engine, addr, len, "*");
    if (rc != 0) {
        MC_ERROR("store: registering %zu bytes at %p failed: %s", len, addr, mc_strerror(rc));
        rc = mc__store_engine_code(rc);
        goto out;
    }
    s->regs[s->nregs].base = addr;
    s->regs[s->nregs].len = len;
    s->nregs++;
out:
    pthread_rwlock_unlock(&s->reg_lock);
    return rc;
}

static int mc__unregister_buffer_impl(mc_store_t *s, void *addr) {
    int rc = mc__store_ready(s);
    size_t i;
    if (rc != 0)
        return rc;
    pthread_rwlock_wrlock(&s->reg_lock);
    for (i = 0; i < s->nregs && s->regs[i].base != addr; i++)
        ;
    if (i == s->nregs) {
        rc = MC_ERR_INVALID_PARAMS;
        goto out;
    }
    rc = mc__store_engine_code(mc_engine_unregister_memory(s->engine, addr));
    s->regs[i] = s->regs[s->nregs - 1];
    s->nregs--;
out:
    pthread_rwlock_unlock(&s->reg_lock);
    return rc;
}

/* ---- segment ids: the engine's (open-or-get), no copy here ---- */

int mc__store_segment_id(mc_store_t *s, const char *name, mc_segment_id_t *out) {
    int rc = mc_engine_open_segment(s->engine, name, out);
    /* The caller reports it, once per segment and interval (see mc__store_suspect_failed). */
    if (rc != 0)
        MC_DEBUG("store: cannot open segment %s: %s", name, mc_strerror(rc));
    return rc == 0 ? 0 : mc__store_engine_code_for(rc, MC__ENG_TRANSFER);
}

/* After a failed transfer the peer may have restarted: the engine re-fetches it next time. */
void mc__store_forget_segment(mc_store_t *s, const char *name) {
    mc_segment_id_t id = -1;
    if (mc_engine_segment_id(s->engine, name, &id) == 0)
        (void)mc_engine_close_segment(s->engine, id);
}

/* ---- suspect segments ---- */

static mc__suspect_t *mc__suspect_find(mc_store_t *s, const char *name) {
    for (size_t i = 0; i < MC__SUSPECTS; i++)
        if (s->suspects[i].until_ms && strcmp(s->suspects[i].name, name) == 0)
            return &s->suspects[i];
    return NULL;
}

int mc__store_is_suspect(mc_store_t *s, const char *name) {
    mc__suspect_t *e;
    int yes = 0;
    pthread_mutex_lock(&s->sus_mu);
    e = mc__suspect_find(s, name);
    yes = e && e->until_ms > mc__now_ms();
    pthread_mutex_unlock(&s->sus_mu);
    return yes;
}

void mc__store_suspect_failed(mc_store_t *s, const char *name, int rc) {
    uint64_t now = mc__now_ms();
    uint64_t quiet = 0;
    int warn = 0;
    mc__suspect_t *e;
    pthread_mutex_lock(&s->sus_mu);
    e = mc__suspect_find(s, name);
    if (!e) {
        /* A free slot, else the one whose suspicion ends first: the table stays bounded. */
        e = &s->suspects[0];
        for (size_t i = 0; i < MC__SUSPECTS && e->until_ms; i++)
            if (!s->suspects[i].until_ms || s->suspects[i].until_ms < e->until_ms)
                e = &s->suspects[i];
        memset(e, 0, sizeof(*e));
        snprintf(e->name, sizeof(e->name), "%s", name);
    }
    e->until_ms = now + MC__SUSPECT_MS;
    if (e->warned_ms == 0 || now - e->warned_ms >= MC__SUSPECT_WARN_MS) {
        warn = 1;
        quiet = e->quiet;
        e->warned_ms = now;
        e->quiet = 0;
    } else {
        e->quiet++;
    }
    pthread_mutex_unlock(&s->sus_mu);
    if (warn && quiet)
        MC_WARN("store: transfers with segment %s fail (%s; %llu more since the last report); "
                "reading other replicas first for %d s",
                name, mc_store_strerror(rc), (unsigned long long)quiet, MC__SUSPECT_MS / 1000);
    else if (warn)
        MC_WARN("store: transfers with segment %s fail (%s); reading other replicas first for "
                "%d s",
                name, mc_store_strerror(rc), MC__SUSPECT_MS / 1000);
}

void mc__store_suspect_clear(mc_store_t *s, const char *name) {
    mc__suspect_t *e;
    pthread_mutex_lock(&s->sus_mu);
    e = mc__suspect_find(s, name);
    if (e)
        memset(e, 0, sizeof(*e));
    pthread_mutex_unlock(&s->sus_mu);
}

/* ---- transfers to segments the master dropped ---- */

/* Transfers that have gone this long without news are worth a question to the master once its
 * view changed: no live peer leaves a transfer without a finished 4 MiB slice for 2 s unless its
 * link runs below 2 MB/s, and a wrong guess only keeps placements off it until its owner's next
 * heartbeat. */
#define MC__STALL_ASK_MS 2000
#define MC__STALL_MAX 16 /* segments asked about per heartbeat */
/* Segment ids are small integers from 1 (the engine's table); a scan looks at this many. */
#define MC__STALL_SCAN 4096

void mc__store_abort_dropped(mc_store_t *s) {
    char names[MC__STALL_MAX][MC_MP_MAX_SEGMENT_NAME + 1];
    const char *np[MC__STALL_MAX];
    mc_segment_id_t ids[MC__STALL_MAX];
    int32_t codes[MC__STALL_MAX];
    uint64_t view;
    size_t n = 0;
    if (!s->engine || !s->master)
        return;
    view = mc__master_client_view_version(s->master);
    for (mc_segment_id_t id = 1; id <= MC__STALL_SCAN && n < MC__STALL_MAX; id++) {
        uint64_t ms = 0;
        if (mc_engine_segment_stalled_ms(s->engine, id, &ms) != 0)
            break; /* past the last segment opened */
        if (ms < MC__STALL_ASK_MS ||
            mc_engine_segment_name(s->engine, id, names[n], sizeof(names[n])) != 0)
            continue;
        np[n] = names[n];
        ids[n++] = id;
    }
    /* Nothing stalled: what changed in the view so far concerns no transfer of ours. */
    if (n == 0 || view == s->stall_view) {
        if (n == 0)
            s->stall_view = view;
        return;
    }
    if (mc__master_client_segment_unreachable(s->master, n, np, codes) != 0)
        return; /* asked again after the next heartbeat */
    s->stall_view = view;
    for (size_t i = 0; i < n; i++) {
        if (codes[i] != MC_ERR_SEGMENT_NOT_FOUND)
            continue;
        MC_WARN("store: the master dropped segment %s while transfers to it waited; ending them "
                "now",
                names[i]);
        (void)mc_engine_abort_segment(s->engine, ids[i]);
    }
}

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

static int mc__flush(mc__mover_t *m) {
    int errors[MC__MAX_REQS];
    int rc = 0;
    if (m->nreqs)
        rc = mc_engine_transfer_sync_each_ex(m->s->engine, m->reqs, m->nreqs, errors,
                                             mc__store_submit_flags(m->s));
    for (size_t i = 0; rc != 0 && m->failed && i < m->nreqs; i++)
        if (errors[i] != 0 && !m->failed[m->req_rep[i]])
            m->failed[m->req_rep[i]] =
                errors[i] == MC_ERR_ADDRESS_NOT_REGISTERED ? MC__REP_REFUSED : MC__REP_UNREACHABLE;
    m->nreqs = 0;
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
        if (m->opcode == MC_OPCODE_WRITE)
            memcpy(blk, user, got);
        rc = mc__add(m, blk, off, got);
        if (rc == 0)
            rc = mc__flush(m);
        if (rc == 0 && m->opcode == MC_OPCODE_READ)
            memcpy(user, blk, got);
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
        else if (s->staging.base)
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

/* The direct backend's entries (backend.h): each holds the store open while it runs. */

int mc__direct_register_buffer(mc_store_t *s, void *addr, size_t len) {
    int rc;
    MC__STORE_HELD(s, rc, mc__register_buffer_impl(s, addr, len));
    return rc;
}

int mc__direct_unregister_buffer(mc_store_t *s, void *addr) {
    int rc;
    MC__STORE_HELD(s, rc, mc__unregister_buffer_impl(s, addr));
    return rc;
}
