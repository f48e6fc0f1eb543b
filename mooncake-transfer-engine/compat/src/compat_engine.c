/* Engine life cycle, transports and memory registration of the reference C interface. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "compat_internal.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/log.h"
#include "transfer_engine_c.h"

/* The reference's P2PHANDSHAKE callers pass a bare IP as the server name and the port apart;
 * our engine takes "host" or "host:port" in one string. */
static char *mc__compat_server_name(const char *local_server_name, const char *ip,
                                    uint64_t rpc_port) {
    const char *base = (local_server_name && *local_server_name) ? local_server_name : ip;
    char *name = NULL;
    size_t cap = 0;
    if (!base || !*base)
        base = "127.0.0.1";
    /* A bracketed IPv6 host or a plain host without ':' has no port yet. */
    int has_port = base[0] == '[' ? strstr(base, "]:") != NULL : strchr(base, ':') != NULL;
    if (rpc_port == 0 || has_port || rpc_port > 65535)
        return mc__strdup(base);
    cap = strlen(base) + 8;
    name = mc__malloc(cap);
    if (name)
        snprintf(name, cap, "%s:%u", base, (unsigned)rpc_port);
    return name;
}

transfer_engine_t createTransferEngine(const char *metadata_conn_string,
                                       const char *local_server_name, const char *ip_or_host_name,
                                       uint64_t rpc_port, int auto_discover) {
    mc__compat_t *c = NULL;
    mc__compat_t *ret = NULL;
    char *name = NULL;
    mc_engine_options_t opts = {.metadata_conn = metadata_conn_string, .protocol = "auto"};
    int rc;
    (void)auto_discover; /* transports are picked per peer either way */

    c = mc__calloc(1, sizeof(*c));
    if (!c)
        goto out;
    pthread_mutex_init(&c->mu, NULL);
    name = mc__compat_server_name(local_server_name, ip_or_host_name, rpc_port);
    if (!name)
        goto out;
    rc = mc_engine_create(&c->engine);
    if (rc != 0) {
        MC_ERROR("createTransferEngine: %s", mc_strerror(rc));
        goto out;
    }
    opts.local_server_name = name;
    rc = mc_engine_init(c->engine, &opts);
    if (rc != 0) {
        MC_ERROR("createTransferEngine(%s, %s): %s",
                 metadata_conn_string ? metadata_conn_string : "P2PHANDSHAKE", name,
                 mc_strerror(rc));
        goto out;
    }
    ret = c;
    c = NULL;
out:
    mc__free(name);
    if (c) {
        mc_engine_destroy(c->engine);
        pthread_mutex_destroy(&c->mu);
        mc__free(c);
    }
    return ret;
}

void destroyTransferEngine(transfer_engine_t engine) {
    mc__compat_t *c = engine;
    if (!c)
        return;
    mc_engine_destroy(c->engine);
    mc__compat_batches_free(c);
    pthread_mutex_destroy(&c->mu);
    mc__free(c);
}

int getLocalIpAndPort(transfer_engine_t engine, char *buf_out, size_t buf_len) {
    mc__compat_t *c = engine;
    const char *name = NULL;
    int n;
    if (!c || !buf_out || buf_len == 0)
        return MC_ERR_INVALID_ARGUMENT;
    name = mc_engine_local_name(c->engine);
    n = snprintf(buf_out, buf_len, "%s", name ? name : "");
    /* A truncated name would open the wrong segment later; say so now. */
    return (n < 0 || (size_t)n >= buf_len) ? MC_ERR_INVALID_ARGUMENT : 0;
}

