/* The fabric transport over libfabric's tcp provider on loopback (MC_FABRIC_PROVIDER=tcp), against
 * te_target processes and in-process engines: READ and WRITE of many sizes checked by checksum
 * where they landed, a batch of many requests in flight, a peer killed mid-transfer, memory
 * outside a registration refused by the target's provider, fabric and tcp-only peers mixed, and
 * bad provider settings. Exits 77 (skipped) only when libfabric.so.1 cannot be loaded. */
#include <dlfcn.h>
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

#include "mooncake/common/alloc.h"
#include "mooncake/transfer_engine.h"
#include "te_internal.h"
#include "te_test_util.h"

#define MiB (1u << 20)
#define LOCAL_LEN (80u * MiB)

typedef struct fixture {
    mc_engine_t *fab; /* protocol "fabric" */
    mc_engine_t *tcp; /* protocol "tcp" */
    uint8_t *fab_buf;
    uint8_t *tcp_buf;
    te_target_t target; /* protocol "fabric" */
} fixture_t;

static mc_engine_t *new_engine(const char *proto, int timeout_ms) {
    mc_engine_t *e = NULL;
    mc_engine_options_t o = {.local_server_name = "127.0.0.1",
                             .metadata_conn = "P2PHANDSHAKE",
                             .protocol = proto,
                             .transfer_timeout_ms = timeout_ms};
    assert_int_equal(mc_engine_create(&e), 0);
    assert_int_equal(mc_engine_init(e, &o), 0);
    return e;
}

static int setup(void **state) {
    fixture_t *f = calloc(1, sizeof(*f));
    f->fab = new_engine("fabric", 0);
    f->tcp = new_engine("tcp", 0);
    f->fab_buf = aligned_alloc(4096, LOCAL_LEN);
    f->tcp_buf = aligned_alloc(4096, LOCAL_LEN);
    assert_int_equal(mc_engine_register_memory(f->fab, f->fab_buf, LOCAL_LEN, "cpu:0"), 0);
    assert_int_equal(mc_engine_register_memory(f->tcp, f->tcp_buf, LOCAL_LEN, "cpu:0"), 0);
    assert_int_equal(
        te_target_start_ex(&f->target, "P2PHANDSHAKE", NULL, "fabric", 72 * MiB, 72 * MiB, 0), 0);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture_t *f = *state;
    int rc = te_target_stop(&f->target);
    mc_engine_destroy(f->fab);
    mc_engine_destroy(f->tcp);
    free(f->fab_buf);
    free(f->tcp_buf);
    free(f);
    return rc == 0 ? 0 : -1;
}

static mc_request_t req(int op, void *src, mc_segment_id_t seg, uint64_t off, uint64_t len) {
    mc_request_t r = {
        .opcode = op, .source = src, .target_id = seg, .target_offset = off, .length = len};
    return r;
}

static int xfer(mc_engine_t *e, mc_segment_id_t seg, int op, void *local, uint64_t remote,
                uint64_t len) {
    mc_request_t r = req(op, local, seg, remote, len);
    return mc_engine_transfer_sync(e, &r, 1);
}

static uint64_t stat_tasks(mc_engine_t *e, const char *tp) {
    uint64_t t = 0;
    assert_int_equal(mc_engine_get_stats(e, tp, &t, NULL), 0);
    return t;
}

/* WRITE then READ of each size against one remote buffer, checked where the bytes landed. */
static void roundtrip(mc_engine_t *e, uint8_t *buf, te_target_t *t, uint64_t remote) {
    static const uint64_t sizes[] = {1, 1024, 65537, MiB, 3 * MiB + 5, 64 * MiB};
    mc_segment_id_t seg = -1;
    assert_int_equal(mc_engine_open_segment(e, t->name, &seg), 0);
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        uint64_t n = sizes[i];
        uint64_t off = 4097 * (i + 1); /* odd: nothing may depend on alignment */
        te_fill(buf, n, 300 + (unsigned)i);
        assert_int_equal(xfer(e, seg, MC_OPCODE_WRITE, buf, remote + off, n), 0);
        assert_true(te_target_hash(t, remote + off, n) == te_hash(buf, n));
        assert_int_equal(te_target_fill(t, remote, n + off, 400 + (unsigned)i), 0);
        memset(buf, 0, n);
        assert_int_equal(xfer(e, seg, MC_OPCODE_READ, buf, remote + off, n), 0);
        assert_true(te_hash(buf, n) == te_pattern_hash(n, 400 + (unsigned)i, off));
    }
}

