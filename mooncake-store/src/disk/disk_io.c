/* The disk tier's file I/O (see disk_io.h): an io_uring ring on the raw system calls, or
 * pread/pwrite with the same queue-and-reap interface. */
#include "disk/disk_io.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/config.h"
#include "mooncake/common/log.h"
#include "mooncake/error.h"

/* MC_DIO_NO_URING (a compile definition) builds the pread/pwrite path alone, as on a system
 * without the header. */
#if defined(__linux__) && defined(__has_include) && !defined(MC_DIO_NO_URING)
#if __has_include(<linux/io_uring.h>) && defined(__NR_io_uring_setup)
#include <linux/io_uring.h>
#define MC_DIO_HAVE_URING 1
#endif
#endif

struct mc__dio_done {
    uint64_t tag;
    int64_t res;
};

struct mc__dio {
    char mode[96]; /* what mc__dio_mode says */
    unsigned depth;
    unsigned inflight;
    /* pread/pwrite: completions of the reads already done, oldest first */
    struct mc__dio_done done[MC_DIO_MAX_DEPTH];
    unsigned done_head, done_n;
#ifdef MC_DIO_HAVE_URING
    int ring_fd; /* -1: no ring */
    void *sq_map, *cq_map;
    size_t sq_map_len, cq_map_len;
    struct io_uring_sqe *sqes;
    size_t sqes_len;
    unsigned *sq_head, *sq_tail, *sq_mask, *sq_array;
    unsigned *cq_head, *cq_tail, *cq_mask;
    struct io_uring_cqe *cqes;
#endif
};

int mc__dio_uring_wanted(void) {
    int on = 1;
    (void)mc__env_bool("MC_DISK_IO_URING", 1, &on); /* a bad value warns and keeps the default */
    return on;
}

#ifdef MC_DIO_HAVE_URING
static void ring_unmap(struct mc__dio *d) {
    if (d->sqes && d->sqes != MAP_FAILED)
        munmap(d->sqes, d->sqes_len);
    if (d->cq_map && d->cq_map != MAP_FAILED && d->cq_map != d->sq_map)
        munmap(d->cq_map, d->cq_map_len);
    if (d->sq_map && d->sq_map != MAP_FAILED)
        munmap(d->sq_map, d->sq_map_len);
    if (d->ring_fd >= 0)
        close(d->ring_fd);
    d->ring_fd = -1;
    d->sqes = NULL;
    d->sq_map = d->cq_map = NULL;
}

/* 0 with the ring mapped, -1 (errno set) when the kernel refuses it. */
static int ring_setup(struct mc__dio *d) {
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    long fd = syscall(__NR_io_uring_setup, d->depth, &p);
    if (fd < 0)
        return -1;
    d->ring_fd = (int)fd;
#ifdef IORING_FEAT_RW_CUR_POS
    /* IORING_OP_READ / OP_WRITE came with Linux 5.6, as did this feature bit: a ring without it
     * would fail every operation (the ring of 5.1-5.5 has only the vectored forms). */
    if (!(p.features & IORING_FEAT_RW_CUR_POS)) {
        ring_unmap(d);
        errno = ENOSYS;
        return -1;
    }
#endif
    d->sq_map_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    d->cq_map_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    if ((p.features & IORING_FEAT_SINGLE_MMAP) && d->cq_map_len > d->sq_map_len)
        d->sq_map_len = d->cq_map_len;
    d->sq_map = mmap(NULL, d->sq_map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                     d->ring_fd, IORING_OFF_SQ_RING);
    if (d->sq_map == MAP_FAILED)
        goto fail;
    if (p.features & IORING_FEAT_SINGLE_MMAP) {
        d->cq_map = d->sq_map;
    } else {
        d->cq_map = mmap(NULL, d->cq_map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                         d->ring_fd, IORING_OFF_CQ_RING);
        if (d->cq_map == MAP_FAILED)
            goto fail;
    }
    d->sqes_len = p.sq_entries * sizeof(struct io_uring_sqe);
    d->sqes = mmap(NULL, d->sqes_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, d->ring_fd,
                   IORING_OFF_SQES);
    if (d->sqes == MAP_FAILED)
        goto fail;
    uint8_t *sq = d->sq_map, *cq = d->cq_map;
    d->sq_head = (unsigned *)(sq + p.sq_off.head);
    d->sq_tail = (unsigned *)(sq + p.sq_off.tail);
    d->sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
    d->sq_array = (unsigned *)(sq + p.sq_off.array);
    d->cq_head = (unsigned *)(cq + p.cq_off.head);
    d->cq_tail = (unsigned *)(cq + p.cq_off.tail);
    d->cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
    d->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
    return 0;
fail:;
    int e = errno;
    ring_unmap(d);
    errno = e;
    return -1;
}

