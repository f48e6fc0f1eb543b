/* The engine's gate: calls in flight against the close.
 *
 * Why a counter that close waits on rather than a lock held by each call: calls block for long
 * (a transfer waits for its peer, an unregister for the requests inside the buffer), and many run
 * at once; a read/write lock would make close wait behind every one of them anyway and make each
 * call pay for a shared lock word plus the writer's starvation rules. A call adds itself to an
 * atomic count and then looks at the closing flag; close sets the flag and then waits for the
 * count to drain. Both are sequentially consistent, so either the call sees the flag (and backs
 * out), or close sees the call (and waits for it): no call can be inside when close releases.
 *
 * Close does not cut the calls inside short: it wakes batch waiters (they return MC_ERR_CONTEXT,
 * the code tasks cut by a close end with too) and lets the rest finish, each bounded by its own
 * deadline (a transfer by the transfer timeout, an unregister by its grace period). Only then does
 * it stop the transports and free what the calls used. */
#include <time.h>

#include "mooncake/common/log.h"
#include "mooncake/common/proc.h"
#include "te_internal.h"

int mc__gate_init(mc_engine_t *e) {
    pthread_condattr_t ca;
    int rc = MC_ERR_MEMORY;
    atomic_init(&e->gate_calls, 0);
    atomic_init(&e->closing, 0);
    e->closed = 0;
    if (pthread_condattr_init(&ca))
        return rc;
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (pthread_mutex_init(&e->gate_lock, NULL) == 0) {
        if (pthread_cond_init(&e->gate_cond, &ca) == 0)
            rc = 0;
        else
            pthread_mutex_destroy(&e->gate_lock);
    }
    pthread_condattr_destroy(&ca);
    return rc;
}

void mc__gate_destroy(mc_engine_t *e) {
    pthread_cond_destroy(&e->gate_cond);
    pthread_mutex_destroy(&e->gate_lock);
}

int mc__engine_inherited(const mc_engine_t *e) {
    int owner = atomic_load_explicit(&e->owner_pid, memory_order_relaxed);
    return owner != 0 && owner != mc__pid();
}

/* A fork() child shares its parent's sockets, peer connections and shared memory through the
 * copy: a call here would interleave its bytes with the parent's on one connection and write
 * into memory the parent serves. So it is refused before it touches anything, once logged. */
static int mc__engine_refuse_inherited(mc_engine_t *e) {
    if (!atomic_exchange(&e->fork_warned, 1))
        MC_ERROR("transfer engine %s belongs to process %d; this is process %d (a fork() child): "
                 "its calls fail with CONTEXT (-202); create a new TransferEngine here",
                 e->name, atomic_load(&e->owner_pid), mc__pid());
    return MC_ERR_CONTEXT;
}

int mc__engine_enter(mc_engine_t *e) {
    if (!e)
        return MC_ERR_INVALID_ARGUMENT;
    /* Before the counter: the child must not even count itself into the parent's gate copy. */
    if (mc__engine_inherited(e))
        return mc__engine_refuse_inherited(e);
    atomic_fetch_add(&e->gate_calls, 1);
    if (atomic_load(&e->closing)) {
        mc__engine_leave(e);
        return MC_ERR_CONTEXT;
    }
    return 0;
}

void mc__engine_leave(mc_engine_t *e) {
    /* the last call out while a close waits wakes it; the lock orders the wake-up after the
     * closer's check of the count (it holds the lock from the check until it sleeps) */
    if (atomic_fetch_sub(&e->gate_calls, 1) == 1 && atomic_load(&e->closing)) {
        pthread_mutex_lock(&e->gate_lock);
        pthread_cond_broadcast(&e->gate_cond);
        pthread_mutex_unlock(&e->gate_lock);
    }
}

int mc__engine_closing(const mc_engine_t *e) {
    return atomic_load(&e->closing);
}

int mc__gate_shut(mc_engine_t *e) {
    int first;
    pthread_mutex_lock(&e->gate_lock);
    first = !atomic_load(&e->closing);
    atomic_store(&e->closing, 1);
    /* a second closer waits for the first to finish: when it returns, the engine is closed */
    while (!first && !e->closed)
        pthread_cond_wait(&e->gate_cond, &e->gate_lock);
    pthread_mutex_unlock(&e->gate_lock);
    return first;
}

void mc__gate_wait_calls(mc_engine_t *e) {
    pthread_mutex_lock(&e->gate_lock);
    while (atomic_load(&e->gate_calls) > 0)
        pthread_cond_wait(&e->gate_cond, &e->gate_lock);
    pthread_mutex_unlock(&e->gate_lock);
}

void mc__gate_mark_closed(mc_engine_t *e) {
    pthread_mutex_lock(&e->gate_lock);
    e->closed = 1;
    pthread_cond_broadcast(&e->gate_cond);
    pthread_mutex_unlock(&e->gate_lock);
}
