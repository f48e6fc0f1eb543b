/* The RPC channel's client: one request and its answer per send, over a pooled connection. */
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/auth.h"
#include "mooncake/common/log.h"
#include "mooncake/common/proc.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "peer_conn.h"
#include "rpc_channel_proto.h"

#define MC__RPC_DEFAULT_TIMEOUT_MS 30000
#define MC__RPC_DEFAULT_POOL 100

typedef struct mc__rpc_idle {
    struct mc__rpc_idle *next;
    int fd;
    char target[]; /* "host:port" as the caller spelled it */
} mc__rpc_idle_t;

struct mc_rpc_client {
    size_t pool_size;
    int timeout_ms;
    mc_auth_t auth;
    pthread_mutex_t mu; /* guards idle and next_id */
    mc__rpc_idle_t *idle;
    uint64_t next_id;
    /* The process that created the client: a fork() child's copy would share its pooled
     * connections (and request ids) with the parent, so there every send is refused. */
    int owner_pid;
};

int mc_rpc_client_create(const mc_rpc_client_options_t *o, mc_rpc_client_t **out) {
    mc_rpc_client_t *c = NULL;
    int rc = MC_ERR_INVALID_ARGUMENT;
    if (!out)
        goto out;
    *out = NULL;
    if (o && o->timeout_ms < 0)
        goto out;
    c = mc__calloc(1, sizeof(*c));
    if (!c) {
        rc = MC_ERR_MEMORY;
        goto out;
    }
    rc = mc__auth_init(&c->auth, o ? o->cluster_secret : NULL, o ? o->cluster_secret_file : NULL);
    if (rc)
        goto out;
    c->pool_size = o && o->pool_size ? o->pool_size : MC__RPC_DEFAULT_POOL;
    c->timeout_ms = o && o->timeout_ms ? o->timeout_ms : MC__RPC_DEFAULT_TIMEOUT_MS;
    pthread_mutex_init(&c->mu, NULL);
    c->owner_pid = mc__pid();
    *out = c;
    c = NULL;
out:
    mc__free(c);
    return rc;
}

static int pool_take(mc_rpc_client_t *c, const char *target) {
    int fd = -1;
    pthread_mutex_lock(&c->mu);
    for (mc__rpc_idle_t **pp = &c->idle; *pp; pp = &(*pp)->next) {
        if (strcmp((*pp)->target, target) == 0) {
            mc__rpc_idle_t *i = *pp;
            *pp = i->next;
            fd = i->fd;
            mc__free(i);
            break;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return fd;
}

static void pool_put(mc_rpc_client_t *c, const char *target, int fd) {
    size_t n = 0, tl = strlen(target);
    mc__rpc_idle_t *i = NULL;
    pthread_mutex_lock(&c->mu);
    for (mc__rpc_idle_t *p = c->idle; p; p = p->next)
        n += strcmp(p->target, target) == 0;
    if (n < c->pool_size && (i = mc__malloc(sizeof(*i) + tl + 1)) != NULL) {
        memcpy(i->target, target, tl + 1);
        i->fd = fd;
        i->next = c->idle;
        c->idle = i;
    }
    pthread_mutex_unlock(&c->mu);
    if (!i)
        close(fd);
}

static int dial(mc_rpc_client_t *c, const char *host, uint16_t port, uint64_t dl) {
    int fd = mc__tcp_connect(host, port, dl);
    int rc;
    if (fd < 0 || !c->auth.enabled)
        return fd;
    rc = mc__auth_client(&c->auth, fd, dl);
    if (rc) {
        close(fd);
        return rc;
    }
    return fd;
}

/* One request (header + meta in head, then data) and its answer on fd. 0 with *remote_err the
 * server's verdict, or MC_ERR_SOCKET (the connection is unusable). */
static int exchange(int fd, uint8_t type, uint64_t id, const mc_buf_t *head, const void *data,
                    size_t len, uint64_t dl, int *remote_err) {
    mc_frame_header_t h;
    if (mc__send2(fd, head->data, head->len, data, len, dl))
        return MC_ERR_SOCKET;
    return mc__peer_read_reply(fd, type, id, 0, dl, &h, remote_err);
}

static int send_msg(mc_rpc_client_t *c, const char *target, uint8_t type, const char *dtype,
                    const uint64_t *shape, size_t ndim, const void *data, size_t len) {
    char host[256];
    uint16_t port = 0;
    mc_buf_t head, meta;
    uint64_t id, dl;
    int rc = MC_ERR_INVALID_ARGUMENT;
    mc__buf_init(&head);
    mc__buf_init(&meta);
    if (c && c->owner_pid != mc__pid()) {
        MC_ERROR("rpc channel: this client belongs to process %d; this is process %d (a fork() "
                 "child): its sends fail with CONTEXT (-202); create a client here",
                 c->owner_pid, mc__pid());
        rc = MC_ERR_CONTEXT;
        goto out;
    }
    if (!c || !target || (len && !data) || len > MC_RPC_MAX_MESSAGE ||
        mc__split_host_port(target, host, sizeof(host), &port) || port == 0)
        goto out;
    pthread_mutex_lock(&c->mu);
    id = ++c->next_id;
    pthread_mutex_unlock(&c->mu);
    if (type == MC__RPC_TENSOR && (rc = mc__rpc_encode_tensor_meta(&meta, dtype, shape, ndim)))
        goto out;
    {
        mc_frame_header_t h = {.magic = MC_FRAME_MAGIC,
                               .version = MC_FRAME_VERSION,
                               .type = type,
                               .request_id = id,
                               .body_len = meta.len + len};
        uint8_t hb[MC_FRAME_HEADER_SIZE];
        mc__frame_header_encode(&h, hb);
        mc__buf_put(&head, hb, sizeof(hb));
        mc__buf_put(&head, meta.data, meta.len);
    }
    rc = MC_ERR_MEMORY;
    if (head.failed)
        goto out;
    dl = mc__now_ms() + (uint64_t)c->timeout_ms;
    /* A pooled connection the server has since closed (it evicts idle ones when full) fails
     * before the server read anything: then one fresh connection is tried. */
    for (int attempt = 0; attempt < 2; attempt++) {
        int remote_err = 0;
        int fd = pool_take(c, target);
        int pooled = fd >= 0;
        if (!pooled) {
            fd = dial(c, host, port, dl);
            if (fd < 0) {
                rc = fd;
                goto out;
            }
        }
        rc = exchange(fd, type, id, &head, data, len, dl, &remote_err);
        if (rc == 0) {
            pool_put(c, target, fd);
            rc = remote_err;
            goto out;
        }
        close(fd);
        if (!pooled)
            goto out;
    }
out:
    mc__buf_free(&head);
    mc__buf_free(&meta);
    return rc;
}

int mc_rpc_client_send(mc_rpc_client_t *c, const char *target, const void *data, size_t len) {
    return send_msg(c, target, MC__RPC_DATA, NULL, NULL, 0, data, len);
}

int mc_rpc_client_send_tensor(mc_rpc_client_t *c, const char *target, const char *dtype,
                              const uint64_t *shape, size_t ndim, const void *data, size_t len) {
    return send_msg(c, target, MC__RPC_TENSOR, dtype, shape, ndim, data, len);
}

void mc_rpc_client_destroy(mc_rpc_client_t *c) {
    if (!c)
        return;
    /* close() only, never shutdown(): in a fork() child these are the parent's connections too */
    while (c->idle) {
        mc__rpc_idle_t *i = c->idle;
        c->idle = i->next;
        close(i->fd);
        mc__free(i);
    }
    pthread_mutex_destroy(&c->mu);
    mc__free(c);
}
