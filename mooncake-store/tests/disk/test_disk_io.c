/* The disk tier's I/O context (disk_io.h) on a real file system, with io_uring where the kernel
 * allows it and with MC_DISK_IO_URING=0 (pread/pwrite), and (store_disk_io_nouring) built as
 * without <linux/io_uring.h>: queued reads come back complete, with
 * their own tags, in any order; short reads at the end of a file; errors as codes; full writes;
 * bad arguments. argv[1] is the base directory. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "disk/disk_io.h"
#include "mooncake/error.h"

static const char *g_base = "/tmp";

#define FILE_LEN (1u << 20)
#define PIECE (64u << 10)

struct fx {
    char path[512];
    int fd;
    uint8_t *want;
};

static void fill(uint8_t *p, size_t len, uint64_t seed) {
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (uint8_t)x;
    }
}

static int setup(void **state) {
    struct fx *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    snprintf(f->path, sizeof f->path, "%s/mc-dio-XXXXXX", g_base);
    f->fd = mkstemp(f->path);
    f->want = malloc(FILE_LEN);
    if (f->fd < 0 || !f->want)
        return -1;
    fill(f->want, FILE_LEN, 7);
    if (pwrite(f->fd, f->want, FILE_LEN, 0) != (ssize_t)FILE_LEN)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state) {
    struct fx *f = *state;
    close(f->fd);
    unlink(f->path);
    free(f->want);
    free(f);
    return 0;
}

/* Opens a context with io_uring allowed (uring = 1) or turned off by the environment. */
static struct mc__dio *open_dio(int uring, unsigned depth) {
    if (uring)
        unsetenv("MC_DISK_IO_URING");
    else
        setenv("MC_DISK_IO_URING", "0", 1);
    struct mc__dio *d = NULL;
    assert_int_equal(mc__dio_open(depth, &d), 0);
    const char *mode = mc__dio_mode(d);
#ifdef MC_DIO_NO_URING
    /* This binary's context was built as without <linux/io_uring.h>. */
    assert_string_equal(mode, "pread/pwrite (built without io_uring)");
    assert_int_equal(mc__dio_uring(d), 0);
    (void)uring;
#else
    if (uring) {
        /* io_uring, unless the kernel refused it, which the mode then says. */
        assert_true(strcmp(mode, "io_uring") == 0 ||
                    strncmp(mode, "pread/pwrite (io_uring_setup refused", 36) == 0 ||
                    strcmp(mode, "pread/pwrite (built without io_uring)") == 0);
        assert_int_equal(mc__dio_uring(d), strcmp(mode, "io_uring") == 0);
    } else {
        assert_string_equal(mode, "pread/pwrite (MC_DISK_IO_URING=0)");
        assert_int_equal(mc__dio_uring(d), 0);
    }
#endif
    unsetenv("MC_DISK_IO_URING");
    return d;
}

static void reads_in_flight(struct fx *f, int uring) {
    struct mc__dio *d = open_dio(uring, 8);
    uint8_t *bufs = malloc(8 * PIECE);
    /* Eight pieces from all over the file, queued before any is reaped. */
    static const unsigned order[8] = {5, 0, 15, 3, 9, 1, 12, 7};
    for (uint64_t i = 0; i < 8; i++)
        assert_int_equal(
            mc__dio_read(d, f->fd, bufs + i * PIECE, PIECE, (uint64_t)order[i] * PIECE, 100 + i),
            0);
    assert_int_equal(mc__dio_inflight(d), 8);
    uint8_t extra[16];
    assert_int_equal(mc__dio_read(d, f->fd, extra, sizeof extra, 0, 999), MC_ERR_INVALID_PARAMS);
    int seen[8] = {0};
    for (int n = 0; n < 8; n++) {
        uint64_t tag = 0;
        int64_t res = 0;
        assert_int_equal(mc__dio_reap(d, &tag, &res), 0);
        assert_true(tag >= 100 && tag < 108);
        uint64_t i = tag - 100;
        assert_false(seen[i]);
        seen[i] = 1;
        assert_int_equal(res, PIECE);
        assert_memory_equal(bufs + i * PIECE, f->want + (size_t)order[i] * PIECE, PIECE);
    }
    assert_int_equal(mc__dio_inflight(d), 0);
    uint64_t tag;
    int64_t res;
    assert_int_equal(mc__dio_reap(d, &tag, &res), MC_ERR_INVALID_PARAMS);
    /* Short at the end of the file, nothing past it, and an error as -errno. */
    assert_int_equal(mc__dio_read(d, f->fd, bufs, PIECE, FILE_LEN - 100, 1), 0);
    assert_int_equal(mc__dio_reap(d, &tag, &res), 0);
    assert_int_equal(res, 100);
    assert_memory_equal(bufs, f->want + FILE_LEN - 100, 100);
    assert_int_equal(mc__dio_read(d, f->fd, bufs, PIECE, FILE_LEN + 4096, 2), 0);
    assert_int_equal(mc__dio_reap(d, &tag, &res), 0);
    assert_int_equal(res, 0);
    assert_int_equal(mc__dio_read(d, -1, bufs, PIECE, 0, 3), 0);
    assert_int_equal(mc__dio_reap(d, &tag, &res), 0);
    assert_int_equal(tag, 3);
    assert_int_equal(res, -EBADF);
    free(bufs);
    mc__dio_close(d);
}

