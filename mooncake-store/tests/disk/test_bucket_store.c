/* The bucket store on a real file system: round trips, overwrite, removal and capacity, churn
 * through compaction, restart, torn tails and flipped bytes, odd keys and bad input. argv[1] is
 * the base directory the stores are made under (one per test, removed after). */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
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
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "disk/bucket_store.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/crc32.h"
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
    /* A flipped header byte in f0, the one live record left: it is stepped over (its length
     * found by repairing the byte), never served, and the bucket, with nothing live, goes. */
    flip_byte(p, 9);
    s = open_store(f->dir, 8u << 20, 1u << 20);
    assert_int_equal(mc__bstore_count(s), 0);
    assert_int_equal(mc__bstore_damaged(s), 1);
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

/* --- damaged records: one damaged record costs that record --------------------------------- */

/* Where each record of a bucket file lies, as the scanner walks the undamaged file. */
struct rec_at {
    uint64_t off, len; /* len: the record and its padding */
    char key[16];
};

struct rec_list {
    int fd;
    struct rec_at r[64];
    int n;
};

static int list_read(void *ctx, uint64_t off, void *buf, size_t len) {
    struct rec_list *l = ctx;
    return pread(l->fd, buf, len, (off_t)off) == (ssize_t)len ? 0 : -1;
}

static int list_visit(void *ctx, uint64_t off, const struct mc__brec *r, const char *key,
                      enum mc__brec_verdict v) {
    struct rec_list *l = ctx;
    assert_true(l->n < 64);
    struct rec_at *a = &l->r[l->n++];
    a->off = off;
    a->len = r->span;
    snprintf(a->key, sizeof a->key, "%s", v == MC_BREC_OK ? key : "");
    return 0;
}

static void list_records(const char *p, struct rec_list *l) {
    static uint8_t scratch[1u << 16];
    l->fd = open(p, O_RDONLY);
    assert_true(l->fd >= 0);
    l->n = 0;
    uint64_t end = 0;
    assert_int_equal(mc__brec_scan(list_read, l, (uint64_t)file_size(p), scratch, sizeof scratch,
                                   list_visit, l, &end),
                     0);
    assert_int_equal(end, (uint64_t)file_size(p));
    close(l->fd);
}

static void write_at(const char *p, uint64_t off, const void *b, size_t n) {
    int fd = open(p, O_RDWR);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, b, n, (off_t)off), (ssize_t)n);
    close(fd);
}

#define DN 12
static const size_t g_dsize[DN] = {3000, 70000,  100, 200000, 5000, 65536,
                                   1,    150000, 777, 90000,  4096, 80000};

static void dkey(int i, char out[16]) {
    snprintf(out, 16, "d%02d", i);
}

/* A fresh store of DN objects of mixed sizes (small ones buffered and unaligned, large ones
 * O_DIRECT and padded where the file system takes it) in one bucket, and where they lie. */
static void write_dn(const char *dir, struct rec_list *l) {
    rm_tree(dir);
    assert_int_equal(mkdir(dir, 0755), 0);
    struct mc__bstore *s = open_store(dir, 64u << 20, 8u << 20);
    for (int i = 0; i < DN; i++) {
        char key[16];
        dkey(i, key);
        put_seeded(s, key, g_dsize[i], (uint64_t)i + 100);
    }
    mc__bstore_close(s);
    char p[600];
    bucket_path(dir, 0, p);
    list_records(p, l);
    assert_int_equal(l->n, DN);
    for (int i = 0; i < DN; i++) {
        char key[16];
        dkey(i, key);
        assert_string_equal(l->r[i].key, key);
    }
}

/* Every object but lost (-1: none) reads back byte-exact; lost is gone. */
static void check_dn(struct mc__bstore *s, int lost) {
    assert_int_equal(mc__bstore_count(s), DN - (lost >= 0));
    for (int i = 0; i < DN; i++) {
        char key[16];
        dkey(i, key);
        if (i == lost)
            assert_int_equal(mc__bstore_get(s, key, NULL, 0, NULL), MC_ERR_OBJECT_NOT_FOUND);
        else
            check_seeded(s, key, g_dsize[i], (uint64_t)i + 100);
    }
}

