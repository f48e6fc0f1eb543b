/* Two processes over loopback: this test's engines against te_target processes. Moves 1 KiB,
 * 1 MiB, 64 MiB and mixed batches with READ and WRITE over tcp and shm, from registered memory
 * and (MC_SUBMIT_UNREGISTERED_LOCAL) from memory never registered, with P2PHANDSHAKE and HTTP
 * metadata, and checks every byte by checksum on the side that received it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http_kv_store.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/time.h"
#include "mooncake/transfer_engine.h"
#include "te_test_util.h"

#define MiB (1u << 20)
#define LOCAL_LEN (80u * MiB)

typedef struct fixture {
    mc_engine_t *tcp; /* protocol "tcp" */
    mc_engine_t *any; /* protocol "auto" */
    uint8_t *tcp_buf;
    uint8_t *any_buf;
    te_target_t target;
} fixture_t;

static mc_engine_t *new_engine(const char *meta, const char *name, const char *proto) {
    mc_engine_t *e = NULL;
    mc_engine_options_t o = {.local_server_name = name, .metadata_conn = meta, .protocol = proto};
    assert_int_equal(mc_engine_create(&e), 0);
    assert_int_equal(mc_engine_init(e, &o), 0);
    return e;
}

static int setup(void **state) {
    fixture_t *f = calloc(1, sizeof(*f));
    f->tcp = new_engine("P2PHANDSHAKE", "127.0.0.1", "tcp");
    f->any = new_engine(NULL, "127.0.0.1", "auto");
    f->tcp_buf = aligned_alloc(4096, LOCAL_LEN);
    f->any_buf = aligned_alloc(4096, LOCAL_LEN);
    assert_int_equal(mc_engine_register_memory(f->tcp, f->tcp_buf, LOCAL_LEN, "cpu:0"), 0);
    assert_int_equal(mc_engine_register_memory(f->any, f->any_buf, LOCAL_LEN, "*"), 0);
    assert_int_equal(te_target_start(&f->target, "P2PHANDSHAKE", NULL, 72 * MiB, 72 * MiB), 0);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture_t *f = *state;
    int rc = te_target_stop(&f->target);
    mc_engine_destroy(f->tcp);
    mc_engine_destroy(f->any);
    free(f->tcp_buf);
    free(f->any_buf);
    free(f);
    return rc == 0 ? 0 : -1;
}

static int xfer(mc_engine_t *e, mc_segment_id_t seg, int op, void *local, uint64_t remote,
                uint64_t len) {
    mc_request_t r = {
        .opcode = op, .source = local, .target_id = seg, .target_offset = remote, .length = len};
    return mc_engine_transfer_sync(e, &r, 1);
}

static uint64_t stat_tasks(mc_engine_t *e, const char *tp) {
    uint64_t t = 0;
    assert_int_equal(mc_engine_get_stats(e, tp, &t, NULL), 0);
    return t;
}

/* WRITE then READ of each size against one remote buffer; returns nothing, asserts inside. */
static void roundtrip(mc_engine_t *e, uint8_t *buf, te_target_t *t, uint64_t remote) {
    static const uint64_t sizes[] = {1024, MiB, 64 * MiB};
    mc_segment_id_t seg = -1;
    assert_int_equal(mc_engine_open_segment(e, t->name, &seg), 0);
    assert_true(seg > 0);
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        uint64_t n = sizes[i];
        /* an odd offset: nothing may depend on alignment */
        uint64_t off = 4097 * (i + 1);
        te_fill(buf, n, 100 + (unsigned)i);
        assert_int_equal(xfer(e, seg, MC_OPCODE_WRITE, buf, remote + off, n), 0);
        assert_true(te_target_hash(t, remote + off, n) == te_hash(buf, n));

        assert_int_equal(te_target_fill(t, remote, n + off, 200 + (unsigned)i), 0);
        memset(buf, 0, n);
        assert_int_equal(xfer(e, seg, MC_OPCODE_READ, buf, remote + off, n), 0);
        assert_true(te_hash(buf, n) == te_pattern_hash(n, 200 + (unsigned)i, off));
    }
}

