/* Device memory through the staging pipeline (devmem.h), on any host: both engines run with the
 * fake device-memory backend (MC_DEVMEM=fake, devmem_fake.c), whose "GPU memory" is host memory
 * that only its copies may touch and that it counts. Two engines in this process talk over real
 * loopback sockets (tcp) and shared memory (shm); checked byte for byte: device to host, host to
 * device, device to device, on tcp, shm and within one engine; the slices each copy moves (the
 * bounds of the pipeline); a copy failing in the middle of one transfer fails that transfer
 * alone; a device range that runs off its allocation, an unknown device, and staging buffers
 * given back at close. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <cmocka.h>

#include "devmem_fake.h"
#include "mooncake/error.h"
#include "mooncake/transfer_engine.h"
#include "te_test_util.h"

#define KiB (1u << 10)
#define MiB (1u << 20)
#define SLICE MiB /* the initiator's MC_SLICE_SIZE: many slices per transfer */
#define DEV_LEN (24 * MiB)
#define HOST_LEN (24 * MiB)

typedef struct fx {
    mc_engine_t *a, *b; /* a initiates; b is the target */
    uint8_t *a_dev, *a_host, *b_dev, *b_host, *b_managed;
    mc_segment_id_t seg; /* b, as a sees it */
} fx_t;

static uint8_t *map(size_t len) {
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(p != MAP_FAILED);
    return p;
}

static mc_engine_t *engine(const char *proto) {
    mc_engine_t *e = NULL;
    mc_engine_options_t o = {
        .local_server_name = "127.0.0.1", .protocol = proto, .transfer_timeout_ms = 30000};
    assert_int_equal(mc_engine_create(&e), 0);
    assert_int_equal(mc_engine_init(e, &o), 0);
    return e;
}

/* a over proto ("tcp" or "auto": shm for b's managed buffer) to b; "GPU 0" memory on a, "GPU 1"
 * on b. */
static void fx_start(fx_t *f, const char *proto) {
    memset(f, 0, sizeof(*f));
    f->b = engine("tcp");
    setenv("MC_SLICE_SIZE", "1048576", 1);
    f->a = engine(proto);
    unsetenv("MC_SLICE_SIZE");
    f->a_dev = map(DEV_LEN);
    f->a_host = map(HOST_LEN);
    f->b_dev = map(DEV_LEN);
    f->b_host = map(HOST_LEN);
    assert_int_equal(mc_engine_register_memory(f->a, f->a_dev, DEV_LEN, "cuda:0"), 0);
    assert_int_equal(mc_engine_register_memory(f->a, f->a_host, HOST_LEN, "cpu:0"), 0);
    assert_int_equal(mc_engine_register_memory(f->b, f->b_dev, DEV_LEN, "cuda:1"), 0);
    assert_int_equal(mc_engine_register_memory(f->b, f->b_host, HOST_LEN, "cpu:0"), 0);
    assert_int_equal(mc_engine_alloc_managed(f->b, 8 * MiB, (void **)&f->b_managed), 0);
    assert_int_equal(mc_engine_open_segment(f->a, mc_engine_local_name(f->b), &f->seg), 0);
    mc__devmem_fake_reset_stats();
}

static void fx_stop(fx_t *f) {
    mc__devmem_fake_stats_t st;
    mc_engine_destroy(f->a);
    mc_engine_destroy(f->b);
    munmap(f->a_dev, DEV_LEN);
    munmap(f->a_host, HOST_LEN);
    munmap(f->b_dev, DEV_LEN);
    munmap(f->b_host, HOST_LEN);
    mc__devmem_fake_stats(&st);
    assert_int_equal(st.pinned_live, 0); /* every staging buffer went back */
    /* the registrations' device ranges went with them: that memory is host memory again */
    assert_int_equal(mc__devmem_fake_add(f->a_dev, 1, 0), 0);
    mc__devmem_fake_remove(f->a_dev);
}

