/* The RPC channel's server: one thread per connection (the shared connection server), one
 * message at a time per connection, the handler called before the answer is sent. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/auth.h"
#include "mooncake/common/conn_server.h"
#include "mooncake/common/log.h"
#include "mooncake/common/proc.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "proto.h"
#include "rpc_channel_proto.h"

#define MC__RPC_DEFAULT_TIMEOUT_MS 30000
/* Bodies are read in pieces of this size, so memory grows with the bytes that actually came,
 * never with what a header announced. */
#define MC__RPC_READ_CHUNK (4u << 20)

struct mc_rpc_server {
    char host[256];
    uint16_t port;
    int timeout_ms;
    int max_conns;
    mc_rpc_handler_t handler;
    void *ctx;
    mc_auth_t auth;
    pthread_mutex_t life; /* serializes start and stop */
    pthread_mutex_t mu;   /* guards cs and running; wait sleeps on cv */
    pthread_cond_t cv;
    mc_conn_server_t *cs;
    int running;
    /* The process that started it: in a fork() child the listener and the connection threads
     * are the parent's, so the child neither waits for them nor stops them (see stop). */
    _Atomic int owner_pid;
};

static int mc__rpc_server_inherited(const mc_rpc_server_t *s) {
    int owner = atomic_load(&s->owner_pid);
    return owner != 0 && owner != mc__pid();
}

static void peer_name(int fd, char *out, size_t cap) {
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    char ip[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    snprintf(out, cap, "?");
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) != 0)
        return;
    if (ss.ss_family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
        port = ntohs(a->sin_port);
        snprintf(out, cap, "%s:%u", ip, port);
    } else if (ss.ss_family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip));
        port = ntohs(a->sin6_port);
        snprintf(out, cap, "[%s]:%u", ip, port);
    }
}

static int reply(int fd, const mc_frame_header_t *q, int code, uint64_t dl) {
    uint8_t hb[MC_FRAME_HEADER_SIZE];
    mc_buf_t b;
    int rc;
    if (code == 0) {
        mc__te_encode_reply(hb, q->type, q->request_id, 0);
        return mc__send_all(fd, hb, sizeof(hb), dl);
    }
    mc__buf_init(&b);
    rc = mc__te_encode_error(&b, q->type, q->request_id, code, mc_strerror(code));
    if (!rc)
        rc = mc__send_all(fd, b.data, b.len, dl);
    mc__buf_free(&b);
    return rc;
}

/* Reads body_len bytes into b (reset first). */
static int read_body(int fd, mc_buf_t *b, uint64_t body_len, uint64_t dl) {
    mc__buf_reset(b);
    while (b->len < body_len) {
        uint64_t left = body_len - b->len;
        size_t n = left < MC__RPC_READ_CHUNK ? (size_t)left : MC__RPC_READ_CHUNK;
        if (mc__buf_reserve(b, n) || mc__recv_all(fd, b->data + b->len, n, dl))
            return MC_ERR_SOCKET;
        b->len += n;
    }
    return 0;
}

/* Hands one received body to the handler. MC_ERR_INVALID_ARGUMENT for a bad tensor header. */
static int deliver(mc_rpc_server_t *s, const char *source, uint8_t type, const mc_buf_t *b) {
    mc__rpc_tensor_view_t tv;
    mc_rpc_message_t m = {.kind = MC_RPC_DATA, .source = source, .dtype = ""};
    const uint8_t *body = b->len ? b->data : (const uint8_t *)"";
    m.data = body;
    m.len = b->len;
    if (type == MC__RPC_TENSOR) {
        if (mc__rpc_decode_tensor_meta(body, b->len, &tv))
            return MC_ERR_INVALID_ARGUMENT;
        m.kind = MC_RPC_TENSOR;
        m.data = body + tv.data_off;
        m.len = b->len - tv.data_off;
        m.dtype = tv.dtype;
        m.ndim = tv.ndim;
        m.shape = tv.shape;
    }
    if (s->handler)
        s->handler(s->ctx, &m);
    return 0;
}

static void serve(void *ctx, int fd) {
    mc_rpc_server_t *s = ctx;
    char source[INET6_ADDRSTRLEN + 16];
    uint8_t hb[MC_FRAME_HEADER_SIZE];
    mc_frame_header_t h;
    mc_buf_t b;
    mc__buf_init(&b);
    peer_name(fd, source, sizeof(source));
    if (s->auth.enabled && mc__auth_server(&s->auth, fd, mc__now_ms() + (uint64_t)s->timeout_ms))
        goto out;
    for (;;) {
        uint64_t dl;
        int rc;
        /* between messages the connection is idle and waits without a deadline; stop() shuts
         * the socket down, which ends the wait */
        mc__conn_idle(1);
        if (mc__recv_all(fd, hb, 1, 0))
            break;
        mc__conn_idle(0);
        dl = mc__now_ms() + (uint64_t)s->timeout_ms;
        if (mc__recv_all(fd, hb + 1, sizeof(hb) - 1, dl) ||
            mc__frame_header_decode(hb, sizeof(hb), MC__RPC_MAX_BODY, &h) ||
            (h.flags & MC_FRAME_F_REPLY)) {
            MC_DEBUG("rpc channel: bad frame from %s; closing", source);
            break;
        }
        if (h.type != MC__RPC_DATA && h.type != MC__RPC_TENSOR) {
            MC_DEBUG("rpc channel: unknown message type %u from %s", (unsigned)h.type, source);
            reply(fd, &h, MC_ERR_NOT_IMPLEMENTED, dl);
            break; /* its body was not read: the stream is out of step */
        }
        if (read_body(fd, &b, h.body_len, dl))
            break;
        rc = deliver(s, source, h.type, &b);
        if (reply(fd, &h, rc, dl))
            break;
        /* a big message's buffer is not kept for the connection's lifetime */
        if (b.cap > MC__RPC_READ_CHUNK) {
            mc__buf_free(&b);
            mc__buf_init(&b);
        }
    }
out:
    mc__buf_free(&b);
}