static void test_tcp_sizes(void **state) {
    fixture_t *f = *state;
    uint64_t shm0 = stat_tasks(f->tcp, "shm"), tcp0 = stat_tasks(f->tcp, "tcp");
    roundtrip(f->tcp, f->tcp_buf, &f->target, f->target.plain_addr);
    /* protocol "tcp" never uses shm, not even for managed memory on this host */
    roundtrip(f->tcp, f->tcp_buf, &f->target, f->target.managed_addr);
    assert_int_equal(stat_tasks(f->tcp, "shm"), shm0);
    assert_int_equal(stat_tasks(f->tcp, "tcp"), tcp0 + 12);
}

static void test_shm_sizes(void **state) {
    fixture_t *f = *state;
    uint64_t shm0 = stat_tasks(f->any, "shm"), tcp0 = stat_tasks(f->any, "tcp");
    uint64_t b0 = 0, b1 = 0;
    assert_int_equal(mc_engine_get_stats(f->any, "shm", NULL, &b0), 0);
    roundtrip(f->any, f->any_buf, &f->target, f->target.managed_addr);
    assert_int_equal(stat_tasks(f->any, "shm"), shm0 + 6);
    assert_int_equal(stat_tasks(f->any, "tcp"), tcp0);
    assert_int_equal(mc_engine_get_stats(f->any, "shm", NULL, &b1), 0);
    assert_true(b1 - b0 == 2 * (1024 + MiB + 64 * MiB));
}

static void test_auto_plain_memory_uses_tcp(void **state) {
    fixture_t *f = *state;
    uint64_t shm0 = stat_tasks(f->any, "shm"), tcp0 = stat_tasks(f->any, "tcp");
    roundtrip(f->any, f->any_buf, &f->target, f->target.plain_addr);
    assert_int_equal(stat_tasks(f->any, "shm"), shm0);
    assert_int_equal(stat_tasks(f->any, "tcp"), tcp0 + 6);
}

/* One batch, many sizes (some cut into several slices), READ and WRITE, plain and managed
 * targets at once. */
static void test_mixed_batch(void **state) {
    fixture_t *f = *state;
    static const uint64_t sizes[] = {1, 7, 4096, 65537, MiB + 3, 5 * MiB + 1, 9 * MiB, 333333};
    enum { N = 16 };
    mc_request_t r[N];
    uint64_t loff[N], roff[N];
    mc_segment_id_t seg;
    mc_batch_id_t b = 0;
    uint64_t lpos = 0, rpos = 0;
    assert_int_equal(mc_engine_open_segment(f->any, f->target.name, &seg), 0);
    assert_int_equal(te_target_fill(&f->target, f->target.plain_addr, 40 * MiB, 7), 0);
    assert_int_equal(te_target_fill(&f->target, f->target.managed_addr, 40 * MiB, 8), 0);
    for (int i = 0; i < N; i++) {
        uint64_t n = sizes[i % 8];
        int managed = i & 1;
        loff[i] = lpos;
        roff[i] = rpos;
        r[i].opcode = (i / 2) % 2 ? MC_OPCODE_READ : MC_OPCODE_WRITE;
        r[i].source = f->any_buf + lpos;
        r[i].target_id = seg;
        r[i].target_offset = (managed ? f->target.managed_addr : f->target.plain_addr) + rpos;
        r[i].length = n;
        r[i].target_epoch = 0;
        if (r[i].opcode == MC_OPCODE_WRITE)
            te_fill(f->any_buf + lpos, n, 300 + (unsigned)i);
        else
            memset(f->any_buf + lpos, 0, n);
        lpos += n + 11;
        rpos += n + 13;
    }
    assert_int_equal(mc_engine_batch_alloc(f->any, N, &b), 0);
    /* two submits into one batch */
    uint64_t t0 = mc__now_ns();
    assert_int_equal(mc_engine_batch_submit(f->any, b, r, N / 2), 0);
    assert_int_equal(mc_engine_batch_submit(f->any, b, r + N / 2, N / 2), 0);
    assert_int_equal(mc_engine_batch_wait(f->any, b, -1), 0);
    uint64_t elapsed = mc__now_ns() - t0;
    for (int i = 0; i < N; i++) {
        mc_task_state_t st;
        assert_int_equal(mc_engine_task_status(f->any, b, (size_t)i, &st), 0);
        assert_int_equal(st.status, MC_STATUS_COMPLETED);
        assert_true(st.transferred_bytes == r[i].length);
        /* the engine's own submit-to-end time lies within what we observed around it */
        assert_true(st.latency_ns > 0 && st.latency_ns <= elapsed);
        if (r[i].opcode == MC_OPCODE_WRITE) {
            assert_true(te_target_hash(&f->target, r[i].target_offset, r[i].length) ==
                        te_hash(f->any_buf + loff[i], r[i].length));
        } else {
            unsigned seed = (i & 1) ? 8 : 7;
            assert_true(te_hash(f->any_buf + loff[i], r[i].length) ==
                        te_pattern_hash(r[i].length, seed, roff[i]));
        }
    }
    assert_int_equal(mc_engine_batch_free(f->any, b), 0);
}

