/* A connected ZMTP socket (SUB, DEALER or REQ; mooncake/common/zmtp_socket.h): blocking calls,
 * each bounded by a deadline. The conductor's subscriptions and replay requests use it. */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/zmtp_socket.h"
#include "mooncake/error.h"

struct mc_zmtp_client {
    int fd;
    int is_req;
    mc_zmtp_stream_t st;
    mc_buf_t in;
    size_t consumed; /* bytes of in the last message took: dropped at the next receive */
};

static int send_buf(mc_zmtp_client_t *c, mc_buf_t *b, uint64_t deadline_ms) {
    int rc = b->failed ? MC_ERR_MEMORY : mc__send_all(c->fd, b->data, b->len, deadline_ms);
    mc__buf_free(b);
    return rc;
}

/* Parses the next event out of what is buffered, reading more until one comes. */
static int next_event(mc_zmtp_client_t *c, int *ev, mc_zmtp_msg_t *m, const uint8_t **cmd,
                      size_t *cmd_len, const uint8_t **data, size_t *data_len,
                      uint64_t deadline_ms) {
    for (;;) {
        int64_t used = 0;
        *ev = MC_ZMTP_EV_NONE;
        if (c->in.data) /* nothing read yet: no buffer to parse */
            used = mc__zmtp_stream_next(&c->st, c->in.data + c->consumed, c->in.len - c->consumed,
                                        ev, m, cmd, cmd_len, data, data_len);
        if (used < 0)
            return MC_ERR_INVALID_ARGUMENT;
        if (used > 0) {
            c->consumed += (size_t)used;
            return 0;
        }
        /* need more: drop what earlier events took (no part of it is referenced any more) */
        if (c->consumed) {
            memmove(c->in.data, c->in.data + c->consumed, c->in.len - c->consumed);
            c->in.len -= c->consumed;
            c->consumed = 0;
        }
        if (mc__buf_reserve(&c->in, 65536) != 0)
            return MC_ERR_MEMORY;
        int rc = mc__wait_fd(c->fd, POLLIN, deadline_ms);
        if (rc != 0)
            return rc;
        ssize_t r = recv(c->fd, c->in.data + c->in.len, 65536, MSG_DONTWAIT);
        if (r == 0) {
            errno = ECONNRESET;
            return MC_ERR_SOCKET;
        }
        if (r < 0) {
            if (errno == EAGAIN || errno == EINTR)
                continue;
            return MC_ERR_SOCKET;
        }
        c->in.len += (size_t)r;
    }
}

int mc__zmtp_connect(const char *endpoint, const char *socket_type, size_t max_msg,
                     uint64_t deadline_ms, mc_zmtp_client_t **out) {
    char host[256];
    uint16_t port;
    uint8_t greeting[MC_ZMTP_GREETING_SIZE];
    mc_zmtp_client_t *c;
    mc_buf_t b;
    int rc, ev = MC_ZMTP_EV_NONE;
    static const char *const types[] = {"SUB", "DEALER", "REQ"};
    const char *type = NULL;
    *out = NULL;
    for (size_t i = 0; socket_type && i < sizeof(types) / sizeof(types[0]); i++)
        if (!strcmp(types[i], socket_type))
            type = types[i];
    if (!type || mc__zmtp_endpoint_parse(endpoint, host, sizeof(host), &port) != 0 || !host[0])
        return MC_ERR_INVALID_ARGUMENT;
    if (!(c = mc__calloc(1, sizeof(*c))))
        return MC_ERR_MEMORY;
    c->is_req = !strcmp(type, "REQ");
    mc__buf_init(&c->in);
    mc__zmtp_stream_init(&c->st, type, max_msg ? max_msg : (1u << 20));
    c->fd = mc__tcp_connect(host, port, deadline_ms);
    if (c->fd < 0) {
        rc = c->fd;
        goto fail;
    }
    mc__buf_init(&b);
    mc__zmtp_greeting(greeting, 0);
    mc__buf_put(&b, greeting, sizeof(greeting));
    mc__zmtp_ready_put(&b, type);
    if ((rc = send_buf(c, &b, deadline_ms)) != 0)
        goto fail;
    while (ev != MC_ZMTP_EV_READY) {
        mc_zmtp_msg_t m;
        const uint8_t *cmd, *data;
        size_t cl, dl;
        if ((rc = next_event(c, &ev, &m, &cmd, &cl, &data, &dl, deadline_ms)) != 0)
            goto fail;
    }
    *out = c;
    return 0;
fail:
    mc__zmtp_close(c);
    return rc;
}

int mc__zmtp_subscribe(mc_zmtp_client_t *c, const void *topic, size_t n, uint64_t deadline_ms) {
    mc_buf_t b;
    mc__buf_init(&b);
    if (c->st.minor >= 1) {
        mc__zmtp_command_put(&b, "SUBSCRIBE", topic, n);
    } else {
        /* a ZMTP 3.0 publisher takes a message: 1, then the topic */
        mc_buf_t body;
        mc__buf_init(&body);
        mc__buf_u8(&body, 1);
        mc__buf_put(&body, topic, n);
        mc__zmtp_frame_put(&b, 0, body.data, body.len);
        b.failed |= body.failed;
        mc__buf_free(&body);
    }
    return send_buf(c, &b, deadline_ms);
}

int mc__zmtp_send(mc_zmtp_client_t *c, const struct iovec *parts, int n, uint64_t deadline_ms) {
    mc_buf_t b;
    if (n < 1 || n > MC_ZMTP_MAX_PARTS)
        return MC_ERR_INVALID_ARGUMENT;
    mc__buf_init(&b);
    if (c->is_req)
        mc__zmtp_frame_put(&b, MC_ZMTP_F_MORE, NULL, 0);
    for (int i = 0; i < n; i++)
        mc__zmtp_frame_put(&b, i + 1 < n ? MC_ZMTP_F_MORE : 0, parts[i].iov_base, parts[i].iov_len);
    return send_buf(c, &b, deadline_ms);
}

int mc__zmtp_recv(mc_zmtp_client_t *c, mc_zmtp_msg_t *m, uint64_t deadline_ms) {
    for (;;) {
        int ev, rc;
        const uint8_t *cmd, *data;
        size_t cl, dl;
        if ((rc = next_event(c, &ev, m, &cmd, &cl, &data, &dl, deadline_ms)) != 0)
            return rc;
        if (ev == MC_ZMTP_EV_CMD) {
            if (mc__zmtp_command_is(cmd, cl, "ERROR"))
                return MC_ERR_REJECT_HANDSHAKE;
            if (mc__zmtp_command_is(cmd, cl, "PING") && dl >= 2) {
                mc_buf_t b;
                mc__buf_init(&b);
                mc__zmtp_command_put(&b, "PONG", data + 2, dl - 2);
                if ((rc = send_buf(c, &b, deadline_ms)) != 0)
                    return rc;
            }
            continue;
        }
        if (ev != MC_ZMTP_EV_MSG)
            continue;
        if (c->is_req) {
            if (m->nparts < 2 || m->len[0] != 0)
                return MC_ERR_INVALID_ARGUMENT;
            memmove(&m->part[0], &m->part[1], sizeof(m->part[0]) * (size_t)(m->nparts - 1));
            memmove(&m->len[0], &m->len[1], sizeof(m->len[0]) * (size_t)(m->nparts - 1));
            m->nparts--;
        }
        return 0;
    }
}

void mc__zmtp_close(mc_zmtp_client_t *c) {
    if (!c)
        return;
    if (c->fd >= 0)
        close(c->fd);
    mc__buf_free(&c->in);
    mc__free(c);
}