int mc_rpc_server_create(const mc_rpc_server_options_t *o, mc_rpc_server_t **out) {
    mc_rpc_server_t *s = NULL;
    int rc = MC_ERR_INVALID_ARGUMENT;
    if (!out)
        goto out;
    *out = NULL;
    if (!o || !o->listen_address || o->timeout_ms < 0 || o->max_conns < 0)
        goto out;
    s = mc__calloc(1, sizeof(*s));
    if (!s) {
        rc = MC_ERR_MEMORY;
        goto out;
    }
    if (mc__split_host_port(o->listen_address, s->host, sizeof(s->host), &s->port)) {
        MC_ERROR("rpc channel: listen address \"%s\" is not host:port", o->listen_address);
        goto out;
    }
    if (strcmp(s->host, "0.0.0.0") == 0)
        s->host[0] = '\0';
    rc = mc__auth_init(&s->auth, o->cluster_secret, o->cluster_secret_file);
    if (rc)
        goto out;
    s->timeout_ms = o->timeout_ms ? o->timeout_ms : MC__RPC_DEFAULT_TIMEOUT_MS;
    s->max_conns = o->max_conns;
    s->handler = o->handler;
    s->ctx = o->ctx;
    pthread_mutex_init(&s->life, NULL);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    *out = s;
    s = NULL;
    rc = 0;
out:
    mc__free(s);
    return rc;
}

int mc_rpc_server_start(mc_rpc_server_t *s) {
    mc_conn_server_t *cs = NULL;
    int rc = MC_ERR_INVALID_ARGUMENT;
    if (!s)
        return rc;
    if (mc__rpc_server_inherited(s))
        return MC_ERR_CONTEXT;
    pthread_mutex_lock(&s->life);
    if (s->cs)
        goto out;
    mc_conn_server_opts_t co = {
        .name = "rpc-channel",
        .listen_fd = -1,
        .host = s->host,
        .port = s->port,
        .max_conns = s->max_conns,
        .serve = serve,
        .ctx = s,
    };
    rc = mc__conn_server_start(&co, &cs);
    if (rc) {
        MC_ERROR("rpc channel: cannot listen on %s:%u", s->host[0] ? s->host : "0.0.0.0",
                 (unsigned)s->port);
        rc = rc == MC_ERR_DNS ? rc : MC_ERR_SOCKET;
        goto out;
    }
    pthread_mutex_lock(&s->mu);
    s->cs = cs;
    s->running = 1;
    atomic_store(&s->owner_pid, mc__pid());
    pthread_mutex_unlock(&s->mu);
out:
    pthread_mutex_unlock(&s->life);
    return rc;
}

int mc_rpc_server_port(const mc_rpc_server_t *s) {
    int port = MC_ERR_INVALID_ARGUMENT;
    if (!s)
        return port;
    pthread_mutex_lock((pthread_mutex_t *)&s->mu);
    if (s->cs)
        port = mc__conn_server_port(s->cs);
    pthread_mutex_unlock((pthread_mutex_t *)&s->mu);
    return port;
}

void mc_rpc_server_wait(mc_rpc_server_t *s) {
    if (!s || mc__rpc_server_inherited(s)) /* nothing of it runs in this process */
        return;
    pthread_mutex_lock(&s->mu);
    while (s->running)
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

void mc_rpc_server_stop(mc_rpc_server_t *s) {
    mc_conn_server_t *cs;
    /* A fork() child stops nothing: waking the accept thread or shutting connections down would
     * stop the parent's server. Its destroy closes the child's copies only. */
    if (!s || mc__rpc_server_inherited(s))
        return;
    pthread_mutex_lock(&s->life);
    pthread_mutex_lock(&s->mu);
    cs = s->cs;
    pthread_mutex_unlock(&s->mu);
    if (cs)
        mc__conn_server_stop(cs); /* joins every connection thread */
    pthread_mutex_lock(&s->mu);
    s->cs = NULL;
    s->running = 0;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_unlock(&s->life);
}

void mc_rpc_server_destroy(mc_rpc_server_t *s) {
    if (!s)
        return;
    if (mc__rpc_server_inherited(s)) {
        mc__conn_server_forget(s->cs); /* no lock taken: a parent's thread may have held one */
        mc__free(s);
        return;
    }
    mc_rpc_server_stop(s);
    pthread_mutex_destroy(&s->life);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    mc__free(s);
}