static mc_request_t rq(int op, void *src, mc_segment_id_t seg, const void *dst, uint64_t len) {
    mc_request_t r = {.opcode = op,
                      .source = src,
                      .target_id = seg,
                      .target_offset = (uint64_t)(uintptr_t)dst,
                      .length = len};
    return r;
}

static void sync_ok(mc_engine_t *e, mc_request_t r) {
    int err = -1;
    assert_int_equal(mc_engine_transfer_sync_each(e, &r, 1, &err), 0);
    assert_int_equal(err, 0);
}

static const uint64_t sizes[] = {1, 4097, SLICE, SLICE + 3, 9 * MiB + 5};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static uint64_t slices(uint64_t len) {
    return (len + SLICE - 1) / SLICE;
}

/* a's GPU memory to and from b's host memory over tcp: one copy per slice, none larger. */
static void test_tcp_device_initiator(void **state) {
    fx_t f;
    (void)state;
    fx_start(&f, "tcp");
    for (size_t i = 0; i < NSIZES; i++) {
        uint64_t len = sizes[i];
        mc__devmem_fake_stats_t st;
        te_fill(f.a_dev, len, 10 + (unsigned)i);
        memset(f.b_host, 0, len + 1);
        mc__devmem_fake_reset_stats();
        sync_ok(f.a, rq(MC_OPCODE_WRITE, f.a_dev, f.seg, f.b_host, len));
        assert_int_equal(te_hash(f.b_host, len), te_pattern_hash(len, 10 + (unsigned)i, 0));
        assert_int_equal(f.b_host[len], 0); /* not a byte more */
        mc__devmem_fake_stats(&st);
        assert_int_equal(st.to_host, slices(len));
        assert_int_equal(st.to_host_bytes, len);
        assert_true(st.largest_copy <= SLICE);
        assert_int_equal(st.from_host, 0);

        te_fill(f.b_host + HOST_LEN / 2, len, 20 + (unsigned)i);
        memset(f.a_dev + DEV_LEN / 2, 0, len + 1);
        mc__devmem_fake_reset_stats();
        sync_ok(f.a,
                rq(MC_OPCODE_READ, f.a_dev + DEV_LEN / 2, f.seg, f.b_host + HOST_LEN / 2, len));
        assert_int_equal(te_hash(f.a_dev + DEV_LEN / 2, len),
                         te_pattern_hash(len, 20 + (unsigned)i, 0));
        assert_int_equal(f.a_dev[DEV_LEN / 2 + len], 0);
        mc__devmem_fake_stats(&st);
        assert_int_equal(st.from_host, slices(len));
        assert_int_equal(st.from_host_bytes, len);
        assert_true(st.largest_copy <= SLICE);
        assert_int_equal(st.to_host, 0);
        assert_int_equal(st.syncs, 0); /* from pinned staging: complete when the copy returns */
    }
    /* host memory on both sides: the hook is never asked to copy */
    {
        mc__devmem_fake_stats_t st;
        mc__devmem_fake_reset_stats();
        te_fill(f.a_host, 3 * MiB, 7);
        sync_ok(f.a, rq(MC_OPCODE_WRITE, f.a_host, f.seg, f.b_host, 3 * MiB));
        assert_int_equal(te_hash(f.b_host, 3 * MiB), te_pattern_hash(3 * MiB, 7, 0));
        mc__devmem_fake_stats(&st);
        assert_int_equal(st.to_host + st.from_host, 0);
        assert_int_equal(st.pinned_allocs, 0);
    }
    fx_stop(&f);
}

/* WRITE len bytes of pattern seed from src to b's dst, then READ them back into back: both
 * byte for byte. */
