/* The gate between calls and the close (mooncake/common/gate.h). */
#include <time.h>

#include "mooncake/common/gate.h"
#include "mooncake/common/proc.h"

int mc__gate_init(mc__gate_t *g) {
    pthread_condattr_t ca;
    int rc = -1;
    atomic_init(&g->calls, 0);
    atomic_init(&g->closing, 0);
    atomic_init(&g->owner_pid, 0);
    atomic_init(&g->fork_warned, 0);
    g->closed = 0;
    if (pthread_condattr_init(&ca))
        return rc;
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (pthread_mutex_init(&g->lock, NULL) == 0) {
        if (pthread_cond_init(&g->cond, &ca) == 0)
            rc = 0;
        else
            pthread_mutex_destroy(&g->lock);
    }
    pthread_condattr_destroy(&ca);
    return rc;
}

void mc__gate_destroy(mc__gate_t *g) {
    pthread_cond_destroy(&g->cond);
    pthread_mutex_destroy(&g->lock);
}

void mc__gate_own(mc__gate_t *g) {
    atomic_store_explicit(&g->owner_pid, mc__pid(), memory_order_relaxed);
}

void mc__gate_disown(mc__gate_t *g) {
    atomic_store(&g->owner_pid, 0);
}

int mc__gate_owner(const mc__gate_t *g) {
    return atomic_load(&g->owner_pid);
}

int mc__gate_inherited(const mc__gate_t *g) {
    int owner = atomic_load_explicit(&g->owner_pid, memory_order_relaxed);
    return owner != 0 && owner != mc__pid();
}

int mc__gate_first_refusal(mc__gate_t *g) {
    return !atomic_exchange(&g->fork_warned, 1);
}

int mc__gate_enter(mc__gate_t *g) {
    atomic_fetch_add(&g->calls, 1);
    if (atomic_load(&g->closing)) {
        mc__gate_leave(g);
        return 1;
    }
    return 0;
}

void mc__gate_leave(mc__gate_t *g) {
    /* the last call out while a close waits wakes it; the lock orders the wake-up after the
     * closer's check of the count (it holds the lock from the check until it sleeps) */
    if (atomic_fetch_sub(&g->calls, 1) == 1 && atomic_load(&g->closing)) {
        pthread_mutex_lock(&g->lock);
        pthread_cond_broadcast(&g->cond);
        pthread_mutex_unlock(&g->lock);
    }
}

int mc__gate_closing(const mc__gate_t *g) {
    return atomic_load(&g->closing);
}

int mc__gate_shut(mc__gate_t *g) {
    int first;
    pthread_mutex_lock(&g->lock);
    first = !atomic_load(&g->closing);
    atomic_store(&g->closing, 1);
    /* a second closer waits for the first to finish: when it returns, the handle is closed */
    while (!first && !g->closed)
        pthread_cond_wait(&g->cond, &g->lock);
    pthread_mutex_unlock(&g->lock);
    return first;
}

void mc__gate_wait_calls(mc__gate_t *g) {
    pthread_mutex_lock(&g->lock);
    while (atomic_load(&g->calls) > 0)
        pthread_cond_wait(&g->cond, &g->lock);
    pthread_mutex_unlock(&g->lock);
}

void mc__gate_mark_closed(mc__gate_t *g) {
    pthread_mutex_lock(&g->lock);
    g->closed = 1;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
}

void mc__gate_reopen(mc__gate_t *g) {
    pthread_mutex_lock(&g->lock);
    g->closed = 0;
    atomic_store(&g->closing, 0);
    pthread_mutex_unlock(&g->lock);
}
