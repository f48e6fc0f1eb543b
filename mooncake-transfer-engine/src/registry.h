/* The memory this engine registered: a sorted, non-overlapping table of regions behind a
 * read/write lock that is only ever held for table lookups and edits, never across I/O.
 *
 * Remote access pins the one region it touches (mc__reg_pin) and drops the table lock before it
 * moves bytes; unregistering takes the region out of the table at once (new requests see
 * ADDRESS_NOT_REGISTERED) and then waits only for that region's pins. A pin that does not end
 * within a grace period (a peer stalled mid-WRITE) has its connection shut down, which ends the
 * blocked receive at once; so an unregister is bounded and the memory is never touched after it
 * returns. */
#ifndef MC_TE_REGISTRY_H
#define MC_TE_REGISTRY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "device_mem.h"

/* One in-flight access to a region, owned by the thread doing it (usually on its stack). */
typedef struct mc__pin {
    struct mc__pin *next;
    uint64_t uid;       /* the region's registration id */
    uint64_t addr, len; /* the region's range */
    int fd; /* the connection moving the bytes (shut down to cut a stalled transfer); -1: none */
    int device; /* the region's GPU (its place, device_mem.h); -1: host memory */
} mc__pin_t;

typedef struct mc__region {
    uint64_t addr;
    uint64_t len;
    char location[64];
    int memfd;      /* managed buffers: the memfd peers may map; -1 otherwise */
    size_t map_len; /* managed buffers: bytes mapped at addr */
    int64_t shm_id; /* managed buffers: id unique within this engine instance; -1 otherwise */
    uint64_t uid;   /* unique per registration: pins name their region by it */
    /* The incarnation its owner gave it (0: untagged). A request that names an epoch is served
     * only by a region carrying exactly that epoch, so a placement made in an incarnation that
     * has gone can never touch the memory of the next one, even at the same address. */
    uint64_t epoch;
    mc__mem_place_t place; /* host memory or a GPU's (device_mem.h), set when registered */
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
    uint64_t next_uid;
    /* every pin (few: one per serving connection) and the removers waiting for them */
    pthread_mutex_t pin_lock;
    pthread_cond_t pin_cond;
    mc__pin_t *pins;
    int grace_ms; /* how long a remover waits before it shuts stalled connections down */
} mc__registry_t;

int mc__reg_init(mc__registry_t *r);
void mc__reg_destroy(mc__registry_t *r);
/* Adds n regions, all or none; MC_ERR_ADDRESS_OVERLAPPED (with each other or the table),
 * MC_ERR_INVALID_ARGUMENT or MC_ERR_MEMORY. For a managed region (memfd >= 0) the shm id is
 * assigned here. */
int mc__reg_add_many(mc__registry_t *r, const mc__region_t *regs, size_t n);
int mc__reg_add(mc__registry_t *r, const mc__region_t *reg);
/* Removes the regions starting exactly at addrs[i] whose kind matches (managed: 1 managed only,
 * 0 plain only, -1 either), all or none: MC_ERR_INVALID_ARGUMENT if one is missing or listed
 * twice. Returns after every pin on them ended; outs (may be NULL) receive the regions. */
int mc__reg_remove_many(mc__registry_t *r, const uint64_t *addrs, size_t n, int managed,
                        mc__region_t *outs);
int mc__reg_remove(mc__registry_t *r, uint64_t addr, int managed, mc__region_t *out);
/* With the lock held: the region holding [addr, addr+len), or NULL. */
const mc__region_t *mc__reg_find_locked(const mc__registry_t *r, uint64_t addr, uint64_t len);
/* Takes the read lock and checks the range (and the region's epoch when epoch is non-zero). */
int mc__reg_contains(mc__registry_t *r, uint64_t addr, uint64_t len, uint64_t epoch);
/* Pins the region holding [addr, addr+len) for an access by connection fd (-1: none);
 * MC_ERR_ADDRESS_NOT_REGISTERED if there is none, or when epoch is non-zero and the region
 * carries another one. Unpin when done, before replying. */
int mc__reg_pin(mc__registry_t *r, uint64_t addr, uint64_t len, uint64_t epoch, int fd,
                mc__pin_t *pin);
void mc__reg_unpin(mc__registry_t *r, mc__pin_t *pin);
/* Waits until no pin overlaps [addr, addr+len) and holds off pin changes until quiesce_end:
 * tests use it to order their own access to registered memory after remote accesses. */
void mc__reg_quiesce_begin(mc__registry_t *r, uint64_t addr, uint64_t len);
void mc__reg_quiesce_end(mc__registry_t *r);
#endif
