/* The store's gate (mooncake/common/gate.h, the engine's kind): every call passes it before it
 * touches the store's state, and close shuts it and waits for the calls inside, so that nothing
 * pulls the master connection or the segment away from a call in flight. Kept apart from the
 * lifecycle (store.c), which uses every other file of the client: the gate is what they all use,
 * and it uses none of them. */
#include <pthread.h>
#include <stdatomic.h>

#include "client/backend.h"
#include "client/store_internal.h"
#include "mooncake/common/log.h"
#include "mooncake/common/proc.h"

int mc__store_inherited(const mc_store_t *s) {
    return mc__gate_inherited(&s->gate);
}

/* After fork() the child's copy of the store names its parent's connections: on them the two
 * processes' requests and replies interleave (a dummy's request ids count up alike in both, so
 * one takes the other's reply as its own), and its staging and pool memory is mapped shared with
 * the parent. So nothing of it is used here: every call fails before it takes a lock (a parent's
 * thread may have held one at the fork). */
int mc__store_refuse_inherited(mc_store_t *s) {
    if (mc__gate_first_refusal(&s->gate))
        MC_ERROR("store: this store was set up by process %d; this is process %d (a fork() "
                 "child), where its calls fail with UNAVAILABLE_IN_CURRENT_STATUS (-1010): set up "
                 "a new store in this process",
                 mc__gate_owner(&s->gate), mc__pid());
    return MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS;
}

int mc__store_ready(mc_store_t *s) {
    if (s && mc__store_inherited(s))
        return mc__store_refuse_inherited(s);
    if (!s || atomic_load(&s->state) != MC__STORE_READY)
        return MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS;
    return 0;
}

int mc__store_enter_any(mc_store_t *s) {
    if (!s)
        return MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS;
    if (mc__store_inherited(s))
        return mc__store_refuse_inherited(s);
    if (mc__gate_enter(&s->gate) != 0)
        return MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS;
    if (atomic_load(&s->state) != MC__STORE_READY) {
        mc__gate_leave(&s->gate);
        return MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS;
    }
    return 0;
}

int mc__store_enter(mc_store_t *s) {
    int rc = mc__store_enter_any(s);
    /* A dummy has no master, engine or segment: a call outside its backend table is unavailable
     * on it rather than run on state it does not have. */
    if (rc == 0 && s->be->table_only) {
        mc__store_leave(s);
        MC_WARN("store: this call is not offered by a dummy client (it runs its calls at a "
                "storage node)");
        rc = MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS;
    }
    return rc;
}

void mc__store_leave(mc_store_t *s) {
    mc__gate_leave(&s->gate);
}
