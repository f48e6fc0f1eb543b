/* Same-host shared memory: the owner side (managed buffers in memfds, a control page with the
 * registry generation, an abstract unix socket handing out the memfds) and the initiator side
 * (mapping a peer's memfds once and copying with memcpy). */
#ifndef MC_TE_SHM_H
#define MC_TE_SHM_H

#include <stddef.h>

#include "te_internal.h"

/* Starts the owner side; on failure the engine works without shm (tcp only). */
int mc__shm_owner_start(mc_engine_t *e);
void mc__shm_owner_stop(mc_engine_t *e);
/* The abstract socket name for the descriptor, "" when shm is not served. */
const char *mc__shm_owner_socket(const mc_engine_t *e);

#endif
