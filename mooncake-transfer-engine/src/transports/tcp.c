/* TCP transport. Tasks are cut into slices that a fixed set of worker threads pull from one
 * queue, so a large transfer spreads over several pooled connections while small ones cost one
 * hand-off. A slice moves straight between user memory and the socket (header + payload in one
 * sendmsg, payload received in place): no staging copies, no allocation per slice. */
#include "peer_conn.h"
#include "te_internal.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/config.h"
#include "mooncake/common/log.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "proto.h"

/* A worker and the connection it is using, so that closing the engine can cut a transfer that
 * waits on a stalled peer instead of sitting out its deadline. */
typedef struct mc__tcp_worker {
    struct mc__tcp *q;
    pthread_t thr;
    int busy_fd; /* guarded by q->lock */
} mc__tcp_worker_t;

struct mc__tcp {
    mc_engine_t *e;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    mc__task_t *head;
    mc__task_t *tail;
    int stop; /* close: workers drain the queue (failing it) and exit */
    int cut;  /* interrupt: slices fail with MC_ERR_CONTEXT, workers keep running */
    mc__tcp_worker_t *workers;
    int nworkers;
    uint64_t slice;
};

/* One request on one connection. Returns MC_ERR_SOCKET when the connection is unusable;
 * otherwise 0 with *remote_err set to the peer's verdict. */
static int mc__tcp_io(int fd, uint64_t id, const mc__task_t *t, uint8_t *local, uint64_t remote,
                      uint64_t n, uint64_t deadline, int *remote_err) {
    int opcode = t->opcode;
    uint8_t req[MC__TE_RW_HEAD];
    mc_frame_header_t h;
    int rc;
    if (opcode == MC_OPCODE_WRITE) {
        mc__te_encode_rw(req, MC__TE_WRITE, id, remote, n, t->epoch);
        if (mc__send2(fd, req, sizeof(req), local, n, deadline))
            return MC_ERR_SOCKET;
        return mc__peer_read_reply(fd, MC__TE_WRITE, id, 0, deadline, &h, remote_err);
    }
    mc__te_encode_rw(req, MC__TE_READ, id, remote, n, t->epoch);
    if (mc__send_all(fd, req, sizeof(req), deadline))
        return MC_ERR_SOCKET;
    rc = mc__peer_read_reply(fd, MC__TE_READ, id, n, deadline, &h, remote_err);
    if (rc || *remote_err)
        return rc;
    if (h.body_len != n || mc__recv_all(fd, local, n, deadline))
        return MC_ERR_SOCKET;
    return 0;
}

/* Publishes the connection in use; returns nonzero when the engine is closing. */
static int mc__tcp_set_busy(mc__tcp_worker_t *w, int fd) {
    int stop;
    pthread_mutex_lock(&w->q->lock);
    w->busy_fd = fd;
    stop = w->q->stop || w->q->cut;
    pthread_mutex_unlock(&w->q->lock);
    return stop;
}

