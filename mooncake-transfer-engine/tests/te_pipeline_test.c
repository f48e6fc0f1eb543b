/* Pipelined batches on the tcp transport (transports/tcp.c): many requests in flight on one
 * connection. Mixed READ/WRITE batches of mixed sizes checked byte for byte (with an error
 * reply in the middle of the stream, and with the pipeline window at its default, small and
 * off), WRITE-only batches under their own window (MC_TCP_PIPELINE_WRITE_BYTES), a peer that
 * dies with a pipeline outstanding, and a target that reads slowly or not at
 * all (the initiator must wait, not buffer). Real target processes over loopback. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "mooncake/common/frame.h"
#include "mooncake/transfer_engine.h"
#include "proto.h"
#include "te_test_util.h"

#define KiB (1u << 10)
#define MiB (1u << 20)
#define LOCAL_LEN (96u * MiB)
#define TARGET_LEN (64u * MiB)

typedef struct fixture {
    uint8_t *buf;
} fixture_t;

static int setup(void **state) {
    fixture_t *f = calloc(1, sizeof(*f));
    f->buf = aligned_alloc(4096, LOCAL_LEN);
    memset(f->buf, 0, LOCAL_LEN); /* resident before any RSS is taken */
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture_t *f = *state;
    free(f->buf);
    free(f);
    return 0;
}

static void set_or_unset(const char *name, const char *value) {
    if (value)
        setenv(name, value, 1);
    else
        unsetenv(name);
}

/* A tcp engine with buf registered; pipe_bytes sets MC_TCP_PIPELINE_BYTES and write_bytes
 * MC_TCP_PIPELINE_WRITE_BYTES (NULL: unset). */
static mc_engine_t *new_engine_w(fixture_t *f, int timeout_ms, const char *pipe_bytes,
                                 const char *write_bytes) {
    mc_engine_t *e = NULL;
    mc_engine_options_t o = {
        .local_server_name = "127.0.0.1", .protocol = "tcp", .transfer_timeout_ms = timeout_ms};
    set_or_unset("MC_TCP_PIPELINE_BYTES", pipe_bytes);
    set_or_unset("MC_TCP_PIPELINE_WRITE_BYTES", write_bytes);
    assert_int_equal(mc_engine_create(&e), 0);
    assert_int_equal(mc_engine_init(e, &o), 0);
    unsetenv("MC_TCP_PIPELINE_BYTES");
    unsetenv("MC_TCP_PIPELINE_WRITE_BYTES");
    assert_int_equal(mc_engine_register_memory(e, f->buf, LOCAL_LEN, "*"), 0);
    return e;
}

static mc_engine_t *new_engine(fixture_t *f, int timeout_ms, const char *pipe_bytes) {
    return new_engine_w(f, timeout_ms, pipe_bytes, NULL);
}

static mc_request_t req(int op, void *src, mc_segment_id_t seg, uint64_t off, uint64_t len) {
    mc_request_t r = {
        .opcode = op, .source = src, .target_id = seg, .target_offset = off, .length = len};
    return r;
}

/* Sizes that cross every boundary the pipeline has: tiny, the inline buffer, the worker's
 * receive buffer, the pipeline window; requests 1 and 2 span two 4 MiB slices. */
static const uint64_t sizes[] = {1,        7,         512,       4 * KiB, 4 * KiB + 1, 60 * KiB + 5,
                                 64 * KiB, 200 * KiB, 256 * KiB, MiB};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
#define BIG (5 * MiB + 3)

typedef struct plan {
    mc_request_t r[512];
    unsigned seed[512];
    size_t n;
    int bad; /* index of the request the target refuses, or -1 */
} plan_t;

/* A batch alternating WRITE and READ over the sizes, every request on its own local and remote
 * range (writes to the target's first half, reads from its second half, which keeps pattern 1).
 * With bad set, one request in the middle goes to the target's managed buffer, which it freed
 * after we fetched its descriptor: only the target can refuse it, with an error reply in the
 * middle of the pipelined stream. */
