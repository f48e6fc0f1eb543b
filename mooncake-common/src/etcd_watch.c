/* The two etcd pieces that run on their own thread: a lease keeper (unary keep-alive calls on a
 * timer) and a watch (one long-lived chunked POST /v3/watch, resumed on any endpoint after a
 * break from the revision after the last one delivered). */
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "etcd_internal.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/cond.h"
#include "mooncake/common/etcd.h"
#include "mooncake/common/frame.h"
#include "mooncake/common/log.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"

/* How often a blocked thread looks at its stop flag. */
#define MC__ETCD_POLL_MS 100

/* --- lease keeper --- */
struct mc_etcd_keeper {
    mc_etcd_t *c;
    int64_t id, ttl_s;
    mc_etcd_lease_lost_fn lost;
    void *ctx;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int stop;
    _Atomic int alive;
};

static void *mc__keeper_main(void *arg) {
    mc_etcd_keeper_t *k = arg;
    uint64_t ttl_ms = (uint64_t)k->ttl_s * 1000;
    uint64_t every = ttl_ms / 3 < 200 ? 200 : ttl_ms / 3;
    uint64_t last_ok = mc__now_ms();
    int err = 0;
    pthread_mutex_lock(&k->lock);
    while (!k->stop) {
        uint64_t now = mc__now_ms(), next = now + every;
        int rc;
        uint64_t left;
        while (!k->stop && (now = mc__now_ms()) < next) {
            struct timespec ts = mc__realtime_after_ms(next - now);
            pthread_cond_timedwait(&k->cond, &k->lock, &ts);
        }
        if (k->stop)
            break;
        pthread_mutex_unlock(&k->lock);
        /* a refresh that would land after the lease ran out is no refresh */
        left = last_ok + ttl_ms > mc__now_ms() ? last_ok + ttl_ms - mc__now_ms() : 1;
        rc = mc__etcd_lease_keepalive_dl(k->c, k->id, (int)left, NULL);
        pthread_mutex_lock(&k->lock);
        if (!rc) {
            last_ok = mc__now_ms();
            continue;
        }
        if (rc == MC_ERR_ETCD_KEY_NOT_EXIST || mc__now_ms() >= last_ok + ttl_ms) {
            err = rc == MC_ERR_ETCD_KEY_NOT_EXIST ? rc : MC_ERR_ETCD_CTX_CANCELLED;
            break;
        }
        MC_WARN("etcd lease %" PRId64 ": refresh failed (%s); retrying", k->id, mc_strerror(rc));
        every = 200; /* retry soon while time is left */
    }
    pthread_mutex_unlock(&k->lock);
    if (err) {
        atomic_store(&k->alive, 0);
        MC_ERROR("etcd lease %" PRId64 " lost: %s", k->id,
                 err == MC_ERR_ETCD_KEY_NOT_EXIST ? "expired or revoked on the servers"
                                                  : "no refresh succeeded within its TTL");
        if (k->lost)
            k->lost(k->ctx, k->id, err);
    }
    return NULL;
}

int mc__etcd_keeper_start(mc_etcd_t *c, int64_t id, int64_t ttl_s, mc_etcd_lease_lost_fn lost,
                          void *ctx, mc_etcd_keeper_t **out) {
    mc_etcd_keeper_t *k;
    *out = NULL;
    if (!c || id <= 0 || ttl_s <= 0 || ttl_s > 1000000)
        return MC_ERR_INVALID_ARGUMENT;
    k = mc__calloc(1, sizeof(*k));
    if (!k)
        return MC_ERR_MEMORY;
    k->c = c;
    k->id = id;
    k->ttl_s = ttl_s;
    k->lost = lost;
    k->ctx = ctx;
    atomic_init(&k->alive, 1);
    pthread_mutex_init(&k->lock, NULL);
    pthread_cond_init(&k->cond, NULL);
    if (pthread_create(&k->thread, NULL, mc__keeper_main, k)) {
        pthread_mutex_destroy(&k->lock);
        pthread_cond_destroy(&k->cond);
        mc__free(k);
        return MC_ERR_MEMORY;
    }
    *out = k;
    return 0;
}

int mc__etcd_keeper_alive(const mc_etcd_keeper_t *k) {
    return k && atomic_load(&((mc_etcd_keeper_t *)k)->alive);
}

void mc__etcd_keeper_stop(mc_etcd_keeper_t *k) {
    if (!k)
        return;
    mc__cond_raise(&k->lock, &k->cond, &k->stop);
    pthread_join(k->thread, NULL);
    pthread_mutex_destroy(&k->lock);
    pthread_cond_destroy(&k->cond);
    mc__free(k);
}

