/* The link model, observed in one process (docs/build.md): libtransfer_engine.so,
 * libmooncake_core.so and this program share the one allocator of libmooncake_common.so. Bytes the
 * compat layer alone frees (a notification array it copied out) leave the live-byte counter read
 * here, the engine's allocations show in it, a fault injected here makes their allocations fail
 * cleanly, and destroy returns every byte. With a private copy of the common code in the compat
 * library (as before), its frees would not move this counter; with one in the core, the injection
 * would not reach it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "mooncake/common/alloc.h"
#include "transfer_engine_c.h"

static transfer_engine_t create(void) {
    return createTransferEngine("P2PHANDSHAKE", "127.0.0.1", "127.0.0.1", 0, 0);
}

static void test_compat_allocations_are_counted_here(void **state) {
    (void)state;
    int64_t before = mc__alloc_live_bytes();
    transfer_engine_t e = create();
    assert_non_null(e);
    assert_true(mc__alloc_live_bytes() > before);
    destroyTransferEngine(e);
    assert_int_equal(mc__alloc_live_bytes(), before);
}

static void test_fault_injected_here_reaches_compat(void **state) {
    (void)state;
    int64_t before = mc__alloc_live_bytes();
    /* the very first allocation of createTransferEngine fails: a clean NULL, nothing kept */
    mc__alloc_fail_after(1);
    transfer_engine_t e = create();
    mc__alloc_fail_after(0);
    assert_null(e);
    assert_int_equal(mc__alloc_live_bytes(), before);
    /* and later ones, deeper inside the engine: each fails cleanly too */
    for (uint64_t k = 2; k <= 40; k += 3) {
        mc__alloc_fail_after(k);
        e = create();
        mc__alloc_fail_after(0);
        destroyTransferEngine(e); /* NULL or a half-built engine: both accepted */
        assert_int_equal(mc__alloc_live_bytes(), before);
    }
    e = create();
    assert_non_null(e);
    destroyTransferEngine(e);
}

static void test_compat_frees_leave_this_counter(void **state) {
    (void)state;
    transfer_engine_t e = create();
    assert_non_null(e);
    char name[] = "probe", msg[] = "hello";
    notify_msg_t n = {.name = name, .msg = msg};
    assert_int_equal(genNotifyInEngine(e, LOCAL_SEGMENT, n), 0);
    notify_msg_t *got = NULL;
    int count = 0;
    for (int i = 0; i < 1000 && count == 0; i++) { /* delivered through the engine's own server */
        got = getNotifsFromEngine(e, &count);
        if (count == 0)
            nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
    }
    assert_int_equal(count, 1);
    assert_string_equal(got[0].name, name);
    assert_string_equal(got[0].msg, msg);
    /* freeNotifsMsgBuf is the compat layer's code alone: its array and two strings */
    int64_t before = mc__alloc_live_bytes();
    assert_int_equal(freeNotifsMsgBuf(got, count), 0);
    int64_t freed = before - mc__alloc_live_bytes();
    assert_int_equal(freed, (int64_t)(sizeof(notify_msg_t) + sizeof(name) + sizeof(msg)));
    destroyTransferEngine(e);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compat_allocations_are_counted_here),
        cmocka_unit_test(test_fault_injected_here_reaches_compat),
        cmocka_unit_test(test_compat_frees_leave_this_counter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
