/* TCP transport. Tasks are cut into slices that a fixed set of worker threads pull from one
 * queue, so a large transfer spreads over several pooled connections. Small slices to one peer
 * are pipelined: a worker takes up to MC__TCP_PIPE_OPS queued slices for the same peer (at most
 * MC_TCP_PIPELINE_BYTES of payload together, MC_TCP_PIPELINE_WRITE_BYTES when all are WRITEs),
 * writes all their requests on one connection
 * (coalesced into as few sendmsg calls as the socket takes) and reads the replies, which the
 * target sends in request order, so a batch of small requests costs about one round trip. A
 * slice moves between user memory and the socket without staging: payloads are sent from user
 * memory, READ payloads over MC__TCP_COPY_MAX are received in place, smaller ones come in with
 * their header and are copied out of the worker's receive buffer; no allocation per slice.
 *
 * Device memory (a task whose local range is on a GPU, devmem.h) cannot be sent from or received
 * into: each of its slices goes alone through the worker's own staging buffer (page-locked,
 * one slice large), copied from the device before the send or to it after the receive. Workers
 * take a task's slices in turn, so while one copies slice i another sends slice i-1: a large
 * transfer overlaps its device copies with the network, MC_TCP_WORKERS slices deep. */
#include "devmem.h"
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

/* The most slices one worker pipelines on one connection, and the default payload bound of
 * such a group. The bound keeps what is in flight per connection within the socket buffers
 * (4 MiB each way by default), so neither side's send waits on the other's; a slice larger than
 * the bound goes alone, as before. */
#define MC__TCP_PIPE_OPS 64
#define MC__TCP_PIPE_BYTES_DEFAULT (256 << 10)
/* A group of WRITEs only may carry more: their replies are a few bytes each, so its payload goes
 * one way and only waits for the target to read it. One group of 16 x 64 KiB on the caller's
 * thread, instead of four groups handed to the workers while the caller sleeps, put such batches
 * at 1.1-1.4x with 1 client process and 1.2-1.6x with 8 (docs/perf/issue26-write-group/ab.md);
 * the same bound for READs lost a quarter of 8 processes' batched gets. */
#define MC__TCP_PIPE_WRITE_BYTES_DEFAULT (1 << 20)
/* A worker's receive buffer: several replies (or a small READ's header and payload) per recv. */
#define MC__TCP_RBUF (64 << 10)
/* A READ payload up to this size may come in with its header and be copied out of the buffer;
 * a larger one is received in place. */
#define MC__TCP_COPY_MAX (16 << 10)
/* The caller's thread (run_inline) uses a buffer on its stack: a WRITE reply, or the header
 * and payload of a READ up to about 4 KiB, in one recv. */
#define MC__TCP_RBUF_INLINE (4096 + 256)

/* A worker and the connection it is using, so that closing the engine, or aborting the peer
 * (mc_engine_abort_segment), can cut a transfer that waits on a stalled peer instead of sitting
 * out its deadline. A caller running its own request or group is one too while it has a
 * connection. */
typedef struct mc__tcp mc__tcp_t;

typedef struct mc__tcp_worker {
    struct mc__tcp *q;
    pthread_t thr;
    int busy_fd;                           /* guarded by q->lock, like the two below */
    mc__peer_t *busy_peer;                 /* whom busy_fd reaches */
    struct mc__tcp_worker *cnext, **cprev; /* q->callers while a caller's thread is busy */
    int caller; /* the caller's own thread running its request or group (mc__tcp_run_here) */
    uint8_t *rbuf;
    size_t rbuf_cap;
    mc__devmem_buf_t stage; /* device slices' host copy (allocated at the first one) */
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
    mc__tcp_worker_t *callers; /* callers' threads with a connection in use (q->lock) */
    uint64_t slice;
    uint64_t pipe_bytes;       /* payload of a group at most; 0: one request per round trip */
    uint64_t pipe_write_bytes; /* the same for a group of WRITEs only */
    /* A worker was signalled and none has taken work since: a task queued now will be seen by
     * it, so waking another would only split a batch of small slices over two connections. */
    int wake_pending;
};

