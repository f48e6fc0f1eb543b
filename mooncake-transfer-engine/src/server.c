/* The RPC/data listener: one thread per connection (peers pool their connections, so there are
 * few). Payloads move straight between the socket and registered memory. Every request is checked
 * against the current registrations; a bad request gets an error reply, broken framing closes only
 * that connection. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/log.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "proto.h"
#include "te_internal.h"

#define MC__SERVER_MAX_CONNS 1024
#define MC__SCRATCH (MC__TE_MAX_NOTIFY_BODY)

typedef struct mc__conn {
    int fd;
    struct mc__conn *prev, *next;
    struct mc__server *s;
} mc__conn_t;

struct mc__server {
    mc_engine_t *e;
    int lfd;
    pthread_t accept_thr;
    pthread_mutex_t lock;
    pthread_cond_t idle;
    mc__conn_t *conns;
    int nconns;
    int stopping;
};

static int mc__reply_error(int fd, uint8_t type, uint64_t id, int code, const char *msg,
                           uint64_t deadline) {
    mc_buf_t b;
    int rc;
    mc__buf_init(&b);
    rc = mc__te_encode_error(&b, type, id, code, msg);
    if (!rc)
        rc = mc__send_all(fd, b.data, b.len, deadline);
    mc__buf_free(&b);
    return rc;
}

static int mc__reply_raw(int fd, uint8_t type, uint64_t id, const void *body, size_t n,
                         uint64_t deadline) {
    uint8_t hdr[MC_FRAME_HEADER_SIZE];
    mc__te_encode_reply(hdr, type, id, n);
    return mc__send2(fd, hdr, sizeof(hdr), body, n, deadline);
}

/* Reads and discards n bytes so the connection stays in step after a refused WRITE. */
static int mc__drain(int fd, uint8_t *scratch, uint64_t n, uint64_t deadline) {
    while (n) {
        size_t k = n < MC__SCRATCH ? (size_t)n : MC__SCRATCH;
        if (mc__recv_all(fd, scratch, k, deadline))
            return MC_ERR_SOCKET;
        n -= k;
    }
    return 0;
}

static int mc__serve_write(mc_engine_t *e, int fd, const mc_frame_header_t *h, uint8_t *scratch,
                           uint64_t deadline) {
    uint64_t addr = 0, len = 0;
    mc__pin_t pin;
    int rc;
    if (mc__recv_all(fd, scratch, MC__TE_RW_BODY, deadline) ||
        mc__te_decode_rw(h, scratch, MC__TE_RW_BODY, &addr, &len))
        return MC_ERR_SOCKET;
    /* Only this region is pinned across the receive, and the registry is not locked: an
     * unregister of another region, or other peers' requests, never wait on this peer. */
    if (mc__reg_pin(&e->reg, addr, len, fd, &pin) == 0) {
        rc = mc__recv_all(fd, (void *)(uintptr_t)addr, len, deadline);
        /* before the reply: once the initiator hears success the bytes are in place and the
         * region may be given back */
        mc__reg_unpin(&e->reg, &pin);
        if (rc)
            return MC_ERR_SOCKET;
        return mc__reply_raw(fd, h->type, h->request_id, NULL, 0, deadline);
    }
    if (mc__drain(fd, scratch, len, deadline))
        return MC_ERR_SOCKET;
    return mc__reply_error(fd, h->type, h->request_id, MC_ERR_ADDRESS_NOT_REGISTERED,
                           "write target not registered", deadline);
}

static int mc__serve_read(mc_engine_t *e, int fd, const mc_frame_header_t *h, uint8_t *scratch,
                          uint64_t deadline) {
    uint64_t addr = 0, len = 0;
    mc__pin_t pin;
    int rc;
    if (mc__recv_all(fd, scratch, MC__TE_RW_BODY, deadline) ||
        mc__te_decode_rw(h, scratch, MC__TE_RW_BODY, &addr, &len))
        return MC_ERR_SOCKET;
    if (mc__reg_pin(&e->reg, addr, len, fd, &pin) == 0) {
        rc = mc__reply_raw(fd, h->type, h->request_id, (const void *)(uintptr_t)addr, len,
                           deadline);
        mc__reg_unpin(&e->reg, &pin);
        return rc;
    }
    return mc__reply_error(fd, h->type, h->request_id, MC_ERR_ADDRESS_NOT_REGISTERED,
                           "read source not registered", deadline);
}

static int mc__serve_notify(mc_engine_t *e, int fd, const mc_frame_header_t *h, uint8_t *scratch,
                            uint64_t deadline) {
    mc__te_notify_view_t v;
    int rc;
    if (mc__recv_all(fd, scratch, h->body_len, deadline))
        return MC_ERR_SOCKET;
    rc = mc__te_decode_notify(scratch, h->body_len, &v);
    if (!rc)
        rc = mc__notify_push(e, v.from, v.from_len, v.name, v.name_len, v.msg, v.msg_len);
    if (rc)
        return mc__reply_error(fd, h->type, h->request_id, rc, "notify refused", deadline);
    return mc__reply_raw(fd, h->type, h->request_id, NULL, 0, deadline);
}

static int mc__serve_desc(mc_engine_t *e, int fd, const mc_frame_header_t *h, uint64_t deadline) {
    char *json = NULL;
    int rc = mc__engine_desc_json(e, &json);
    if (rc)
        rc = mc__reply_error(fd, h->type, h->request_id, rc, "descriptor unavailable", deadline);
    else
        rc = mc__reply_raw(fd, h->type, h->request_id, json, strlen(json), deadline);
    mc__free(json);
    return rc;
}