static void make_plan(plan_t *p, fixture_t *f, const te_target_t *t, mc_segment_id_t seg, size_t n,
                      int bad) {
    uint64_t loc = 0, wr = 0, rd = TARGET_LEN / 2;
    p->n = n;
    p->bad = bad ? (int)(n / 2) : -1;
    for (size_t i = 0; i < n; i++) {
        uint64_t len = i == 1 || i == 2 ? BIG : sizes[(i * 7 + i / 3) % NSIZES];
        int write = i % 2 == 0;
        uint64_t *roff = write ? &wr : &rd;
        assert_true(loc + len <= LOCAL_LEN && *roff + len <= (write ? TARGET_LEN / 2 : TARGET_LEN));
        p->seed[i] = 100 + (unsigned)i;
        if (write)
            te_fill(f->buf + loc, len, p->seed[i]);
        else
            memset(f->buf + loc, 0xee, len);
        p->r[i] = req(write ? MC_OPCODE_WRITE : MC_OPCODE_READ, f->buf + loc, seg,
                      t->plain_addr + *roff, len);
        if ((int)i == p->bad) {
            assert_true(len <= t->managed_len);
            p->r[i].target_offset = t->managed_addr;
        }
        loc += len;
        *roff += len;
    }
}

/* Every request of the plan did exactly what it says, byte for byte. */
static void check_plan(const plan_t *p, mc_engine_t *e, mc_batch_id_t b, te_target_t *t) {
    for (size_t i = 0; i < p->n; i++) {
        const mc_request_t *r = &p->r[i];
        mc_task_state_t st;
        assert_int_equal(mc_engine_task_status(e, b, i, &st), 0);
        if ((int)i == p->bad) {
            assert_int_equal(st.status, MC_STATUS_FAILED);
            assert_int_equal(st.error, MC_ERR_ADDRESS_NOT_REGISTERED);
            continue;
        }
        assert_int_equal(st.status, MC_STATUS_COMPLETED);
        assert_true(st.transferred_bytes == r->length);
        if (r->opcode == MC_OPCODE_WRITE)
            assert_true(te_target_hash(t, r->target_offset, r->length) ==
                        te_pattern_hash(r->length, p->seed[i], 0));
        else
            assert_true(te_hash(r->source, r->length) ==
                        te_pattern_hash(r->length, 1, r->target_offset - t->plain_addr));
    }
}

static void run_mixed(fixture_t *f, const char *pipe_bytes, int bad) {
    static plan_t p;
    te_target_t t;
    mc_segment_id_t seg;
    mc_batch_id_t b;
    mc_engine_t *e = new_engine(f, 10000, pipe_bytes);
    char reply[64];
    int rc;
    assert_int_equal(te_target_start(&t, "P2PHANDSHAKE", NULL, TARGET_LEN, MiB), 0);
    assert_int_equal(mc_engine_open_segment(e, t.name, &seg), 0);
    if (bad) {
        assert_int_equal(
            te_target_cmd(&t, reply, sizeof(reply), "M %llu", (unsigned long long)t.managed_addr),
            0);
        assert_string_equal(reply, "0");
    }
    make_plan(&p, f, &t, seg, 300, bad);
    assert_int_equal(mc_engine_batch_alloc(e, p.n, &b), 0);
    assert_int_equal(mc_engine_batch_submit(e, b, p.r, p.n), 0);
    rc = mc_engine_batch_wait(e, b, 20000);
    assert_int_equal(rc, bad ? MC_ERR_ADDRESS_NOT_REGISTERED : 0);
    check_plan(&p, e, b, &t);
    assert_int_equal(mc_engine_batch_free(e, b), 0);
    /* the same connections carry on: a second round of the same plan */
    make_plan(&p, f, &t, seg, 120, 0);
    assert_int_equal(mc_engine_transfer_sync(e, p.r, p.n), 0);
    assert_int_equal(mc_engine_batch_alloc(e, p.n, &b), 0);
    assert_int_equal(mc_engine_batch_submit(e, b, p.r, p.n), 0);
    assert_int_equal(mc_engine_batch_wait(e, b, 20000), 0);
    check_plan(&p, e, b, &t);
    assert_int_equal(mc_engine_batch_free(e, b), 0);
    assert_int_equal(te_target_stop(&t), 0);
    mc_engine_destroy(e);
}