static int mc__tcp_slice(mc_engine_t *e, mc__tcp_worker_t *w, mc__task_t *t, uint32_t idx,
                         uint64_t *req_id) {
    uint64_t slice = e->tcp->slice;
    uint64_t off = (uint64_t)idx * slice;
    uint64_t n = t->len - off < slice ? t->len - off : slice;
    int rc = MC_ERR_SOCKET;
    for (int attempt = 0; attempt < 2; attempt++) {
        int reused = 0;
        int remote_err = 0;
        int fd = mc__peer_conn_get(e, t->peer, t->deadline_ms, &reused);
        if (fd < 0) {
            rc = fd == MC_ERR_DNS ? fd : MC_ERR_SOCKET;
            break;
        }
        if (mc__tcp_set_busy(w, fd)) { /* a close began: the interrupt missed this one */
            mc__tcp_set_busy(w, -1);
            mc__peer_conn_put(t->peer, fd);
            return MC_ERR_CONTEXT;
        }
        rc = mc__tcp_io(fd, ++*req_id, t, t->local + off, t->remote + off, n, t->deadline_ms,
                        &remote_err);
        if (mc__tcp_set_busy(w, -1) && rc) { /* cut by the close's interrupt */
            close(fd);
            return MC_ERR_CONTEXT;
        }
        if (rc == 0) {
            mc__peer_conn_put(t->peer, fd);
            if (!remote_err)
                atomic_fetch_add(&t->transferred, n);
            if (remote_err == MC_ERR_ADDRESS_NOT_REGISTERED) {
                /* our copy of its descriptor is out of date: fetch it before the next use */
                pthread_mutex_lock(&t->peer->lock);
                t->peer->stale = 1;
                pthread_mutex_unlock(&t->peer->lock);
            }
            return remote_err;
        }
        close(fd);
        /* A pooled connection may have died with a restarted peer: one retry on a fresh one
         * (READ and WRITE of the same bytes are idempotent). */
        if (!reused || mc__now_ms() >= t->deadline_ms || mc__tcp_set_busy(w, -1))
            break;
        pthread_mutex_lock(&t->peer->lock);
        mc__peer_conn_drop_locked(t->peer);
        pthread_mutex_unlock(&t->peer->lock);
    }
    mc__peer_mark_broken(t->peer);
    return rc;
}

static void mc__tcp_slice_done(mc_engine_t *e, mc__task_t *t, int rc) {
    /* read before our slice counts: once the last slice is in, the batch may be freed */
    uint32_t nslices = t->nslices;
    if (rc) {
        int zero = 0;
        atomic_compare_exchange_strong(&t->error, &zero, rc);
    }
    if (atomic_fetch_add(&t->slices_done, 1) + 1 == nslices) {
        int err = atomic_load(&t->error);
        int status = MC_STATUS_COMPLETED;
        if (err)
            status = err == MC_ERR_SOCKET && mc__now_ms() >= t->deadline_ms ? MC_STATUS_TIMEOUT
                                                                            : MC_STATUS_FAILED;
        else
            mc__transport_account(e, MC__TP_TCP, t->len);
        mc__task_finish(t, status, err);
    }
}

static void *mc__tcp_worker(void *arg) {
    mc__tcp_worker_t *w = arg;
    mc__tcp_t *q = w->q;
    uint64_t req_id = 0;
    for (;;) {
        mc__task_t *t;
        uint32_t idx;
        int rc;
        int stop;
        pthread_mutex_lock(&q->lock);
        while (!q->head && !q->stop)
            pthread_cond_wait(&q->cond, &q->lock);
        if (!q->head) {
            pthread_mutex_unlock(&q->lock);
            break;
        }
        t = q->head;
        idx = t->next_slice++;
        if (t->next_slice == t->nslices) {
            q->head = t->next;
            if (!q->head)
                q->tail = NULL;
        }
        stop = q->stop || q->cut;
        pthread_mutex_unlock(&q->lock);
        if (stop)
            rc = MC_ERR_CONTEXT;
        else if (atomic_load(&t->error))
            rc = 0; /* the task already failed: skip the rest quickly */
        else if (mc__now_ms() >= t->deadline_ms)
            rc = MC_ERR_SOCKET;
        else
            rc = mc__tcp_slice(q->e, w, t, idx, &req_id);
        mc__tcp_slice_done(q->e, t, rc);
    }
    return NULL;
}

/* Runs task t on the calling thread when it fits in one slice (1), else does nothing (0).
 * A close's interrupt cannot cut it short once it runs (the calling thread is no worker whose
 * connection it shuts down); the task's deadline bounds it. */
static int mc__tcp_run_here(mc_engine_t *e, mc__task_t *t) {
    mc__tcp_t *q = e->tcp;
    mc__tcp_worker_t self = {.q = q, .busy_fd = -1};
    uint64_t req_id = 0;
    if (!q || t->len > q->slice)
        return 0;
    t->nslices = 1;
    t->next_slice = 1;
    t->next = NULL;
    mc__tcp_slice_done(e, t, mc__tcp_slice(e, &self, t, 0, &req_id));
    return 1;
}

