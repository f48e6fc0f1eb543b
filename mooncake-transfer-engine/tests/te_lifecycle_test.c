/* The engine owns its calls in flight: mc_engine_close (and destroy) while other threads are
 * inside submit, wait, transfer_sync, register, open_segment, notify on the same engine; a
 * close_segment while transfers to that segment run; and the queries callers used to keep copies
 * for (is_registered, segment_id, local_copy, transfer_sync_notify). The peer is te_target, a real
 * engine in its own process; run under TSan this is the engine's race test (build/tsan). */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "mooncake/transfer_engine.h"
#include "te_test_util.h"

#define KiB (1u << 10)
#define MiB (1u << 20)
#define NTHREADS 4
#define SLOT (256u * KiB) /* each worker's part of the local buffer and of the target's */

typedef struct fixture {
    te_target_t target;
    mc_engine_t *e;
    uint8_t *buf; /* NTHREADS * SLOT, registered with e */
    mc_segment_id_t seg;
} fixture_t;

static mc_engine_t *new_engine(void) {
    mc_engine_t *e = NULL;
    mc_engine_options_t o = {.local_server_name = "127.0.0.1", .protocol = "tcp"};
    assert_int_equal(mc_engine_create(&e), 0);
    assert_int_equal(mc_engine_init(e, &o), 0);
    return e;
}

static void open_engine(fixture_t *f) {
    f->e = new_engine();
    assert_int_equal(mc_engine_alloc_managed(f->e, NTHREADS * SLOT, (void **)&f->buf), 0);
    assert_int_equal(mc_engine_open_segment(f->e, f->target.name, &f->seg), 0);
}

static int setup(void **state) {
    fixture_t *f = calloc(1, sizeof(*f));
    assert_int_equal(
        te_target_start(&f->target, "P2PHANDSHAKE", NULL, (NTHREADS + 1) * SLOT, 1 * MiB), 0);
    open_engine(f);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture_t *f = *state;
    mc_engine_destroy(f->e);
    assert_int_equal(te_target_stop(&f->target), 0);
    free(f);
    return 0;
}

/* ---- close while calls run ---- */

typedef struct worker {
    fixture_t *f;
    int idx;
    int saw_closed;     /* a call answered MC_ERR_CONTEXT */
    int unexpected;     /* a code no call should give here */
    long calls_ok;      /* calls that completed before the close */
    uint8_t scratch[4]; /* registered and unregistered over and over */
} worker_t;

static int expected(int rc) {
    /* 0, the close's own code, or a batch that a close left with tasks (free says busy) */
    return rc == 0 || rc == MC_ERR_CONTEXT || rc == MC_ERR_BATCH_BUSY;
}

static void note(worker_t *w, int rc) {
    if (rc == MC_ERR_CONTEXT)
        w->saw_closed = 1;
    else if (rc == 0)
        w->calls_ok++;
    else if (!expected(rc))
        w->unexpected = rc;
}

static void *worker_main(void *arg) {
    worker_t *w = arg;
    fixture_t *f = w->f;
    mc_engine_t *e = f->e;
    uint8_t *mine = f->buf + (size_t)w->idx * SLOT;
    uint64_t peer = f->target.plain_addr + (uint64_t)w->idx * SLOT;
    for (int round = 0; !w->saw_closed && !w->unexpected; round++) {
        mc_request_t r = {.opcode = round % 2 ? MC_OPCODE_READ : MC_OPCODE_WRITE,
                          .source = mine,
                          .target_id = f->seg,
                          .target_offset = peer,
                          .length = SLOT};
        mc_batch_id_t b = 0;
        mc_segment_id_t id = -1;
        int rc;
        switch (round % 6) {
        case 0: /* the asynchronous path: alloc, submit, wait, free */
            rc = mc_engine_batch_alloc(e, 2, &b);
            note(w, rc);
            if (rc)
                break;
            note(w, mc_engine_batch_submit(e, b, &r, 1));
            note(w, mc_engine_batch_wait(e, b, 60000));
            note(w, mc_engine_batch_free(e, b));
            break;
        case 1:
            note(w, mc_engine_transfer_sync(e, &r, 1));
            break;
        case 2:
            rc = mc_engine_register_memory(e, w->scratch, sizeof(w->scratch), "cpu:0");
            note(w, rc);
            if (rc == 0)
                note(w, mc_engine_unregister_memory(e, w->scratch));
            break;
        case 3:
            note(w, mc_engine_open_segment(e, f->target.name, &id));
            note(w, mc_engine_is_registered(e, mine, SLOT));
            break;
        case 4:
            note(w, mc_engine_notify_send(e, f->target.name, "lifecycle", "x", 1));
            break;
        default:
            note(w, mc_engine_transfer_sync_notify(e, &r, 1, "lifecycle", "y", 1));
            break;
        }
    }
    return NULL;
}

