/* The memory this engine registered: a sorted, non-overlapping table of regions behind a
 * read/write lock. The RPC server holds the read lock while it moves bytes into or out of a region,
 * so unregistering waits for in-flight remote access to end and memory is never touched after its
 * owner got it back. */
#ifndef MC_TE_REGISTRY_H
#define MC_TE_REGISTRY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct mc__region {
    uint64_t addr;
    uint64_t len;
    char location[64];
    int memfd;      /* managed buffers: the memfd peers may map; -1 otherwise */
    size_t map_len; /* managed buffers: bytes mapped at addr */
    int64_t shm_id; /* managed buffers: id unique within this engine instance; -1 otherwise */
} mc__region_t;

typedef struct mc__registry {
    pthread_rwlock_t lock;
    mc__region_t *regions;
    size_t n;
    size_t cap;
    int64_t next_shm_id;
    /* Bumped on every change; same-host peers map it (shm control page) to notice that a
     * buffer they copy into may have gone away. Points into shared memory once shm is up. */
    _Atomic uint64_t *gen;
    _Atomic uint64_t local_gen;
} mc__registry_t;

int mc__reg_init(mc__registry_t *r);
void mc__reg_destroy(mc__registry_t *r);
/* Adds a region; MC_ERR_ADDRESS_OVERLAPPED, MC_ERR_INVALID_ARGUMENT or MC_ERR_MEMORY. For a
 * managed region (memfd >= 0) the shm id is assigned here. */
int mc__reg_add(mc__registry_t *r, const mc__region_t *reg);
/* Removes the region starting exactly at addr whose kind matches (managed: 1 managed only, 0
 * plain only, -1 either); *out receives it. MC_ERR_INVALID_ARGUMENT if none. */
int mc__reg_remove(mc__registry_t *r, uint64_t addr, int managed, mc__region_t *out);
/* With the lock held: the region holding [addr, addr+len), or NULL. */
const mc__region_t *mc__reg_find_locked(const mc__registry_t *r, uint64_t addr, uint64_t len);
/* Takes the read lock and checks the range. */
int mc__reg_contains(mc__registry_t *r, uint64_t addr, uint64_t len);
#endif
