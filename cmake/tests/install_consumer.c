/* A C user of the installed library: only <mooncake/...> headers, libmooncake_core and
 * libmooncake_common. One engine writes into and reads back from its own segment over tcp, bad
 * arguments get their documented codes, and a store config rejects an unknown key. Exit status 0
 * only when every step did what the headers promise. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mooncake/error.h>
#include <mooncake/store.h>
#include <mooncake/transfer_engine.h>

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "install_consumer: check failed: %s (line %d)\n", #cond, __LINE__);    \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

int main(void) {
    enum { LEN = 1 << 16 };
    int status = 1;
    mc_engine_t *e = NULL;
    mc_store_config_t cfg;
    char *src = malloc(LEN), *dst = malloc(LEN);
    CHECK(src && dst);
    for (size_t i = 0; i < LEN; i++)
        src[i] = (char)(i * 7 + 3);
    memset(dst, 0, LEN);

    /* The error table answers through the installed library. */
    CHECK(strcmp(mc_err_name(MC_ERR_INVALID_PARAMS), "INVALID_PARAMS") == 0);
    CHECK(mc_strerror(MC_ERR_INVALID_PARAMS)[0] != '\0');

    CHECK(mc_engine_create(&e) == 0);
    mc_engine_options_t opts;
    memset(&opts, 0, sizeof(opts));
    opts.local_server_name = "127.0.0.1";
    opts.metadata_conn = "P2PHANDSHAKE";
    opts.protocol = "tcp";
    CHECK(mc_engine_init(e, &opts) == 0);
    CHECK(mc_engine_register_memory(e, src, LEN, "cpu:0") == 0);
    CHECK(mc_engine_register_memory(e, dst, LEN, "cpu:0") == 0);
    /* overlapping a registration is refused, and leaves the first one in place */
    CHECK(mc_engine_register_memory(e, src + 16, 16, "cpu:0") == MC_ERR_ADDRESS_OVERLAPPED);

    mc_segment_id_t seg = -1;
    CHECK(mc_engine_open_segment(e, mc_engine_local_name(e), &seg) == 0 && seg >= 0);
    mc_request_t w = {.opcode = MC_OPCODE_WRITE,
                      .source = src,
                      .target_id = seg,
                      .target_offset = (uint64_t)(uintptr_t)dst,
                      .length = LEN};
    CHECK(mc_engine_transfer_sync(e, &w, 1) == 0);
    CHECK(memcmp(src, dst, LEN) == 0);
    /* a write outside registered memory is refused by the serving side */
    char unregistered[64];
    mc_request_t bad = {.opcode = MC_OPCODE_WRITE,
                        .source = src,
                        .target_id = seg,
                        .target_offset = (uint64_t)(uintptr_t)unregistered,
                        .length = 64};
    CHECK(mc_engine_transfer_sync(e, &bad, 1) != 0);

    mc_store_config_init(&cfg);
    CHECK(mc_store_config_set(&cfg, "no_such_key", "1") == MC_ERR_INVALID_PARAMS);
    CHECK(mc_store_config_set(&cfg, "protocol", "tcp") == 0);

    printf("install_consumer: engine %s over %s, %d bytes written and checked\n",
           mc_engine_local_name(e), mc_engine_protocol(e), LEN);
    status = 0;
out:
    mc_engine_destroy(e);
    free(src);
    free(dst);
    return status;
}
