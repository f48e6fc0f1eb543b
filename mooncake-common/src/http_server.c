/* Thread-per-connection HTTP server for admin and metadata endpoints (low request rates, where a
 * thread is simpler and safer than a reactor). Every read has a deadline so an idle or slow peer
 * cannot pin a thread; stop() shuts down each connection's socket to wake its thread, then joins
 * all of them, so nothing runs on after stop returns. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/http.h"
#include "mooncake/common/log.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"

#define MC__HTTP_MAX_CONNS 256
#define MC__HTTP_IDLE_MS 60000 /* keep-alive connection with no request started */
#define MC__HTTP_HEAD_MS 10000 /* a request head must arrive within this */
#define MC__HTTP_BODY_MS 60000

typedef struct mc__http_conn {
    struct mc__http_conn *next;
    struct mc__http_conn **pprev;
    struct mc_http_server *srv;
    pthread_t thread;
    int fd;
} mc__http_conn_t;

struct mc_http_server {
    int lfd;
    int wake[2]; /* pipe: a byte here tells the accept thread to stop */
    uint16_t port;
    size_t max_body;
    mc_http_handler_fn fn;
    void *ctx;
    pthread_t accept_thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stopping;
    int nconns;
    mc__http_conn_t *active;
    mc__http_conn_t *done; /* finished threads waiting to be joined */
};

static const char *mc__http_reason(int status) {
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
    }
}

int mc__http_respond(mc_http_response_t *r, int status, const char *content_type,
                     const void *body, size_t len) {
    uint8_t *copy = NULL;
    copy = mc__malloc(len ? len : 1);
    if (!copy)
        return MC_ERR_MEMORY;
    if (len)
        memcpy(copy, body, len);
    mc__free(r->body);
    r->status = status;
    r->content_type = content_type;
    r->body = copy;
    r->body_len = len;
    return 0;
}

static int mc__http_send_response(int fd, const mc_http_response_t *r, int keep_alive,
                                  int head_only) {
    char head[512];
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Connection: %s\r\n\r\n",
                     r->status, mc__http_reason(r->status),
                     r->content_type ? r->content_type : "text/plain", r->body_len,
                     keep_alive ? "keep-alive" : "close");
    return mc__send2(fd, head, (size_t)n, r->body, head_only ? 0 : r->body_len,
                     mc__now_ms() + MC__HTTP_BODY_MS);
}

static void mc__http_send_error(int fd, int status) {
    char body[64];
    int n = snprintf(body, sizeof(body), "%s\n", mc__http_reason(status));
    mc_http_response_t r = {status, "text/plain", (uint8_t *)body, (size_t)n};
    (void)mc__http_send_response(fd, &r, 0, 0);
}

/* Reads what is available into p (at most n), waiting until deadline. >0 bytes, 0 on EOF or
 * error, -1 on timeout. */
static ssize_t mc__http_read_some(int fd, void *p, size_t n, uint64_t deadline) {
    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        uint64_t now = mc__now_ms();
        ssize_t r;
        if (now >= deadline)
            return -1;
        r = poll(&pfd, 1, (int)(deadline - now));
        if (r < 0 && errno != EINTR)
            return 0;
        if (r <= 0)
            continue;
        r = recv(fd, p, n, MSG_DONTWAIT);
        if (r > 0)
            return r;
        if (r == 0 || (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK))
            return 0;
    }
}

/* curl sends "Expect: 100-continue" before large bodies and waits for our go-ahead. */
static int mc__http_wants_continue(const uint8_t *head, size_t n) {
    static const char key[] = "\r\nexpect:";
    for (size_t i = 0; i + sizeof(key) - 1 < n; i++) {
        if (strncasecmp((const char *)head + i, key, sizeof(key) - 1) == 0) {
            size_t j = i + sizeof(key) - 1;
            while (j < n && head[j] == ' ')
                j++;
            return j + 12 <= n && strncasecmp((const char *)head + j, "100-continue", 12) == 0;
        }
    }
    return 0;
}

static void mc__http_serve(mc_http_server_t *s, int fd) {
    uint8_t head[MC_HTTP_MAX_HEAD];
    size_t have = 0;
    for (;;) {
        mc_http_request_t req;
        mc_http_response_t resp = {0};
        uint8_t *body = NULL;
        size_t got = 0;
        int rc;
        uint64_t deadline = mc__now_ms() + (have ? MC__HTTP_HEAD_MS : MC__HTTP_IDLE_MS);
        while ((rc = mc__http_parse_request(head, have, s->max_body, &req)) == 0) {
            ssize_t r = mc__http_read_some(fd, head + have, sizeof(head) - have, deadline);
            if (r < 0 && have)
                mc__http_send_error(fd, 408);
            if (r <= 0)
                return;
            if (have == 0)
                deadline = mc__now_ms() + MC__HTTP_HEAD_MS;
            have += (size_t)r;
        }
        if (rc < 0) {
            mc__http_send_error(fd, -rc);
            return;
        }
        body = mc__malloc(req.content_length ? req.content_length : 1);
        if (!body) {
            mc__http_send_error(fd, 503);
            return;
        }
        got = have - req.head_len < req.content_length ? have - req.head_len : req.content_length;
        memcpy(body, head + req.head_len, got);
        if (got < req.content_length && mc__http_wants_continue(head, req.head_len))
            (void)mc__send_all(fd, "HTTP/1.1 100 Continue\r\n\r\n", 25,
                               mc__now_ms() + MC__HTTP_HEAD_MS);
        if (got < req.content_length &&
            mc__recv_all(fd, body + got, req.content_length - got,
                         mc__now_ms() + MC__HTTP_BODY_MS) != 0) {
            mc__free(body);
            return;
        }
        req.body = body;
        req.body_len = req.content_length;
        s->fn(s->ctx, &req, &resp);
        if (resp.status < 100 || resp.status > 599)
            resp.status = 500;
        rc = mc__http_send_response(fd, &resp, req.keep_alive, strcmp(req.method, "HEAD") == 0);
        mc__free(resp.body);
        mc__free(body);
        /* Keep whatever the client pipelined after this request. */
        memmove(head, head + req.head_len + got, have - req.head_len - got);
        have -= req.head_len + got;
        if (rc != 0 || !req.keep_alive)
            return;
    }
}

