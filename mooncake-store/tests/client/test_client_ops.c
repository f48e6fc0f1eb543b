/* The C client against a real mooncake_master process: data verified by checksum, batches,
 * zero copy, small puts forwarded by the node from several threads, leases, bad input, a master
 * that is down, a writer that dies mid-put, and batch reads whose keys' owner died. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#define XXH_INLINE_ALL /* header-only: the test needs no libxxhash */
#include <xxhash.h>

#include "client/replica_cache.h"
#include "client/store_internal.h"
#include "master_proc.h"
#include "mooncake/common/mem_probe.h"
#include "mooncake/common/time.h"
#include "mooncake/store.h"
#include "proto/master_client.h"

#define MIB (1u << 20)

static const char *g_bin;

typedef struct fixture {
    mc_test_master_t m;
    mc_store_t *node; /* contributes a segment */
    mc_store_t *pure; /* global_segment_size = 0 */
    pid_t owner;      /* a forked segment owner still running, or 0 */
} fixture_t;

static mc_store_t *make_store(const char *addr, uint64_t seg, uint64_t buf) {
    mc_store_config_t c;
    mc_store_t *s = NULL;
    mc_store_config_init(&c);
    snprintf(c.local_hostname, sizeof(c.local_hostname), "127.0.0.1");
    snprintf(c.master_server_addr, sizeof(c.master_server_addr), "%s", addr);
    c.global_segment_size = seg;
    c.local_buffer_size = buf;
    assert_int_equal(mc_store_create(&s), 0);
    assert_int_equal(mc_store_setup(s, &c), 0);
    return s;
}

static int setup(void **state) {
    static const char *const extra[] = {"--default_kv_lease_ttl=400",
                                        "--put_start_discard_timeout_sec=1", NULL};
    fixture_t *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(mc_test_master_start(g_bin, 0, extra, &f->m), 0);
    f->node = make_store(f->m.addr, 32 * MIB, 4 * MIB);
    f->pure = make_store(f->m.addr, 0, 4 * MIB);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture_t *f = *state;
    if (f->owner > 0) { /* a test failed before it killed its owner */
        kill(f->owner, SIGKILL);
        waitpid(f->owner, NULL, 0);
    }
    mc_store_destroy(f->pure);
    mc_store_destroy(f->node);
    assert_int_equal(mc_test_master_stop(&f->m, 0), 0);
    free(f);
    return 0;
}

static uint8_t *pattern(size_t n, unsigned seed) {
    uint8_t *p = malloc(n ? n : 1);
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    assert_non_null(p);
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (uint8_t)x;
    }
    return p;
}

static void test_roundtrip_sizes(void **state) {
    fixture_t *f = *state;
    static const size_t sizes[] = {1, 1000, MIB, 10 * MIB + 7};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        size_t n = sizes[i];
        char key[32];
        uint8_t *v = pattern(n, (unsigned)i), *out = malloc(n + 64);
        mc_store_buffer_t *b = NULL;
        snprintf(key, sizeof(key), "rt-%zu", n);
        assert_int_equal(mc_store_put(f->pure, key, v, n, NULL), 0);
        assert_int_equal(mc_store_get_into(f->node, key, out, n + 64), (int64_t)n);
        assert_true(XXH64(out, n, 0) == XXH64(v, n, 0));
        assert_int_equal(mc_store_get_buffer(f->pure, key, &b), 0);
        assert_int_equal(mc_store_buffer_size(b), n);
        assert_true(XXH64(mc_store_buffer_data(b), n, 0) == XXH64(v, n, 0));
        mc_store_buffer_free(b);
        assert_int_equal(mc_store_get_size(f->pure, key), (int64_t)n);
        assert_int_equal(mc_store_is_exist(f->node, key), 1);
        /* a buffer one byte short is an error, not a truncated read */
        assert_int_equal(mc_store_get_into(f->node, key, out, n - 1), MC_ERR_BUFFER_OVERFLOW);
        free(v);
        free(out);
    }
}

/* Small puts from several threads of a pure client: each value's bytes and commit go to the
 * node in one write-ask, and the node forwards the commits (PUT_COMMIT_FOR), several threads'
 * in one request when they meet. Every put reads back, each counts as one single put end, and
 * the commits went through the node. */
#define FWD_THREADS 6
#define FWD_PUTS 150

typedef struct fwd_arg {
    mc_store_t *s;
    int t;
    int failed;
} fwd_arg_t;

static void *fwd_putter(void *p) {
    fwd_arg_t *a = p;
    for (int i = 0; i < FWD_PUTS && !a->failed; i++) {
        char key[32];
        size_t n = i % 3 == 0 ? 16384 : 4096;
        uint8_t *v = pattern(n, (unsigned)(a->t * FWD_PUTS + i));
        snprintf(key, sizeof(key), "fwd-%d-%d", a->t, i);
        a->failed = mc_store_put(a->s, key, v, n, NULL) != 0;
        free(v);
    }
    return NULL;
}

static void test_forwarded_puts_from_threads(void **state) {
    fixture_t *f = *state;
    pthread_t th[FWD_THREADS];
    fwd_arg_t args[FWD_THREADS];
    double forwards = 0, ends0 = 0, ends = 0;
    uint8_t *out = malloc(16384);
    assert_int_equal(mc_test_metric(f->m.metrics_port, "master_put_end_requests_total", &ends0), 0);
    for (int t = 0; t < FWD_THREADS; t++) {
        args[t] = (fwd_arg_t){f->pure, t, 0};
        assert_int_equal(pthread_create(&th[t], NULL, fwd_putter, &args[t]), 0);
    }
    for (int t = 0; t < FWD_THREADS; t++) {
        pthread_join(th[t], NULL);
        assert_false(args[t].failed);
    }
    for (int t = 0; t < FWD_THREADS; t++) {
        for (int i = 0; i < FWD_PUTS; i++) {
            char key[32];
            size_t n = i % 3 == 0 ? 16384 : 4096;
            uint8_t *v = pattern(n, (unsigned)(t * FWD_PUTS + i));
            snprintf(key, sizeof(key), "fwd-%d-%d", t, i);
            assert_int_equal(mc_store_get_into(f->node, key, out, 16384), (int64_t)n);
            assert_true(XXH64(out, n, 0) == XXH64(v, n, 0));
            free(v);
        }
    }
    assert_int_equal(mc_test_metric(f->m.metrics_port,
                                    "mooncake_master_requests_total{op=\"put_commit_for\"}",
                                    &forwards),
                     0);
    assert_int_equal(mc_test_metric(f->m.metrics_port, "master_put_end_requests_total", &ends), 0);
    assert_true(ends - ends0 == FWD_THREADS * FWD_PUTS);
    assert_true(forwards >= 1 && forwards <= FWD_THREADS * FWD_PUTS);
    free(out);
}

