/* Buffer incarnations: a request that names an epoch reaches only the buffer incarnation with
 * that epoch. Over tcp (checked by the serving engine), shm (checked against a descriptor of the
 * current generation) and the engine's own segment, including an old incarnation replaced by a
 * new one at the same address, and a writer that keeps hammering the old incarnation while the
 * owner switches: not one of its bytes may land in the new one. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mooncake/transfer_engine.h"

#define MiB (1u << 20)
#define SEG_LEN (4u * MiB)

typedef struct fixture {
    mc_engine_t *owner;
    mc_engine_t *tcp; /* initiator, protocol tcp */
    mc_engine_t *shm; /* initiator, protocol shm (same host) */
    uint8_t *tcp_buf, *shm_buf;
    mc_segment_id_t tcp_seg, shm_seg;
} fixture_t;

static mc_engine_t *new_engine(const char *proto) {
    mc_engine_t *e = NULL;
    mc_engine_options_t o = {.local_server_name = "127.0.0.1", .protocol = proto};
    assert_int_equal(mc_engine_create(&e), 0);
    assert_int_equal(mc_engine_init(e, &o), 0);
    return e;
}

static int setup(void **state) {
    fixture_t *f = calloc(1, sizeof(*f));
    f->owner = new_engine("auto");
    f->tcp = new_engine("tcp");
    f->shm = new_engine("shm");
    assert_int_equal(mc_engine_alloc_managed(f->tcp, SEG_LEN, (void **)&f->tcp_buf), 0);
    assert_int_equal(mc_engine_alloc_managed(f->shm, SEG_LEN, (void **)&f->shm_buf), 0);
    assert_int_equal(mc_engine_open_segment(f->tcp, mc_engine_local_name(f->owner), &f->tcp_seg),
                     0);
    assert_int_equal(mc_engine_open_segment(f->shm, mc_engine_local_name(f->owner), &f->shm_seg),
                     0);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture_t *f = *state;
    mc_engine_destroy(f->tcp);
    mc_engine_destroy(f->shm);
    mc_engine_destroy(f->owner);
    free(f);
    return 0;
}

static int xfer(mc_engine_t *e, mc_segment_id_t seg, int op, void *local, uint64_t remote,
                uint64_t len, uint64_t epoch) {
    mc_request_t r = {.opcode = op,
                      .source = local,
                      .target_id = seg,
                      .target_offset = remote,
                      .length = len,
                      .target_epoch = epoch};
    return mc_engine_transfer_sync(e, &r, 1);
}

static int all_bytes(const uint8_t *p, size_t n, uint8_t v) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != v)
            return 0;
    return 1;
}

/* One initiator against one incarnation and its successor. */
static void check_initiator(fixture_t *f, mc_engine_t *e, mc_segment_id_t seg, uint8_t *local,
                            uint64_t e1, uint64_t e2) {
    uint8_t *p = NULL, *q = NULL;
    assert_int_equal(mc_engine_alloc_managed_epoch(f->owner, SEG_LEN, e1, (void **)&p), 0);
    memset(p, 0, SEG_LEN);
    memset(local, 0x5A, MiB);
    /* its own epoch and "any" are served; another is refused and touches nothing */
    assert_int_equal(xfer(e, seg, MC_OPCODE_WRITE, local, (uint64_t)(uintptr_t)p, MiB, e1), 0);
    assert_true(all_bytes(p, MiB, 0x5A));
    assert_int_equal(xfer(e, seg, MC_OPCODE_WRITE, local, (uint64_t)(uintptr_t)p + MiB, 4096, 0),
                     0);
    memset(local, 0x77, MiB);
    assert_int_equal(
        xfer(e, seg, MC_OPCODE_WRITE, local, (uint64_t)(uintptr_t)p + 2 * MiB, MiB, e1 + 1),
        MC_ERR_ADDRESS_NOT_REGISTERED);
    assert_true(all_bytes(p + 2 * MiB, MiB, 0));
    assert_int_equal(xfer(e, seg, MC_OPCODE_READ, local, (uint64_t)(uintptr_t)p, MiB, e1 + 1),
                     MC_ERR_ADDRESS_NOT_REGISTERED);
    assert_true(all_bytes(local, MiB, 0x77)); /* nothing was read into it */

    /* the next incarnation, very likely at the same address */
    assert_int_equal(mc_engine_free_managed(f->owner, p), 0);
    assert_int_equal(mc_engine_alloc_managed_epoch(f->owner, SEG_LEN, e2, (void **)&q), 0);
    memset(q, 0x11, SEG_LEN);
    assert_int_equal(xfer(e, seg, MC_OPCODE_WRITE, local, (uint64_t)(uintptr_t)q, MiB, e1),
                     MC_ERR_ADDRESS_NOT_REGISTERED);
    assert_int_equal(xfer(e, seg, MC_OPCODE_READ, local, (uint64_t)(uintptr_t)q, MiB, e1),
                     MC_ERR_ADDRESS_NOT_REGISTERED);
    assert_true(all_bytes(q, SEG_LEN, 0x11));
    assert_true(all_bytes(local, MiB, 0x77));
    assert_int_equal(xfer(e, seg, MC_OPCODE_READ, local, (uint64_t)(uintptr_t)q, MiB, e2), 0);
    assert_true(all_bytes(local, MiB, 0x11));
    assert_int_equal(mc_engine_free_managed(f->owner, q), 0);
}