/* --- watch --- */
enum { MC__W_STARTING, MC__W_RUNNING, MC__W_FAILED };

struct mc_etcd_watch {
    mc_etcd_t *c;
    uint8_t *key, *range_end;
    size_t key_len, range_end_len;
    int64_t next_rev; /* where a resumed stream starts; 0 until the first stream is created */
    mc_etcd_watch_fn fn;
    void *ctx;
    pthread_t thread;
    _Atomic int stop;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int state; /* MC__W_* under lock */
    int start_err;
    int ended; /* fn was told the watch ended */
};

/* Per-stream context for the message callback. */
typedef struct mc__wstream {
    mc_etcd_watch_t *w;
    int created;
} mc__wstream_t;

static void mc__watch_set_state(mc_etcd_watch_t *w, int state, int err) {
    pthread_mutex_lock(&w->lock);
    if (w->state == MC__W_STARTING) {
        w->state = state;
        w->start_err = err;
        pthread_cond_broadcast(&w->cond);
    }
    pthread_mutex_unlock(&w->lock);
}

/* 1: the stream is done for good (canceled by etcd), MC_ERR_*: a bad message, 0: go on. */
static int mc__watch_msg(void *arg, const char *msg, size_t len) {
    mc__wstream_t *ws = arg;
    mc_etcd_watch_t *w = ws->w;
    mc_etcd_watch_msg_t m;
    char emsg[256];
    int rc = mc__etcd_parse_watch_msg(msg, len, &m);
    if (rc) {
        if (mc__etcd_parse_error(msg, len, emsg, sizeof(emsg)) >= 0) {
            MC_WARN("etcd watch: the stream ended with an error: %s", emsg);
            return MC_ERR_ETCD_OPERATION_ERROR;
        }
        MC_WARN("etcd watch: a message that is not etcd's (%zu bytes)", len);
        return rc;
    }
    if (m.created) {
        ws->created = 1;
        if (!w->next_rev)
            w->next_rev = m.revision + 1;
        mc__watch_set_state(w, MC__W_RUNNING, 0);
    }
    if (m.canceled) {
        MC_WARN("etcd watch canceled by etcd%s%s (compact revision %" PRId64 ")",
                m.cancel_reason[0] ? ": " : "", m.cancel_reason, m.compact_revision);
        if (!ws->created) {
            mc__watch_set_state(w, MC__W_FAILED, MC_ERR_ETCD_OPERATION_ERROR);
        } else if (!atomic_load(&w->stop)) {
            w->ended = 1;
            w->fn(w->ctx, NULL, 0, m.compact_revision, MC_ERR_ETCD_OPERATION_ERROR);
        }
        mc__etcd_watch_msg_free(&m);
        return 1;
    }
    if (m.n && ws->created && !atomic_load(&w->stop)) {
        int64_t last = m.events[m.n - 1].kv.mod_revision;
        w->fn(w->ctx, m.events, m.n, m.revision, 0);
        if (last >= w->next_rev)
            w->next_rev = last + 1;
    }
    mc__etcd_watch_msg_free(&m);
    return 0;
}

static int mc__b64_json(mc_buf_t *b, const char *name, const void *p, size_t n, int comma) {
    size_t el = mc__etcd_b64_len(n);
    char pre[48];
    int m = snprintf(pre, sizeof(pre), "%s\"%s\":\"", comma ? "," : "", name);
    if (mc__buf_put(b, pre, (size_t)m) || mc__buf_reserve(b, el + 2))
        return MC_ERR_MEMORY;
    mc__etcd_b64_encode(p, n, (char *)b->data + b->len);
    b->len += el;
    return mc__buf_put(b, "\"", 1);
}

/* The TLS stream's callbacks (etcd_tls.c drives the connection): the same parser, the same stop
 * flag and creation deadline as the plain loop below. */
typedef struct mc__tls_watch {
    mc_etcd_stream_t *st;
    mc__wstream_t *ws;
    mc_etcd_watch_t *w;
    uint64_t dl;
} mc__tls_watch_t;

#define MC__TLS_WATCH_STOPPED 2 /* asked to stop: not an error */

static int mc__tls_watch_feed(void *ctx, const uint8_t *p, size_t n) {
    mc__tls_watch_t *t = ctx;
    return mc__etcd_stream_feed(t->st, p, n, mc__watch_msg, t->ws);
}