/* Batches of WRITEs only, which a group may carry more of (MC_TCP_PIPELINE_WRITE_BYTES, 1 MiB by
 * default): 16 x 64 KiB (one group, on the caller's thread with the default bound), 64 x 64 KiB
 * plus odd sizes (groups on the workers), and a synchronous 16 x 64 KiB; the bad one is refused
 * by the target in the middle of its group. Every byte checked on the target. */
static void make_writes(plan_t *p, fixture_t *f, const te_target_t *t, mc_segment_id_t seg,
                        size_t n, int bad, unsigned seed0) {
    uint64_t off = 0;
    p->n = n;
    p->bad = bad ? (int)(n / 2) : -1;
    for (size_t i = 0; i < n; i++) {
        uint64_t len = n > 16 && i % 5 == 4 ? sizes[i % NSIZES] : 64 * KiB;
        assert_true(off + len <= TARGET_LEN);
        p->seed[i] = seed0 + (unsigned)i;
        te_fill(f->buf + off, len, p->seed[i]);
        p->r[i] = req(MC_OPCODE_WRITE, f->buf + off, seg, t->plain_addr + off, len);
        if ((int)i == p->bad)
            p->r[i].target_offset = t->managed_addr;
        off += len;
    }
}

/* One batch of n writes (the bad one refused by the target: MC_ERR_ADDRESS_NOT_REGISTERED),
 * every byte checked. */
static void write_batch(plan_t *p, fixture_t *f, mc_engine_t *e, te_target_t *t,
                        mc_segment_id_t seg, size_t n, int bad, unsigned seed0) {
    mc_batch_id_t b;
    make_writes(p, f, t, seg, n, bad, seed0);
    assert_int_equal(mc_engine_batch_alloc(e, p->n, &b), 0);
    assert_int_equal(mc_engine_batch_submit(e, b, p->r, p->n), 0);
    assert_int_equal(mc_engine_batch_wait(e, b, 20000), bad ? MC_ERR_ADDRESS_NOT_REGISTERED : 0);
    check_plan(p, e, b, t);
    assert_int_equal(mc_engine_batch_free(e, b), 0);
}

/* For each batch size, on a target of its own: a clean batch (which also fetches the target's
 * ranges), then the managed buffer goes, so that only the target knows and refuses the write to
 * it in the middle of its group (the failure makes the initiator fetch the ranges again, and the
 * next submit would refuse it itself), then a clean batch on the same connections. Last, a
 * synchronous batch of 16 x 64 KiB. */
static void run_writes(fixture_t *f, const char *pipe_bytes, const char *write_bytes) {
    static plan_t p;
    static const size_t counts[] = {16, 64};
    mc_engine_t *e = new_engine_w(f, 10000, pipe_bytes, write_bytes);
    te_target_t t;
    mc_segment_id_t seg;
    char reply[64];
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
        assert_int_equal(te_target_start(&t, "P2PHANDSHAKE", NULL, TARGET_LEN, MiB), 0);
        assert_int_equal(mc_engine_open_segment(e, t.name, &seg), 0);
        write_batch(&p, f, e, &t, seg, counts[c], 0, 1000);
        assert_int_equal(
            te_target_cmd(&t, reply, sizeof(reply), "M %llu", (unsigned long long)t.managed_addr),
            0);
        assert_string_equal(reply, "0");
        write_batch(&p, f, e, &t, seg, counts[c], 1, 2000);
        write_batch(&p, f, e, &t, seg, counts[c], 0, 3000);
        make_writes(&p, f, &t, seg, 16, 0, 4000);
        assert_int_equal(mc_engine_transfer_sync(e, p.r, p.n), 0);
        for (size_t i = 0; i < p.n; i++)
            assert_true(te_target_hash(&t, p.r[i].target_offset, p.r[i].length) ==
                        te_pattern_hash(p.r[i].length, p.seed[i], 0));
        assert_int_equal(mc_engine_close_segment(e, seg), 0);
        assert_int_equal(te_target_stop(&t), 0);
    }
    mc_engine_destroy(e);
}

