/* The device-memory hook: the few operations the transports need to move bytes to and from GPU
 * memory they cannot touch directly (tcp sends from and receives into host memory; shm and local
 * copy with the CPU). One table per engine, chosen when it is created: the CUDA driver's,
 * resolved at run time from a process that already loaded it (devmem_cuda.c), or, for tests on
 * any host, a fake whose "device memory" is host memory it alone copies (devmem_fake.c, chosen
 * with MC_DEVMEM=fake). Nothing here links a GPU library: without one every buffer is host
 * memory and the engine behaves as if this file did not exist. */
#ifndef MC_TE_DEVMEM_H
#define MC_TE_DEVMEM_H

#include <stddef.h>
#include <stdint.h>

#include "device_mem.h"

struct mc_engine;

typedef struct mc__devmem_ops {
    const char *name;
    /* [addr, addr+len): 0 with *device = -1 for host memory or the GPU's ordinal;
     * MC_ERR_INVALID_ARGUMENT when only part of the range is device memory. */
    int (*query)(const void *addr, size_t len, int *device);
    /* Registration: where memory named by `location` lives (device_mem.h's rules, or the fake's
     * own); 0 or a code that refuses the registration. forget: it was unregistered. */
    int (*classify)(const void *addr, size_t len, const char *location, mc__mem_place_t *out);
    void (*forget)(const void *addr);
    /* Synchronous copies between GPU `device` and host memory: 0, MC_ERR_DEVICE_NOT_FOUND (no
     * such device, or no runtime to reach it) or MC_ERR_MEMORY (the copy failed). */
    int (*to_host)(void *host, const void *dev, size_t n, int device);
    int (*from_host)(void *dev, const void *host, size_t n, int device);
    int (*sync)(int device);
    /* Page-locked host memory for staging (NULL when it cannot: the caller uses plain memory). */
    void *(*pinned_alloc)(size_t n, int device);
    void (*pinned_free)(void *p, size_t n);
} mc__devmem_ops_t;

extern const mc__devmem_ops_t mc__devmem_cuda;
extern const mc__devmem_ops_t mc__devmem_fake;

/* The table for a new engine: MC_DEVMEM=fake picks the fake, anything else (or nothing) the
 * CUDA driver's. */
const mc__devmem_ops_t *mc__devmem_select(void);

/* A staging buffer, pinned when the table can give pinned memory, grown on demand. */
typedef struct mc__devmem_buf {
    uint8_t *p;
    size_t cap;
    int pinned;
} mc__devmem_buf_t;

/* Makes b hold at least n bytes: 0 or MC_ERR_MEMORY. */
int mc__devmem_buf_reserve(const mc__devmem_ops_t *ops, mc__devmem_buf_t *b, size_t n, int device);
void mc__devmem_buf_release(const mc__devmem_ops_t *ops, mc__devmem_buf_t *b);

/* A copy to GPU `device` from host memory, complete when it returns: a copy from pageable
 * (not pinned) memory may still be on its way to the device when the driver returns (CUDA's
 * synchronous copies only stage pageable sources), so the device is synchronised after it. */
int mc__devmem_from_host(const mc__devmem_ops_t *ops, void *dev, const void *host, size_t n,
                         int device, int pinned);

/* Copies n bytes from src to dst where each side is host memory (-1) or a GPU's; device to
 * device goes through a host bounce buffer. Host to host is memmove. 0 or the table's code;
 * complete on the device when it returns (mc__devmem_from_host). */
int mc__devmem_move(const mc__devmem_ops_t *ops, void *dst, int dst_dev, const void *src,
                    int src_dev, size_t n);

/* Where the local side of a request lives: the registered region's place when it is
 * registered, else (unless `registered` demands a registration: MC_ERR_ADDRESS_NOT_REGISTERED)
 * the table's answer. 0 with *device (-1: host), or MC_ERR_INVALID_ARGUMENT. */
int mc__devmem_local(struct mc_engine *e, const void *addr, size_t len, int registered,
                     int *device);
#endif
