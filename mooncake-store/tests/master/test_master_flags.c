/* mooncake_master's flags and config files (master/master_flags.c): the reference's names,
 * defaults and meanings, durations with units, YAML and JSON files, and refusals that name the
 * missing feature. Process-level checks of the binary are in python/tests (test_master_flags). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "master/master_flags.h"
#include "mooncake/error.h"

static mc__master_opts_t g_o;
static char g_path[64];
static char g_notes[4096];

/* Runs the binary's whole load (argv, file, argv, checks) with notes captured in g_notes.
 * argv ends with NULL; argv[0] is added. */
static int load(const char *const *args) {
    char *argv[32];
    int argc = 0;
    FILE *notes = tmpfile();
    size_t got = 0;
    int rc = 0;
    assert_non_null(notes);
    argv[argc++] = "mooncake_master";
    for (; *args; args++)
        argv[argc++] = (char *)*args;
    argv[argc] = NULL;
    mc__master_opts_free(&g_o);
    mc__master_opts_init(&g_o);
    g_o.warn = notes;
    rc = mc__master_opts_load(&g_o, argc, argv);
    rewind(notes);
    got = fread(g_notes, 1, sizeof(g_notes) - 1, notes);
    g_notes[got] = '\0';
    fclose(notes);
    return rc;
}

/* Loads path into fresh options and finishes them; the error text goes to err. */
static int load_file(const char *path, char *err, size_t cap) {
    int rc = 0;
    mc__master_opts_free(&g_o);
    mc__master_opts_init(&g_o);
    g_o.warn = NULL;
    err[0] = '\0';
    rc = mc__master_opts_load_file(&g_o, path, err, cap);
    if (rc == 0)
        rc = mc__master_opts_finish(&g_o, err, cap);
    return rc;
}