static void test_write_batch(void **state) {
    run_writes(*state, NULL, NULL);
}

static void test_write_batch_small_write_window(void **state) {
    run_writes(*state, NULL, "65537"); /* one 64 KiB write per group, two with a tiny one */
}

static void test_write_batch_no_pipelining(void **state) {
    run_writes(*state, "0", NULL); /* MC_TCP_PIPELINE_BYTES alone bounds writes too */
    run_writes(*state, NULL, "0");
}

static void test_write_batch_large_write_window(void **state) {
    run_writes(*state, "4097", "4194304");
}

static void test_mixed_batch(void **state) {
    run_mixed(*state, NULL, 0);
}

static void test_mixed_batch_error_mid_stream(void **state) {
    run_mixed(*state, NULL, 1);
}

static void test_mixed_batch_small_window(void **state) {
    run_mixed(*state, "4097", 1); /* two 4 KiB requests do not fit: groups of one to a few */
}

static void test_mixed_batch_no_pipelining(void **state) {
    run_mixed(*state, "0", 1);
}

/* The peer is stopped with a pipeline of small requests written to it, then killed: no reply
 * ever came, so every task fails, at once (not at the 5 s deadline), and the engine goes on
 * with another peer. */
static void test_peer_dies_mid_pipeline(void **state) {
    fixture_t *f = *state;
    enum { N = 4096 };
    static mc_request_t r[N];
    te_target_t victim, other;
    mc_segment_id_t vseg, oseg;
    mc_batch_id_t b;
    uint64_t t0;
    int wst = 0, rc;
    mc_engine_t *e = new_engine(f, 5000, NULL);
    plan_t *p = calloc(1, sizeof(*p));
    assert_int_equal(te_target_start(&victim, "P2PHANDSHAKE", NULL, TARGET_LEN, 0), 0);
    assert_int_equal(te_target_start(&other, "P2PHANDSHAKE", NULL, TARGET_LEN, 0), 0);
    assert_int_equal(mc_engine_open_segment(e, victim.name, &vseg), 0);
    assert_int_equal(mc_engine_open_segment(e, other.name, &oseg), 0);
    /* warm the pool: the pipeline runs on reused connections, the retry path included */
    for (int i = 0; i < 64; i++)
        r[i] = req(i % 2 ? MC_OPCODE_READ : MC_OPCODE_WRITE, f->buf + (size_t)i * 4 * KiB, vseg,
                   victim.plain_addr + (uint64_t)i * 4 * KiB, 4 * KiB);
    assert_int_equal(mc_engine_transfer_sync(e, r, 64), 0);
    kill(victim.pid, SIGSTOP);
    assert_int_equal(waitpid(victim.pid, &wst, WUNTRACED), victim.pid);
    for (int i = 0; i < N; i++)
        r[i] = req(i % 3 ? MC_OPCODE_WRITE : MC_OPCODE_READ, f->buf + (size_t)i * 16 * KiB, vseg,
                   victim.plain_addr + (uint64_t)i * 16 * KiB, 16 * KiB);
    assert_int_equal(mc_engine_batch_alloc(e, N, &b), 0);
    assert_int_equal(mc_engine_batch_submit(e, b, r, N), 0);
    usleep(200 * 1000); /* the workers write until the sockets are full, then wait */
    assert_int_equal(mc_engine_batch_wait(e, b, 0), MC_ERR_BATCH_BUSY);
    te_target_kill(&victim);
    t0 = te_now_ms();
    rc = mc_engine_batch_wait(e, b, 10000);
    assert_true(rc < 0 && rc != MC_ERR_BATCH_BUSY);
    assert_true(te_now_ms() - t0 < 3000);
    for (int i = 0; i < N; i++) {
        mc_task_state_t st;
        assert_int_equal(mc_engine_task_status(e, b, (size_t)i, &st), 0);
        assert_int_equal(st.status, MC_STATUS_FAILED);
        assert_true(st.error < 0);
    }
    assert_int_equal(mc_engine_batch_free(e, b), 0);
    /* the dead peer fails fast; a pipelined batch to the other one is exact */
    assert_true(mc_engine_transfer_sync(e, r, 1) < 0);
    make_plan(p, f, &other, oseg, 200, 0);
    assert_int_equal(mc_engine_batch_alloc(e, p->n, &b), 0);
    assert_int_equal(mc_engine_batch_submit(e, b, p->r, p->n), 0);
    assert_int_equal(mc_engine_batch_wait(e, b, 20000), 0);
    check_plan(p, e, b, &other);
    assert_int_equal(mc_engine_batch_free(e, b), 0);
    assert_int_equal(te_target_stop(&other), 0);
    mc_engine_destroy(e);
    free(p);
}

