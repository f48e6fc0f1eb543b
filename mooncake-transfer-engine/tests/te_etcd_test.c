/* Two engines in one process finding each other through a real etcd: data both ways, the
 * segment key on a lease (the reference's key layout), the key back under a new lease after
 * its lease was revoked behind the engine's back, the key gone on destroy. Exits 77 (skipped)
 * without an etcd binary. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>

#include "../../mooncake-common/tests/etcd_harness.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/etcd.h"
#include "mooncake/error.h"
#include "mooncake/transfer_engine.h"

static th_etcd_t g_etcd;
static char g_ep[64], g_conn[80];

static int setup(void **state) {
    (void)state;
    if (th_etcd_cluster(&g_etcd, 1))
        return -1;
    snprintf(g_ep, sizeof(g_ep), "127.0.0.1:%u", (unsigned)g_etcd.client_port);
    snprintf(g_conn, sizeof(g_conn), "etcd://%s", g_ep);
    setenv("MC_METADATA_LEASE_TTL", "2", 1);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    th_etcd_kill(&g_etcd);
    return 0;
}

static mc_engine_t *engine(const char *conn) {
    mc_engine_t *e = NULL;
    char name[32];
    mc_engine_options_t o = {.local_server_name = name, .metadata_conn = conn, .protocol = "tcp"};
    snprintf(name, sizeof(name), "127.0.0.1:%u", (unsigned)th_free_port());
    assert_int_equal(mc_engine_create(&e), 0);
    assert_int_equal(mc_engine_init(e, &o), 0);
    return e;
}

static void seg_key(const mc_engine_t *e, char *key, size_t cap) {
    snprintf(key, cap, "mooncake/ram/%s", mc_engine_local_name(e));
}

static void test_two_engines_on_etcd(void **state) {
    mc_engine_t *a = engine(g_conn), *b = engine(g_conn);
    mc_etcd_t *c = NULL;
    mc_etcd_kv_t kv;
    char key[128];
    uint8_t *src = NULL, *dst = NULL;
    mc_segment_id_t sid;
    int64_t lease;
    uint64_t t0;
    (void)state;
    assert_int_equal(mc__etcd_open(g_ep, 2000, &c), 0);
    assert_int_equal(mc_engine_alloc_managed(a, 1 << 20, (void **)&src), 0);
    assert_int_equal(mc_engine_alloc_managed(b, 1 << 20, (void **)&dst), 0);
    for (size_t i = 0; i < (1u << 20); i++)
        src[i] = (uint8_t)(i * 31 + 7);
    memset(dst, 0, 1 << 20);
    assert_int_equal(mc_engine_open_segment(a, mc_engine_local_name(b), &sid), 0);
    mc_request_t w = {.opcode = MC_OPCODE_WRITE,
                      .source = src,
                      .target_id = sid,
                      .target_offset = (uint64_t)(uintptr_t)dst,
                      .length = 1 << 20};
    assert_int_equal(mc_engine_transfer_sync(a, &w, 1), 0);
    assert_memory_equal(src, dst, 1 << 20);

    /* b's key is on a lease; revoked behind its back, the engine puts it back on a new one */
    seg_key(b, key, sizeof(key));
    assert_int_equal(mc__etcd_get(c, key, strlen(key), &kv), 0);
    lease = kv.lease;
    assert_true(lease != 0);
    assert_non_null(strstr((char *)kv.value, mc_engine_local_name(b)));
    mc__etcd_kv_free(&kv);
    assert_int_equal(mc__etcd_lease_revoke(c, lease), 0);
    t0 = mc__now_ms();
    for (;;) {
        int rc = mc__etcd_get(c, key, strlen(key), &kv);
        if (rc == 0 && kv.lease != lease) {
            mc__etcd_kv_free(&kv);
            break;
        }
        if (rc == 0)
            mc__etcd_kv_free(&kv);
        assert_true(mc__now_ms() - t0 < 4000);
        usleep(50 * 1000);
    }
    /* and transfers keep working */
    memset(dst, 0, 1 << 20);
    assert_int_equal(mc_engine_transfer_sync(a, &w, 1), 0);
    assert_memory_equal(src, dst, 1 << 20);

    /* destroy removes the key at once */
    mc_engine_free_managed(b, dst);
    mc_engine_destroy(b);
    assert_int_equal(mc__etcd_get(c, key, strlen(key), &kv), MC_ERR_ETCD_KEY_NOT_EXIST);
    /* a's transfer to it now fails (no descriptor, nobody there) */
    assert_int_not_equal(mc_engine_transfer_sync(a, &w, 1), 0);
    seg_key(a, key, sizeof(key));
    mc_engine_free_managed(a, src);
    mc_engine_destroy(a);
    assert_int_equal(mc__etcd_get(c, key, strlen(key), &kv), MC_ERR_ETCD_KEY_NOT_EXIST);
    mc__etcd_close(c);
}

static void test_bad_connection_strings(void **state) {
    static const char *const bad[] = {"etcd://", "etcd://a:1:2", "etcd://h:70000", "etcd://h/x"};
    char dead[64];
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        mc_engine_t *e = NULL;
        mc_engine_options_t o = {.local_server_name = "127.0.0.1:0", .metadata_conn = bad[i]};
        assert_int_equal(mc_engine_create(&e), 0);
        assert_int_equal(mc_engine_init(e, &o), MC_ERR_INVALID_ARGUMENT);
        mc_engine_destroy(e);
    }
    snprintf(dead, sizeof(dead), "etcd://127.0.0.1:%u", (unsigned)th_free_port());
    {
        mc_engine_t *e = NULL;
        mc_engine_options_t o = {.local_server_name = "127.0.0.1:0", .metadata_conn = dead};
        uint64_t t0 = mc__now_ms();
        assert_int_equal(mc_engine_create(&e), 0);
        assert_int_equal(mc_engine_init(e, &o), MC_ERR_METADATA);
        assert_true(mc__now_ms() - t0 < 3000);
        mc_engine_destroy(e);
    }
    setenv("MC_METADATA_LEASE_TTL", "0", 1);
    {
        mc_engine_t *e = NULL;
        mc_engine_options_t o = {.local_server_name = "127.0.0.1:0", .metadata_conn = g_conn};
        assert_int_equal(mc_engine_create(&e), 0);
        assert_int_equal(mc_engine_init(e, &o), MC_ERR_INVALID_ARGUMENT);
        mc_engine_destroy(e);
    }
    setenv("MC_METADATA_LEASE_TTL", "2", 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_engines_on_etcd),
        cmocka_unit_test(test_bad_connection_strings),
    };
    if (!th_etcd_available()) {
        fprintf(stderr, "no etcd binary (install etcd-server or set MC_ETCD_BIN): skipped\n");
        return 77;
    }
    return cmocka_run_group_tests(tests, setup, teardown);
}
