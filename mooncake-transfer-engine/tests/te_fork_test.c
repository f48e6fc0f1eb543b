/* An engine across fork() (issue 32): the child's copy names the parent's listening socket, peer
 * connections, worker queues and shared memory. Every call in the child fails at once with
 * MC_ERR_CONTEXT, and the child's close and destroy stop nothing of the parent's: afterwards the
 * parent still moves bytes to its peer (te_target, a real engine in its own process) and still
 * accepts a new peer's connection. The children leave with _exit, as a child that only calls us
 * and exits would; their verdict is their exit status. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "mooncake/rpc_channel.h"
#include "mooncake/transfer_engine.h"
#include "te_test_util.h"

#define KiB (1u << 10)
#define MiB (1u << 20)
#define CHILD_DEADLINE_MS 30000

typedef struct fixture {
    te_target_t target;
    mc_engine_t *e;
    uint8_t *buf; /* 1 MiB, managed by e */
    mc_segment_id_t seg;
} fixture_t;

static mc_engine_t *new_engine(void) {
    mc_engine_t *e = NULL;
    /* a short deadline: a call that did wait on a connection nobody serves fails in 3 s */
    mc_engine_options_t o = {
        .local_server_name = "127.0.0.1", .protocol = "tcp", .transfer_timeout_ms = 3000};
    assert_int_equal(mc_engine_create(&e), 0);
    assert_int_equal(mc_engine_init(e, &o), 0);
    return e;
}

