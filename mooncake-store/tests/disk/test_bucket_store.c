/* The bucket store on a real file system: round trips, overwrite, removal and capacity, churn
 * through compaction, restart, torn tails and flipped bytes, odd keys and bad input. argv[1] is
 * the base directory the stores are made under (one per test, removed after). */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "disk/bucket_store.h"
#include "mooncake/common/alloc.h"
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
    snprintf(f->dir, sizeof f->dir, "%s/mc-bstore-XXXXXX", g_base);
    if (!f || !mkdtemp(f->dir))
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state) {
    struct fx *f = *state;
    rm_tree(f->dir);
    free(f);
    return 0;
}

/* Deterministic bytes for (seed, len). */
static void fill(uint8_t *p, size_t len, uint64_t seed) {
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (uint8_t)x;
    }
}

/* 1 when the stores of this run write with O_DIRECT (their records padded to MC_BREC_ALIGN):
 * what the base directory's file system allows, found by the first open. */
static int g_direct = -1;

static struct mc__bstore *open_store(const char *dir, uint64_t cap, uint64_t bucket) {
    struct mc__bstore_opts o = {.capacity = cap, .bucket_size = bucket, .no_sync = 1};
    struct mc__bstore *s = NULL;
    assert_int_equal(mc__bstore_open_ex(dir, &o, &s), 0);
    if (g_direct < 0)
        g_direct = mc__bstore_direct(s);
    assert_int_equal(mc__bstore_direct(s), g_direct); /* once per directory, the same each time */
    return s;
}

static void put_seeded(struct mc__bstore *s, const char *key, size_t len, uint64_t seed) {
    uint8_t *b = malloc(len ? len : 1);
    fill(b, len, seed);
    assert_int_equal(mc__bstore_put(s, key, b, len), 0);
    free(b);
}

static void check_seeded(struct mc__bstore *s, const char *key, size_t len, uint64_t seed) {
    uint8_t *want = malloc(len + 1), *got = malloc(len + 1);
    fill(want, len, seed);
    uint64_t n = 12345;
    assert_int_equal(mc__bstore_get(s, key, got, len + 1, &n), 0);
    assert_int_equal(n, len);
    if (len > 0)
        assert_memory_equal(want, got, len);
    free(want);
    free(got);
}

/* Bytes of the record of a key of klen bytes and a value of vlen bytes, with its padding when the
 * store writes it with O_DIRECT (values of 64 KiB and more). */
static uint64_t rec(size_t klen, uint64_t vlen) {
    uint64_t n = MC_BREC_HDR + klen + vlen;
    return g_direct == 1 && vlen >= (64u << 10)
               ? (n + MC_BREC_ALIGN - 1) / MC_BREC_ALIGN * MC_BREC_ALIGN
               : n;
}

static void bucket_path(const char *dir, unsigned id, char out[600]) {
    snprintf(out, 600, "%s/bucket-%08x.mcb", dir, id);
}

static off_t file_size(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 ? st.st_size : -1;
}

static void test_round_trip_sizes(void **state) {
    struct fx *f = *state;
    struct mc__bstore *s = open_store(f->dir, 64ull << 20, 0);
    static const size_t sizes[] = {0,       1,    2,     31,    32,     33,         4095,
                                   4096,    4097, 65535, 65536, 300000, (1u << 20), (1u << 20) + 7,
                                   3u << 20};
    size_t n = sizeof sizes / sizeof sizes[0];
    char key[32];
    uint64_t live = 0;
    for (size_t i = 0; i < n; i++) {
        snprintf(key, sizeof key, "size-%zu", sizes[i]);
        put_seeded(s, key, sizes[i], i);
        live += rec(strlen(key), sizes[i]);
    }
    assert_int_equal(mc__bstore_count(s), n);
    assert_int_equal(mc__bstore_live(s), live);
    assert_true(mc__bstore_used(s) >= live);
    for (size_t i = 0; i < n; i++) {
        snprintf(key, sizeof key, "size-%zu", sizes[i]);
        check_seeded(s, key, sizes[i], i);
        uint64_t len = 0;
        assert_int_equal(mc__bstore_size(s, key, &len), 0);
        assert_int_equal(len, sizes[i]);
        if (sizes[i] > 0) {
            uint8_t small[1];
            len = 0;
            assert_int_equal(mc__bstore_get(s, key, small, 0, &len), MC_ERR_BUFFER_OVERFLOW);
            assert_int_equal(len, sizes[i]);
        }
    }
    /* A zero-length value reads back with no buffer at all. */
    uint64_t len = 9;
    assert_int_equal(mc__bstore_get(s, "size-0", NULL, 0, &len), 0);
    assert_int_equal(len, 0);
    assert_int_equal(mc__bstore_get(s, "absent", NULL, 0, NULL), MC_ERR_OBJECT_NOT_FOUND);
    mc__bstore_close(s);
}

static void test_overwrite_keeps_newest(void **state) {
    struct fx *f = *state;
    struct mc__bstore *s = open_store(f->dir, 8u << 20, 64u << 10);
    for (int v = 0; v < 20; v++)
        put_seeded(s, "k", 1000 + (size_t)v * 3000, 100 + (uint64_t)v);
    check_seeded(s, "k", 1000 + 19 * 3000, 119);
    assert_int_equal(mc__bstore_count(s), 1);
    assert_int_equal(mc__bstore_live(s), rec(1, 1000 + 19 * 3000));
    mc__bstore_close(s);
    s = open_store(f->dir, 8u << 20, 64u << 10);
    assert_int_equal(mc__bstore_count(s), 1);
    check_seeded(s, "k", 1000 + 19 * 3000, 119);
    /* The old copies' buckets held nothing live: they are gone, only the newest's remains. */
    assert_true(mc__bstore_used(s) <= (64u << 10) + rec(1, 1000 + 19 * 3000));
    mc__bstore_close(s);
}

