/* The bucket store's I/O paths on a real file system: the O_DIRECT / buffered choice (made once
 * per directory at open), records padded for O_DIRECT, a record torn at a padded boundary, and
 * streamed gets (chunks with reads in flight, the checksum's verdict on the last one) with
 * io_uring allowed and turned off, including a checksum failure in the middle of a value.
 * argv[1] is the base directory the stores are made under. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cmocka.h>

#include "disk/bucket_store.h"
#include "mooncake/error.h"

static const char *g_base = "/tmp";

struct fx {
    char dir[512];
};

static void rm_tree(const char *dir) {
    DIR *d = opendir(dir);
    if (!d)
        return;
    char p[1024];
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        if (de->d_name[0] == '.')
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

static int setup(void **state) {
    struct fx *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    snprintf(f->dir, sizeof f->dir, "%s/mc-bio-XXXXXX", g_base);
    if (!mkdtemp(f->dir))
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state) {
    struct fx *f = *state;
    rm_tree(f->dir);
    free(f);
    unsetenv("MC_DISK_IO_URING");
    return 0;
}

static void fill(uint8_t *p, size_t len, uint64_t seed) {
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (uint8_t)x;
    }
}

static struct mc__bstore *open_store(const char *dir, int no_direct) {
    struct mc__bstore_opts o = {
        .capacity = 64ull << 20, .bucket_size = 16u << 20, .no_sync = 1, .no_direct = no_direct};
    struct mc__bstore *s = NULL;
    assert_int_equal(mc__bstore_open_ex(dir, &o, &s), 0);
    return s;
}

static void put_seeded(struct mc__bstore *s, const char *key, size_t len, uint64_t seed) {
    uint8_t *b = malloc(len ? len : 1);
    fill(b, len, seed);
    assert_int_equal(mc__bstore_put(s, key, b, len), 0);
    free(b);
}

static void bucket_path(const char *dir, unsigned id, char out[600]) {
    snprintf(out, 600, "%s/bucket-%08x.mcb", dir, id);
}

static off_t file_size(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 ? st.st_size : -1;
}

static uint64_t align4k(uint64_t n) {
    return (n + MC_BREC_ALIGN - 1) / MC_BREC_ALIGN * MC_BREC_ALIGN;
}

/* What the base directory's file system should get: O_DIRECT where it takes the flag, but not on
 * a memory file system (no device to bypass the page cache for). */
static int expect_direct(const char *dir) {
    struct statfs sf;
    assert_int_equal(statfs(dir, &sf), 0);
    if (sf.f_type == TMPFS_MAGIC || sf.f_type == RAMFS_MAGIC)
        return 0;
    char p[600];
    snprintf(p, sizeof p, "%s/probe", dir);
    int fd = open(p, O_RDWR | O_CREAT | O_DIRECT, 0644);
    if (fd >= 0)
        close(fd);
    unlink(p);
    return fd >= 0;
}