static long rss_kib(void) {
    char line[256];
    long kib = -1;
    FILE *fp = fopen("/proc/self/status", "r");
    assert_non_null(fp);
    while (fgets(line, sizeof(line), fp))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    fclose(fp);
    return kib;
}

typedef struct toggler {
    pid_t pid;
    atomic_int stop;
} toggler_t;

/* Makes the target a slow reader: it runs 2 ms of every 20. */
static void *toggle_main(void *arg) {
    toggler_t *tg = arg;
    while (!atomic_load(&tg->stop)) {
        kill(tg->pid, SIGSTOP);
        usleep(18 * 1000);
        kill(tg->pid, SIGCONT);
        usleep(2 * 1000);
    }
    kill(tg->pid, SIGCONT);
    return NULL;
}

/* Backpressure. A stopped target takes what the kernel buffers hold and no more: the batch
 * waits (no task ends, none fails, the initiator holds no copy of what it has not sent), and
 * completes exactly once the target runs. A target that reads slowly gets the whole batch in
 * the end, byte for byte. */
static void test_slow_reader(void **state) {
    fixture_t *f = *state;
    enum { N = 384 };
    static mc_request_t r[N];
    te_target_t t;
    mc_segment_id_t seg;
    mc_batch_id_t b;
    toggler_t tg;
    pthread_t thr;
    long rss0;
    int wst = 0;
    mc_engine_t *e = new_engine(f, 30000, NULL);
    plan_t *p = calloc(1, sizeof(*p));
    assert_int_equal(te_target_start(&t, "P2PHANDSHAKE", NULL, TARGET_LEN, 0), 0);
    assert_int_equal(mc_engine_open_segment(e, t.name, &seg), 0);

    /* 384 x 160 KiB = 60 MiB of writes, more than every pooled socket's buffers together */
    for (int i = 0; i < N; i++) {
        te_fill(f->buf + (size_t)i * 160 * KiB, 160 * KiB, 500 + (unsigned)i);
        r[i] = req(MC_OPCODE_WRITE, f->buf + (size_t)i * 160 * KiB, seg,
                   t.plain_addr + (uint64_t)i * 160 * KiB, 160 * KiB);
    }
    rss0 = rss_kib();
    kill(t.pid, SIGSTOP);
    assert_int_equal(waitpid(t.pid, &wst, WUNTRACED), t.pid);
    assert_int_equal(mc_engine_batch_alloc(e, N, &b), 0);
    assert_int_equal(mc_engine_batch_submit(e, b, r, N), 0);
    usleep(500 * 1000);
    assert_int_equal(mc_engine_batch_wait(e, b, 0), MC_ERR_BATCH_BUSY);
    for (int i = 0; i < N; i++) {
        mc_task_state_t st;
        assert_int_equal(mc_engine_task_status(e, b, (size_t)i, &st), 0);
        assert_true(st.status == MC_STATUS_WAITING || st.status == MC_STATUS_PENDING);
    }
    /* nothing of the 60 MiB was copied on our side */
    assert_true(rss_kib() - rss0 < 8 * 1024);
    kill(t.pid, SIGCONT);
    assert_int_equal(mc_engine_batch_wait(e, b, 30000), 0);
    assert_int_equal(mc_engine_batch_free(e, b), 0);
    for (int i = 0; i < N; i += 37)
        assert_true(te_target_hash(&t, r[i].target_offset, r[i].length) ==
                    te_pattern_hash(r[i].length, 500 + (unsigned)i, 0));
    assert_true(te_target_hash(&t, r[N - 1].target_offset, r[N - 1].length) ==
                te_pattern_hash(r[N - 1].length, 500 + N - 1, 0));

    /* a slow reader: the mixed plan while the target runs 2 ms in 20 */
    assert_int_equal(te_target_fill(&t, t.plain_addr, TARGET_LEN, 1), 0);
    make_plan(p, f, &t, seg, 240, 0);
    tg.pid = t.pid;
    atomic_init(&tg.stop, 0);
    assert_int_equal(pthread_create(&thr, NULL, toggle_main, &tg), 0);
    assert_int_equal(mc_engine_batch_alloc(e, p->n, &b), 0);
    assert_int_equal(mc_engine_batch_submit(e, b, p->r, p->n), 0);
    assert_int_equal(mc_engine_batch_wait(e, b, 30000), 0);
    atomic_store(&tg.stop, 1);
    pthread_join(thr, NULL);
    check_plan(p, e, b, &t);
    assert_int_equal(mc_engine_batch_free(e, b), 0);
    assert_int_equal(te_target_stop(&t), 0);
    mc_engine_destroy(e);
    free(p);
}

