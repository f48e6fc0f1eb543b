/* Faulting the contributed segment's pages in ahead of use (segment_prefault.c).
 *
 * The segment is engine-managed memory (a memfd, mapped shared) whose pages the kernel provides
 * on first touch. A fresh store pays that on its first fill, inside the transfers that write
 * into it: a page fault per 4 KiB, about 12 us each on a 2-core KVM guest (0.56 GB/s; a 1 MiB
 * put's p99 3.3 ms against 0.42 ms once faulted in: docs/perf/issue26-prefault). Faulting the
 * pages in ahead takes that off the data path. It uses the populate advice (Linux 5.14+), which
 * faults a page in as a write would without writing it, so it may overlap transfers into the
 * same pages. Without it (older kernels) the pages stay as they were: faulted on first use. */
#ifndef MC_STORE_CLIENT_SEGMENT_PREFAULT_H
#define MC_STORE_CLIENT_SEGMENT_PREFAULT_H
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef enum mc__prefault_mode {
    MC__PREFAULT_OFF = 0,
    MC__PREFAULT_BACKGROUND, /* a thread of its own, after setup */
    MC__PREFAULT_SYNC,       /* before setup returns */
} mc__prefault_mode_t;

/* One range's run; zeroed before its first start. Owned by the segment's owner, who stops it
 * before the range is unmapped. */
typedef struct mc__prefault {
    pthread_t thread;
    int started;           /* a background thread to join */
    _Atomic int stop;      /* asked to stop */
    _Atomic int ended;     /* the run is over: every page done, stopped, or given up */
    _Atomic uint64_t done; /* bytes faulted in so far */
    uint8_t *addr;
    size_t len;
} mc__prefault_t;

/* MC_STORE_SEGMENT_PREFAULT: "off" (unset: the default), "background", "sync" (also 0/1,
 * false/true). Anything else is warned about once and taken as the default. */
mc__prefault_mode_t mc__prefault_mode(void);

/* Starts faulting [addr, addr + len) in: SYNC returns when done, BACKGROUND at once. A
 * background run is skipped (and says so) when the range is more than half of the memory
 * available to this process (MemAvailable, or the cgroup's limit less its usage): committing
 * it then could push others out. Any run stops (and says so) where going on would leave the
 * host less than an eighth of its memory (at most 4 GiB). Never fails the caller: pages not
 * faulted in come on first use. */
void mc__prefault_start(mc__prefault_t *pf, void *addr, size_t len, mc__prefault_mode_t mode);
/* Ends a background run and joins its thread; returns within one chunk's fault time. Safe on a
 * run never started or already stopped. */
void mc__prefault_stop(mc__prefault_t *pf);

/* Whether faulting n more bytes in, with avail of total available, leaves the host its
 * reserve: an eighth of total, at most 4 GiB (unknown figures: yes). */
int mc__prefault_leaves_reserve(uint64_t avail, uint64_t total, uint64_t n);
/* The bytes this host lets a new commitment take (for the background guard), or UINT64_MAX
 * when unknown. */
uint64_t mc__prefault_mem_available(void);
#endif
