/* HTTP/1.1 server for admin and metadata endpoints (low request rates, where a thread per
 * connection (mc__conn_server) is simpler and safer than a reactor). Every read has a deadline
 * so an idle or slow peer cannot pin a thread; stop() returns only when every connection
 * thread has ended. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/auth.h"
#include "mooncake/common/conn_server.h"
#include "mooncake/common/http.h"
#include "mooncake/common/log.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"

#define MC__HTTP_MAX_CONNS 256
#define MC__HTTP_IDLE_MS 60000 /* keep-alive connection with no request started */
#define MC__HTTP_HEAD_MS 10000 /* a request head must arrive within this */
#define MC__HTTP_BODY_MS 60000

/* Outstanding challenges: single use, short lived, the oldest overwritten first, so a flood of
 * unauthenticated requests costs a fixed table and never grows it. */
#define MC__HTTP_NONCES 1024
#define MC__HTTP_NONCE_MS 30000

typedef struct mc__http_nonce {
    uint8_t n[MC_AUTH_NONCE];
    uint64_t until_ms; /* 0: free (or used) */
} mc__http_nonce_t;

struct mc_http_server {
    mc_conn_server_t *conns;
    size_t max_body;
    mc_http_handler_fn fn;
    void *ctx;
    mc_auth_t auth; /* enabled: every request proves the cluster secret */
    pthread_mutex_t nonce_mu;
    mc__http_nonce_t *nonces;
    size_t next_nonce;
};

/* A fresh challenge for a 401: "MC-HMAC nonce=<hex>" into out. */
static void mc__http_challenge(mc_http_server_t *s, char *out, size_t cap) {
    uint8_t n[MC_AUTH_NONCE];
    char hex[2 * MC_AUTH_NONCE + 1];
    mc__auth_nonce(n);
    pthread_mutex_lock(&s->nonce_mu);
    memcpy(s->nonces[s->next_nonce].n, n, sizeof(n));
    s->nonces[s->next_nonce].until_ms = mc__now_ms() + MC__HTTP_NONCE_MS;
    s->next_nonce = (s->next_nonce + 1) % MC__HTTP_NONCES;
    pthread_mutex_unlock(&s->nonce_mu);
    mc__auth_hex(n, sizeof(n), hex);
    snprintf(out, cap, "MC-HMAC nonce=%s", hex);
}

/* Does req carry a valid answer to one of our outstanding challenges? The nonce is used up
 * either way, so an answer cannot be replayed. */
static int mc__http_authorized(mc_http_server_t *s, const mc_http_request_t *req,
                               const uint8_t *head, const uint8_t *body) {
    static const char pfx[] = "MC-HMAC nonce=";
    const char *a = req->authorization;
    uint8_t n[MC_AUTH_NONCE], mac[MC_AUTH_MAC], want[MC_AUTH_MAC];
    int found = 0;
    if (strncmp(a, pfx, sizeof(pfx) - 1) != 0)
        return 0;
    a += sizeof(pfx) - 1;
    if (strlen(a) != 2 * MC_AUTH_NONCE + 6 + 2 * MC_AUTH_MAC ||
        strncmp(a + 2 * MC_AUTH_NONCE, ", mac=", 6) != 0 ||
        mc__auth_unhex(a, MC_AUTH_NONCE, n) != 0 ||
        mc__auth_unhex(a + 2 * MC_AUTH_NONCE + 6, MC_AUTH_MAC, mac) != 0)
        return 0;
    pthread_mutex_lock(&s->nonce_mu);
    for (size_t i = 0; i < MC__HTTP_NONCES && !found; i++) {
        mc__http_nonce_t *e = &s->nonces[i];
        if (e->until_ms && !memcmp(e->n, n, sizeof(n))) {
            found = e->until_ms > mc__now_ms();
            e->until_ms = 0;
        }
    }
    pthread_mutex_unlock(&s->nonce_mu);
    return found &&
           mc__auth_http_mac(&s->auth, n, req->method, (const char *)head + req->target_off,
                             req->target_len, body, req->body_len, want) == 0 &&
           mc__auth_equal(mac, want);
}

static const char *mc__http_reason(int status) {
    switch (status) {
    case 100:
        return "Continue";
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 204:
        return "No Content";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 409:
        return "Conflict";
    case 413:
        return "Payload Too Large";
    case 414:
        return "URI Too Long";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 503:
        return "Service Unavailable";
    case 505:
        return "HTTP Version Not Supported";
    case 507:
        return "Insufficient Storage";
    default:
        return "Unknown";
    }
}