/* Protocols the reference knows; the hardware ones run over tcp here. */
static int mc__compat_known_proto(const char *proto, int *fallback) {
    static const char *const served[] = {"tcp", "shm", "auto"};
    static const char *const hardware[] = {"rdma",  "nvmeof", "nvlink", "nvlink_intra", "cxl",
                                           "barex", "efa",    "ascend", "hip"};
    *fallback = 0;
    if (!proto)
        return 0;
    for (size_t i = 0; i < sizeof(served) / sizeof(served[0]); i++)
        if (strcasecmp(proto, served[i]) == 0)
            return 1;
    for (size_t i = 0; i < sizeof(hardware) / sizeof(hardware[0]); i++)
        if (strcasecmp(proto, hardware[i]) == 0) {
            *fallback = 1;
            return 1;
        }
    return 0;
}

transport_t installTransport(transfer_engine_t engine, const char *proto, void **args) {
    mc__compat_t *c = engine;
    int fallback = 0;
    (void)args;
    if (!c)
        return NULL;
    if (!mc__compat_known_proto(proto, &fallback)) {
        MC_ERROR("installTransport: unknown protocol '%s'", proto ? proto : "(null)");
        return NULL;
    }
    if (fallback)
        MC_WARN("installTransport: %s is not available on this host; using tcp/shm", proto);
    /* Callers only test the handle against NULL; the engine is a stable non-NULL token. */
    return c->engine;
}

int uninstallTransport(transfer_engine_t engine, const char *proto) {
    int fallback = 0;
    if (!engine || !mc__compat_known_proto(proto, &fallback))
        return MC_ERR_INVALID_ARGUMENT;
    return 0;
}

int registerLocalMemory(transfer_engine_t engine, void *addr, size_t length, const char *location,
                        int remote_accessible) {
    mc__compat_t *c = engine;
    (void)remote_accessible; /* every registration is published; the peer checks bounds */
    if (!c)
        return MC_ERR_INVALID_ARGUMENT;
    return mc_engine_register_memory(c->engine, addr, length,
                                     (location && *location) ? location : "*");
}

int unregisterLocalMemory(transfer_engine_t engine, void *addr) {
    mc__compat_t *c = engine;
    if (!c)
        return MC_ERR_INVALID_ARGUMENT;
    return mc_engine_unregister_memory(c->engine, addr);
}

int registerLocalMemoryBatch(transfer_engine_t engine, buffer_entry_t *buffer_list,
                             size_t buffer_len, const char *location) {
    mc__compat_t *c = engine;
    size_t done = 0;
    int rc = 0;
    if (!c || (!buffer_list && buffer_len > 0))
        return MC_ERR_INVALID_ARGUMENT;
    for (done = 0; done < buffer_len; done++) {
        rc = registerLocalMemory(engine, buffer_list[done].addr, buffer_list[done].length, location,
                                 1);
        if (rc != 0)
            goto out;
    }
out:
    /* All or nothing, so a caller can retry the whole list after fixing it. */
    if (rc != 0)
        while (done-- > 0)
            mc_engine_unregister_memory(c->engine, buffer_list[done].addr);
    return rc;
}

int unregisterLocalMemoryBatch(transfer_engine_t engine, void **addr_list, size_t addr_len) {
    mc__compat_t *c = engine;
    int first = 0;
    if (!c || (!addr_list && addr_len > 0))
        return MC_ERR_INVALID_ARGUMENT;
    /* Keep going past a failure: the rest should still be released. */
    for (size_t i = 0; i < addr_len; i++) {
        int rc = mc_engine_unregister_memory(c->engine, addr_list[i]);
        if (rc != 0 && first == 0)
            first = rc;
    }
    return first;
}

bool supportFileBuffer(transfer_engine_t engine) {
    (void)engine;
    return false;
}

int registerLocalFile(transfer_engine_t engine, const char *path, size_t size, file_id_t *id) {
    (void)engine, (void)path, (void)size, (void)id;
    return MC_ERR_NOT_IMPLEMENTED;
}

int unregisterLocalFile(transfer_engine_t engine, const char *path) {
    (void)engine, (void)path;
    return MC_ERR_NOT_IMPLEMENTED;
}
