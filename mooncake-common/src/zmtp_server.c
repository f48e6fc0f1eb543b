/* A bound ZMTP socket (PUB or ROUTER, mooncake/common/zmtp_socket.h) served by one poll thread.
 * Senders never block: publish/send_to append to a connection's queue under the lock and wake
 * the thread, which writes what each socket takes. A subscriber whose queue is over the
 * high-water mark misses the message (counted), as libzmq's PUB drops for a slow peer; the
 * publisher's own latency does not depend on any peer. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/log.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "mooncake/common/zmtp_socket.h"
#include "mooncake/error.h"

#define MAX_CONNS 1024
#define MAX_SUBS 1024
#define MAX_TOPIC 1024
#define HANDSHAKE_MS 10000

typedef struct sub {
    uint8_t *topic;
    size_t len;
} sub_t;

typedef struct conn {
    int fd;
    uint64_t id;
    uint64_t since_ms;
    int bad; /* close at the next turn */
    mc_zmtp_stream_t st;
    mc_buf_t in;
    mc_buf_t out; /* bytes from out_off on are unsent */
    size_t out_off;
    sub_t *subs;
    size_t nsubs, subs_cap;
} conn_t;

struct mc_zmtp_server {
    int lfd;
    int wake[2];
    uint16_t port;
    int is_pub;
    const char *type;
    size_t hwm, max_msg;
    mc_zmtp_msg_cb cb;
    void *arg;
    pthread_t thr;
    pthread_mutex_t mu; /* conns, each conn's out and subs, stats */
    conn_t **conns;
    size_t nconns, conns_cap;
    uint64_t next_id;
    int stop;
    mc_zmtp_server_stats_t stats;
};

int mc__zmtp_endpoint_parse(const char *endpoint, char *host, size_t cap, uint16_t *port) {
    char tmp[300];
    if (!endpoint || strncmp(endpoint, "tcp://", 6) != 0 || strlen(endpoint + 6) >= sizeof(tmp))
        return MC_ERR_INVALID_ARGUMENT;
    snprintf(tmp, sizeof(tmp), "%s", endpoint + 6);
    if (mc__split_host_port(tmp, host, cap, port) != 0)
        return MC_ERR_INVALID_ARGUMENT;
    if (!strcmp(host, "*"))
        host[0] = 0;
    return 0;
}

static void wake(mc_zmtp_server_t *s) {
    char c = 1;
    ssize_t rc = write(s->wake[1], &c, 1);
    (void)rc; /* a full pipe already wakes the thread */
}

static void conn_free(conn_t *c) {
    close(c->fd);
    mc__buf_free(&c->in);
    mc__buf_free(&c->out);
    for (size_t i = 0; i < c->nsubs; i++)
        mc__free(c->subs[i].topic);
    mc__free(c->subs);
    mc__free(c);
}

/* Appends a message's frames to a connection's queue; the lock is held. */
static int queue_msg(mc_zmtp_server_t *s, conn_t *c, const struct iovec *parts, int n, int delim) {
    size_t bytes = 0;
    for (int i = 0; i < n; i++)
        bytes += parts[i].iov_len + 9;
    if (c->out.len - c->out_off + bytes > s->hwm) {
        s->stats.dropped++;
        return MC_ERR_BUFFER_OVERFLOW;
    }
    if (delim)
        mc__zmtp_frame_put(&c->out, MC_ZMTP_F_MORE, NULL, 0);
    for (int i = 0; i < n; i++)
        mc__zmtp_frame_put(&c->out, i + 1 < n ? MC_ZMTP_F_MORE : 0, parts[i].iov_base,
                           parts[i].iov_len);
    if (c->out.failed) {
        c->bad = 1;
        return MC_ERR_MEMORY;
    }
    return 0;
}

static int subscribed(const conn_t *c, const struct iovec *topic) {
    for (size_t i = 0; i < c->nsubs; i++)
        if (c->subs[i].len <= topic->iov_len &&
            memcmp(c->subs[i].topic, topic->iov_base, c->subs[i].len) == 0)
            return 1;
    return 0;
}