/* Every call after the close answers MC_ERR_CONTEXT and touches nothing. */
static void assert_closed(fixture_t *f) {
    mc_request_t r = {.opcode = MC_OPCODE_WRITE,
                      .source = f->buf,
                      .target_id = f->seg,
                      .target_offset = f->target.plain_addr,
                      .length = 1};
    mc_batch_id_t b = 0;
    mc_segment_id_t id = -1;
    mc_notify_t *n = NULL;
    size_t count = 0;
    int err = 0;
    void *p = NULL;
    uint8_t one = 0;
    assert_int_equal(mc_engine_batch_alloc(f->e, 1, &b), MC_ERR_CONTEXT);
    assert_int_equal(mc_engine_transfer_sync(f->e, &r, 1), MC_ERR_CONTEXT);
    assert_int_equal(mc_engine_transfer_sync_each(f->e, &r, 1, &err), MC_ERR_CONTEXT);
    assert_int_equal(err, MC_ERR_CONTEXT);
    assert_int_equal(mc_engine_open_segment(f->e, f->target.name, &id), MC_ERR_CONTEXT);
    assert_int_equal(mc_engine_segment_id(f->e, f->target.name, &id), MC_ERR_CONTEXT);
    assert_int_equal(mc_engine_close_segment(f->e, f->seg), MC_ERR_CONTEXT);
    assert_int_equal(mc_engine_register_memory(f->e, &one, 1, "*"), MC_ERR_CONTEXT);
    assert_int_equal(mc_engine_alloc_managed(f->e, 4096, &p), MC_ERR_CONTEXT);
    assert_int_equal(mc_engine_is_registered(f->e, f->buf, 1), MC_ERR_CONTEXT);
    assert_int_equal(mc_engine_notifies_fetch(f->e, &n, &count), MC_ERR_CONTEXT);
    assert_int_equal(mc_engine_probe(f->e, f->target.name), MC_ERR_CONTEXT);
    char name[256];
    assert_int_equal(mc_engine_segment_name(f->e, f->seg, name, sizeof(name)), MC_ERR_CONTEXT);
    mc_engine_close(f->e); /* idempotent */
}

static void close_under_load(fixture_t *f, unsigned delay_us) {
    worker_t w[NTHREADS];
    pthread_t th[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        memset(&w[i], 0, sizeof(w[i]));
        w[i].f = f;
        w[i].idx = i;
        assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    long ok = 0;
    usleep(delay_us);
    mc_engine_close(f->e);
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(w[i].unexpected, 0);
        assert_true(w[i].saw_closed);
        ok += w[i].calls_ok;
    }
    /* with time to run, the workers did real work before the close cut in */
    if (delay_us >= 100000)
        assert_true(ok > 0);
    assert_closed(f);
    mc_engine_destroy(f->e);
    f->e = NULL;
}

static void test_close_while_calls_run(void **state) {
    fixture_t *f = *state;
    static const unsigned delays[] = {0, 2000, 20000, 100000};
    for (size_t i = 0; i < sizeof(delays) / sizeof(delays[0]); i++) {
        if (!f->e)
            open_engine(f);
        close_under_load(f, delays[i]);
    }
    /* the peer lost nothing to our closes: it still serves a new engine (past the workers'
     * slots, which a write cut by a close but already on the wire may still reach) */
    open_engine(f);
    te_fill(f->buf, SLOT, 7);
    mc_request_t r = {.opcode = MC_OPCODE_WRITE,
                      .source = f->buf,
                      .target_id = f->seg,
                      .target_offset = f->target.plain_addr + NTHREADS * SLOT,
                      .length = SLOT};
    assert_int_equal(mc_engine_transfer_sync(f->e, &r, 1), 0);
    assert_int_equal(te_target_hash(&f->target, f->target.plain_addr + NTHREADS * SLOT, SLOT),
                     te_hash(f->buf, SLOT));
}