static void test_sizes_over_fabric(void **state) {
    fixture_t *f = *state;
    uint64_t fab0 = stat_tasks(f->fab, "fabric"), tcp0 = stat_tasks(f->fab, "tcp");
    uint64_t shm0 = stat_tasks(f->fab, "shm");
    assert_string_equal(mc_engine_protocol(f->fab), "fabric");
    roundtrip(f->fab, f->fab_buf, &f->target, f->target.plain_addr);
    /* protocol "fabric" takes same-host managed memory too (shm is not asked) */
    roundtrip(f->fab, f->fab_buf, &f->target, f->target.managed_addr);
    assert_int_equal(stat_tasks(f->fab, "fabric"), fab0 + 24);
    assert_int_equal(stat_tasks(f->fab, "tcp"), tcp0);
    assert_int_equal(stat_tasks(f->fab, "shm"), shm0);
}

/* One batch of many requests (READ and WRITE, sizes cut into several chunks or not) in flight at
 * once; every task completes and every byte is where it should be. */
static void test_many_in_flight(void **state) {
    fixture_t *f = *state;
    enum { N = 128 };
    static const uint64_t sizes[] = {1, 7, 4096, 65537, MiB + 3, 333333, MiB};
    mc_request_t r[N];
    uint64_t loff[N], roff[N], lat = 0, rat = 0;
    mc_segment_id_t seg;
    mc_batch_id_t b;
    uint64_t fab0 = stat_tasks(f->fab, "fabric");
    assert_int_equal(mc_engine_open_segment(f->fab, f->target.name, &seg), 0);
    /* READ sources: the target's plain buffer with a known pattern */
    assert_int_equal(te_target_fill(&f->target, f->target.plain_addr, 72 * MiB, 77), 0);
    te_fill(f->fab_buf, LOCAL_LEN, 78);
    for (int i = 0; i < N; i++) {
        uint64_t n = sizes[i % 7];
        int write = i % 2;
        loff[i] = lat;
        roff[i] = rat;
        lat += n + 11;
        rat += n + 13;
        assert_true(lat < LOCAL_LEN && rat < 72 * MiB);
        r[i] = req(write ? MC_OPCODE_WRITE : MC_OPCODE_READ, f->fab_buf + loff[i], seg,
                   (write ? f->target.managed_addr : f->target.plain_addr) + roff[i], n);
    }
    assert_int_equal(mc_engine_batch_alloc(f->fab, N, &b), 0);
    assert_int_equal(mc_engine_batch_submit(f->fab, b, r, N), 0);
    assert_int_equal(mc_engine_batch_wait(f->fab, b, 60000), 0);
    assert_int_equal(mc_engine_batch_free(f->fab, b), 0);
    for (int i = 0; i < N; i++) {
        if (r[i].opcode == MC_OPCODE_WRITE)
            assert_true(te_target_hash(&f->target, r[i].target_offset, r[i].length) ==
                        te_hash(f->fab_buf + loff[i], r[i].length));
        else
            assert_true(te_hash(f->fab_buf + loff[i], r[i].length) ==
                        te_pattern_hash(r[i].length, 77, roff[i]));
    }
    assert_int_equal(stat_tasks(f->fab, "fabric"), fab0 + N);
}