/* One slice of a pipelined group. t is not touched once the slice is reported done: the last
 * slice of a batch may free it. */
typedef struct mc__tcp_op {
    mc__task_t *t;
    uint8_t *local;
    uint64_t remote;
    uint64_t n;
    uint64_t id;
    uint64_t deadline_ms;
    uint8_t req[MC__TE_RW_HEAD];
    int done;
    uint8_t *dev_dst; /* a READ into device memory: where the staged payload goes; else NULL */
    int stage_pinned; /* the staging buffer it lands in is pinned (devmem.h) */
} mc__tcp_op_t;

static void mc__tcp_slice_done(mc_engine_t *e, mc__task_t *t, int rc);

/* Publishes the connection in use (fd, to peer; -1: none now); returns nonzero when the engine
 * is closing, or when fd is to be used and the peer was aborted since `aborts` (the abort could
 * not see this connection: it must not be used). */
static int mc__tcp_set_busy(mc__tcp_worker_t *w, int fd, mc__peer_t *peer, uint32_t aborts) {
    mc__tcp_t *q = w->q;
    int stop;
    pthread_mutex_lock(&q->lock);
    w->busy_fd = fd;
    w->busy_peer = fd >= 0 ? peer : NULL;
    if (w->caller && fd >= 0 && !w->cprev) {
        w->cnext = q->callers;
        w->cprev = &q->callers;
        if (q->callers)
            q->callers->cprev = &w->cnext;
        q->callers = w;
    } else if (w->caller && fd < 0 && w->cprev) {
        *w->cprev = w->cnext;
        if (w->cnext)
            w->cnext->cprev = w->cprev;
        w->cnext = NULL;
        w->cprev = NULL;
    }
    stop = q->stop || q->cut || (fd >= 0 && atomic_load(&peer->aborts) != aborts);
    pthread_mutex_unlock(&q->lock);
    return stop;
}

/* Reports op's result: the peer's verdict (0 or its error code) or a local error. */
static void mc__tcp_op_finish(mc_engine_t *e, mc__tcp_op_t *op, int rc) {
    mc__task_t *t = op->t;
    /* a READ into device memory is done once its bytes are on the device */
    if (rc == 0 && op->dev_dst)
        rc = mc__devmem_from_host(e->devmem, op->dev_dst, op->local, op->n, t->local_device,
                                  op->stage_pinned);
    if (rc == 0) {
        atomic_fetch_add(&t->transferred, op->n);
        /* a large task is many slices: each one that ends shows the peer alive */
        atomic_store_explicit(&t->peer->progress_ms, mc__now_ms(), memory_order_relaxed);
    }
    if (rc == MC_ERR_ADDRESS_NOT_REGISTERED) {
        /* our copy of its descriptor is out of date: fetch it before the next use */
        pthread_mutex_lock(&t->peer->lock);
        t->peer->stale = 1;
        pthread_mutex_unlock(&t->peer->lock);
    }
    op->done = 1;
    mc__tcp_slice_done(e, t, rc);
}

/* Reads op's reply (header, then an error body or a READ's payload into place). Returns 0
 * with *remote_err set to the peer's verdict, or MC_ERR_SOCKET when the stream is unusable. */
