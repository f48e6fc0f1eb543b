/* Device memory (device_mem.h) without a GPU: the location string alone, then with a stand-in
 * CUDA driver loaded (fake_cuda_driver.c, named libcuda.so.1) that calls one range device memory
 * of GPU 3. Over the fabric transport with libfabric's tcp provider (no FI_HMEM), a device buffer
 * is not registered with the provider (its descriptor entry has no fabric key) while host
 * buffers are, and host transfers still go over fabric. Exits 77 only for the fabric part when
 * libfabric.so.1 is absent. */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "device_mem.h"
#include "mooncake/common/alloc.h"
#include "mooncake/error.h"
#include "mooncake/transfer_engine.h"
#include "te_internal.h"
#include "te_test_util.h"

#define MiB (1u << 20)

typedef void (*set_range_fn)(const void *, size_t, int);

static set_range_fn load_fake_driver(void) {
    void *h = dlopen(FAKE_CUDA_DRIVER, RTLD_NOW | RTLD_GLOBAL);
    set_range_fn fn = NULL;
    assert_non_null(h);
    *(void **)(&fn) = dlsym(h, "fake_cuda_set_device_range");
    assert_non_null(fn);
    return fn;
}

static void expect_place(const void *addr, const char *loc, int kind, int device) {
    mc__mem_place_t p = {.kind = -1, .device = -1};
    assert_int_equal(mc__mem_classify(addr, loc, &p), 0);
    assert_int_equal(p.kind, kind);
    if (kind == MC__MEM_CUDA)
        assert_int_equal(p.device, device);
}

/* Runs first: the fake driver is not loaded yet, so nothing can be device memory. */
static void test_location_alone(void **state) {
    static char buf[64];
    static const char *const bad[] = {"cuda:",   "cuda:x", "cuda:-1",
                                      "cuda:1x", "cudas",  "cuda:99999"};
    mc_engine_t *e = NULL;
    (void)state;
    expect_place(buf, "cpu:0", MC__MEM_HOST, 0);
    expect_place(buf, "*", MC__MEM_HOST, 0);
    expect_place(buf, NULL, MC__MEM_HOST, 0);
    expect_place(buf, "cuda:0", MC__MEM_HOST, 0); /* no driver loaded: host, with a warning */
    expect_place(buf, "cuda", MC__MEM_HOST, 0);
    assert_null(dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD)); /* and nothing loaded it */
    assert_int_equal(mc_engine_create(&e), 0);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        mc__mem_place_t p;
        assert_int_equal(mc__mem_classify(buf, bad[i], &p), MC_ERR_INVALID_ARGUMENT);
        assert_int_equal(mc_engine_register_memory(e, buf, sizeof(buf), bad[i]),
                         MC_ERR_INVALID_ARGUMENT);
    }
    /* a refused batch registers none of its buffers */
    {
        void *addrs[2] = {buf, buf + 32};
        size_t lens[2] = {32, 32};
        assert_int_equal(mc_engine_register_memory_batch(e, addrs, lens, 2, "cuda:?"),
                         MC_ERR_INVALID_ARGUMENT);
        assert_int_equal(mc_engine_register_memory(e, buf, sizeof(buf), "cpu:0"), 0);
    }
    mc_engine_destroy(e);
}

static void test_with_driver(void **state) {
    static char dev[4096], host[4096];
    set_range_fn set_range = load_fake_driver();
    (void)state;
    set_range(dev, sizeof(dev), 3);
    expect_place(dev, "*", MC__MEM_CUDA, 3);
    expect_place(dev + 100, "cuda:3", MC__MEM_CUDA, 3);
    expect_place(dev, "cuda:0", MC__MEM_CUDA, 3);  /* the driver's ordinal wins, with a warning */
    expect_place(dev, "cpu:0", MC__MEM_HOST, 0);   /* named host memory is not asked about */
    expect_place(host, "cuda:0", MC__MEM_HOST, 0); /* the driver says host: host, warned */
    expect_place(host, "*", MC__MEM_HOST, 0);
}

/* 1 when our descriptor's fabric part has a remote key for the buffer starting at addr */
static int has_fabric_key(mc_engine_t *e, const void *addr) {
    char *json = NULL, want[64];
    mc__desc_t *d = NULL;
    const mc__desc_part_t *part;
    int found;
    assert_int_equal(mc__meta_desc_json(e, &json), 0);
    assert_int_equal(mc__desc_decode(json, strlen(json), &d), 0);
    part = mc__desc_part(d, "fabric");
    assert_non_null(part);
    snprintf(want, sizeof(want), "{\"addr\":\"%llu\",", (unsigned long long)(uintptr_t)addr);
    found = strstr(part->json, want) != NULL;
    mc__desc_free(d);
    mc__free(json);
    return found;
}