static int mc__tls_watch_idle(void *ctx) {
    mc__tls_watch_t *t = ctx;
    if (atomic_load(&t->w->stop))
        return MC__TLS_WATCH_STOPPED;
    /* until etcd confirms, the client's deadline applies */
    return !t->ws->created && mc__now_ms() >= t->dl ? MC_ERR_ETCD_CTX_CANCELLED : 0;
}

static int mc__watch_stream_tls(mc_etcd_watch_t *w, const mc__etcd_ep_t *ep, mc_buf_t *body,
                                mc_etcd_stream_t *st, mc__wstream_t *ws, uint64_t dl) {
    mc__tls_watch_t t = {.st = st, .ws = ws, .w = w, .dl = dl};
    uint64_t now = mc__now_ms();
    int rc = mc__etcd_tls_stream(w->c, ep, "/v3/watch", (const char *)body->data, body->len,
                                 dl > now ? (int)(dl - now) : 1, mc__tls_watch_feed,
                                 mc__tls_watch_idle, &t);
    if (rc == MC__TLS_WATCH_STOPPED)
        return 0;
    if (rc == 0) { /* the member ended the stream: an error answer's message is logged */
        if (st->status && st->status != 200)
            mc__etcd_stream_end(st, mc__watch_msg, ws);
        return MC_ERR_ETCD_OPERATION_ERROR;
    }
    return rc;
}

/* One stream on endpoint ep until it breaks or stop: 1 when etcd canceled the watch (done for
 * good), 0 when it broke after being created, negative when it never got going. */
static int mc__watch_stream(mc_etcd_watch_t *w, const mc__etcd_ep_t *ep) {
    mc_buf_t body, req;
    mc_etcd_stream_t st;
    mc__wstream_t ws = {.w = w};
    char head[512], rev[48];
    uint8_t in[16384];
    int fd = -1, rc;
    uint64_t dl = mc__now_ms() + (uint64_t)mc__etcd_timeout(w->c);
    mc__buf_init(&body);
    mc__buf_init(&req);
    mc__etcd_stream_init(&st, MC_ETCD_MAX_WATCH_MSG);
    mc__buf_put(&body, "{\"create_request\":{", 19);
    mc__b64_json(&body, "key", w->key, w->key_len, 0);
    if (w->range_end)
        mc__b64_json(&body, "range_end", w->range_end, w->range_end_len, 1);
    if (w->next_rev) {
        int n = snprintf(rev, sizeof(rev), ",\"start_revision\":\"%" PRId64 "\"", w->next_rev);
        mc__buf_put(&body, rev, (size_t)n);
    }
    mc__buf_put(&body, "}}", 2);
    {
        int n = snprintf(head, sizeof(head),
                         "POST /v3/watch HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                         /* a member cut off from the quorum ends the stream instead of
                          * going quiet (etcd's require-leader metadata, via the gateway) */
                         "Grpc-Metadata-Hasleader: true\r\n"
                         "Connection: close\r\nContent-Length: %zu\r\n\r\n",
                         ep->name, body.len);
        mc__buf_put(&req, head, (size_t)n);
        mc__buf_put(&req, body.data, body.len);
    }
    rc = MC_ERR_MEMORY;
    if (body.failed || req.failed)
        goto out;
    if (ep->tls) {
        rc = mc__watch_stream_tls(w, ep, &body, &st, &ws, dl);
        goto done;
    }
    fd = mc__tcp_connect(ep->host, ep->port, dl);
    if (fd < 0) {
        rc = MC_ERR_ETCD_OPERATION_ERROR;
        goto out;
    }
    {
        /* a member whose host vanished sends no FIN: TCP keep-alive notices within ~11 s, where
         * an idle watch stream would otherwise wait forever */
        int on = 1, idle = 5, intvl = 2, cnt = 3;
        setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
    }
    rc = mc__send_all(fd, req.data, req.len, dl) ? MC_ERR_ETCD_OPERATION_ERROR : 0;
    while (!rc && !atomic_load(&w->stop)) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        ssize_t r;
        int pr = poll(&pfd, 1, MC__ETCD_POLL_MS);
        if (pr < 0 && errno != EINTR) {
            rc = MC_ERR_ETCD_OPERATION_ERROR;
            break;
        }
        if (pr <= 0) {
            /* until etcd confirms, the client's deadline applies */
            if (!ws.created && mc__now_ms() >= dl)
                rc = MC_ERR_ETCD_CTX_CANCELLED;
            continue;
        }
        r = recv(fd, in, sizeof(in), MSG_DONTWAIT);
        if (r < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (r <= 0) {
            /* an error answer (not 200) ends with the connection: its message is logged */
            if (r == 0 && st.status && st.status != 200)
                mc__etcd_stream_end(&st, mc__watch_msg, &ws);
            rc = MC_ERR_ETCD_OPERATION_ERROR;
            break;
        }
        rc = mc__etcd_stream_feed(&st, in, (size_t)r, mc__watch_msg, &ws);
    }
done:
    if (rc != 1 && ws.created && !atomic_load(&w->stop))
        MC_INFO("etcd watch: stream from %s broke; resuming at revision %" PRId64, ep->name,
                w->next_rev);
out:
    if (fd >= 0)
        close(fd);
    mc__buf_free(&body);
    mc__buf_free(&req);
    mc__etcd_stream_free(&st);
    if (rc == 1)
        return 1;
    return ws.created ? 0 : (rc ? rc : MC_ERR_ETCD_OPERATION_ERROR);
}

static void *mc__watch_main(void *arg) {
    mc_etcd_watch_t *w = arg;
    mc_etcd_t *c = w->c;
    size_t idx = atomic_load(&c->current) % c->n;
    uint64_t since_ok = mc__now_ms();
    while (!atomic_load(&w->stop)) {
        int rc = mc__watch_stream(w, &c->eps[idx]);
        if (rc == 1)
            break;
        if (rc == 0) {
            since_ok = mc__now_ms();
        } else if (mc__now_ms() >= since_ok + (uint64_t)mc__etcd_timeout(c)) {
            pthread_mutex_lock(&w->lock);
            int starting = w->state == MC__W_STARTING;
            pthread_mutex_unlock(&w->lock);
            if (starting) {
                mc__watch_set_state(w, MC__W_FAILED, MC_ERR_ETCD_CTX_CANCELLED);
            } else if (!atomic_load(&w->stop)) {
                MC_ERROR("etcd watch: no endpoint answered for %d ms; the watch ends",
                         mc__etcd_timeout(c));
                w->fn(w->ctx, NULL, 0, w->next_rev, MC_ERR_ETCD_CTX_CANCELLED);
            }
            break;
        }
        idx = (idx + 1) % c->n;
        for (int i = 0; i < 100 / MC__ETCD_POLL_MS + 1 && !atomic_load(&w->stop); i++)
            mc__etcd_sleep_ms(rc == 0 ? 20 : MC__ETCD_POLL_MS);
    }
    mc__watch_set_state(w, MC__W_FAILED, MC_ERR_ETCD_OPERATION_ERROR);
    return NULL;
}

static void mc__watch_free(mc_etcd_watch_t *w) {
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->cond);
    mc__free(w->key);
    mc__free(w->range_end);
    mc__free(w);
}