static void test_direct_or_buffered_chosen_at_open(void **state) {
    struct fx *f = *state;
    int want = expect_direct(f->dir);
    struct mc__bstore *s = open_store(f->dir, 0);
    assert_int_equal(mc__bstore_direct(s), want);
    char line[256];
    mc__bstore_describe(s, line, sizeof line);
    assert_non_null(strstr(line, want ? "O_DIRECT writes" : "buffered writes and reads ("));
    /* Values of 64 KiB and more are written with O_DIRECT, their records padded to 4 KiB (the
     * file grows by whole blocks); smaller ones buffered and unpadded, and a large one after a
     * small one starts at the next boundary (zeros in between). Buffered: exact sizes. */
    put_seeded(s, "a", 70000, 1);
    put_seeded(s, "b", 0, 2);
    put_seeded(s, "c", 70000, 3);
    char p[600];
    bucket_path(f->dir, 0, p);
    uint64_t ra = MC_BREC_HDR + 1 + 70000, rb = MC_BREC_HDR + 1;
    uint64_t used = want ? align4k(ra) + align4k(rb) + align4k(ra) : 2 * ra + rb;
    uint64_t live = want ? align4k(ra) + rb + align4k(ra) : used;
    assert_int_equal(file_size(p), used);
    assert_int_equal(file_size(p) % MC_BREC_ALIGN, want ? 0 : (2 * ra + rb) % MC_BREC_ALIGN);
    assert_int_equal(mc__bstore_used(s), used);
    assert_int_equal(mc__bstore_live(s), live);
    mc__bstore_close(s);
    /* The reopened store finds all three; the zeros before "c" are "b"'s padding now. */
    s = open_store(f->dir, 0);
    assert_int_equal(mc__bstore_count(s), 3);
    assert_int_equal(mc__bstore_live(s), used);
    assert_int_equal(mc__bstore_used(s), used);
    mc__bstore_close(s);
    /* no_direct: buffered whatever the file system, large values too (unpadded); a later
     * direct store finds the bucket's end off a boundary and aligns its next large record. */
    s = open_store(f->dir, 1);
    assert_int_equal(mc__bstore_direct(s), 0);
    mc__bstore_describe(s, line, sizeof line);
    assert_string_equal(line, "buffered writes and reads (O_DIRECT turned off)");
    put_seeded(s, "d", 70000, 4);
    assert_int_equal(file_size(p), used + ra);
    mc__bstore_close(s);
    s = open_store(f->dir, 0);
    put_seeded(s, "e", 70000, 5);
    if (want)
        assert_int_equal(file_size(p) % MC_BREC_ALIGN, 0);
    mc__bstore_close(s);
    s = open_store(f->dir, 0);
    assert_int_equal(mc__bstore_count(s), 5);
    const char *keys[] = {"a", "b", "c", "d", "e"};
    const size_t lens[] = {70000, 0, 70000, 70000, 70000};
    for (int i = 0; i < 5; i++) {
        uint8_t *want_b = malloc(lens[i] + 1), *got = malloc(lens[i] + 1);
        uint64_t n = 0;
        fill(want_b, lens[i], (uint64_t)i + 1);
        assert_int_equal(mc__bstore_get(s, keys[i], got, lens[i] + 1, &n), 0);
        assert_int_equal(n, lens[i]);
        if (lens[i])
            assert_memory_equal(want_b, got, lens[i]);
        free(want_b);
        free(got);
    }
    mc__bstore_close(s);
}

/* A record torn right after its first block: under O_DIRECT the record before it ends in zero
 * padding at a 4 KiB boundary and the torn one starts there. */
static void test_torn_at_padded_boundary(void **state) {
    struct fx *f = *state;
    struct mc__bstore *s = open_store(f->dir, 0);
    int direct = mc__bstore_direct(s);
    put_seeded(s, "first", 5000, 1);
    put_seeded(s, "torn", 1u << 20, 2);
    mc__bstore_close(s);
    char p[600];
    bucket_path(f->dir, 0, p);
    uint64_t r1 = MC_BREC_HDR + 5 + 5000;
    uint64_t b_off = direct ? align4k(r1) : r1; /* where the torn record starts */
    for (int round = 0; round < 3; round++) {
        if (round == 0) {
            /* Only the first block of the record reached the disk. */
            assert_int_equal(truncate(p, (off_t)(b_off + 4096)), 0);
        } else if (round == 1) {
            /* The file has its length but the record's last block is zeros (the size was
             * updated before the data landed). */
            int fd = open(p, O_WRONLY);
            uint8_t z[4096] = {0};
            uint64_t end = b_off + MC_BREC_HDR + 4 + (1u << 20);
            assert_int_equal(pwrite(fd, z, sizeof z, (off_t)(end - sizeof z)), (ssize_t)sizeof z);
            close(fd);
        } else {
            /* Garbage where the padding was (buffered: in the next record's magic): a damaged
             * span. Direct: only padding, so the walk resynchronises on the next record at the
             * boundary and nothing is lost; buffered: the record whose magic it hit is stepped
             * over, never served. */
            int fd = open(p, O_WRONLY);
            uint8_t g = 0x5A;
            assert_int_equal(pwrite(fd, &g, 1, (off_t)(direct ? b_off - 1 : b_off)), 1);
            close(fd);
        }
        s = open_store(f->dir, 0);
        int kept = round == 2 && direct;
        assert_int_equal(mc__bstore_count(s), 1 + kept);
        assert_int_equal(mc__bstore_damaged(s), round == 2);
        uint8_t *got = malloc(5000), *want = malloc(5000);
        uint64_t n = 0;
        fill(want, 5000, 1);
        assert_int_equal(mc__bstore_get(s, "first", got, 5000, &n), 0);
        assert_memory_equal(got, want, 5000);
        free(got);
        free(want);
        if (kept) {
            uint8_t *big = malloc(1u << 20), *big_want = malloc(1u << 20);
            fill(big_want, 1u << 20, 2);
            assert_int_equal(mc__bstore_get(s, "torn", big, 1u << 20, &n), 0);
            assert_int_equal(n, 1u << 20);
            assert_memory_equal(big, big_want, 1u << 20);
            free(big);
            free(big_want);
        } else {
            assert_int_equal(mc__bstore_get(s, "torn", NULL, 0, NULL), MC_ERR_OBJECT_NOT_FOUND);
        }
        if (round == 0) {
            /* Cut back to the boundary; the next record goes there and survives a reopen. */
            assert_int_equal(file_size(p), (off_t)b_off);
            assert_int_equal(mc__bstore_used(s), b_off);
        }
        /* Put it back for the next round. */
        put_seeded(s, "torn", 1u << 20, 2);
        mc__bstore_close(s);
        s = open_store(f->dir, 0);
        assert_int_equal(mc__bstore_count(s), 2);
        mc__bstore_close(s);
        if (round == 0)
            continue;
        /* Later rounds need "torn" at b_off again: rewrite the store from scratch. */
        rm_tree(f->dir);
        assert_int_equal(mkdir(f->dir, 0755), 0);
        s = open_store(f->dir, 0);
        put_seeded(s, "first", 5000, 1);
        put_seeded(s, "torn", 1u << 20, 2);
        mc__bstore_close(s);
    }
}

