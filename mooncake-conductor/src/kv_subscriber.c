/* A subscription's thread (kv_subscriber.h). */
#include "kv_subscriber.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/log.h"
#include "mooncake/common/time.h"
#include "mooncake/common/zmtp_socket.h"
#include "mooncake/error.h"

#define MAX_MSG (64u << 20)
#define POLL_MS 200
#define REPLAY_MS 5000

struct mc_kv_sub {
    char *endpoint, *replay;
    mc_kv_sub_ops_t ops;
    void *arg;
    pthread_t thr;
    atomic_int stop;
    pthread_mutex_t mu; /* stats */
    mc_kv_sub_stats_t st;
    int have_seq;
};

typedef struct deliver_ctx {
    mc_kv_sub_t *s;
    const mc_kv_batch_t *batch;
} deliver_ctx_t;

static void on_event(const mc_kv_event_t *ev, void *arg) {
    deliver_ctx_t *d = arg;
    d->s->ops.event(d->s->arg, ev, d->batch);
}

static void count_event(const mc_kv_event_t *ev, void *arg) {
    (void)ev;
    (void)arg;
}

static uint64_t be64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return v;
}

/* Decodes one payload and hands its events on; the stats lock is not held. */
static void deliver(mc_kv_sub_t *s, uint64_t seq, const uint8_t *p, size_t n) {
    mc_kv_batch_t info, first;
    deliver_ctx_t d = {s, &first};
    /* A batch's DP rank comes after its events (the array layouts): read it once for the
     * batch's fields, then again to hand the events on with them. */
    int rc = mc__kv_batch_decode(p, n, count_event, NULL, &first);
    if (rc == 0)
        rc = mc__kv_batch_decode(p, n, on_event, &d, &info);
    pthread_mutex_lock(&s->mu);
    if (rc != 0) {
        s->st.malformed_batches++;
    } else {
        s->st.batches++;
        s->st.events += info.events;
        s->st.malformed_events += info.malformed;
    }
    s->st.last_seq = seq;
    pthread_mutex_unlock(&s->mu);
}

/* Asks the replay endpoint for [from, to) and delivers what comes in order; returns how many. */
static uint64_t replay(mc_kv_sub_t *s, uint64_t from, uint64_t to) {
    mc_zmtp_client_t *c = NULL;
    mc_zmtp_msg_t m;
    uint8_t req[8];
    uint64_t got = 0, next = from;
    uint64_t deadline = mc__now_ms() + REPLAY_MS;
    if (!s->replay || mc__zmtp_connect(s->replay, "DEALER", MAX_MSG, deadline, &c) != 0)
        return 0;
    for (int i = 0; i < 8; i++)
        req[i] = (uint8_t)(from >> (56 - 8 * i));
    struct iovec parts[2] = {{"", 0}, {req, 8}};
    if (mc__zmtp_send(c, parts, 2, deadline) != 0)
        goto out;
    while (mc__zmtp_recv(c, &m, deadline) == 0) {
        if (m.nparts != 3 || m.len[0] != 0 || m.len[1] != 8)
            break;
        uint64_t seq = be64(m.part[1]);
        if (seq == UINT64_MAX)
            break; /* the end marker */
        /* only the missing ones, in order; the live message that showed the gap follows */
        if (seq >= next && seq < to) {
            deliver(s, seq, m.part[2], m.len[2]);
            got++;
            next = seq + 1;
        }
    }
out:
    mc__zmtp_close(c);
    return got;
}