int mc__etcd_watch_start(mc_etcd_t *c, const void *key, size_t key_len, const void *range_end,
                         size_t range_end_len, int64_t start_revision, mc_etcd_watch_fn fn,
                         void *ctx, mc_etcd_watch_t **out) {
    mc_etcd_watch_t *w;
    int rc;
    *out = NULL;
    if (!c || !key || !key_len || !fn || start_revision < 0 || (range_end && !range_end_len))
        return MC_ERR_INVALID_ARGUMENT;
    w = mc__calloc(1, sizeof(*w));
    if (!w)
        return MC_ERR_MEMORY;
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
    w->c = c;
    w->fn = fn;
    w->ctx = ctx;
    w->next_rev = start_revision;
    w->key = mc__malloc(key_len);
    w->range_end = range_end ? mc__malloc(range_end_len) : NULL;
    if (!w->key || (range_end && !w->range_end)) {
        mc__watch_free(w);
        return MC_ERR_MEMORY;
    }
    memcpy(w->key, key, key_len);
    w->key_len = key_len;
    if (range_end) {
        memcpy(w->range_end, range_end, range_end_len);
        w->range_end_len = range_end_len;
    }
    atomic_init(&w->stop, 0);
    if (pthread_create(&w->thread, NULL, mc__watch_main, w)) {
        mc__watch_free(w);
        return MC_ERR_MEMORY;
    }
    pthread_mutex_lock(&w->lock);
    while (w->state == MC__W_STARTING)
        pthread_cond_wait(&w->cond, &w->lock);
    rc = w->state == MC__W_RUNNING ? 0 : w->start_err;
    pthread_mutex_unlock(&w->lock);
    if (rc) {
        atomic_store(&w->stop, 1);
        pthread_join(w->thread, NULL);
        mc__watch_free(w);
        return rc;
    }
    *out = w;
    return 0;
}

void mc__etcd_watch_stop(mc_etcd_watch_t *w) {
    if (!w)
        return;
    atomic_store(&w->stop, 1);
    pthread_join(w->thread, NULL);
    mc__watch_free(w);
}
