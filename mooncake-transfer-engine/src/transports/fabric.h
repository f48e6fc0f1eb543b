/* What the fabric transport offers beyond the transport table (transport.h). */
#ifndef MC_TE_FABRIC_H
#define MC_TE_FABRIC_H

#include "mooncake/transfer_engine.h"

/* Orders the caller with the provider's accesses to this engine's memory. A peer's fabric WRITE
 * lands in our memory inside the progress thread's provider calls, and the provider acknowledges
 * it (delivery complete) from inside the same call; whoever learns of that completion (the
 * initiator, then a message through other processes) and then reads the bytes here is ordered
 * after them only through those other processes, which a race detector cannot see. This returns
 * once the progress thread has finished every provider call it was in when called and taken the
 * engine's lock again: everything the provider wrote to our memory before is ordered before the
 * caller's next access, and the caller's writes before the call (a fill a peer will READ) are
 * ordered before the provider's later accesses. A few milliseconds at most; returns at once when
 * the transport is not up. For code that touches registered memory a peer moves with fabric
 * (tests, tools); transfers themselves never need it. */
void mc__fab_barrier(mc_engine_t *e);

#endif