static void *mc__http_conn_main(void *arg) {
    mc__http_conn_t *c = arg;
    mc_http_server_t *s = c->srv;
    mc__http_serve(s, c->fd);
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

static void mc__http_reap(mc_http_server_t *s) {
    mc__http_conn_t *list;
    pthread_mutex_lock(&s->mu);
    list = s->done;
    s->done = NULL;
    pthread_mutex_unlock(&s->mu);
    while (list) {
        mc__http_conn_t *next = list->next;
        pthread_join(list->thread, NULL);
        mc__free(list);
        list = next;
    }
}

static void mc__http_accept_one(mc_http_server_t *s) {
    mc__http_conn_t *c = NULL;
    int fd = mc__accept(s->lfd);
    if (fd < 0)
        return;
    pthread_mutex_lock(&s->mu);
    if (s->nconns >= MC__HTTP_MAX_CONNS || !(c = mc__calloc(1, sizeof(*c)))) {
        pthread_mutex_unlock(&s->mu);
        mc__http_send_error(fd, 503);
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
    if (pthread_create(&c->thread, NULL, mc__http_conn_main, c) != 0) {
        s->active = c->next;
        if (c->next)
            c->next->pprev = &s->active;
        s->nconns--;
        pthread_mutex_unlock(&s->mu);
        MC_WARN("http: cannot start a connection thread");
        close(fd);
        mc__free(c);
        return;
    }
    pthread_mutex_unlock(&s->mu);
}

static void *mc__http_accept_main(void *arg) {
    mc_http_server_t *s = arg;
    for (;;) {
        struct pollfd pfd[2] = {{.fd = s->lfd, .events = POLLIN}, {.fd = s->wake[0], .events = POLLIN}};
        int r = poll(pfd, 2, 1000);
        mc__http_reap(s);
        if (r < 0 && errno != EINTR)
            break;
        if (r <= 0)
            continue;
        if (pfd[1].revents)
            break;
        if (pfd[0].revents)
            mc__http_accept_one(s);
    }
    return NULL;
}

int mc__http_server_start(const char *host, uint16_t port, size_t max_body,
                          mc_http_handler_fn fn, void *ctx, mc_http_server_t **out) {
    mc_http_server_t *s = NULL;
    int rc = MC_ERR_INVALID_ARGUMENT;
    int sync_ok = 0;
    if (!fn || !out)
        goto out;
    rc = MC_ERR_MEMORY;
    s = mc__calloc(1, sizeof(*s));
    if (!s)
        goto out;
    s->lfd = -1;
    s->wake[0] = s->wake[1] = -1;
    s->max_body = max_body;
    s->fn = fn;
    s->ctx = ctx;
    if (pthread_mutex_init(&s->mu, NULL) != 0)
        goto out;
    if (pthread_cond_init(&s->cv, NULL) != 0) {
        pthread_mutex_destroy(&s->mu);
        goto out;
    }
    sync_ok = 1;
    rc = mc__tcp_listen(host, port, 128, &s->port);
    if (rc < 0)
        goto out;
    s->lfd = rc;
    rc = MC_ERR_SOCKET;
    if (pipe2(s->wake, O_CLOEXEC) != 0)
        goto out;
    if (pthread_create(&s->accept_thread, NULL, mc__http_accept_main, s) != 0)
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
        if (sync_ok) {
            pthread_cond_destroy(&s->cv);
            pthread_mutex_destroy(&s->mu);
        }
        mc__free(s);
    }
    return rc;
}

uint16_t mc__http_server_port(const mc_http_server_t *s) {
    return s ? s->port : 0;
}

void mc__http_server_stop(mc_http_server_t *s) {
    if (!s)
        return;
    (void)!write(s->wake[1], "x", 1);
    pthread_join(s->accept_thread, NULL);
    close(s->lfd);
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    for (mc__http_conn_t *c = s->active; c; c = c->next)
        shutdown(c->fd, SHUT_RDWR);
    while (s->nconns > 0)
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    mc__http_reap(s);
    close(s->wake[0]);
    close(s->wake[1]);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    mc__free(s);
}