static int mc__tcp_read_reply(mc__rbuf_t *rb, const mc__tcp_op_t *op, int *remote_err) {
    uint8_t raw[MC_FRAME_HEADER_SIZE];
    uint8_t body[MC__TE_MAX_ERROR_BODY];
    mc_frame_header_t h;
    uint8_t type = op->t->opcode == MC_OPCODE_WRITE ? MC__TE_WRITE : MC__TE_READ;
    uint64_t max_body = type == MC__TE_READ ? op->n : 0;
    uint64_t lim = max_body > MC__TE_MAX_ERROR_BODY ? max_body : MC__TE_MAX_ERROR_BODY;
    *remote_err = 0;
    size_t fill = max_body > MC__TCP_COPY_MAX ? sizeof(raw) : rb->cap;
    if (mc__rbuf_read_max(rb, raw, sizeof(raw), op->deadline_ms, fill) ||
        mc__frame_header_decode(raw, sizeof(raw), lim, &h))
        return MC_ERR_SOCKET;
    if (!(h.flags & MC_FRAME_F_REPLY) || h.type != type || h.request_id != op->id)
        return MC_ERR_SOCKET;
    if (h.flags & MC_FRAME_F_ERROR) {
        if (h.body_len > sizeof(body) || mc__rbuf_read(rb, body, h.body_len, op->deadline_ms) ||
            mc__te_decode_error(body, h.body_len, remote_err, NULL, 0))
            return MC_ERR_SOCKET;
        return 0;
    }
    if (h.body_len != max_body)
        return MC_ERR_SOCKET;
    return max_body ? mc__rbuf_read(rb, op->local, op->n, op->deadline_ms) : 0;
}

/* Moves ops[0..k) (none done yet) over one connection: writes every request, reading replies
 * whenever the socket will not take more, so that what is in flight is bounded by the socket
 * buffers and the peer is never left unable to send. Each reply is reported as it arrives.
 * Returns 0 when every op was answered and the stream is clean (the connection can be pooled),
 * else MC_ERR_SOCKET (the unanswered ops are left not done). */
static int mc__tcp_pipe(mc_engine_t *e, int fd, mc__tcp_op_t *ops, int k, mc__rbuf_t *rb,
                        int caller) {
    struct iovec iov[2 * MC__TCP_PIPE_OPS];
    uint64_t ends[MC__TCP_PIPE_OPS]; /* stream offset where op i's request ends */
    uint64_t sent = 0;
    struct iovec *v = iov;
    int cnt = 0;
    int next = 0;         /* the op whose reply comes next */
    uint64_t payload = 0; /* written and read by the group: the replies come after it crosses */
    uint16_t flags;
    for (int i = 0; i < k; i++)
        payload += ops[i].n;
    /* Too much to spin for its replies (mc__reply_spin_for); and unless the caller's own thread
     * runs it (a lone request, or a whole batch within the pipelining bound: up to 1 MiB of
     * writes; its next request follows soon), the target need not spin for our next request either:
     * it comes after the batch's other work. Marking a caller's 1 MiB write group bulk too cost one
     * process's 16 x 64 KiB puts 5-25% (docs/perf/issue26-write-group/ab.md). */
    flags = payload > MC__SPIN_BYTES_MAX && !caller ? MC__TE_F_BULK : 0;
    for (int i = 0; i < k; i++) {
        mc__tcp_op_t *op = &ops[i];
        int write = op->t->opcode == MC_OPCODE_WRITE;
        mc__te_encode_rw(op->req, write ? MC__TE_WRITE : MC__TE_READ, op->id, op->remote, op->n,
                         op->t->epoch, flags);
        iov[cnt++] = (struct iovec){op->req, sizeof(op->req)};
        if (write)
            iov[cnt++] = (struct iovec){op->local, op->n};
        ends[i] = (i ? ends[i - 1] : 0) + sizeof(op->req) + (write ? op->n : 0);
    }
    while (cnt > 0) {
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        int remote_err = 0;
        uint64_t now, wait;
        ssize_t w = mc__sendv_some(fd, v, cnt);
        if (w > 0) {
            sent += (uint64_t)w;
            mc__iov_advance(&v, &cnt, (size_t)w);
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return MC_ERR_SOCKET;
        /* The socket is full: wait until it takes more or a reply comes in. A reply can only
         * be for a request sent whole; anything else readable is the peer closing. */
        if (next < k && ends[next] <= sent)
            pfd.events |= POLLIN;
        now = mc__now_ms();
        if (now >= ops[next].deadline_ms)
            return MC_ERR_SOCKET;
        wait = ops[next].deadline_ms - now;
        if (poll(&pfd, 1, wait > 1000000 ? 1000000 : (int)wait) < 0 && errno != EINTR)
            return MC_ERR_SOCKET;
        if (pfd.revents & (POLLERR | POLLHUP | POLLNVAL)) {
            int err = 0;
            socklen_t el = sizeof(err);
            if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err)
                errno = err; /* ETIMEDOUT: the peer went silent (mc__tcp_group) */
            return MC_ERR_SOCKET;
        }
        if (!(pfd.revents & POLLIN))
            continue;
        /* The target sends a reply without waiting for us once it has the whole request,
         * so a started reply can be read to its end. */
        if (mc__tcp_read_reply(rb, &ops[next], &remote_err))
            return MC_ERR_SOCKET;
        mc__tcp_op_finish(e, &ops[next++], remote_err);
    }
    /* everything is sent: the next reply cannot be there yet unless already buffered */
    rb->wait_first = mc__rbuf_pending(rb) == 0;
    rb->spin_ns = mc__reply_spin_for(payload);
    while (next < k) {
        int remote_err = 0;
        if (mc__tcp_read_reply(rb, &ops[next], &remote_err))
            return MC_ERR_SOCKET;
        mc__tcp_op_finish(e, &ops[next++], remote_err);
    }
    /* bytes nobody asked for: the stream is out of step */
    return mc__rbuf_pending(rb) ? MC_ERR_SOCKET : 0;
}