int mc__http_respond(mc_http_response_t *r, int status, const char *content_type, const void *body,
                     size_t len) {
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
    char head[640];
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "%s%s%sConnection: %s\r\n\r\n",
                     r->status, mc__http_reason(r->status),
                     r->content_type ? r->content_type : "text/plain", r->body_len,
                     r->www_authenticate ? "WWW-Authenticate: " : "",
                     r->www_authenticate ? r->www_authenticate : "",
                     r->www_authenticate ? "\r\n" : "", keep_alive ? "keep-alive" : "close");
    return mc__send2(fd, head, (size_t)n, r->body, head_only ? 0 : r->body_len,
                     mc__now_ms() + MC__HTTP_BODY_MS);
}

static void mc__http_send_error(int fd, int status) {
    char body[64];
    int n = snprintf(body, sizeof(body), "%s\n", mc__http_reason(status));
    mc_http_response_t r = {status, "text/plain", (uint8_t *)body, (size_t)n, NULL};
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
        char challenge[64];
        uint8_t *body = NULL;
        size_t got = 0;
        int rc;
        uint64_t deadline = mc__now_ms() + (have ? MC__HTTP_HEAD_MS : MC__HTTP_IDLE_MS);
        mc__conn_idle(have == 0);
        while ((rc = mc__http_parse_request(head, have, s->max_body, &req)) == 0) {
            ssize_t r = mc__http_read_some(fd, head + have, sizeof(head) - have, deadline);
            if (r < 0 && have)
                mc__http_send_error(fd, 408);
            if (r <= 0)
                return;
            if (have == 0) {
                deadline = mc__now_ms() + MC__HTTP_HEAD_MS;
                mc__conn_idle(0);
            }
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
        if (got < req.content_length && mc__recv_all(fd, body + got, req.content_length - got,
                                                     mc__now_ms() + MC__HTTP_BODY_MS) != 0) {
            mc__free(body);
            return;
        }
        req.body = body;
        req.body_len = req.content_length;
        if (s->auth.enabled && !mc__http_authorized(s, &req, head, body)) {
            /* answered here, never by the handler: a fresh challenge to prove the secret on */
            mc__http_challenge(s, challenge, sizeof(challenge));
            mc__http_respond(&resp, 401, "text/plain", "cluster secret required\n", 24);
            resp.www_authenticate = challenge;
        } else {
            s->fn(s->ctx, &req, &resp);
        }
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

static void mc__http_conn_serve(void *ctx, int fd) {
    mc__http_serve(ctx, fd);
}

static void mc__http_reject(void *ctx, int fd) {
    (void)ctx;
    mc__http_send_error(fd, 503);
}

/* The one teardown, also of a server whose start failed part way (conns NULL). */
void mc__http_server_stop(mc_http_server_t *s) {
    if (!s)
        return;
    mc__conn_server_stop(s->conns); /* no connection thread is left to use s */
    pthread_mutex_destroy(&s->nonce_mu);
    mc__free(s->nonces);
    mc__free(s);
}

uint16_t mc__http_server_port(const mc_http_server_t *s) {
    return s ? mc__conn_server_port(s->conns) : 0;
}

int mc__http_server_start(const char *host, uint16_t port, size_t max_body, mc_http_handler_fn fn,
                          void *ctx, mc_http_server_t **out) {
    return mc__http_server_start_auth(host, port, max_body, fn, ctx, NULL, out);
}

int mc__http_server_start_auth(const char *host, uint16_t port, size_t max_body,
                               mc_http_handler_fn fn, void *ctx, const struct mc_auth *a,
                               mc_http_server_t **out) {
    mc_http_server_t *s = NULL;
    int rc = MC_ERR_INVALID_ARGUMENT;
    if (!fn || !out)
        goto out;
    rc = MC_ERR_MEMORY;
    s = mc__calloc(1, sizeof(*s));
    if (!s)
        goto out;
    s->max_body = max_body;
    s->fn = fn;
    s->ctx = ctx;
    pthread_mutex_init(&s->nonce_mu, NULL);
    if (a && a->enabled) { /* before the first connection is accepted */
        s->nonces = mc__calloc(MC__HTTP_NONCES, sizeof(*s->nonces));
        if (!s->nonces)
            goto out;
        s->auth = *a;
    }
    mc_conn_server_opts_t o = {.name = "http",
                               .listen_fd = -1,
                               .host = host,
                               .port = port,
                               .max_conns = MC__HTTP_MAX_CONNS,
                               .serve = mc__http_conn_serve,
                               .reject = mc__http_reject,
                               .ctx = s};
    rc = mc__conn_server_start(&o, &s->conns);
out:
    if (rc < 0)
        mc__http_server_stop(s); /* what was taken before the failure */
    else
        *out = s;
    return rc;
}