/* A forwarded commit as slot_forward.c writes it: u8 version | client id | u64 slot |
 * u64 value_len | u16 key_len | key. Returns its length. */
static size_t fwd_message(uint8_t *m, uint8_t version, const uint8_t *client, uint64_t slot,
                          uint64_t len, uint16_t klen, const char *key, size_t key_bytes) {
    size_t n = 0;
    m[n++] = version;
    memcpy(m + n, client, MC_MP_CLIENT_ID_LEN);
    n += MC_MP_CLIENT_ID_LEN;
    for (int i = 0; i < 8; i++)
        m[n++] = (uint8_t)(slot >> (8 * i));
    for (int i = 0; i < 8; i++)
        m[n++] = (uint8_t)(len >> (8 * i));
    m[n++] = (uint8_t)klen;
    m[n++] = (uint8_t)(klen >> 8);
    memcpy(m + n, key, key_bytes);
    return n + key_bytes;
}

/* What a peer may get wrong in a forwarded commit: the holder refuses each malformed message
 * (INVALID_PARAMS, nothing forwarded), a well-formed one for a slot nobody reserved gets the
 * master's OBJECT_NOT_FOUND, and the holder goes on serving puts. */
static void test_forward_refuses_bad_messages(void **state) {
    fixture_t *f = *state;
    const uint8_t *me = mc__master_client_id(f->pure->master);
    mc_engine_t *e = f->pure->engine;
    uint8_t m[128], answer[16];
    size_t alen = 0, n;
    mc_segment_id_t id;
    uint8_t *v = pattern(4096, 7), *out = malloc(4096);
    assert_int_equal(mc_engine_open_segment(e, f->node->hostname, &id), 0);
    /* too short, another version, a key length that disagrees, a NUL in the key, no value */
    n = fwd_message(m, 1, me, 1, 4096, 3, "abc", 3);
    assert_int_equal(mc_engine_write_ask(e, id, NULL, 0, 0, 0, m, 10, answer, 16, &alen),
                     MC_ERR_INVALID_PARAMS);
    m[0] = 3; /* 2 is a get's (get_forward.c) */
    assert_int_equal(mc_engine_write_ask(e, id, NULL, 0, 0, 0, m, n, answer, 16, &alen),
                     MC_ERR_INVALID_PARAMS);
    n = fwd_message(m, 1, me, 1, 4096, 5, "abc", 3);
    assert_int_equal(mc_engine_write_ask(e, id, NULL, 0, 0, 0, m, n, answer, 16, &alen),
                     MC_ERR_INVALID_PARAMS);
    n = fwd_message(m, 1, me, 1, 4096, 3, "a\0c", 3);
    assert_int_equal(mc_engine_write_ask(e, id, NULL, 0, 0, 0, m, n, answer, 16, &alen),
                     MC_ERR_INVALID_PARAMS);
    n = fwd_message(m, 1, me, 1, 0, 3, "abc", 3);
    assert_int_equal(mc_engine_write_ask(e, id, NULL, 0, 0, 0, m, n, answer, 16, &alen),
                     MC_ERR_INVALID_PARAMS);
    /* well formed, for a slot never reserved: forwarded, and the master's code comes back */
    n = fwd_message(m, 1, me, 0x7fffffffffffull, 4096, 3, "abc", 3);
    assert_int_equal(mc_engine_write_ask(e, id, NULL, 0, 0, 0, m, n, answer, 16, &alen), 0);
    assert_int_equal(alen, 5);
    assert_int_equal(answer[0], 0);
    assert_int_equal((int32_t)((uint32_t)answer[1] | (uint32_t)answer[2] << 8 |
                               (uint32_t)answer[3] << 16 | (uint32_t)answer[4] << 24),
                     MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_store_is_exist(f->node, "abc"), 0);
    /* the holder still serves */
    assert_int_equal(mc_store_put(f->pure, "after-bad", v, 4096, NULL), 0);
    assert_int_equal(mc_store_get_into(f->node, "after-bad", out, 4096), 4096);
    assert_true(XXH64(out, 4096, 0) == XXH64(v, 4096, 0));
    free(v);
    free(out);
}

/* First gets answered by the node (get_forward.c): a reader without the key's location asks the
 * node that held its last value, and the node asks the master for the list (one batch request
 * for the lookups that meet) and answers with the value. Each get reads back, and every get
 * after the reader's first went through the node; a value larger than the reader's 16 KiB
 * bound is read as before, and a missing or removed key is not found. */
