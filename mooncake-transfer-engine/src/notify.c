/* Notifies: small {name, message} pairs sent to a peer's queue over its RPC port. */
#include <string.h>
#include <unistd.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "peer_conn.h"
#include "proto.h"
#include "te_internal.h"

/* A peer that never fetches must not make us grow without bound: a count, and bytes (65536
 * notifies of 64 KiB would be 4 GiB). Past either, a notify is refused with TOO_MANY_REQUESTS. */
#define MC__NOTIFY_QUEUE_MAX 65536
#define MC__NOTIFY_QUEUE_BYTES (64ull << 20)

int mc__notify_push(mc_engine_t *e, const char *from, size_t from_len, const char *name,
                    size_t name_len, const uint8_t *msg, size_t msg_len) {
    mc_notify_t n = {0};
    int rc = MC_ERR_MEMORY;
    n.from = mc__strndup(from ? from : "", from_len);
    n.name = mc__strndup(name ? name : "", name_len);
    n.msg = mc__malloc(msg_len ? msg_len : 1);
    if (!n.from || !n.name || !n.msg)
        goto out;
    if (msg_len)
        memcpy(n.msg, msg, msg_len);
    n.msg_len = msg_len;
    pthread_mutex_lock(&e->notify_lock);
    if (e->nnotifies >= MC__NOTIFY_QUEUE_MAX ||
        e->notify_bytes + from_len + name_len + msg_len > MC__NOTIFY_QUEUE_BYTES) {
        rc = MC_ERR_TOO_MANY_REQUESTS;
    } else if (e->nnotifies == e->notifies_cap) {
        size_t ncap = e->notifies_cap ? e->notifies_cap * 2 : 16;
        mc_notify_t *na = mc__realloc(e->notifies, ncap * sizeof(*na));
        if (na) {
            e->notifies = na;
            e->notifies_cap = ncap;
        }
    }
    if (rc != MC_ERR_TOO_MANY_REQUESTS && e->nnotifies < e->notifies_cap) {
        e->notifies[e->nnotifies++] = n;
        e->notify_bytes += from_len + name_len + msg_len;
        memset(&n, 0, sizeof(n));
        rc = 0;
    }
    pthread_mutex_unlock(&e->notify_lock);
out:
    mc__free(n.from);
    mc__free(n.name);
    mc__free(n.msg);
    return rc;
}

void mc__notify_clear(mc_engine_t *e) {
    mc_engine_notifies_free(e->notifies, e->nnotifies);
    e->notifies = NULL;
    e->nnotifies = e->notifies_cap = 0;
    e->notify_bytes = 0;
}

static int mc__notify_remote(mc_engine_t *e, mc__peer_t *p, const mc_buf_t *frame) {
    uint64_t dl = mc__now_ms() + (uint64_t)e->timeout_ms;
    mc_frame_header_t h;
    int rc = MC_ERR_SOCKET;
    for (int attempt = 0; attempt < 2; attempt++) {
        int reused = 0, remote_err = 0;
        int fd = mc__peer_conn_get(e, p, dl, &reused);
        if (fd < 0) {
            rc = MC_ERR_SOCKET;
            break;
        }
        if (mc__send_all(fd, frame->data, frame->len, dl) == 0 &&
            mc__peer_read_reply(fd, MC__TE_NOTIFY, 1, 0, dl, &h, &remote_err) == 0) {
            mc__peer_conn_put(p, fd);
            return remote_err;
        }
        close(fd);
        if (!reused)
            break;
        /* the others pooled with it may be dead too (peer_conn.h): retry on a fresh one */
        pthread_mutex_lock(&p->lock);
        mc__peer_conn_drop_locked(p);
        pthread_mutex_unlock(&p->lock);
    }
    mc__peer_mark_broken(p);
    return rc;
}