static void write_read(const fx_t *f, uint8_t *src, uint8_t *dst, uint8_t *back, uint64_t len,
                       unsigned seed) {
    te_fill(src, len, seed);
    sync_ok(f->a, rq(MC_OPCODE_WRITE, src, f->seg, dst, len));
    assert_int_equal(te_hash(dst, len), te_pattern_hash(len, seed, 0));
    memset(back, 0, len);
    sync_ok(f->a, rq(MC_OPCODE_READ, back, f->seg, dst, len));
    assert_int_equal(te_hash(back, len), te_pattern_hash(len, seed, 0));
}

/* b's GPU memory as the target: its server stages WRITEs in chunks and READs whole; and GPU to
 * GPU across the two engines. */
static void test_tcp_device_target(void **state) {
    fx_t f;
    mc__devmem_fake_stats_t st;
    (void)state;
    fx_start(&f, "tcp");
    for (size_t i = 0; i < NSIZES; i++) {
        mc__devmem_fake_reset_stats();
        write_read(&f, f.a_host, f.b_dev, f.a_host + HOST_LEN / 2, sizes[i], 30 + (unsigned)i);
        mc__devmem_fake_stats(&st);
        assert_int_equal(st.from_host_bytes, sizes[i]); /* the server's copies into its GPU */
        assert_int_equal(st.to_host_bytes, sizes[i]);   /* and out of it */
        assert_true(st.largest_copy <= MiB); /* its WRITE chunk; a READ is one 1 MiB slice */
        /* GPU 0 of a to GPU 1 of b and back */
        write_read(&f, f.a_dev, f.b_dev + DEV_LEN / 2, f.a_dev + DEV_LEN / 2, sizes[i],
                   40 + (unsigned)i);
    }
    fx_stop(&f);
}

/* shm to b's managed (host) buffer, and copies within one engine: the hook copies the device
 * side directly. */
static void test_shm_and_local(void **state) {
    fx_t f;
    uint64_t tasks0 = 0, bytes0 = 0, tasks1 = 0, bytes1 = 0;
    mc__devmem_fake_stats_t st;
    const uint64_t len = 5 * MiB + 7;
    (void)state;
    fx_start(&f, "auto");
    assert_int_equal(mc_engine_get_stats(f.a, "shm", &tasks0, &bytes0), 0);
    te_fill(f.a_dev, len, 50);
    sync_ok(f.a, rq(MC_OPCODE_WRITE, f.a_dev, f.seg, f.b_managed, len));
    assert_int_equal(te_hash(f.b_managed, len), te_pattern_hash(len, 50, 0));
    memset(f.a_dev + DEV_LEN / 2, 0, len);
    sync_ok(f.a, rq(MC_OPCODE_READ, f.a_dev + DEV_LEN / 2, f.seg, f.b_managed, len));
    assert_int_equal(te_hash(f.a_dev + DEV_LEN / 2, len), te_pattern_hash(len, 50, 0));
    assert_int_equal(mc_engine_get_stats(f.a, "shm", &tasks1, &bytes1), 0);
    assert_int_equal(tasks1 - tasks0, 2); /* both went over shm */
    mc__devmem_fake_stats(&st);
    assert_int_equal(st.to_host_bytes, len);
    assert_int_equal(st.from_host_bytes, len);
    /* the READ copied from pageable (shared) memory: the device was synchronised after it */
    assert_int_equal(st.syncs, 1);

    /* within a: device to host, host to device, device to device (overlapping, as memmove) */
    te_fill(f.a_dev, 3 * MiB, 51);
    sync_ok(f.a, rq(MC_OPCODE_WRITE, f.a_dev, MC_LOCAL_SEGMENT_ID, f.a_host, 3 * MiB));
    assert_int_equal(te_hash(f.a_host, 3 * MiB), te_pattern_hash(3 * MiB, 51, 0));
    te_fill(f.a_host, 3 * MiB, 52);
    sync_ok(f.a, rq(MC_OPCODE_READ, f.a_dev + 8 * MiB, MC_LOCAL_SEGMENT_ID, f.a_host, 3 * MiB));
    assert_int_equal(te_hash(f.a_dev + 8 * MiB, 3 * MiB), te_pattern_hash(3 * MiB, 52, 0));
    te_fill(f.a_dev, 3 * MiB, 53);
    sync_ok(f.a, rq(MC_OPCODE_WRITE, f.a_dev, MC_LOCAL_SEGMENT_ID, f.a_dev + MiB / 2, 3 * MiB));
    assert_int_equal(te_hash(f.a_dev + MiB / 2, 3 * MiB), te_pattern_hash(3 * MiB, 53, 0));
    /* and the store's local copy (mc_engine_local_copy) with a device buffer */
    te_fill(f.a_host, 2 * MiB, 54);
    assert_int_equal(mc_engine_local_copy(f.a, MC_OPCODE_READ, f.a_dev + 16 * MiB,
                                          (uint64_t)(uintptr_t)f.a_host, 2 * MiB, 0),
                     0);
    assert_int_equal(te_hash(f.a_dev + 16 * MiB, 2 * MiB), te_pattern_hash(2 * MiB, 54, 0));
    fx_stop(&f);
}