/* A close begun while a thread waits for a batch of its own wakes it. */
typedef struct waiter {
    mc_engine_t *e;
    mc_batch_id_t b;
    int rc;
} waiter_t;

static void *waiter_main(void *arg) {
    waiter_t *w = arg;
    w->rc = mc_engine_batch_wait(w->e, w->b, 120000);
    return NULL;
}

static void test_close_wakes_waiter(void **state) {
    fixture_t *f = *state;
    waiter_t w = {.e = f->e};
    pthread_t th;
    uint64_t t0;
    /* many tasks so some are still queued when the close comes */
    mc_request_t r[64];
    for (int i = 0; i < 64; i++)
        r[i] = (mc_request_t){.opcode = MC_OPCODE_WRITE,
                              .source = f->buf,
                              .target_id = f->seg,
                              .target_offset = f->target.plain_addr,
                              .length = NTHREADS * SLOT};
    assert_int_equal(mc_engine_batch_alloc(f->e, 64, &w.b), 0);
    assert_int_equal(mc_engine_batch_submit(f->e, w.b, r, 64), 0);
    assert_int_equal(pthread_create(&th, NULL, waiter_main, &w), 0);
    t0 = te_now_ms();
    mc_engine_close(f->e);
    pthread_join(th, NULL);
    /* it finished first, or the close ended its wait; either way long before its timeout */
    assert_true(w.rc == 0 || w.rc == MC_ERR_CONTEXT);
    assert_true(te_now_ms() - t0 < 60000);
    assert_int_equal(mc_engine_batch_wait(f->e, w.b, 0), MC_ERR_CONTEXT);
}

/* A close while a thread's synchronous transfer waits on a stalled peer (SIGSTOP) ends that
 * transfer now (MC_ERR_CONTEXT), not at its deadline; the peer, resumed, serves again. */
typedef struct syncer {
    fixture_t *f;
    mc_engine_t *e;
    uint8_t *buf;
    int rc;
    int started;
} syncer_t;

static void *syncer_main(void *arg) {
    syncer_t *y = arg;
    mc_request_t r = {.opcode = MC_OPCODE_WRITE,
                      .source = y->buf,
                      .target_id = y->f->seg,
                      .target_offset = y->f->target.plain_addr,
                      .length = 2 * SLOT};
    __atomic_store_n(&y->started, 1, __ATOMIC_SEQ_CST);
    y->rc = mc_engine_transfer_sync(y->e, &r, 1);
    return NULL;
}

static void test_close_cuts_stalled_transfer(void **state) {
    fixture_t *f = *state;
    syncer_t y = {.f = f};
    mc_engine_options_t o = {
        .local_server_name = "127.0.0.1", .protocol = "tcp", .transfer_timeout_ms = 60000};
    pthread_t th;
    uint64_t t0, took;
    /* small slices: the transfer goes to the workers, whose connections a close can cut */
    setenv("MC_SLICE_SIZE", "65536", 1);
    assert_int_equal(mc_engine_create(&y.e), 0);
    assert_int_equal(mc_engine_init(y.e, &o), 0);
    unsetenv("MC_SLICE_SIZE");
    assert_int_equal(mc_engine_alloc_managed(y.e, NTHREADS * SLOT, (void **)&y.buf), 0);
    assert_int_equal(mc_engine_open_segment(y.e, f->target.name, &f->seg), 0);
    assert_int_equal(kill(f->target.pid, SIGSTOP), 0);
    assert_int_equal(pthread_create(&th, NULL, syncer_main, &y), 0);
    while (!__atomic_load_n(&y.started, __ATOMIC_SEQ_CST))
        usleep(1000);
    usleep(300000); /* let it get stuck on the stopped peer */
    t0 = te_now_ms();
    mc_engine_close(y.e);
    took = te_now_ms() - t0;
    pthread_join(th, NULL);
    assert_int_equal(kill(f->target.pid, SIGCONT), 0);
    assert_int_equal(y.rc, MC_ERR_CONTEXT);
    assert_true(took < 20000); /* the deadline is 60 s away */
    mc_engine_destroy(y.e);
    /* the fixture's engine still reaches the resumed peer. Elsewhere in its buffer than the cut
     * transfer: slices that were wholly on the wire before the close still land once the peer
     * runs again, as after any timeout */
    assert_int_equal(mc_engine_open_segment(f->e, f->target.name, &f->seg), 0);
    mc_request_t r = {.opcode = MC_OPCODE_WRITE,
                      .source = f->buf,
                      .target_id = f->seg,
                      .target_offset = f->target.plain_addr + 2 * SLOT,
                      .length = SLOT};
    te_fill(f->buf, SLOT, 5);
    assert_int_equal(mc_engine_transfer_sync(f->e, &r, 1), 0);
    assert_int_equal(te_target_hash(&f->target, f->target.plain_addr + 2 * SLOT, SLOT),
                     te_hash(f->buf, SLOT));
}