/* --- streamed gets --- */

struct collect {
    uint8_t *buf;
    uint64_t cap, len, got;
    int begins, lasts, verdict, chunks;
    int fail_at; /* chunk number whose call fails (with TRANSFER_FAIL), or -1 */
};

static int c_begin(void *ctx, uint64_t len) {
    struct collect *c = ctx;
    c->begins++;
    c->len = len;
    return 0;
}

static int c_chunk(void *ctx, uint8_t *p, size_t n, int last, int verdict) {
    struct collect *c = ctx;
    assert_int_equal(c->begins, 1);
    assert_int_equal(c->lasts, 0); /* nothing after the last */
    if (c->chunks++ == c->fail_at)
        return MC_ERR_TRANSFER_FAIL;
    assert_true(c->got + n <= c->cap);
    memcpy(c->buf + c->got, p, n);
    memset(p + n, 0xEE, MC_BSTORE_CHUNK_SLACK); /* the slack is the sink's to write */
    c->got += n;
    if (last) {
        c->lasts++;
        c->verdict = verdict;
    } else {
        assert_int_equal(verdict, 0);
    }
    return 0;
}

static int stream(struct mc__bstore *s, struct mc__bstore_reader *r, const char *key,
                  struct collect *c, uint64_t cap) {
    struct mc__bstore_sink sink = {c_begin, c_chunk, c};
    uint64_t len = 0;
    int rc = mc__bstore_get_stream(s, r, key, cap, &sink, &len);
    if (c->begins)
        assert_int_equal(len, c->len);
    return rc;
}