/* What a WRITE's completion means: the store follows one with a put_end that makes the object
 * readable, so every byte must be in the target's memory when the initiator sees it complete
 * (libfabric's default, transmit complete, says only that the bytes left: over tcp they may still
 * sit in a socket buffer). The target is an engine in this process, so its memory is checked at
 * the instant the write returns, with nothing in between that could give it time; a write of
 * several chunks, each of which must have landed. Each round writes a new pattern over the last.
 * Under ThreadSanitizer a completion before delivery is also reported as a race: nothing would
 * order the target's progress thread, which places the bytes, before this thread's check. */
static void test_write_completion_means_delivered(void **state) {
    fixture_t *f = *state;
    enum { ROUNDS = 24, LEN = 8 * MiB + 4097, MEM = 2 * LEN / 4096 * 4096 + 8192 };
    mc_engine_t *target = new_engine("fabric", 0);
    uint8_t *mem = aligned_alloc(4096, MEM);
    mc_segment_id_t seg;
    uint64_t fab0 = stat_tasks(f->fab, "fabric");
    int late = 0, first_late = -1;
    size_t first_byte = 0;
    memset(mem, 0, MEM);
    assert_int_equal(mc_engine_register_memory(target, mem, MEM, "cpu:0"), 0);
    assert_int_equal(mc_engine_open_segment(f->fab, mc_engine_local_name(target), &seg), 0);
    for (int i = 0; i < ROUNDS; i++) {
        uint8_t *dst = mem + (size_t)(i % 2) * LEN + 4096 - (size_t)(i % 3); /* odd places too */
        te_fill(f->fab_buf, LEN, 1000 + (unsigned)i);
        assert_int_equal(
            xfer(f->fab, seg, MC_OPCODE_WRITE, f->fab_buf, (uint64_t)(uintptr_t)dst, LEN), 0);
        if (memcmp(dst, f->fab_buf, LEN)) { /* the check, at once: then find where */
            size_t b = 0;
            while (b < LEN && dst[b] == f->fab_buf[b])
                b++;
            if (!late++) {
                first_late = i;
                first_byte = b;
            }
        }
    }
    if (late)
        fail_msg("%d of %d writes completed before their bytes were in place (first: round %d, "
                 "byte %zu of %d)",
                 late, ROUNDS, first_late, first_byte, (int)LEN);
    assert_int_equal(stat_tasks(f->fab, "fabric"), fab0 + ROUNDS);
    mc_engine_destroy(target);
    free(mem);
}

/* A fabric initiator and a tcp-only peer transfer over tcp, both ways round. */
static void test_mixed_fabric_and_tcp_peers(void **state) {
    fixture_t *f = *state;
    te_target_t tcp_only;
    mc_segment_id_t seg;
    uint64_t fab0 = stat_tasks(f->fab, "fabric"), tcp0 = stat_tasks(f->fab, "tcp");
    assert_int_equal(te_target_start_ex(&tcp_only, "P2PHANDSHAKE", NULL, "tcp", 72 * MiB, 0, 0), 0);
    roundtrip(f->fab, f->fab_buf, &tcp_only, tcp_only.plain_addr);
    assert_int_equal(stat_tasks(f->fab, "fabric"), fab0);
    assert_int_equal(stat_tasks(f->fab, "tcp"), tcp0 + 12);
    assert_int_equal(te_target_stop(&tcp_only), 0);

    /* a tcp engine against the fabric target */
    tcp0 = stat_tasks(f->tcp, "tcp");
    roundtrip(f->tcp, f->tcp_buf, &f->target, f->target.plain_addr);
    assert_int_equal(stat_tasks(f->tcp, "tcp"), tcp0 + 12);
    assert_int_equal(stat_tasks(f->tcp, "fabric"), 0);

    /* the fabric target reaches a tcp engine over tcp too (the target's own initiator side) */
    assert_int_equal(mc_engine_open_segment(f->fab, mc_engine_local_name(f->tcp), &seg), 0);
    te_fill(f->fab_buf, MiB, 91);
    tcp0 = stat_tasks(f->fab, "tcp");
    assert_int_equal(
        xfer(f->fab, seg, MC_OPCODE_WRITE, f->fab_buf, (uint64_t)(uintptr_t)f->tcp_buf, MiB), 0);
    assert_true(te_hash(f->tcp_buf, MiB) == te_hash(f->fab_buf, MiB));
    assert_int_equal(stat_tasks(f->fab, "tcp"), tcp0 + 1);
}