static void write_file(const char *ext, const char *text) {
    FILE *fp = NULL;
    snprintf(g_path, sizeof(g_path), "/tmp/mc_master_flags_%d.%s", (int)getpid(), ext);
    fp = fopen(g_path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

static void test_reference_defaults(void **state) {
    const char *none[] = {NULL};
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    const mc__master_config_t *c = &g_o.cfg;
    (void)state;
    assert_int_equal(load(none), 0);
    assert_int_equal(c->port, 50051);
    assert_int_equal(c->rpc_thread_num, cpus < 16 ? cpus : 16);
    assert_int_equal(c->enable_metric_reporting, 1);
    assert_int_equal(c->metrics_port, 9003);
    assert_int_equal(c->default_kv_lease_ttl_ms, 10000);
    assert_int_equal(c->default_kv_soft_pin_ttl_ms, 1800000);
    assert_int_equal(c->max_kv_soft_pin_ttl_ms, 86400000);
    assert_true(c->eviction_ratio == 0.05 && c->eviction_high_watermark_ratio == 0.90);
    assert_int_equal(c->client_ttl_s, 10);
    assert_int_equal(c->put_start_discard_timeout_s, 30);
    assert_int_equal(c->put_start_release_timeout_s, 600);
    assert_int_equal(c->http_metadata_server_port, 8080);
    assert_string_equal(c->cluster_id, "mooncake_cluster");
    assert_string_equal(g_notes, ""); /* nothing to say about defaults */
}

static void test_reference_spellings(void **state) {
    const mc__master_config_t *c = &g_o.cfg;
    (void)state;
    {
        const char *a[] = {"--rpc_port=6000",
                           "--port=7000",
                           "--rpc_thread_num=3",
                           "--max_threads=1",
                           "--metrics_host=127.0.0.1",
                           "--cluster_id=c9",
                           "--enable_metric_reporting=false",
                           "--rpc_conn_timeout_seconds=42",
                           NULL};
        assert_int_equal(load(a), 0);
        assert_int_equal(c->port, 6000);
        assert_int_equal(c->rpc_thread_num, 3);
        assert_string_equal(c->metrics_address, "127.0.0.1");
        assert_string_equal(c->cluster_id, "c9");
        assert_int_equal(c->enable_metric_reporting, 0);
        assert_int_equal(c->rpc_idle_timeout_s, 42);
    }
    {
        /* rpc_port 0 means --port; rpc_thread_num 0 means --max_threads (at most the CPUs). */
        const char *a[] = {"--rpc_port",
                           "0",
                           "--port=7000",
                           "--max_threads=1",
                           "--rpc_conn_timeout_seconds=0",
                           "--norpc_enable_tcp_no_delay",
                           NULL};
        assert_int_equal(load(a), 0);
        assert_int_equal(c->port, 7000);
        assert_int_equal(c->rpc_thread_num, 1);
        assert_int_equal(c->rpc_idle_timeout_s, 300); /* 0: our idle default stays */
        assert_non_null(strstr(g_notes, "--rpc_enable_tcp_no_delay has no effect"));
    }
    {
        const char *a[] = {"--rpc_interface=lo", "--rpc_address=10.9.9.9", NULL};
        assert_int_equal(load(a), 0);
        assert_string_equal(c->rpc_address, "127.0.0.1");
    }
}

static void test_durations(void **state) {
    const mc__master_config_t *c = &g_o.cfg;
    (void)state;
    {
        const char *a[] = {"--default_kv_lease_ttl=10s", "--default_kv_soft_pin_ttl=500ms",
                           "--max_kv_soft_pin_ttl=1h", NULL};
        assert_int_equal(load(a), 0);
        assert_int_equal(c->default_kv_lease_ttl_ms, 10000);
        assert_int_equal(c->default_kv_soft_pin_ttl_ms, 500);
        assert_int_equal(c->max_kv_soft_pin_ttl_ms, 3600000);
    }
    {
        const char *a[] = {"--default_kv_lease_ttl", "2m", NULL};
        assert_int_equal(load(a), 0);
        assert_int_equal(c->default_kv_lease_ttl_ms, 120000);
    }
    {
        const char *a[] = {"--default_kv_lease_ttl=10x", NULL};
        assert_int_equal(load(a), 2);
    }
    {
        const char *a[] = {"--default_kv_lease_ttl=-5", NULL};
        assert_int_equal(load(a), 2);
    }
    {
        /* The default soft pin may not exceed the maximum (the reference refuses to start). */
        const char *a[] = {"--max_kv_soft_pin_ttl=1s", NULL};
        assert_int_equal(load(a), 2);
    }
}

static void expect_refused(const char *flag, const char *feature) {
    const char *a[] = {flag, NULL};
    char err[512];
    assert_int_equal(load(a), 2);
    /* Same check without the printing, to read the reason. */
    mc__master_opts_free(&g_o);
    mc__master_opts_init(&g_o);
    g_o.warn = NULL;
    {
        char *argv[] = {"mooncake_master", (char *)flag, NULL};
        assert_int_equal(mc__flags_parse(2, argv, g_o.table, g_o.n, "m", "v", NULL), 0);
    }
    assert_int_equal(mc__master_opts_finish(&g_o, err, sizeof(err)), MC_ERR_INVALID_ARGUMENT);
    if (!strstr(err, feature) || !strstr(err, "not supported"))
        fail_msg("%s: '%s' does not name '%s'", flag, err, feature);
}

/* The shared-filesystem tier is built: --root_fs_dir is refused only for a directory that is not
 * there (never silently made: a missing mount point would become a local directory). */
static void test_root_fs_dir_must_exist(void **state) {
    char err[512];
    char *argv[] = {"mooncake_master", "--root_fs_dir=/nonexistent/mooncake-root", NULL};
    (void)state;
    mc__master_opts_free(&g_o);
    mc__master_opts_init(&g_o);
    g_o.warn = NULL;
    assert_int_equal(mc__flags_parse(2, argv, g_o.table, g_o.n, "m", "v", NULL), 0);
    assert_int_equal(mc__master_opts_finish(&g_o, err, sizeof(err)), MC_ERR_INVALID_ARGUMENT);
    if (!strstr(err, "existing directory") || !strstr(err, "/nonexistent/mooncake-root"))
        fail_msg("'%s' does not say the directory must exist", err);
}

static void test_missing_features_refused(void **state) {
    (void)state;
    expect_refused("--enable_cxl", "CXL memory");
    expect_refused("--enable_multi_tenants", "multi-tenant");
    expect_refused("--enable_metadata_cleanup_on_timeout", "metadata cleanup");
    expect_refused("--memory_allocator=cachelib", "cachelib");
    expect_refused("--dynamic_replication_mode=enforce", "dynamic replication");
    expect_refused("--allocation_strategy=cxl", "CXL");
    expect_refused("--allocation_strategy=ssd_free_ratio_first", "SSD");
}

static void test_ha_flags(void **state) {
    (void)state;
    {
        const char *a[] = {"--enable_ha",         "--etcd_endpoints=10.0.0.1:2379;10.0.0.2:2379",
                           "--cluster_id=prod-b", "--rpc_address=10.0.0.9",
                           "--rpc_port=50099",    "--ha_lease_ttl_sec=7",
                           "--enable_oplog",      NULL};
        assert_int_equal(load(a), 0);
        assert_true(g_o.cfg.enable_ha);
        assert_string_equal(g_o.cfg.ha_etcd_endpoints, "10.0.0.1:2379;10.0.0.2:2379");
        assert_string_equal(g_o.cfg.cluster_id, "prod-b");
        assert_int_equal(g_o.cfg.port, 50099);
        assert_int_equal(g_o.cfg.ha_lease_ttl_s, 7);
        assert_non_null(strstr(g_notes, "--enable_oplog has no effect"));
    }
    {
        /* the reference's newer spelling wins over the older one */
        const char *a[] = {"--enable_ha",
                           "--etcd_endpoints=old:1",
                           "--ha_backend_connstring=new:2",
                           "--rpc_address=h",
                           "--port=5",
                           NULL};
        assert_int_equal(load(a), 0);
        assert_string_equal(g_o.cfg.ha_etcd_endpoints, "new:2");
    }
    {
        const char *a[] = {"--etcd_endpoints=e:1", NULL};
        assert_int_equal(load(a), 0);
        assert_false(g_o.cfg.enable_ha);
        assert_non_null(strstr(g_notes, "--etcd_endpoints has no effect while HA is off"));
    }
    {
        const char *bad[][8] = {
            {"--enable_ha", "--rpc_address=h", "--port=5", NULL},
            {"--enable_ha", "--etcd_endpoints=e:1", "--port=5", NULL},
            {"--enable_ha", "--etcd_endpoints=e:1", "--rpc_address=0.0.0.0", "--port=5", NULL},
            {"--enable_ha", "--etcd_endpoints=e:1", "--rpc_address=h", "--port=0", NULL},
            {"--enable_ha", "--etcd_endpoints=e:1", "--rpc_address=h", "--port=5",
             "--ha_backend_type=redis", NULL},
            {"--enable_ha", "--etcd_endpoints=e:1", "--rpc_address=h", "--port=5",
             "--ha_lease_ttl_sec=0", NULL},
            {"--enable_ha", "--etcd_endpoints=e:1", "--rpc_address=h", "--port=5",
             "--metadata_dir=/tmp/x", NULL},
            {"--enable_ha", "--etcd_endpoints=e:1", "--rpc_address=h", "--port=5",
             "--cluster_id=", NULL},
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
            if (load(bad[i]) != 2)
                fail_msg("HA case %zu was accepted", i);
    }
}

/* The disk tier's switches, the reference's names. */
static void test_disk_tier_flags(void **state) {
    const mc__master_config_t *c = &g_o.cfg;
    char err[256];
    (void)state;
    {
        const char *none[] = {NULL};
        assert_int_equal(load(none), 0);
        assert_int_equal(c->enable_offload, 0);
        assert_int_equal(c->offload_on_evict, 0);
        assert_int_equal(c->promotion_on_hit, 0);
        assert_int_equal(c->promotion_admission_threshold, 2);
    }
    {
        const char *a[] = {"--enable_offload", "--offload_on_evict=true", "--promotion_on_hit",
                           "--promotion_admission_threshold=5", NULL};
        assert_int_equal(load(a), 0);
        assert_int_equal(c->enable_offload, 1);
        assert_int_equal(c->offload_on_evict, 1);
        assert_int_equal(c->promotion_on_hit, 1);
        assert_int_equal(c->promotion_admission_threshold, 5);
        assert_int_equal(mc__master_config_validate(c, err, sizeof(err)), 0);
    }
    {
        const char *a[] = {"--promotion_admission_threshold=0", NULL};
        mc__master_config_t bad;
        assert_int_not_equal(load(a), 0); /* refused with the reason on stderr */
        mc__master_config_defaults(&bad);
        bad.promotion_admission_threshold = 0;
        assert_int_equal(mc__master_config_validate(&bad, err, sizeof(err)), MC_ERR_INVALID_PARAMS);
        assert_non_null(strstr(err, "--promotion_admission_threshold"));
    }
}

static void test_knobs_of_features_that_are_off(void **state) {
    (void)state;
    {
        /* As the reference's sample configs pass them: accepted, with a note where they differ
         * from the default. */
        const char *a[] = {"--enable_ha=false",
                           "--etcd_endpoints=http://localhost:2379",
                           "--enable_cxl=false",
                           "--cxl_size=1024",
                           "--offloading_queue_limit=7",
                           "--memory_allocator=offset",
                           "--allocation_strategy=local_first",
                           "--dynamic_replication_mode=off",
                           "--log_dir=/tmp",
                           "--v=2",
                           "--max_total_pending_tasks=5",
                           NULL};
        assert_int_equal(load(a), 0);
        assert_non_null(strstr(g_notes, "--etcd_endpoints has no effect while HA is off"));
        assert_non_null(strstr(g_notes, "--log_dir has no effect"));
        assert_null(strstr(g_notes, "--enable_ha"));
    }
    /* Their values are still checked as the reference checks them. */
    {
        const char *a[] = {"--offloading_queue_limit=0", NULL};
        assert_int_equal(load(a), 2);
    }
    {
        const char *a[] = {"--nof_eviction_ratio=1.5", NULL};
        assert_int_equal(load(a), 2);
    }
    {
        const char *a[] = {"--memory_allocator=malloc", NULL};
        assert_int_equal(load(a), 2);
    }
    {
        const char *a[] = {"--dynamic_replication_mode=sometimes", NULL};
        assert_int_equal(load(a), 2);
    }
    {
        const char *a[] = {"--kv_events_queue_capacity=-1", NULL};
        assert_int_equal(load(a), 2);
    }
    {
        const char *a[] = {"--enable_cxl=maybe", NULL};
        assert_int_equal(load(a), 2);
    }
    {
        const char *a[] = {"--no_such_flag=1", NULL};
        assert_int_equal(load(a), 2);
    }
}

static void test_yaml_file(void **state) {
    const mc__master_config_t *c = &g_o.cfg;
    char arg[96], err[512];
    (void)state;
    write_file("yaml", "# a deployment's master\n"
                       "enable_metric_reporting: true\n"
                       "metrics_port: 9100\n"
                       "rpc_port: 50100\n"
                       "rpc_thread_num: 8\n"
                       "rpc_address: \"127.0.0.1\"\n"
                       "rpc_interface: \"\"\n"
                       "rpc_conn_timeout_seconds: 0\n"
                       "default_kv_lease_ttl: 5s\n"
                       "eviction_high_watermark_ratio: 1.0  # no proactive eviction\n"
                       "enable_ha: false\n"
                       "etcd_endpoints: \"http://localhost:2379\"\n"
                       "client_live_ttl_sec: 60\n"
                       "colour: blue\n");
    snprintf(arg, sizeof(arg), "--config_path=%s", g_path);
    {
        const char *a[] = {arg, "--rpc_thread_num=2", NULL};
        assert_int_equal(load(a), 0);
        assert_int_equal(c->port, 50100);
        assert_int_equal(c->metrics_port, 9100);
        assert_int_equal(c->rpc_thread_num, 2); /* the command line wins */
        assert_string_equal(c->rpc_address, "127.0.0.1");
        assert_int_equal(c->default_kv_lease_ttl_ms, 5000);
        assert_true(c->eviction_high_watermark_ratio == 1.0);
        assert_int_equal(c->client_ttl_s, 60);
        assert_non_null(strstr(g_notes, ":14: unknown key 'colour' ignored"));
    }
    write_file("yml", "default_kv_lease_ttl: soon\n");
    assert_int_equal(load_file(g_path, err, sizeof(err)), MC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, ":1: invalid value 'soon' for 'default_kv_lease_ttl'"));
    write_file("yaml", "a: 1\nnested:\n  b: 2\n");
    assert_int_equal(load_file(g_path, err, sizeof(err)), MC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "line 3: indented line"));
    write_file("yaml", "metrics_port:\n");
    assert_int_equal(load_file(g_path, err, sizeof(err)), MC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "'metrics_port' has no value"));
    write_file("yaml", "enable_cxl: true\n");
    assert_int_equal(load_file(g_path, err, sizeof(err)), MC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "--enable_cxl: CXL memory: not supported"));
    unlink(g_path);
}

