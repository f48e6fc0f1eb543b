/* The initiator's write-ask (mc_engine_write_ask): header, head, message and payload in one
 * scatter send on a pooled connection to the peer, then one reply carrying the answer of the
 * peer owner's handler.
 *
 * Retrying is what could make a write-ask run twice (a commit applied twice), so a request is
 * sent again on a fresh connection only when none of its bytes could have reached the peer: the
 * pooled connection was found closed before the send, or its first send failed outright. Any
 * failure after a byte left is an unknown outcome for the caller to resolve. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "devmem.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "peer_conn.h"
#include "proto.h"
#include "te_internal.h"

/* A pooled connection the peer closed while it sat idle (its idle timeout, a restart) has its
 * end of stream waiting: found before the send, the request is certainly undelivered and goes
 * on a fresh connection. One non-blocking peek; a pooled connection carries nothing unread. */
static int mc__conn_closed(int fd) {
    char b;
    ssize_t r = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* Sends the pieces; *sent tells whether a byte may have left (then the outcome is the peer's):
 * only a first send refused outright leaves it 0. */
static int mc__ask_send(int fd, struct iovec *iov, int cnt, uint64_t dl, int *sent) {
    struct iovec *v = iov;
    ssize_t w = mc__sendv_some(fd, v, cnt);
    *sent = 0;
    if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
        return MC_ERR_SOCKET;
    *sent = 1;
    if (w > 0)
        mc__iov_advance(&v, &cnt, (size_t)w);
    return mc__sendv(fd, v, cnt, dl);
}

/* Reads the reply: 0 with *remote_err (the peer's verdict) and, on success, the answer in
 * answer[0..*answer_len) (an answer over cap is consumed: *remote_err MC_ERR_INVALID_ARGUMENT,
 * *answer_len its length); MC_ERR_SOCKET when the stream is unusable. The first receive spins
 * as a small tcp transfer's does: the reply comes once the payload crossed and the handler ran. */
static int mc__ask_read_reply(int fd, uint64_t len, uint64_t dl, void *answer, size_t cap,
                              size_t *answer_len, int *remote_err) {
    uint8_t raw[MC_FRAME_HEADER_SIZE];
    uint8_t body[MC__TE_MAX_ERROR_BODY];
    mc_frame_header_t h;
    uint64_t left;
    *remote_err = 0;
    if (mc__recv_reply(fd, raw, sizeof(raw), dl, mc__reply_spin_for(len)) ||
        mc__frame_header_decode(raw, sizeof(raw), MC__TE_MAX_ASK_ANSWER, &h))
        return MC_ERR_SOCKET;
    if (!(h.flags & MC_FRAME_F_REPLY) || h.type != MC__TE_WRITE_ASK || h.request_id != 1)
        return MC_ERR_SOCKET;
    if (h.flags & MC_FRAME_F_ERROR) {
        if (h.body_len > sizeof(body) || mc__recv_all(fd, body, h.body_len, dl) ||
            mc__te_decode_error(body, h.body_len, remote_err, NULL, 0))
            return MC_ERR_SOCKET;
        return 0;
    }
    *answer_len = (size_t)h.body_len;
    if (h.body_len <= cap)
        return h.body_len ? mc__recv_all(fd, answer, h.body_len, dl) : 0;
    /* read past, so that the connection stays usable */
    for (left = h.body_len; left > 0;) {
        size_t k = left < sizeof(body) ? (size_t)left : sizeof(body);
        if (mc__recv_all(fd, body, k, dl))
            return MC_ERR_SOCKET;
        left -= k;
    }
    *remote_err = MC_ERR_INVALID_ARGUMENT;
    return 0;
}

/* 1 when the segment is this engine itself (opened under another of its names). */
static int mc__peer_is_self(mc_engine_t *e, mc__peer_t *p) {
    int self;
    pthread_mutex_lock(&p->lock);
    self = p->desc && p->desc->instance_id == e->instance_id;
    pthread_mutex_unlock(&p->lock);
    return self;
}

static int mc__write_ask(mc_engine_t *e, mc_segment_id_t target, const void *source,
                         uint64_t target_offset, size_t len, uint64_t target_epoch, const void *msg,
                         size_t msg_len, void *answer, size_t cap, size_t *answer_len) {
    uint8_t head[MC__TE_ASK_HEAD];
    uint64_t dl = mc__now_ms() + (uint64_t)e->timeout_ms;
    mc__peer_t *p;
    int dev = -1;
    int rc = MC_ERR_SOCKET;
    if (!answer_len || !e->initialized || (!source && len) || (!msg && msg_len) ||
        msg_len > MC__TE_MAX_ASK_MSG || (!answer && cap) || len > MC__TE_MAX_SLICE ||
        (source && (uintptr_t)source > UINTPTR_MAX - len))
        return MC_ERR_INVALID_ARGUMENT;
    *answer_len = 0;
    if (target == MC_LOCAL_SEGMENT_ID)
        return MC_ERR_NOT_IMPLEMENTED;
    p = mc__peer_get(e, target);
    if (!p)
        return MC_ERR_INVALID_ARGUMENT;
    if (len && (rc = mc__devmem_local(e, source, len, 0, &dev)) != 0)
        return rc;
    if (dev >= 0)
        return MC_ERR_NOT_IMPLEMENTED; /* sent from host memory only (no staging here) */
    /* a peer marked broken may have restarted elsewhere (metadata mode): where it is now */
    pthread_mutex_lock(&p->lock);
    rc = p->stale || !p->desc;
    pthread_mutex_unlock(&p->lock);
    if (rc && (rc = mc__peer_refresh(e, p)) != 0)
        return rc;
    if (mc__peer_is_self(e, p))
        return MC_ERR_NOT_IMPLEMENTED;
    mc__te_encode_ask(head, 1, target_offset, len, target_epoch, (uint32_t)msg_len);
    for (int attempt = 0; attempt < 2; attempt++) {
        struct iovec iov[3] = {{head, sizeof(head)},
                               {(void *)(uintptr_t)msg, msg_len},
                               {(void *)(uintptr_t)source, len}};
        int reused = 0, sent = 0, remote_err = 0;
        int fd = mc__peer_conn_get(e, p, dl, &reused);
        if (fd < 0)
            return fd == MC_ERR_DNS ? fd : MC_ERR_SOCKET; /* nothing sent */
        if (reused && mc__conn_closed(fd)) {
            close(fd);
            attempt--; /* a dead idle one costs no attempt: the pool empties in turn */
            continue;
        }
        rc = mc__ask_send(fd, iov, 3, dl, &sent);
        if (!rc)
            rc = mc__ask_read_reply(fd, len, dl, answer, cap, answer_len, &remote_err);
        if (!rc) {
            mc__peer_conn_put(p, fd);
            if (remote_err == MC_ERR_ADDRESS_NOT_REGISTERED) {
                /* our copy of its descriptor may be out of date too */
                pthread_mutex_lock(&p->lock);
                p->stale = 1;
                pthread_mutex_unlock(&p->lock);
            }
            return remote_err;
        }
        close(fd);
        if (sent || !reused)
            break; /* it may have been delivered: the outcome is unknown */
        /* the first send on a pooled connection failed outright: retry on a fresh one */
        pthread_mutex_lock(&p->lock);
        mc__peer_conn_drop_locked(p);
        pthread_mutex_unlock(&p->lock);
    }
    *answer_len = 0;
    mc__peer_mark_broken(p);
    return MC_ERR_SOCKET;
}

int mc_engine_write_ask(mc_engine_t *e, mc_segment_id_t target, const void *source,
                        uint64_t target_offset, size_t len, uint64_t target_epoch, const void *msg,
                        size_t msg_len, void *answer, size_t cap, size_t *answer_len) {
    int rc;
    MC__GATED(e, rc,
              mc__write_ask(e, target, source, target_offset, len, target_epoch, msg, msg_len,
                            answer, cap, answer_len));
    return rc;
}