static int raw_connect(const te_target_t *t) {
    char host[64];
    int port;
    struct sockaddr_in sa = {.sin_family = AF_INET};
    struct timeval tv = {.tv_sec = 5};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_int_equal(sscanf(t->name, "%63[^:]:%d", host, &port), 2);
    sa.sin_port = htons((uint16_t)port);
    inet_pton(AF_INET, host, &sa.sin_addr);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

static void read_exact(int fd, void *p, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = recv(fd, (uint8_t *)p + got, n - got, 0);
        assert_true(r > 0);
        got += (size_t)r;
    }
}

/* One reply header: its type, id, flags and body length are what we expect. */
static void expect_reply(int fd, uint8_t type, uint64_t id, int error, uint64_t body_len) {
    uint8_t raw[MC_FRAME_HEADER_SIZE];
    mc_frame_header_t h;
    read_exact(fd, raw, sizeof(raw));
    assert_int_equal(mc__frame_header_decode(raw, sizeof(raw), 1 << 20, &h), 0);
    assert_int_equal(h.type, type);
    assert_true(h.request_id == id);
    assert_int_equal(!!(h.flags & MC_FRAME_F_ERROR), error);
    if (!error)
        assert_true(h.body_len == body_len);
}

/* The target side of a pipeline, seen from a raw socket: many requests in one write (WRITEs,
 * READs, a refused WRITE, a PING) are answered in order with their ids, the refused one with
 * an error that leaves the stream in step; a malformed header after valid requests closes the
 * connection only after the valid ones were answered; the target serves on. */
