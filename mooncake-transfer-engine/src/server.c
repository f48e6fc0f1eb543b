/* The RPC/data listener: one thread per connection (peers pool their connections, so there are
 * few). Requests are read through a per-connection buffer, so a small request (header, body,
 * payload) or several pipelined ones come in with one recv; large payloads move straight
 * between the socket and registered memory. Requests are answered in order; empty replies to
 * requests already sent to us are held and sent together before the next wait. Every request is
 * checked against the current registrations; a bad request gets an error reply, broken framing
 * closes only that connection. Accepting and tracking connections is mc__conn_server's job. */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "devmem.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/conn_server.h"
#include "mooncake/common/log.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "proto.h"
#include "te_internal.h"

#define MC__SERVER_MAX_CONNS 1024
/* A peer pools at most MC__TE_POOL_MAX idle connections plus one per busy worker, so an honest
 * one stays far below this; one process cannot take the whole table. */
#define MC__SERVER_MAX_PER_PEER 256
/* Pooled connections unused this long are closed; the initiator retries a closed pooled one on a
 * fresh connection. */
#define MC__SERVER_IDLE_MS (300 * 1000)
#define MC__SCRATCH (MC__TE_MAX_NOTIFY_BODY)

/* ThreadSanitizer builds only. A WRITE's payload is received into registered memory that other
 * connections may be moving at the same time (a timed-out WRITE's buffered bytes landing beside
 * its retry), and that the owner reads in an order set by the initiator: payload against
 * payload or owner reads, ordered, if at all, through other processes. So the receive is not
 * recorded as the kernel's write; the bytes it covered are recorded as read once it returns,
 * still under the pin. Any write or free of them by another thread that is not ordered before
 * the receive (or after the unpin, through the registry) is still reported: an owner reusing or
 * freeing memory while a transfer is in flight, i.e. an unregister that did not wait for it. */
#if defined(__SANITIZE_THREAD__)
#define MC__TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MC__TSAN 1
#endif
#endif
#ifdef MC__TSAN
/* the runtime's interface; no public header declares these */
void __tsan_ignore_thread_begin(void);
void __tsan_ignore_thread_end(void);
void __tsan_read_range(void *addr, unsigned long size);
#endif

struct mc__server {
    mc_engine_t *e;
    mc_conn_server_t *conns;
};

/* Receive buffer: several small pipelined requests per recv. Small because what a receive
 * takes of a WRITE payload behind a header is copied into place: a larger buffer would copy
 * most of every mid-size payload (measured: 64 KiB writes lost ~20% with 64 KiB here). */
#define MC__CONN_RBUF (16 << 10)
/* Replies held back while more requests are buffered, so the replies to a pipelined group go
 * out in one send: at most this many, and at most MC__CONN_HELD_BYTES of READ payload (sent
 * from registered memory, whose pins are held until then). */
#define MC__CONN_HELD 64
#define MC__CONN_HELD_BYTES (256 << 10)

/* One connection's state: its receive buffer and the replies not yet sent. */
typedef struct mc__srv_conn {
    mc_engine_t *e;
    int fd;
    mc__rbuf_t rb;
    uint8_t *scratch;
    uint8_t hdrs[MC__CONN_HELD * MC_FRAME_HEADER_SIZE];
    int nhdrs;
    struct iovec iov[2 * MC__CONN_HELD + 1];
    int niov;
    mc__pin_t pins[MC__CONN_HELD]; /* of the held READ payloads (linked by address: in place) */
    int npins;
    uint64_t held_bytes;
    int bulk;               /* the request last served carried MC__TE_F_BULK */
    mc__devmem_buf_t stage; /* requests on device memory stage through it (devmem.h) */
} mc__srv_conn_t;

/* A WRITE into device memory is received this much at a time and copied to the device. */
#define MC__SRV_STAGE_CHUNK (1u << 20)

