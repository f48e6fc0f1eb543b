/* The mapped-and-accessible check behind raw-address calls (mem_probe.h). */
#include "mooncake/common/mem_probe.h"

#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* One page's access, by prefaulting it as a read or a write would without doing either. A kernel
 * older than 5.14 lacks the advice (EINVAL for every page, also a good one): the range was found
 * mapped, which is what that kernel lets us know cheaply. */
static int mc__page_ok(uintptr_t page, size_t pgsz, int writable) {
    if (madvise((void *)page, pgsz, writable ? MADV_POPULATE_WRITE : MADV_POPULATE_READ) == 0)
        return 1;
    if (errno != EINVAL)
        return 0;
    static const char probe = 0;
    uintptr_t own = (uintptr_t)&probe & ~(uintptr_t)(pgsz - 1);
    /* the advice works on a page we know is readable: EINVAL was this page's protection */
    return madvise((void *)own, pgsz, MADV_POPULATE_READ) != 0 && errno == EINVAL;
}

int mc__mem_probe(const void *addr, size_t len, int writable) {
    uintptr_t a = (uintptr_t)addr, first, last, end;
    size_t pgsz = (size_t)sysconf(_SC_PAGESIZE);
    if (!addr || len == 0 || a + len < a)
        return -1;
    first = a & ~(uintptr_t)(pgsz - 1);
    end = a + len;
    last = (end - 1) & ~(uintptr_t)(pgsz - 1);
    /* MS_ASYNC writes nothing back (a no-op since Linux 2.6.19) but fails with ENOMEM when any
     * page of the range is unmapped: a hole in the middle, past the caller's end, anywhere. */
    if (msync((void *)first, last + pgsz - first, MS_ASYNC) != 0)
        return -1;
    if (!mc__page_ok(first, pgsz, writable))
        return -1;
    if (last != first && !mc__page_ok(last, pgsz, writable))
        return -1;
    return 0;
}