/* ---- abort_segment: transfers waiting on a stalled peer end now ---- */

typedef struct aborted {
    fixture_t *f;
    uint64_t off, len;
    int rc;
    int started;
} aborted_t;

static void *aborted_main(void *arg) {
    aborted_t *a = arg;
    mc_request_t r = {.opcode = MC_OPCODE_WRITE,
                      .source = a->f->buf + a->off,
                      .target_id = a->f->seg,
                      .target_offset = a->f->target.plain_addr + a->off,
                      .length = a->len};
    __atomic_store_n(&a->started, 1, __ATOMIC_SEQ_CST);
    a->rc = mc_engine_transfer_sync(a->f->e, &r, 1);
    return NULL;
}

/* The peer is stopped (SIGSTOP: its kernel still acknowledges, so no TCP timeout ends anything):
 * a lone 4 KiB write (the caller's own thread) and a 1 MiB one in 64 KiB slices (the workers)
 * wait on it; segment_stalled_ms sees them stall; abort_segment ends both at once with
 * MC_ERR_SOCKET instead of at their 60 s deadline; the resumed peer is reached again. */
static void test_abort_segment_cuts_stalled_transfers(void **state) {
    fixture_t *f = *state;
    aborted_t a[2] = {{.f = f, .off = 0, .len = 4096}, {.f = f, .off = SLOT, .len = 2 * SLOT}};
    mc_engine_options_t o = {
        .local_server_name = "127.0.0.1", .protocol = "tcp", .transfer_timeout_ms = 60000};
    pthread_t th[2];
    uint64_t ms = 1, t0;
    mc_engine_destroy(f->e);
    setenv("MC_SLICE_SIZE", "65536", 1);
    assert_int_equal(mc_engine_create(&f->e), 0);
    assert_int_equal(mc_engine_init(f->e, &o), 0);
    unsetenv("MC_SLICE_SIZE");
    assert_int_equal(mc_engine_alloc_managed(f->e, NTHREADS * SLOT, (void **)&f->buf), 0);
    assert_int_equal(mc_engine_open_segment(f->e, f->target.name, &f->seg), 0);
    /* idle: nothing in flight, nothing stalled */
    assert_int_equal(mc_engine_segment_stalled_ms(f->e, f->seg, &ms), 0);
    assert_int_equal(ms, 0);
    assert_int_equal(kill(f->target.pid, SIGSTOP), 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, aborted_main, &a[i]), 0);
    t0 = te_now_ms();
    do { /* both stuck on the stopped peer */
        usleep(20000);
        assert_int_equal(mc_engine_segment_stalled_ms(f->e, f->seg, &ms), 0);
    } while (ms < 500 && te_now_ms() - t0 < 30000);
    assert_true(ms >= 500);
    usleep(200000); /* the lone write's thread holds its connection by now */
    t0 = te_now_ms();
    assert_int_equal(mc_engine_abort_segment(f->e, f->seg), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    assert_true(te_now_ms() - t0 < 5000); /* the deadline is 60 s away */
    assert_int_equal(a[0].rc, MC_ERR_SOCKET);
    assert_int_equal(a[1].rc, MC_ERR_SOCKET);
    assert_int_equal(mc_engine_segment_stalled_ms(f->e, f->seg, &ms), 0);
    assert_int_equal(ms, 0);
    assert_int_equal(kill(f->target.pid, SIGCONT), 0);
    /* the id still works: a transfer after the abort reaches the resumed peer */
    mc_request_t r = {.opcode = MC_OPCODE_WRITE,
                      .source = f->buf,
                      .target_id = f->seg,
                      .target_offset = f->target.plain_addr + 3 * SLOT,
                      .length = SLOT};
    te_fill(f->buf, SLOT, 9);
    assert_int_equal(mc_engine_transfer_sync(f->e, &r, 1), 0);
    assert_int_equal(te_target_hash(&f->target, f->target.plain_addr + 3 * SLOT, SLOT),
                     te_hash(f->buf, SLOT));
    /* bad input */
    assert_int_equal(mc_engine_abort_segment(f->e, f->seg + 100), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_engine_abort_segment(f->e, -5), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_engine_abort_segment(f->e, MC_LOCAL_SEGMENT_ID), 0);
    assert_int_equal(mc_engine_segment_stalled_ms(f->e, f->seg + 100, &ms),
                     MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_engine_segment_stalled_ms(f->e, f->seg, NULL), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_engine_segment_stalled_ms(NULL, f->seg, &ms), MC_ERR_INVALID_ARGUMENT);
    mc_engine_close(f->e);
    assert_int_equal(mc_engine_abort_segment(f->e, f->seg), MC_ERR_CONTEXT);
    assert_int_equal(mc_engine_segment_stalled_ms(f->e, f->seg, &ms), MC_ERR_CONTEXT);
}