static int mc__tcp_submit(mc_engine_t *e, mc__task_t *t) {
    mc__tcp_t *q = e->tcp;
    uint64_t ns = (t->len + q->slice - 1) / q->slice;
    t->nslices = (uint32_t)ns;
    t->next_slice = 0;
    t->next = NULL;
    pthread_mutex_lock(&q->lock);
    if (q->tail)
        q->tail->next = t;
    else
        q->head = t;
    q->tail = t;
    if (ns > 1)
        pthread_cond_broadcast(&q->cond);
    else
        pthread_cond_signal(&q->cond);
    pthread_mutex_unlock(&q->lock);
    return 0;
}

static void mc__tcp_interrupt(mc_engine_t *e) {
    mc__tcp_t *q = e->tcp;
    if (!q)
        return;
    pthread_mutex_lock(&q->lock);
    q->cut = 1;
    pthread_cond_broadcast(&q->cond);
    for (int i = 0; i < q->nworkers; i++)
        if (q->workers[i].busy_fd >= 0)
            shutdown(q->workers[i].busy_fd, SHUT_RDWR);
    pthread_mutex_unlock(&q->lock);
}

static void mc__tcp_close(mc_engine_t *e) {
    mc__tcp_t *q = e->tcp;
    if (!q)
        return;
    pthread_mutex_lock(&q->lock);
    q->stop = 1;
    pthread_cond_broadcast(&q->cond);
    for (int i = 0; i < q->nworkers; i++)
        if (q->workers[i].busy_fd >= 0)
            shutdown(q->workers[i].busy_fd, SHUT_RDWR);
    pthread_mutex_unlock(&q->lock);
    /* workers fail whatever is still queued, then exit */
    for (int i = 0; i < q->nworkers; i++)
        pthread_join(q->workers[i].thr, NULL);
    mc__free(q->workers);
    pthread_mutex_destroy(&q->lock);
    pthread_cond_destroy(&q->cond);
    mc__free(q);
    e->tcp = NULL;
}

static int mc__tcp_init(mc_engine_t *e) {
    mc__tcp_t *q = mc__calloc(1, sizeof(*q));
    int want;
    if (!q)
        return MC_ERR_MEMORY;
    q->e = e;
    want = (int)mc__env_size_in("MC_TCP_WORKERS", 4, 1, 64);
    /* 4 MiB slices: big enough that per-request costs vanish, small enough that a large
     * transfer spreads over every worker */
    q->slice =
        (uint64_t)mc__env_size_in("MC_SLICE_SIZE", 4 << 20, 64 << 10, (int64_t)MC__TE_MAX_SLICE);
    /* every pooled connection to a peer gets these buffers (peer_conn.c) */
    e->conn_sockbuf = (int)mc__env_size_in("MC_TCP_SOCKBUF", 4 << 20, 0, 1 << 30);
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->cond, NULL);
    q->workers = mc__calloc((size_t)want, sizeof(*q->workers));
    e->tcp = q;
    if (!q->workers) {
        mc__tcp_close(e);
        return MC_ERR_MEMORY;
    }
    for (int i = 0; i < want; i++) {
        q->workers[i].q = q;
        q->workers[i].busy_fd = -1;
        if (pthread_create(&q->workers[i].thr, NULL, mc__tcp_worker, &q->workers[i]))
            break;
        q->nworkers++;
    }
    if (q->nworkers == 0) {
        mc__tcp_close(e);
        return MC_ERR_MEMORY;
    }
    return 0;
}

/* The fallback: it carries every request to a peer (carries NULL). */
const mc__transport_t mc__tp_tcp = {.name = "tcp",
                                    .id = MC__TP_TCP,
                                    .init = mc__tcp_init,
                                    .interrupt = mc__tcp_interrupt,
                                    .close = mc__tcp_close,
                                    .submit = mc__tcp_submit,
                                    .run_inline = mc__tcp_run_here};