static void test_remove_frees(void **state) {
    struct fx *f = *state;
    const uint64_t cap = 1u << 20;
    struct mc__bstore *s = open_store(f->dir, cap, 64u << 10);
    char key[32];
    int n = 0;
    for (;; n++) {
        snprintf(key, sizeof key, "obj-%d", n);
        uint8_t b[16000];
        fill(b, sizeof b, (uint64_t)n);
        int rc = mc__bstore_put(s, key, b, sizeof b);
        if (rc == MC_ERR_NO_AVAILABLE_HANDLE)
            break;
        assert_int_equal(rc, 0);
        assert_true(mc__bstore_used(s) <= cap);
    }
    assert_true(n > 50);
    assert_int_equal(mc__bstore_remove(s, "obj-0"), 0);
    assert_int_equal(mc__bstore_remove(s, "obj-0"), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc__bstore_get(s, "obj-0", NULL, 0, NULL), MC_ERR_OBJECT_NOT_FOUND);
    for (int i = 1; i < n; i++) {
        snprintf(key, sizeof key, "obj-%d", i);
        assert_int_equal(mc__bstore_remove(s, key), 0);
    }
    assert_int_equal(mc__bstore_count(s), 0);
    assert_int_equal(mc__bstore_live(s), 0);
    /* Every sealed bucket went with its last object, and the active one was cut back. */
    assert_int_equal(mc__bstore_used(s), 0);
    /* The same amount fits again. */
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "again-%d", i);
        put_seeded(s, key, 16000, (uint64_t)i);
        assert_true(mc__bstore_used(s) <= cap);
    }
    mc__bstore_close(s);
    s = open_store(f->dir, cap, 64u << 10);
    assert_int_equal(mc__bstore_count(s), (uint64_t)n);
    assert_int_equal(mc__bstore_get(s, "obj-1", NULL, 0, NULL), MC_ERR_OBJECT_NOT_FOUND);
    check_seeded(s, "again-7", 16000, 7);
    mc__bstore_close(s);
}

static void test_capacity_refusal(void **state) {
    struct fx *f = *state;
    const uint64_t cap = 256u << 10;
    struct mc__bstore *s = open_store(f->dir, cap, 32u << 10);
    assert_int_equal(mc__bstore_capacity(s), cap);
    uint8_t *big = malloc(cap + 1);
    fill(big, cap + 1, 1);
    /* Larger than the whole store: never fits, evicting would not help. */
    assert_int_equal(mc__bstore_put(s, "huge", big, cap), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc__bstore_put(s, "huge", big, cap + 1), MC_ERR_INVALID_PARAMS);
    put_seeded(s, "a", 200u << 10, 2);
    /* Fits in the capacity, but not beside what is live: the caller evicts. */
    assert_int_equal(mc__bstore_put(s, "b", big, 100u << 10), MC_ERR_NO_AVAILABLE_HANDLE);
    assert_int_equal(mc__bstore_count(s), 1);
    check_seeded(s, "a", 200u << 10, 2);
    /* Replacing a itself with a copy that only fits once a's space is given up works. */
    put_seeded(s, "a", 240u << 10, 3);
    check_seeded(s, "a", 240u << 10, 3);
    assert_true(mc__bstore_used(s) <= cap);
    assert_int_equal(mc__bstore_remove(s, "a"), 0);
    put_seeded(s, "b", 100u << 10, 4);
    check_seeded(s, "b", 100u << 10, 4);
    free(big);
    mc__bstore_close(s);
}

/* A model of what the store should hold: key i -> (len, seed), len 0 with seed 0 = absent. */
struct model {
    uint32_t len[256];
    uint64_t seed[256];
};

static void check_model(struct mc__bstore *s, const struct model *m) {
    char key[32];
    uint64_t count = 0;
    for (int i = 0; i < 256; i++) {
        snprintf(key, sizeof key, "churn/%d", i);
        if (m->seed[i]) {
            check_seeded(s, key, m->len[i], m->seed[i]);
            count++;
        } else {
            assert_int_equal(mc__bstore_get(s, key, NULL, 0, NULL), MC_ERR_OBJECT_NOT_FOUND);
        }
    }
    assert_int_equal(mc__bstore_count(s), count);
}

static void test_churn_stays_under_capacity(void **state) {
    struct fx *f = *state;
    const uint64_t cap = 2u << 20;
    struct mc__bstore *s = open_store(f->dir, cap, 128u << 10);
    struct model m;
    memset(&m, 0, sizeof m);
    uint64_t written = 0, x = 88172645463325252ull, seed = 1;
    uint8_t *buf = malloc(40u << 10);
    char key[32];
    int refusals = 0;
    while (written < 10 * cap) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        int k = (int)(x % 256);
        snprintf(key, sizeof key, "churn/%d", k);
        if (x % 10 == 0 && m.seed[k]) {
            assert_int_equal(mc__bstore_remove(s, key), 0);
            m.seed[k] = 0;
            m.len[k] = 0;
            continue;
        }
        uint32_t len = (uint32_t)(x >> 20) % (40u << 10);
        fill(buf, len, ++seed);
        int rc;
        while ((rc = mc__bstore_put(s, key, buf, len)) == MC_ERR_NO_AVAILABLE_HANDLE) {
            /* Evict like a caller would: the next live key after k. */
            refusals++;
            int v = k;
            do
                v = (v + 1) % 256;
            while (!m.seed[v] && v != k);
            assert_true(m.seed[v] != 0);
            char vk[32];
            snprintf(vk, sizeof vk, "churn/%d", v);
            assert_int_equal(mc__bstore_remove(s, vk), 0);
            m.seed[v] = 0;
            m.len[v] = 0;
        }
        assert_int_equal(rc, 0);
        m.seed[k] = seed;
        m.len[k] = len;
        written += len;
        assert_true(mc__bstore_used(s) <= cap);
    }
    assert_true(refusals > 0);
    check_model(s, &m);
    assert_int_equal(mc__bstore_compact(s), 0);
    assert_true(mc__bstore_used(s) <= cap);
    check_model(s, &m);
    mc__bstore_close(s);
    s = open_store(f->dir, cap, 128u << 10);
    check_model(s, &m);
    assert_true(mc__bstore_used(s) <= cap);
    free(buf);
    mc__bstore_close(s);
}

