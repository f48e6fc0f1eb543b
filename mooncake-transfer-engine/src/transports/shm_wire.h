/* The shm hand-off exchanged over the owner's unix socket (same host, same ABI). */
#ifndef MC_TE_SHM_WIRE_H
#define MC_TE_SHM_WIRE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define MC__SHM_CTRL_MAGIC 0x324C52544353434Dull /* "MCSCTRL2" */

typedef struct mc__shm_ctrl {
    uint64_t magic;
    _Atomic uint64_t gen;
    /* A robust, process-shared mutex the owner's shm thread holds for as long as it serves.
     * A killed owner cannot bump gen, but the kernel marks this lock owner-dead, so peers that
     * still map its buffers learn with one trylock that they must re-fetch the descriptor
     * (a process restarted under the same name may have buffers at the very same addresses). */
    pthread_mutex_t alive;
} mc__shm_ctrl_t;

/* Initiator side: 1 while the owner's shm thread runs. Never blocks. */
int mc__shm_ctrl_alive(mc__shm_ctrl_t *c);

enum { MC__SHM_OP_CTRL = 1, MC__SHM_OP_BUFFER = 2 };

typedef struct mc__shm_req {
    uint32_t op;
    uint32_t pad;
    uint64_t id;
} mc__shm_req_t;

typedef struct mc__shm_rep {
    int32_t rc;
    uint32_t pad;
    uint64_t addr;
    uint64_t len;
    uint64_t map_len;
} mc__shm_rep_t;
#endif