static void test_fabric_without_hmem(void **state) {
    set_range_fn set_range = load_fake_driver();
    mc_engine_options_t o = {
        .local_server_name = "127.0.0.1", .metadata_conn = "P2PHANDSHAKE", .protocol = "fabric"};
    uint8_t *dev = aligned_alloc(4096, 4 * MiB), *host = aligned_alloc(4096, 4 * MiB);
    mc_engine_t *e = NULL;
    te_target_t t;
    mc_segment_id_t seg = -1;
    uint64_t fab0, tcp0, n;
    (void)state;
    set_range(dev, 4 * MiB, 3);
    setenv("MC_FABRIC_PROVIDER", "tcp", 1);
    assert_int_equal(mc_engine_create(&e), 0);
    assert_int_equal(mc_engine_init(e, &o), 0);
    assert_int_equal(mc_engine_register_memory(e, host, 4 * MiB, "cpu:0"), 0);
    assert_int_equal(mc_engine_register_memory(e, dev, 4 * MiB, "cuda:3"), 0);
    assert_int_equal(has_fabric_key(e, host), 1);
    assert_int_equal(has_fabric_key(e, dev), 0); /* tcp has no FI_HMEM: not registered with it */
    assert_int_equal(te_target_start_ex(&t, "P2PHANDSHAKE", NULL, "fabric", 8 * MiB, 8 * MiB, 0),
                     0);
    assert_int_equal(mc_engine_open_segment(e, t.name, &seg), 0);
    fab0 = 0;
    assert_int_equal(mc_engine_get_stats(e, "fabric", &fab0, NULL), 0);
    te_fill(host, 2 * MiB, 21);
    {
        mc_request_t r = {.opcode = MC_OPCODE_WRITE,
                          .source = host,
                          .target_id = seg,
                          .target_offset = t.plain_addr,
                          .length = 2 * MiB};
        assert_int_equal(mc_engine_transfer_sync(e, &r, 1), 0);
    }
    assert_true(te_target_hash(&t, t.plain_addr, 2 * MiB) == te_hash(host, 2 * MiB));
    n = 0;
    assert_int_equal(mc_engine_get_stats(e, "fabric", &n, NULL), 0);
    assert_int_equal(n, fab0 + 1);
    /* the device buffer is left to tcp, which stages device memory through the CUDA driver's
     * copies (devmem_cuda.c); the stand-in driver has none, so the copy finds no device: the
     * transfer fails with that, and was not sent over fabric */
    tcp0 = 0;
    assert_int_equal(mc_engine_get_stats(e, "tcp", &tcp0, NULL), 0);
    te_fill(dev, MiB, 22);
    {
        mc_request_t r = {.opcode = MC_OPCODE_WRITE,
                          .source = dev,
                          .target_id = seg,
                          .target_offset = t.plain_addr,
                          .length = MiB};
        assert_int_equal(mc_engine_transfer_sync(e, &r, 1), MC_ERR_DEVICE_NOT_FOUND);
    }
    assert_int_equal(mc_engine_get_stats(e, "fabric", &n, NULL), 0);
    assert_int_equal(n, fab0 + 1);
    assert_int_equal(mc_engine_get_stats(e, "tcp", &n, NULL), 0);
    assert_int_equal(n, tcp0); /* tcp counts completed tasks only */
    assert_int_equal(te_target_stop(&t), 0);
    mc_engine_destroy(e);
    unsetenv("MC_FABRIC_PROVIDER");
    free(dev);
    free(host);
}

/* libfabric's shm provider offers FI_HMEM, so the device buffer goes to fi_mr_regattr with the
 * CUDA interface; without a real CUDA runtime libfabric refuses it, and the buffer is left out
 * of the descriptor (a clear warning, no crash) while host buffers are registered. */
static void test_fabric_with_hmem_provider(void **state) {
    set_range_fn set_range = load_fake_driver();
    mc_engine_options_t o = {
        .local_server_name = "127.0.0.1", .metadata_conn = "P2PHANDSHAKE", .protocol = "fabric"};
    uint8_t *dev = aligned_alloc(4096, MiB), *host = aligned_alloc(4096, MiB);
    mc_engine_t *e = NULL;
    int rc;
    (void)state;
    set_range(dev, MiB, 1);
    setenv("MC_FABRIC_PROVIDER", "shm", 1);
    assert_int_equal(mc_engine_create(&e), 0);
    rc = mc_engine_init(e, &o);
    unsetenv("MC_FABRIC_PROVIDER");
    if (rc == MC_ERR_DEVICE_NOT_FOUND) { /* an older libfabric without shm RMA */
        mc_engine_destroy(e);
        free(dev);
        free(host);
        skip();
    }
    assert_int_equal(rc, 0);
    assert_int_equal(mc_engine_register_memory(e, dev, MiB, "cuda:1"), 0);
    assert_int_equal(mc_engine_register_memory(e, host, MiB, "cpu:0"), 0);
    assert_int_equal(has_fabric_key(e, host), 1);
    assert_int_equal(has_fabric_key(e, dev), 0);
    mc_engine_destroy(e);
    free(dev);
    free(host);
}

int main(void) {
    const struct CMUnitTest classify[] = {
        cmocka_unit_test(test_location_alone),
        cmocka_unit_test(test_with_driver),
    };
    const struct CMUnitTest fabric[] = {
        cmocka_unit_test(test_fabric_without_hmem),
        cmocka_unit_test(test_fabric_with_hmem_provider),
    };
    int rc = cmocka_run_group_tests_name("device memory", classify, NULL, NULL);
    void *h = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);
#ifdef MC_HAVE_LIBFABRIC
    if (h)
        rc |= cmocka_run_group_tests_name("device memory over fabric", fabric, NULL, NULL);
#else
    (void)fabric;
#endif
    if (!h)
        fprintf(stderr, "libfabric.so.1 is not installed: the fabric part did not run\n");
    return rc;
}
