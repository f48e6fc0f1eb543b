/* The shm hand-off exchanged over the owner's unix socket (same host, same ABI). */
#ifndef MC_TE_SHM_WIRE_H
#define MC_TE_SHM_WIRE_H

#include <stdatomic.h>
#include <stdint.h>

#define MC__SHM_CTRL_MAGIC 0x4C52544353434Dull /* "MCSCTRL" */

typedef struct mc__shm_ctrl {
    uint64_t magic;
    _Atomic uint64_t gen;
} mc__shm_ctrl_t;

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
