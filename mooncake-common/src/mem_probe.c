/* The mapped-and-accessible check behind raw-address calls (mem_probe.h). */
#include "mooncake/common/mem_probe.h"

#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* Whether this kernel has the populate advice (Linux 5.14+), asked once of a page we know is
 * readable (our own read-only data). Without it the probe can only tell mapped from unmapped. */
static int mc__populate_works(uintptr_t pgsz) {
    static _Atomic int known = -1;
    static const char own = 0;
    int k = atomic_load_explicit(&known, memory_order_relaxed);
    if (k < 0) {
        uintptr_t page = (uintptr_t)&own & ~(pgsz - 1);
        k = madvise((void *)page, pgsz, MADV_POPULATE_READ) == 0;
        atomic_store_explicit(&known, k, memory_order_relaxed);
    }
    return k;
}

int mc__mem_populate(void *addr, size_t len, int writable) {
    return madvise(addr, len, writable ? MADV_POPULATE_WRITE : MADV_POPULATE_READ) == 0 ? 0 : -1;
}

static int mc__populate(uintptr_t from, uintptr_t len, int writable) {
    return mc__mem_populate((void *)from, len, writable) == 0;
}

int mc__mem_probe(const void *addr, size_t len, int writable) {
    uintptr_t a = (uintptr_t)addr, first, last, end;
    uintptr_t pgsz = (uintptr_t)sysconf(_SC_PAGESIZE);
    if (!addr || len == 0 || a + len < a)
        return -1;
    first = a & ~(pgsz - 1);
    end = a + len;
    last = (end - 1) & ~(pgsz - 1);
    /* MS_ASYNC writes nothing back (a no-op since Linux 2.6.19) but fails with ENOMEM when any
     * page of the range is unmapped: a hole in the middle, past the caller's end, anywhere; its
     * cost grows with the mappings crossed, not with the pages. */
    if (!mc__populate_works(pgsz))
        return msync((void *)first, last + pgsz - first, MS_ASYNC) == 0 ? 0 : -1;
    /* One or two pages (most small values): one populate sees every page of the range. */
    if (last - first <= pgsz)
        return mc__populate(first, last + pgsz - first, writable) ? 0 : -1;
    if (msync((void *)first, last + pgsz - first, MS_ASYNC) != 0)
        return -1;
    return mc__populate(first, pgsz, writable) && mc__populate(last, pgsz, writable) ? 0 : -1;
}
