/* A gate between the calls on a handle and its close, shared by the Transfer Engine (gate.c) and
 * the store client (store_gate.c).
 *
 * Why a counter that close waits on rather than a lock held by each call: calls block for long
 * (a transfer waits for its peer, a get for its replicas), and many run at once; a read/write
 * lock would make close wait behind every one of them anyway and make each call pay for a shared
 * lock word plus the writer's starvation rules. A call adds itself to an atomic count and then
 * looks at the closing flag; close sets the flag and then waits for the count to drain. Both are
 * sequentially consistent, so either the call sees the flag (and backs out), or close sees the
 * call (and waits for it): no call can be inside when close releases.
 *
 * The gate also knows which process opened the handle: a fork() child's copy shares its parent's
 * sockets, connections and shared memory, so the owner of the gate refuses every call there
 * before it counts itself in (the parent's count is not the child's to touch). */
#ifndef MOONCAKE_COMMON_GATE_H
#define MOONCAKE_COMMON_GATE_H
#include <pthread.h>
#include <stdatomic.h>

typedef struct mc_gate {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    _Atomic long calls;
    _Atomic int closing;
    int closed; /* the closer released everything (under lock) */
    /* The process that opened the handle (0: none holds it now), and whether a fork() child's
     * refusal was logged already. */
    _Atomic int owner_pid;
    _Atomic int fork_warned;
} mc_gate_t;

/* 0, or MC_ERR_MEMORY-like -1 when the lock or condition cannot be made. */
int mc_gate_init(mc_gate_t *g);
void mc_gate_destroy(mc_gate_t *g);

/* The handle now belongs to this process (own), or to none (disown: a closed handle that any
 * process may set up again). */
void mc_gate_own(mc_gate_t *g);
void mc_gate_disown(mc_gate_t *g);
int mc_gate_owner(const mc_gate_t *g);
/* 1 in a process other than the one that owns the gate (a fork() child's inherited copy). */
int mc_gate_inherited(const mc_gate_t *g);
/* 1 for the first refusal in a fork() child (the caller logs it), 0 after. */
int mc_gate_first_refusal(mc_gate_t *g);

/* 0: the call is inside (it must mc_gate_leave); 1: a close began, nothing entered. The caller
 * checks mc_gate_inherited first. */
int mc_gate_enter(mc_gate_t *g);
void mc_gate_leave(mc_gate_t *g);
/* 1 once a close began. */
int mc_gate_closing(const mc_gate_t *g);
/* Shuts the gate: 1 for the one caller that must now wait and release (mc_gate_wait_calls, then
 * mc_gate_mark_closed), 0 for the others, which return once it is released. */
int mc_gate_shut(mc_gate_t *g);
void mc_gate_wait_calls(mc_gate_t *g);
void mc_gate_mark_closed(mc_gate_t *g);
/* Opens a closed gate again (a handle that can be set up again after a close). */
void mc_gate_reopen(mc_gate_t *g);
#endif