static void test_local_segment(void **state) {
    fixture_t *f = *state;
    mc_segment_id_t self = -1;
    uint64_t l0 = stat_tasks(f->tcp, "local");
    te_fill(f->tcp_buf, MiB, 9);
    assert_int_equal(xfer(f->tcp, MC_LOCAL_SEGMENT_ID, MC_OPCODE_WRITE, f->tcp_buf,
                          (uint64_t)(uintptr_t)(f->tcp_buf + 8 * MiB), MiB),
                     0);
    assert_true(te_hash(f->tcp_buf + 8 * MiB, MiB) == te_hash(f->tcp_buf, MiB));
    assert_int_equal(mc_engine_open_segment(f->tcp, mc_engine_local_name(f->tcp), &self), 0);
    assert_int_equal(self, MC_LOCAL_SEGMENT_ID);
    memset(f->tcp_buf + 16 * MiB, 0, MiB);
    assert_int_equal(xfer(f->tcp, self, MC_OPCODE_READ, f->tcp_buf + 16 * MiB,
                          (uint64_t)(uintptr_t)f->tcp_buf, MiB),
                     0);
    assert_true(te_hash(f->tcp_buf + 16 * MiB, MiB) == te_pattern_hash(MiB, 9, 0));
    assert_int_equal(stat_tasks(f->tcp, "local"), l0 + 2);
}

/* MC_SUBMIT_UNREGISTERED_LOCAL: memory this engine never registered moves over tcp (one slice,
 * several slices, a batch mixing it with registered memory), over shm, and within the engine,
 * byte for byte; without the flag it is refused as before, and unknown flags are refused. */
static void xfer_ex(mc_engine_t *e, mc_segment_id_t seg, int op, void *local, uint64_t remote,
                    uint64_t len) {
    mc_request_t r = {
        .opcode = op, .source = local, .target_id = seg, .target_offset = remote, .length = len};
    int err = -1;
    assert_int_equal(mc_engine_transfer_sync_each_ex(e, &r, 1, &err, MC_SUBMIT_UNREGISTERED_LOCAL),
                     0);
    assert_int_equal(err, 0);
}

