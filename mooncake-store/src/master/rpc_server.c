/* Master RPC listener: one thread per connection, each reading frames, decoding and answering in
 * order. A frame that cannot be trusted (bad magic, oversized, malformed body) ends that
 * connection only; the other connections and the master carry on. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "master/master_internal.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/log.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"

#define MC__RPC_MAX_CONNS 4096
#define MC__RPC_IO_TIMEOUT_MS 30000 /* a body or a reply must move within this */
#define MC__RPC_KEEP_BUF (1u << 20)  /* larger buffers are dropped after use */

typedef struct mc__rpc_conn {
    struct mc__rpc_conn *next, **pprev;
    mc__rpc_server_t *srv;
    pthread_t thread;
    int fd;
} mc__rpc_conn_t;

struct mc__rpc_server {
    mc__master_t *m;
    int lfd;
    int wake[2];
    uint16_t port;
    pthread_t accept_thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    mc__rpc_conn_t *active, *done;
    int nconns;
};

/* Reads a body of len bytes, growing the buffer only as bytes arrive so that a peer announcing a
 * large frame cannot make us allocate memory it never sends. */
static int mc__rpc_read_body(int fd, uint8_t **buf, size_t *cap, size_t len, uint64_t deadline) {
    size_t got = 0;
    while (got < len) {
        size_t want = len - got;
        if (got + want > *cap) {
            size_t ncap = *cap < 65536 ? 65536 : *cap * 2;
            uint8_t *p = NULL;
            if (ncap > len)
                ncap = len;
            p = mc__realloc(*buf, ncap);
            if (!p)
                return MC_ERR_MEMORY;
            *buf = p;
            *cap = ncap;
            want = ncap - got;
        }
        if (mc__recv_all(fd, *buf + got, want, deadline))
            return MC_ERR_SOCKET;
        got += want;
    }
    return 0;
}

static void mc__rpc_serve(mc__rpc_server_t *s, int fd) {
    uint8_t hdr[MC_FRAME_HEADER_SIZE];
    uint8_t *body = NULL;
    size_t cap = 0;
    mc_buf_t out;
    mc__buf_init(&out);
    for (;;) {
        mc_frame_header_t h;
        mc__mp_request_t req;
        uint64_t deadline;
        int rc;
        if (mc__recv_all(fd, hdr, sizeof(hdr), 0))
            break; /* peer closed */
        deadline = mc__now_ms() + MC__RPC_IO_TIMEOUT_MS;
        mc__buf_reset(&out);
        if (mc__frame_header_decode(hdr, sizeof(hdr), MC_MP_MAX_BODY, &h)) {
            /* A peer speaking our framing at another version deserves to know why. */
            if (h.magic == MC_FRAME_MAGIC && h.version != MC_FRAME_VERSION &&
                mc__mp_encode_error_reply(&out, h.type, h.request_id, MC_ERR_INVALID_VERSION,
                                          "unsupported protocol version") == 0)
                (void)mc__send_all(fd, out.data, out.len, deadline);
            else if (h.magic == MC_FRAME_MAGIC &&
                     mc__mp_encode_error_reply(&out, h.type, h.request_id, MC_ERR_INVALID_PARAMS,
                                               "frame body too large") == 0)
                (void)mc__send_all(fd, out.data, out.len, deadline);
            MC_WARN("rpc: dropping a connection that sent an invalid frame header");
            break;
        }
        if (mc__rpc_read_body(fd, &body, &cap, (size_t)h.body_len, deadline))
            break;
        rc = mc__mp_decode_request(&h, body, (size_t)h.body_len, &req);
        if (rc == MC_ERR_NOT_IMPLEMENTED) {
            /* Framing is intact, so the stream can continue after this answer. */
            rc = mc__mp_encode_error_reply(&out, h.type, h.request_id, rc, "unknown message type");
            if (rc || mc__send_all(fd, out.data, out.len, deadline))
                break;
            continue;
        }
        if (rc) {
            if (mc__mp_encode_error_reply(&out, h.type, h.request_id, rc,
                                          rc == MC_ERR_INVALID_KEY ? "invalid key"
                                                                   : "malformed request") == 0)
                (void)mc__send_all(fd, out.data, out.len, deadline);
            MC_WARN("rpc: dropping a connection that sent a malformed %s request",
                    mc__mp_type_name(h.type));
            break;
        }
        rc = mc__master_handle(s->m, &req, &out);
        mc__mp_request_free(&req);
        if (rc || mc__send_all(fd, out.data, out.len, deadline))
            break;
        if (cap > MC__RPC_KEEP_BUF) {
            mc__free(body);
            body = NULL;
            cap = 0;
        }
        if (out.cap > MC__RPC_KEEP_BUF)
            mc__buf_free(&out);
    }
    mc__free(body);
    mc__buf_free(&out);
}