static void test_reads_uring(void **state) {
    reads_in_flight(*state, 1);
}

static void test_reads_pread(void **state) {
    reads_in_flight(*state, 0);
}

/* O_DIRECT reads through the context where the file system takes them (aligned buffers). */
static void direct_reads(struct fx *f, int uring) {
    int dfd = open(f->path, O_RDONLY | O_DIRECT);
    if (dfd < 0) {
        /* tmpfs before Linux 6.6: refused, and said so clearly */
        assert_int_equal(errno, EINVAL);
        return;
    }
    struct mc__dio *d = open_dio(uring, 4);
    void *raw = malloc(4 * PIECE + 4096);
    uint8_t *ab = (uint8_t *)(((uintptr_t)raw + 4095) & ~(uintptr_t)4095);
    for (uint64_t i = 0; i < 4; i++)
        assert_int_equal(mc__dio_read(d, dfd, ab + i * PIECE, PIECE, (i * 3) * PIECE, i), 0);
    for (int n = 0; n < 4; n++) {
        uint64_t tag;
        int64_t res;
        assert_int_equal(mc__dio_reap(d, &tag, &res), 0);
        assert_int_equal(res, PIECE);
        assert_memory_equal(ab + tag * PIECE, f->want + tag * 3 * PIECE, PIECE);
    }
    mc__dio_close(d);
    free(raw);
    close(dfd);
}

static void test_direct_reads_uring(void **state) {
    direct_reads(*state, 1);
}

static void test_direct_reads_pread(void **state) {
    direct_reads(*state, 0);
}

static void writes(struct fx *f, int uring) {
    struct mc__dio *d = open_dio(uring, 2);
    size_t len = 3u << 20;
    uint8_t *src = malloc(len), *back = malloc(len);
    fill(src, len, 99);
    assert_int_equal(mc__dio_write_full(d, f->fd, src, len, 12345), 0);
    assert_int_equal(pread(f->fd, back, len, 12345), (ssize_t)len);
    assert_memory_equal(src, back, len);
    assert_int_equal(mc__dio_write_full(d, f->fd, src, 0, 0), 0);
    /* A descriptor that cannot be written: a code, with errno saying why. */
    int ro = open(f->path, O_RDONLY);
    errno = 0;
    assert_int_equal(mc__dio_write_full(d, ro, src, 4096, 0), MC_ERR_WRITE_FAIL);
    assert_int_equal(errno, EBADF);
    close(ro);
    /* Not while a read is in flight. */
    assert_int_equal(mc__dio_read(d, f->fd, back, 4096, 0, 1), 0);
    assert_int_equal(mc__dio_write_full(d, f->fd, src, 4096, 0), MC_ERR_INVALID_PARAMS);
    uint64_t tag;
    int64_t res;
    assert_int_equal(mc__dio_reap(d, &tag, &res), 0);
    free(src);
    free(back);
    mc__dio_close(d);
}

static void test_writes_uring(void **state) {
    writes(*state, 1);
}

static void test_writes_pread(void **state) {
    writes(*state, 0);
}

static void test_bad_arguments(void **state) {
    (void)state;
    struct mc__dio *d = NULL;
    assert_int_equal(mc__dio_open(0, &d), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc__dio_open(MC_DIO_MAX_DEPTH + 1, &d), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc__dio_open(4, NULL), MC_ERR_INVALID_PARAMS);
    uint64_t tag;
    int64_t res;
    uint8_t b[8];
    assert_int_equal(mc__dio_read(NULL, 0, b, 8, 0, 0), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc__dio_reap(NULL, &tag, &res), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc__dio_write_full(NULL, 0, b, 8, 0), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc__dio_open(MC_DIO_MAX_DEPTH, &d), 0);
    assert_int_equal(mc__dio_read(d, 0, NULL, 8, 0, 0), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc__dio_reap(d, NULL, &res), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc__dio_write_full(d, 0, NULL, 8, 0), MC_ERR_INVALID_PARAMS);
    mc__dio_close(d);
    mc__dio_close(NULL);
    /* The variable: 0 turns io_uring off, a value that is no boolean keeps the default. */
    setenv("MC_DISK_IO_URING", "0", 1);
    assert_int_equal(mc__dio_uring_wanted(), 0);
    setenv("MC_DISK_IO_URING", "maybe", 1);
    assert_int_equal(mc__dio_uring_wanted(), 1);
    setenv("MC_DISK_IO_URING", "1", 1);
    assert_int_equal(mc__dio_uring_wanted(), 1);
    unsetenv("MC_DISK_IO_URING");
    assert_int_equal(mc__dio_uring_wanted(), 1);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(int argc, char **argv) {
    if (argc > 1)
        g_base = argv[1];
    const struct CMUnitTest tests[] = {
        T(test_reads_uring),        T(test_reads_pread),  T(test_direct_reads_uring),
        T(test_direct_reads_pread), T(test_writes_uring), T(test_writes_pread),
        T(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