/* ---- close_segment while transfers to it run ---- */

typedef struct mover {
    fixture_t *f;
    int idx;
    int failures;
    int rounds;
} mover_t;

static void *mover_main(void *arg) {
    mover_t *m = arg;
    fixture_t *f = m->f;
    uint8_t *mine = f->buf + (size_t)m->idx * SLOT;
    uint64_t peer = f->target.plain_addr + (uint64_t)m->idx * SLOT;
    for (int i = 0; i < m->rounds; i++) {
        mc_request_t r = {.opcode = MC_OPCODE_WRITE,
                          .source = mine,
                          .target_id = f->seg,
                          .target_offset = peer,
                          .length = SLOT};
        te_fill(mine, SLOT, (unsigned)(m->idx * 1000 + i));
        int rc = mc_engine_transfer_sync(f->e, &r, 1);
        if (rc != 0) {
            fprintf(stderr, "mover %d round %d: %s\n", m->idx, i, mc_strerror(rc));
            m->failures++;
        }
    }
    return NULL;
}

static void test_close_segment_in_flight(void **state) {
    fixture_t *f = *state;
    mover_t m[NTHREADS];
    pthread_t th[NTHREADS];
    mc_segment_id_t id = -1;
    for (int i = 0; i < NTHREADS; i++) {
        m[i] = (mover_t){.f = f, .idx = i, .rounds = 40};
        assert_int_equal(pthread_create(&th[i], NULL, mover_main, &m[i]), 0);
    }
    for (int i = 0; i < 200; i++) {
        assert_int_equal(mc_engine_close_segment(f->e, f->seg), 0);
        usleep(500);
    }
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(m[i].failures, 0);
        /* the last write of each mover is what the target holds */
        assert_int_equal(
            te_target_hash(&f->target, f->target.plain_addr + (uint64_t)i * SLOT, SLOT),
            te_pattern_hash(SLOT, (unsigned)(i * 1000 + m[i].rounds - 1), 0));
    }
    /* the id survives the closes, open-or-get and the lookup agree */
    assert_int_equal(mc_engine_open_segment(f->e, f->target.name, &id), 0);
    assert_int_equal(id, f->seg);
    id = -1;
    assert_int_equal(mc_engine_segment_id(f->e, f->target.name, &id), 0);
    assert_int_equal(id, f->seg);
    assert_int_equal(mc_engine_segment_id(f->e, mc_engine_local_name(f->e), &id), 0);
    assert_int_equal(id, MC_LOCAL_SEGMENT_ID);
    assert_int_equal(mc_engine_segment_id(f->e, "127.0.0.1:1", &id), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_engine_segment_id(f->e, "", &id), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_engine_segment_id(f->e, f->target.name, NULL), MC_ERR_INVALID_ARGUMENT);
    /* the name behind an id, for callers that address peers by id (the compat library) */
    char name[256], tiny[4];
    assert_int_equal(mc_engine_segment_name(f->e, f->seg, name, sizeof(name)), 0);
    assert_string_equal(name, f->target.name);
    assert_int_equal(mc_engine_segment_name(f->e, MC_LOCAL_SEGMENT_ID, name, sizeof(name)), 0);
    assert_string_equal(name, mc_engine_local_name(f->e));
    assert_int_equal(mc_engine_segment_name(f->e, f->seg, tiny, sizeof(tiny)),
                     MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_engine_segment_name(f->e, f->seg + 100, name, sizeof(name)),
                     MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_engine_segment_name(f->e, f->seg, NULL, 8), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_engine_close_segment(f->e, f->seg + 100), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_engine_close_segment(f->e, -5), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_engine_close_segment(f->e, MC_LOCAL_SEGMENT_ID), 0);
}

