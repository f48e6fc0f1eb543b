/* The shared-memory pool's private side (see mooncake/store_dummy.h): what a dummy client asks of
 * it to hand blocks to its daemon. */
#ifndef MC_STORE_CLIENT_SHM_POOL_H
#define MC_STORE_CLIENT_SHM_POOL_H
#include <stddef.h>
#include <stdint.h>

#include "mooncake/store_dummy.h"

typedef struct mc__shm_block {
    uint64_t id; /* unique in the pool, never reused */
    uint8_t *base;
    size_t len;
    int fd; /* a duplicate the caller closes */
} mc__shm_block_t;

/* The block holding [addr, addr+len): 0 and *out (with a dup of its memfd), or
 * MC_ERR_INVALID_PARAMS when no one block holds all of it. */
int mc__shm_pool_find(mc_shm_pool_t *p, const void *addr, size_t len, mc__shm_block_t *out);
/* 1 while block id is allocated. */
int mc__shm_pool_live(mc_shm_pool_t *p, uint64_t id);
/* Counts frees: a dummy re-checks its daemon's mappings only when it moved. */
uint64_t mc__shm_pool_free_gen(mc_shm_pool_t *p);
#endif