static void test_tcp_refuses_other_incarnations(void **state) {
    fixture_t *f = *state;
    check_initiator(f, f->tcp, f->tcp_seg, f->tcp_buf, 101, 202);
}

static void test_shm_refuses_other_incarnations(void **state) {
    fixture_t *f = *state;
    check_initiator(f, f->shm, f->shm_seg, f->shm_buf, 303, 404);
}

static void test_local_segment_refuses_other_incarnations(void **state) {
    fixture_t *f = *state;
    uint8_t *p = NULL, *src = NULL;
    assert_int_equal(mc_engine_alloc_managed_epoch(f->owner, SEG_LEN, 505, (void **)&p), 0);
    assert_int_equal(mc_engine_alloc_managed(f->owner, MiB, (void **)&src), 0);
    memset(p, 0, SEG_LEN);
    memset(src, 0x42, MiB);
    assert_int_equal(
        xfer(f->owner, MC_LOCAL_SEGMENT_ID, MC_OPCODE_WRITE, src, (uint64_t)(uintptr_t)p, MiB, 506),
        MC_ERR_ADDRESS_NOT_REGISTERED);
    assert_true(all_bytes(p, MiB, 0));
    assert_int_equal(
        xfer(f->owner, MC_LOCAL_SEGMENT_ID, MC_OPCODE_WRITE, src, (uint64_t)(uintptr_t)p, MiB, 505),
        0);
    assert_true(all_bytes(p, MiB, 0x42));
    assert_int_equal(mc_engine_free_managed(f->owner, p), 0);
    assert_int_equal(mc_engine_free_managed(f->owner, src), 0);
}

typedef struct hammer {
    mc_engine_t *e;
    mc_segment_id_t seg;
    uint8_t *src;
    uint64_t addr, epoch;
    _Atomic int stop;
    _Atomic long ok, refused;
} hammer_t;

static void *hammer_main(void *arg) {
    hammer_t *h = arg;
    while (!h->stop) {
        int rc = xfer(h->e, h->seg, MC_OPCODE_WRITE, h->src, h->addr, SEG_LEN, h->epoch);
        if (rc == 0)
            h->ok++;
        else
            h->refused++;
    }
    return NULL;
}

/* The owner replaces the incarnation while writers of the old one are in the middle of their
 * copies: the new incarnation must only ever hold what the owner put there. */
static void hammer_switch(fixture_t *f, mc_engine_t *e, mc_segment_id_t seg, uint8_t *src) {
    hammer_t h = {.e = e, .seg = seg, .src = src, .epoch = 606};
    pthread_t thr;
    uint8_t *p = NULL, *q = NULL;
    long ok_before;
    assert_int_equal(mc_engine_alloc_managed_epoch(f->owner, SEG_LEN, 606, (void **)&p), 0);
    h.addr = (uint64_t)(uintptr_t)p;
    memset(src, 0xEE, SEG_LEN);
    assert_int_equal(pthread_create(&thr, NULL, hammer_main, &h), 0);
    while (h.ok < 3)
        ;
    ok_before = h.ok;
    assert_int_equal(mc_engine_free_managed(f->owner, p), 0);
    assert_int_equal(mc_engine_alloc_managed_epoch(f->owner, SEG_LEN, 707, (void **)&q), 0);
    memset(q, 0, SEG_LEN);
    /* let the writer keep trying against the new incarnation for a while */
    for (long seen = h.refused; h.refused < seen + 20;)
        ;
    h.stop = 1;
    pthread_join(thr, NULL);
    assert_true(ok_before >= 3);
    assert_true(all_bytes(q, SEG_LEN, 0));
    assert_int_equal(mc_engine_free_managed(f->owner, q), 0);
}

static void test_tcp_writer_during_switch(void **state) {
    fixture_t *f = *state;
    uint8_t *src = NULL;
    assert_int_equal(mc_engine_alloc_managed(f->tcp, SEG_LEN, (void **)&src), 0);
    hammer_switch(f, f->tcp, f->tcp_seg, src);
    mc_engine_free_managed(f->tcp, src);
}

static void test_shm_writer_during_switch(void **state) {
    fixture_t *f = *state;
    uint8_t *src = NULL;
    assert_int_equal(mc_engine_alloc_managed(f->shm, SEG_LEN, (void **)&src), 0);
    hammer_switch(f, f->shm, f->shm_seg, src);
    mc_engine_free_managed(f->shm, src);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_tcp_refuses_other_incarnations, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shm_refuses_other_incarnations, setup, teardown),
        cmocka_unit_test_setup_teardown(test_local_segment_refuses_other_incarnations, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_tcp_writer_during_switch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shm_writer_during_switch, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