/* Ends ops[first..k) that are not done yet with rc. */
static void mc__tcp_fail_rest(mc_engine_t *e, mc__tcp_op_t *ops, int first, int k, int rc) {
    for (int i = first; i < k; i++)
        if (!ops[i].done) {
            ops[i].done = 1;
            mc__tcp_slice_done(e, ops[i].t, rc);
        }
}

/* Runs a group of slices to one peer, each reported done (by op_finish or here) before it
 * returns. A pooled connection may have died with a restarted peer: the ops it left unanswered
 * get one retry on a fresh connection (READ and WRITE of the same bytes are idempotent). Not
 * after the peer went silent (ETIMEDOUT: TCP_USER_TIMEOUT or keep-alive, mc__set_dead_peer_
 * timeouts) or was aborted: a fresh connection would only wait out the same silence. */
static void mc__tcp_group(mc_engine_t *e, mc__tcp_worker_t *w, mc__tcp_op_t *ops, int k,
                          uint64_t *req_id, uint8_t *mem, size_t cap) {
    mc__peer_t *peer = ops[0].t->peer;
    /* the worker failed ops submitted before the latest abort, so these share one count (one
     * submitted during an abort that raced the worker's check goes down with the group) */
    uint32_t aborts = ops[0].t->aborts;
    int rc = MC_ERR_SOCKET;
    int first = 0; /* ops before it are done */
    for (int attempt = 0; attempt < 2; attempt++) {
        int reused = 0;
        int silent;
        int fd;
        uint64_t dl = ops[first].deadline_ms;
        mc__rbuf_t rb;
        for (int i = first + 1; i < k; i++)
            dl = ops[i].deadline_ms < dl ? ops[i].deadline_ms : dl;
        if (atomic_load(&peer->aborts) != aborts)
            break; /* no connect to a peer known gone */
        fd = mc__peer_conn_get(e, peer, dl, &reused);
        if (fd < 0) {
            rc = fd == MC_ERR_DNS ? fd : MC_ERR_SOCKET;
            break;
        }
        for (int i = first; i < k; i++)
            ops[i].id = ++*req_id;
        mc__rbuf_init(&rb, fd, mem, cap);
        rb.timed_wait = 1; /* MC__PEER_RECV_SLICE_MS */
        if (mc__tcp_set_busy(w, fd, peer, aborts)) {
            /* a close began, or the peer was aborted: the cut missed this one */
            int closing = mc__tcp_set_busy(w, -1, peer, aborts);
            close(fd);
            mc__tcp_fail_rest(e, ops, first, k, closing ? MC_ERR_CONTEXT : MC_ERR_SOCKET);
            return;
        }
        errno = 0;
        rc = mc__tcp_pipe(e, fd, ops + first, k - first, &rb, w->caller);
        silent = rc && errno == ETIMEDOUT;
        if (mc__tcp_set_busy(w, -1, peer, aborts) && rc) { /* cut by the close's interrupt */
            close(fd);
            mc__tcp_fail_rest(e, ops, first, k, MC_ERR_CONTEXT);
            return;
        }
        while (first < k && ops[first].done)
            first++;
        if (rc == 0) {
            mc__peer_conn_put(peer, fd);
            return;
        }
        close(fd);
        if (first == k)
            return; /* all answered; only the trailing bytes were wrong */
        if (!reused || silent || mc__now_ms() >= ops[first].deadline_ms ||
            mc__tcp_set_busy(w, -1, peer, aborts) || atomic_load(&peer->aborts) != aborts)
            break;
        pthread_mutex_lock(&peer->lock);
        mc__peer_conn_drop_locked(peer);
        pthread_mutex_unlock(&peer->lock);
    }
    mc__peer_mark_broken(peer);
    mc__tcp_fail_rest(e, ops, first, k, rc);
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

/* With q->lock held and q->head non-NULL: takes the head task's next slice into op. */
static void mc__tcp_take_locked(mc__tcp_t *q, mc__tcp_op_t *op) {
    mc__task_t *t = q->head;
    uint32_t idx = t->next_slice++;
    uint64_t off = (uint64_t)idx * q->slice;
    if (t->next_slice == t->nslices) {
        q->head = t->next;
        if (!q->head)
            q->tail = NULL;
    }
    op->t = t;
    op->local = t->local + off;
    op->remote = t->remote + off;
    op->n = t->len - off < q->slice ? t->len - off : q->slice;
    op->deadline_ms = t->deadline_ms;
    op->done = 0;
    op->dev_dst = NULL;
}

/* The payload bound of a group: its own for one of WRITEs only. */
static uint64_t mc__tcp_group_bound(const mc__tcp_t *q, int writes_only) {
    return writes_only ? q->pipe_write_bytes : q->pipe_bytes;
}

/* The size of the head task's next slice (q->lock held). */
static uint64_t mc__tcp_head_slice_locked(const mc__tcp_t *q) {
    uint64_t off = (uint64_t)q->head->next_slice * q->slice;
    return q->head->len - off < q->slice ? q->head->len - off : q->slice;
}

/* A device slice goes through w's staging buffer: a WRITE's bytes are copied there now, a READ's
 * land there and are copied to the device when its reply is in (mc__tcp_op_finish). Returns 0,
 * or 1 when the slice was ended here (no staging memory, or the copy failed). */
static int mc__tcp_stage(mc_engine_t *e, mc__tcp_worker_t *w, mc__tcp_op_t *op) {
    const mc__devmem_ops_t *dm = e->devmem;
    int dev = op->t->local_device;
    int rc = mc__devmem_buf_reserve(dm, &w->stage, (size_t)w->q->slice, dev);
    if (!rc && op->t->opcode == MC_OPCODE_WRITE)
        rc = dm->to_host(w->stage.p, op->local, op->n, dev);
    if (rc) {
        op->done = 1;
        mc__tcp_slice_done(e, op->t, rc);
        return 1;
    }
    if (op->t->opcode == MC_OPCODE_READ)
        op->dev_dst = op->local;
    op->local = w->stage.p;
    op->stage_pinned = w->stage.pinned;
    return 0;
}

static void *mc__tcp_worker(void *arg) {
    mc__tcp_worker_t *w = arg;
    mc__tcp_t *q = w->q;
    uint64_t req_id = 0;
    mc__tcp_op_t ops[MC__TCP_PIPE_OPS];
    for (;;) {
        int k = 0, live = 0;
        uint64_t bytes;
        int stop, writes_only;
        pthread_mutex_lock(&q->lock);
        while (!q->head && !q->stop)
            pthread_cond_wait(&q->cond, &q->lock);
        if (!q->head) {
            pthread_mutex_unlock(&q->lock);
            break;
        }
        q->wake_pending = 0;
        mc__tcp_take_locked(q, &ops[k++]);
        bytes = ops[0].n;
        writes_only = ops[0].t->opcode == MC_OPCODE_WRITE;
        /* more queued slices for the same peer ride along while they fit the window (not a
         * device slice, nor with one: each goes alone through the worker's staging buffer) */
        while (k < MC__TCP_PIPE_OPS && q->head && q->head->peer == ops[0].t->peer &&
               ops[0].t->local_device < 0 && q->head->local_device < 0 &&
               bytes + mc__tcp_head_slice_locked(q) <=
                   mc__tcp_group_bound(q, writes_only && q->head->opcode == MC_OPCODE_WRITE)) {
            bytes += mc__tcp_head_slice_locked(q);
            writes_only &= q->head->opcode == MC_OPCODE_WRITE;
            mc__tcp_take_locked(q, &ops[k++]);
        }
        /* work left behind (a batch larger than one group) goes to the next worker */
        if (q->head && !q->wake_pending) {
            q->wake_pending = 1;
            pthread_cond_signal(&q->cond);
        }
        stop = q->stop || q->cut;
        pthread_mutex_unlock(&q->lock);
        /* slices that need no I/O end here; the rest keep their order */
        for (int i = 0; i < k; i++) {
            mc__task_t *t = ops[i].t;
            int rc;
            if (stop)
                rc = MC_ERR_CONTEXT;
            else if (atomic_load(&t->error))
                rc = 0; /* the task already failed: skip the rest quickly */
            else if (mc__now_ms() >= t->deadline_ms || atomic_load(&t->peer->aborts) != t->aborts)
                rc = MC_ERR_SOCKET; /* past its deadline, or its peer was aborted since */
            else {
                ops[live++] = ops[i];
                continue;
            }
            mc__tcp_slice_done(q->e, t, rc);
        }
        if (live == 1 && ops[0].t->local_device >= 0 && mc__tcp_stage(q->e, w, &ops[0]))
            live = 0; /* its copy failed: reported */
        if (live)
            mc__tcp_group(q->e, w, ops, live, &req_id, w->rbuf, w->rbuf_cap);
    }
    return NULL;
}

/* Runs tasks t[0..n) on the calling thread (1) when they are one worker's group: a lone task
 * that fits one slice, or up to MC__TCP_PIPE_OPS single-slice tasks to one peer within the
 * pipeline bound (what a worker would take together); else does nothing (0). A close's
 * interrupt cannot cut it short once it runs (the tasks' deadline bounds it); an abort of its
 * peer can (the thread is on q->callers while it holds a connection). */
static int mc__tcp_run_here(mc_engine_t *e, mc__task_t **t, size_t n) {
    mc__tcp_t *q = e->tp_state[MC__TP_TCP];
    mc__tcp_worker_t self = {.q = q, .busy_fd = -1, .caller = 1};
    uint8_t small[MC__TCP_RBUF_INLINE];
    uint8_t *mem = small;
    size_t cap = sizeof(small);
    mc__tcp_op_t one, *ops = &one;
    uint64_t req_id = 0, bytes = 0;
    int writes_only = 1;
    if (!q || n == 0 || n > MC__TCP_PIPE_OPS)
        return 0;
    for (size_t i = 0; i < n; i++) {
        /* device memory goes through a worker's staging buffer */
        if (t[i]->len > q->slice || t[i]->local_device >= 0 || t[i]->peer != t[0]->peer)
            return 0;
        bytes += t[i]->len;
        writes_only &= t[i]->opcode == MC_OPCODE_WRITE;
    }
    if (n > 1) {
        if (bytes > mc__tcp_group_bound(q, writes_only))
            return 0; /* more than one group: the workers spread it over their connections */
        /* several replies per receive, as a worker's buffer takes them */
        ops = mc__malloc(n * sizeof(*ops) + MC__TCP_RBUF);
        if (!ops)
            return 0;
        mem = (uint8_t *)(ops + n);
        cap = MC__TCP_RBUF;
    }
    for (size_t i = 0; i < n; i++) {
        t[i]->nslices = 1;
        t[i]->next_slice = 1;
        t[i]->next = NULL;
        ops[i] = (mc__tcp_op_t){.t = t[i],
                                .local = t[i]->local,
                                .remote = t[i]->remote,
                                .n = t[i]->len,
                                .deadline_ms = t[i]->deadline_ms};
    }
    mc__tcp_group(e, &self, ops, (int)n, &req_id, mem, cap);
    if (ops != &one)
        mc__free(ops);
    return 1;
}

/* Queues t (q->lock held); 1 when it has more than one slice. */
static int mc__tcp_enqueue_locked(mc__tcp_t *q, mc__task_t *t) {
    uint64_t ns = (t->len + q->slice - 1) / q->slice;
    t->nslices = (uint32_t)ns;
    t->next_slice = 0;
    t->next = NULL;
    if (q->tail)
        q->tail->next = t;
    else
        q->head = t;
    q->tail = t;
    return ns > 1;
}

/* Wakes workers for what was just queued (q->lock held): all of them for a task of several
 * slices, else one, unless one was signalled and has not taken work yet (it will see this). */
static void mc__tcp_wake_locked(mc__tcp_t *q, int many) {
    if (many) {
        pthread_cond_broadcast(&q->cond);
    } else if (!q->wake_pending) {
        q->wake_pending = 1;
        pthread_cond_signal(&q->cond);
    }
}

static int mc__tcp_submit(mc_engine_t *e, mc__task_t *t) {
    mc__tcp_t *q = e->tp_state[MC__TP_TCP];
    pthread_mutex_lock(&q->lock);
    mc__tcp_wake_locked(q, mc__tcp_enqueue_locked(q, t));
    pthread_mutex_unlock(&q->lock);
    return 0;
}

/* A call's tasks go in together: the first worker woken takes as many as one group holds and
 * signals the next for the rest (mc__tcp_worker), rather than leaving with the first alone. */
static void mc__tcp_submit_many(mc_engine_t *e, mc__task_t **t, size_t n) {
    mc__tcp_t *q = e->tp_state[MC__TP_TCP];
    int many = 0;
    pthread_mutex_lock(&q->lock);
    for (size_t i = 0; i < n; i++)
        many |= mc__tcp_enqueue_locked(q, t[i]);
    mc__tcp_wake_locked(q, many);
    pthread_mutex_unlock(&q->lock);
}

/* Raises flag (q->cut or q->stop) and wakes every worker: the idle ones from the condition, the
 * busy ones by cutting the connection they wait on. Interrupt and close differ only in flag. */
static void mc__tcp_raise(mc__tcp_t *q, int *flag) {
    pthread_mutex_lock(&q->lock);
    *flag = 1;
    pthread_cond_broadcast(&q->cond);
    for (int i = 0; i < q->nworkers; i++)
        if (q->workers[i].busy_fd >= 0)
            shutdown(q->workers[i].busy_fd, SHUT_RDWR);
    pthread_mutex_unlock(&q->lock);
}

static void mc__tcp_interrupt(mc_engine_t *e) {
    mc__tcp_t *q = e->tp_state[MC__TP_TCP];
    if (q)
        mc__tcp_raise(q, &q->cut);
}

static void mc__tcp_cut_peer_locked(mc__tcp_worker_t *w, const mc__peer_t *p) {
    if (w->busy_fd >= 0 && w->busy_peer == p)
        shutdown(w->busy_fd, SHUT_RDWR);
}

/* Cuts the connections in use to p (their waits fail at once); the queued slices of tasks
 * submitted before the abort fail when a worker takes them (mc__tcp_worker). */
static void mc__tcp_peer_abort(mc_engine_t *e, mc__peer_t *p) {
    mc__tcp_t *q = e->tp_state[MC__TP_TCP];
    if (!q)
        return;
    pthread_mutex_lock(&q->lock);
    for (int i = 0; i < q->nworkers; i++)
        mc__tcp_cut_peer_locked(&q->workers[i], p);
    for (mc__tcp_worker_t *w = q->callers; w; w = w->cnext)
        mc__tcp_cut_peer_locked(w, p);
    pthread_mutex_unlock(&q->lock);
}

static void mc__tcp_close(mc_engine_t *e) {
    mc__tcp_t *q = e->tp_state[MC__TP_TCP];
    if (!q)
        return;
    mc__tcp_raise(q, &q->stop);
    /* workers fail whatever is still queued, then exit */
    for (int i = 0; i < q->nworkers; i++)
        pthread_join(q->workers[i].thr, NULL);
    for (int i = 0; i < q->nworkers; i++) {
        mc__free(q->workers[i].rbuf);
        mc__devmem_buf_release(e->devmem, &q->workers[i].stage);
    }
    mc__free(q->workers);
    pthread_mutex_destroy(&q->lock);
    pthread_cond_destroy(&q->cond);
    mc__free(q);
    e->tp_state[MC__TP_TCP] = NULL;
}

/* Four workers (four connections per peer), or one per core where there are fewer: each one
 * in use is a thread here and one at the target, and with more of them than cores a batch of
 * 16 x 64 KiB writes took 370 us instead of 250 on a 2-core host (docs/performance.md). */
static int mc__tcp_default_workers(void) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores >= 4 ? 4 : cores >= 2 ? (int)cores : 2;
}