static void test_json_file(void **state) {
    const mc__master_config_t *c = &g_o.cfg;
    char err[512];
    (void)state;
    write_file("json", "{\"rpc_port\": 50200, \"default_kv_lease_ttl\": \"2s\","
                       " \"default_kv_soft_pin_ttl\": 60000, \"client_live_ttl_sec\": 7,"
                       " \"cluster_id\": \"json-cluster\", \"kv_events_bind_endpoint\":"
                       " \"tcp://0.0.0.0:5557\", \"colour\": \"blue\", \"config_path\": \"x\"}");
    assert_int_equal(load_file(g_path, err, sizeof(err)), 0);
    assert_int_equal(c->port, 50200);
    assert_int_equal(c->default_kv_lease_ttl_ms, 2000);
    assert_int_equal(c->default_kv_soft_pin_ttl_ms, 60000);
    assert_int_equal(c->client_ttl_s, 7);
    assert_string_equal(c->cluster_id, "json-cluster");
    assert_string_equal(c->kv_events.bind_endpoint, "tcp://0.0.0.0:5557");
    assert_null(g_o.config_path);
    write_file("json", "{\"default_kv_lease_ttl\": -1}");
    assert_int_equal(load_file(g_path, err, sizeof(err)), MC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "default_kv_lease_ttl"));
    write_file("json", "{\"default_kv_lease_ttl\": \"10 days\"}");
    assert_int_equal(load_file(g_path, err, sizeof(err)), MC_ERR_INVALID_ARGUMENT);
    write_file("json", "{\"eviction\": {\"ratio\": 0.1}, \"metrics_port\": {\"a\": 1}}");
    assert_int_equal(load_file(g_path, err, sizeof(err)), MC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "'metrics_port' in the config file must be a single value"));
    write_file("json", "[1, 2");
    assert_int_equal(load_file(g_path, err, sizeof(err)), MC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "not a JSON object"));
    unlink(g_path);
    assert_int_equal(load_file("/nonexistent/master.yaml", err, sizeof(err)),
                     MC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "cannot read config file '/nonexistent/master.yaml'"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_defaults),
        cmocka_unit_test(test_reference_spellings),
        cmocka_unit_test(test_durations),
        cmocka_unit_test(test_missing_features_refused),
        cmocka_unit_test(test_root_fs_dir_must_exist),
        cmocka_unit_test(test_ha_flags),
        cmocka_unit_test(test_disk_tier_flags),
        cmocka_unit_test(test_knobs_of_features_that_are_off),
        cmocka_unit_test(test_yaml_file),
        cmocka_unit_test(test_json_file),
    };
    int failed = cmocka_run_group_tests_name("store_master_flags", tests, NULL, NULL);
    mc__master_opts_free(&g_o);
    return failed;
}