enum dmg { D_FLIP, D_FLIP2, D_GARBAGE_HDR };
#define AT_LAST_VALUE (-1)
#define AT_PAD (-2)

struct dcase {
    const char *what;
    int victim;   /* the record damaged */
    enum dmg how; /* one byte flipped, two bytes of the header flipped, the header overwritten */
    int64_t at;   /* offset in the record; AT_LAST_VALUE, AT_PAD: its last value byte, a byte
                     of its padding */
    int lost;     /* the record lost (-1: none) */
    int damaged;  /* damaged spans the rescan reports */
    int need_pad; /* only where the victim is padded (O_DIRECT) */
};

static const struct dcase g_dcases[] = {
    {"header magic, middle record", 4, D_FLIP, 0, 4, 1, 0},
    {"header key_len, middle record", 4, D_FLIP, 5, 4, 1, 0},
    {"header value_len, middle record", 4, D_FLIP, 9, 4, 1, 0},
    {"header seq, middle record", 4, D_FLIP, 17, 4, 1, 0},
    {"header data_crc, middle record", 4, D_FLIP, 26, 4, 1, 0},
    {"header hdr_crc, middle record", 4, D_FLIP, 30, 4, 1, 0},
    {"header value_len, large middle record", 3, D_FLIP, 10, 3, 1, 0},
    {"two header bytes (resync), middle record", 5, D_FLIP2, 9, 5, 1, 0},
    {"whole header garbage (resync), large record", 7, D_GARBAGE_HDR, 0, 7, 1, 0},
    {"two header bytes (resync), small record", 8, D_FLIP2, 4, 8, 1, 0},
    {"body, middle record", 4, D_FLIP, 32 + 3 + 2000, 4, 0, 0},
    {"tail: last value byte, middle record", 4, D_FLIP, AT_LAST_VALUE, 4, 0, 0},
    {"tail: last value byte, padded record", 3, D_FLIP, AT_LAST_VALUE, 3, 0, 1},
    {"tail: garbage in the padding", 3, D_FLIP, AT_PAD, -1, 1, 1},
    {"first record header", 0, D_FLIP, 12, 0, 1, 0},
    {"first record, two header bytes (resync)", 0, D_FLIP2, 5, 0, 1, 0},
    {"last record header", DN - 1, D_FLIP, 12, DN - 1, 1, 0},
    {"last record, two header bytes (a torn tail: cut)", DN - 1, D_FLIP2, 5, DN - 1, 0, 0},
};

/* A flipped byte in one record's header (magic, lengths, seq, checksums), body or tail, in the
 * first, a middle or the last record, and headers damaged beyond a one-byte repair: after a
 * reopen exactly that record is lost and every other object reads back byte-exact; the damage
 * is reported, marked dead on disk (the next reopen walks it as a dead record) and its space is
 * reused. Before resync a damaged header cut the bucket off there. */