static void stream_sizes(struct fx *f, int uring) {
    if (!uring)
        setenv("MC_DISK_IO_URING", "0", 1);
    struct mc__bstore_reader *r = NULL;
    assert_int_equal(mc__bstore_reader_open(&r), 0);
    if (!uring)
        assert_string_equal(mc__bstore_reader_mode(r), "pread/pwrite (MC_DISK_IO_URING=0)");
    struct mc__bstore *s = open_store(f->dir, 0);
    static const size_t sizes[] = {0,
                                   1,
                                   4095,
                                   4096,
                                   65535,
                                   65536,
                                   131032,
                                   131073,
                                   (128u << 10) * 8,
                                   1u << 20,
                                   (1u << 20) + 7,
                                   3u << 20};
    size_t nsz = sizeof sizes / sizeof sizes[0];
    char key[32];
    for (size_t i = 0; i < nsz; i++) {
        /* Keys of different lengths put the values at every alignment within a block. */
        snprintf(key, sizeof key, "%.*s%zu", (int)(i % 7) + 1, "sssssss", sizes[i]);
        put_seeded(s, key, sizes[i], i + 10);
    }
    uint8_t *want = malloc(3u << 20), *got = malloc(3u << 20);
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < nsz; i++) {
            snprintf(key, sizeof key, "%.*s%zu", (int)(i % 7) + 1, "sssssss", sizes[i]);
            struct collect c = {.buf = got, .cap = 3u << 20, .fail_at = -1};
            assert_int_equal(stream(s, r, key, &c, sizes[i]), 0);
            assert_int_equal(c.begins, 1);
            assert_int_equal(c.lasts, 1);
            assert_int_equal(c.verdict, 0);
            assert_int_equal(c.len, sizes[i]);
            assert_int_equal(c.got, sizes[i]);
            /* Large values come in chunks of at most MC_BSTORE_STREAM_CHUNK bytes. */
            assert_true(c.chunks >= (int)(sizes[i] / MC_BSTORE_STREAM_CHUNK));
            fill(want, sizes[i], i + 10);
            if (sizes[i])
                assert_memory_equal(want, got, sizes[i]);
        }
        mc__bstore_close(s); /* the second pass reads what the rescan found */
        s = open_store(f->dir, 0);
    }
    /* Not found, too small a buffer: codes before anything is handed over. */
    struct collect c = {.buf = got, .cap = 3u << 20, .fail_at = -1};
    assert_int_equal(stream(s, r, "nope", &c, 1u << 30), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(c.begins, 0);
    struct mc__bstore_sink sink = {c_begin, c_chunk, &c};
    uint64_t len = 0;
    assert_int_equal(mc__bstore_get_stream(s, r, "ss1", 0, &sink, &len), MC_ERR_BUFFER_OVERFLOW);
    assert_int_equal(len, 1);
    assert_int_equal(c.begins, 0);
    assert_int_equal(mc__bstore_get_stream(s, r, "", 10, &sink, &len), MC_ERR_INVALID_KEY);
    assert_int_equal(mc__bstore_get_stream(s, NULL, "s1", 10, &sink, &len), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc__bstore_get_stream(s, r, "s1", 10, NULL, &len), MC_ERR_INVALID_PARAMS);
    /* A sink that fails part way stops the stream with its code; the object is untouched. */
    snprintf(key, sizeof key, "%.*s%zu", (int)(9 % 7) + 1, "sssssss", sizes[9]);
    struct collect cf = {.buf = got, .cap = 3u << 20, .fail_at = 2};
    assert_int_equal(stream(s, r, key, &cf, 1u << 30), MC_ERR_TRANSFER_FAIL);
    struct collect ok = {.buf = got, .cap = 3u << 20, .fail_at = -1};
    assert_int_equal(stream(s, r, key, &ok, 1u << 30), 0);
    assert_int_equal(ok.got, sizes[9]);
    free(want);
    free(got);
    mc__bstore_close(s);
    mc__bstore_reader_close(r);
    unsetenv("MC_DISK_IO_URING");
}

static void test_stream_uring(void **state) {
    stream_sizes(*state, 1);
}

static void test_stream_pread(void **state) {
    stream_sizes(*state, 0);
}

/* A flipped byte half way through a streamed 1 MiB value: the chunks before it were handed over
 * already, the last one says CHECKSUM_MISMATCH, the get returns it and the object is gone. */
