/* Batches behind a handle table: an id is (generation << 32 | slot + 1), so a freed or forged id
 * is refused instead of reaching freed memory. Lookups take a reference; the batch's memory goes
 * when it has been freed and the last reference is dropped. */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/time.h"
#include "te_internal.h"

#define MC__BATCH_MAX_TASKS (1u << 20)
#define MC__BATCH_MAX_SLOTS (1u << 20)

static void mc__batch_destroy(mc__batch_t *b) {
    pthread_mutex_destroy(&b->lock);
    pthread_cond_destroy(&b->cond);
    mc__free(b->tasks);
    mc__free(b);
}

static mc__batch_t *mc__batch_new(size_t cap) {
    pthread_condattr_t ca;
    mc__batch_t *b = mc__calloc(1, sizeof(*b));
    if (!b)
        return NULL;
    b->tasks = mc__calloc(cap, sizeof(*b->tasks));
    if (!b->tasks) {
        mc__free(b);
        return NULL;
    }
    b->cap = cap;
    pthread_mutex_init(&b->lock, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&b->cond, &ca);
    pthread_condattr_destroy(&ca);
    return b;
}

int mc__batch_alloc(mc_engine_t *e, size_t batch_size, mc_batch_id_t *out) {
    mc__batch_t *b = NULL;
    size_t slot = 0;
    int rc = MC_ERR_INVALID_ARGUMENT;
    if (!e || !out || batch_size == 0 || batch_size > MC__BATCH_MAX_TASKS)
        goto out;
    *out = 0;
    rc = MC_ERR_MEMORY;
    b = mc__batch_new(batch_size);
    if (!b)
        goto out;
    pthread_mutex_lock(&e->batches_lock);
    for (slot = 0; slot < e->nslots && e->slots[slot].b; slot++) {
    }
    if (slot == e->nslots) {
        if (e->nslots == e->slots_cap) {
            size_t ncap = e->slots_cap ? e->slots_cap * 2 : 64;
            mc__batch_slot_t *ns = NULL;
            if (ncap <= MC__BATCH_MAX_SLOTS)
                ns = mc__realloc(e->slots, ncap * sizeof(*ns));
            if (!ns) {
                pthread_mutex_unlock(&e->batches_lock);
                rc = e->slots_cap >= MC__BATCH_MAX_SLOTS ? MC_ERR_TOO_MANY_REQUESTS : MC_ERR_MEMORY;
                goto out;
            }
            e->slots = ns;
            e->slots_cap = ncap;
        }
        e->slots[e->nslots].b = NULL;
        e->slots[e->nslots].gen = 1;
        e->nslots++;
    }
    e->slots[slot].b = b;
    *out = ((uint64_t)e->slots[slot].gen << 32) | (uint64_t)(slot + 1);
    b = NULL;
    pthread_mutex_unlock(&e->batches_lock);
    rc = 0;
out:
    if (b)
        mc__batch_destroy(b);
    return rc;
}

/* The live slot for id, or NULL; caller holds batches_lock. */
static mc__batch_slot_t *mc__slot_of(mc_engine_t *e, mc_batch_id_t id) {
    uint64_t slot = (id & 0xffffffffu);
    uint32_t gen = (uint32_t)(id >> 32);
    if (slot == 0 || slot > e->nslots)
        return NULL;
    if (!e->slots[slot - 1].b || e->slots[slot - 1].gen != gen)
        return NULL;
    return &e->slots[slot - 1];
}

mc__batch_t *mc__batch_acquire(mc_engine_t *e, mc_batch_id_t id) {
    mc__batch_slot_t *s;
    mc__batch_t *b = NULL;
    pthread_mutex_lock(&e->batches_lock);
    s = mc__slot_of(e, id);
    if (s) {
        b = s->b;
        b->refs++;
    }
    pthread_mutex_unlock(&e->batches_lock);
    return b;
}

void mc__batch_release(mc_engine_t *e, mc__batch_t *b) {
    int gone;
    pthread_mutex_lock(&e->batches_lock);
    b->refs--;
    gone = b->freed && b->refs == 0;
    pthread_mutex_unlock(&e->batches_lock);
    if (gone)
        mc__batch_destroy(b);
}

int mc__batch_free(mc_engine_t *e, mc_batch_id_t id) {
    mc__batch_slot_t *s;
    mc__batch_t *b = NULL;
    int busy;
    int gone = 0;
    if (!e)
        return MC_ERR_INVALID_ARGUMENT;
    pthread_mutex_lock(&e->batches_lock);
    s = mc__slot_of(e, id);
    if (!s) {
        pthread_mutex_unlock(&e->batches_lock);
        return MC_ERR_INVALID_ARGUMENT;
    }
    b = s->b;
    pthread_mutex_lock(&b->lock);
    busy = b->unfinished > 0;
    pthread_mutex_unlock(&b->lock);
    if (!busy) {
        s->b = NULL;
        s->gen = s->gen == UINT32_MAX ? 1 : s->gen + 1;
        b->freed = 1;
        gone = b->refs == 0;
    }
    pthread_mutex_unlock(&e->batches_lock);
    if (gone)
        mc__batch_destroy(b);
    return busy ? MC_ERR_BATCH_BUSY : 0;
}