static int count_keys(void *ctx, const char *key, uint64_t len) {
    int *n = ctx;
    (*n)++;
    int i = atoi(key + 4);
    return (size_t)len == (size_t)(i * 997 % 50000) ? 0 : -77;
}

static void test_reopen_finds_everything(void **state) {
    struct fx *f = *state;
    struct mc__bstore_opts o = {.capacity = 32u << 20, .bucket_size = 256u << 10};
    struct mc__bstore *s = NULL;
    assert_int_equal(mc__bstore_open_ex(f->dir, &o, &s), 0); /* with fdatasync */
    char key[32];
    for (int i = 0; i < 200; i++) {
        snprintf(key, sizeof key, "key-%d", i);
        put_seeded(s, key, (size_t)(i * 997 % 50000), (uint64_t)i + 1);
    }
    for (int i = 0; i < 200; i += 10) {
        snprintf(key, sizeof key, "key-%d", i);
        assert_int_equal(mc__bstore_remove(s, key), 0);
    }
    uint64_t used = mc__bstore_used(s), live = mc__bstore_live(s);
    mc__bstore_close(s);
    s = NULL;
    assert_int_equal(mc__bstore_open_ex(f->dir, &o, &s), 0);
    assert_int_equal(mc__bstore_count(s), 180);
    assert_int_equal(mc__bstore_live(s), live);
    assert_true(mc__bstore_used(s) <= used);
    int n = 0;
    assert_int_equal(mc__bstore_foreach(s, count_keys, &n), 0);
    assert_int_equal(n, 180);
    for (int i = 0; i < 200; i++) {
        snprintf(key, sizeof key, "key-%d", i);
        if (i % 10 == 0)
            assert_int_equal(mc__bstore_get(s, key, NULL, 0, NULL), MC_ERR_OBJECT_NOT_FOUND);
        else
            check_seeded(s, key, (size_t)(i * 997 % 50000), (uint64_t)i + 1);
    }
    /* One directory, one open store. */
    struct mc__bstore *s2 = NULL;
    assert_int_equal(mc__bstore_open_ex(f->dir, &o, &s2), MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS);
    assert_null(s2);
    mc__bstore_close(s);
}

static void test_torn_tail_dropped_and_reused(void **state) {
    struct fx *f = *state;
    struct mc__bstore *s = open_store(f->dir, 8u << 20, 1u << 20);
    for (int i = 0; i < 5; i++) {
        char key[8] = {'t', (char)('0' + i), 0};
        put_seeded(s, key, 10000, (uint64_t)i + 1);
    }
    mc__bstore_close(s);
    char p[600];
    bucket_path(f->dir, 0, p);
    off_t full = file_size(p);
    assert_int_equal(full, 5 * rec(2, 10000));
    off_t start = full - (off_t)rec(2, 10000);
    /* Cut the last object in its value, then (second round) in its header. */
    for (int round = 0; round < 2; round++) {
        assert_int_equal(truncate(p, start + (round == 0 ? 5000 : 17)), 0);
        s = open_store(f->dir, 8u << 20, 1u << 20);
        assert_int_equal(mc__bstore_count(s), 4);
        assert_int_equal(mc__bstore_get(s, "t4", NULL, 0, NULL), MC_ERR_OBJECT_NOT_FOUND);
        assert_int_equal(file_size(p), start);
        assert_int_equal(mc__bstore_used(s), (uint64_t)start);
        check_seeded(s, "t3", 10000, 4);
        /* The torn bytes' space is where the next object goes. */
        put_seeded(s, "t4", 10000, 55 + (uint64_t)round);
        assert_int_equal(file_size(p), full);
        mc__bstore_close(s);
        s = open_store(f->dir, 8u << 20, 1u << 20);
        assert_int_equal(mc__bstore_count(s), 5);
        check_seeded(s, "t4", 10000, 55 + (uint64_t)round);
        for (int i = 0; i < 4; i++) {
            char key[8] = {'t', (char)('0' + i), 0};
            check_seeded(s, key, 10000, (uint64_t)i + 1);
        }
        mc__bstore_close(s);
    }
}

static void flip_byte(const char *p, off_t off) {
    int fd = open(p, O_RDWR);
    assert_true(fd >= 0);
    uint8_t c;
    assert_int_equal(pread(fd, &c, 1, off), 1);
    c ^= 0x20;
    assert_int_equal(pwrite(fd, &c, 1, off), 1);
    close(fd);
}