/* Sends what is held, then lets the held READ sources go (also when the send failed). */
static int mc__srv_flush(mc__srv_conn_t *c, uint64_t deadline) {
    int rc = c->niov ? mc__sendv(c->fd, c->iov, c->niov, deadline) : 0;
    /* A peer that got its reply often sends its next request at once (a loop of small calls):
     * the next receive spins briefly (MC_TCP_REPLY_SPIN_US) before it sleeps. Not after a bulk
     * request (a batch's group, a large block): its caller has more to do (its other keys, its
     * master) before it comes back, and the spin would only take a core the caller needs. */
    if (c->niov && !rc && mc__rbuf_pending(&c->rb) == 0) {
        c->rb.wait_first = 1;
        c->rb.spin_ns = c->bulk ? 0 : mc__reply_spin_for(0);
    }
    for (int i = 0; i < c->npins; i++)
        mc__reg_unpin(&c->e->reg, &c->pins[i]);
    c->niov = c->nhdrs = c->npins = 0;
    c->held_bytes = 0;
    return rc;
}

/* Sends the held replies and then one more frame (a, an), in one call. */
static int mc__srv_send(mc__srv_conn_t *c, const void *a, size_t an, uint64_t deadline) {
    c->iov[c->niov++] = (struct iovec){(void *)a, an};
    return mc__srv_flush(c, deadline);
}

/* Whether the next n bytes of the request stream are buffered, after taking in, without
 * waiting, what the socket already holds: an initiator writes a pipelined group's requests
 * before it reads a reply, so replies held for them go out in one send (measured: a batch of 32
 * 4 KiB writes got its replies in ~10 sends of 1-4 with the buffer alone). Not for a payload the
 * read takes in place (n >= half the buffer): taking it into the buffer would add a copy. */
static int mc__srv_buffered(mc__srv_conn_t *c, size_t n) {
    if (mc__rbuf_pending(&c->rb) >= n)
        return 1;
    return n < c->rb.cap / 2 && mc__rbuf_top_up(&c->rb) >= n;
}

/* Reads n bytes of the request stream. Held replies go out first when the bytes are not all
 * there: the peer may be waiting for them before it sends more. */
static int mc__srv_read(mc__srv_conn_t *c, void *dst, size_t n, uint64_t deadline) {
    if (c->niov && !mc__srv_buffered(c, n) && mc__srv_flush(c, deadline))
        return MC_ERR_SOCKET;
    return mc__rbuf_read(&c->rb, dst, n, deadline);
}

static int mc__reply_error(mc__srv_conn_t *c, uint8_t type, uint64_t id, int code, const char *msg,
                           uint64_t deadline) {
    mc_buf_t b;
    int rc;
    mc__buf_init(&b);
    rc = mc__te_encode_error(&b, type, id, code, msg);
    if (!rc)
        rc = mc__srv_send(c, b.data, b.len, deadline);
    mc__buf_free(&b);
    return rc;
}

/* Queues a reply with an empty or raw body, pinned (the slot c->pins[c->npins], taken over)
 * when pinned is set, and sends the queue unless the next request is already buffered and the
 * queue has room. */
static int mc__reply_raw(mc__srv_conn_t *c, uint8_t type, uint64_t id, const void *body, size_t n,
                         int pinned, uint64_t deadline) {
    uint8_t *hdr = c->hdrs + (size_t)c->nhdrs++ * MC_FRAME_HEADER_SIZE;
    mc__te_encode_reply(hdr, type, id, n);
    c->iov[c->niov++] = (struct iovec){hdr, MC_FRAME_HEADER_SIZE};
    if (n)
        c->iov[c->niov++] = (struct iovec){(void *)body, n};
    if (pinned)
        c->npins++;
    c->held_bytes += n;
    if (c->nhdrs < MC__CONN_HELD && c->held_bytes < MC__CONN_HELD_BYTES &&
        mc__srv_buffered(c, MC_FRAME_HEADER_SIZE))
        return 0;
    return mc__srv_flush(c, deadline);
}

/* A reply whose body does not outlive the call: sent now, after what is held. */
static int mc__reply_now(mc__srv_conn_t *c, uint8_t type, uint64_t id, const void *body, size_t n,
                         uint64_t deadline) {
    uint8_t *hdr = c->hdrs + (size_t)c->nhdrs++ * MC_FRAME_HEADER_SIZE;
    mc__te_encode_reply(hdr, type, id, n);
    c->iov[c->niov++] = (struct iovec){hdr, MC_FRAME_HEADER_SIZE};
    return mc__srv_send(c, body, n, deadline);
}