static void on_message(mc_kv_sub_t *s, const mc_zmtp_msg_t *m) {
    uint64_t seq, last;
    int have;
    if (m->nparts != 3 || m->len[1] != 8) {
        pthread_mutex_lock(&s->mu);
        s->st.malformed_batches++;
        pthread_mutex_unlock(&s->mu);
        return;
    }
    seq = be64(m->part[1]);
    pthread_mutex_lock(&s->mu);
    last = s->st.last_seq;
    have = s->have_seq;
    s->have_seq = 1;
    pthread_mutex_unlock(&s->mu);
    if (have && seq <= last) {
        /* the sequence went back: a new publisher process */
        pthread_mutex_lock(&s->mu);
        s->st.restarts++;
        pthread_mutex_unlock(&s->mu);
        if (s->ops.restarted)
            s->ops.restarted(s->arg);
    } else if (have && seq > last + 1) {
        uint64_t missing = seq - last - 1;
        uint64_t got = replay(s, last + 1, seq);
        pthread_mutex_lock(&s->mu);
        s->st.gaps++;
        s->st.replayed += got;
        s->st.lost += missing - got;
        pthread_mutex_unlock(&s->mu);
    }
    deliver(s, seq, m->part[2], m->len[2]);
}

static void *sub_main(void *arg) {
    mc_kv_sub_t *s = arg;
    uint64_t backoff = 100;
    while (!atomic_load(&s->stop)) {
        mc_zmtp_client_t *c = NULL;
        mc_zmtp_msg_t m;
        if (mc__zmtp_connect(s->endpoint, "SUB", MAX_MSG, mc__now_ms() + 2000, &c) != 0 ||
            mc__zmtp_subscribe(c, "", 0, mc__now_ms() + 2000) != 0) {
            mc__zmtp_close(c);
            for (uint64_t t = 0; t < backoff && !atomic_load(&s->stop); t += 50)
                usleep(50000);
            backoff = backoff < 2000 ? backoff * 2 : 2000;
            continue;
        }
        backoff = 100;
        pthread_mutex_lock(&s->mu);
        s->st.connects++;
        pthread_mutex_unlock(&s->mu);
        while (!atomic_load(&s->stop)) {
            int rc = mc__zmtp_recv(c, &m, mc__now_ms() + POLL_MS);
            if (rc == 0) {
                on_message(s, &m);
                continue;
            }
            if (rc == MC_ERR_SOCKET && errno == ETIMEDOUT)
                continue;
            break; /* the publisher went away, or spoke no ZMTP: connect again */
        }
        mc__zmtp_close(c);
    }
    return NULL;
}

int mc__kv_sub_start(const char *endpoint, const char *replay_ep, const mc_kv_sub_ops_t *ops,
                     void *arg, mc_kv_sub_t **out) {
    char host[256];
    uint16_t port;
    mc_kv_sub_t *s;
    *out = NULL;
    if (!ops || !ops->event || mc__zmtp_endpoint_parse(endpoint, host, sizeof(host), &port) != 0 ||
        (replay_ep && *replay_ep &&
         mc__zmtp_endpoint_parse(replay_ep, host, sizeof(host), &port) != 0))
        return MC_ERR_INVALID_ARGUMENT;
    if (!(s = mc__calloc(1, sizeof(*s))))
        return MC_ERR_MEMORY;
    s->endpoint = mc__strdup(endpoint);
    s->replay = replay_ep && *replay_ep ? mc__strdup(replay_ep) : NULL;
    s->ops = *ops;
    s->arg = arg;
    pthread_mutex_init(&s->mu, NULL);
    if (!s->endpoint || (replay_ep && *replay_ep && !s->replay) ||
        pthread_create(&s->thr, NULL, sub_main, s) != 0) {
        pthread_mutex_destroy(&s->mu);
        mc__free(s->endpoint);
        mc__free(s->replay);
        mc__free(s);
        return MC_ERR_MEMORY;
    }
    *out = s;
    return 0;
}

void mc__kv_sub_stats(mc_kv_sub_t *s, mc_kv_sub_stats_t *out) {
    pthread_mutex_lock(&s->mu);
    *out = s->st;
    pthread_mutex_unlock(&s->mu);
}

void mc__kv_sub_stop(mc_kv_sub_t *s) {
    if (!s)
        return;
    atomic_store(&s->stop, 1);
    pthread_join(s->thr, NULL);
    pthread_mutex_destroy(&s->mu);
    mc__free(s->endpoint);
    mc__free(s->replay);
    mc__free(s);
}