static void test_first_gets_answered_by_the_node(void **state) {
    fixture_t *f = *state;
    enum { N = 48 };
    mc_store_t *reader = make_store(f->m.addr, 0, 4 * MIB);
    double singles0 = 0, singles = 0, items0 = 0, items = 0;
    uint64_t served0 = atomic_load(&f->node->fwd.gets_served);
    uint8_t *out = malloc(64 << 10);
    mc_store_buffer_t *b = NULL;
    for (int i = 0; i < N; i++) {
        char key[32];
        size_t n = i % 4 == 0 ? 16384 : i % 4 == 1 ? 1 : 4096;
        uint8_t *v = pattern(n, (unsigned)(1000 + i));
        snprintf(key, sizeof(key), "gf-%d", i);
        assert_int_equal(mc_store_put(f->pure, key, v, n, NULL), 0);
        free(v);
    }
    assert_int_equal(
        mc_test_metric(f->m.metrics_port, "master_get_replica_list_requests_total", &singles0), 0);
    assert_int_equal(
        mc_test_metric(f->m.metrics_port, "master_batch_get_replica_list_items_total", &items0), 0);
    for (int i = 0; i < N; i++) {
        char key[32];
        size_t n = i % 4 == 0 ? 16384 : i % 4 == 1 ? 1 : 4096;
        uint8_t *v = pattern(n, (unsigned)(1000 + i));
        snprintf(key, sizeof(key), "gf-%d", i);
        if (i % 2 == 0) {
            assert_int_equal(mc_store_get_into(reader, key, out, 16384), (int64_t)n);
            assert_true(XXH64(out, n, 0) == XXH64(v, n, 0));
        } else {
            assert_int_equal(mc_store_get_buffer(reader, key, &b), 0);
            assert_int_equal(mc_store_buffer_size(b), n);
            assert_true(XXH64(mc_store_buffer_data(b), n, 0) == XXH64(v, n, 0));
            mc_store_buffer_free(b);
        }
        free(v);
    }
    assert_int_equal(
        mc_test_metric(f->m.metrics_port, "master_get_replica_list_requests_total", &singles), 0);
    assert_int_equal(
        mc_test_metric(f->m.metrics_port, "master_batch_get_replica_list_items_total", &items), 0);
    /* the reader asked the master once itself (it knew no node yet); the node asked for the rest */
    /* the master was asked once for each key: by the reader for its first (it knew no node
     * yet), by the node for the rest, which it answered with their values */
    assert_true(singles - singles0 + items - items0 == N);
    assert_int_equal(atomic_load(&f->node->fwd.gets_served) - served0, N - 1);
    assert_int_equal(atomic_load(&f->pure->fwd.gets_served), 0);
    /* a buffer one byte short: as before, an error and not a truncated read */
    assert_int_equal(mc_store_get_into(reader, "gf-2", out, 4095), MC_ERR_BUFFER_OVERFLOW);
    /* missing: not found through the node, and through the master with forwarding left out */
    assert_int_equal(mc_store_get_into(reader, "gf-none", out, 4096), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_store_get_buffer(reader, "gf-none", &b), MC_ERR_OBJECT_NOT_FOUND);
    assert_null(b);
    /* 64 KiB: into a 64 KiB buffer the reader reads it through the master, as before; into a
     * new buffer (whose size it does not know ahead) through the list the node sends */
    {
        uint8_t *v = pattern(64 << 10, 77);
        assert_int_equal(mc_store_put(f->pure, "gf-big", v, 64 << 10, NULL), 0);
        assert_int_equal(mc_store_put(f->pure, "gf-big2", v, 64 << 10, NULL), 0);
        assert_int_equal(mc_store_get_into(reader, "gf-big", out, 64 << 10), 64 << 10);
        assert_memory_equal(out, v, 64 << 10);
        assert_int_equal(mc_store_get_buffer(reader, "gf-big2", &b), 0);
        assert_int_equal(mc_store_buffer_size(b), 64 << 10);
        assert_memory_equal(mc_store_buffer_data(b), v, 64 << 10);
        mc_store_buffer_free(b);
        b = NULL;
        free(v);
    }
    assert_int_equal(atomic_load(&f->node->fwd.gets_served) - served0, N - 1);
    /* after a value larger than an answer holds, the next get into a new buffer asks the
     * master; one of a small value makes the reader ask the node again */
    assert_int_equal(mc_store_put(f->pure, "gf-s1", out, 100, NULL), 0);
    assert_int_equal(mc_store_put(f->pure, "gf-s2", out, 100, NULL), 0);
    assert_int_equal(mc_store_get_buffer(reader, "gf-s1", &b), 0);
    mc_store_buffer_free(b);
    assert_int_equal(atomic_load(&f->node->fwd.gets_served) - served0, N - 1);
    assert_int_equal(mc_store_get_buffer(reader, "gf-s2", &b), 0);
    mc_store_buffer_free(b);
    b = NULL;
    assert_int_equal(atomic_load(&f->node->fwd.gets_served) - served0, N);
    /* a removed key's get through the node finds it gone */
    assert_int_equal(mc_store_put(f->pure, "gf-gone", out, 100, NULL), 0);
    assert_int_equal(mc_store_remove(f->pure, "gf-gone", 0), 0);
    assert_int_equal(mc_store_get_into(reader, "gf-gone", out, 4096), MC_ERR_OBJECT_NOT_FOUND);
    mc_store_destroy(reader);
    free(out);
}

/* A get's message as get_forward.c writes it: u8 kind (2) | u64 room | u16 key_len | key. */
static size_t gf_message(uint8_t *m, uint8_t kind, uint64_t room, uint16_t klen, const char *key,
                         size_t key_bytes) {
    size_t n = 0;
    m[n++] = kind;
    for (int i = 0; i < 8; i++)
        m[n++] = (uint8_t)(room >> (8 * i));
    m[n++] = (uint8_t)klen;
    m[n++] = (uint8_t)(klen >> 8);
    memcpy(m + n, key, key_bytes);
    return n + key_bytes;
}

/* What a peer may get wrong in a get's message: the node refuses each malformed one
 * (INVALID_PARAMS), answers a well-formed one (the value only with room for it, never more than
 * asked), and goes on serving. */
static void test_get_forward_refuses_bad_messages(void **state) {
    fixture_t *f = *state;
    mc_engine_t *e = f->pure->engine;
    static uint8_t answer[MC_ASK_MAX_ANSWER];
    uint8_t m[64], *v = pattern(4096, 9);
    size_t alen = 0, n;
    mc_segment_id_t id;
    assert_int_equal(mc_store_put(f->pure, "gfb", v, 4096, NULL), 0);
    assert_int_equal(mc_engine_open_segment(e, f->node->hostname, &id), 0);
    /* too short, no key, a key length that disagrees, a NUL in the key */
    n = gf_message(m, 2, 4096, 3, "gfb", 3);
    assert_int_equal(
        mc_engine_write_ask(e, id, NULL, 0, 0, 0, m, 10, answer, sizeof(answer), &alen),
        MC_ERR_INVALID_PARAMS);
    n = gf_message(m, 2, 4096, 0, "", 0);
    assert_int_equal(mc_engine_write_ask(e, id, NULL, 0, 0, 0, m, n, answer, sizeof(answer), &alen),
                     MC_ERR_INVALID_PARAMS);
    n = gf_message(m, 2, 4096, 4, "gfb", 3);
    assert_int_equal(mc_engine_write_ask(e, id, NULL, 0, 0, 0, m, n, answer, sizeof(answer), &alen),
                     MC_ERR_INVALID_PARAMS);
    n = gf_message(m, 2, 4096, 3, "g\0b", 3);
    assert_int_equal(mc_engine_write_ask(e, id, NULL, 0, 0, 0, m, n, answer, sizeof(answer), &alen),
                     MC_ERR_INVALID_PARAMS);
    /* an answer longer than the asker's room for it: refused, and the connection still serves */
    n = gf_message(m, 2, 4096, 3, "gfb", 3);
    assert_int_equal(mc_engine_write_ask(e, id, NULL, 0, 0, 0, m, n, answer, 16, &alen),
                     MC_ERR_INVALID_ARGUMENT);
    /* well formed: the list and the value */
    assert_int_equal(mc_engine_write_ask(e, id, NULL, 0, 0, 0, m, n, answer, sizeof(answer), &alen),
                     0);
    assert_int_equal(answer[0], 0);
    assert_int_equal(answer[5], 1);
    assert_true(alen > 10 + 4096);
    assert_memory_equal(answer + alen - 4096, v, 4096);
    /* room for less than the value: the list alone */
    n = gf_message(m, 2, 4095, 3, "gfb", 3);
    assert_int_equal(mc_engine_write_ask(e, id, NULL, 0, 0, 0, m, n, answer, sizeof(answer), &alen),
                     0);
    assert_int_equal(answer[0], 0);
    assert_int_equal(answer[5], 0);
    assert_true(alen < 4096);
    /* a key nobody put: the master's code */
    n = gf_message(m, 2, 4096, 3, "gfx", 3);
    assert_int_equal(mc_engine_write_ask(e, id, NULL, 0, 0, 0, m, n, answer, sizeof(answer), &alen),
                     0);
    assert_int_equal(alen, 10);
    assert_int_equal((int32_t)((uint32_t)answer[1] | (uint32_t)answer[2] << 8 |
                               (uint32_t)answer[3] << 16 | (uint32_t)answer[4] << 24),
                     MC_ERR_OBJECT_NOT_FOUND);
    /* the node still serves */
    assert_int_equal(mc_store_get_into(f->pure, "gfb", answer, 4096), 4096);
    assert_memory_equal(answer, v, 4096);
    free(v);
}