int mc__zmtp_server_publish(mc_zmtp_server_t *s, const struct iovec *parts, int n) {
    int any = 0;
    if (!s->is_pub || n < 1 || n > MC_ZMTP_MAX_PARTS)
        return MC_ERR_INVALID_ARGUMENT;
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->nconns; i++) {
        conn_t *c = s->conns[i];
        if (c->st.state == 2 && !c->bad && subscribed(c, &parts[0]) &&
            queue_msg(s, c, parts, n, 0) == 0)
            any = 1;
    }
    pthread_mutex_unlock(&s->mu);
    if (any)
        wake(s);
    return 0;
}

int mc__zmtp_server_send_to(mc_zmtp_server_t *s, uint64_t id, const struct iovec *parts, int n) {
    int rc = MC_ERR_SOCKET;
    if (s->is_pub || n < 1 || n > MC_ZMTP_MAX_PARTS)
        return MC_ERR_INVALID_ARGUMENT;
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->nconns; i++) {
        conn_t *c = s->conns[i];
        if (c->id == id && !c->bad) {
            /* a REQ peer expects the empty delimiter its request carried */
            rc = queue_msg(s, c, parts, n, !strcmp(c->st.peer_type, "REQ"));
            break;
        }
    }
    pthread_mutex_unlock(&s->mu);
    if (rc == 0)
        wake(s);
    return rc;
}

/* A subscription change from a peer: 1 subscribes, 0 cancels one matching subscription. */
static void subscription(conn_t *c, int on, const uint8_t *topic, size_t len) {
    if (len > MAX_TOPIC) {
        c->bad = 1;
        return;
    }
    if (!on) {
        for (size_t i = 0; i < c->nsubs; i++)
            if (c->subs[i].len == len && memcmp(c->subs[i].topic, topic, len) == 0) {
                mc__free(c->subs[i].topic);
                c->subs[i] = c->subs[--c->nsubs];
                return;
            }
        return;
    }
    if (c->nsubs == MAX_SUBS) {
        c->bad = 1;
        return;
    }
    sub_t *arr = mc__array_grow(c->subs, c->nsubs + 1, &c->subs_cap, sizeof(*arr), 4);
    uint8_t *copy = mc__malloc(len ? len : 1);
    if (!arr || !copy) {
        mc__free(copy);
        c->bad = 1;
        return;
    }
    c->subs = arr;
    memcpy(copy, topic, len);
    c->subs[c->nsubs].topic = copy;
    c->subs[c->nsubs++].len = len;
}

/* Parses what a connection sent; the lock is not held (in is the thread's own), except around
 * the changes to subs and out that senders also touch. */
static void conn_input(mc_zmtp_server_t *s, conn_t *c) {
    size_t off = 0;
    while (!c->bad) {
        int ev;
        mc_zmtp_msg_t m;
        const uint8_t *cmd, *data;
        size_t cmd_len, data_len;
        int64_t used = mc__zmtp_stream_next(&c->st, c->in.data + off, c->in.len - off, &ev, &m,
                                            &cmd, &cmd_len, &data, &data_len);
        if (used < 0) {
            pthread_mutex_lock(&s->mu);
            s->stats.bad_peers++;
            pthread_mutex_unlock(&s->mu);
            c->bad = 1;
            break;
        }
        if (used == 0)
            break;
        pthread_mutex_lock(&s->mu);
        if (ev == MC_ZMTP_EV_CMD) {
            if (s->is_pub && mc__zmtp_command_is(cmd, cmd_len, "SUBSCRIBE"))
                subscription(c, 1, data, data_len);
            else if (s->is_pub && mc__zmtp_command_is(cmd, cmd_len, "CANCEL"))
                subscription(c, 0, data, data_len);
            else if (mc__zmtp_command_is(cmd, cmd_len, "PING") && data_len >= 2)
                mc__zmtp_command_put(&c->out, "PONG", data + 2, data_len - 2);
            else if (mc__zmtp_command_is(cmd, cmd_len, "ERROR"))
                c->bad = 1;
        } else if (ev == MC_ZMTP_EV_MSG && s->is_pub) {
            /* ZMTP 3.0's subscriptions: a message whose first byte is 1 (subscribe) or 0 */
            if (m.nparts == 1 && m.len[0] >= 1 && m.part[0][0] <= 1)
                subscription(c, m.part[0][0], m.part[0] + 1, m.len[0] - 1);
        }
        pthread_mutex_unlock(&s->mu);
        if (ev == MC_ZMTP_EV_MSG && !s->is_pub && s->cb) {
            /* a REQ peer's message starts with the empty delimiter: the callback sees the rest */
            if (!strcmp(c->st.peer_type, "REQ")) {
                if (m.nparts < 2 || m.len[0] != 0) {
                    c->bad = 1;
                    break;
                }
                memmove(&m.part[0], &m.part[1], sizeof(m.part[0]) * (size_t)(m.nparts - 1));
                memmove(&m.len[0], &m.len[1], sizeof(m.len[0]) * (size_t)(m.nparts - 1));
                m.nparts--;
            }
            s->cb(s, c->id, &m, s->arg);
        }
        off += (size_t)used;
    }
    if (off) {
        memmove(c->in.data, c->in.data + off, c->in.len - off);
        c->in.len -= off;
    }
}

