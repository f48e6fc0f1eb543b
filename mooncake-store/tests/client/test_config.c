/* Client configuration: the setter, sizes, the JSON file, the environment and their precedence. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "mooncake/store.h"

static void clear_env(void) {
    static const char *const vars[] = {
        "MOONCAKE_CONFIG_PATH",         "MOONCAKE_MASTER",           "MOONCAKE_LOCAL_HOSTNAME",
        "MOONCAKE_TE_META_DATA_SERVER", "MOONCAKE_PROTOCOL",         "MOONCAKE_DEVICE",
        "MOONCAKE_GLOBAL_SEGMENT_SIZE", "MOONCAKE_LOCAL_BUFFER_SIZE"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        unsetenv(vars[i]);
}

static void test_defaults_and_setter(void **state) {
    mc_store_config_t c;
    mc_store_config_init(&c);
    assert_string_equal(c.metadata_server, "P2PHANDSHAKE");
    assert_string_equal(c.protocol, "tcp");
    assert_string_equal(c.master_server_addr, "127.0.0.1:50051");
    assert_int_equal(c.global_segment_size, 16u << 20);
    assert_int_equal(c.local_buffer_size, 16u << 20);

    assert_int_equal(mc_store_config_set(&c, "global_segment_size", "4gb"), 0);
    assert_true(c.global_segment_size == (4ull << 30));
    assert_int_equal(mc_store_config_set(&c, "local_buffer_size", "512MB"), 0);
    assert_int_equal(c.local_buffer_size, 512u << 20);
    assert_int_equal(mc_store_config_set(&c, "local_buffer_size", "0"), 0);
    assert_int_equal(c.local_buffer_size, 0);
    assert_int_equal(mc_store_config_set(&c, "master_server_address", "10.0.0.1:1"), 0);
    assert_string_equal(c.master_server_addr, "10.0.0.1:1");
    assert_int_equal(mc_store_config_set(&c, "master_server_addr", "10.0.0.2:2"), 0);
    assert_string_equal(c.master_server_addr, "10.0.0.2:2");
    assert_int_equal(mc_store_config_set(&c, "rdma_devices", "mlx5_0"), 0);
    assert_string_equal(c.device_name, "mlx5_0");
    /* accepted, unused keys of the reference */
    assert_int_equal(mc_store_config_set(&c, "tenant_id", "t"), 0);
    /* the disk tier (setup refuses enable_ssd_offload without a path or a segment) */
    assert_int_equal(mc_store_config_set(&c, "enable_ssd_offload", "true"), 0);
    assert_int_equal(c.enable_ssd_offload, 1);
    assert_int_equal(mc_store_config_set(&c, "enable_ssd_offload", "false"), 0);
    assert_int_equal(c.enable_ssd_offload, 0);
    assert_int_equal(mc_store_config_set(&c, "ssd_offload_path", "/nvme/tier"), 0);
    assert_string_equal(c.ssd_offload_path, "/nvme/tier");
    assert_int_equal(mc_store_config_set(&c, "ssd_offload_capacity", "64gb"), 0);
    assert_true(c.ssd_offload_capacity == (64ull << 30));
    /* refused */
    assert_int_equal(mc_store_config_set(&c, "enable_ssd_offload", "maybe"), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_config_set(&c, "ssd_offload_capacity", "big"), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_config_set(&c, "global_segment_size", "lots"), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_config_set(&c, "global_segment_size", "-1"), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_config_set(&c, "no_such_key", "1"), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_config_set(&c, NULL, "1"), MC_ERR_INVALID_PARAMS);
    char longv[400];
    memset(longv, 'a', sizeof(longv) - 1);
    longv[sizeof(longv) - 1] = '\0';
    assert_int_equal(mc_store_config_set(&c, "local_hostname", longv), MC_ERR_INVALID_PARAMS);
    assert_true(c.global_segment_size == (4ull << 30)); /* failed sets change nothing */

    mc_replicate_config_t rc;
    mc_replicate_config_init(&rc);
    assert_int_equal(rc.replica_num, 1);
    assert_true(rc.soft_pin_ttl_ms < 0);
}