static void unregistered_roundtrip(mc_engine_t *e, te_target_t *t, uint64_t remote) {
    static const uint64_t sizes[] = {4096, 65536, MiB, 9 * MiB}; /* 9 MiB: three tcp slices */
    mc_segment_id_t seg = -1;
    uint8_t *mem = malloc(9 * MiB + 1);
    assert_non_null(mem);
    assert_int_equal(mc_engine_open_segment(e, t->name, &seg), 0);
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        uint64_t n = sizes[i], off = 513 * (i + 1);
        uint8_t *p = mem + 1; /* unaligned as well as unregistered */
        assert_int_not_equal(mc_engine_is_registered(e, p, n), 0);
        te_fill(p, n, 300 + (unsigned)i);
        assert_int_equal(xfer(e, seg, MC_OPCODE_WRITE, p, remote + off, n),
                         MC_ERR_ADDRESS_NOT_REGISTERED);
        xfer_ex(e, seg, MC_OPCODE_WRITE, p, remote + off, n);
        assert_true(te_target_hash(t, remote + off, n) == te_hash(p, n));
        assert_int_equal(te_target_fill(t, remote, n + off, 400 + (unsigned)i), 0);
        memset(p, 0, n);
        xfer_ex(e, seg, MC_OPCODE_READ, p, remote + off, n);
        assert_true(te_hash(p, n) == te_pattern_hash(n, 400 + (unsigned)i, off));
    }
    free(mem);
}