/* Queues one operation and tells the kernel: 0, or -1 (errno) when it would not take it. */
static int ring_submit(struct mc__dio *d, uint8_t op, int fd, void *buf, size_t len, uint64_t off,
                       uint64_t tag) {
    unsigned tail = *d->sq_tail; /* only this thread writes it */
    unsigned idx = tail & *d->sq_mask;
    struct io_uring_sqe *sqe = &d->sqes[idx];
    memset(sqe, 0, sizeof *sqe);
    sqe->opcode = op;
    sqe->fd = fd;
    sqe->addr = (uint64_t)(uintptr_t)buf;
    sqe->len = (uint32_t)len;
    sqe->off = off;
    sqe->user_data = tag;
    d->sq_array[idx] = idx;
    __atomic_store_n(d->sq_tail, tail + 1, __ATOMIC_RELEASE);
    for (;;) {
        long n = syscall(__NR_io_uring_enter, d->ring_fd, 1, 0, 0, NULL, 0);
        if (n == 1)
            return 0;
        /* Interrupted after the kernel took it: submitted all the same. */
        if (__atomic_load_n(d->sq_head, __ATOMIC_ACQUIRE) == tail + 1)
            return 0;
        if (n < 0 && errno == EINTR)
            continue;
        /* Not consumed: take the entry back so the ring stays as it was. */
        __atomic_store_n(d->sq_tail, tail, __ATOMIC_RELEASE);
        if (n >= 0)
            errno = EAGAIN;
        return -1;
    }
}

/* Waits for one completion. */
static int ring_reap(struct mc__dio *d, uint64_t *tag, int64_t *res) {
    for (;;) {
        unsigned head = *d->cq_head;
        if (head != __atomic_load_n(d->cq_tail, __ATOMIC_ACQUIRE)) {
            struct io_uring_cqe *c = &d->cqes[head & *d->cq_mask];
            *tag = c->user_data;
            *res = c->res;
            __atomic_store_n(d->cq_head, head + 1, __ATOMIC_RELEASE);
            return 0;
        }
        long n = syscall(__NR_io_uring_enter, d->ring_fd, 0, 1, IORING_ENTER_GETEVENTS, NULL, 0);
        if (n < 0 && errno != EINTR) {
            MC_ERROR("disk io: io_uring_enter: %s", strerror(errno));
            return MC_ERR_INVALID_READ;
        }
    }
}
#endif

int mc__dio_open(unsigned depth, struct mc__dio **out) {
    if (!out || depth == 0 || depth > MC_DIO_MAX_DEPTH)
        return MC_ERR_INVALID_PARAMS;
    struct mc__dio *d = mc__calloc(1, sizeof *d);
    if (!d)
        return MC_ERR_INTERNAL_ERROR;
    d->depth = depth;
#ifdef MC_DIO_HAVE_URING
    d->ring_fd = -1;
    if (!mc__dio_uring_wanted()) {
        snprintf(d->mode, sizeof d->mode, "pread/pwrite (MC_DISK_IO_URING=0)");
    } else if (ring_setup(d) != 0) {
        snprintf(d->mode, sizeof d->mode, "pread/pwrite (io_uring_setup refused: %s)",
                 strerror(errno));
        static int told; /* once per process: containers refuse it for every thread alike */
        if (!__atomic_exchange_n(&told, 1, __ATOMIC_RELAXED))
            MC_INFO("disk io: %s", d->mode);
    } else {
        snprintf(d->mode, sizeof d->mode, "io_uring");
    }
#else
    snprintf(d->mode, sizeof d->mode, "pread/pwrite (built without io_uring)");
#endif
    *out = d;
    return 0;
}