static void test_target_pipelined_stream(void **state) {
    fixture_t *f = *state;
    te_target_t t;
    enum { N = 40, LEN = 3000 };
    static uint8_t wire[N * (MC__TE_RW_HEAD + LEN) + 2 * MC_FRAME_HEADER_SIZE];
    uint8_t body[LEN], junk[MC_FRAME_HEADER_SIZE];
    size_t n = 0;
    int fd;
    (void)f;
    assert_int_equal(te_target_start(&t, "P2PHANDSHAKE", NULL, MiB, 0), 0);
    for (int round = 0; round < 2; round++) {
        n = 0;
        for (int i = 0; i < N; i++) {
            int write = i % 2 == 0;
            uint64_t addr = t.plain_addr + (uint64_t)i * LEN;
            if (i == 7)
                addr = 4096; /* not registered: refused, payload drained */
            mc__te_encode_rw(wire + n, write || i == 7 ? MC__TE_WRITE : MC__TE_READ,
                             (uint64_t)(100 + i), addr, LEN, 0, 0);
            n += MC__TE_RW_HEAD;
            if (write || i == 7) {
                te_fill(wire + n, LEN, 40 + (unsigned)i);
                n += LEN;
            }
        }
        {
            mc_frame_header_t ping = {.magic = MC_FRAME_MAGIC,
                                      .version = MC_FRAME_VERSION,
                                      .type = MC__TE_PING,
                                      .request_id = 999};
            mc__frame_header_encode(&ping, wire + n);
            n += MC_FRAME_HEADER_SIZE;
        }
        if (round == 1) { /* then a header with a bad magic */
            memset(junk, 0xab, sizeof(junk));
            memcpy(wire + n, junk, sizeof(junk));
            n += sizeof(junk);
        }
        fd = raw_connect(&t);
        assert_int_equal(send(fd, wire, n, MSG_NOSIGNAL), (ssize_t)n);
        for (int i = 0; i < N; i++) {
            int write = i % 2 == 0;
            if (i == 7) {
                uint8_t err[MC__TE_MAX_ERROR_BODY];
                uint8_t raw[MC_FRAME_HEADER_SIZE];
                mc_frame_header_t h;
                int code = 0;
                read_exact(fd, raw, sizeof(raw));
                assert_int_equal(mc__frame_header_decode(raw, sizeof(raw), sizeof(err), &h), 0);
                assert_true(h.request_id == 107 && (h.flags & MC_FRAME_F_ERROR));
                read_exact(fd, err, h.body_len);
                assert_int_equal(mc__te_decode_error(err, h.body_len, &code, NULL, 0), 0);
                assert_int_equal(code, MC_ERR_ADDRESS_NOT_REGISTERED);
                continue;
            }
            expect_reply(fd, write ? MC__TE_WRITE : MC__TE_READ, (uint64_t)(100 + i), 0,
                         write ? 0 : LEN);
            if (!write) {
                read_exact(fd, body, LEN);
                /* reads in round 0 see pattern 1; round 1 sees the same (no write overlaps) */
                assert_true(te_hash(body, LEN) == te_pattern_hash(LEN, 1, (size_t)i * LEN));
            }
        }
        expect_reply(fd, MC__TE_PING, 999, 0, 0);
        if (round == 1) {
            uint8_t b;
            assert_true(recv(fd, &b, 1, 0) <= 0); /* closed after the valid requests */
        }
        close(fd);
        for (int i = 0; i < N; i += 2)
            assert_true(te_target_hash(&t, t.plain_addr + (uint64_t)i * LEN, LEN) ==
                        te_pattern_hash(LEN, 40 + (unsigned)i, 0));
    }
    assert_int_equal(te_target_stop(&t), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mixed_batch),
        cmocka_unit_test(test_mixed_batch_error_mid_stream),
        cmocka_unit_test(test_mixed_batch_small_window),
        cmocka_unit_test(test_mixed_batch_no_pipelining),
        cmocka_unit_test(test_write_batch),
        cmocka_unit_test(test_write_batch_small_write_window),
        cmocka_unit_test(test_write_batch_no_pipelining),
        cmocka_unit_test(test_write_batch_large_write_window),
        cmocka_unit_test(test_peer_dies_mid_pipeline),
        cmocka_unit_test(test_slow_reader),
        cmocka_unit_test(test_target_pipelined_stream),
    };
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, setup, teardown);
}
