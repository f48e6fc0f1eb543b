/* Mooncake Store: dummy clients of a local storage node (the mooncake_client daemon).
 *
 * A dummy client contributes no memory and talks to no master: mc_store_setup_dummy attaches a
 * store handle to the daemon on this host, and from then on the handle's calls (puts, upserts,
 * gets, get_into, batches, is_exist, get_size, removes) are run by the daemon with its own store,
 * the bytes moving straight between the pool and shared memory this process mapped for it. Many
 * dummies may attach to one daemon; one that exits or dies leaves the daemon serving the others,
 * and the daemon drops what it held for that dummy.
 *
 * Shared memory comes from a pool (mc_shm_pool_t): each block is a memfd of its own, mapped here
 * and, once a call names it, by the daemon. Memory from the pool moves without a copy (register
 * it, or pass it to any call); other memory is copied through the dummy's local buffer (itself a
 * pool block of local_buffer_size bytes), or through a block taken for that call when it does
 * not fit there. */
#ifndef MOONCAKE_STORE_DUMMY_H
#define MOONCAKE_STORE_DUMMY_H

#include <stddef.h>
#include <stdint.h>

#include "mooncake/export.h"
#include "mooncake/store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- shared memory --------------------------------------------------------------------------
 * Thread-safe. A pool must outlive every store handle set up with it. */
typedef struct mc_shm_pool mc_shm_pool_t;
MC_API int mc_shm_pool_create(mc_shm_pool_t **out);
/* Frees every block still allocated. NULL is accepted. */
MC_API void mc_shm_pool_destroy(mc_shm_pool_t *p);
/* A zeroed, page-aligned block of len bytes (rounded up to pages) that the daemon can map, or
 * NULL (len 0, or no memory: memfd_create, ftruncate or mmap failed). */
MC_API void *mc_shm_pool_alloc(mc_shm_pool_t *p, size_t len);
/* Frees a block by its start address: 0, or MC_ERR_INVALID_PARAMS when addr starts none. Daemons
 * that mapped it let it go at the dummy's next call; nothing is read or written there after this
 * returns. */
MC_API int mc_shm_pool_free(mc_shm_pool_t *p, void *addr);
/* 1 when [addr, addr+len) lies inside one block of the pool. */
MC_API int mc_shm_pool_contains(mc_shm_pool_t *p, const void *addr, size_t len);

/* ---- attaching ------------------------------------------------------------------------------
 * A dummy handle is thread-safe like any other: threads run their calls at once over up to four
 * connections to the node. */
typedef struct mc_store_dummy_config {
    /* The daemon's "host:port" (its --port names its control socket); "" = "127.0.0.1:50052". */
    char server_address[MC_STORE_STR_MAX];
    /* The reference's mem_pool_size: accepted; every pool block is its own region. */
    uint64_t mem_pool_size;
    /* The local buffer through which calls copy memory that is not from the pool (0: each such
     * call takes a pool block of its own). */
    uint64_t local_buffer_size;
    /* Where blocks come from (and where mc_store_register_buffer looks); NULL = a pool of the
     * handle's own, freed with it. */
    mc_shm_pool_t *pool;
    int timeout_ms; /* a call's deadline for the daemon's answer; 0 = 60000 */
} mc_store_dummy_config_t;

MC_API void mc_store_dummy_config_init(mc_store_dummy_config_t *c);
/* Attaches a new (or closed) handle to the daemon. The daemon is not there (no socket): RPC_FAIL.
 * Other rules as mc_store_setup: once per open, mc_store_close detaches. */
MC_API int mc_store_setup_dummy(mc_store_t *s, const mc_store_dummy_config_t *cfg);
/* 1 when s is attached as a dummy. */
MC_API int mc_store_is_dummy(const mc_store_t *s);
/* A pool block for s's dummy (the reference's alloc_from_mem_pool): NULL when s is no dummy. */
MC_API void *mc_store_dummy_alloc(mc_store_t *s, size_t len);

#ifdef __cplusplus
}
#endif
#endif