static int setup(void **state) {
    fixture_t *f = calloc(1, sizeof(*f));
    assert_int_equal(te_target_start(&f->target, "P2PHANDSHAKE", NULL, 1 * MiB, 1 * MiB), 0);
    f->e = new_engine();
    assert_int_equal(mc_engine_alloc_managed(f->e, MiB, (void **)&f->buf), 0);
    assert_int_equal(mc_engine_open_segment(f->e, f->target.name, &f->seg), 0);
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

static int xfer(mc_engine_t *e, int op, void *src, mc_segment_id_t seg, uint64_t addr,
                uint64_t len) {
    mc_request_t r = {
        .opcode = op, .source = src, .target_id = seg, .target_offset = addr, .length = len};
    return mc_engine_transfer_sync(e, &r, 1);
}

/* The parent's engine works byte-exact: n round trips through the target's plain buffer. */
static void parent_round_trips(fixture_t *f, int n, unsigned seed) {
    for (int i = 0; i < n; i++) {
        te_fill(f->buf, 64 * KiB, seed + (unsigned)i);
        memset(f->buf + 64 * KiB, 0, 64 * KiB);
        assert_int_equal(
            xfer(f->e, MC_OPCODE_WRITE, f->buf, f->seg, f->target.plain_addr, 64 * KiB), 0);
        assert_int_equal(
            xfer(f->e, MC_OPCODE_READ, f->buf + 64 * KiB, f->seg, f->target.plain_addr, 64 * KiB),
            0);
        assert_int_equal(te_hash(f->buf + 64 * KiB, 64 * KiB),
                         te_pattern_hash(64 * KiB, seed + (unsigned)i, 0));
    }
}

/* The child's exit status, or -1 when it did not exit within the deadline (it is killed). */
static int reap(pid_t pid) {
    uint64_t end = te_now_ms() + CHILD_DEADLINE_MS;
    int status = 0;
    while (te_now_ms() < end) {
        pid_t got = waitpid(pid, &status, WNOHANG);
        if (got == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        usleep(20000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

/* A new engine of this process opens a new connection to f->e's server and writes into it: the
 * parent's listener still accepts and serves. */
static void new_peer_writes_to_parent(fixture_t *f) {
    mc_engine_t *b = new_engine();
    mc_segment_id_t seg;
    uint8_t *src = NULL;
    assert_int_equal(mc_engine_alloc_managed(b, 256 * KiB, (void **)&src), 0);
    te_fill(src, 256 * KiB, 91);
    assert_int_equal(mc_engine_open_segment(b, mc_engine_local_name(f->e), &seg), 0);
    assert_int_equal(
        xfer(b, MC_OPCODE_WRITE, src, seg, (uint64_t)(uintptr_t)(f->buf + 512 * KiB), 256 * KiB),
        0);
    assert_int_equal(te_hash(f->buf + 512 * KiB, 256 * KiB), te_pattern_hash(256 * KiB, 91, 0));
    mc_engine_destroy(b);
}

/* Each failure of the child is a bit of its exit status. */
static int child_calls(fixture_t *f) {
    int bad = 0;
    void *p = NULL;
    uint64_t t0 = te_now_ms();
    mc_batch_id_t batch = 0;
    mc_segment_id_t seg = 0;
    if (xfer(f->e, MC_OPCODE_WRITE, f->buf + 256 * KiB, f->seg, f->target.plain_addr + 128 * KiB,
             4 * KiB) != MC_ERR_CONTEXT)
        bad |= 1;
    if (xfer(f->e, MC_OPCODE_READ, f->buf + 256 * KiB, f->seg, f->target.plain_addr, 4 * KiB) !=
        MC_ERR_CONTEXT)
        bad |= 2;
    if (mc_engine_register_memory(f->e, f->buf, 4096, "cpu:0") != MC_ERR_CONTEXT ||
        mc_engine_alloc_managed(f->e, 4096, &p) != MC_ERR_CONTEXT || p != NULL)
        bad |= 4;
    if (mc_engine_batch_alloc(f->e, 4, &batch) != MC_ERR_CONTEXT ||
        mc_engine_open_segment(f->e, f->target.name, &seg) != MC_ERR_CONTEXT ||
        mc_engine_probe(f->e, f->target.name) != MC_ERR_CONTEXT)
        bad |= 8;
    if (te_now_ms() - t0 > 2000) /* refused at once, not after a wait on a connection */
        bad |= 16;
    return bad;
}

static void test_child_calls_refused(void **state) {
    fixture_t *f = *state;
    pid_t pid;
    parent_round_trips(f, 4, 10);
    fflush(NULL); /* nothing buffered is written twice */
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(child_calls(f));
    /* the parent works while the child tries */
    parent_round_trips(f, 50, 20);
    assert_int_equal(reap(pid), 0);
    parent_round_trips(f, 20, 30);
    new_peer_writes_to_parent(f);
}

static void test_child_destroy_leaves_parent(void **state) {
    fixture_t *f = *state;
    pid_t pid;
    parent_round_trips(f, 4, 40);
    fflush(NULL); /* nothing buffered is written twice */
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* a child that lets its copy go at once: close, then destroy, as a binding's dealloc */
        mc_engine_close(f->e);
        mc_engine_destroy(f->e);
        _exit(0);
    }
    assert_int_equal(reap(pid), 0);
    parent_round_trips(f, 20, 50);
    new_peer_writes_to_parent(f);
    /* and a later destroy of the parent's own is an ordinary one (teardown) */
}

static void test_child_inits_own_engine(void **state) {
    fixture_t *f = *state;
    pid_t pid;
    fflush(NULL); /* nothing buffered is written twice */
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* the engine is this child's own: it works, and its destroy is a full one */
        mc_engine_t *c = NULL;
        mc_engine_options_t o = {.local_server_name = "127.0.0.1", .protocol = "tcp"};
        mc_segment_id_t seg;
        uint8_t *p = NULL;
        int bad = 0;
        if (mc_engine_create(&c) || mc_engine_init(c, &o) ||
            mc_engine_alloc_managed(c, 64 * KiB, (void **)&p) ||
            mc_engine_open_segment(c, f->target.name, &seg))
            _exit(1);
        te_fill(p, 64 * KiB, 61);
        if (xfer(c, MC_OPCODE_WRITE, p, seg, f->target.plain_addr + 512 * KiB, 64 * KiB) != 0)
            bad |= 2;
        memset(p, 0, 64 * KiB);
        if (xfer(c, MC_OPCODE_READ, p, seg, f->target.plain_addr + 512 * KiB, 64 * KiB) != 0 ||
            te_hash(p, 64 * KiB) != te_pattern_hash(64 * KiB, 61, 0))
            bad |= 4;
        mc_engine_destroy(c);
        mc_engine_destroy(f->e); /* the inherited one: the child's copies only */
        _exit(bad);
    }
    parent_round_trips(f, 20, 70);
    assert_int_equal(reap(pid), 0);
    parent_round_trips(f, 10, 80);
    new_peer_writes_to_parent(f);
}

/* ---- the RPC channel ---- */

static void count_msg(void *ctx, const mc_rpc_message_t *msg) {
    (void)msg;
    __atomic_add_fetch((int *)ctx, 1, __ATOMIC_SEQ_CST);
}

static void test_rpc_channel_across_fork(void **state) {
    int got = 0;
    mc_rpc_server_options_t so = {
        .listen_address = "127.0.0.1:0", .handler = count_msg, .ctx = &got, .timeout_ms = 3000};
    mc_rpc_client_options_t co = {.timeout_ms = 3000};
    mc_rpc_server_t *s = NULL;
    mc_rpc_client_t *c = NULL;
    char target[64];
    pid_t pid;
    (void)state;
    assert_int_equal(mc_rpc_server_create(&so, &s), 0);
    assert_int_equal(mc_rpc_server_start(s), 0);
    snprintf(target, sizeof(target), "127.0.0.1:%d", mc_rpc_server_port(s));
    assert_int_equal(mc_rpc_client_create(&co, &c), 0);
    assert_int_equal(mc_rpc_client_send(c, target, "hello", 5), 0); /* a pooled connection */
    fflush(NULL);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int bad = 0;
        if (mc_rpc_client_send(c, target, "child", 5) != MC_ERR_CONTEXT)
            bad |= 1;
        if (mc_rpc_server_start(s) != MC_ERR_CONTEXT)
            bad |= 2;
        mc_rpc_server_wait(s); /* returns at once: nothing of the server runs here */
        mc_rpc_server_stop(s);
        mc_rpc_server_destroy(s);
        mc_rpc_client_destroy(c);
        _exit(bad);
    }
    assert_int_equal(reap(pid), 0);
    /* the parent's client and server go on: on the pooled connection, and on a new one */
    for (int i = 0; i < 20; i++)
        assert_int_equal(mc_rpc_client_send(c, target, "again", 5), 0);
    {
        mc_rpc_client_t *c2 = NULL;
        assert_int_equal(mc_rpc_client_create(&co, &c2), 0);
        assert_int_equal(mc_rpc_client_send(c2, target, "new", 3), 0);
        mc_rpc_client_destroy(c2);
    }
    assert_int_equal(__atomic_load_n(&got, __ATOMIC_SEQ_CST), 22);
    mc_rpc_client_destroy(c);
    mc_rpc_server_destroy(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_child_calls_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_child_destroy_leaves_parent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_child_inits_own_engine, setup, teardown),
        cmocka_unit_test(test_rpc_channel_across_fork),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
