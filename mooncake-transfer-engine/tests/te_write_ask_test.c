/* The write-ask (mc_engine_write_ask, WRITE_ASK on the wire): bytes land and are checked on the
 * target byte for byte, the handler sees the exact message after the bytes are in place (its
 * answer carries their hash as it saw them), answers of every size come back; every refusal
 * leaves the target's memory untouched and its handler uncalled; a handler's error comes back
 * as its code; ordering with normal writes on one peer, a target killed inside its handler,
 * removal of the handler while a call is in flight, and many threads at once. Real target
 * processes (te_target) over loopback. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "mooncake/error.h"
#include "mooncake/transfer_engine.h"
#include "te_test_util.h"

#define KiB (1u << 10)
#define MiB (1u << 20)
#define TARGET_LEN (8u * MiB)
#define LOCAL_LEN (8u * MiB)

typedef struct fixture {
    uint8_t *buf; /* registered with the initiator (for the normal writes) */
    mc_engine_t *e;
    te_target_t t;
    mc_segment_id_t seg;
} fixture_t;

static mc_engine_t *new_engine(uint8_t *buf, int timeout_ms) {
    mc_engine_t *e = NULL;
    mc_engine_options_t o = {
        .local_server_name = "127.0.0.1", .protocol = "tcp", .transfer_timeout_ms = timeout_ms};
    assert_int_equal(mc_engine_create(&e), 0);
    assert_int_equal(mc_engine_init(e, &o), 0);
    assert_int_equal(mc_engine_register_memory(e, buf, LOCAL_LEN, "*"), 0);
    return e;
}

/* An initiator and a target (no handler yet) with TARGET_LEN of plain memory (pattern 1). */
static void start(fixture_t *f, int timeout_ms) {
    f->buf = aligned_alloc(4096, LOCAL_LEN);
    memset(f->buf, 0, LOCAL_LEN);
    f->e = new_engine(f->buf, timeout_ms);
    assert_int_equal(te_target_start(&f->t, "P2PHANDSHAKE", NULL, TARGET_LEN, 0), 0);
    assert_int_equal(mc_engine_open_segment(f->e, f->t.name, &f->seg), 0);
}

static void stop(fixture_t *f, int killed) {
    if (!killed)
        assert_int_equal(te_target_stop(&f->t), 0);
    mc_engine_destroy(f->e);
    free(f->buf);
}

static void set_handler(fixture_t *f, int on) {
    char reply[64];
    assert_int_equal(te_target_cmd(&f->t, reply, sizeof(reply), "K %d", on), 0);
    assert_string_equal(reply, "0");
}

/* The target's handler calls so far, and the last message's hash and length. */
static uint64_t calls(fixture_t *f, uint64_t *hash, uint64_t *len) {
    char reply[128];
    unsigned long long c = 0, h = 0, l = 0;
    assert_int_equal(te_target_cmd(&f->t, reply, sizeof(reply), "C"), 0);
    assert_int_equal(sscanf(reply, "%llu %llx %llu", &c, &h, &l), 3);
    if (hash)
        *hash = h;
    if (len)
        *len = l;
    return c;
}

/* The target's [off, off+len) still holds pattern 1 (what it started with). */
static void assert_untouched(fixture_t *f, uint64_t off, uint64_t len) {
    assert_true(te_target_hash(&f->t, f->t.plain_addr + off, len) == te_pattern_hash(len, 1, off));
}

/* A message for te_target's handler, msg_len bytes (at least the header). */
static void make_msg(uint8_t *msg, size_t msg_len, uint32_t answer_len, int32_t ret,
                     uint32_t sleep_ms, uint64_t addr, uint64_t len, unsigned seed) {
    te_ask_msg_t m = {
        .answer_len = answer_len, .ret = ret, .sleep_ms = sleep_ms, .addr = addr, .len = len};
    te_fill(msg, msg_len, seed);
    memcpy(msg, &m, sizeof(m));
}

/* One write-ask of pattern seed to off, answered with answer_len bytes: everything checked. */
static void ask_ok(fixture_t *f, const uint8_t *src, uint64_t off, size_t len, size_t msg_len,
                   uint32_t answer_len, unsigned seed) {
    static _Thread_local uint8_t msg[MC_ASK_MAX_MSG], answer[MC_ASK_MAX_ANSWER],
        want[MC_ASK_MAX_ANSWER];
    uint64_t addr = f->t.plain_addr + off;
    size_t got = 12345;
    make_msg(msg, msg_len, answer_len, 0, 0, addr, len, seed);
    assert_int_equal(mc_engine_write_ask(f->e, f->seg, src, addr, len, 0, msg, msg_len, answer,
                                         sizeof(answer), &got),
                     0);
    assert_true(got == answer_len);
    /* the handler hashed the bytes in place before it answered */
    te_ask_answer(want, answer_len, te_hash(src, len), te_hash(msg, msg_len));
    assert_memory_equal(answer, want, answer_len);
}