static void *mc__rpc_conn_main(void *arg) {
    mc__rpc_conn_t *c = arg;
    mc__rpc_server_t *s = c->srv;
    mc__rpc_serve(s, c->fd);
    pthread_mutex_lock(&s->mu);
    close(c->fd);
    c->fd = -1;
    *c->pprev = c->next;
    if (c->next)
        c->next->pprev = c->pprev;
    c->next = s->done;
    s->done = c;
    s->nconns--;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static void mc__rpc_reap(mc__rpc_server_t *s) {
    mc__rpc_conn_t *list;
    pthread_mutex_lock(&s->mu);
    list = s->done;
    s->done = NULL;
    pthread_mutex_unlock(&s->mu);
    while (list) {
        mc__rpc_conn_t *next = list->next;
        pthread_join(list->thread, NULL);
        mc__free(list);
        list = next;
    }
}

static void mc__rpc_accept_one(mc__rpc_server_t *s) {
    mc__rpc_conn_t *c = NULL;
    int fd = mc__accept(s->lfd);
    if (fd < 0)
        return;
    pthread_mutex_lock(&s->mu);
    if (s->nconns >= MC__RPC_MAX_CONNS || !(c = mc__calloc(1, sizeof(*c)))) {
        pthread_mutex_unlock(&s->mu);
        MC_WARN("rpc: refusing a connection (limit %d reached)", MC__RPC_MAX_CONNS);
        close(fd);
        return;
    }
    c->srv = s;
    c->fd = fd;
    c->next = s->active;
    c->pprev = &s->active;
    if (s->active)
        s->active->pprev = &c->next;
    s->active = c;
    s->nconns++;
    if (pthread_create(&c->thread, NULL, mc__rpc_conn_main, c) != 0) {
        s->active = c->next;
        if (c->next)
            c->next->pprev = &s->active;
        s->nconns--;
        pthread_mutex_unlock(&s->mu);
        MC_WARN("rpc: cannot start a connection thread");
        close(fd);
        mc__free(c);
        return;
    }
    pthread_mutex_unlock(&s->mu);
}

static void *mc__rpc_accept_main(void *arg) {
    mc__rpc_server_t *s = arg;
    for (;;) {
        struct pollfd pfd[2] = {{.fd = s->lfd, .events = POLLIN},
                                {.fd = s->wake[0], .events = POLLIN}};
        int r = poll(pfd, 2, 1000);
        mc__rpc_reap(s);
        if (r < 0 && errno != EINTR)
            break;
        if (r <= 0)
            continue;
        if (pfd[1].revents)
            break;
        if (pfd[0].revents)
            mc__rpc_accept_one(s);
    }
    return NULL;
}

int mc__rpc_server_start(mc__master_t *m, const char *host, uint16_t port,
                         mc__rpc_server_t **out) {
    mc__rpc_server_t *s = mc__calloc(1, sizeof(*s));
    int rc = MC_ERR_MEMORY;
    *out = NULL;
    if (!s)
        goto out;
    s->m = m;
    s->lfd = -1;
    s->wake[0] = s->wake[1] = -1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    rc = mc__tcp_listen(host, port, 512, &s->port);
    if (rc < 0)
        goto out;
    s->lfd = rc;
    rc = MC_ERR_SOCKET;
    if (pipe2(s->wake, O_CLOEXEC) != 0)
        goto out;
    if (pthread_create(&s->accept_thread, NULL, mc__rpc_accept_main, s) != 0)
        goto out;
    *out = s;
    s = NULL;
    rc = 0;
out:
    if (s) {
        if (s->lfd >= 0)
            close(s->lfd);
        if (s->wake[0] >= 0) {
            close(s->wake[0]);
            close(s->wake[1]);
        }
        pthread_cond_destroy(&s->cv);
        pthread_mutex_destroy(&s->mu);
        mc__free(s);
    }
    return rc;
}

uint16_t mc__rpc_server_port(const mc__rpc_server_t *s) {
    return s ? s->port : 0;
}

void mc__rpc_server_stop(mc__rpc_server_t *s) {
    if (!s)
        return;
    (void)!write(s->wake[1], "x", 1);
    pthread_join(s->accept_thread, NULL);
    close(s->lfd);
    pthread_mutex_lock(&s->mu);
    for (mc__rpc_conn_t *c = s->active; c; c = c->next)
        shutdown(c->fd, SHUT_RDWR);
    while (s->nconns > 0)
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    mc__rpc_reap(s);
    close(s->wake[0]);
    close(s->wake[1]);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    mc__free(s);
}