static void test_damaged_record_costs_one_record(void **state) {
    struct fx *f = *state;
    char p[600];
    bucket_path(f->dir, 0, p);
    for (size_t c = 0; c < sizeof g_dcases / sizeof g_dcases[0]; c++) {
        const struct dcase *d = &g_dcases[c];
        struct rec_list l;
        write_dn(f->dir, &l);
        const struct rec_at *v = &l.r[d->victim];
        uint64_t unpadded = MC_BREC_HDR + 3 + g_dsize[d->victim];
        if (d->need_pad && v->len == unpadded) {
            print_message("skipped (records not padded here): %s\n", d->what);
            continue;
        }
        print_message("case: %s\n", d->what);
        uint64_t at = d->at == AT_LAST_VALUE ? v->off + unpadded - 1
                      : d->at == AT_PAD      ? v->off + unpadded + (v->len - unpadded) / 2
                                             : v->off + (uint64_t)d->at;
        if (d->how == D_GARBAGE_HDR) {
            uint8_t junk[MC_BREC_HDR];
            fill(junk, sizeof junk, 77);
            write_at(p, at, junk, sizeof junk);
        } else {
            flip_byte(p, (off_t)at);
            if (d->how == D_FLIP2)
                flip_byte(p, (off_t)at + 11);
        }
        struct mc__bstore *s = open_store(f->dir, 64u << 20, 8u << 20);
        check_dn(s, d->lost);
        assert_int_equal(mc__bstore_damaged(s), (uint64_t)d->damaged);
        if (d->damaged)
            assert_true(mc__bstore_damaged_bytes(s) >= (d->lost >= 0 ? unpadded : 1));
        assert_int_equal(mc__bstore_used(s), (uint64_t)file_size(p));
        assert_true(mc__bstore_live(s) < mc__bstore_used(s) || d->lost == DN - 1);
        mc__bstore_close(s);
        /* Quarantined: the next rescan finds nothing damaged and the same objects. */
        s = open_store(f->dir, 64u << 20, 8u << 20);
        check_dn(s, d->lost);
        assert_int_equal(mc__bstore_damaged(s), 0);
        if (d->lost >= 0) {
            char key[16];
            dkey(d->lost, key);
            put_seeded(s, key, g_dsize[d->lost], (uint64_t)d->lost + 100);
        }
        mc__bstore_close(s);
        s = open_store(f->dir, 64u << 20, 8u << 20);
        check_dn(s, -1);
        mc__bstore_close(s);
    }
}

/* The case, measured: 64 MiB-bucket of 1 MiB objects, one byte flipped in the header of
 * the second record. Prints what was lost; exactly one object may be. */
static void test_header_flip_loss_measured(void **state) {
    struct fx *f = *state;
    const int n = 60;
    struct mc__bstore *s = open_store(f->dir, 512u << 20, 64u << 20);
    for (int i = 0; i < n; i++) {
        char key[16];
        snprintf(key, sizeof key, "m%02d", i);
        put_seeded(s, key, 1000000 + (size_t)i * 1111, (uint64_t)i + 7);
    }
    mc__bstore_close(s);
    char p[600];
    bucket_path(f->dir, 0, p);
    struct rec_list l;
    list_records(p, &l);
    assert_int_equal(l.n, n);
    flip_byte(p, (off_t)l.r[1].off + 9);
    s = open_store(f->dir, 512u << 20, 64u << 20);
    uint64_t lost = 0, lost_bytes = 0;
    for (int i = 0; i < n; i++) {
        char key[16];
        snprintf(key, sizeof key, "m%02d", i);
        size_t len = 1000000 + (size_t)i * 1111;
        if (mc__bstore_get(s, key, NULL, 0, NULL) == MC_ERR_OBJECT_NOT_FOUND) {
            lost++;
            lost_bytes += len;
        } else {
            check_seeded(s, key, len, (uint64_t)i + 7);
        }
    }
    print_message("one header byte flipped in a bucket of %d objects: lost %" PRIu64
                  " objects, %" PRIu64 " value bytes; damaged spans %" PRIu64 " (%" PRIu64
                  " bytes)\n",
                  n, lost, lost_bytes, mc__bstore_damaged(s), mc__bstore_damaged_bytes(s));
    mc__bstore_close(s);
    assert_int_equal(lost, 1);
}

/* A removal is the dead magic of the removed record itself (the format has no separate
 * tombstone), and an overwrite kills the old copy the same way. Damage to a removed record, to an
 * overwritten one or to the newest copy of a key never brings an older or removed value back:
 * the damaged record's magic is never trusted, and the dead copies stay dead. */