static int status_of(mc_engine_t *e, mc_batch_id_t b, size_t i, int *err) {
    mc_task_state_t s;
    assert_int_equal(mc_engine_task_status(e, b, i, &s), 0);
    *err = s.error;
    return s.status;
}

/* A copy failing in the middle of a transfer: that transfer fails with the copy's code, the
 * others in its batch complete, byte for byte, and the engine carries on. */
static void test_copy_failure_mid_transfer(void **state) {
    fx_t f;
    mc_batch_id_t b;
    int err;
    const uint64_t len = 9 * MiB;
    (void)state;
    fx_start(&f, "tcp");
    /* initiator side, D2H: slice 5 of request 0 carries the marker */
    te_fill(f.a_dev, len, 60);
    memcpy(f.a_dev + 5 * SLICE, MC__DEVMEM_FAKE_MARKER, sizeof(MC__DEVMEM_FAKE_MARKER) - 1);
    te_fill(f.a_dev + 12 * MiB, 2 * MiB, 61);
    {
        mc_request_t r[2] = {
            rq(MC_OPCODE_WRITE, f.a_dev, f.seg, f.b_host, len),
            rq(MC_OPCODE_WRITE, f.a_dev + 12 * MiB, f.seg, f.b_host + 12 * MiB, 2 * MiB)};
        assert_int_equal(mc_engine_batch_alloc(f.a, 4, &b), 0);
        assert_int_equal(mc_engine_batch_submit(f.a, b, r, 2), 0);
        assert_int_equal(mc_engine_batch_wait(f.a, b, -1), MC_ERR_MEMORY);
        assert_int_equal(status_of(f.a, b, 0, &err), MC_STATUS_FAILED);
        assert_int_equal(err, MC_ERR_MEMORY);
        assert_int_equal(status_of(f.a, b, 1, &err), MC_STATUS_COMPLETED);
        assert_int_equal(mc_engine_batch_free(f.a, b), 0);
        assert_int_equal(te_hash(f.b_host + 12 * MiB, 2 * MiB), te_pattern_hash(2 * MiB, 61, 0));
    }
    /* initiator side, H2D: the third copy to the device fails */
    te_fill(f.b_host, 4 * MiB, 62);
    mc__devmem_fake_fail_after(2);
    {
        int e2 = -1;
        mc_request_t r = rq(MC_OPCODE_READ, f.a_dev, f.seg, f.b_host, 4 * MiB);
        assert_int_equal(mc_engine_transfer_sync_each(f.a, &r, 1, &e2), MC_ERR_MEMORY);
        assert_int_equal(e2, MC_ERR_MEMORY);
    }
    mc__devmem_fake_fail_after(-1);
    /* target side: b's copy into its GPU fails; the error comes back as the task's, and the
     * connection stays usable */
    te_fill(f.a_host, 3 * MiB, 63);
    memcpy(f.a_host + 2 * MiB, MC__DEVMEM_FAKE_MARKER, sizeof(MC__DEVMEM_FAKE_MARKER) - 1);
    {
        int e2 = -1;
        mc_request_t r = rq(MC_OPCODE_WRITE, f.a_host, f.seg, f.b_dev, 3 * MiB);
        mc_engine_transfer_sync_each(f.a, &r, 1, &e2);
        assert_int_equal(e2, MC_ERR_MEMORY);
    }
    /* target side READ: b's copy out of its GPU fails (marked source) */
    te_fill(f.b_dev + 4 * MiB, MiB, 64);
    memcpy(f.b_dev + 4 * MiB + 64 * KiB, MC__DEVMEM_FAKE_MARKER,
           sizeof(MC__DEVMEM_FAKE_MARKER) - 1);
    {
        int e2 = -1;
        mc_request_t r = rq(MC_OPCODE_READ, f.a_host, f.seg, f.b_dev + 4 * MiB, MiB);
        mc_engine_transfer_sync_each(f.a, &r, 1, &e2);
        assert_int_equal(e2, MC_ERR_MEMORY);
    }
    /* everything still works afterwards */
    te_fill(f.a_dev, len, 65);
    sync_ok(f.a, rq(MC_OPCODE_WRITE, f.a_dev, f.seg, f.b_dev, len));
    assert_int_equal(te_hash(f.b_dev, len), te_pattern_hash(len, 65, 0));
    fx_stop(&f);
}