/* The initiator's view of the target claims more memory than the target registered (a forged or
 * corrupted descriptor): the target's provider refuses the access, the task fails, and the bytes
 * past the registration are untouched. The real descriptor is fetched again afterwards. */
static void test_outside_registration_refused(void **state) {
    fixture_t *f = *state;
    enum { REG = 2 * MiB, ALL = 4 * MiB };
    mc_engine_t *target = new_engine("fabric", 5000);
    uint8_t *mem = aligned_alloc(4096, ALL);
    mc_segment_id_t seg;
    mc__peer_t *p;
    int rc;
    memset(mem, 0x5a, ALL);
    assert_int_equal(mc_engine_register_memory(target, mem, REG, "cpu:0"), 0);
    assert_int_equal(mc_engine_open_segment(f->fab, mc_engine_local_name(target), &seg), 0);
    /* a write inside the registration goes through */
    te_fill(f->fab_buf, MiB, 5);
    assert_int_equal(
        xfer(f->fab, seg, MC_OPCODE_WRITE, f->fab_buf, (uint64_t)(uintptr_t)mem + MiB, MiB), 0);
    assert_true(te_hash(mem + MiB, MiB) == te_hash(f->fab_buf, MiB));
    /* the initiator's own check refuses what the descriptor does not hold */
    assert_int_equal(
        xfer(f->fab, seg, MC_OPCODE_WRITE, f->fab_buf, (uint64_t)(uintptr_t)mem + REG, MiB),
        MC_ERR_ADDRESS_NOT_REGISTERED);
    /* forge the cached descriptor: the buffer "is" ALL bytes long */
    p = mc__peer_get(f->fab, seg);
    assert_non_null(p);
    pthread_mutex_lock(&p->lock);
    assert_int_equal(p->desc->nbufs, 1);
    p->desc->bufs[0].len = ALL;
    pthread_mutex_unlock(&p->lock);
    te_fill(f->fab_buf, 2 * MiB, 6);
    rc = xfer(f->fab, seg, MC_OPCODE_WRITE, f->fab_buf, (uint64_t)(uintptr_t)mem + REG - 4096,
              2 * MiB);
    assert_true(rc < 0);
    for (size_t i = REG; i < ALL; i++)
        if (mem[i] != 0x5a)
            fail_msg("byte %zu past the registration was written", i);
    /* reads past it are refused as well (the peer was marked for a re-fetch: forge again) */
    pthread_mutex_lock(&p->lock);
    p->desc->bufs[0].len = ALL;
    p->stale = 0;
    pthread_mutex_unlock(&p->lock);
    rc = xfer(f->fab, seg, MC_OPCODE_READ, f->fab_buf, (uint64_t)(uintptr_t)mem + REG, MiB);
    assert_true(rc < 0);
    /* the real descriptor again: inside the registration it works */
    pthread_mutex_lock(&p->lock);
    p->stale = 1;
    pthread_mutex_unlock(&p->lock);
    te_fill(f->fab_buf, MiB, 7);
    assert_int_equal(xfer(f->fab, seg, MC_OPCODE_WRITE, f->fab_buf, (uint64_t)(uintptr_t)mem, MiB),
                     0);
    assert_true(te_hash(mem, MiB) == te_hash(f->fab_buf, MiB));
    /* memory unregistered on the target is refused there too, even with the old key cached */
    pthread_mutex_lock(&p->lock);
    p->stale = 0;
    pthread_mutex_unlock(&p->lock);
    assert_int_equal(mc_engine_unregister_memory(target, mem), 0);
    memset(mem, 0x5a, ALL);
    pthread_mutex_lock(&p->lock);
    p->stale = 0; /* keep the cached descriptor and its old key */
    pthread_mutex_unlock(&p->lock);
    rc = xfer(f->fab, seg, MC_OPCODE_WRITE, f->fab_buf, (uint64_t)(uintptr_t)mem, MiB);
    assert_true(rc < 0);
    for (size_t i = 0; i < ALL; i++)
        if (mem[i] != 0x5a)
            fail_msg("byte %zu of unregistered memory was written", i);
    mc_engine_destroy(target);
    free(mem);
}