/* Reads and discards n bytes so the connection stays in step after a refused WRITE. */
static int mc__drain(mc__srv_conn_t *c, uint64_t n, uint64_t deadline) {
    while (n) {
        size_t k = n < MC__SCRATCH ? (size_t)n : MC__SCRATCH;
        if (mc__srv_read(c, c->scratch, k, deadline))
            return MC_ERR_SOCKET;
        n -= k;
    }
    return 0;
}

/* The payload of a WRITE into device memory (GPU dev, pinned by the caller): received chunk by
 * chunk into the connection's staging buffer and copied to the device, the socket buffer taking
 * the next chunk in meanwhile. A failed copy keeps reading (the stream stays in step) and the
 * request is refused with its code: 0 or that code in *copy_rc; MC_ERR_SOCKET when the stream
 * is unusable. */
static int mc__serve_write_dev(mc_engine_t *e, mc__srv_conn_t *c, uint64_t addr, uint64_t len,
                               int dev, uint64_t deadline, int *copy_rc) {
    size_t chunk = len < MC__SRV_STAGE_CHUNK ? (size_t)len : MC__SRV_STAGE_CHUNK;
    *copy_rc = mc__devmem_buf_reserve(e->devmem, &c->stage, chunk, dev);
    if (*copy_rc)
        return mc__drain(c, len, deadline);
    for (uint64_t off = 0; off < len; off += chunk) {
        size_t k = len - off < chunk ? (size_t)(len - off) : chunk;
        if (mc__srv_read(c, c->stage.p, k, deadline))
            return MC_ERR_SOCKET;
        if (!*copy_rc)
            *copy_rc = mc__devmem_from_host(e->devmem, (void *)(uintptr_t)(addr + off), c->stage.p,
                                            k, dev, c->stage.pinned);
    }
    return 0;
}

/* Receives a WRITE's payload into pinned host memory at addr: the buffered part is copied, the
 * rest received in place (recorded for ThreadSanitizer as the top of this file says). */
static int mc__srv_read_into(mc__srv_conn_t *c, uint64_t addr, uint64_t len, uint64_t deadline) {
    int rc;
#ifdef MC__TSAN
    __tsan_ignore_thread_begin();
#endif
    rc = mc__srv_read(c, (void *)(uintptr_t)addr, len, deadline);
#ifdef MC__TSAN
    __tsan_ignore_thread_end();
    __tsan_read_range((void *)(uintptr_t)addr, (unsigned long)len);
#endif
    return rc;
}

static int mc__serve_write(mc_engine_t *e, mc__srv_conn_t *c, const mc_frame_header_t *h,
                           uint64_t deadline) {
    uint64_t addr = 0, len = 0, epoch = 0;
    mc__pin_t pin;
    int rc;
    if (mc__srv_read(c, c->scratch, MC__TE_RW_BODY, deadline) ||
        mc__te_decode_rw(h, c->scratch, MC__TE_RW_BODY, &addr, &len, &epoch))
        return MC_ERR_SOCKET;
    /* Only this region is pinned across the receive, and the registry is not locked: an
     * unregister of another region, or other peers' requests, never wait on this peer. */
    if (mc__reg_pin(&e->reg, addr, len, epoch, c->fd, &pin) == 0 && pin.device >= 0) {
        int copy_rc = 0;
        rc = mc__serve_write_dev(e, c, addr, len, pin.device, deadline, &copy_rc);
        mc__reg_unpin(&e->reg, &pin);
        if (rc)
            return MC_ERR_SOCKET;
        if (copy_rc)
            return mc__reply_error(c, h->type, h->request_id, copy_rc,
                                   "copy to device memory failed", deadline);
        return mc__reply_raw(c, h->type, h->request_id, NULL, 0, 0, deadline);
    }
    if (pin.uid) {
        rc = mc__srv_read_into(c, addr, len, deadline);
        /* before the reply: once the initiator hears success the bytes are in place and the
         * region may be given back */
        mc__reg_unpin(&e->reg, &pin);
        if (rc)
            return MC_ERR_SOCKET;
        return mc__reply_raw(c, h->type, h->request_id, NULL, 0, 0, deadline);
    }
    if (mc__drain(c, len, deadline))
        return MC_ERR_SOCKET;
    return mc__reply_error(c, h->type, h->request_id, MC_ERR_ADDRESS_NOT_REGISTERED,
                           "write target not registered (or of another incarnation)", deadline);
}