static void test_flipped_byte_never_served(void **state) {
    struct fx *f = *state;
    struct mc__bstore *s = open_store(f->dir, 8u << 20, 1u << 20);
    for (int i = 0; i < 4; i++) {
        char key[8] = {'f', (char)('0' + i), 0};
        put_seeded(s, key, 3000, (uint64_t)i + 1);
    }
    char p[600];
    bucket_path(f->dir, 0, p);
    /* While open: f1's value changes under the store. */
    flip_byte(p, (off_t)rec(2, 3000) + MC_BREC_HDR + 2 + 1234);
    uint8_t buf[3000];
    assert_int_equal(mc__bstore_get(s, "f1", buf, sizeof buf, NULL), MC_ERR_CHECKSUM_MISMATCH);
    assert_int_equal(mc__bstore_get(s, "f1", buf, sizeof buf, NULL), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc__bstore_count(s), 3);
    check_seeded(s, "f0", 3000, 1);
    check_seeded(s, "f2", 3000, 3);
    mc__bstore_close(s);
    /* While closed: f2's value, and f3's key (the checksum covers the key too). */
    flip_byte(p, (off_t)(2 * rec(2, 3000)) + MC_BREC_HDR + 2 + 7);
    flip_byte(p, (off_t)(3 * rec(2, 3000)) + MC_BREC_HDR + 1);
    s = open_store(f->dir, 8u << 20, 1u << 20);
    assert_int_equal(mc__bstore_count(s), 1);
    check_seeded(s, "f0", 3000, 1);
    assert_int_equal(mc__bstore_get(s, "f2", buf, sizeof buf, NULL), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc__bstore_get(s, "f3", buf, sizeof buf, NULL), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc__bstore_get(s, "f1", buf, sizeof buf, NULL), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc__bstore_live(s), rec(2, 3000));
    mc__bstore_close(s);
    /* A flipped header byte ends the walk of that bucket: the rest is cut off, never served. */
    flip_byte(p, 9);
    s = open_store(f->dir, 8u << 20, 1u << 20);
    assert_int_equal(mc__bstore_count(s), 0);
    assert_int_equal(mc__bstore_used(s), 0);
    mc__bstore_close(s);
}

/* Large values take the O_DIRECT read where the file system allows it (ext4 here, not tmpfs):
 * records at every alignment, the last one ending mid-block at the end of the file, each read
 * back whole, and a flipped byte deep in one found by that path too. The same with O_DIRECT
 * turned off. */
static void large_values(const char *dir, int no_direct) {
    struct mc__bstore_opts o = {
        .capacity = 64u << 20, .bucket_size = 32u << 20, .no_sync = 1, .no_direct = no_direct};
    struct mc__bstore *s = NULL;
    const size_t len[] = {65536, 65537, 200001, 1u << 20, 70000};
    char key[5][16];
    uint64_t off[5], at = 0;
    uint8_t *buf = malloc(1u << 20);
    char p[600];
    assert_int_equal(mc__bstore_open_ex(dir, &o, &s), 0);
    for (int i = 0; i < 5; i++) {
        snprintf(key[i], sizeof key[i], "big%.*s", i + 1, "xxxxx"); /* keys of 4..8 bytes */
        off[i] = at;
        at += rec(strlen(key[i]), len[i]);
        put_seeded(s, key[i], len[i], (uint64_t)i + 40);
    }
    for (int i = 0; i < 5; i++)
        check_seeded(s, key[i], len[i], (uint64_t)i + 40);
    /* The owned form: the verified value in the store's buffer, large and small. */
    for (int i = 0; i < 5; i += 2) {
        void *own = NULL;
        const uint8_t *val = NULL;
        uint64_t n = 0;
        uint8_t *want = malloc(len[i]);
        fill(want, len[i], (uint64_t)i + 40);
        assert_int_equal(mc__bstore_get_owned(s, key[i], 1u << 20, &own, &val, &n), 0);
        assert_int_equal(n, len[i]);
        assert_memory_equal(val, want, len[i]);
        mc__free(own);
        assert_int_equal(mc__bstore_get_owned(s, key[i], len[i] - 1, &own, &val, &n),
                         MC_ERR_BUFFER_OVERFLOW);
        assert_null(own);
        free(want);
    }
    {
        void *own = NULL;
        const uint8_t *val = NULL;
        put_seeded(s, "small", 100, 9);
        assert_int_equal(mc__bstore_get_owned(s, "small", 100, &own, &val, NULL), 0);
        mc__free(own);
        assert_int_equal(mc__bstore_get_owned(s, "nope", 100, &own, &val, NULL),
                         MC_ERR_OBJECT_NOT_FOUND);
        assert_int_equal(mc__bstore_get_owned(s, "small", 100, NULL, &val, NULL),
                         MC_ERR_INVALID_PARAMS);
    }
    bucket_path(dir, 0, p);
    flip_byte(p, (off_t)(off[3] + MC_BREC_HDR + strlen(key[3]) + 777777));
    assert_int_equal(mc__bstore_get(s, key[3], buf, 1u << 20, NULL), MC_ERR_CHECKSUM_MISMATCH);
    assert_int_equal(mc__bstore_get(s, key[3], buf, 1u << 20, NULL), MC_ERR_OBJECT_NOT_FOUND);
    check_seeded(s, key[4], len[4], 44);
    mc__bstore_close(s);
    free(buf);
}

static void test_large_values_direct_and_buffered(void **state) {
    struct fx *f = *state;
    char sub[600];
    large_values(f->dir, 0);
    snprintf(sub, sizeof sub, "%s/buffered", f->dir);
    large_values(sub, 1);
    rm_tree(sub);
}