/* Serves one request; a nonzero return closes the connection. */
static int mc__serve_one(mc_engine_t *e, int fd, uint8_t *scratch) {
    uint8_t raw[MC_FRAME_HEADER_SIZE];
    mc_frame_header_t h;
    uint64_t deadline;
    int chk;
    /* idle connections wait without a deadline; stop() shuts the socket down to end the wait */
    if (mc__recv_all(fd, raw, sizeof(raw), 0))
        return MC_ERR_SOCKET;
    if (mc__frame_header_decode(raw, sizeof(raw), MC__TE_MAX_REQUEST_BODY, &h)) {
        MC_DEBUG("closing RPC connection: bad frame header (type %u, body %llu)", h.type,
                 (unsigned long long)h.body_len);
        return MC_ERR_INVALID_ARGUMENT;
    }
    chk = mc__te_check_request(&h);
    deadline = mc__now_ms() + (uint64_t)e->timeout_ms;
    if (chk == MC_ERR_NOT_IMPLEMENTED) {
        if (mc__drain(fd, scratch, h.body_len, deadline))
            return MC_ERR_SOCKET;
        return mc__reply_error(fd, h.type, h.request_id, MC_ERR_NOT_IMPLEMENTED,
                               "unknown message type", deadline);
    }
    if (chk) {
        MC_DEBUG("closing RPC connection: type %u with body %llu", h.type,
                 (unsigned long long)h.body_len);
        return chk;
    }
    switch (h.type) {
    case MC__TE_PING:
        return mc__reply_raw(fd, h.type, h.request_id, NULL, 0, deadline);
    case MC__TE_GET_DESC:
        return mc__serve_desc(e, fd, &h, deadline);
    case MC__TE_WRITE:
        return mc__serve_write(e, fd, &h, scratch, deadline);
    case MC__TE_READ:
        return mc__serve_read(e, fd, &h, scratch, deadline);
    case MC__TE_NOTIFY:
        return mc__serve_notify(e, fd, &h, scratch, deadline);
    default:
        return MC_ERR_INVALID_ARGUMENT;
    }
}

static void *mc__conn_main(void *arg) {
    mc__conn_t *c = arg;
    mc__server_t *s = c->s;
    uint8_t *scratch = mc__malloc(MC__SCRATCH);
    while (scratch && mc__serve_one(s->e, c->fd, scratch) == 0) {
    }
    mc__free(scratch);
    pthread_mutex_lock(&s->lock);
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    s->nconns--;
    close(c->fd);
    mc__free(c);
    /* after this unlock the server may be freed: touch nothing of it below */
    pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

static int mc__tune_socket(int fd) {
    int sz = 4 << 20;
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
    return 0;
}

static void *mc__accept_main(void *arg) {
    mc__server_t *s = arg;
    for (;;) {
        int fd = mc__accept(s->lfd);
        mc__conn_t *c = NULL;
        pthread_t thr;
        pthread_attr_t attr;
        int ok = 0;
        if (fd < 0) {
            pthread_mutex_lock(&s->lock);
            ok = s->stopping;
            pthread_mutex_unlock(&s->lock);
            if (ok)
                break;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                usleep(10000);
            continue;
        }
        mc__tune_socket(fd);
        pthread_mutex_lock(&s->lock);
        if (!s->stopping && s->nconns < MC__SERVER_MAX_CONNS)
            c = mc__calloc(1, sizeof(*c));
        if (c) {
            c->fd = fd;
            c->s = s;
            c->next = s->conns;
            if (s->conns)
                s->conns->prev = c;
            s->conns = c;
            s->nconns++;
            pthread_attr_init(&attr);
            pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
            ok = pthread_create(&thr, &attr, mc__conn_main, c) == 0;
            pthread_attr_destroy(&attr);
            if (!ok) {
                s->conns = c->next;
                if (c->next)
                    c->next->prev = NULL;
                s->nconns--;
                mc__free(c);
            }
        }
        pthread_mutex_unlock(&s->lock);
        if (!ok)
            close(fd);
    }
    return NULL;
}

int mc__server_start(mc_engine_t *e, int lfd, mc__server_t **out) {
    mc__server_t *s = mc__calloc(1, sizeof(*s));
    if (!s)
        return MC_ERR_MEMORY;
    s->e = e;
    s->lfd = lfd;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->idle, NULL);
    if (pthread_create(&s->accept_thr, NULL, mc__accept_main, s)) {
        pthread_mutex_destroy(&s->lock);
        pthread_cond_destroy(&s->idle);
        mc__free(s);
        return MC_ERR_MEMORY;
    }
    *out = s;
    return 0;
}

void mc__server_stop(mc__server_t *s) {
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    s->stopping = 1;
    pthread_mutex_unlock(&s->lock);
    /* wakes accept() on Linux */
    shutdown(s->lfd, SHUT_RDWR);
    pthread_join(s->accept_thr, NULL);
    close(s->lfd);
    pthread_mutex_lock(&s->lock);
    for (mc__conn_t *c = s->conns; c; c = c->next)
        shutdown(c->fd, SHUT_RDWR);
    while (s->nconns > 0)
        pthread_cond_wait(&s->idle, &s->lock);
    pthread_mutex_unlock(&s->lock);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->idle);
    mc__free(s);
}