/* SIGKILL mid-transfer: the tasks end (FAILED or TIMEOUT) within their deadline, the engine keeps
 * serving another fabric peer, and a peer restarted under the same name is reachable again. */
static void test_peer_killed(void **state) {
    fixture_t *f = *state;
    enum { N = 8 };
    te_target_t victim;
    mc_segment_id_t vseg, oseg, vseg2;
    mc_batch_id_t b;
    mc_request_t r[N];
    mc_task_state_t st;
    uint64_t t0, a = 0, l = 0;
    char name[256];
    int failed = 0, rc;
    mc_engine_t *e = new_engine("fabric", 4000);
    assert_int_equal(mc_engine_register_memory(e, f->fab_buf, LOCAL_LEN, "*"), 0);
    assert_int_equal(te_target_start_ex(&victim, "P2PHANDSHAKE", NULL, "fabric", 64 * MiB, 0, 0),
                     0);
    assert_int_equal(mc_engine_open_segment(e, victim.name, &vseg), 0);
    assert_int_equal(mc_engine_open_segment(e, f->target.name, &oseg), 0);
    /* connected first, then frozen so that the writes are certainly in flight when it dies */
    assert_int_equal(xfer(e, vseg, MC_OPCODE_WRITE, f->fab_buf, victim.plain_addr, 4096), 0);
    kill(victim.pid, SIGSTOP);
    for (int i = 0; i < N; i++)
        r[i] = req(MC_OPCODE_WRITE, f->fab_buf, vseg, victim.plain_addr, 64 * MiB);
    assert_int_equal(mc_engine_batch_alloc(e, N, &b), 0);
    assert_int_equal(mc_engine_batch_submit(e, b, r, N), 0);
    usleep(200000);
    assert_int_equal(mc_engine_task_status(e, b, 0, &st), 0);
    assert_true(st.status == MC_STATUS_PENDING || st.status == MC_STATUS_WAITING);
    te_target_kill(&victim);
    t0 = te_now_ms();
    rc = mc_engine_batch_wait(e, b, 10000);
    assert_true(rc < 0 && rc != MC_ERR_BATCH_BUSY);
    /* the provider reports the dead connection and the RPC port refuses: at once, not at the
     * 4 s deadline */
    assert_true(te_now_ms() - t0 < 2500);
    for (int i = 0; i < N; i++) {
        assert_int_equal(mc_engine_task_status(e, b, (size_t)i, &st), 0);
        assert_true(st.status == MC_STATUS_FAILED || st.status == MC_STATUS_TIMEOUT);
        failed++;
    }
    assert_int_equal(failed, N);
    assert_int_equal(mc_engine_batch_free(e, b), 0);

    /* the dead peer fails; the other one works, over fabric */
    assert_true(xfer(e, vseg, MC_OPCODE_WRITE, f->fab_buf, victim.plain_addr, 64) < 0);
    te_fill(f->fab_buf, MiB, 4);
    assert_int_equal(xfer(e, oseg, MC_OPCODE_WRITE, f->fab_buf, f->target.plain_addr, MiB), 0);
    assert_true(te_target_hash(&f->target, f->target.plain_addr, MiB) == te_hash(f->fab_buf, MiB));
    assert_true(stat_tasks(e, "fabric") >= 2);
    assert_int_equal(stat_tasks(e, "tcp"), 0);

    /* restarted under the same name (same RPC port, a new fabric address and keys) */
    snprintf(name, sizeof(name), "%s", victim.name);
    assert_int_equal(te_target_start_ex(&victim, "P2PHANDSHAKE", name, "fabric", 2 * MiB, 0, 0), 0);
    assert_int_equal(mc_engine_open_segment(e, name, &vseg2), 0);
    assert_int_equal(vseg2, vseg);
    assert_int_equal(mc_engine_segment_first_buffer(e, vseg2, &a, &l), 0);
    te_fill(f->fab_buf, 2 * MiB, 5);
    assert_int_equal(xfer(e, vseg2, MC_OPCODE_WRITE, f->fab_buf, a, 2 * MiB), 0);
    assert_true(te_target_hash(&victim, a, 2 * MiB) == te_hash(f->fab_buf, 2 * MiB));
    assert_int_equal(stat_tasks(e, "tcp"), 0);
    assert_int_equal(te_target_stop(&victim), 0);
    mc_engine_destroy(e);
}