/* Puts without a sync each, one flush for all: read back at once, and after a reopen. */
static void test_put_nosync_then_flush(void **state) {
    struct fx *f = *state;
    struct mc__bstore_opts o = {.capacity = 8u << 20, .bucket_size = 1u << 20};
    struct mc__bstore *s = NULL;
    uint8_t v[5000];
    char key[16];
    assert_int_equal(mc__bstore_open_ex(f->dir, &o, &s), 0);
    for (int i = 0; i < 20; i++) {
        snprintf(key, sizeof key, "ns%d", i);
        fill(v, sizeof v, (uint64_t)i + 70);
        assert_int_equal(mc__bstore_put_nosync(s, key, v, sizeof v), 0);
    }
    fill(v, sizeof v, 99);
    assert_int_equal(mc__bstore_put_nosync(s, "ns3", v, sizeof v), 0); /* an overwrite too */
    check_seeded(s, "ns3", sizeof v, 99);
    assert_int_equal(mc__bstore_flush(s), 0);
    assert_int_equal(mc__bstore_flush(NULL), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc__bstore_put_nosync(s, "", v, 1), MC_ERR_INVALID_KEY);
    mc__bstore_close(s);
    assert_int_equal(mc__bstore_open_ex(f->dir, &o, &s), 0);
    assert_int_equal(mc__bstore_count(s), 20);
    check_seeded(s, "ns3", sizeof v, 99);
    check_seeded(s, "ns19", sizeof v, 89);
    mc__bstore_close(s);
}

static void test_garbage_bucket_file(void **state) {
    struct fx *f = *state;
    char p[600];
    bucket_path(f->dir, 7, p);
    uint8_t junk[5000];
    fill(junk, sizeof junk, 9);
    FILE *fp = fopen(p, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(junk, 1, sizeof junk, fp), sizeof junk);
    fclose(fp);
    snprintf(p, sizeof p, "%s/bucket-0000000g.mcb", f->dir); /* not a bucket name: left alone */
    fp = fopen(p, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(junk, 1, 3, fp), 3);
    fclose(fp);
    struct mc__bstore *s = open_store(f->dir, 1u << 20, 0);
    assert_int_equal(mc__bstore_count(s), 0);
    assert_int_equal(mc__bstore_used(s), 0);
    put_seeded(s, "after", 100, 3);
    mc__bstore_close(s);
    assert_int_equal(file_size(p), 3);
    bucket_path(f->dir, 7, p); /* cut to nothing, it became the active bucket */
    assert_int_equal(file_size(p), rec(5, 100));
    s = open_store(f->dir, 1u << 20, 0);
    check_seeded(s, "after", 100, 3);
    mc__bstore_close(s);
}

static void test_odd_keys(void **state) {
    struct fx *f = *state;
    static char longkey[MC_BREC_MAX_KEY + 1];
    memset(longkey, 'L', MC_BREC_MAX_KEY);
    const char *keys[] = {"a b c", "line\nbreak", "\xff\xfe\x01\x7f",         "../../etc/passwd",
                          "/",     "tab\there",   "\xe4\xb8\xad\xe6\x96\x87", "%s%n",
                          longkey};
    size_t n = sizeof keys / sizeof keys[0];
    struct mc__bstore *s = open_store(f->dir, 4u << 20, 0);
    for (size_t i = 0; i < n; i++)
        put_seeded(s, keys[i], 100 + i, i + 1);
    mc__bstore_close(s);
    s = open_store(f->dir, 4u << 20, 0);
    assert_int_equal(mc__bstore_count(s), n);
    for (size_t i = 0; i < n; i++)
        check_seeded(s, keys[i], 100 + i, i + 1);
    /* Keys that share a prefix are different keys. */
    assert_int_equal(mc__bstore_get(s, "a b", NULL, 0, NULL), MC_ERR_OBJECT_NOT_FOUND);
    mc__bstore_close(s);
}

static void test_bad_input(void **state) {
    struct fx *f = *state;
    struct mc__bstore *s = NULL;
    struct mc__bstore_opts o = {.capacity = 0};
    assert_int_equal(mc__bstore_open(NULL, 1 << 20, &s), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc__bstore_open("", 1 << 20, &s), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc__bstore_open(f->dir, 0, &s), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc__bstore_open(f->dir, 1 << 20, NULL), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc__bstore_open_ex(f->dir, &o, &s), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc__bstore_open_ex(f->dir, NULL, &s), MC_ERR_INVALID_PARAMS);
    char p[600];
    snprintf(p, sizeof p, "%s/no/such/parent", f->dir);
    assert_int_equal(mc__bstore_open(p, 1 << 20, &s), MC_ERR_FILE_NOT_FOUND);
    assert_null(s);
    s = open_store(f->dir, 1u << 20, 0);
    uint8_t b[16] = {0};
    static char longkey[MC_BREC_MAX_KEY + 2];
    memset(longkey, 'k', MC_BREC_MAX_KEY + 1);
    assert_int_equal(mc__bstore_put(NULL, "k", b, 1), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc__bstore_put(s, NULL, b, 1), MC_ERR_INVALID_KEY);
    assert_int_equal(mc__bstore_put(s, "", b, 1), MC_ERR_INVALID_KEY);
    assert_int_equal(mc__bstore_put(s, longkey, b, 1), MC_ERR_INVALID_KEY);
    assert_int_equal(mc__bstore_put(s, "k", NULL, 1), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc__bstore_put(s, "k", b, UINT64_MAX), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc__bstore_put(s, "k", b, (1u << 20) + 1), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc__bstore_put(s, "k", NULL, 0), 0); /* empty value, no buffer: fine */
    assert_int_equal(mc__bstore_get(NULL, "k", b, 1, NULL), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc__bstore_get(s, NULL, b, 1, NULL), MC_ERR_INVALID_KEY);
    assert_int_equal(mc__bstore_get(s, "", b, 1, NULL), MC_ERR_INVALID_KEY);
    assert_int_equal(mc__bstore_get(s, longkey, b, 1, NULL), MC_ERR_INVALID_KEY);
    assert_int_equal(mc__bstore_get(s, "k", NULL, 1, NULL), MC_ERR_INVALID_PARAMS);
    uint64_t len;
    assert_int_equal(mc__bstore_size(s, "k", NULL), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc__bstore_size(s, "nope", &len), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc__bstore_remove(NULL, "k"), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc__bstore_remove(s, ""), MC_ERR_INVALID_KEY);
    assert_int_equal(mc__bstore_foreach(s, NULL, NULL), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc__bstore_compact(NULL), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc__bstore_used(NULL), 0);
    assert_int_equal(mc__bstore_count(s), 1);
    mc__bstore_close(s);
    mc__bstore_close(NULL);
}