/* The answer of a write-ask's handler is written here, behind the message in the scratch. */
#define MC__ASK_ANSWER_AT MC__TE_MAX_ASK_MSG
_Static_assert(MC__ASK_ANSWER_AT + MC__TE_MAX_ASK_ANSWER <= MC__SCRATCH, "scratch too small");

/* A write-ask refused before anything was written: its payload drained unread into memory. The
 * codes the initiator reads as "nothing written, nothing asked" are NOT_IMPLEMENTED and
 * ADDRESS_NOT_REGISTERED. */
static int mc__ask_refuse(mc__srv_conn_t *c, const mc_frame_header_t *h, uint64_t len, int code,
                          const char *why, uint64_t deadline) {
    if (mc__drain(c, len, deadline))
        return MC_ERR_SOCKET;
    return mc__reply_error(c, h->type, h->request_id, code, why, deadline);
}

/* WRITE_ASK: the payload lands as a WRITE's into host memory, then the owner's handler gets the
 * message and its answer is the reply. The handler is referenced before the payload lands (ask.c
 * says why) and the region is unpinned before the handler runs (it may take long, and an
 * unregister must not wait for it). */
static int mc__serve_write_ask(mc_engine_t *e, mc__srv_conn_t *c, const mc_frame_header_t *h,
                               uint64_t deadline) {
    uint64_t addr = 0, len = 0, epoch = 0;
    uint32_t msg_len = 0;
    uint8_t *answer = c->scratch + MC__ASK_ANSWER_AT;
    size_t answer_len = 0;
    mc__ask_ref_t ref;
    mc__pin_t pin;
    int rc;
    if (mc__srv_read(c, c->scratch, MC__TE_ASK_BODY, deadline) ||
        mc__te_decode_ask(h, c->scratch, MC__TE_ASK_BODY, &addr, &len, &epoch, &msg_len) ||
        mc__srv_read(c, c->scratch, msg_len, deadline))
        return MC_ERR_SOCKET;
    if (!mc__ask_acquire(e, &ref))
        return mc__ask_refuse(c, h, len, MC_ERR_NOT_IMPLEMENTED, "no ask handler", deadline);
    if (len) {
        if (mc__reg_pin(&e->reg, addr, len, epoch, c->fd, &pin) != 0) {
            mc__ask_release(e, &ref);
            return mc__ask_refuse(c, h, len, MC_ERR_ADDRESS_NOT_REGISTERED,
                                  "write-ask target not registered (or of another incarnation)",
                                  deadline);
        }
        if (pin.device >= 0) {
            mc__reg_unpin(&e->reg, &pin);
            mc__ask_release(e, &ref);
            return mc__ask_refuse(c, h, len, MC_ERR_NOT_IMPLEMENTED, "write-ask into device memory",
                                  deadline);
        }
        rc = mc__srv_read_into(c, addr, len, deadline);
        mc__reg_unpin(&e->reg, &pin);
        if (rc) {
            mc__ask_release(e, &ref);
            return MC_ERR_SOCKET;
        }
    }
    /* replies held for earlier requests do not wait for the handler */
    if (c->niov && mc__srv_flush(c, deadline)) {
        mc__ask_release(e, &ref);
        return MC_ERR_SOCKET;
    }
    rc = mc__ask_call(e, &ref, c->scratch, msg_len, answer, MC__TE_MAX_ASK_ANSWER, &answer_len);
    mc__ask_release(e, &ref);
    /* the handler may have taken most of the request's time: the reply gets its own */
    deadline = mc__now_ms() + (uint64_t)e->timeout_ms;
    if (rc)
        return mc__reply_error(c, h->type, h->request_id, rc, "ask handler failed", deadline);
    return mc__reply_now(c, h->type, h->request_id, answer, answer_len, deadline);
}