static void test_damaged_removal_stays_removed(void **state) {
    struct fx *f = *state;
    char p[600];
    bucket_path(f->dir, 0, p);
    /* Records: a, b (first copy, dead), c (removed, dead), b (second copy), d. */
    static const struct {
        const char *what;
        int victim;
        enum dmg how;
        int at;
    } cases[] = {
        {"removed record, one header byte", 2, D_FLIP, 9},
        {"removed record, its magic", 2, D_FLIP, 2},
        {"removed record, two header bytes (resync)", 2, D_FLIP2, 9},
        {"overwritten copy, one header byte", 1, D_FLIP, 17},
        {"overwritten copy, two header bytes (resync)", 1, D_FLIP2, 6},
        {"newest copy, one header byte", 3, D_FLIP, 9},
        {"newest copy, its magic", 3, D_FLIP, 1},
        {"newest copy, two header bytes (resync)", 3, D_FLIP2, 9},
        {"newest copy, header overwritten (resync)", 3, D_GARBAGE_HDR, 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        print_message("case: %s\n", cases[c].what);
        rm_tree(f->dir);
        assert_int_equal(mkdir(f->dir, 0755), 0);
        struct mc__bstore *s = open_store(f->dir, 8u << 20, 1u << 20);
        put_seeded(s, "a", 400, 1);
        put_seeded(s, "b", 500, 2);
        put_seeded(s, "c", 600, 3);
        assert_int_equal(mc__bstore_remove(s, "c"), 0);
        put_seeded(s, "b", 700, 4);
        put_seeded(s, "d", 800, 5);
        mc__bstore_close(s);
        struct rec_list l;
        list_records(p, &l);
        assert_int_equal(l.n, 5);
        uint64_t at = l.r[cases[c].victim].off + (uint64_t)cases[c].at;
        if (cases[c].how == D_GARBAGE_HDR) {
            uint8_t junk[MC_BREC_HDR];
            fill(junk, sizeof junk, 78);
            write_at(p, at, junk, sizeof junk);
        } else {
            flip_byte(p, (off_t)at);
            if (cases[c].how == D_FLIP2)
                flip_byte(p, (off_t)at + 11);
        }
        for (int round = 0; round < 2; round++) {
            s = open_store(f->dir, 8u << 20, 1u << 20);
            assert_int_equal(mc__bstore_damaged(s), round == 0);
            check_seeded(s, "a", 400, 1);
            check_seeded(s, "d", 800, 5);
            assert_int_equal(mc__bstore_get(s, "c", NULL, 0, NULL), MC_ERR_OBJECT_NOT_FOUND);
            if (cases[c].victim == 3) {
                /* Its only copy that was live is gone: the key is lost, never the old value. */
                assert_int_equal(mc__bstore_get(s, "b", NULL, 0, NULL), MC_ERR_OBJECT_NOT_FOUND);
                assert_int_equal(mc__bstore_count(s), 2);
            } else {
                check_seeded(s, "b", 700, 4);
                assert_int_equal(mc__bstore_count(s), 3);
            }
            mc__bstore_close(s);
        }
    }
}

/* Writes at p a record header for a key and value, its checksums those of key and value (or a
 * wrong data checksum with bad_data). */
static void forge_record(uint8_t *p, const char *key, const uint8_t *val, uint64_t vlen,
                         uint64_t claim_vlen, uint64_t seq, int bad_data) {
    struct mc__brec r = {.magic = MC_BREC_LIVE,
                         .key_len = (uint32_t)strlen(key),
                         .value_len = claim_vlen,
                         .seq = seq};
    r.data_crc = mc__crc32(mc__crc32(0, key, r.key_len), val, (size_t)vlen) ^ (bad_data ? 1 : 0);
    mc__brec_encode(&r, p);
    memcpy(p + MC_BREC_HDR, key, r.key_len);
    memcpy(p + MC_BREC_HDR + r.key_len, val, (size_t)vlen);
}

/* Guards against false positives. A resync takes a candidate only when its data checksum
 * matches too: a value holding a header that passes its own checksum (claiming a record past
 * the objects after it) is not taken, and the objects after it are kept. A one-byte repair of
 * the damaged header keeps the walk off the value's bytes altogether, so even a whole valid
 * record image stored inside a value is not taken for a record. */
static void test_resync_checks_candidates_whole(void **state) {
    struct fx *f = *state;
    char p[600];
    bucket_path(f->dir, 0, p);
    for (int round = 0; round < 2; round++) {
        rm_tree(f->dir);
        assert_int_equal(mkdir(f->dir, 0755), 0);
        /* The carrier's value: filler, a forged header (checksum over nothing it covers)
         * claiming a 40000-byte value, filler, a whole valid record of "victim", filler. */
        static uint8_t val[6000], inner[300];
        fill(val, sizeof val, 5);
        fill(inner, sizeof inner, 6);
        forge_record(val + 1000, "ghost", inner, 0, 40000, 1u << 30, 1);
        forge_record(val + 3000, "victim", inner, sizeof inner, sizeof inner, 1u << 30, 0);
        struct mc__bstore *s = open_store(f->dir, 8u << 20, 1u << 20);
        put_seeded(s, "pre", 1000, 1);
        /* Round 1 stores the value only up to the whole record image. */
        assert_int_equal(mc__bstore_put(s, "carrier", val, round == 0 ? sizeof val : 3000), 0);
        for (int i = 0; i < 20; i++) {
            char key[16];
            snprintf(key, sizeof key, "post%d", i);
            put_seeded(s, key, 2000, (uint64_t)i + 10);
        }
        mc__bstore_close(s);
        struct rec_list l;
        list_records(p, &l);
        assert_int_equal(l.n, 22);
        if (round == 0) {
            flip_byte(p, (off_t)l.r[1].off + 20); /* one byte: repaired, stepped over */
        } else {
            /* Two bytes: a resync, whose first candidate is the forged header: it passes its
             * header checksum and fits in the file, but not its data checksum. */
            flip_byte(p, (off_t)l.r[1].off + 9);
            flip_byte(p, (off_t)l.r[1].off + 20);
        }
        s = open_store(f->dir, 8u << 20, 1u << 20);
        assert_int_equal(mc__bstore_damaged(s), 1);
        assert_int_equal(mc__bstore_count(s), 21);
        check_seeded(s, "pre", 1000, 1);
        assert_int_equal(mc__bstore_get(s, "carrier", NULL, 0, NULL), MC_ERR_OBJECT_NOT_FOUND);
        assert_int_equal(mc__bstore_get(s, "victim", NULL, 0, NULL), MC_ERR_OBJECT_NOT_FOUND);
        assert_int_equal(mc__bstore_get(s, "ghost", NULL, 0, NULL), MC_ERR_OBJECT_NOT_FOUND);
        for (int i = 0; i < 20; i++) {
            char key[16];
            snprintf(key, sizeof key, "post%d", i);
            check_seeded(s, key, 2000, (uint64_t)i + 10);
        }
        mc__bstore_close(s);
    }
}

/* The bytes of a damaged span are dead space: counted in used, not live, and given back when its
 * bucket is compacted; the objects around it move with the compaction and survive a reopen. */
static void test_damaged_span_reclaimed_by_compaction(void **state) {
    struct fx *f = *state;
    const uint64_t cap = 16u << 20, bucket = 1u << 20;
    struct mc__bstore *s = open_store(f->dir, cap, bucket);
    put_seeded(s, "k0", 1000, 1);
    put_seeded(s, "big", 700000, 2);
    put_seeded(s, "k1", 1000, 3);
    put_seeded(s, "k2", 300000, 4);
    put_seeded(s, "k3", 100000, 5); /* does not fit in bucket 0: seals it */
    mc__bstore_close(s);
    char p0[600], p1[600];
    bucket_path(f->dir, 0, p0);
    bucket_path(f->dir, 1, p1);
    assert_true(file_size(p1) > 0);
    struct rec_list l;
    list_records(p0, &l);
    assert_int_equal(l.n, 4);
    uint64_t span = l.r[1].len;
    flip_byte(p0, (off_t)l.r[1].off + 9); /* two bytes: a resync */
    flip_byte(p0, (off_t)l.r[1].off + 20);
    s = open_store(f->dir, cap, bucket);
    assert_int_equal(mc__bstore_damaged(s), 1);
    assert_int_equal(mc__bstore_damaged_bytes(s), span);
    assert_int_equal(mc__bstore_count(s), 4);
    uint64_t used = mc__bstore_used(s), live = mc__bstore_live(s);
    assert_int_equal(used, (uint64_t)(file_size(p0) + file_size(p1)));
    assert_int_equal(used - live, span);
    assert_int_equal(mc__bstore_compact(s), 0);
    assert_int_equal(file_size(p0), -1); /* compacted away */
    /* What moved may need zeros to align a large record after a small one (O_DIRECT). */
    assert_true(mc__bstore_used(s) <= used - span + MC_BREC_ALIGN);
    assert_true(mc__bstore_used(s) - mc__bstore_live(s) <= MC_BREC_ALIGN);
    check_seeded(s, "k0", 1000, 1);
    check_seeded(s, "k1", 1000, 3);
    check_seeded(s, "k2", 300000, 4);
    check_seeded(s, "k3", 100000, 5);
    assert_int_equal(mc__bstore_get(s, "big", NULL, 0, NULL), MC_ERR_OBJECT_NOT_FOUND);
    mc__bstore_close(s);
    s = open_store(f->dir, cap, bucket);
    assert_int_equal(mc__bstore_damaged(s), 0);
    assert_int_equal(mc__bstore_count(s), 4);
    check_seeded(s, "k0", 1000, 1);
    check_seeded(s, "k2", 300000, 4);
    mc__bstore_close(s);
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* What a resync costs, measured (printed, not asserted): a bucket whose first record is a 32 MiB
 * value, then 16 small ones. Opened clean (the walk checksums every byte once), with one header
 * byte of the large record flipped (repaired: its length found, the data checked once more),
 * and with two flipped (a resync: every byte of the value searched for a magic). Each time the
 * small records are all kept. */
static void test_resync_cost_measured(void **state) {
    struct fx *f = *state;
    const size_t big = 32u << 20;
    char p[600];
    bucket_path(f->dir, 0, p);
    struct mc__bstore *s = open_store(f->dir, 512u << 20, 64u << 20);
    put_seeded(s, "huge", big, 1);
    for (int i = 0; i < 16; i++) {
        char key[16];
        snprintf(key, sizeof key, "s%d", i);
        put_seeded(s, key, 3000, (uint64_t)i + 2);
    }
    mc__bstore_close(s);
    const char *what[] = {"clean", "one header byte (repair)", "two header bytes (resync)"};
    for (int round = 0; round < 3; round++) {
        if (round == 1)
            flip_byte(p, 9);
        if (round == 2) {
            flip_byte(p, 9);
            flip_byte(p, 20);
        }
        double t0 = now_ms();
        s = open_store(f->dir, 512u << 20, 64u << 20);
        double t1 = now_ms();
        print_message("rescan of a bucket with a 32 MiB record and 16 small ones, %s: %.1f ms\n",
                      what[round], t1 - t0);
        assert_int_equal(mc__bstore_count(s), round == 0 ? 17 : 16);
        assert_int_equal(mc__bstore_damaged(s), round > 0);
        for (int i = 0; i < 16; i++) {
            char key[16];
            snprintf(key, sizeof key, "s%d", i);
            check_seeded(s, key, 3000, (uint64_t)i + 2);
        }
        mc__bstore_close(s);
        if (round == 1) {
            /* Put the record back (the repair marked it dead) for the resync round. */
            s = open_store(f->dir, 512u << 20, 64u << 20);
            mc__bstore_close(s);
            rm_tree(f->dir);
            assert_int_equal(mkdir(f->dir, 0755), 0);
            s = open_store(f->dir, 512u << 20, 64u << 20);
            put_seeded(s, "huge", big, 1);
            for (int i = 0; i < 16; i++) {
                char key[16];
                snprintf(key, sizeof key, "s%d", i);
                put_seeded(s, key, 3000, (uint64_t)i + 2);
            }
            mc__bstore_close(s);
        }
    }
}

/* A bucket image in memory, for the scanner alone. */
struct mem_img {
    uint8_t *p;
    size_t n;
    int visits, ok, damaged;
    uint64_t damaged_span;
    char keys[8][16];
};

static int mem_read(void *ctx, uint64_t off, void *buf, size_t len) {
    struct mem_img *m = ctx;
    if (off > m->n || len > m->n - off)
        return -1;
    memcpy(buf, m->p + off, len);
    return 0;
}

static int mem_visit(void *ctx, uint64_t off, const struct mc__brec *r, const char *key,
                     enum mc__brec_verdict v) {
    struct mem_img *m = ctx;
    (void)off;
    if (v == MC_BREC_OK && m->ok < 8)
        snprintf(m->keys[m->ok++], 16, "%s", key);
    if (v == MC_BREC_DAMAGED) {
        m->damaged++;
        m->damaged_span = r->span;
    }
    m->visits++;
    return 0;
}

/* Every byte of a header, flipped with several patterns, is repaired: the walk steps over exactly
 * that record (never into its value, which here holds a whole valid record image) and keeps the
 * one after it. */
static void test_every_header_byte_repaired(void **state) {
    (void)state;
    static uint8_t inner[200], val[1000], img[4096];
    fill(inner, sizeof inner, 1);
    fill(val, sizeof val, 2);
    forge_record(val + 300, "inside", inner, sizeof inner, sizeof inner, 99, 0);
    size_t n = 0;
    forge_record(img + n, "one", val, 100, 100, 1, 0);
    n += MC_BREC_HDR + 3 + 100;
    size_t two = n;
    forge_record(img + n, "two", val, sizeof val, sizeof val, 2, 0);
    n += MC_BREC_HDR + 3 + sizeof val;
    forge_record(img + n, "three", val, 50, 50, 3, 0);
    n += MC_BREC_HDR + 5 + 50;
    static const uint8_t pats[] = {0x01, 0x20, 0x80, 0xFF, 0x5A};
    uint8_t scratch[MC_BREC_MAX_KEY + 1];
    for (int i = 0; i < (int)MC_BREC_HDR; i++) {
        for (size_t k = 0; k < sizeof pats; k++) {
            struct mem_img m = {.p = img, .n = n};
            img[two + (size_t)i] ^= pats[k];
            uint64_t end = 0;
            assert_int_equal(
                mc__brec_scan(mem_read, &m, n, scratch, sizeof scratch, mem_visit, &m, &end), 0);
            img[two + (size_t)i] ^= pats[k];
            assert_int_equal(end, n);
            assert_int_equal(m.damaged, 1);
            assert_int_equal(m.damaged_span, MC_BREC_HDR + 3 + sizeof val);
            assert_int_equal(m.ok, 2);
            assert_string_equal(m.keys[0], "one");
            assert_string_equal(m.keys[1], "three");
            assert_int_equal(m.visits, 3);
        }
    }
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
        T(test_damaged_record_costs_one_record),
        T(test_damaged_removal_stays_removed),
        T(test_resync_checks_candidates_whole),
        T(test_damaged_span_reclaimed_by_compaction),
        T(test_header_flip_loss_measured),
        T(test_resync_cost_measured),
        T(test_every_header_byte_repaired),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
