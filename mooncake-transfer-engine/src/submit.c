/* Submitting requests: every request of a call is validated before any starts (so a bad one
 * leaves the batch untouched), then each goes to the transport that suits it. */
#include <string.h>

#include "devmem.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/time.h"
#include "te_internal.h"

typedef struct mc__plan {
    mc__peer_t *peer;
    int tp;
    int local_device; /* devmem.h: -1 host */
} mc__plan_t;

static int mc__plan_one(mc_engine_t *e, const mc_request_t *r, unsigned flags, mc__plan_t *pl) {
    int64_t shm_id = -1;
    int same_host = 0;
    uint32_t reach = 0;
    int rc;
    if ((r->opcode != MC_OPCODE_READ && r->opcode != MC_OPCODE_WRITE) || !r->source ||
        r->length == 0 || r->target_id < 0 ||
        (uint64_t)(uintptr_t)r->source > UINT64_MAX - r->length)
        return MC_ERR_INVALID_ARGUMENT;
    /* one look-up: registered (unless the caller said it need not be), and where it lives */
    rc = mc__devmem_local(e, r->source, r->length, !(flags & MC_SUBMIT_UNREGISTERED_LOCAL),
                          &pl->local_device);
    if (rc)
        return rc;
    if (r->target_id == MC_LOCAL_SEGMENT_ID) {
        if (!mc__reg_contains(&e->reg, r->target_offset, r->length, r->target_epoch))
            return MC_ERR_ADDRESS_NOT_REGISTERED;
        mc__route_t route = {.peer = NULL, .shm_id = -1, .proto = e->proto};
        pl->peer = NULL;
        pl->tp = mc__transport_route(e, &route)->id;
        return 0;
    }
    pl->peer = mc__peer_get(e, r->target_id);
    if (!pl->peer)
        return MC_ERR_INVALID_ARGUMENT;
    rc = mc__peer_check_range(e, pl->peer, r->target_offset, r->length, r->target_epoch, &shm_id,
                              &same_host, &reach);
    if (rc)
        return rc;
    {
        mc__route_t route = {.peer = pl->peer,
                             .shm_id = shm_id,
                             .same_host = same_host,
                             .reach = reach,
                             .proto = e->proto};
        pl->tp = mc__transport_route(e, &route)->id;
    }
    return 0;
}

int mc__batch_submit(mc_engine_t *e, mc_batch_id_t id, const mc_request_t *reqs, size_t n,
                     unsigned flags) {
    int run_here = (flags & MC__SUBMIT_RUN_HERE) != 0;
    mc__plan_t stack_plan[16];
    mc__plan_t *plan = stack_plan;
    mc__batch_t *b = NULL;
    size_t first = 0;
    uint64_t deadline, submitted;
    int rc = MC_ERR_INVALID_ARGUMENT;
    if (!e || !e->initialized || (!reqs && n))
        goto out;
    b = mc__batch_acquire(e, id);
    if (!b)
        goto out;
    if (n == 0) {
        rc = 0;
        goto out;
    }
    if (n > b->cap) {
        rc = MC_ERR_TOO_MANY_REQUESTS;
        goto out;
    }
    if (n > sizeof(stack_plan) / sizeof(stack_plan[0])) {
        plan = mc__calloc(n, sizeof(*plan));
        if (!plan) {
            rc = MC_ERR_MEMORY;
            goto out;
        }
    }
    for (size_t i = 0; i < n; i++) {
        rc = mc__plan_one(e, &reqs[i], flags, &plan[i]);
        if (rc)
            goto out;
    }
    pthread_mutex_lock(&b->lock);
    if (b->cap - b->used < n) {
        pthread_mutex_unlock(&b->lock);
        rc = MC_ERR_TOO_MANY_REQUESTS;
        goto out;
    }
    first = b->used;
    deadline = mc__now_ms() + (uint64_t)e->timeout_ms;
    submitted = mc__now_ns();
    for (size_t i = 0; i < n; i++) {
        mc__task_t *t = &b->tasks[first + i];
        memset(t, 0, sizeof(*t));
        t->batch = b;
        t->peer = plan[i].peer;
        t->aborts = t->peer ? atomic_load(&t->peer->aborts) : 0;
        t->opcode = reqs[i].opcode;
        t->local = reqs[i].source;
        t->remote = reqs[i].target_offset;
        t->len = reqs[i].length;
        t->epoch = reqs[i].target_epoch;
        t->deadline_ms = deadline;
        t->submitted_ns = submitted;
        t->transport = plan[i].tp;
        t->local_device = plan[i].local_device;
        atomic_init(&t->status, MC_STATUS_PENDING);
    }
    b->used += n;
    b->unfinished += n;
    pthread_mutex_unlock(&b->lock);
    /* our reference keeps the batch alive even if inline transports finish every task and
     * another thread frees it meanwhile */
    const mc__transport_t *fallback = mc__transport_fallback(e);
    mc__task_t *stack_rest[16];
    mc__task_t **rest = n > sizeof(stack_rest) / sizeof(stack_rest[0])
                            ? mc__calloc(n, sizeof(*rest))
                            : stack_rest; /* the fallback's share, in order */
    size_t nrest = 0;
    for (size_t i = 0; i < n; i++) {
        mc__task_t *t = &b->tasks[first + i];
        const mc__transport_t *tp = mc__transport_get(e, t->transport);
        /* counted before a transport may end it (mc__task_finish uncounts) */
        if (t->peer && atomic_fetch_add(&t->peer->inflight, 1) == 0)
            atomic_store(&t->peer->progress_ms, mc__now_ms());
        if (tp != fallback && tp->submit(e, t) != MC__TP_DECLINED)
            continue;
        t->transport = fallback->id;
        if (rest)
            rest[nrest++] = t;
        else
            fallback->submit(e, t); /* no memory for the list: one at a time, as it comes */
    }
    /* Requests whose caller waits for them anyway may run on the caller's thread: waking a
     * worker and then the caller costs more than a small transfer, or a batch of them, itself. */
    if (nrest && !(run_here && fallback->run_inline && fallback->run_inline(e, rest, nrest))) {
        if (fallback->submit_many)
            fallback->submit_many(e, rest, nrest);
        else
            for (size_t i = 0; i < nrest; i++)
                fallback->submit(e, rest[i]);
    }
    if (rest != stack_rest)
        mc__free(rest);
    rc = 0;
out:
    if (plan != stack_plan)
        mc__free(plan);
    if (b)
        mc__batch_release(e, b);
    return rc;
}

int mc_engine_batch_submit(mc_engine_t *e, mc_batch_id_t id, const mc_request_t *reqs, size_t n) {
    return mc_engine_batch_submit_ex(e, id, reqs, n, 0);
}

int mc_engine_batch_submit_ex(mc_engine_t *e, mc_batch_id_t id, const mc_request_t *reqs, size_t n,
                              unsigned flags) {
    int rc;
    if (flags & ~(unsigned)(MC_SUBMIT_UNREGISTERED_LOCAL | MC_SUBMIT_CALLER_WAITS))
        return MC_ERR_INVALID_ARGUMENT;
    if (flags & MC_SUBMIT_CALLER_WAITS)
        flags = (flags & ~(unsigned)MC_SUBMIT_CALLER_WAITS) | MC__SUBMIT_RUN_HERE;
    MC__GATED(e, rc, mc__batch_submit(e, id, reqs, n, flags));
    return rc;
}