static void conn_read(mc_zmtp_server_t *s, conn_t *c) {
    for (;;) {
        if (mc__buf_reserve(&c->in, 65536) != 0) {
            c->bad = 1;
            return;
        }
        ssize_t r = recv(c->fd, c->in.data + c->in.len, 65536, MSG_DONTWAIT);
        if (r > 0) {
            c->in.len += (size_t)r;
            /* a peer may not hold more than one message's worth unparsed */
            if (c->in.len > s->max_msg + 65536 + MC_ZMTP_GREETING_SIZE) {
                conn_input(s, c);
                if (c->in.len > s->max_msg + 65536 + MC_ZMTP_GREETING_SIZE)
                    c->bad = 1;
            }
            if (c->bad)
                return;
            continue;
        }
        if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            c->bad = 1;
        if (r < 0 && errno == EINTR)
            continue;
        break;
    }
    conn_input(s, c);
}

/* Writes what the socket takes; the lock is held. */
static void conn_write(conn_t *c) {
    while (c->out_off < c->out.len) {
        ssize_t w = send(c->fd, c->out.data + c->out_off, c->out.len - c->out_off,
                         MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w > 0) {
            c->out_off += (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            c->bad = 1;
        break;
    }
    if (c->out_off == c->out.len) {
        mc__buf_reset(&c->out);
        c->out_off = 0;
    }
}

static void accept_one(mc_zmtp_server_t *s) {
    int fd = mc__accept(s->lfd);
    uint8_t greeting[MC_ZMTP_GREETING_SIZE];
    conn_t *c;
    conn_t **arr;
    if (fd < 0)
        return;
    pthread_mutex_lock(&s->mu);
    if (s->nconns == MAX_CONNS ||
        !(arr = mc__array_grow(s->conns, s->nconns + 1, &s->conns_cap, sizeof(*arr), 8)) ||
        !(c = mc__calloc(1, sizeof(*c)))) {
        pthread_mutex_unlock(&s->mu);
        close(fd);
        return;
    }
    s->conns = arr;
    c->fd = fd;
    c->id = ++s->next_id;
    c->since_ms = mc__now_ms();
    (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    mc__buf_init(&c->in);
    mc__buf_init(&c->out);
    mc__zmtp_stream_init(&c->st, s->type, s->max_msg);
    /* NULL mechanism: our greeting and READY need nothing from the peer first */
    mc__zmtp_greeting(greeting, 1);
    mc__buf_put(&c->out, greeting, sizeof(greeting));
    mc__zmtp_ready_put(&c->out, s->type);
    c->bad = c->out.failed;
    s->conns[s->nconns++] = c;
    pthread_mutex_unlock(&s->mu);
}

static void *server_main(void *arg) {
    mc_zmtp_server_t *s = arg;
    struct pollfd *pfds = NULL;
    size_t pcap = 0;
    for (;;) {
        size_t n = 0;
        pthread_mutex_lock(&s->mu);
        if (s->stop) {
            pthread_mutex_unlock(&s->mu);
            break;
        }
        /* close the bad and the ones whose handshake took too long */
        uint64_t now = mc__now_ms();
        for (size_t i = 0; i < s->nconns;) {
            conn_t *c = s->conns[i];
            if (c->bad || (c->st.state != 2 && now - c->since_ms > HANDSHAKE_MS)) {
                s->conns[i] = s->conns[--s->nconns];
                conn_free(c);
                continue;
            }
            i++;
        }
        struct pollfd *p = mc__array_grow(pfds, s->nconns + 2, &pcap, sizeof(*p), 16);
        if (!p) {
            pthread_mutex_unlock(&s->mu);
            usleep(10000);
            continue;
        }
        pfds = p;
        pfds[n++] = (struct pollfd){.fd = s->wake[0], .events = POLLIN};
        pfds[n++] = (struct pollfd){.fd = s->lfd, .events = POLLIN};
        for (size_t i = 0; i < s->nconns; i++) {
            conn_t *c = s->conns[i];
            pfds[n++] = (struct pollfd){.fd = c->fd,
                                        .events = POLLIN | (c->out_off < c->out.len ? POLLOUT : 0)};
        }
        pthread_mutex_unlock(&s->mu);
        if (poll(pfds, n, 1000) < 0 && errno != EINTR)
            usleep(1000);
        if (pfds[0].revents) {
            char drain[256];
            while (read(s->wake[0], drain, sizeof(drain)) > 0) {
            }
        }
        if (pfds[1].revents & POLLIN)
            accept_one(s);
        /* Only this thread removes connections, so the first n - 2 are the ones polled. */
        for (size_t i = 2; i < n; i++) {
            conn_t *c = s->conns[i - 2];
            if (pfds[i].revents & (POLLIN | POLLHUP | POLLERR))
                conn_read(s, c);
        }
        pthread_mutex_lock(&s->mu);
        for (size_t i = 0; i < s->nconns; i++)
            if (!s->conns[i]->bad && s->conns[i]->out_off < s->conns[i]->out.len)
                conn_write(s->conns[i]);
        pthread_mutex_unlock(&s->mu);
    }
    mc__free(pfds);
    return NULL;
}

int mc__zmtp_server_start(const char *endpoint, const char *socket_type, size_t hwm_bytes,
                          size_t max_msg, mc_zmtp_msg_cb cb, void *arg, mc_zmtp_server_t **out) {
    char host[256];
    uint16_t port;
    mc_zmtp_server_t *s;
    int rc;
    *out = NULL;
    if (mc__zmtp_endpoint_parse(endpoint, host, sizeof(host), &port) != 0 || !socket_type ||
        (strcmp(socket_type, "PUB") && strcmp(socket_type, "ROUTER")))
        return MC_ERR_INVALID_ARGUMENT;
    if (!(s = mc__calloc(1, sizeof(*s))))
        return MC_ERR_MEMORY;
    s->is_pub = !strcmp(socket_type, "PUB");
    s->type = s->is_pub ? "PUB" : "ROUTER";
    s->hwm = hwm_bytes ? hwm_bytes : (64u << 20);
    s->max_msg = max_msg ? max_msg : (1u << 20);
    s->cb = cb;
    s->arg = arg;
    s->wake[0] = s->wake[1] = -1;
    pthread_mutex_init(&s->mu, NULL);
    s->lfd = mc__tcp_listen(host, port, 128, &s->port);
    if (s->lfd < 0) {
        rc = s->lfd;
        goto fail;
    }
    if (pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        rc = MC_ERR_SOCKET;
        goto fail;
    }
    if (pthread_create(&s->thr, NULL, server_main, s) != 0) {
        rc = MC_ERR_MEMORY;
        goto fail;
    }
    *out = s;
    return 0;
fail:
    if (s->lfd >= 0)
        close(s->lfd);
    if (s->wake[0] >= 0) {
        close(s->wake[0]);
        close(s->wake[1]);
    }
    pthread_mutex_destroy(&s->mu);
    mc__free(s);
    return rc;
}

uint16_t mc__zmtp_server_port(const mc_zmtp_server_t *s) {
    return s->port;
}

void mc__zmtp_server_stats(mc_zmtp_server_t *s, mc_zmtp_server_stats_t *out) {
    pthread_mutex_lock(&s->mu);
    *out = s->stats;
    out->peers = 0;
    for (size_t i = 0; i < s->nconns; i++)
        out->peers += s->conns[i]->st.state == 2 && !s->conns[i]->bad;
    pthread_mutex_unlock(&s->mu);
}

void mc__zmtp_server_stop(mc_zmtp_server_t *s) {
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_mutex_unlock(&s->mu);
    wake(s);
    pthread_join(s->thr, NULL);
    for (size_t i = 0; i < s->nconns; i++)
        conn_free(s->conns[i]);
    mc__free(s->conns);
    close(s->lfd);
    close(s->wake[0]);
    close(s->wake[1]);
    pthread_mutex_destroy(&s->mu);
    mc__free(s);
}