static int refuse_every_ask(void *ctx, const void *msg, size_t msg_len, void *answer, size_t cap,
                            size_t *answer_len) {
    (void)ctx, (void)msg, (void)msg_len, (void)answer, (void)cap, (void)answer_len;
    return MC_ERR_INVALID_PARAMS;
}

/* A holder of an older build refuses a get's message (its handler knows only commits): the
 * reader reads through the master, and does not ask that holder again for a while. */
static void test_get_forward_to_an_older_holder(void **state) {
    fixture_t *f = *state;
    mc_store_t *reader = make_store(f->m.addr, 0, 4 * MIB);
    uint8_t *v = pattern(4096, 21), out[4096];
    mc_segment_id_t id;
    assert_int_equal(mc_store_put(f->pure, "old-1", v, 4096, NULL), 0);
    assert_int_equal(mc_engine_set_ask_handler(f->node->engine, refuse_every_ask, NULL), 0);
    assert_int_equal(mc_engine_open_segment(reader->engine, f->node->hostname, &id), 0);
    atomic_store(&reader->fwd.get_hint, id);
    assert_int_equal(mc_store_get_into(reader, "old-1", out, 4096), 4096);
    assert_memory_equal(out, v, 4096);
    assert_true(mc__fwd_known_without(&reader->fwd, id));
    mc_store_destroy(reader);
    free(v);
}

