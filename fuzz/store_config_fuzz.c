/* Fuzzes the store client's JSON config loader (MOONCAKE_CONFIG_PATH) through its one entry,
 * mc_store_config_load_file: the input is the file. It lives in a memfd opened by path
 * (/proc/self/fd/N), so no disk is touched. A load that succeeds leaves terminated strings and
 * is idempotent: loading the same file again on top changes nothing. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_quiet.h"
#include "mooncake/error.h"
#include "mooncake/store.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The loader logs one error line for every file it refuses, which is nearly every input. */
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    mc__fuzz_quiet();
    return 0;
}

static int mc__fuzz_terminated(const mc_store_config_t *c) {
    return strnlen(c->local_hostname, sizeof(c->local_hostname)) < sizeof(c->local_hostname) &&
           strnlen(c->metadata_server, sizeof(c->metadata_server)) < sizeof(c->metadata_server) &&
           strnlen(c->protocol, sizeof(c->protocol)) < sizeof(c->protocol) &&
           strnlen(c->device_name, sizeof(c->device_name)) < sizeof(c->device_name) &&
           strnlen(c->master_server_addr, sizeof(c->master_server_addr)) <
               sizeof(c->master_server_addr) &&
           strnlen(c->cluster_secret, sizeof(c->cluster_secret)) < sizeof(c->cluster_secret) &&
           strnlen(c->cluster_secret_file, sizeof(c->cluster_secret_file)) <
               sizeof(c->cluster_secret_file);
}

static int mc__fuzz_same(const mc_store_config_t *a, const mc_store_config_t *b) {
    return !strcmp(a->local_hostname, b->local_hostname) &&
           !strcmp(a->metadata_server, b->metadata_server) && !strcmp(a->protocol, b->protocol) &&
           !strcmp(a->device_name, b->device_name) &&
           !strcmp(a->master_server_addr, b->master_server_addr) &&
           !strcmp(a->cluster_secret, b->cluster_secret) &&
           !strcmp(a->cluster_secret_file, b->cluster_secret_file) &&
           a->global_segment_size == b->global_segment_size &&
           a->local_buffer_size == b->local_buffer_size &&
           a->heartbeat_interval_ms == b->heartbeat_interval_ms &&
           a->rpc_timeout_ms == b->rpc_timeout_ms && a->engine == b->engine;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int mfd = -1;
    static char path[64];
    mc_store_config_t c, again;
    int rc;
    if (mfd < 0) {
        mfd = memfd_create("mc-fuzz-store-config", MFD_CLOEXEC);
        if (mfd < 0)
            abort();
        snprintf(path, sizeof(path), "/proc/self/fd/%d", mfd);
    }
    if (ftruncate(mfd, 0) != 0 || (size && pwrite(mfd, data, size, 0) != (ssize_t)size))
        abort();
    mc_store_config_init(&c);
    rc = mc_store_config_load_file(&c, path);
    if (rc == 0) {
        if (!mc__fuzz_terminated(&c))
            abort();
        memcpy(&again, &c, sizeof(again));
        if (mc_store_config_load_file(&again, path) != 0 || !mc__fuzz_same(&c, &again))
            abort();
    } else if (rc != MC_ERR_INVALID_PARAMS) {
        /* the file exists and is small: only a bad document (or key, or value) can fail */
        abort();
    }
    return 0;
}