static char *write_tmp(const char *text) {
    static char path[64];
    snprintf(path, sizeof(path), "/tmp/mc_store_cfg_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

static void test_file_and_env_precedence(void **state) {
    mc_store_config_t c;
    char *path = write_tmp("{\"local_hostname\": \"10.1.1.1\", \"master_server_address\": "
                           "\"10.1.1.1:5\", \"global_segment_size\": \"2gb\", "
                           "\"local_buffer_size\": 1048576, \"protocol\": \"rdma\", "
                           "\"device_name\": \"\"}");
    clear_env();
    mc_store_config_init(&c);
    assert_int_equal(mc_store_config_load_file(&c, path), 0);
    assert_string_equal(c.local_hostname, "10.1.1.1");
    assert_true(c.global_segment_size == (2ull << 30));
    assert_int_equal(c.local_buffer_size, 1u << 20);
    assert_string_equal(c.protocol, "rdma");

    setenv("MOONCAKE_CONFIG_PATH", path, 1);
    setenv("MOONCAKE_MASTER", "127.0.0.1:7", 1);
    setenv("MOONCAKE_LOCAL_BUFFER_SIZE", "3mb", 1);
    mc_store_config_init(&c);
    assert_int_equal(mc_store_config_load_env(&c), 0);
    assert_string_equal(c.master_server_addr, "127.0.0.1:7"); /* env over file */
    assert_int_equal(c.local_buffer_size, 3u << 20);
    assert_string_equal(c.local_hostname, "10.1.1.1"); /* file over defaults */

    setenv("MOONCAKE_GLOBAL_SEGMENT_SIZE", "huge", 1);
    mc_store_config_init(&c);
    assert_int_equal(mc_store_config_load_env(&c), MC_ERR_INVALID_PARAMS);
    unlink(path);
    clear_env();
}

static void test_bad_files(void **state) {
    mc_store_config_t c;
    mc_store_config_init(&c);
    assert_int_equal(mc_store_config_load_file(&c, "/nonexistent/mooncake.json"),
                     MC_ERR_FILE_NOT_FOUND);
    char *p = write_tmp("{\"local_hostname\": ");
    assert_int_equal(mc_store_config_load_file(&c, p), MC_ERR_INVALID_PARAMS);
    unlink(p);
    p = write_tmp("[1, 2]");
    assert_int_equal(mc_store_config_load_file(&c, p), MC_ERR_INVALID_PARAMS);
    unlink(p);
    p = write_tmp("{\"protocol\": {\"nested\": 1}}");
    assert_int_equal(mc_store_config_load_file(&c, p), MC_ERR_INVALID_PARAMS);
    unlink(p);
    p = write_tmp("{\"global_segment_size\": -5}");
    assert_int_equal(mc_store_config_load_file(&c, p), MC_ERR_INVALID_PARAMS);
    unlink(p);
    /* another program's keys (any JSON type) are ignored; ours still have to be right */
    p = write_tmp("{\"unknown_key\": 1, \"vllm_extra\": {\"a\": [1]}, \"flag\": null}");
    assert_int_equal(mc_store_config_load_file(&c, p), 0);
    unlink(p);
    p = write_tmp("{\"unknown_key\": 1, \"local_buffer_size\": \"lots\"}");
    assert_int_equal(mc_store_config_load_file(&c, p), MC_ERR_INVALID_PARAMS);
    unlink(p);
    /* a key given explicitly is skipped, whatever its value in the file */
    p = write_tmp("{\"local_buffer_size\": \"lots\", \"protocol\": \"shm\"}");
    {
        const char *skip[] = {"local_buffer_size"};
        assert_int_equal(mc_store_config_load_file_ex(&c, p, skip, 1), 0);
        assert_string_equal(c.protocol, "shm");
    }
    unlink(p);
    assert_int_equal(c.global_segment_size, 16u << 20);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_and_setter),
        cmocka_unit_test(test_file_and_env_precedence),
        cmocka_unit_test(test_bad_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