/* Wrong settings: a provider that does not exist fails protocol "fabric" with a clear code and
 * lets "rdma" fall back to tcp/shm; bad tunables are ignored with a warning. */
static void test_bad_settings(void **state) {
    fixture_t *f = *state;
    mc_engine_t *e = NULL;
    mc_segment_id_t seg;
    mc_engine_options_t o = {
        .local_server_name = "127.0.0.1", .metadata_conn = "P2PHANDSHAKE", .protocol = "fabric"};
    setenv("MC_FABRIC_PROVIDER", "no-such-provider", 1);
    assert_int_equal(mc_engine_create(&e), 0);
    assert_int_equal(mc_engine_init(e, &o), MC_ERR_DEVICE_NOT_FOUND);
    mc_engine_destroy(e);
    e = new_engine("rdma", 0);
    assert_string_equal(mc_engine_protocol(e), "auto");
    mc_engine_destroy(e);
    setenv("MC_FABRIC_PROVIDER", "tcp", 1);
    /* rdma with a provider up is the fabric transport */
    e = new_engine("rdma", 0);
    assert_string_equal(mc_engine_protocol(e), "rdma");
    mc_engine_destroy(e);
    setenv("MC_FABRIC_CHUNK", "lots", 1);
    setenv("MC_FABRIC_INFLIGHT", "0", 1);
    e = new_engine("fabric", 0);
    unsetenv("MC_FABRIC_CHUNK");
    unsetenv("MC_FABRIC_INFLIGHT");
    assert_int_equal(mc_engine_register_memory(e, f->fab_buf, 4 * MiB, "*"), 0);
    assert_int_equal(mc_engine_open_segment(e, f->target.name, &seg), 0);
    te_fill(f->fab_buf, 3 * MiB, 8);
    assert_int_equal(xfer(e, seg, MC_OPCODE_WRITE, f->fab_buf, f->target.plain_addr, 3 * MiB), 0);
    assert_true(te_target_hash(&f->target, f->target.plain_addr, 3 * MiB) ==
                te_hash(f->fab_buf, 3 * MiB));
    assert_int_equal(stat_tasks(e, "fabric"), 1);
    mc_engine_destroy(e);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes_over_fabric),
        cmocka_unit_test(test_many_in_flight),
        cmocka_unit_test(test_write_completion_means_delivered),
        cmocka_unit_test(test_mixed_fabric_and_tcp_peers),
        cmocka_unit_test(test_outside_registration_refused),
        cmocka_unit_test(test_peer_killed),
        cmocka_unit_test(test_bad_settings),
    };
    void *h = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);
#ifndef MC_HAVE_LIBFABRIC
    if (h)
        fprintf(stderr, "libfabric.so.1 is installed but this build has no fabric transport "
                        "(libfabric's headers were missing at build time)\n");
    return h ? 1 : 77;
#endif
    if (!h) {
        fprintf(stderr, "skipped: libfabric.so.1 is not installed (Debian: libfabric1)\n");
        return 77;
    }
    dlclose(h);
    setenv("MC_FABRIC_PROVIDER", "tcp", 1); /* te_target children inherit it */
    return cmocka_run_group_tests(tests, setup, teardown);
}