static void stream_checksum_mid(struct fx *f, int uring, int no_direct) {
    if (!uring)
        setenv("MC_DISK_IO_URING", "0", 1);
    struct mc__bstore_reader *r = NULL;
    assert_int_equal(mc__bstore_reader_open(&r), 0);
    struct mc__bstore *s = open_store(f->dir, no_direct);
    put_seeded(s, "mid", 1u << 20, 5);
    put_seeded(s, "after", 1u << 20, 6);
    char p[600];
    bucket_path(f->dir, 0, p);
    int fd = open(p, O_RDWR);
    uint8_t b;
    off_t at = (off_t)(MC_BREC_HDR + 3 + 600000);
    assert_int_equal(pread(fd, &b, 1, at), 1);
    b ^= 0x01;
    assert_int_equal(pwrite(fd, &b, 1, at), 1);
    close(fd);
    uint8_t *got = malloc(1u << 20);
    struct collect c = {.buf = got, .cap = 1u << 20, .fail_at = -1};
    assert_int_equal(stream(s, r, "mid", &c, 1u << 20), MC_ERR_CHECKSUM_MISMATCH);
    assert_int_equal(c.begins, 1);
    assert_int_equal(c.lasts, 1);
    assert_int_equal(c.verdict, MC_ERR_CHECKSUM_MISMATCH);
    assert_int_equal(c.got, 1u << 20);
    /* Streamed: the flip was in the middle (600000 bytes in), not in the first chunk. */
    assert_true(c.chunks >= (int)((1u << 20) / MC_BSTORE_STREAM_CHUNK));
    assert_true(600000 > MC_BSTORE_STREAM_CHUNK);
    assert_int_equal(mc__bstore_get(s, "mid", NULL, 0, NULL), MC_ERR_OBJECT_NOT_FOUND);
    struct collect c2 = {.buf = got, .cap = 1u << 20, .fail_at = -1};
    assert_int_equal(stream(s, r, "mid", &c2, 1u << 20), MC_ERR_OBJECT_NOT_FOUND);
    /* The neighbour is intact. */
    struct collect c3 = {.buf = got, .cap = 1u << 20, .fail_at = -1};
    assert_int_equal(stream(s, r, "after", &c3, 1u << 20), 0);
    mc__bstore_close(s);
    s = open_store(f->dir, no_direct);
    assert_int_equal(mc__bstore_count(s), 1);
    mc__bstore_close(s);
    free(got);
    mc__bstore_reader_close(r);
    unsetenv("MC_DISK_IO_URING");
}

static void test_stream_checksum_mid_uring(void **state) {
    stream_checksum_mid(*state, 1, 0);
}

static void test_stream_checksum_mid_pread(void **state) {
    stream_checksum_mid(*state, 0, 0);
}

static void test_stream_checksum_mid_buffered(void **state) {
    stream_checksum_mid(*state, 1, 1);
}

/* Writes with io_uring turned off: the same records, read back the same. */
static void test_writes_with_io_uring_off(void **state) {
    struct fx *f = *state;
    setenv("MC_DISK_IO_URING", "0", 1);
    struct mc__bstore *s = open_store(f->dir, 0);
    assert_string_equal(mc__bstore_io_mode(s), "pread/pwrite (MC_DISK_IO_URING=0)");
    for (int i = 0; i < 20; i++) {
        char key[16];
        snprintf(key, sizeof key, "w%d", i);
        put_seeded(s, key, (size_t)i * 70001, (uint64_t)i);
    }
    mc__bstore_close(s);
    unsetenv("MC_DISK_IO_URING");
    s = open_store(f->dir, 0);
    assert_int_equal(mc__bstore_count(s), 20);
    uint8_t *want = malloc(20 * 70001), *got = malloc(20 * 70001);
    for (int i = 0; i < 20; i++) {
        char key[16];
        uint64_t n = 0;
        snprintf(key, sizeof key, "w%d", i);
        fill(want, (size_t)i * 70001, (uint64_t)i);
        assert_int_equal(mc__bstore_get(s, key, got, 20 * 70001, &n), 0);
        assert_int_equal(n, (uint64_t)i * 70001);
        if (n)
            assert_memory_equal(want, got, n);
    }
    free(want);
    free(got);
    mc__bstore_close(s);
}

/* Streamed gets racing a writer that overwrites, removes and compacts under them, with io_uring
 * and without: each stream hands over one whole version that was written (its seed leads its
 * bytes) with a 0 verdict, or the key is not found; a copy that merely moved (a pinned bucket,
 * a compaction) never reads as corrupt. The sink here asserts nothing (cmocka's asserts belong
 * to the main thread): it counts what is wrong. */
struct srace {
    struct mc__bstore *s;
    int uring;
    _Atomic int stop;
    _Atomic int bad;
    _Atomic long streams;
    _Atomic long served; /* streams that handed over a whole, verified value */
};

struct ssink {
    uint8_t *buf;
    uint64_t cap, len, got;
    int begins, lasts, verdict, bad;
};

static int s_begin(void *ctx, uint64_t len) {
    struct ssink *c = ctx;
    c->begins++;
    c->len = len;
    return 0;
}