void mc__dio_close(struct mc__dio *d) {
    if (!d)
        return;
#ifdef MC_DIO_HAVE_URING
    if (d->ring_fd >= 0) {
        /* The kernel may still write into buffers the caller is about to free. */
        while (d->inflight > 0) {
            uint64_t tag;
            int64_t res;
            if (ring_reap(d, &tag, &res) != 0)
                break;
            d->inflight--;
        }
        ring_unmap(d);
    }
#endif
    mc__free(d);
}

int mc__dio_uring(const struct mc__dio *d) {
#ifdef MC_DIO_HAVE_URING
    return d && d->ring_fd >= 0;
#else
    (void)d;
    return 0;
#endif
}

const char *mc__dio_mode(const struct mc__dio *d) {
    return d ? d->mode : "";
}

unsigned mc__dio_inflight(const struct mc__dio *d) {
    return d ? d->inflight : 0;
}

static int64_t pread_once(int fd, void *buf, size_t len, uint64_t off) {
    for (;;) {
        ssize_t n = pread(fd, buf, len, (off_t)off);
        if (n >= 0)
            return n;
        if (errno != EINTR)
            return -errno;
    }
}

int mc__dio_read(struct mc__dio *d, int fd, void *buf, size_t len, uint64_t off, uint64_t tag) {
    if (!d || !buf || d->inflight >= d->depth)
        return MC_ERR_INVALID_PARAMS;
#ifdef MC_DIO_HAVE_URING
    if (d->ring_fd >= 0 && ring_submit(d, IORING_OP_READ, fd, buf, len, off, tag) == 0) {
        d->inflight++;
        return 0;
    }
    /* A ring that would not take this one (EAGAIN, EBUSY, an old kernel without OP_READ):
     * the read is done here, as without a ring. */
#endif
    struct mc__dio_done *c = &d->done[(d->done_head + d->done_n) % MC_DIO_MAX_DEPTH];
    c->tag = tag;
    c->res = pread_once(fd, buf, len, off);
    d->done_n++;
    d->inflight++;
    return 0;
}

int mc__dio_reap(struct mc__dio *d, uint64_t *tag, int64_t *res) {
    if (!d || !tag || !res || d->inflight == 0)
        return MC_ERR_INVALID_PARAMS;
    if (d->done_n > 0) {
        struct mc__dio_done *c = &d->done[d->done_head];
        *tag = c->tag;
        *res = c->res;
        d->done_head = (d->done_head + 1) % MC_DIO_MAX_DEPTH;
        d->done_n--;
        d->inflight--;
        return 0;
    }
#ifdef MC_DIO_HAVE_URING
    if (d->ring_fd >= 0) {
        int rc = ring_reap(d, tag, res);
        if (rc == 0)
            d->inflight--;
        return rc;
    }
#endif
    return MC_ERR_INVALID_PARAMS;
}

int mc__dio_write_full(struct mc__dio *d, int fd, const void *buf, size_t len, uint64_t off) {
    if (!d || (!buf && len > 0) || d->inflight > 0)
        return MC_ERR_INVALID_PARAMS;
    const uint8_t *p = buf;
    while (len > 0) {
        int64_t n = -1;
#ifdef MC_DIO_HAVE_URING
        uint64_t tag;
        if (d->ring_fd >= 0 &&
            ring_submit(d, IORING_OP_WRITE, fd, (void *)(uintptr_t)p, len, off, 0) == 0) {
            if (ring_reap(d, &tag, &n) != 0)
                return MC_ERR_WRITE_FAIL;
        } else
#endif
        {
            ssize_t k = pwrite(fd, p, len, (off_t)off);
            n = k >= 0 ? k : -errno;
        }
        if (n == -EINTR || n == -EAGAIN)
            continue;
        if (n <= 0) {
            errno = n < 0 ? (int)-n : EIO;
            return MC_ERR_WRITE_FAIL;
        }
        p += n;
        off += (uint64_t)n;
        len -= (size_t)n;
    }
    return 0;
}