static void test_bytes_land_and_answers_come_back(void **state) {
    static const size_t lens[] = {0, 1, 7, 4096, 4097, 65536, 100000, MiB, 4 * MiB + 3};
    static const uint32_t answers[] = {0, 1, 15, 16, 17, 512, 4095, 4096};
    static const size_t msgs[] = {sizeof(te_ask_msg_t), 33, 1000, 4095, 4096};
    fixture_t f;
    uint64_t off = 0, h = 0, l = 0;
    uint8_t *src = malloc(4 * MiB + 3);
    uint8_t msg[MC_ASK_MAX_MSG];
    uint8_t answer[64];
    size_t got = 0;
    unsigned n = 0;
    (void)state;
    start(&f, 10000);
    set_handler(&f, 1);
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        size_t len = lens[i];
        unsigned seed = 10 + (unsigned)i;
        te_fill(src, len, seed);
        ask_ok(&f, src, off, len, msgs[i % 5], answers[i % 8], seed);
        n++;
        /* the message the handler saw, exactly */
        make_msg(msg, msgs[i % 5], answers[i % 8], 0, 0, f.t.plain_addr + off, len, seed);
        assert_true(calls(&f, &h, &l) == n);
        assert_true(h == te_hash(msg, msgs[i % 5]) && l == msgs[i % 5]);
        /* byte for byte on the target, and nothing around it */
        assert_true(te_target_hash(&f.t, f.t.plain_addr + off, len) ==
                    te_pattern_hash(len, seed, 0));
        off += len;
        assert_untouched(&f, off, 4096);
        off += 4096;
    }
    /* every answer size with a small payload */
    for (uint32_t a = 0; a <= MC_ASK_MAX_ANSWER; a += a < 64 ? 1 : 251) {
        te_fill(src, 64, a);
        ask_ok(&f, src, off, 64, sizeof(te_ask_msg_t) + a % 100, a, a);
        n++;
    }
    ask_ok(&f, src, off, 64, sizeof(te_ask_msg_t), MC_ASK_MAX_ANSWER, 3);
    n++;
    /* a short message is echoed; an empty one (NULL) too; a NULL answer with cap 0 */
    assert_int_equal(
        mc_engine_write_ask(f.e, f.seg, src, f.t.plain_addr, 8, 0, "hello", 5, answer, 64, &got),
        0);
    assert_true(got == 5 && !memcmp(answer, "hello", 5));
    assert_int_equal(
        mc_engine_write_ask(f.e, f.seg, NULL, 0, 0, 0, NULL, 0, answer, sizeof(answer), &got), 0);
    assert_true(got == 0);
    assert_int_equal(
        mc_engine_write_ask(f.e, f.seg, src, f.t.plain_addr, 8, 0, NULL, 0, NULL, 0, &got), 0);
    assert_true(calls(&f, NULL, NULL) == n + 3);
    stop(&f, 0);
    free(src);
}

static void test_no_handler_writes_nothing(void **state) {
    fixture_t f;
    uint8_t src[8192], msg[64], answer[64];
    size_t got = 99;
    (void)state;
    te_fill(src, sizeof(src), 77);
    start(&f, 10000);
    make_msg(msg, sizeof(msg), 8, 0, 0, 0, 0, 1);
    /* none set yet */
    assert_int_equal(mc_engine_write_ask(f.e, f.seg, src, f.t.plain_addr + 4096, sizeof(src), 0,
                                         msg, sizeof(msg), answer, sizeof(answer), &got),
                     MC_ERR_NOT_IMPLEMENTED);
    assert_true(got == 0);
    assert_untouched(&f, 0, 3 * 4096);
    /* set, used, removed: refused again, still nothing written */
    set_handler(&f, 1);
    ask_ok(&f, src, 0, 100, sizeof(te_ask_msg_t), 8, 5);
    set_handler(&f, 0);
    assert_int_equal(mc_engine_write_ask(f.e, f.seg, src, f.t.plain_addr + 4096, sizeof(src), 0,
                                         msg, sizeof(msg), answer, sizeof(answer), &got),
                     MC_ERR_NOT_IMPLEMENTED);
    assert_untouched(&f, 4096, 2 * 4096);
    assert_true(calls(&f, NULL, NULL) == 1);
    /* the connection stayed in step: set again, it works */
    set_handler(&f, 1);
    ask_ok(&f, src, 4096, sizeof(src), 64, 64, 6);
    stop(&f, 0);
}