/* Bad device memory: a range that runs off its device allocation, a device that does not
 * exist (at registration, and when copying), a refused registration that leaves no record. */
/* A write-ask moves host memory only: from or into device memory it is refused before anything
 * is written or asked (NOT_IMPLEMENTED), with no device copy; host to host it is served. */
static _Atomic int asks;

static int count_ask(void *ctx, const void *msg, size_t msg_len, void *answer, size_t cap,
                     size_t *answer_len) {
    (void)ctx;
    (void)cap;
    atomic_fetch_add(&asks, 1);
    memcpy(answer, msg, msg_len);
    *answer_len = msg_len;
    return 0;
}

static void test_write_ask_device_memory(void **state) {
    fx_t f;
    mc__devmem_fake_stats_t st;
    char answer[8];
    size_t got = 0;
    (void)state;
    fx_start(&f, "tcp");
    atomic_store(&asks, 0);
    assert_int_equal(mc_engine_set_ask_handler(f.b, count_ask, NULL), 0);
    memset(f.a_host, 0x5a, 4096);
    assert_int_equal(mc_engine_write_ask(f.a, f.seg, f.a_dev, (uint64_t)(uintptr_t)f.b_host, 4096,
                                         0, "m", 1, answer, sizeof(answer), &got),
                     MC_ERR_NOT_IMPLEMENTED);
    assert_int_equal(mc_engine_write_ask(f.a, f.seg, f.a_host, (uint64_t)(uintptr_t)f.b_dev, 4096,
                                         0, "m", 1, answer, sizeof(answer), &got),
                     MC_ERR_NOT_IMPLEMENTED);
    assert_int_equal(atomic_load(&asks), 0);
    mc__devmem_fake_stats(&st);
    assert_true(st.to_host == 0 && st.from_host == 0);
    assert_int_equal(mc_engine_write_ask(f.a, f.seg, f.a_host, (uint64_t)(uintptr_t)f.b_host, 4096,
                                         0, "ok", 2, answer, sizeof(answer), &got),
                     0);
    assert_true(got == 2 && !memcmp(answer, "ok", 2) && atomic_load(&asks) == 1);
    assert_true(memcmp(f.a_host, f.b_host, 4096) == 0);
    assert_int_equal(mc_engine_set_ask_handler(f.b, NULL, NULL), 0);
    fx_stop(&f);
}