void mc__task_finish(mc__task_t *t, int status, int error) {
    mc__batch_t *b = t->batch;
    uint64_t now = mc__now_ns();
    if (t->peer) { /* peers outlive batches; t is not touched after the unlock below */
        atomic_store(&t->peer->progress_ms, now / 1000000u);
        atomic_fetch_sub(&t->peer->inflight, 1);
    }
    pthread_mutex_lock(&b->lock);
    t->latency_ns = now > t->submitted_ns ? now - t->submitted_ns : 1;
    atomic_store(&t->error, error);
    atomic_store(&t->status, status);
    b->unfinished--;
    if (b->unfinished == 0)
        pthread_cond_broadcast(&b->cond);
    pthread_mutex_unlock(&b->lock);
}

void mc__transport_account(mc_engine_t *e, int id, unsigned long long bytes) {
    atomic_fetch_add_explicit(&e->stat_tasks[id], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&e->stat_bytes[id], bytes, memory_order_relaxed);
}

int mc__task_status(mc_engine_t *e, mc_batch_id_t id, size_t task, mc_task_state_t *out) {
    mc__batch_t *b;
    int rc = MC_ERR_INVALID_ARGUMENT;
    if (!e || !out)
        return rc;
    b = mc__batch_acquire(e, id);
    if (!b)
        return rc;
    pthread_mutex_lock(&b->lock);
    if (task < b->used) {
        out->status = atomic_load(&b->tasks[task].status);
        out->error = atomic_load(&b->tasks[task].error);
        out->transferred_bytes = atomic_load(&b->tasks[task].transferred);
        out->latency_ns = b->tasks[task].latency_ns;
        rc = 0;
    }
    pthread_mutex_unlock(&b->lock);
    mc__batch_release(e, b);
    return rc;
}

int mc__batch_wait(mc_engine_t *e, mc_batch_id_t id, int timeout_ms, int until_done) {
    mc__batch_t *b;
    struct timespec ts;
    uint64_t wait_ms;
    int rc = 0;
    if (!e)
        return MC_ERR_INVALID_ARGUMENT;
    b = mc__batch_acquire(e, id);
    if (!b)
        return MC_ERR_INVALID_ARGUMENT;
    /* every task ends by its own deadline; the default wait leaves room for that */
    wait_ms = timeout_ms >= 0 ? (uint64_t)timeout_ms : (uint64_t)e->timeout_ms * 2 + 5000;
    ts = mc__clock_after_ms(CLOCK_MONOTONIC, wait_ms);
    pthread_mutex_lock(&b->lock);
    /* closing is looked at under the batch lock, and the close broadcasts under it after
     * setting the flag (mc__batches_wake): a waiter either sees it or is woken */
    while (b->unfinished > 0 && (until_done || !mc__engine_closing(e))) {
        if (pthread_cond_timedwait(&b->cond, &b->lock, &ts) == ETIMEDOUT)
            break;
    }
    if (b->unfinished > 0) {
        rc = !until_done && mc__engine_closing(e) ? MC_ERR_CONTEXT : MC_ERR_BATCH_BUSY;
    } else {
        for (size_t i = 0; i < b->used && !rc; i++) {
            if (atomic_load(&b->tasks[i].status) != MC_STATUS_COMPLETED) {
                rc = atomic_load(&b->tasks[i].error);
                if (!rc)
                    rc = MC_ERR_SOCKET;
            }
        }
    }
    pthread_mutex_unlock(&b->lock);
    mc__batch_release(e, b);
    return rc;
}

void mc__batches_wake(mc_engine_t *e) {
    pthread_mutex_lock(&e->batches_lock);
    for (size_t i = 0; i < e->nslots; i++) {
        mc__batch_t *b = e->slots[i].b;
        if (!b)
            continue;
        pthread_mutex_lock(&b->lock);
        pthread_cond_broadcast(&b->cond);
        pthread_mutex_unlock(&b->lock);
    }
    pthread_mutex_unlock(&e->batches_lock);
}

/* --- the public calls: the same, inside the gate --- */

int mc_engine_batch_alloc(mc_engine_t *e, size_t batch_size, mc_batch_id_t *out) {
    int rc;
    MC__GATED(e, rc, mc__batch_alloc(e, batch_size, out));
    return rc;
}

int mc_engine_batch_free(mc_engine_t *e, mc_batch_id_t id) {
    int rc;
    MC__GATED(e, rc, mc__batch_free(e, id));
    return rc;
}

int mc_engine_task_status(mc_engine_t *e, mc_batch_id_t id, size_t task, mc_task_state_t *out) {
    int rc;
    MC__GATED(e, rc, mc__task_status(e, id, task, out));
    return rc;
}

int mc_engine_batch_wait(mc_engine_t *e, mc_batch_id_t id, int timeout_ms) {
    int rc;
    MC__GATED(e, rc, mc__batch_wait(e, id, timeout_ms, 0));
    return rc;
}