/* ---- the queries ---- */

static void test_is_registered(void **state) {
    fixture_t *f = *state;
    uint8_t plain[64];
    assert_int_equal(mc_engine_is_registered(f->e, f->buf, NTHREADS * SLOT), 0);
    assert_int_equal(mc_engine_is_registered(f->e, f->buf + 10, 10), 0);
    assert_int_equal(mc_engine_is_registered(f->e, f->buf + 1, NTHREADS * SLOT),
                     MC_ERR_ADDRESS_NOT_REGISTERED);
    assert_int_equal(mc_engine_is_registered(f->e, plain, sizeof(plain)),
                     MC_ERR_ADDRESS_NOT_REGISTERED);
    assert_int_equal(mc_engine_register_memory(f->e, plain, sizeof(plain), "*"), 0);
    assert_int_equal(mc_engine_is_registered(f->e, plain + 8, 8), 0);
    assert_int_equal(mc_engine_unregister_memory(f->e, plain), 0);
    assert_int_equal(mc_engine_is_registered(f->e, plain + 8, 8), MC_ERR_ADDRESS_NOT_REGISTERED);
    assert_int_equal(mc_engine_is_registered(f->e, NULL, 8), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_engine_is_registered(f->e, f->buf, 0), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_engine_is_registered(NULL, f->buf, 1), MC_ERR_INVALID_ARGUMENT);
}

static void test_local_copy(void **state) {
    fixture_t *f = *state;
    uint8_t src[4096], dst[4096];
    uint8_t *old = NULL, *cur = NULL;
    uint64_t a = (uint64_t)(uintptr_t)f->buf;
    te_fill(src, sizeof(src), 3);
    assert_int_equal(mc_engine_local_copy(f->e, MC_OPCODE_WRITE, src, a + 100, sizeof(src), 0), 0);
    assert_memory_equal(f->buf + 100, src, sizeof(src));
    memset(dst, 0, sizeof(dst));
    assert_int_equal(mc_engine_local_copy(f->e, MC_OPCODE_READ, dst, a + 100, sizeof(dst), 0), 0);
    assert_memory_equal(dst, src, sizeof(src));
    /* outside registered memory, running past it, bad arguments: refused, nothing copied */
    assert_int_equal(
        mc_engine_local_copy(f->e, MC_OPCODE_WRITE, src, (uint64_t)(uintptr_t)dst, sizeof(dst), 0),
        MC_ERR_ADDRESS_NOT_REGISTERED);
    assert_int_equal(
        mc_engine_local_copy(f->e, MC_OPCODE_WRITE, src, a + NTHREADS * SLOT - 10, sizeof(src), 0),
        MC_ERR_ADDRESS_NOT_REGISTERED);
    assert_int_equal(mc_engine_local_copy(f->e, 7, src, a, 1, 0), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_engine_local_copy(f->e, MC_OPCODE_READ, NULL, a, 1, 0),
                     MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_engine_local_copy(f->e, MC_OPCODE_READ, dst, a, 0, 0),
                     MC_ERR_INVALID_ARGUMENT);
    /* incarnations: a copy naming a gone epoch never reaches the next one */
    assert_int_equal(mc_engine_alloc_managed_epoch(f->e, 8192, 11, (void **)&old), 0);
    assert_int_equal(
        mc_engine_local_copy(f->e, MC_OPCODE_WRITE, src, (uint64_t)(uintptr_t)old, 64, 11), 0);
    assert_int_equal(
        mc_engine_local_copy(f->e, MC_OPCODE_WRITE, src, (uint64_t)(uintptr_t)old, 64, 12),
        MC_ERR_ADDRESS_NOT_REGISTERED);
    assert_int_equal(mc_engine_free_managed(f->e, old), 0);
    assert_int_equal(mc_engine_alloc_managed_epoch(f->e, 8192, 12, (void **)&cur), 0);
    memset(cur, 0, 64);
    assert_int_equal(
        mc_engine_local_copy(f->e, MC_OPCODE_WRITE, src, (uint64_t)(uintptr_t)cur, 64, 11),
        MC_ERR_ADDRESS_NOT_REGISTERED);
    for (int i = 0; i < 64; i++)
        assert_int_equal(cur[i], 0);
    assert_int_equal(mc_engine_free_managed(f->e, cur), 0);
}