/* A crash between appending a new copy and marking the old one dead leaves both live on disk:
 * the higher sequence number wins. */
static void test_newest_seq_wins_over_undead_copy(void **state) {
    struct fx *f = *state;
    struct mc__bstore *s = open_store(f->dir, 8u << 20, 1u << 20);
    put_seeded(s, "k", 500, 1);
    put_seeded(s, "other", 10, 2);
    put_seeded(s, "k", 700, 3);
    mc__bstore_close(s);
    char p[600];
    bucket_path(f->dir, 0, p);
    int fd = open(p, O_RDWR);
    assert_true(fd >= 0);
    uint8_t live[4] = {'M', 'C', 'O', 'B'};
    assert_int_equal(pwrite(fd, live, 4, 0), 4); /* the first copy of k, live again */
    close(fd);
    s = open_store(f->dir, 8u << 20, 1u << 20);
    assert_int_equal(mc__bstore_count(s), 2);
    check_seeded(s, "k", 700, 3);
    assert_int_equal(mc__bstore_live(s), rec(1, 700) + rec(5, 10));
    mc__bstore_close(s);
}

/* A crash in the middle of a compaction leaves the moved records in two buckets with the same
 * sequence numbers: one copy is kept, the other bucket is all dead and goes. */
static void test_duplicate_bucket_counted_once(void **state) {
    struct fx *f = *state;
    struct mc__bstore *s = open_store(f->dir, 8u << 20, 1u << 20);
    for (int i = 0; i < 10; i++) {
        char key[16];
        snprintf(key, sizeof key, "d%d", i);
        put_seeded(s, key, 2000, (uint64_t)i + 1);
    }
    uint64_t live = mc__bstore_live(s);
    mc__bstore_close(s);
    char src[600], dst[600];
    bucket_path(f->dir, 0, src);
    bucket_path(f->dir, 5, dst);
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    assert_non_null(in);
    assert_non_null(out);
    uint8_t buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, in)) > 0;)
        assert_int_equal(fwrite(buf, 1, n, out), n);
    fclose(in);
    fclose(out);
    s = open_store(f->dir, 8u << 20, 1u << 20);
    assert_int_equal(mc__bstore_count(s), 10);
    assert_int_equal(mc__bstore_live(s), live);
    assert_int_equal(mc__bstore_used(s), live); /* the all-dead copy was unlinked */
    for (int i = 0; i < 10; i++) {
        char key[16];
        snprintf(key, sizeof key, "d%d", i);
        check_seeded(s, key, 2000, (uint64_t)i + 1);
    }
    mc__bstore_close(s);
}

/* A compaction that meets a corrupt record drops it instead of copying it. */
static void test_compaction_drops_corrupt(void **state) {
    struct fx *f = *state;
    const uint64_t bucket = 64u << 10;
    struct mc__bstore *s = open_store(f->dir, 4u << 20, bucket);
    char key[16];
    /* Bucket 0 takes per of them (6, or 5 padded for O_DIRECT), bucket 1 the rest. */
    const int per = (int)(bucket / rec(3, 10000));
    for (int i = 0; i < 12; i++) {
        snprintf(key, sizeof key, "c%02d", i);
        put_seeded(s, key, 10000, (uint64_t)i + 1);
    }
    char p[600];
    bucket_path(f->dir, 0, p);
    assert_int_equal(file_size(p), (uint64_t)per * rec(3, 10000));
    /* Keep c00 and c01 of bucket 0, corrupt c01, kill the rest of it. */
    flip_byte(p, (off_t)rec(3, 10000) + MC_BREC_HDR + 3 + 99);
    for (int i = 2; i < per; i++) {
        snprintf(key, sizeof key, "c%02d", i);
        assert_int_equal(mc__bstore_remove(s, key), 0);
    }
    assert_int_equal(mc__bstore_compact(s), 0);
    assert_int_equal(file_size(p), -1); /* compacted away */
    assert_int_equal(mc__bstore_count(s), 12 - (per - 2) - 1);
    check_seeded(s, "c00", 10000, 1);
    assert_int_equal(mc__bstore_get(s, "c01", NULL, 0, NULL), MC_ERR_OBJECT_NOT_FOUND);
    for (int i = per; i < 12; i++) {
        snprintf(key, sizeof key, "c%02d", i);
        check_seeded(s, key, 10000, (uint64_t)i + 1);
    }
    mc__bstore_close(s);
    s = open_store(f->dir, 4u << 20, bucket);
    assert_int_equal(mc__bstore_count(s), 12 - (per - 2) - 1);
    check_seeded(s, "c00", 10000, 1);
    mc__bstore_close(s);
}