static int s_chunk(void *ctx, uint8_t *p, size_t n, int last, int verdict) {
    struct ssink *c = ctx;
    if (c->begins != 1 || c->lasts || c->got + n > c->cap) {
        c->bad++;
        return MC_ERR_INTERNAL_ERROR;
    }
    memcpy(c->buf + c->got, p, n);
    c->got += n;
    if (last) {
        c->lasts++;
        c->verdict = verdict;
    }
    return 0;
}

static void *srace_reader(void *arg) {
    struct srace *r = arg;
    struct mc__bstore_reader *rd = NULL;
    if (mc__bstore_reader_open(&rd) != 0) {
        r->bad++;
        return NULL;
    }
    uint8_t *buf = malloc(400u << 10), *want = malloc(400u << 10);
    for (uint32_t i = 0; !r->stop; i++) {
        char key[16];
        snprintf(key, sizeof key, "r%u", i % 8);
        struct ssink c = {.buf = buf, .cap = 400u << 10};
        struct mc__bstore_sink sink = {s_begin, s_chunk, &c};
        uint64_t len = 0;
        int rc = mc__bstore_get_stream(r->s, rd, key, 400u << 10, &sink, &len);
        r->streams++;
        if (rc == MC_ERR_OBJECT_NOT_FOUND && c.begins == 0)
            continue;
        uint64_t seed;
        if (rc != 0 || c.bad || c.lasts != 1 || c.verdict != 0 || c.got != c.len || c.len < 8) {
            r->bad++;
            continue;
        }
        memcpy(&seed, buf, 8);
        fill(want, c.len, seed);
        memcpy(want, &seed, 8);
        if (memcmp(want, buf, c.len) != 0)
            r->bad++;
        else
            r->served++;
    }
    free(buf);
    free(want);
    mc__bstore_reader_close(rd);
    return NULL;
}

static void streams_race_writes(struct fx *f, int uring) {
    if (!uring)
        setenv("MC_DISK_IO_URING", "0", 1);
    struct mc__bstore_opts o = {.capacity = 8u << 20, .bucket_size = 1u << 20, .no_sync = 1};
    struct srace r = {.uring = uring};
    assert_int_equal(mc__bstore_open_ex(f->dir, &o, &r.s), 0);
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&th[i], NULL, srace_reader, &r), 0);
    uint8_t *b = malloc(400u << 10);
    for (uint64_t v = 1; v <= 1200; v++) {
        char key[16];
        snprintf(key, sizeof key, "r%u", (unsigned)(v % 8));
        if (v % 11 == 0) {
            int rc = mc__bstore_remove(r.s, key);
            assert_true(rc == 0 || rc == MC_ERR_OBJECT_NOT_FOUND);
            continue;
        }
        /* Small (buffered) and large (O_DIRECT where it applies, several chunks) values. */
        size_t len = 8 + (size_t)(v * 7919 % (v % 3 ? (390u << 10) : (60u << 10)));
        fill(b, len, v);
        memcpy(b, &v, 8);
        assert_int_equal(mc__bstore_put(r.s, key, b, len), 0);
        if (v % 100 == 0)
            assert_int_equal(mc__bstore_compact(r.s), 0);
    }
    r.stop = 1;
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(r.bad, 0);
    assert_true(r.served > 0);
    assert_true(mc__bstore_used(r.s) <= (8u << 20));
    free(b);
    mc__bstore_close(r.s);
    unsetenv("MC_DISK_IO_URING");
}

static void test_streams_race_writes_uring(void **state) {
    streams_race_writes(*state, 1);
}

static void test_streams_race_writes_pread(void **state) {
    streams_race_writes(*state, 0);
}

/* Records of 64 KiB read in the order they were written: after the first two, each comes out of
 * the read-ahead (O_DIRECT with io_uring), with the right bytes; a record overwritten since, or
 * flipped on the disk before it was read ahead, is never delivered from it: the new value, and
 * the checksum failure (the object deleted), as without read-ahead. On a file system without
 * O_DIRECT (tmpfs) there is no read-ahead, and the same reads give the same answers. */