static void test_transfer_sync_notify(void **state) {
    fixture_t *f = *state;
    mc_notify_t *n = NULL;
    size_t count = 0;
    uint64_t a = (uint64_t)(uintptr_t)f->buf;
    /* to our own segment: the notify lands in our own queue after the bytes */
    mc_request_t local = {.opcode = MC_OPCODE_WRITE,
                          .source = f->buf,
                          .target_id = MC_LOCAL_SEGMENT_ID,
                          .target_offset = a + SLOT,
                          .length = 4096};
    mc_request_t remote = {.opcode = MC_OPCODE_WRITE,
                           .source = f->buf,
                           .target_id = f->seg,
                           .target_offset = f->target.plain_addr,
                           .length = 4096};
    mc_request_t bad = remote;
    mc_request_t mixed[2] = {local, remote};
    te_fill(f->buf, 4096, 9);
    assert_int_equal(mc_engine_transfer_sync_notify(f->e, &local, 1, "done", "k1", 2), 0);
    assert_memory_equal(f->buf + SLOT, f->buf, 4096);
    assert_int_equal(mc_engine_notifies_fetch(f->e, &n, &count), 0);
    assert_int_equal(count, 1);
    assert_string_equal(n[0].name, "done");
    assert_int_equal(n[0].msg_len, 2);
    assert_memory_equal(n[0].msg, "k1", 2);
    mc_engine_notifies_free(n, count);
    /* to the peer: the bytes are there */
    assert_int_equal(mc_engine_transfer_sync_notify(f->e, &remote, 1, "done", "k2", 2), 0);
    assert_int_equal(te_target_hash(&f->target, f->target.plain_addr, 4096), te_hash(f->buf, 4096));
    /* a failed transfer sends no notify; mixed targets and bad notifies move nothing */
    bad.target_offset = 8; /* not registered at the peer */
    assert_int_equal(mc_engine_transfer_sync_notify(f->e, &bad, 1, "done", "k3", 2),
                     MC_ERR_ADDRESS_NOT_REGISTERED);
    assert_int_equal(mc_engine_transfer_sync_notify(f->e, mixed, 2, "done", "k4", 2),
                     MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_engine_transfer_sync_notify(f->e, &local, 1, NULL, "k5", 2),
                     MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_engine_transfer_sync_notify(f->e, &local, 1, "done", NULL, 2),
                     MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_engine_transfer_sync_notify(f->e, &local, 0, "done", "k6", 2),
                     MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_engine_notifies_fetch(f->e, &n, &count), 0);
    assert_int_equal(count, 0); /* none of the refused calls notified us */
    mc_engine_notifies_free(n, count);
}

/* close and destroy on engines that never started, and NULL */
static void test_close_edge_cases(void **state) {
    mc_engine_t *e = NULL;
    mc_segment_id_t id;
    (void)state;
    mc_engine_close(NULL);
    mc_engine_destroy(NULL);
    assert_int_equal(mc_engine_create(&e), 0);
    mc_engine_close(e);
    assert_int_equal(mc_engine_open_segment(e, "127.0.0.1:1", &id), MC_ERR_CONTEXT);
    mc_engine_destroy(e);
    assert_int_equal(mc_engine_create(&e), 0);
    mc_engine_destroy(e); /* never initialized, never closed */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_is_registered, setup, teardown),
        cmocka_unit_test_setup_teardown(test_local_copy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_transfer_sync_notify, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_segment_in_flight, setup, teardown),
        cmocka_unit_test_setup_teardown(test_abort_segment_cuts_stalled_transfers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_wakes_waiter, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_while_calls_run, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_cuts_stalled_transfer, setup, teardown),
        cmocka_unit_test(test_close_edge_cases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
