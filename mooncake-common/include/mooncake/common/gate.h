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

typedef struct mc__gate {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    _Atomic long calls;
    _Atomic int closing;
    int closed; /* the closer released everything (under lock) */
    /* The process that opened the handle (0: none holds it now), and whether a fork() child's
     * refusal was logged already. */
    _Atomic int owner_pid;
    _Atomic int fork_warned;
} mc__gate_t;

/* 0, or MC_ERR_MEMORY-like -1 when the lock or condition cannot be made. */
int mc__gate_init(mc__gate_t *g);
void mc__gate_destroy(mc__gate_t *g);

/* The handle now belongs to this process (own), or to none (disown: a closed handle that any
 * process may set up again). */
void mc__gate_own(mc__gate_t *g);
void mc__gate_disown(mc__gate_t *g);
int mc__gate_owner(const mc__gate_t *g);
/* 1 in a process other than the one that owns the gate (a fork() child's inherited copy). */
int mc__gate_inherited(const mc__gate_t *g);
/* 1 for the first refusal in a fork() child (the caller logs it), 0 after. */
int mc__gate_first_refusal(mc__gate_t *g);

/* 0: the call is inside (it must mc__gate_leave); 1: a close began, nothing entered. The caller
 * checks mc__gate_inherited first. */
int mc__gate_enter(mc__gate_t *g);
void mc__gate_leave(mc__gate_t *g);
/* 1 once a close began. */
int mc__gate_closing(const mc__gate_t *g);
/* Shuts the gate: 1 for the one caller that must now wait and release (mc__gate_wait_calls, then
 * mc__gate_mark_closed), 0 for the others, which return once it is released. */
int mc__gate_shut(mc__gate_t *g);
void mc__gate_wait_calls(mc__gate_t *g);
void mc__gate_mark_closed(mc__gate_t *g);
/* Opens a closed gate again (a handle that can be set up again after a close). */
void mc__gate_reopen(mc__gate_t *g);
#endif