/* A process killed (SIGKILL) in the middle of puts, overwrites and removals: every operation it
 * reported done is what a reopen finds. */
static void test_killed_writer(void **state) {
    struct fx *f = *state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        struct mc__bstore_opts o = {.capacity = 4u << 20, .bucket_size = 128u << 10};
        struct mc__bstore *s = NULL;
        if (mc__bstore_open_ex(f->dir, &o, &s) != 0)
            _exit(2);
        uint8_t *b = malloc(64u << 10);
        for (uint32_t i = 0;; i++) {
            char key[16];
            snprintf(key, sizeof key, "w%u", i % 50);
            size_t len = (i * 7919u) % (60u << 10);
            fill(b, len, i + 1);
            int rc = i % 7 == 6 ? mc__bstore_remove(s, key) : mc__bstore_put(s, key, b, len);
            if (rc != 0 && rc != MC_ERR_OBJECT_NOT_FOUND)
                _exit(3);
            if (write(fds[1], &i, sizeof i) != (ssize_t)sizeof i)
                _exit(4);
        }
    }
    close(fds[1]);
    uint32_t done = 0, v;
    while (done < 300 && read(fds[0], &v, sizeof v) == (ssize_t)sizeof v)
        done = v + 1;
    kill(pid, SIGKILL);
    int st;
    waitpid(pid, &st, 0);
    assert_true(WIFSIGNALED(st));
    /* Ops done for sure: what the pipe still holds was reported too. */
    while (read(fds[0], &v, sizeof v) == (ssize_t)sizeof v)
        done = v + 1;
    close(fds[0]);
    assert_true(done >= 300);
    struct mc__bstore *s = open_store(f->dir, 4u << 20, 128u << 10);
    /* Replay the model up to done; op done (in flight) may or may not have happened. */
    int64_t last[50];
    for (int k = 0; k < 50; k++)
        last[k] = -1;
    for (uint32_t i = 0; i < done; i++)
        last[i % 50] = i % 7 == 6 ? -1 : (int64_t)i;
    uint32_t inflight = done;
    for (int k = 0; k < 50; k++) {
        char key[16];
        snprintf(key, sizeof key, "w%d", k);
        uint64_t len = 0;
        int got = mc__bstore_size(s, key, &len);
        if ((uint32_t)k == inflight % 50 && inflight % 7 != 6 && got == 0 &&
            len == (inflight * 7919u) % (60u << 10) &&
            (last[k] < 0 || len != ((uint32_t)last[k] * 7919u) % (60u << 10))) {
            check_seeded(s, key, (size_t)len, inflight + 1); /* the in-flight put landed */
            continue;
        }
        if ((uint32_t)k == inflight % 50 && inflight % 7 == 6 && got != 0)
            continue; /* the in-flight remove landed */
        if (last[k] < 0) {
            assert_int_equal(got, MC_ERR_OBJECT_NOT_FOUND);
        } else {
            uint32_t i = (uint32_t)last[k];
            check_seeded(s, key, (i * 7919u) % (60u << 10), i + 1);
        }
    }
    assert_true(mc__bstore_used(s) <= (4u << 20));
    mc__bstore_close(s);
}

/* Every allocation a reopen (rescan) or a put makes can fail: a clean error, nothing leaked, and
 * the store intact once memory comes back. */
static void test_alloc_failures(void **state) {
    struct fx *f = *state;
    struct mc__bstore *s = open_store(f->dir, 4u << 20, 64u << 10);
    for (int i = 0; i < 30; i++) {
        char key[16];
        snprintf(key, sizeof key, "m%d", i);
        put_seeded(s, key, 5000, (uint64_t)i + 1);
    }
    mc__bstore_close(s);
    int64_t base = mc__alloc_live_bytes();
    int opened = 0;
    for (uint64_t k = 1; k < 200 && !opened; k++) {
        struct mc__bstore_opts o = {.capacity = 4u << 20, .bucket_size = 64u << 10, .no_sync = 1};
        s = NULL;
        mc__alloc_fail_after(k);
        int rc = mc__bstore_open_ex(f->dir, &o, &s);
        mc__alloc_fail_after(0);
        if (rc == 0) {
            opened = 1;
            assert_int_equal(mc__bstore_count(s), 30);
            /* Puts (new keys, compactions) under failing allocations. */
            for (uint64_t j = 1; j < 4; j++) {
                mc__alloc_fail_after(j);
                int prc = mc__bstore_put(s, "new", "abc", 3);
                mc__alloc_fail_after(0);
                assert_true(prc == 0 || prc == MC_ERR_INTERNAL_ERROR);
            }
            mc__bstore_close(s);
        } else {
            assert_int_equal(rc, MC_ERR_INTERNAL_ERROR);
            assert_null(s);
        }
        assert_int_equal(mc__alloc_live_bytes(), base);
    }
    assert_true(opened);
    s = open_store(f->dir, 4u << 20, 64u << 10);
    assert_true(mc__bstore_count(s) >= 30);
    for (int i = 0; i < 30; i++) {
        char key[16];
        snprintf(key, sizeof key, "m%d", i);
        check_seeded(s, key, 5000, (uint64_t)i + 1);
    }
    mc__bstore_close(s);
}

/* Reopened with a smaller capacity than it holds: it opens with everything, refuses puts, and
 * takes them again once removals bring it under. */
