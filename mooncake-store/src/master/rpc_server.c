/* Master RPC listener: one thread per connection, each reading frames, decoding and answering in
 * order. A frame that cannot be trusted (bad magic, oversized, malformed body) ends that
 * connection only; the other connections and the master carry on. Accepting and tracking
 * connections is mc__conn_server's job. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "master/master_internal.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/conn_server.h"
#include "mooncake/common/log.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"

/* A connection's receive buffer, on its thread's stack. */
#define MC__RPC_RBUF 4096
#define MC__RPC_MAX_CONNS 4096
#define MC__RPC_IO_TIMEOUT_MS 30000  /* a body or a reply must move within this */
#define MC__RPC_KEEP_BUF (64u << 10) /* larger buffers are dropped after use */
/* Bodies larger than the kept buffer are reserved against one budget for all connections, so
 * that peers announcing big frames (and sending them slowly) cannot make the master hold more
 * than this; past it a request is drained and answered "busy". Small requests (heartbeats,
 * single keys) never wait on it: they fit the buffer each connection keeps. */
#define MC__RPC_BODY_BUDGET (256ull << 20)

struct mc__rpc_server {
    mc__master_t *m;
    mc_conn_server_t *conns;
    _Atomic uint64_t reserved; /* body bytes reserved by requests being read or handled */
};

/* Takes len bytes of the body budget; 0 when it is exhausted. */
static int mc__rpc_reserve(mc__rpc_server_t *s, uint64_t len) {
    uint64_t cur = atomic_load(&s->reserved);
    do {
        if (cur + len > MC__RPC_BODY_BUDGET)
            return 0;
    } while (!atomic_compare_exchange_weak(&s->reserved, &cur, cur + len));
    return 1;
}

/* Reads and drops n bytes (a body we will not buffer) so that the stream stays in step. */
static int mc__rpc_drain(mc__rbuf_t *rb, uint64_t n, uint64_t deadline) {
    uint8_t scratch[16384];
    while (n) {
        size_t k = n < sizeof(scratch) ? (size_t)n : sizeof(scratch);
        if (mc__rbuf_read(rb, scratch, k, deadline))
            return MC_ERR_SOCKET;
        n -= k;
    }
    return 0;
}

/* Reads a body of len bytes, growing the buffer only as bytes arrive so that a peer announcing a
 * large frame cannot make us allocate memory it never sends. */
static int mc__rpc_read_body(mc__rbuf_t *rb, uint8_t **buf, size_t *cap, size_t len,
                             uint64_t deadline) {
    size_t got = 0;
    while (got < len) {
        size_t want = len - got;
        if (got + want > *cap) {
            size_t ncap = *cap < 65536 ? 65536 : *cap * 2;
            uint8_t *p = NULL;
            if (ncap > len)
                ncap = len;
            p = mc__realloc(*buf, ncap);
            if (!p)
                return MC_ERR_MEMORY;
            *buf = p;
            *cap = ncap;
            want = ncap - got;
        }
        if (mc__rbuf_read(rb, *buf + got, want, deadline))
            return MC_ERR_SOCKET;
        got += want;
    }
    return 0;
}

/* How long the wait for a client's next request may spin after the reply to req: a put's end
 * follows its start only after the client has moved the value to every replica. After a lookup
 * the client reads from a holder before it asks again, so the wait sleeps at once: that spin
 * took cores the holder and the drivers needed, and without it 8 processes' single 4 KiB first
 * gets on 2 cores rose from 43k to 47k op/s (medians) with no row lower beyond its spread
 * (docs/perf/issue26-follower-gov/ab.md). */
static uint64_t mc__rpc_next_spin(const mc__mp_request_t *req) {
    uint64_t bytes = 0;
    if (req->type == MC_MP_GET_REPLICA_LIST)
        return 0;
    if (mc__mp_is_put_start(req->type)) {
        uint64_t copies = req->config.replica_num ? req->config.replica_num : 1;
        for (uint32_t i = 0; i < req->n_keys && bytes <= MC__SPIN_BYTES_MAX; i++)
            bytes += req->value_lens[i] > MC__SPIN_BYTES_MAX || copies > MC_MP_MAX_REPLICA_NUM
                         ? UINT64_MAX / 2 /* no spin, and no overflow */
                         : req->value_lens[i] * copies;
    }
    return mc__reply_spin_for(bytes);
}