static int mc__notify_args_ok(const char *name, const void *msg, size_t len) {
    return name && (msg || !len) && len <= MC__TE_MAX_NOTIFY_MSG &&
           strlen(name) <= MC__TE_MAX_NOTIFY_NAME;
}

/* Sends to segment id (open, or MC_LOCAL_SEGMENT_ID). */
static int mc__notify_to(mc_engine_t *e, mc_segment_id_t id, const char *name, const void *msg,
                         size_t len) {
    mc__peer_t *p;
    mc_buf_t b;
    int rc;
    mc__buf_init(&b);
    if (id == MC_LOCAL_SEGMENT_ID) {
        rc = mc__notify_push(e, e->name, strlen(e->name), name, strlen(name), msg, len);
        goto out;
    }
    p = mc__peer_get(e, id);
    rc = MC_ERR_INVALID_ARGUMENT;
    if (!p)
        goto out;
    rc = mc__te_encode_notify(&b, 1, e->name, name, msg ? msg : "", len);
    if (!rc)
        rc = mc__notify_remote(e, p, &b);
out:
    mc__buf_free(&b);
    return rc;
}

static int mc__notify_send(mc_engine_t *e, const char *peer_segment, const char *name,
                           const void *msg, size_t len) {
    mc_segment_id_t id = 0;
    int rc;
    if (!e->initialized || !peer_segment || !mc__notify_args_ok(name, msg, len))
        return MC_ERR_INVALID_ARGUMENT;
    rc = mc__segment_open(e, peer_segment, &id);
    return rc ? rc : mc__notify_to(e, id, name, msg, len);
}

int mc_engine_notify_send(mc_engine_t *e, const char *peer_segment, const char *name,
                          const void *msg, size_t len) {
    int rc;
    MC__GATED(e, rc, mc__notify_send(e, peer_segment, name, msg, len));
    return rc;
}

/* The reference's transfer with a notify: the receiver may act on the notify as soon as it sees
 * it, so it goes only after every byte landed, to the one segment the requests target. */
static int mc__transfer_sync_notify(mc_engine_t *e, const mc_request_t *reqs, size_t n,
                                    const char *name, const void *msg, size_t len) {
    int rc;
    if (!e->initialized || !reqs || !n || !mc__notify_args_ok(name, msg, len))
        return MC_ERR_INVALID_ARGUMENT;
    for (size_t i = 1; i < n; i++)
        if (reqs[i].target_id != reqs[0].target_id)
            return MC_ERR_INVALID_ARGUMENT;
    rc = mc__transfer_sync_each(e, reqs, n, NULL, 0);
    return rc ? rc : mc__notify_to(e, reqs[0].target_id, name, msg, len);
}

int mc_engine_transfer_sync_notify(mc_engine_t *e, const mc_request_t *reqs, size_t n,
                                   const char *name, const void *msg, size_t len) {
    int rc;
    MC__GATED(e, rc, mc__transfer_sync_notify(e, reqs, n, name, msg, len));
    return rc;
}

static int mc__notifies_fetch(mc_engine_t *e, mc_notify_t **out, size_t *count) {
    if (!out || !count)
        return MC_ERR_INVALID_ARGUMENT;
    pthread_mutex_lock(&e->notify_lock);
    *out = e->notifies;
    *count = e->nnotifies;
    e->notifies = NULL;
    e->nnotifies = e->notifies_cap = 0;
    e->notify_bytes = 0;
    pthread_mutex_unlock(&e->notify_lock);
    return 0;
}

int mc_engine_notifies_fetch(mc_engine_t *e, mc_notify_t **out, size_t *count) {
    int rc;
    MC__GATED(e, rc, mc__notifies_fetch(e, out, count));
    return rc;
}

void mc_engine_notifies_free(mc_notify_t *arr, size_t count) {
    for (size_t i = 0; arr && i < count; i++) {
        mc__free(arr[i].from);
        mc__free(arr[i].name);
        mc__free(arr[i].msg);
    }
    mc__free(arr);
}