static void test_read_ahead(void **state) {
    struct fx *f = *state;
    enum { N = 12, LEN = 64 << 10 };
    struct mc__bstore_reader *r = NULL;
    assert_int_equal(mc__bstore_reader_open(&r), 0);
    struct mc__bstore *s = open_store(f->dir, 0);
    int ahead = expect_direct(f->dir) && strcmp(mc__bstore_reader_mode(r), "io_uring") == 0;
    char key[32];
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof key, "ra%02d", i);
        put_seeded(s, key, LEN, 100 + (uint64_t)i);
    }
    uint8_t *want = malloc(LEN), *got = malloc(LEN);
    for (int i = 0; i < 6; i++) {
        snprintf(key, sizeof key, "ra%02d", i);
        struct collect c = {.buf = got, .cap = LEN, .fail_at = -1};
        assert_int_equal(stream(s, r, key, &c, LEN), 0);
        assert_int_equal(c.got, LEN);
        fill(want, LEN, 100 + (uint64_t)i);
        assert_memory_equal(want, got, LEN);
    }
    /* records 2..5 came out of the read-ahead, read after 1..4 */
    assert_int_equal(mc__bstore_reader_ahead_used(r), ahead ? 4 : 0);
    /* record 6 is being read ahead: it is overwritten (the new copy lands at the end) */
    put_seeded(s, "ra06", LEN, 999);
    struct collect c6 = {.buf = got, .cap = LEN, .fail_at = -1};
    assert_int_equal(stream(s, r, "ra06", &c6, LEN), 0);
    fill(want, LEN, 999);
    assert_memory_equal(want, got, LEN);
    /* 9 flipped on the disk, then 7 and 8 read: 9 is read ahead after 8, flip included */
    char p[600];
    bucket_path(f->dir, 0, p);
    int fd = open(p, O_RDWR);
    uint8_t b;
    off_t at = (off_t)(9 * align4k(MC_BREC_HDR + 4 + LEN) + MC_BREC_HDR + 4 + 1000);
    assert_int_equal(pread(fd, &b, 1, at), 1);
    b ^= 0x01;
    assert_int_equal(pwrite(fd, &b, 1, at), 1);
    close(fd);
    for (int i = 7; i <= 8; i++) {
        snprintf(key, sizeof key, "ra%02d", i);
        struct collect c = {.buf = got, .cap = LEN, .fail_at = -1};
        assert_int_equal(stream(s, r, key, &c, LEN), 0);
        fill(want, LEN, 100 + (uint64_t)i);
        assert_memory_equal(want, got, LEN);
    }
    uint64_t used = mc__bstore_reader_ahead_used(r);
    struct collect c9 = {.buf = got, .cap = LEN, .fail_at = -1};
    assert_int_equal(stream(s, r, "ra09", &c9, LEN), MC_ERR_CHECKSUM_MISMATCH);
    assert_int_equal(mc__bstore_get(s, "ra09", NULL, 0, NULL), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc__bstore_reader_ahead_used(r), used); /* not from the read-ahead */
    /* the neighbours are intact, and reading on in order (10, 11, then ra06's new copy right
     * after 11) uses the read-ahead again: 9's read counts as the one before 10 on the disk
     * (its next region went to the device before its check failed), so 11 and ra06 come out of
     * it */
    for (int i = 10; i <= N; i++) {
        snprintf(key, sizeof key, "ra%02d", i < N ? i : 6);
        struct collect c = {.buf = got, .cap = LEN, .fail_at = -1};
        assert_int_equal(stream(s, r, key, &c, LEN), 0);
        fill(want, LEN, i < N ? 100 + (uint64_t)i : 999);
        assert_memory_equal(want, got, LEN);
    }
    assert_int_equal(mc__bstore_reader_ahead_used(r), ahead ? used + 2 : 0);
    free(want);
    free(got);
    mc__bstore_close(s);
    mc__bstore_reader_close(r);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(int argc, char **argv) {
    if (argc > 1)
        g_base = argv[1];
    const struct CMUnitTest tests[] = {
        T(test_direct_or_buffered_chosen_at_open),
        T(test_torn_at_padded_boundary),
        T(test_stream_uring),
        T(test_stream_pread),
        T(test_stream_checksum_mid_uring),
        T(test_stream_checksum_mid_pread),
        T(test_stream_checksum_mid_buffered),
        T(test_writes_with_io_uring_off),
        T(test_streams_race_writes_uring),
        T(test_streams_race_writes_pread),
        T(test_read_ahead),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