static int mc__serve_read(mc_engine_t *e, mc__srv_conn_t *c, const mc_frame_header_t *h,
                          uint64_t deadline) {
    uint64_t addr = 0, len = 0, epoch = 0;
    if (mc__srv_read(c, c->scratch, MC__TE_RW_BODY, deadline) ||
        mc__te_decode_rw(h, c->scratch, MC__TE_RW_BODY, &addr, &len, &epoch))
        return MC_ERR_SOCKET;
    /* the pin lasts until the reply is sent, which may be with the replies after it */
    if (mc__reg_pin(&e->reg, addr, len, epoch, c->fd, &c->pins[c->npins]) == 0) {
        mc__pin_t *pin = &c->pins[c->npins];
        int rc;
        if (pin->device < 0)
            return mc__reply_raw(c, h->type, h->request_id, (const void *)(uintptr_t)addr, len, 1,
                                 deadline);
        /* device memory: copied whole into the staging buffer first, so that a failed copy is
         * a clean refusal rather than a reply cut short; then sent at once */
        rc = mc__devmem_buf_reserve(e->devmem, &c->stage, (size_t)len, pin->device);
        if (!rc)
            rc = e->devmem->to_host(c->stage.p, (const void *)(uintptr_t)addr, (size_t)len,
                                    pin->device);
        mc__reg_unpin(&e->reg, pin);
        if (rc)
            return mc__reply_error(c, h->type, h->request_id, rc, "copy from device memory failed",
                                   deadline);
        return mc__reply_now(c, h->type, h->request_id, c->stage.p, (size_t)len, deadline);
    }
    return mc__reply_error(c, h->type, h->request_id, MC_ERR_ADDRESS_NOT_REGISTERED,
                           "read source not registered (or of another incarnation)", deadline);
}

static int mc__serve_notify(mc_engine_t *e, mc__srv_conn_t *c, const mc_frame_header_t *h,
                            uint64_t deadline) {
    mc__te_notify_view_t v;
    int rc;
    if (mc__srv_read(c, c->scratch, h->body_len, deadline))
        return MC_ERR_SOCKET;
    rc = mc__te_decode_notify(c->scratch, h->body_len, &v);
    if (!rc)
        rc = mc__notify_push(e, v.from, v.from_len, v.name, v.name_len, v.msg, v.msg_len);
    if (rc)
        return mc__reply_error(c, h->type, h->request_id, rc, "notify refused", deadline);
    return mc__reply_raw(c, h->type, h->request_id, NULL, 0, 0, deadline);
}

static int mc__serve_desc(mc_engine_t *e, mc__srv_conn_t *c, const mc_frame_header_t *h,
                          uint64_t deadline) {
    char *json = NULL;
    int rc = mc__meta_desc_json(e, &json);
    if (rc)
        rc = mc__reply_error(c, h->type, h->request_id, rc, "descriptor unavailable", deadline);
    else
        rc = mc__reply_now(c, h->type, h->request_id, json, strlen(json), deadline);
    mc__free(json);
    return rc;
}