static void test_unregistered_local(void **state) {
    fixture_t *f = *state;
    uint64_t shm0 = stat_tasks(f->any, "shm"), tcp0 = stat_tasks(f->tcp, "tcp");
    mc_segment_id_t seg = -1;
    mc_batch_id_t b = 0;
    mc_request_t r[8];
    uint8_t *mem = malloc(4 * MiB);
    uint8_t stray[64];
    int err[2] = {-1, -1};
    assert_non_null(mem);

    unregistered_roundtrip(f->tcp, &f->target, f->target.plain_addr);
    assert_int_equal(stat_tasks(f->tcp, "tcp"), tcp0 + 8);
    unregistered_roundtrip(f->any, &f->target, f->target.managed_addr);
    assert_int_equal(stat_tasks(f->any, "shm"), shm0 + 8);

    /* one batch: unregistered and registered sources, reads and writes, submitted with _ex */
    assert_int_equal(mc_engine_open_segment(f->tcp, f->target.name, &seg), 0);
    for (int i = 0; i < 8; i++) {
        int unreg = i % 2 == 0;
        uint8_t *p = unreg ? mem + (size_t)i * 256 * 1024 : f->tcp_buf + (size_t)i * 256 * 1024;
        r[i] = (mc_request_t){.opcode = MC_OPCODE_WRITE,
                              .source = p,
                              .target_id = seg,
                              .target_offset = f->target.plain_addr + (uint64_t)i * 256 * 1024,
                              .length = 200 * 1024};
        te_fill(p, 200 * 1024, 500 + (unsigned)i);
    }
    assert_int_equal(mc_engine_batch_alloc(f->tcp, 8, &b), 0);
    assert_int_equal(mc_engine_batch_submit(f->tcp, b, r, 8), MC_ERR_ADDRESS_NOT_REGISTERED);
    assert_int_equal(mc_engine_batch_submit_ex(f->tcp, b, r, 8, 0x80), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_engine_batch_submit_ex(f->tcp, b, r, 8, MC_SUBMIT_UNREGISTERED_LOCAL), 0);
    assert_int_equal(mc_engine_batch_wait(f->tcp, b, -1), 0);
    assert_int_equal(mc_engine_batch_free(f->tcp, b), 0);
    for (int i = 0; i < 8; i++)
        assert_true(te_target_hash(&f->target, r[i].target_offset, 200 * 1024) ==
                    te_pattern_hash(200 * 1024, 500 + (unsigned)i, 0));

    /* within the engine: an unregistered source against registered memory of its own */
    te_fill(mem, MiB, 7);
    xfer_ex(f->tcp, MC_LOCAL_SEGMENT_ID, MC_OPCODE_WRITE, mem,
            (uint64_t)(uintptr_t)(f->tcp_buf + 32 * MiB), MiB);
    assert_true(te_hash(f->tcp_buf + 32 * MiB, MiB) == te_hash(mem, MiB));

    /* what the flag does not change: the target side is still checked, bad requests refused */
    r[0] = (mc_request_t){.opcode = MC_OPCODE_WRITE,
                          .source = stray,
                          .target_id = MC_LOCAL_SEGMENT_ID,
                          .target_offset = (uint64_t)(uintptr_t)mem,
                          .length = sizeof(stray)};
    r[1] = (mc_request_t){.opcode = MC_OPCODE_READ,
                          .source = NULL,
                          .target_id = seg,
                          .target_offset = f->target.plain_addr,
                          .length = 8};
    assert_int_equal(
        mc_engine_transfer_sync_each_ex(f->tcp, r, 1, err, MC_SUBMIT_UNREGISTERED_LOCAL),
        MC_ERR_ADDRESS_NOT_REGISTERED);
    assert_int_equal(
        mc_engine_transfer_sync_each_ex(f->tcp, r + 1, 1, err, MC_SUBMIT_UNREGISTERED_LOCAL),
        MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_engine_transfer_sync_each_ex(f->tcp, r, 1, err, 1u << 9),
                     MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(err[0], MC_ERR_INVALID_ARGUMENT);
    free(mem);
}

static void test_notify(void **state) {
    fixture_t *f = *state;
    char reply[512], want[512];
    mc_notify_t *n = NULL;
    size_t cnt = 0;
    assert_int_equal(mc_engine_notify_send(f->tcp, f->target.name, "kv_done", "req-42", 6), 0);
    assert_int_equal(te_target_cmd(&f->target, reply, sizeof(reply), "N"), 0);
    snprintf(want, sizeof(want), "1 %s kv_done req-42", mc_engine_local_name(f->tcp));
    assert_string_equal(reply, want);
    /* drained */
    assert_int_equal(te_target_cmd(&f->target, reply, sizeof(reply), "N"), 0);
    assert_string_equal(reply, "0");
    /* to ourselves */
    assert_int_equal(mc_engine_notify_send(f->any, mc_engine_local_name(f->any), "x", "y", 1), 0);
    assert_int_equal(mc_engine_notifies_fetch(f->any, &n, &cnt), 0);
    assert_int_equal(cnt, 1);
    assert_string_equal(n[0].name, "x");
    mc_engine_notifies_free(n, cnt);
    /* too large, unknown peer */
    assert_int_equal(mc_engine_notify_send(f->tcp, f->target.name, "big", f->tcp_buf, 65 * 1024),
                     MC_ERR_INVALID_ARGUMENT);
    assert_true(mc_engine_notify_send(f->tcp, "127.0.0.1:1", "x", "y", 1) < 0);
}

static void test_http_metadata(void **state) {
    fixture_t *f = *state;
    mc_http_kv_store_t *kv = NULL;
    char url[128];
    te_target_t t;
    mc_engine_t *e;
    uint8_t *buf = f->any_buf;
    mc_segment_id_t seg = -1;
    uint64_t a = 0, l = 0, shm0;
    uint8_t *val = NULL;
    size_t vlen = 0;
    assert_int_equal(mc__http_kv_store_start("127.0.0.1", 0, &kv), 0);
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/metadata", mc__http_kv_store_port(kv));
    assert_int_equal(te_target_start(&t, url, "target-http", 2 * MiB, 2 * MiB), 0);
    assert_string_equal(t.name, "target-http");
    e = new_engine(url, "initiator-http", "auto");
    assert_int_equal(mc_engine_register_memory(e, buf, LOCAL_LEN, "*"), 0);
    assert_int_equal(mc_engine_open_segment(e, "target-http", &seg), 0);
    assert_int_equal(mc_engine_segment_first_buffer(e, seg, &a, &l), 0);
    assert_true(a == t.plain_addr || a == t.managed_addr);
    shm0 = stat_tasks(e, "shm");
    for (int managed = 0; managed < 2; managed++) {
        uint64_t remote = managed ? t.managed_addr : t.plain_addr;
        te_fill(buf, MiB, 11);
        assert_int_equal(xfer(e, seg, MC_OPCODE_WRITE, buf, remote + 5, MiB), 0);
        assert_true(te_target_hash(&t, remote + 5, MiB) == te_hash(buf, MiB));
        memset(buf, 0, MiB);
        assert_int_equal(xfer(e, seg, MC_OPCODE_READ, buf, remote + 5, MiB), 0);
        assert_true(te_hash(buf, MiB) == te_pattern_hash(MiB, 11, 0));
    }
    assert_int_equal(stat_tasks(e, "shm"), shm0 + 2);
    /* published under the reference's key; removed when the engine goes */
    assert_int_equal(mc__http_kv_store_get(kv, "mooncake/ram/initiator-http", &val, &vlen), 0);
    mc__free(val);
    assert_int_equal(mc_engine_unregister_memory(e, buf), 0);
    mc_engine_destroy(e);
    assert_int_equal(mc__http_kv_store_get(kv, "mooncake/ram/initiator-http", &val, &vlen),
                     MC_ERR_METADATA);
    /* a segment nobody published */
    e = new_engine(url, "initiator-http2", "tcp");
    assert_int_equal(mc_engine_open_segment(e, "no-such-segment", &seg), MC_ERR_METADATA);
    mc_engine_destroy(e);
    assert_int_equal(te_target_stop(&t), 0);
    assert_int_equal(mc__http_kv_store_get(kv, "mooncake/ram/target-http", &val, &vlen),
                     MC_ERR_METADATA);
    mc__http_kv_store_stop(kv);
}

/* With a metadata service, "host:0" names the segment after the port actually bound, so two
 * processes asking for "127.0.0.1:0" publish two segments instead of overwriting one. */
static void test_http_port_zero_names(void **state) {
    fixture_t *f = *state;
    mc_http_kv_store_t *kv = NULL;
    char url[128], want[64];
    te_target_t t[2];
    mc_engine_t *e;
    mc_segment_id_t seg[2];
    uint8_t *buf = f->any_buf;
    int port = 0;
    assert_int_equal(mc__http_kv_store_start("127.0.0.1", 0, &kv), 0);
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/metadata", mc__http_kv_store_port(kv));
    for (int i = 0; i < 2; i++) {
        assert_int_equal(te_target_start(&t[i], url, "127.0.0.1:0", 2 * MiB, 0), 0);
        assert_int_equal(sscanf(t[i].name, "127.0.0.1:%d", &port), 1);
        assert_true(port > 0 && port < 65536);
        snprintf(want, sizeof(want), "127.0.0.1:%d", port);
        assert_string_equal(t[i].name, want);
    }
    assert_string_not_equal(t[0].name, t[1].name);
    /* an explicit port keeps the name as given; our own "127.0.0.1:0" gets its port too */
    e = new_engine(url, "127.0.0.1:0", "tcp");
    snprintf(want, sizeof(want), "127.0.0.1:%d", mc_engine_rpc_port(e));
    assert_string_equal(mc_engine_local_name(e), want);
    assert_int_equal(mc_engine_register_memory(e, buf, LOCAL_LEN, "*"), 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(mc_engine_open_segment(e, t[i].name, &seg[i]), 0);
    assert_true(seg[0] != seg[1]);
    for (int i = 0; i < 2; i++) {
        te_fill(buf + (size_t)i * MiB, MiB, 40 + (unsigned)i);
        assert_int_equal(
            xfer(e, seg[i], MC_OPCODE_WRITE, buf + (size_t)i * MiB, t[i].plain_addr, MiB), 0);
    }
    /* each write landed in its own process */
    for (int i = 0; i < 2; i++)
        assert_true(te_target_hash(&t[i], t[i].plain_addr, MiB) ==
                    te_pattern_hash(MiB, 40 + (unsigned)i, 0));
    mc_engine_destroy(e);
    for (int i = 0; i < 2; i++)
        assert_int_equal(te_target_stop(&t[i]), 0);
    mc__http_kv_store_stop(kv);
}

static void test_rdma_falls_back(void **state) {
    fixture_t *f = *state;
    mc_engine_t *e = new_engine("P2PHANDSHAKE", "127.0.0.1", "rdma");
    mc_segment_id_t seg;
    assert_string_equal(mc_engine_protocol(e), "auto");
    assert_int_equal(mc_engine_register_memory(e, f->any_buf, MiB, "*"), 0);
    assert_int_equal(mc_engine_open_segment(e, f->target.name, &seg), 0);
    te_fill(f->any_buf, MiB, 12);
    assert_int_equal(xfer(e, seg, MC_OPCODE_WRITE, f->any_buf, f->target.plain_addr, MiB), 0);
    assert_true(te_target_hash(&f->target, f->target.plain_addr, MiB) == te_hash(f->any_buf, MiB));
    mc_engine_destroy(e);
}

static void test_port_range(void **state) {
    mc_engine_t *e;
    int port;
    (void)state;
    setenv("MC_MIN_RPC_PORT", "16100", 1);
    setenv("MC_MAX_RPC_PORT", "16900", 1);
    e = new_engine(NULL, "127.0.0.1", NULL);
    port = mc_engine_rpc_port(e);
    assert_true(port >= 16100 && port <= 16900);
    {
        char want[64];
        snprintf(want, sizeof(want), "127.0.0.1:%d", port);
        assert_string_equal(mc_engine_local_name(e), want);
    }
    mc_engine_destroy(e);
    unsetenv("MC_MIN_RPC_PORT");
    unsetenv("MC_MAX_RPC_PORT");
}

/* MC_SUBMIT_CALLER_WAITS: a batch of small requests to one peer runs on the calling thread
 * (every task has ended when the submit returns), a larger one goes to the workers as a whole,
 * and either moves every byte; the flag changes nothing of what is refused. */
static void caller_waits_batch(fixture_t *f, mc_segment_id_t seg, int op, size_t n, uint64_t len,
                               unsigned seed, int inline_expected) {
    mc_request_t r[32];
    mc_batch_id_t b = 0;
    uint64_t remote = f->target.plain_addr + 3 * MiB;
    assert_true(n <= 32);
    if (op == MC_OPCODE_READ)
        assert_int_equal(te_target_fill(&f->target, remote, n * len, seed), 0);
    for (size_t i = 0; i < n; i++) {
        uint8_t *p = f->tcp_buf + 8 * MiB + i * len;
        r[i] = (mc_request_t){.opcode = op,
                              .source = p,
                              .target_id = seg,
                              .target_offset = remote + i * len,
                              .length = len};
        if (op == MC_OPCODE_WRITE)
            te_fill(p, len, seed + (unsigned)i);
        else
            memset(p, 0, len);
    }
    assert_int_equal(mc_engine_batch_alloc(f->tcp, n, &b), 0);
    assert_int_equal(mc_engine_batch_submit_ex(f->tcp, b, r, n, MC_SUBMIT_CALLER_WAITS), 0);
    if (inline_expected) /* ran before the submit returned: nothing left to wait for */
        assert_int_equal(mc_engine_batch_wait(f->tcp, b, 0), 0);
    assert_int_equal(mc_engine_batch_wait(f->tcp, b, -1), 0);
    assert_int_equal(mc_engine_batch_free(f->tcp, b), 0);
    for (size_t i = 0; i < n; i++) {
        if (op == MC_OPCODE_WRITE)
            assert_true(te_target_hash(&f->target, remote + i * len, len) ==
                        te_hash(f->tcp_buf + 8 * MiB + i * len, len));
        else
            assert_true(te_hash(f->tcp_buf + 8 * MiB + i * len, len) ==
                        te_pattern_hash(len, seed, i * len));
    }
}

static void test_caller_waits(void **state) {
    fixture_t *f = *state;
    mc_segment_id_t seg = -1;
    uint64_t tcp0 = stat_tasks(f->tcp, "tcp");
    mc_request_t r[2];
    mc_batch_id_t b = 0;
    int err[2] = {-1, -1};
    assert_int_equal(mc_engine_open_segment(f->tcp, f->target.name, &seg), 0);
    /* one pipelined group (32 x 4 KiB, 1 x 1 KiB): the caller's thread */
    caller_waits_batch(f, seg, MC_OPCODE_WRITE, 32, 4096, 600, 1);
    caller_waits_batch(f, seg, MC_OPCODE_READ, 32, 4096, 700, 1);
    caller_waits_batch(f, seg, MC_OPCODE_WRITE, 1, 1024, 800, 1);
    caller_waits_batch(f, seg, MC_OPCODE_READ, 1, 1024, 900, 1);
    /* past the pipeline bound (8 x 200 KiB) or a slice (1 x 8 MiB): the workers */
    caller_waits_batch(f, seg, MC_OPCODE_WRITE, 8, 200 * 1024, 1000, 0);
    caller_waits_batch(f, seg, MC_OPCODE_READ, 8, 200 * 1024, 1100, 0);
    caller_waits_batch(f, seg, MC_OPCODE_WRITE, 1, 8 * MiB, 1200, 0);
    caller_waits_batch(f, seg, MC_OPCODE_READ, 1, 8 * MiB, 1300, 0);
    assert_int_equal(stat_tasks(f->tcp, "tcp"), tcp0 + 32 + 32 + 1 + 1 + 8 + 8 + 1 + 1);

    /* a group with a request the target does not have: refused whole, nothing moved */
    r[0] = (mc_request_t){.opcode = MC_OPCODE_WRITE,
                          .source = f->tcp_buf,
                          .target_id = seg,
                          .target_offset = f->target.plain_addr,
                          .length = 4096};
    r[1] = r[0];
    r[1].target_offset = 8; /* no registered memory there */
    assert_int_equal(mc_engine_batch_alloc(f->tcp, 2, &b), 0);
    assert_int_equal(mc_engine_batch_submit_ex(f->tcp, b, r, 2, MC_SUBMIT_CALLER_WAITS),
                     MC_ERR_ADDRESS_NOT_REGISTERED);
    assert_int_equal(mc_engine_batch_submit_ex(f->tcp, b, r, 1, MC_SUBMIT_CALLER_WAITS | 0x80),
                     MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_engine_batch_free(f->tcp, b), 0);
    assert_int_equal(stat_tasks(f->tcp, "tcp"), tcp0 + 84);
    /* the synchronous calls take the flag too (they always wait) */
    assert_int_equal(mc_engine_transfer_sync_each_ex(f->tcp, r, 1, err, MC_SUBMIT_CALLER_WAITS), 0);
    assert_int_equal(err[0], 0);
    assert_int_equal(
        mc_engine_transfer_sync_each_ex(f->tcp, r, 1, err, MC_SUBMIT_CALLER_WAITS | 0x80),
        MC_ERR_INVALID_ARGUMENT);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tcp_sizes),
        cmocka_unit_test(test_shm_sizes),
        cmocka_unit_test(test_auto_plain_memory_uses_tcp),
        cmocka_unit_test(test_mixed_batch),
        cmocka_unit_test(test_local_segment),
        cmocka_unit_test(test_unregistered_local),
        cmocka_unit_test(test_caller_waits),
        cmocka_unit_test(test_notify),
        cmocka_unit_test(test_http_metadata),
        cmocka_unit_test(test_http_port_zero_names),
        cmocka_unit_test(test_rdma_falls_back),
        cmocka_unit_test(test_port_range),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
