/* The disk tier's file I/O: reads and writes submitted to an io_uring ring where the kernel
 * allows one, plain pread/pwrite where it does not.
 *
 * The ring is driven through the raw io_uring_setup / io_uring_enter system calls and the kernel's
 * own <linux/io_uring.h>, not liburing: the library would be one more build dependency (and a
 * runtime one in the wheel unless linked statically) for the thirty lines of ring handling a
 * queue of reads and single writes need. A build without that header, a kernel or container that
 * refuses io_uring_setup (seccomp often does), or MC_DISK_IO_URING=0 in the environment all give
 * the same interface on pread/pwrite: a "submitted" read is done at once and its completion is
 * queued, so callers are written once for both.
 *
 * One context per thread (not thread-safe). Every call returns 0 or a negative MC_ERR_ code
 * unless it says otherwise. */
#ifndef MC_DISK_DISK_IO_H
#define MC_DISK_DISK_IO_H
#include <stddef.h>
#include <stdint.h>

#define MC_DIO_MAX_DEPTH 32u

struct mc__dio;

/* A context for at most depth (1..MC_DIO_MAX_DEPTH) operations in flight. Falls back to
 * pread/pwrite by itself; fails only for bad arguments or out of memory. */
int mc__dio_open(unsigned depth, struct mc__dio **out);
void mc__dio_close(struct mc__dio *d); /* waits for what is in flight; NULL is a no-op */

/* 1 when operations go through io_uring, 0 on pread/pwrite. */
int mc__dio_uring(const struct mc__dio *d);
/* "io_uring", or "pread/pwrite (why)": MC_DISK_IO_URING=0, the kernel refused io_uring_setup
 * (with its error), or a build without <linux/io_uring.h>. For logs. */
const char *mc__dio_mode(const struct mc__dio *d);
/* Whether io_uring is allowed at all in this process: MC_DISK_IO_URING unset or true. */
int mc__dio_uring_wanted(void);

/* Queues a read of len bytes of fd at off into buf, named by tag. INVALID_PARAMS when depth
 * operations are in flight already. buf, len and off must suit fd (O_DIRECT's alignment). */
int mc__dio_read(struct mc__dio *d, int fd, void *buf, size_t len, uint64_t off, uint64_t tag);
/* Waits for one queued read to complete (in any order): its tag and result (bytes read, which
 * may be short at the end of the file, or -errno). INVALID_PARAMS when nothing is in flight. */
int mc__dio_reap(struct mc__dio *d, uint64_t *tag, int64_t *res);
unsigned mc__dio_inflight(const struct mc__dio *d);

/* Writes len bytes of buf at off, continuing short writes: 0, or WRITE_FAIL with errno set.
 * Nothing may be in flight. */
int mc__dio_write_full(struct mc__dio *d, int fd, const void *buf, size_t len, uint64_t off);
#endif