static void test_bounds_and_unknown_device(void **state) {
    fx_t f;
    uint8_t *odd = map(2 * MiB);
    (void)state;
    fx_start(&f, "tcp");
    /* only the first MiB of odd is device memory */
    assert_int_equal(mc__devmem_fake_add(odd, MiB, 0), 0);
    {
        int e2 = 0;
        mc_request_t r = rq(MC_OPCODE_WRITE, odd + MiB / 2, f.seg, f.b_host, MiB);
        assert_int_equal(
            mc_engine_transfer_sync_each_ex(f.a, &r, 1, &e2, MC_SUBMIT_UNREGISTERED_LOCAL),
            MC_ERR_INVALID_ARGUMENT);
        /* inside it: fine */
        r.source = odd;
        te_fill(odd, MiB, 70);
        assert_int_equal(
            mc_engine_transfer_sync_each_ex(f.a, &r, 1, &e2, MC_SUBMIT_UNREGISTERED_LOCAL), 0);
        assert_int_equal(te_hash(f.b_host, MiB), te_pattern_hash(MiB, 70, 0));
    }
    mc__devmem_fake_remove(odd);
    /* a GPU that does not exist: recorded as memory of GPU 7, every copy fails */
    assert_int_equal(mc__devmem_fake_add(odd, MiB, 7), 0);
    {
        int e2 = 0;
        mc_request_t r = rq(MC_OPCODE_WRITE, odd, f.seg, f.b_host, MiB);
        mc_engine_transfer_sync_each_ex(f.a, &r, 1, &e2, MC_SUBMIT_UNREGISTERED_LOCAL);
        assert_int_equal(e2, MC_ERR_DEVICE_NOT_FOUND);
        r.target_id = MC_LOCAL_SEGMENT_ID;
        r.target_offset = (uint64_t)(uintptr_t)f.a_host;
        mc_engine_transfer_sync_each_ex(f.a, &r, 1, &e2, MC_SUBMIT_UNREGISTERED_LOCAL);
        assert_int_equal(e2, MC_ERR_DEVICE_NOT_FOUND);
    }
    mc__devmem_fake_remove(odd);
    /* registration names a GPU the backend does not have (2 fake GPUs by default) */
    assert_int_equal(mc_engine_register_memory(f.a, odd, MiB, "cuda:5"), MC_ERR_DEVICE_NOT_FOUND);
    assert_int_equal(mc_engine_register_memory(f.a, odd, MiB, "cuda:x"), MC_ERR_INVALID_ARGUMENT);
    /* a batch refused on its second buffer keeps no record of the first */
    {
        void *addrs[2] = {odd, f.a_host};
        size_t lens[2] = {MiB, MiB};
        assert_int_equal(mc_engine_register_memory_batch(f.a, addrs, lens, 2, "cuda:0"),
                         MC_ERR_ADDRESS_OVERLAPPED);
    }
    assert_int_equal(mc__devmem_fake_add(odd, 2 * MiB, 0), 0); /* nothing left there */
    mc__devmem_fake_remove(odd);
    /* and a registered device range: a request running past its end is not registered */
    {
        int e2 = 0;
        mc_request_t r = rq(MC_OPCODE_WRITE, f.a_dev + DEV_LEN - MiB, f.seg, f.b_host, 2 * MiB);
        assert_int_equal(mc_engine_transfer_sync_each(f.a, &r, 1, &e2),
                         MC_ERR_ADDRESS_NOT_REGISTERED);
    }
    fx_stop(&f);
    munmap(odd, 2 * MiB);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tcp_device_initiator),
        cmocka_unit_test(test_tcp_device_target),
        cmocka_unit_test(test_shm_and_local),
        cmocka_unit_test(test_copy_failure_mid_transfer),
        cmocka_unit_test(test_bounds_and_unknown_device),
        cmocka_unit_test(test_write_ask_device_memory),
    };
    setenv("MC_DEVMEM", "fake", 1);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