static int mc__tcp_init(mc_engine_t *e) {
    mc__tcp_t *q = mc__calloc(1, sizeof(*q));
    int want;
    if (!q)
        return MC_ERR_MEMORY;
    q->e = e;
    want = (int)mc__env_size_in("MC_TCP_WORKERS", mc__tcp_default_workers(), 1, 64);
    /* 4 MiB slices: big enough that per-request costs vanish, small enough that a large
     * transfer spreads over every worker */
    q->slice =
        (uint64_t)mc__env_size_in("MC_SLICE_SIZE", 4 << 20, 64 << 10, (int64_t)MC__TE_MAX_SLICE);
    /* every pooled connection to a peer gets these buffers (peer_conn.c) */
    e->conn_sockbuf = (int)mc__env_size_in("MC_TCP_SOCKBUF", 4 << 20, 0, 1 << 30);
    /* payload pipelined on one connection at most (0: one request per round trip) */
    q->pipe_bytes =
        (uint64_t)mc__env_size_in("MC_TCP_PIPELINE_BYTES", MC__TCP_PIPE_BYTES_DEFAULT, 0, 64 << 20);
    /* MC_TCP_PIPELINE_BYTES alone bounds WRITE groups too (0 still means one request per round
     * trip for every group) */
    q->pipe_write_bytes = (uint64_t)mc__env_size_in(
        "MC_TCP_PIPELINE_WRITE_BYTES",
        getenv("MC_TCP_PIPELINE_BYTES") ? (int64_t)q->pipe_bytes : MC__TCP_PIPE_WRITE_BYTES_DEFAULT,
        0, 64 << 20);
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->cond, NULL);
    q->workers = mc__calloc((size_t)want, sizeof(*q->workers));
    e->tp_state[MC__TP_TCP] = q;
    if (!q->workers) {
        mc__tcp_close(e);
        return MC_ERR_MEMORY;
    }
    for (int i = 0; i < want; i++) {
        q->workers[i].q = q;
        q->workers[i].busy_fd = -1;
        q->workers[i].rbuf_cap = MC__TCP_RBUF;
        q->workers[i].rbuf = mc__malloc(MC__TCP_RBUF);
        if (!q->workers[i].rbuf)
            break;
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
                                    .peer_abort = mc__tcp_peer_abort,
                                    .close = mc__tcp_close,
                                    .submit = mc__tcp_submit,
                                    .submit_many = mc__tcp_submit_many,
                                    .run_inline = mc__tcp_run_here};
