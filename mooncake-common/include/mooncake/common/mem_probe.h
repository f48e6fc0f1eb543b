#ifndef MC_COMMON_MEM_PROBE_H
#define MC_COMMON_MEM_PROBE_H
#include <stddef.h>
/* Whether this process could touch [addr, addr+len) without a fault: every page of it is mapped
 * (an msync, whose cost grows with the mappings crossed, not the pages), and its first and last
 * pages allow the access (read, or write when writable; a range inside one mapping has one
 * protection throughout), by the populate advice (a range of one or two pages takes that one
 * call). 0, or -1 for a NULL address, a range that wraps, or memory that is not there. Nothing
 * is written; the probed pages are faulted in, as the access would. A kernel without the advice
 * (before 5.14) gets the mapped check only.
 *
 * For addresses that come from outside C's type system (an integer from Python): it catches a
 * wild or unmapped address and a read-only destination. It cannot tell freed memory that is
 * still mapped (a heap block) from live memory: only a registration that holds the memory's
 * owner does that. */
int mc__mem_probe(const void *addr, size_t len, int writable);

/* Faults [addr, addr+len) in as a write (or a read, writable 0) would, without doing either:
 * the populate advice. 0, or -1 with errno: EINVAL for a kernel before 5.14 (or a range the
 * advice does not take), ENOMEM or EFAULT for memory that is not there, does not allow the
 * access or cannot be had, EINTR for a signal (call again for the rest). */
int mc__mem_populate(void *addr, size_t len, int writable);
#endif
