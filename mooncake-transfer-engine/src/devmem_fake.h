/* The fake device-memory backend's test controls (devmem_fake.c). Engines created with
 * MC_DEVMEM=fake use it; these calls reach its one process-wide state. */
#ifndef MC_TE_DEVMEM_FAKE_H
#define MC_TE_DEVMEM_FAKE_H

#include <stddef.h>
#include <stdint.h>

/* Its counters: copies each way, their bytes, staging buffers given out and still held. */
typedef struct mc__devmem_fake_stats {
    uint64_t to_host, from_host;
    uint64_t to_host_bytes, from_host_bytes;
    uint64_t largest_copy;
    uint64_t pinned_allocs;
    int64_t pinned_live;
    uint64_t failed;
    uint64_t syncs;
} mc__devmem_fake_stats_t;

/* A copy whose source holds this marker at a multiple of 64 KiB from the copy's start fails:
 * tests (the Python ones too) fail one chosen chunk of one transfer through its data alone. */
#define MC__DEVMEM_FAKE_MARKER "MC-FAKE-DEV-FAIL"
#define MC__DEVMEM_FAKE_MARKER_STRIDE (64u << 10)

/* Marks [addr, addr+len) as memory of fake GPU `device` (no more than MC_DEVMEM_FAKE_DEVICES,
 * default 2, exist; a higher one is recorded, and copies to it fail as a missing device would):
 * 0, or MC_ERR_MEMORY when the table is full, MC_ERR_ADDRESS_OVERLAPPED on overlap. */
int mc__devmem_fake_add(const void *addr, size_t len, int device);
void mc__devmem_fake_remove(const void *addr);
/* The copy after `n` more successful ones fails (-1: none). */
void mc__devmem_fake_fail_after(int64_t n);
void mc__devmem_fake_stats(mc__devmem_fake_stats_t *out);
void mc__devmem_fake_reset_stats(void);
#endif