static void test_refusals_and_handler_errors(void **state) {
    fixture_t f;
    uint8_t src[4096], msg[MC_ASK_MAX_MSG + 1], answer[64];
    size_t got = 0;
    mc_segment_id_t self = -1;
    (void)state;
    te_fill(src, sizeof(src), 9);
    start(&f, 10000);
    set_handler(&f, 1);
    make_msg(msg, 64, 8, 0, 0, 0, 0, 2);
    /* unregistered address, a range running off the buffer, another epoch: refused, not asked */
    assert_int_equal(mc_engine_write_ask(f.e, f.seg, src, 0x1000, sizeof(src), 0, msg, 64, answer,
                                         sizeof(answer), &got),
                     MC_ERR_ADDRESS_NOT_REGISTERED);
    assert_int_equal(mc_engine_write_ask(f.e, f.seg, src, f.t.plain_addr + TARGET_LEN - 100,
                                         sizeof(src), 0, msg, 64, answer, sizeof(answer), &got),
                     MC_ERR_ADDRESS_NOT_REGISTERED);
    assert_int_equal(mc_engine_write_ask(f.e, f.seg, src, f.t.plain_addr, sizeof(src), 12345, msg,
                                         64, answer, sizeof(answer), &got),
                     MC_ERR_ADDRESS_NOT_REGISTERED);
    assert_untouched(&f, 0, 4096);
    assert_untouched(&f, TARGET_LEN - 4096, 4096);
    assert_true(calls(&f, NULL, NULL) == 0);
    /* the handler's own error comes back as its code (after the bytes landed); the codes that
     * would mean "nothing written" and positive ones are mapped */
    make_msg(msg, 64, 8, MC_ERR_OBJECT_ALREADY_EXISTS, 0, 0, 0, 3);
    assert_int_equal(mc_engine_write_ask(f.e, f.seg, src, f.t.plain_addr, sizeof(src), 0, msg, 64,
                                         answer, sizeof(answer), &got),
                     MC_ERR_OBJECT_ALREADY_EXISTS);
    assert_true(te_target_hash(&f.t, f.t.plain_addr, sizeof(src)) == te_hash(src, sizeof(src)));
    make_msg(msg, 64, 8, MC_ERR_NOT_IMPLEMENTED, 0, 0, 0, 3);
    assert_int_equal(mc_engine_write_ask(f.e, f.seg, src, f.t.plain_addr, 16, 0, msg, 64, answer,
                                         sizeof(answer), &got),
                     MC_ERR_CONTEXT);
    make_msg(msg, 64, 8, MC_ERR_ADDRESS_NOT_REGISTERED, 0, 0, 0, 3);
    assert_int_equal(mc_engine_write_ask(f.e, f.seg, src, f.t.plain_addr, 16, 0, msg, 64, answer,
                                         sizeof(answer), &got),
                     MC_ERR_CONTEXT);
    make_msg(msg, 64, 8, 5, 0, 0, 0, 3);
    assert_int_equal(mc_engine_write_ask(f.e, f.seg, src, f.t.plain_addr, 16, 0, msg, 64, answer,
                                         sizeof(answer), &got),
                     MC_ERR_INVALID_ARGUMENT);
    /* an answer longer than cap: consumed, its length reported, the connection still fine */
    make_msg(msg, 64, 100, 0, 0, 0, 0, 3);
    assert_int_equal(mc_engine_write_ask(f.e, f.seg, src, f.t.plain_addr, 16, 0, msg, 64, answer,
                                         sizeof(answer), &got),
                     MC_ERR_INVALID_ARGUMENT);
    assert_true(got == 100);
    assert_true(calls(&f, NULL, NULL) == 5);
    ask_ok(&f, src, 0, 16, 64, 64, 4);
    /* bad arguments: refused before anything is sent */
    assert_int_equal(mc_engine_write_ask(f.e, f.seg, src, f.t.plain_addr, 16, 0, msg,
                                         MC_ASK_MAX_MSG + 1, answer, sizeof(answer), &got),
                     MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_engine_write_ask(f.e, f.seg, NULL, f.t.plain_addr, 16, 0, msg, 64, answer,
                                         sizeof(answer), &got),
                     MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_engine_write_ask(f.e, f.seg, src, f.t.plain_addr, 16, 0, NULL, 64, answer,
                                         sizeof(answer), &got),
                     MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_engine_write_ask(f.e, f.seg, src, f.t.plain_addr, 16, 0, msg, 64, NULL,
                                         sizeof(answer), &got),
                     MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_engine_write_ask(f.e, f.seg, src, f.t.plain_addr, 16, 0, msg, 64, answer,
                                         sizeof(answer), NULL),
                     MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_engine_write_ask(NULL, f.seg, src, f.t.plain_addr, 16, 0, msg, 64, answer,
                                         sizeof(answer), &got),
                     MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_engine_write_ask(f.e, 999, src, f.t.plain_addr, 16, 0, msg, 64, answer,
                                         sizeof(answer), &got),
                     MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_engine_write_ask(f.e, f.seg, src, f.t.plain_addr, (size_t)65 * MiB, 0, msg,
                                         64, answer, sizeof(answer), &got),
                     MC_ERR_INVALID_ARGUMENT);
    assert_true(calls(&f, NULL, NULL) == 6);
    /* this engine itself: not a write-ask's target */
    assert_int_equal(mc_engine_open_segment(f.e, mc_engine_local_name(f.e), &self), 0);
    assert_int_equal(mc_engine_write_ask(f.e, self, src, (uint64_t)(uintptr_t)f.buf, 16, 0, msg, 64,
                                         answer, sizeof(answer), &got),
                     MC_ERR_NOT_IMPLEMENTED);
    assert_int_equal(mc_engine_write_ask(f.e, MC_LOCAL_SEGMENT_ID, src, (uint64_t)(uintptr_t)f.buf,
                                         16, 0, msg, 64, answer, sizeof(answer), &got),
                     MC_ERR_NOT_IMPLEMENTED);
    stop(&f, 0);
}

