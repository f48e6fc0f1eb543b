/* Pooled request/reply connections to peers (peer_conn.h). */
#include "peer_conn.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "mooncake/common/log.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "proto.h"

/* A new connection gets this long at most, whatever the caller's deadline. */
#define MC__PEER_CONNECT_MS 5000

int mc__peer_connect(mc_engine_t *e, const char *host, uint16_t port, uint64_t deadline_ms) {
    int fd = mc__tcp_connect(host, port, deadline_ms);
    int rc;
    if (fd < 0 || !e->auth.enabled)
        return fd;
    rc = mc__auth_client(&e->auth, fd, deadline_ms);
    if (rc) {
        MC_WARN("peer %s:%u: %s", host, (unsigned)port,
                rc == MC_ERR_REJECT_HANDSHAKE ? "cluster secret handshake refused"
                                              : "connection lost during the handshake");
        close(fd);
        return rc;
    }
    return fd;
}

void mc__peer_conn_drop_locked(mc__peer_t *p) {
    while (p->nidle > 0)
        close(p->idle[--p->nidle]);
}

int mc__peer_conn_get(mc_engine_t *e, mc__peer_t *p, uint64_t deadline_ms, int *reused) {
    char host[MC__TE_NAME_MAX];
    uint16_t port;
    uint64_t cdl = mc__now_ms() + MC__PEER_CONNECT_MS;
    int fd = -1;
    *reused = 0;
    pthread_mutex_lock(&p->lock);
    /* No liveness check (it cost a poll per request): a pooled connection the peer closed
     * fails the request's first send or receive, and every caller retries once on a fresh
     * connection when the one it got was reused. Nothing is left unread on a pooled one: a
     * connection goes back only after a clean exchange. */
    if (p->nidle > 0)
        fd = p->idle[--p->nidle];
    memcpy(host, p->host, sizeof(host));
    port = p->port;
    pthread_mutex_unlock(&p->lock);
    if (fd >= 0) {
        *reused = 1;
        return fd;
    }
    if (deadline_ms && deadline_ms < cdl)
        cdl = deadline_ms;
    fd = mc__peer_connect(e, host, port, cdl);
    if (fd < 0) {
        MC_DEBUG("connect to %s:%u failed: %s", host, (unsigned)port, strerror(errno));
        return fd;
    }
    if (e->conn_sockbuf > 0)
        (void)mc__set_buffers(fd, e->conn_sockbuf, e->conn_sockbuf);
    /* lets the tcp transport wait for a reply in the receive itself (peer_conn.h) */
    (void)mc__set_recv_timeout(fd, MC__PEER_RECV_SLICE_MS);
    /* a peer that goes silent (host gone, link black-holed) ends the request with ETIMEDOUT in
     * seconds rather than at its deadline (30 s), so the caller can go elsewhere */
    (void)mc__set_dead_peer_timeouts(fd);
    return fd;
}

void mc__peer_conn_put(mc__peer_t *p, int fd) {
    pthread_mutex_lock(&p->lock);
    if (p->nidle < MC__TE_POOL_MAX) {
        p->idle[p->nidle++] = fd;
        fd = -1;
    }
    pthread_mutex_unlock(&p->lock);
    if (fd >= 0)
        close(fd);
}

int mc__peer_read_reply(int fd, uint8_t type, uint64_t request_id, uint64_t max_body,
                        uint64_t deadline_ms, mc_frame_header_t *h, int *remote_err) {
    uint8_t raw[MC_FRAME_HEADER_SIZE];
    uint8_t body[MC__TE_MAX_ERROR_BODY];
    uint64_t lim = max_body > MC__TE_MAX_ERROR_BODY ? max_body : MC__TE_MAX_ERROR_BODY;
    *remote_err = 0;
    if (mc__recv_all(fd, raw, sizeof(raw), deadline_ms) ||
        mc__frame_header_decode(raw, sizeof(raw), lim, h))
        return MC_ERR_SOCKET;
    if (!(h->flags & MC_FRAME_F_REPLY) || h->type != type || h->request_id != request_id)
        return MC_ERR_SOCKET;
    if (h->flags & MC_FRAME_F_ERROR) {
        if (h->body_len > sizeof(body) || mc__recv_all(fd, body, h->body_len, deadline_ms) ||
            mc__te_decode_error(body, h->body_len, remote_err, NULL, 0))
            return MC_ERR_SOCKET;
        return 0;
    }
    return h->body_len <= max_body ? 0 : MC_ERR_SOCKET;
}
