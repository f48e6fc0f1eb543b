/* The engine's gate: calls in flight against the close.
 * (the gate itself, and why it is a counter, is mooncake/common/gate.h, shared with the store
 * client; this file gives it the engine's codes and its fork() message).
 *
 * Close does not cut the calls inside short: it wakes batch waiters (they return MC_ERR_CONTEXT,
 * the code tasks cut by a close end with too) and lets the rest finish, each bounded by its own
 * deadline (a transfer by the transfer timeout, an unregister by its grace period). Only then does
 * it stop the transports and free what the calls used. */
#include "mooncake/common/log.h"
#include "mooncake/common/proc.h"
#include "te_internal.h"

int mc__te_gate_init(mc_engine_t *e) {
    return mc__gate_init(&e->gate) == 0 ? 0 : MC_ERR_MEMORY;
}

void mc__te_gate_destroy(mc_engine_t *e) {
    mc__gate_destroy(&e->gate);
}

int mc__engine_inherited(const mc_engine_t *e) {
    return mc__gate_inherited(&e->gate);
}

/* A fork() child shares its parent's sockets, peer connections and shared memory through the
 * copy: a call here would interleave its bytes with the parent's on one connection and write
 * into memory the parent serves. So it is refused before it touches anything, once logged. */
static int mc__engine_refuse_inherited(mc_engine_t *e) {
    if (mc__gate_first_refusal(&e->gate))
        MC_ERROR("transfer engine %s belongs to process %d; this is process %d (a fork() child): "
                 "its calls fail with CONTEXT (-202); create a new TransferEngine here",
                 e->name, mc__gate_owner(&e->gate), mc__pid());
    return MC_ERR_CONTEXT;
}

int mc__engine_enter(mc_engine_t *e) {
    if (!e)
        return MC_ERR_INVALID_ARGUMENT;
    /* Before the counter: the child must not even count itself into the parent's gate copy. */
    if (mc__engine_inherited(e))
        return mc__engine_refuse_inherited(e);
    return mc__gate_enter(&e->gate) == 0 ? 0 : MC_ERR_CONTEXT;
}

void mc__engine_leave(mc_engine_t *e) {
    mc__gate_leave(&e->gate);
}

int mc__engine_closing(const mc_engine_t *e) {
    return mc__gate_closing(&e->gate);
}

int mc__te_gate_shut(mc_engine_t *e) {
    return mc__gate_shut(&e->gate);
}

void mc__te_gate_wait_calls(mc_engine_t *e) {
    mc__gate_wait_calls(&e->gate);
}

void mc__te_gate_mark_closed(mc_engine_t *e) {
    mc__gate_mark_closed(&e->gate);
}