/* Write-asks whose handlers take a while, and normal writes, in turn on one peer. */
static void test_ordering_with_writes(void **state) {
    fixture_t f;
    uint8_t msg[64];
    uint8_t answer[64];
    size_t got = 0;
    (void)state;
    start(&f, 10000);
    set_handler(&f, 1);
    for (unsigned i = 0; i < 12; i++) {
        uint64_t off = (uint64_t)i * 2 * 64 * KiB;
        uint8_t *src = f.buf + off;
        mc_request_t r = {.opcode = MC_OPCODE_WRITE,
                          .source = f.buf + off + 64 * KiB,
                          .target_id = f.seg,
                          .target_offset = f.t.plain_addr + off + 64 * KiB,
                          .length = 64 * KiB};
        te_fill(src, 64 * KiB, 200 + i);
        te_fill(f.buf + off + 64 * KiB, 64 * KiB, 300 + i);
        make_msg(msg, sizeof(msg), 16, 0, i % 3 ? 20 : 0, f.t.plain_addr + off, 64 * KiB, i);
        assert_int_equal(mc_engine_write_ask(f.e, f.seg, src, f.t.plain_addr + off, 64 * KiB, 0,
                                             msg, sizeof(msg), answer, sizeof(answer), &got),
                         0);
        assert_true(got == 16 && !memcmp(answer, &(uint64_t){te_hash(src, 64 * KiB)}, 8));
        assert_int_equal(mc_engine_transfer_sync(f.e, &r, 1), 0);
    }
    for (unsigned i = 0; i < 12; i++) {
        uint64_t off = (uint64_t)i * 2 * 64 * KiB;
        assert_true(te_target_hash(&f.t, f.t.plain_addr + off, 64 * KiB) ==
                    te_pattern_hash(64 * KiB, 200 + i, 0));
        assert_true(te_target_hash(&f.t, f.t.plain_addr + off + 64 * KiB, 64 * KiB) ==
                    te_pattern_hash(64 * KiB, 300 + i, 0));
    }
    stop(&f, 0);
}

typedef struct asker {
    fixture_t *f;
    unsigned id;
    int rc;
    uint32_t sleep_ms;
    uint64_t elapsed_ms;
} asker_t;

static void *slow_ask_main(void *arg) {
    asker_t *a = arg;
    uint8_t msg[64], answer[64], src[256];
    size_t got = 0;
    uint64_t t0 = te_now_ms();
    te_fill(src, sizeof(src), 55);
    make_msg(msg, sizeof(msg), 8, 0, a->sleep_ms, 0, 0, 1);
    a->rc = mc_engine_write_ask(a->f->e, a->f->seg, src, a->f->t.plain_addr, sizeof(src), 0, msg,
                                sizeof(msg), answer, sizeof(answer), &got);
    a->elapsed_ms = te_now_ms() - t0;
    return NULL;
}