static void mc__rpc_serve(mc__rpc_server_t *s, int fd) {
    uint8_t hdr[MC_FRAME_HEADER_SIZE];
    uint8_t *body = NULL;
    size_t cap = 0;
    uint64_t reserved = 0; /* of the body budget, by the request last read */
    uint64_t spin = mc__reply_spin_for(0);
    mc_buf_t out;
    /* a request's header and a small body (most requests) come in with one receive */
    uint8_t rb_mem[MC__RPC_RBUF];
    mc__rbuf_t rb;
    if (s->m->auth.enabled &&
        mc__auth_server(&s->m->auth, fd, mc__now_ms() + MC__RPC_IO_TIMEOUT_MS) != 0)
        return; /* told why, when it could be told */
    mc__rbuf_init(&rb, fd, rb_mem, sizeof(rb_mem));
    mc__buf_init(&out);
    for (;;) {
        mc_frame_header_t h;
        mc__mp_request_t req;
        uint64_t deadline;
        int rc;
        /* the previous request is done: its reservation and its large buffer go back */
        if (reserved) {
            atomic_fetch_sub(&s->reserved, reserved);
            reserved = 0;
        }
        if (cap > MC__RPC_KEEP_BUF) {
            mc__free(body);
            body = NULL;
            cap = 0;
        }
        if (out.cap > MC__RPC_KEEP_BUF)
            mc__buf_free(&out);
        mc__conn_idle(1); /* between requests: its slot may go to a new client (conn_server.h) */
        /* after a reply the client's next request often follows at once (a put's put_end after
         * a small transfer): the first receive spins briefly before it sleeps (mc__rpc_next_spin)
         */
        rb.wait_first = 1;
        rb.spin_ns = spin;
        if (mc__rbuf_read(&rb, hdr, sizeof(hdr), 0))
            break; /* peer closed, or shut down for being idle */
        mc__conn_idle(0);
        deadline = mc__now_ms() + MC__RPC_IO_TIMEOUT_MS;
        mc__buf_reset(&out);
        if (mc__frame_header_decode(hdr, sizeof(hdr), MC_MP_MAX_BODY, &h)) {
            /* A peer speaking our framing at another version deserves to know why. */
            if (h.magic == MC_FRAME_MAGIC && h.version != MC_FRAME_VERSION &&
                mc__mp_encode_error_reply(&out, h.type, h.request_id, MC_ERR_INVALID_VERSION,
                                          "unsupported protocol version") == 0)
                (void)mc__send_all(fd, out.data, out.len, deadline);
            else if (h.magic == MC_FRAME_MAGIC &&
                     mc__mp_encode_error_reply(&out, h.type, h.request_id, MC_ERR_INVALID_PARAMS,
                                               "frame body too large") == 0)
                (void)mc__send_all(fd, out.data, out.len, deadline);
            MC_WARN("rpc: dropping a connection that sent an invalid frame header");
            break;
        }
        reserved = h.body_len > MC__RPC_KEEP_BUF ? h.body_len : 0;
        if (reserved && !mc__rpc_reserve(s, reserved)) {
            MC_WARN("rpc: request body budget exhausted; refusing a %llu-byte %s request",
                    (unsigned long long)h.body_len, mc__mp_type_name(h.type));
            if (mc__rpc_drain(&rb, h.body_len, deadline) ||
                mc__mp_encode_error_reply(&out, h.type, h.request_id,
                                          MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS,
                                          "master busy: request buffers full, retry later") ||
                mc__send_all(fd, out.data, out.len, deadline))
                break;
            continue;
        }
        if (mc__rpc_read_body(&rb, &body, &cap, (size_t)h.body_len, deadline))
            break;
        rc = mc__mp_decode_request(&h, body, (size_t)h.body_len, &req);
        if (rc == MC_ERR_NOT_IMPLEMENTED) {
            /* Framing is intact, so the stream can continue after this answer. */
            rc = mc__mp_encode_error_reply(&out, h.type, h.request_id, rc, "unknown message type");
            if (rc || mc__send_all(fd, out.data, out.len, deadline))
                break;
            continue;
        }
        if (rc) {
            if (mc__mp_encode_error_reply(&out, h.type, h.request_id, rc,
                                          rc == MC_ERR_INVALID_KEY ? "invalid key"
                                                                   : "malformed request") == 0)
                (void)mc__send_all(fd, out.data, out.len, deadline);
            MC_WARN("rpc: dropping a connection that sent a malformed %s request",
                    mc__mp_type_name(h.type));
            break;
        }
        rc = mc__master_handle(s->m, &req, &out);
        spin = mc__rpc_next_spin(&req);
        mc__mp_request_free(&req);
        if (rc || mc__send_all(fd, out.data, out.len, deadline))
            break;
    }
    if (reserved)
        atomic_fetch_sub(&s->reserved, reserved);
    mc__free(body);
    mc__buf_free(&out);
}

static void mc__rpc_conn_serve(void *ctx, int fd) {
    mc__rpc_server_t *s = ctx;
    mc__rpc_serve(s, fd);
}

int mc__rpc_server_start(mc__master_t *m, const char *host, uint16_t port, mc__rpc_server_t **out) {
    mc__rpc_server_t *s = mc__calloc(1, sizeof(*s));
    int rc = MC_ERR_MEMORY;
    *out = NULL;
    if (!s)
        goto out;
    s->m = m;
    mc_conn_server_opts_t o = {.name = "rpc",
                               .listen_fd = -1,
                               .host = host,
                               .port = port,
                               .backlog = 512,
                               .max_conns = MC__RPC_MAX_CONNS,
                               .max_per_peer = (int)m->cfg.rpc_max_conns_per_peer,
                               .idle_timeout_ms = (int)(m->cfg.rpc_idle_timeout_s * 1000),
                               .serve = mc__rpc_conn_serve,
                               .ctx = s};
    rc = mc__conn_server_start(&o, &s->conns);
    if (rc < 0)
        goto out;
    *out = s;
    s = NULL;
out:
    mc__free(s);
    return rc;
}

uint16_t mc__rpc_server_port(const mc__rpc_server_t *s) {
    return s ? mc__conn_server_port(s->conns) : 0;
}

void mc__rpc_server_stop(mc__rpc_server_t *s) {
    if (!s)
        return;
    mc__conn_server_stop(s->conns);
    mc__free(s);
}
