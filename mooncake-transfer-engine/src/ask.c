/* The write-ask handler slot: set by the owner, called by the server's connection threads.
 *
 * A write-ask takes its reference before its payload lands, not just around the call: a handler
 * removed between the landing and the call would leave bytes written with the initiator told
 * NOT_IMPLEMENTED ("nothing written"). So a set waits for every write-ask that took the old
 * handler, each bounded by the transfer timeout (its payload) and by the handler itself. Calls
 * are counted per generation so that write-asks taking the new handler meanwhile do not hold
 * the set up. */
#include "mooncake/error.h"
#include "proto.h"
#include "te_internal.h"

_Static_assert(MC_ASK_MAX_MSG == MC__TE_MAX_ASK_MSG, "public and wire message bounds differ");
_Static_assert(MC_ASK_MAX_ANSWER == MC__TE_MAX_ASK_ANSWER, "public and wire answer bounds differ");

/* The engine whose handler this thread is running: a set from there would wait for itself. */
static _Thread_local const mc_engine_t *mc__ask_running;

int mc__ask_init(mc_engine_t *e) {
    if (pthread_mutex_init(&e->ask_lock, NULL))
        return MC_ERR_MEMORY;
    if (pthread_cond_init(&e->ask_cond, NULL)) {
        pthread_mutex_destroy(&e->ask_lock);
        return MC_ERR_MEMORY;
    }
    if (pthread_mutex_init(&e->ask_set_lock, NULL)) {
        pthread_cond_destroy(&e->ask_cond);
        pthread_mutex_destroy(&e->ask_lock);
        return MC_ERR_MEMORY;
    }
    return 0;
}

void mc__ask_destroy(mc_engine_t *e) {
    pthread_mutex_destroy(&e->ask_set_lock);
    pthread_cond_destroy(&e->ask_cond);
    pthread_mutex_destroy(&e->ask_lock);
}

int mc__ask_acquire(mc_engine_t *e, mc__ask_ref_t *ref) {
    int have;
    pthread_mutex_lock(&e->ask_lock);
    have = e->ask_fn != NULL;
    if (have) {
        ref->fn = e->ask_fn;
        ref->ctx = e->ask_ctx;
        ref->gen = e->ask_gen;
        e->ask_inflight[ref->gen & 1]++;
    }
    pthread_mutex_unlock(&e->ask_lock);
    return have;
}

void mc__ask_release(mc_engine_t *e, const mc__ask_ref_t *ref) {
    pthread_mutex_lock(&e->ask_lock);
    if (--e->ask_inflight[ref->gen & 1] == 0)
        pthread_cond_broadcast(&e->ask_cond);
    pthread_mutex_unlock(&e->ask_lock);
}

int mc__ask_call(mc_engine_t *e, const mc__ask_ref_t *ref, const void *msg, size_t msg_len,
                 void *answer, size_t cap, size_t *answer_len) {
    const mc_engine_t *outer = mc__ask_running;
    int rc;
    *answer_len = 0;
    mc__ask_running = e;
    rc = ref->fn(ref->ctx, msg, msg_len, answer, cap, answer_len);
    mc__ask_running = outer;
    /* the initiator reads these two as "nothing written, nothing asked": a handler runs after the
     * bytes landed, so its failure must read as "may have happened"; and a peer's error frame
     * carries a negative code (a positive one would read as INVALID_ARGUMENT there anyway) */
    if (rc == MC_ERR_NOT_IMPLEMENTED || rc == MC_ERR_ADDRESS_NOT_REGISTERED)
        return MC_ERR_CONTEXT;
    if (rc > 0)
        return MC_ERR_INVALID_ARGUMENT;
    if (rc == 0 && *answer_len > cap)
        return MC_ERR_INVALID_ARGUMENT; /* a handler that overran its cap: not sent */
    return rc;
}

static int mc__ask_set(mc_engine_t *e, mc_engine_ask_handler_t fn, void *ctx) {
    unsigned old;
    if (mc__ask_running == e)
        return MC_ERR_INVALID_ARGUMENT;
    pthread_mutex_lock(&e->ask_set_lock);
    pthread_mutex_lock(&e->ask_lock);
    old = e->ask_gen & 1;
    e->ask_fn = fn;
    e->ask_ctx = fn ? ctx : NULL;
    /* write-asks from here on count in the other slot, which the previous set emptied */
    e->ask_gen++;
    while (e->ask_inflight[old] != 0)
        pthread_cond_wait(&e->ask_cond, &e->ask_lock);
    pthread_mutex_unlock(&e->ask_lock);
    pthread_mutex_unlock(&e->ask_set_lock);
    return 0;
}

int mc_engine_set_ask_handler(mc_engine_t *e, mc_engine_ask_handler_t fn, void *ctx) {
    int rc;
    MC__GATED(e, rc, mc__ask_set(e, fn, ctx));
    return rc;
}