/* Removing the handler waits for the call in flight, which is answered; later ones are refused. */
static void test_remove_waits_for_call(void **state) {
    fixture_t f;
    asker_t a = {.f = &f, .sleep_ms = 600};
    pthread_t th;
    uint64_t t0;
    uint8_t src[64], answer[8];
    size_t got = 0;
    (void)state;
    start(&f, 10000);
    set_handler(&f, 1);
    assert_int_equal(pthread_create(&th, NULL, slow_ask_main, &a), 0);
    while (calls(&f, NULL, NULL) == 0)
        usleep(2000);
    t0 = te_now_ms();
    set_handler(&f, 0);
    assert_true(te_now_ms() - t0 >= 300); /* it waited for the handler's sleep */
    pthread_join(th, NULL);
    assert_int_equal(a.rc, 0);
    assert_int_equal(mc_engine_write_ask(f.e, f.seg, src, f.t.plain_addr + 8192, sizeof(src), 0,
                                         "x", 1, answer, sizeof(answer), &got),
                     MC_ERR_NOT_IMPLEMENTED);
    assert_untouched(&f, 8192, 4096);
    stop(&f, 0);
}

static void *killer_main(void *arg) {
    fixture_t *f = arg;
    while (calls(f, NULL, NULL) == 0)
        usleep(2000);
    te_target_kill(&f->t);
    return NULL;
}

/* The target dies inside a handler that blocks: an unknown-outcome error, well within the
 * timeout. */
static void test_target_killed_in_handler(void **state) {
    fixture_t f;
    asker_t a = {.f = &f, .sleep_ms = 20000};
    pthread_t th;
    (void)state;
    start(&f, 8000);
    set_handler(&f, 1);
    assert_int_equal(pthread_create(&th, NULL, killer_main, &f), 0);
    slow_ask_main(&a);
    pthread_join(th, NULL);
    assert_true(a.rc != 0 && a.rc != MC_ERR_NOT_IMPLEMENTED &&
                a.rc != MC_ERR_ADDRESS_NOT_REGISTERED);
    assert_true(a.elapsed_ms < 8000);
    stop(&f, 1);
}

#define THREADS 8
#define PER_THREAD 40
#define SLOT (16 * KiB)

static void *many_main(void *arg) {
    asker_t *a = arg;
    uint8_t *src = malloc(SLOT);
    for (unsigned i = 0; i < PER_THREAD; i++) {
        size_t len = 1 + (a->id * 131 + i * 977) % SLOT;
        uint64_t off = ((uint64_t)a->id * PER_THREAD + i) * SLOT;
        unsigned seed = 1000 + a->id * PER_THREAD + i;
        te_fill(src, len, seed);
        ask_ok(a->f, src, off, len, 32 + i * 7, i * 11, seed);
    }
    free(src);
    return NULL;
}

static void test_many_threads(void **state) {
    fixture_t f;
    pthread_t th[THREADS];
    asker_t a[THREADS];
    (void)state;
    start(&f, 20000);
    set_handler(&f, 1);
    for (unsigned i = 0; i < THREADS; i++) {
        a[i] = (asker_t){.f = &f, .id = i};
        assert_int_equal(pthread_create(&th[i], NULL, many_main, &a[i]), 0);
    }
    for (unsigned i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    assert_true(calls(&f, NULL, NULL) == THREADS * PER_THREAD);
    for (unsigned id = 0; id < THREADS; id++)
        for (unsigned i = 0; i < PER_THREAD; i++) {
            size_t len = 1 + (id * 131 + i * 977) % SLOT;
            uint64_t off = ((uint64_t)id * PER_THREAD + i) * SLOT;
            assert_true(te_target_hash(&f.t, f.t.plain_addr + off, len) ==
                        te_pattern_hash(len, 1000 + id * PER_THREAD + i, 0));
        }
    stop(&f, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bytes_land_and_answers_come_back),
        cmocka_unit_test(test_no_handler_writes_nothing),
        cmocka_unit_test(test_refusals_and_handler_errors),
        cmocka_unit_test(test_ordering_with_writes),
        cmocka_unit_test(test_remove_waits_for_call),
        cmocka_unit_test(test_target_killed_in_handler),
        cmocka_unit_test(test_many_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