/* Serves one request; a nonzero return closes the connection. */
static int mc__serve_one(mc_engine_t *e, mc__srv_conn_t *c) {
    uint8_t raw[MC_FRAME_HEADER_SIZE];
    mc_frame_header_t h;
    uint64_t deadline;
    int chk;
    int idle = mc__rbuf_pending(&c->rb) == 0;
    /* Idle connections wait without a deadline: stop(), the idle timeout, or a new connection
     * that needs the slot of the longest idle one shuts the socket down to end the wait. Held
     * replies go out first (mc__srv_read), with the engine's timeout. */
    if (idle)
        mc__conn_idle(1);
    if (c->niov && !mc__srv_buffered(c, sizeof(raw)) &&
        mc__srv_flush(c, mc__now_ms() + (uint64_t)e->timeout_ms) != 0)
        return MC_ERR_SOCKET;
    if (mc__rbuf_read(&c->rb, raw, sizeof(raw), 0))
        return MC_ERR_SOCKET;
    if (idle)
        mc__conn_idle(0);
    if (mc__frame_header_decode(raw, sizeof(raw), MC__TE_MAX_REQUEST_BODY, &h)) {
        MC_DEBUG("closing RPC connection: bad frame header (type %u, body %llu)", h.type,
                 (unsigned long long)h.body_len);
        return MC_ERR_INVALID_ARGUMENT;
    }
    chk = mc__te_check_request(&h);
    c->bulk = (h.flags & MC__TE_F_BULK) != 0;
    deadline = mc__now_ms() + (uint64_t)e->timeout_ms;
    if (chk == MC_ERR_NOT_IMPLEMENTED) {
        if (mc__drain(c, h.body_len, deadline))
            return MC_ERR_SOCKET;
        return mc__reply_error(c, h.type, h.request_id, MC_ERR_NOT_IMPLEMENTED,
                               "unknown message type", deadline);
    }
    if (chk) {
        MC_DEBUG("closing RPC connection: type %u with body %llu", h.type,
                 (unsigned long long)h.body_len);
        return chk;
    }
    switch (h.type) {
    case MC__TE_PING:
        return mc__reply_raw(c, h.type, h.request_id, NULL, 0, 0, deadline);
    case MC__TE_GET_DESC:
        return mc__serve_desc(e, c, &h, deadline);
    case MC__TE_WRITE:
        return mc__serve_write(e, c, &h, deadline);
    case MC__TE_READ:
        return mc__serve_read(e, c, &h, deadline);
    case MC__TE_NOTIFY:
        return mc__serve_notify(e, c, &h, deadline);
    case MC__TE_WRITE_ASK:
        return mc__serve_write_ask(e, c, &h, deadline);
    default:
        return MC_ERR_INVALID_ARGUMENT;
    }
}

static void mc__conn_serve(void *ctx, int fd) {
    mc__server_t *s = ctx;
    mc__srv_conn_t *c;
    uint8_t *rbuf;
    /* with a cluster secret, nothing is served to a peer that has not proved it knows it */
    if (s->e->auth.enabled &&
        mc__auth_server(&s->e->auth, fd, mc__now_ms() + (uint64_t)s->e->timeout_ms) != 0)
        return;
    c = mc__calloc(1, sizeof(*c));
    rbuf = mc__malloc(MC__CONN_RBUF);
    if (c && rbuf && (c->scratch = mc__malloc(MC__SCRATCH)) != NULL) {
        c->e = s->e;
        c->fd = fd;
        mc__rbuf_init(&c->rb, fd, rbuf, MC__CONN_RBUF);
        while (mc__serve_one(s->e, c) == 0) {
        }
        /* requests served before the one that ended the connection still get their replies
         * (and held READ sources are let go) */
        (void)mc__srv_flush(c, mc__now_ms() + (uint64_t)s->e->timeout_ms);
    }
    if (c) {
        mc__free(c->scratch);
        mc__devmem_buf_release(s->e->devmem, &c->stage);
    }
    mc__free(rbuf);
    mc__free(c);
}

/* Large socket buffers let one connection keep a multi-MiB slice in flight. */
static void mc__tune_socket(void *ctx, int fd) {
    int sz = 4 << 20;
    (void)ctx;
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
    /* an initiator that vanished mid-request frees its connection thread in seconds */
    (void)mc__set_dead_peer_timeouts(fd);
}

/* Takes over lfd, also when it fails. */
int mc__server_start(mc_engine_t *e, int lfd, mc__server_t **out) {
    mc__server_t *s = mc__calloc(1, sizeof(*s));
    int rc;
    if (!s) {
        close(lfd);
        return MC_ERR_MEMORY;
    }
    s->e = e;
    mc_conn_server_opts_t o = {.name = "te-rpc",
                               .listen_fd = lfd,
                               .max_conns = MC__SERVER_MAX_CONNS,
                               .max_per_peer = MC__SERVER_MAX_PER_PEER,
                               .idle_timeout_ms = MC__SERVER_IDLE_MS,
                               .serve = mc__conn_serve,
                               .tune = mc__tune_socket,
                               .ctx = s};
    rc = mc__conn_server_start(&o, &s->conns);
    if (rc) {
        mc__free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void mc__server_stop(mc__server_t *s) {
    if (!s)
        return;
    mc__conn_server_stop(s->conns);
    mc__free(s);
}

void mc__server_forget(mc__server_t *s) {
    if (!s)
        return;
    mc__conn_server_forget(s->conns);
    mc__free(s);
}