static void test_reopen_with_smaller_capacity(void **state) {
    struct fx *f = *state;
    struct mc__bstore *s = open_store(f->dir, 4u << 20, 128u << 10);
    char key[16];
    for (int i = 0; i < 30; i++) {
        snprintf(key, sizeof key, "s%d", i);
        put_seeded(s, key, 100000, (uint64_t)i + 1);
    }
    mc__bstore_close(s);
    s = open_store(f->dir, 1u << 20, 128u << 10);
    assert_int_equal(mc__bstore_count(s), 30);
    assert_true(mc__bstore_used(s) > mc__bstore_capacity(s));
    check_seeded(s, "s29", 100000, 30);
    assert_int_equal(mc__bstore_put(s, "more", "x", 1), MC_ERR_NO_AVAILABLE_HANDLE);
    int i = 0;
    int rc;
    while ((rc = mc__bstore_put(s, "more", "x", 1)) == MC_ERR_NO_AVAILABLE_HANDLE) {
        snprintf(key, sizeof key, "s%d", i++);
        assert_int_equal(mc__bstore_remove(s, key), 0);
    }
    assert_int_equal(rc, 0);
    assert_true(mc__bstore_used(s) <= mc__bstore_capacity(s));
    assert_true(i >= 20);
    check_seeded(s, "s29", 100000, 30);
    mc__bstore_close(s);
}

/* Readers outside the lock while a writer overwrites, removes and compacts under them: every get
 * returns one whole version that was written (its seed leads its bytes) or not-found, never a
 * checksum failure of a copy that merely moved. */
struct race {
    struct mc__bstore *s;
    _Atomic int stop;
    _Atomic int bad;
    _Atomic long gets;
};

static void *race_reader(void *arg) {
    struct race *r = arg;
    uint8_t *buf = malloc(200u << 10), *want = malloc(200u << 10);
    for (uint32_t i = 0; !r->stop; i++) {
        char key[16];
        snprintf(key, sizeof key, "r%u", i % 8);
        uint64_t len = 0;
        int rc = mc__bstore_get(r->s, key, buf, 200u << 10, &len);
        r->gets++;
        if (rc == MC_ERR_OBJECT_NOT_FOUND)
            continue;
        uint64_t seed;
        if (rc != 0 || len < 8) {
            r->bad++;
            continue;
        }
        memcpy(&seed, buf, 8);
        fill(want, len, seed);
        memcpy(want, &seed, 8);
        if (memcmp(want, buf, len) != 0)
            r->bad++;
    }
    free(buf);
    free(want);
    return NULL;
}

static void test_reads_race_writes(void **state) {
    struct fx *f = *state;
    struct race r = {.s = open_store(f->dir, 4u << 20, 256u << 10)};
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&th[i], NULL, race_reader, &r), 0);
    uint8_t *b = malloc(200u << 10);
    for (uint64_t v = 1; v <= 1500; v++) {
        char key[16];
        snprintf(key, sizeof key, "r%u", (unsigned)(v % 8));
        if (v % 11 == 0) {
            int rc = mc__bstore_remove(r.s, key);
            assert_true(rc == 0 || rc == MC_ERR_OBJECT_NOT_FOUND);
            continue;
        }
        size_t len = 8 + (size_t)(v * 7919 % (190u << 10));
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
    assert_true(r.gets > 0);
    assert_true(mc__bstore_used(r.s) <= (4u << 20));
    free(b);
    mc__bstore_close(r.s);
}

struct thr {
    struct mc__bstore *s;
    int id;
    int fails;
};

static void *worker(void *arg) {
    struct thr *t = arg;
    uint8_t b[5000], g[5000];
    char key[32];
    for (int i = 0; i < 200; i++) {
        snprintf(key, sizeof key, "t%d/%d", t->id, i % 20);
        fill(b, sizeof b, (uint64_t)(t->id * 1000 + i));
        if (mc__bstore_put(t->s, key, b, sizeof b) != 0)
            t->fails++;
        uint64_t n = 0;
        if (mc__bstore_get(t->s, key, g, sizeof g, &n) != 0 || n != sizeof b ||
            memcmp(b, g, sizeof b) != 0)
            t->fails++;
    }
    return NULL;
}

static void test_threads(void **state) {
    struct fx *f = *state;
    struct mc__bstore *s = open_store(f->dir, 2u << 20, 64u << 10);
    pthread_t th[4];
    struct thr t[4];
    for (int i = 0; i < 4; i++) {
        t[i] = (struct thr){.s = s, .id = i};
        assert_int_equal(pthread_create(&th[i], NULL, worker, &t[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(t[i].fails, 0);
    }
    assert_int_equal(mc__bstore_count(s), 80);
    assert_true(mc__bstore_used(s) <= (2u << 20));
    mc__bstore_close(s);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(int argc, char **argv) {
    if (argc > 1)
        g_base = argv[1];
    const struct CMUnitTest tests[] = {
        T(test_round_trip_sizes),
        T(test_overwrite_keeps_newest),
        T(test_remove_frees),
        T(test_capacity_refusal),
        T(test_churn_stays_under_capacity),
        T(test_reopen_finds_everything),
        T(test_torn_tail_dropped_and_reused),
        T(test_flipped_byte_never_served),
        T(test_large_values_direct_and_buffered),
        T(test_put_nosync_then_flush),
        T(test_garbage_bucket_file),
        T(test_odd_keys),
        T(test_bad_input),
        T(test_threads),
        T(test_newest_seq_wins_over_undead_copy),
        T(test_duplicate_bucket_counted_once),
        T(test_compaction_drops_corrupt),
        T(test_killed_writer),
        T(test_alloc_failures),
        T(test_reopen_with_smaller_capacity),
        T(test_reads_race_writes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