static void test_parts_batches_zero_copy(void **state) {
    fixture_t *f = *state;
    size_t n = 3 * MIB;
    uint8_t *src = pattern(n, 42), *dst = calloc(1, n);
    mc_store_iov_t parts[3] = {{src, 10}, {src + 10, 1000}, {src + 1010, n - 1010}};
    mc_store_iov_t half[2] = {{src, n / 2}, {src + n / 2, n - n / 2}};
    mc_store_iov_t out2[2] = {{dst, n / 2}, {dst + n / 2, n - n / 2}};
    mc_store_item_t items[3] = {{"zc-a", &half[0], 1}, {"zc-b", &half[1], 1}, {"", &half[0], 1}};
    mc_store_item_t gets[3] = {
        {"zc-a", &out2[0], 1}, {"zc-b", &out2[1], 1}, {"zc-none", &out2[0], 1}};
    int res[3];
    int64_t got[3];

    assert_int_equal(mc_store_register_buffer(f->pure, src, n), 0);
    assert_int_equal(mc_store_register_buffer(f->pure, dst, n), 0);
    /* overlapping an earlier registration: a store code, not the engine's ADDRESS_OVERLAPPED */
    assert_int_equal(mc_store_register_buffer(f->pure, src + 5, 10), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_put_parts(f->pure, "parts", parts, 3, NULL), 0);
    assert_int_equal(mc_store_get_into_parts(f->node, "parts", out2, 2), (int64_t)n);
    assert_memory_equal(dst, src, n);

    assert_int_equal(mc_store_batch_put(f->pure, items, 3, NULL, res), MC_ERR_INVALID_KEY);
    assert_int_equal(res[0], 0);
    assert_int_equal(res[1], 0);
    assert_int_equal(res[2], MC_ERR_INVALID_KEY);
    memset(dst, 0, n);
    assert_int_equal(mc_store_batch_get_into(f->pure, gets, 3, got), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(got[0], (int64_t)(n / 2));
    assert_int_equal(got[1], (int64_t)(n - n / 2));
    assert_int_equal(got[2], MC_ERR_OBJECT_NOT_FOUND);
    assert_memory_equal(dst, src, n);

    const char *keys[3] = {"zc-a", "zc-none", "zc-b"};
    int ex[3];
    assert_int_equal(mc_store_batch_is_exist(f->node, keys, 3, ex), 0);
    assert_int_equal(ex[0], 1);
    assert_int_equal(ex[1], 0);
    assert_int_equal(ex[2], 1);
    mc_store_buffer_t *bufs[3];
    assert_int_equal(mc_store_batch_get_buffer(f->node, keys, 3, bufs, ex),
                     MC_ERR_OBJECT_NOT_FOUND);
    assert_non_null(bufs[0]);
    assert_null(bufs[1]);
    assert_memory_equal(mc_store_buffer_data(bufs[2]), src + n / 2, n - n / 2);
    mc_store_buffer_free(bufs[0]);
    mc_store_buffer_free(bufs[2]);

    assert_int_equal(mc_store_unregister_buffer(f->pure, src), 0);
    assert_int_equal(mc_store_unregister_buffer(f->pure, src), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_unregister_buffer(f->pure, dst), 0);
    free(src);
    free(dst);
}

static void test_leases_and_remove(void **state) {
    fixture_t *f = *state;
    uint8_t v[100] = {1, 2, 3};
    uint8_t out[100];
    assert_int_equal(mc_store_put(f->node, "leased", v, sizeof(v), NULL), 0);
    assert_int_equal(mc_store_remove(f->node, "leased", 0), 0); /* never read: no lease */
    assert_int_equal(mc_store_put(f->node, "leased", v, sizeof(v), NULL), 0);
    assert_int_equal(mc_store_get_into(f->pure, "leased", out, sizeof(out)), (int64_t)sizeof(v));
    assert_int_equal(mc_store_remove(f->node, "leased", 0), MC_ERR_OBJECT_HAS_LEASE);
    usleep(600 * 1000); /* the lease (400 ms) runs out */
    assert_int_equal(mc_store_remove(f->node, "leased", 0), 0);
    assert_int_equal(mc_store_remove(f->node, "leased", 0), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_store_put(f->node, "again", v, sizeof(v), NULL), 0);
    /* an existing key: success, and the first value stays (the reference's convention) */
    assert_int_equal(mc_store_put(f->node, "again", v, sizeof(v), NULL), 0);
    assert_true(mc_store_remove_all(f->pure, 1) >= 1);
    assert_int_equal(mc_store_is_exist(f->pure, "again"), 0);
}

static void test_bad_input(void **state) {
    fixture_t *f = *state;
    char longkey[MC_STORE_MAX_KEY_LEN + 2];
    uint8_t v[16] = {0};
    mc_replicate_config_t rc;
    memset(longkey, 'k', sizeof(longkey) - 1);
    longkey[sizeof(longkey) - 1] = '\0';
    assert_int_equal(mc_store_put(f->pure, "", v, 1, NULL), MC_ERR_INVALID_KEY);
    assert_int_equal(mc_store_put(f->pure, NULL, v, 1, NULL), MC_ERR_INVALID_KEY);
    assert_int_equal(mc_store_put(f->pure, longkey, v, 1, NULL), MC_ERR_INVALID_KEY);
    assert_int_equal(mc_store_put(f->pure, "zero", v, 0, NULL), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_put(f->pure, "null", NULL, 5, NULL), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_get_into(f->pure, "", v, 1), MC_ERR_INVALID_KEY);
    assert_int_equal(mc_store_get_into(f->pure, "absent", v, 1), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_store_get_size(f->pure, "absent"), MC_ERR_OBJECT_NOT_FOUND);
    mc_replicate_config_init(&rc);
    rc.replica_num = 0;
    assert_int_equal(mc_store_put(f->pure, "rc", v, 1, &rc), MC_ERR_INVALID_PARAMS);
    rc.replica_num = 99;
    assert_int_equal(mc_store_put(f->pure, "rc", v, 1, &rc), MC_ERR_INVALID_PARAMS);
    /* larger than any segment, even after eviction */
    uint8_t *big = calloc(1, 33 * MIB);
    assert_int_equal(mc_store_put(f->pure, "big", big, 33 * MIB, NULL), MC_ERR_NO_AVAILABLE_HANDLE);
    free(big);
    assert_int_equal(mc_store_health_check(f->pure), 0);
    assert_int_equal(mc_store_health_check(NULL), 1);
    assert_int_equal(mc_store_put(NULL, "k", v, 1, NULL), MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS);
}

/* Caller memory that is not the caller's: a part that overruns a registered buffer is refused
 * by every call before anything moves, and mc_store_check_memory answers for addresses the
 * caller cannot vouch for (registered: 0; overrunning, wild, unmapped, read-only: refused). Two
 * registered pages are followed by a PROT_NONE page, so an overrun would fault, not land in
 * someone else's heap. */
static void test_raw_memory_checks(void **state) {
    fixture_t *f = *state;
    const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    uint8_t *m = mmap(NULL, 3 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint8_t *ro = mmap(NULL, pg, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint8_t *v = pattern(pg, 7), plain[64];
    assert_true(m != MAP_FAILED && ro != MAP_FAILED);
    assert_int_equal(mprotect(m + 2 * pg, pg, PROT_NONE), 0);
    assert_int_equal(mc_store_register_buffer(f->node, m, 2 * pg), 0);
    memcpy(m, v, pg);
    assert_int_equal(mc_store_put(f->node, "raw", m, pg, NULL), 0);

    /* the C calls: an overrun is INVALID_PARAMS and touches nothing */
    mc_store_iov_t over = {m + pg + 8, pg};
    mc_store_item_t item = {"raw", &over, 1};
    int64_t got = 0;
    int res = 0;
    assert_int_equal(mc_store_get_into(f->node, "raw", m + pg + 8, pg), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_get_into_parts(f->node, "raw", &over, 1), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_put(f->node, "raw-o", m + pg + 8, pg, NULL), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_put_parts(f->node, "raw-o", &over, 1, NULL), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_batch_get_into(f->node, &item, 1, &got), MC_ERR_INVALID_PARAMS);
    assert_int_equal(got, MC_ERR_INVALID_PARAMS);
    item.key = "raw-o";
    assert_int_equal(mc_store_batch_put(f->node, &item, 1, NULL, &res), MC_ERR_INVALID_PARAMS);
    assert_int_equal(res, MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_is_exist(f->node, "raw-o"), 0);

    /* the check */
    assert_int_equal(mc_store_check_memory(f->node, m, 2 * pg, 1), 0);
    assert_int_equal(mc_store_check_memory(f->node, m + pg + 8, pg, 0), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_check_memory(f->node, m + 2 * pg, 8, 0), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_check_memory(f->node, (void *)(uintptr_t)1, pg, 0),
                     MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_check_memory(f->node, NULL, 1, 0), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_check_memory(f->node, NULL, 0, 0), 0);
    assert_int_equal(mc_store_check_memory(f->node, (void *)(uintptr_t)-8, 16, 0),
                     MC_ERR_INVALID_PARAMS); /* wraps */
    assert_int_equal(mc_store_check_memory(f->node, ro, pg, 0), 0);
    assert_int_equal(mc_store_check_memory(f->node, ro, pg, 1), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_check_memory(f->node, plain, sizeof(plain), 1), 0);
    assert_int_equal(mc_store_check_memory(NULL, plain, 1, 0),
                     MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS);
    /* a wild address cannot be registered either */
    assert_true(mc_store_register_buffer(f->node, (void *)(uintptr_t)pg, pg) < 0);

    /* unregistered, then taken away */
    assert_int_equal(mc_store_unregister_buffer(f->node, m), 0);
    assert_int_equal(mprotect(m, 2 * pg, PROT_NONE), 0);
    assert_int_equal(mc_store_check_memory(f->node, m, pg, 1), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mprotect(m, 2 * pg, PROT_READ | PROT_WRITE), 0);
    /* and the data is intact, the client alive */
    memset(m, 0, pg);
    assert_int_equal(mc_store_get_into(f->node, "raw", m, pg), (int64_t)pg);
    assert_memory_equal(m, v, pg);
    munmap(m, 3 * pg);
    munmap(ro, pg);
    free(v);
}

/* Sizes through the replica-location cache, the cache's switch and its bad values, and a
 * client reading its own upsert at once although it holds the old value's location. */
static void test_batch_get_size_and_cache(void **state) {
    fixture_t *f = *state;
    const char *keys[4] = {"sz-a", "sz-b", "sz-absent", ""};
    int64_t sizes[4];
    uint8_t *b = pattern(2 * MIB, 7), *b2 = pattern(2 * MIB, 8), *out = malloc(2 * MIB);
    uint8_t v[100] = {1};
    mc_store_config_t c;
    mc_store_t *s = NULL;
    assert_non_null(out);
    assert_int_equal(mc_store_put(f->node, "sz-a", v, sizeof(v), NULL), 0);
    assert_int_equal(mc_store_put(f->node, "sz-b", b, 2 * MIB, NULL), 0);
    for (int round = 0; round < 2; round++) { /* the master's answer, then the cached one */
        assert_int_equal(mc_store_batch_get_size(f->pure, keys, 4, sizes), MC_ERR_OBJECT_NOT_FOUND);
        assert_int_equal(sizes[0], (int64_t)sizeof(v));
        assert_int_equal(sizes[1], 2 * MIB);
        assert_int_equal(sizes[2], MC_ERR_OBJECT_NOT_FOUND);
        assert_int_equal(sizes[3], MC_ERR_INVALID_KEY);
    }
    assert_int_equal(mc_store_batch_get_size(f->pure, NULL, 2, sizes), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_batch_get_size(f->pure, keys, 0, NULL), 0);
    assert_int_equal(mc_store_batch_get_size(NULL, keys, 1, sizes),
                     MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS);
    assert_int_equal(mc_store_replica_cache_capacity(f->pure),
                     MC_STORE_DEFAULT_REPLICA_CACHE_ENTRIES);
    assert_int_equal(mc_store_replica_cache_capacity(NULL), 0);
    /* our own upsert: the next get reads the new value, not the cached old one */
    assert_int_equal(mc_store_get_into(f->node, "sz-b", out, 2 * MIB), 2 * MIB);
    assert_int_equal(mc_store_upsert(f->node, "sz-b", b2, 2 * MIB, NULL), 0);
    assert_int_equal(mc_store_get_into(f->node, "sz-b", out, 2 * MIB), 2 * MIB);
    assert_memory_equal(out, b2, 2 * MIB);
    /* the switch, and values out of range */
    mc_store_config_init(&c);
    assert_int_equal(mc_store_config_set(&c, "replica_cache_entries", "lots"),
                     MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_config_set(&c, "replica_cache_entries", "0"), 0);
    assert_int_equal(c.replica_cache_entries, 0);
    snprintf(c.local_hostname, sizeof(c.local_hostname), "127.0.0.1");
    snprintf(c.master_server_addr, sizeof(c.master_server_addr), "%s", f->m.addr);
    c.global_segment_size = 0;
    c.local_buffer_size = 4 * MIB;
    assert_int_equal(mc_store_create(&s), 0);
    c.replica_cache_entries = MC__REPLICA_CACHE_MAX_ENTRIES + 1;
    assert_int_equal(mc_store_setup(s, &c), MC_ERR_INVALID_PARAMS);
    c.replica_cache_entries = 0;
    assert_int_equal(mc_store_setup(s, &c), 0);
    assert_int_equal(mc_store_replica_cache_capacity(s), 0);
    assert_int_equal(mc_store_batch_get_size(s, keys, 2, sizes), 0);
    assert_int_equal(sizes[1], 2 * MIB);
    assert_int_equal(mc_store_get_into(s, "sz-b", out, 2 * MIB), 2 * MIB);
    assert_memory_equal(out, b2, 2 * MIB);
    mc_store_destroy(s);
    free(out);
    free(b2);
    free(b);
}

/* A writer that dies between put start and put end: readers never see the object, and the
 * master discards the unfinished put so the key can be written again. */
static void test_writer_dies_mid_put(void **state) {
    fixture_t *f = *state;
    uint8_t v[4096];
    int status = 0;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        mc__master_client_t *c = NULL;
        mc__key_replicas_t kr;
        if (mc__master_client_connect(f->m.addr, 3000, NULL, &c) != 0 ||
            mc__master_client_put_start(c, "half", sizeof(v), NULL, &kr) != 0 || kr.code != 0)
            _exit(2);
        _exit(0); /* no put end, no revoke */
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(mc_store_is_exist(f->pure, "half"), 0);
    assert_int_equal(mc_store_get_into(f->pure, "half", v, sizeof(v)), MC_ERR_OBJECT_NOT_FOUND);
    memset(v, 7, sizeof(v));
    /* While the dead writer's put is still there, a put of the key succeeds without writing (the
     * key is taken); once the master discarded it (after 1 s), the put stores our value. */
    int rc = 0;
    for (int i = 0; i < 40 && mc_store_is_exist(f->pure, "half") != 1; i++) {
        rc = mc_store_put(f->node, "half", v, sizeof(v), NULL);
        if (mc_store_is_exist(f->pure, "half") != 1)
            usleep(100 * 1000);
    }
    assert_int_equal(rc, 0);
    uint8_t out[4096];
    assert_int_equal(mc_store_get_into(f->pure, "half", out, sizeof(out)), (int64_t)sizeof(v));
    assert_memory_equal(out, v, sizeof(v));
}

/* A process that contributes a segment, writes its name into name and lives until killed. */
static pid_t start_owner(const char *master, char *name, size_t cap) {
    int fds[2];
    pid_t pid;
    assert_int_equal(pipe(fds), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        mc_store_config_t c;
        mc_store_t *s = NULL;
        const char *n;
        close(fds[0]);
        mc_store_config_init(&c);
        snprintf(c.local_hostname, sizeof(c.local_hostname), "127.0.0.1");
        snprintf(c.master_server_addr, sizeof(c.master_server_addr), "%s", master);
        c.global_segment_size = 8 * MIB;
        c.local_buffer_size = 0;
        if (mc_store_create(&s) != 0 || mc_store_setup(s, &c) != 0)
            _exit(2);
        n = mc_store_hostname(s);
        if (write(fds[1], n, strlen(n) + 1) != (ssize_t)(strlen(n) + 1))
            _exit(3);
        for (;;)
            pause();
    }
    close(fds[1]);
    memset(name, 0, cap);
    for (size_t got = 0; got < cap - 1;) {
        ssize_t r = read(fds[0], name + got, cap - 1 - got);
        assert_true(r > 0);
        got += (size_t)r;
        if (name[got - 1] == '\0')
            break;
    }
    close(fds[0]);
    return pid;
}

#define DEAD_KEYS 24 /* 8 only on the owner that dies, 8 also on node, 8 only on node */
#define DEAD_VAL 4096

/* One batch read of all DEAD_KEYS keys into unregistered memory (the staged path) and as
 * buffers; key 5 (a live one) gets a buffer one byte short. owner_alive: whether keys 0..7
 * must be readable too. */
static void check_batch_reads(mc_store_t *s, uint8_t *const *vals, int owner_alive) {
    mc_store_item_t items[DEAD_KEYS];
    mc_store_iov_t iov[DEAD_KEYS];
    char keys[DEAD_KEYS][32];
    const char *kp[DEAD_KEYS];
    mc_store_buffer_t *bufs[DEAD_KEYS];
    int res[DEAD_KEYS];
    int64_t got[DEAD_KEYS];
    uint8_t *out = calloc(DEAD_KEYS, DEAD_VAL);
    assert_non_null(out);
    for (int i = 0; i < DEAD_KEYS; i++) {
        snprintf(keys[i], sizeof(keys[i]), "owner-%d", i);
        kp[i] = keys[i];
        iov[i].base = out + (size_t)i * DEAD_VAL;
        iov[i].len = i == 5 + 16 ? DEAD_VAL - 1 : DEAD_VAL;
        items[i].key = keys[i];
        items[i].iov = &iov[i];
        items[i].iovcnt = 1;
    }
    assert_true(mc_store_batch_get_into(s, items, DEAD_KEYS, got) < 0);
    if (owner_alive)
        assert_int_equal(mc_store_batch_get_buffer(s, kp, DEAD_KEYS, bufs, res), 0);
    else
        assert_true(mc_store_batch_get_buffer(s, kp, DEAD_KEYS, bufs, res) < 0);
    for (int i = 0; i < DEAD_KEYS; i++) {
        int readable = i >= 8 || owner_alive;
        if (i == 5 + 16) {
            assert_int_equal(got[i], MC_ERR_BUFFER_OVERFLOW);
        } else if (readable) {
            assert_int_equal(got[i], DEAD_VAL);
            assert_memory_equal(out + (size_t)i * DEAD_VAL, vals[i], DEAD_VAL);
        } else {
            assert_true(got[i] < 0);
        }
        if (readable) {
            assert_int_equal(res[i], 0);
            assert_memory_equal(mc_store_buffer_data(bufs[i]), vals[i], DEAD_VAL);
        } else {
            assert_true(res[i] < 0);
            assert_null(bufs[i]);
        }
        mc_store_buffer_free(bufs[i]);
    }
    free(out);
}

/* Batch reads while the owner of some keys' (only or first) replica is dead: the other keys
 * still arrive, keys with a live replica fail over to it, and only keys that lived on the dead
 * owner alone fail. Batch puts write two replicas per key. */
static void test_batch_dead_owner(void **state) {
    fixture_t *f = *state;
    char owner[256];
    const char *on_owner[1] = {owner};
    const char *on_node[1] = {mc_store_hostname(f->node)};
    uint8_t *vals[DEAD_KEYS];
    char keys[DEAD_KEYS][32];
    int status = 0;
    pid_t pid = start_owner(f->m.addr, owner, sizeof(owner));

    f->owner = pid;

    for (int i = 0; i < DEAD_KEYS; i++) {
        mc_replicate_config_t rc = {0};
        mc_store_iov_t v;
        mc_store_item_t it;
        int res = -1;
        rc.replica_num = i >= 8 && i < 16 ? 2 : 1;
        rc.preferred_segments = i < 16 ? on_owner : on_node;
        rc.preferred_segment_count = 1;
        vals[i] = pattern(DEAD_VAL, 100u + (unsigned)i);
        snprintf(keys[i], sizeof(keys[i]), "owner-%d", i);
        v.base = vals[i];
        v.len = DEAD_VAL;
        it.key = keys[i];
        it.iov = &v;
        it.iovcnt = 1;
        assert_int_equal(mc_store_batch_put(f->pure, &it, 1, &rc, &res), 0);
        assert_int_equal(res, 0);
    }
    check_batch_reads(f->pure, vals, 1);
    assert_int_equal(kill(pid, SIGKILL), 0);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    f->owner = 0;
    /* The first read pays for the failed transfers; the second finds the owner suspect. */
    check_batch_reads(f->pure, vals, 0);
    check_batch_reads(f->pure, vals, 0);
    for (int i = 0; i < DEAD_KEYS; i++)
        free(vals[i]);
}

/* A batch larger than the 4 MiB staging buffer, from and into unregistered memory: the batch
 * runs in pieces as staging fills, a 2 MiB object takes the per-key path, all bytes arrive. */
static void test_batch_beyond_staging(void **state) {
    fixture_t *f = *state;
    enum { N = 13 };
    mc_store_item_t items[N];
    mc_store_iov_t in[N], out[N];
    char keys[N][32];
    int res[N];
    int64_t got[N];
    for (int i = 0; i < N; i++) {
        size_t len = i == 6 ? 2 * MIB : MIB - (size_t)i;
        snprintf(keys[i], sizeof(keys[i]), "stage-%d", i);
        in[i].base = pattern(len, 200u + (unsigned)i);
        in[i].len = len;
        out[i].base = calloc(1, len);
        out[i].len = len;
        items[i].key = keys[i];
        items[i].iov = &in[i];
        items[i].iovcnt = 1;
    }
    assert_int_equal(mc_store_batch_put(f->pure, items, N, NULL, res), 0);
    for (int i = 0; i < N; i++)
        items[i].iov = &out[i];
    assert_int_equal(mc_store_batch_get_into(f->pure, items, N, got), 0);
    for (int i = 0; i < N; i++) {
        assert_int_equal(res[i], 0);
        assert_int_equal(got[i], (int64_t)in[i].len);
        assert_memory_equal(out[i].base, in[i].base, in[i].len);
        free(in[i].base);
        free(out[i].base);
    }
}

/* A store on a shared engine that its owner closes under it: every store call then answers with
 * a store code (UNAVAILABLE_IN_CURRENT_STATUS where the engine refused it), never the engine's
 * -202 and never a crash, and the other clients keep working. Before the close, memory the
 * engine's owner registered counts as registered for the store (the engine answers). */
static void test_shared_engine_closed_under_store(void **state) {
    fixture_t *f = *state;
    mc_engine_options_t eo = {.local_server_name = "127.0.0.1", .protocol = "tcp"};
    mc_store_config_t c;
    mc_engine_t *e = NULL;
    mc_store_t *s = NULL;
    uint8_t *v = pattern(MIB, 41), *out = malloc(MIB);
    uint8_t *mine = malloc(MIB);
    char id[37];
    int64_t n;
    int rc;
    assert_int_equal(mc_engine_create(&e), 0);
    assert_int_equal(mc_engine_init(e, &eo), 0);
    mc_store_config_init(&c);
    snprintf(c.local_hostname, sizeof(c.local_hostname), "127.0.0.1");
    snprintf(c.master_server_addr, sizeof(c.master_server_addr), "%s", f->m.addr);
    c.global_segment_size = 0;
    c.local_buffer_size = 4 * MIB;
    c.engine = e;
    assert_int_equal(mc_store_create(&s), 0);
    assert_int_equal(mc_store_setup(s, &c), 0);
    /* registered by the engine's owner, not through the store: read into it zero-copy */
    assert_int_equal(mc_engine_register_memory(e, mine, MIB, "*"), 0);
    assert_int_equal(mc_store_put(f->node, "shared-eng", v, MIB, NULL), 0);
    assert_int_equal(mc_store_get_into(s, "shared-eng", mine, MIB), (int64_t)MIB);
    assert_true(XXH64(mine, MIB, 0) == XXH64(v, MIB, 0));
    /* an unregister of memory the store did not register is refused, the engine keeps it */
    assert_int_equal(mc_store_unregister_buffer(s, mine), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_engine_is_registered(e, mine, MIB), 0);

    mc_engine_close(e);
    assert_int_equal(mc_store_register_buffer(s, out, MIB), MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS);
    assert_int_equal(mc_store_allocate_and_mount_segment(s, MIB, id, NULL),
                     MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS);
    n = mc_store_get_into(s, "shared-eng", out, MIB);
    assert_true(n < 0 && n != MC_ERR_CONTEXT);
    rc = mc_store_put(s, "shared-eng-2", v, MIB, NULL);
    assert_true(rc < 0 && rc != MC_ERR_CONTEXT);
    /* the others lost nothing */
    assert_int_equal(mc_store_get_into(f->pure, "shared-eng", out, MIB), (int64_t)MIB);
    assert_true(XXH64(out, MIB, 0) == XXH64(v, MIB, 0));
    mc_store_destroy(s);
    mc_engine_destroy(e);
    free(mine);
    free(out);
    free(v);
}

static void test_master_down(void **state) {
    mc_store_config_t c;
    mc_store_t *s = NULL;
    mc_store_config_init(&c);
    snprintf(c.master_server_addr, sizeof(c.master_server_addr), "127.0.0.1:1");
    c.rpc_timeout_ms = 300;
    assert_int_equal(mc_store_create(&s), 0);
    assert_int_equal(mc_store_setup(s, &c), MC_ERR_RPC_FAIL);
    assert_int_equal(mc_store_health_check(s), 1);
    assert_int_equal(mc_store_close(s), MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS);
    mc_store_destroy(s);
    assert_int_equal(mc_store_create(&s), 0);
    snprintf(c.master_server_addr, sizeof(c.master_server_addr), "no-port");
    assert_true(mc_store_setup(s, &c) < 0);
    mc_store_destroy(s);
}

/* Pages of the store's segment resident now. */
static size_t segment_resident_pages(mc_store_t *s) {
    size_t pg = (size_t)sysconf(_SC_PAGESIZE), n = (s->segment_size + pg - 1) / pg, k = 0;
    unsigned char *v = malloc(n);
    assert_non_null(v);
    assert_int_equal(mincore(s->segment, s->segment_size, v), 0);
    for (size_t i = 0; i < n; i++)
        k += v[i] & 1;
    free(v);
    return k;
}

/* s's segment is wholly faulted in (populate: this kernel has the advice) or untouched by the
 * run (without it every mode leaves pages to first use). */
static void assert_faulted_in(mc_store_t *s, int populate) {
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    assert_int_equal(atomic_load(&s->prefault.done), populate ? s->segment_size : 0);
    if (populate)
        assert_int_equal(segment_resident_pages(s), s->segment_size / pg);
}

/* MC_STORE_SEGMENT_PREFAULT through setup: sync faults the whole segment in before setup
 * returns, background soon after, off leaves it to first use; values put into a faulted-in
 * segment read back whole; and a store closed while a large segment is still being faulted in
 * closes at once (the run is stopped before the segment is freed). */
static void test_segment_prefault_modes(void **state) {
    fixture_t *f = *state;
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    uint8_t *v = pattern(MIB, 41), *back = malloc(MIB);
    assert_non_null(back);
    static char probe[1 << 16] __attribute__((aligned(1 << 16)));
    int populate = mc__mem_populate(probe, sizeof(probe), 1) == 0; /* Linux 5.14+ */

    setenv("MC_STORE_SEGMENT_PREFAULT", "off", 1);
    mc_store_t *s = make_store(f->m.addr, 8 * MIB, MIB);
    assert_true(segment_resident_pages(s) < 8 * MIB / pg);
    mc_store_destroy(s);

    setenv("MC_STORE_SEGMENT_PREFAULT", "sync", 1);
    s = make_store(f->m.addr, 8 * MIB, MIB);
    assert_faulted_in(s, populate);
    mc_store_destroy(s);

    setenv("MC_STORE_SEGMENT_PREFAULT", "background", 1);
    s = make_store(f->m.addr, 8 * MIB, MIB);
    uint64_t deadline = mc__now_ms() + 100000;
    while (!atomic_load(&s->prefault.ended) && mc__now_ms() < deadline)
        usleep(2000);
    assert_int_equal(atomic_load(&s->prefault.ended), 1);
    assert_faulted_in(s, populate);
    mc_store_destroy(s);

    /* the fixture's pure client puts into a fresh faulted-in segment, and reads back */
    setenv("MC_STORE_SEGMENT_PREFAULT", "sync", 1);
    s = make_store(f->m.addr, 8 * MIB, MIB);
    mc_store_destroy(f->node); /* so the value lands in the new segment */
    f->node = NULL;
    assert_int_equal(mc_store_put(f->pure, "prefaulted", v, MIB, NULL), 0);
    assert_int_equal(mc_store_get_into(f->pure, "prefaulted", back, MIB), MIB);
    assert_memory_equal(back, v, MIB);
    mc_store_destroy(s);

    setenv("MC_STORE_SEGMENT_PREFAULT", "background", 1);
    s = make_store(f->m.addr, 512 * MIB, MIB);
    uint64_t t0 = mc__now_ms();
    mc_store_destroy(s);
    assert_true(mc__now_ms() - t0 < 30000);
    unsetenv("MC_STORE_SEGMENT_PREFAULT");
    free(v);
    free(back);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_roundtrip_sizes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_parts_batches_zero_copy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_forwarded_puts_from_threads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_forward_refuses_bad_messages, setup, teardown),
        cmocka_unit_test_setup_teardown(test_first_gets_answered_by_the_node, setup, teardown),
        cmocka_unit_test_setup_teardown(test_get_forward_refuses_bad_messages, setup, teardown),
        cmocka_unit_test_setup_teardown(test_get_forward_to_an_older_holder, setup, teardown),
        cmocka_unit_test_setup_teardown(test_leases_and_remove, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_input, setup, teardown),
        cmocka_unit_test_setup_teardown(test_raw_memory_checks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_get_size_and_cache, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writer_dies_mid_put, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_dead_owner, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_beyond_staging, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shared_engine_closed_under_store, setup, teardown),
        cmocka_unit_test_setup_teardown(test_segment_prefault_modes, setup, teardown),
        cmocka_unit_test(test_master_down),
    };
    if (argc < 2) {
        fprintf(stderr, "usage: %s path/to/mooncake_master\n", argv[0]);
        return 2;
    }
    g_bin = argv[1];
    return cmocka_run_group_tests(tests, NULL, NULL);
}
