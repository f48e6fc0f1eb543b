/* Serving dummy clients (see node_server.h and node_proto.h). Every part a dummy names is checked
 * against the mapping it gave (handle known, offset and length inside), so no request can make
 * the node read or write outside memory a dummy handed over; a malformed request gets an error
 * reply that says what was wrong, and the connection carries on while its framing holds. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/conn_server.h"
#include "mooncake/common/log.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "node/node_server.h"
#include "proto/node_proto.h"

#define MC__LAT_BUCKETS 12
static const uint64_t mc__lat_le_us[MC__LAT_BUCKETS] = {
    50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 100000, 1000000, 10000000};

typedef struct mc__hist {
    _Atomic uint64_t bucket[MC__LAT_BUCKETS + 1];
    _Atomic uint64_t sum_us;
    _Atomic uint64_t count;
} mc__hist_t;

/* Latency families, named as the reference's client metrics. */
enum { MC__H_PUT, MC__H_GET, MC__H_BATCH_PUT, MC__H_BATCH_GET, MC__H_N };
static const char *const mc__hist_names[MC__H_N] = {
    "mooncake_transfer_put_latency", "mooncake_transfer_get_latency",
    "mooncake_transfer_batch_put_latency", "mooncake_transfer_batch_get_latency"};

struct mc__node {
    mc_store_t *store;
    mc_conn_server_t *srv;
    mc_conn_server_t *tcp_srv; /* the service port, or NULL */
    mc_auth_t auth;
    size_t max_regions;
    int request_timeout_ms;
    _Atomic int64_t conns;
    _Atomic uint64_t conns_total;
    pthread_mutex_t pids_mu; /* the dummies (processes) attached: a dummy may hold several
                                connections */
    struct {
        uint32_t pid;
        uint32_t refs;
    } * pids;
    size_t npids, pids_cap;
    _Atomic int64_t mapped_bytes;
    _Atomic uint64_t read_bytes, write_bytes;
    _Atomic uint64_t requests[MC_NP_TYPE_MAX_];
    _Atomic uint64_t bad_requests;
    _Atomic uint64_t lost_dummies; /* connections that ended in the middle of a request */
    mc__hist_t hist[MC__H_N];
    mc__hist_t rpc_hist[MC_NP_TYPE_MAX_];
};

typedef struct mc__region {
    uint32_t handle;
    uint8_t *base;
    size_t len;
} mc__region_t;

typedef struct mc__conn {
    mc__node_t *node;
    int fd;
    uint32_t pid;
    mc__region_t *regions;
    size_t nregions, cap;
    uint32_t next_handle;
    mc_buf_t out;
} mc__conn_t;

static void mc__hist_add(mc__hist_t *h, uint64_t us) {
    int k = 0;
    while (k < MC__LAT_BUCKETS && us > mc__lat_le_us[k])
        k++;
    atomic_fetch_add(&h->bucket[k], 1);
    atomic_fetch_add(&h->sum_us, us);
    atomic_fetch_add(&h->count, 1);
}

static mc__region_t *mc__find_region(mc__conn_t *c, uint32_t handle) {
    for (size_t i = 0; i < c->nregions; i++)
        if (c->regions[i].handle == handle)
            return &c->regions[i];
    return NULL;
}

static void mc__drop_region(mc__conn_t *c, size_t i) {
    mc__region_t r = c->regions[i];
    c->regions[i] = c->regions[--c->nregions];
    (void)mc_store_unregister_buffer(c->node->store, r.base);
    munmap(r.base, r.len);
    atomic_fetch_sub(&c->node->mapped_bytes, (int64_t)r.len);
}

static int mc__send_out(mc__conn_t *c) {
    if (c->out.failed)
        return MC_ERR_INTERNAL_ERROR;
    return mc__send_all(c->fd, c->out.data, c->out.len,
                        mc__now_ms() + (uint64_t)c->node->request_timeout_ms);
}

static int mc__reply(mc__conn_t *c, const mc_frame_header_t *h, int64_t rc, const int64_t *res,
                     uint32_t n, const char *text) {
    mc__buf_reset(&c->out);
    if (mc__np_encode_reply(&c->out, h->type, h->request_id, rc, res, n, text) != 0)
        return MC_ERR_INTERNAL_ERROR;
    return mc__send_out(c);
}

static int mc__reply_error(mc__conn_t *c, const mc_frame_header_t *h, int code, const char *msg) {
    atomic_fetch_add(&c->node->bad_requests, 1);
    MC_WARN("node: dummy pid %u: %s request refused: %s", (unsigned)c->pid,
            mc__np_type_name(h->type), msg);
    mc__buf_reset(&c->out);
    if (mc__np_encode_error(&c->out, h->type, h->request_id, code, msg) != 0)
        return MC_ERR_INTERNAL_ERROR;
    return mc__send_out(c);
}

/* MAP: the passed memfd, sealed against shrinking, at least as long as asked, mapped here and
 * registered with the store so the engine moves bytes straight from and to it. */
static int mc__do_map(mc__conn_t *c, const mc_frame_header_t *h, const mc__np_request_t *r,
                      int *fds, int nfds) {
    char msg[160];
    struct stat st;
    void *base = MAP_FAILED;
    int seals;
    int rc;
    if (nfds != 1) {
        snprintf(msg, sizeof(msg), "map needs exactly one descriptor, got %d", nfds);
        return mc__reply_error(c, h, MC_ERR_INVALID_PARAMS, msg);
    }
    seals = fcntl(fds[0], F_GET_SEALS);
    if (r->map_len == 0 || r->map_len > SIZE_MAX || fstat(fds[0], &st) != 0 ||
        (uint64_t)st.st_size < r->map_len || seals < 0 || !(seals & F_SEAL_SHRINK)) {
        snprintf(msg, sizeof(msg),
                 "map: the descriptor is no memfd sealed against shrinking of at least %llu bytes",
                 (unsigned long long)r->map_len);
        return mc__reply_error(c, h, MC_ERR_INVALID_PARAMS, msg);
    }
    if (c->nregions >= c->node->max_regions) {
        snprintf(msg, sizeof(msg), "map: this dummy already has %zu mappings (the limit)",
                 c->nregions);
        return mc__reply_error(c, h, MC_ERR_INVALID_PARAMS, msg);
    }
    if (c->nregions == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        mc__region_t *v = mc__realloc(c->regions, cap * sizeof(*v));
        if (!v)
            return mc__reply_error(c, h, MC_ERR_INTERNAL_ERROR, "map: out of memory");
        c->regions = v;
        c->cap = cap;
    }
    base = mmap(NULL, (size_t)r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
    if (base == MAP_FAILED) {
        snprintf(msg, sizeof(msg), "map: mmap of %llu bytes failed: %s",
                 (unsigned long long)r->map_len, strerror(errno));
        return mc__reply_error(c, h, MC_ERR_INVALID_PARAMS, msg);
    }
    rc = mc_store_register_buffer(c->node->store, base, (size_t)r->map_len);
    if (rc != 0) {
        munmap(base, (size_t)r->map_len);
        snprintf(msg, sizeof(msg), "map: registering %llu bytes failed: %s",
                 (unsigned long long)r->map_len, mc_store_strerror(rc));
        return mc__reply_error(c, h, rc, msg);
    }
    c->regions[c->nregions++] = (mc__region_t){c->next_handle, base, (size_t)r->map_len};
    atomic_fetch_add(&c->node->mapped_bytes, (int64_t)r->map_len);
    return mc__reply(c, h, (int64_t)c->next_handle++, NULL, 0, "");
}

/* The parts of one item as memory of ours; MC_ERR_INVALID_PARAMS for a part outside every
 * mapping this dummy gave. */
static int mc__item_iov(mc__conn_t *c, const mc__np_item_t *it, mc_store_iov_t *iov,
                        uint64_t *total) {
    *total = 0;
    for (uint32_t k = 0; k < it->nparts; k++) {
        const mc__np_part_t *p = &it->parts[k];
        mc__region_t *r = p->len ? mc__find_region(c, p->handle) : NULL;
        if (p->len == 0) { /* an empty part names no memory */
            iov[k].base = NULL;
            iov[k].len = 0;
            continue;
        }
        if (!r || p->off > r->len || p->len > r->len - p->off)
            return MC_ERR_INVALID_PARAMS;
        iov[k].base = r->base + p->off;
        iov[k].len = (size_t)p->len;
        *total += p->len;
    }
    return 0;
}

static int mc__do_data(mc__conn_t *c, const mc_frame_header_t *h, const mc__np_request_t *r) {
    mc__node_t *n = c->node;
    size_t nparts = 0, m = 0;
    mc_store_iov_t *iov = NULL;
    mc_store_item_t *items = NULL;
    uint64_t *bytes = NULL;
    int64_t *res = NULL, *sub64 = NULL;
    int *sub32 = NULL;
    uint64_t t0 = (mc__now_ns() / 1000u), moved = 0;
    int rc;
    for (uint32_t i = 0; i < r->n; i++)
        nparts += r->items[i].nparts;
    iov = mc__calloc(nparts ? nparts : 1, sizeof(*iov));
    items = mc__calloc(r->n ? r->n : 1, sizeof(*items));
    bytes = mc__calloc(r->n ? r->n : 1, sizeof(*bytes));
    res = mc__calloc(r->n ? r->n : 1, sizeof(*res));
    sub64 = mc__calloc(r->n ? r->n : 1, sizeof(*sub64));
    sub32 = mc__calloc(r->n ? r->n : 1, sizeof(*sub32));
    if (!iov || !items || !bytes || !res || !sub64 || !sub32) {
        rc = mc__reply_error(c, h, MC_ERR_INTERNAL_ERROR, "out of memory");
        goto out;
    }
    /* Items whose parts are not all inside this dummy's mappings fail alone. */
    for (uint32_t i = 0, at = 0; i < r->n; i++) {
        const mc__np_item_t *it = &r->items[i];
        res[i] = mc__item_iov(c, it, &iov[at], &bytes[i]);
        if (res[i] == 0)
            items[m++] = (mc_store_item_t){it->key, &iov[at], it->nparts};
        at += it->nparts;
    }
    if (m > 0) {
        if (r->type == MC_NP_GET)
            (void)mc_store_batch_get_into(n->store, items, m, sub64);
        else if (r->type == MC_NP_UPSERT)
            (void)mc_store_batch_upsert(n->store, items, m, &r->rc, sub32);
        else
            (void)mc_store_batch_put(n->store, items, m, &r->rc, sub32);
    }
    for (uint32_t i = 0, j = 0; i < r->n; i++) {
        if (res[i] != 0)
            continue;
        res[i] = r->type == MC_NP_GET ? sub64[j] : sub32[j];
        j++;
        if (r->type == MC_NP_GET && res[i] > 0)
            moved += (uint64_t)res[i];
        else if (r->type != MC_NP_GET && res[i] == 0)
            moved += bytes[i];
    }
    if (r->type == MC_NP_GET) {
        atomic_fetch_add(&n->read_bytes, moved);
        mc__hist_add(&n->hist[r->n > 1 ? MC__H_BATCH_GET : MC__H_GET], (mc__now_ns() / 1000u) - t0);
    } else {
        atomic_fetch_add(&n->write_bytes, moved);
        mc__hist_add(&n->hist[r->n > 1 ? MC__H_BATCH_PUT : MC__H_PUT], (mc__now_ns() / 1000u) - t0);
    }
    rc = mc__reply(c, h, 0, res, r->n, "");
out:
    mc__free(sub32);
    mc__free(sub64);
    mc__free(res);
    mc__free(bytes);
    mc__free(items);
    mc__free(iov);
    return rc;
}

static int mc__do_keys(mc__conn_t *c, const mc_frame_header_t *h, const mc__np_request_t *r) {
    int *res32 = mc__calloc(r->n ? r->n : 1, sizeof(*res32));
    int64_t *res = mc__calloc(r->n ? r->n : 1, sizeof(*res));
    int rc;
    if (!res32 || !res) {
        rc = mc__reply_error(c, h, MC_ERR_INTERNAL_ERROR, "out of memory");
        goto out;
    }
    if (r->type == MC_NP_EXIST)
        (void)mc_store_batch_is_exist(c->node->store, r->keys, r->n, res32);
    else
        (void)mc_store_batch_remove(c->node->store, r->keys, r->n, r->force, res32);
    for (uint32_t i = 0; i < r->n; i++)
        res[i] = res32[i];
    rc = mc__reply(c, h, 0, res, r->n, "");
out:
    mc__free(res);
    mc__free(res32);
    return rc;
}

/* Counts a dummy's connections by its pid (HELLO names it). */
static void mc__pid_ref(mc__node_t *n, uint32_t pid, int delta) {
    size_t i;
    pthread_mutex_lock(&n->pids_mu);
    for (i = 0; i < n->npids && n->pids[i].pid != pid; i++)
        ;
    if (i == n->npids && delta > 0) {
        if (n->npids == n->pids_cap) {
            size_t cap = n->pids_cap ? n->pids_cap * 2 : 16;
            void *v = mc__realloc(n->pids, cap * sizeof(*n->pids));
            if (!v)
                goto out; /* the gauge undercounts; nothing else depends on it */
            n->pids = v;
            n->pids_cap = cap;
        }
        n->pids[n->npids].pid = pid;
        n->pids[n->npids++].refs = 0;
    }
    if (i < n->npids) {
        n->pids[i].refs += (uint32_t)delta;
        if (n->pids[i].refs == 0)
            n->pids[i] = n->pids[--n->npids];
    }
out:
    pthread_mutex_unlock(&n->pids_mu);
}

/* Runs one decoded request; a non-zero return ends the connection (the reply could not go). */
static int mc__dispatch(mc__conn_t *c, const mc_frame_header_t *h, const mc__np_request_t *r,
                        int *fds, int nfds) {
    mc_store_t *s = c->node->store;
    if (r->type != MC_NP_MAP && nfds > 0)
        return mc__reply_error(c, h, MC_ERR_INVALID_PARAMS,
                               "descriptors passed with a request that takes none");
    switch (r->type) {
    case MC_NP_HELLO:
        MC_INFO("node: dummy client pid %u attached (it says pid %u)", (unsigned)c->pid,
                (unsigned)r->pid);
        return mc__reply(c, h, 0, NULL, 0, mc_store_hostname(s));
    case MC_NP_MAP:
        return mc__do_map(c, h, r, fds, nfds);
    case MC_NP_UNMAP:
        for (size_t i = 0; i < c->nregions; i++)
            if (c->regions[i].handle == r->handle) {
                mc__drop_region(c, i);
                return mc__reply(c, h, 0, NULL, 0, "");
            }
        return mc__reply_error(c, h, MC_ERR_INVALID_PARAMS, "unmap: no such mapping");
    case MC_NP_PUT:
    case MC_NP_UPSERT:
    case MC_NP_GET:
        return mc__do_data(c, h, r);
    case MC_NP_EXIST:
    case MC_NP_REMOVE:
        return mc__do_keys(c, h, r);
    case MC_NP_SIZE:
        return mc__reply(c, h, mc_store_get_size(s, r->text), NULL, 0, "");
    case MC_NP_REMOVE_ALL:
        return mc__reply(c, h, mc_store_remove_all(s, r->force), NULL, 0, "");
    case MC_NP_REMOVE_REGEX:
        return mc__reply(c, h, mc_store_remove_by_regex(s, r->text, r->force), NULL, 0, "");
    case MC_NP_HEALTH:
        return mc__reply(c, h, mc_store_health_check(s), NULL, 0, "");
    default:
        return mc__reply_error(c, h, MC_ERR_INVALID_PARAMS, "unknown request type");
    }
}

static void mc__close_fds(int *fds, int *nfds) {
    for (int i = 0; i < *nfds; i++)
        close(fds[i]);
    *nfds = 0;
}

static void mc__node_serve(void *ctx, int fd) {
    mc__conn_t c;
    uint8_t *body = NULL;
    memset(&c, 0, sizeof(c));
    c.node = ctx;
    c.fd = fd;
    c.next_handle = 1;
    mc__buf_init(&c.out);
    atomic_fetch_add(&c.node->conns, 1);
    atomic_fetch_add(&c.node->conns_total, 1);
    {
        /* The kernel's word for who is at the other end, not the peer's. */
        struct ucred cred;
        socklen_t cl = sizeof(cred);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0 && cred.pid > 0)
            c.pid = (uint32_t)cred.pid;
        if (c.pid)
            mc__pid_ref(c.node, c.pid, 1);
    }
    for (;;) {
        uint8_t hdr[MC_FRAME_HEADER_SIZE];
        mc_frame_header_t h;
        mc__np_request_t req;
        char err[256];
        int fds[4];
        int nfds = 0;
        int rc;
        mc__conn_idle(1);
        if (mc__recv_fds(fd, hdr, sizeof(hdr), fds, 4, &nfds, 0) != 0)
            break; /* the dummy closed, exited or died between requests */
        mc__conn_idle(0);
        if (mc__frame_header_decode(hdr, sizeof(hdr), MC_NP_MAX_BODY, &h) != 0) {
            /* The stream cannot be followed past a header we cannot trust. */
            snprintf(err, sizeof(err),
                     h.magic != MC_FRAME_MAGIC       ? "bad frame: not a Mooncake frame"
                     : h.version != MC_FRAME_VERSION ? "bad frame: unknown protocol version"
                                                     : "bad frame: body over the 16 MiB limit");
            mc__close_fds(fds, &nfds);
            (void)mc__reply_error(&c, &h, MC_ERR_INVALID_PARAMS, err);
            break;
        }
        body = mc__malloc(h.body_len ? (size_t)h.body_len : 1);
        if (!body) {
            mc__close_fds(fds, &nfds);
            break;
        }
        if (h.body_len && mc__recv_all(fd, body, (size_t)h.body_len,
                                       mc__now_ms() + (uint64_t)c.node->request_timeout_ms) != 0) {
            MC_WARN("node: dummy pid %u went away in the middle of a %s request", (unsigned)c.pid,
                    mc__np_type_name(h.type));
            atomic_fetch_add(&c.node->lost_dummies, 1);
            mc__close_fds(fds, &nfds);
            break;
        }
        if (h.type > 0 && h.type < MC_NP_TYPE_MAX_)
            atomic_fetch_add(&c.node->requests[h.type], 1);
        rc = mc__np_decode_request(h.type, body, (size_t)h.body_len, &req, err, sizeof(err));
        if (rc != 0)
            rc = mc__reply_error(&c, &h, rc, err);
        else {
            uint64_t t0 = mc__now_ns();
            rc = mc__dispatch(&c, &h, &req, fds, nfds);
            mc__hist_add(&c.node->rpc_hist[h.type], (mc__now_ns() - t0) / 1000u);
        }
        mc__np_request_free(&req);
        mc__close_fds(fds, &nfds); /* a mapping keeps no descriptor */
        mc__free(body);
        body = NULL;
        if (rc != 0) {
            atomic_fetch_add(&c.node->lost_dummies, 1);
            MC_WARN("node: dummy pid %u is gone (its reply could not be sent)", (unsigned)c.pid);
            break;
        }
    }
    mc__free(body);
    while (c.nregions)
        mc__drop_region(&c, c.nregions - 1);
    mc__free(c.regions);
    mc__buf_free(&c.out);
    atomic_fetch_sub(&c.node->conns, 1);
    if (c.pid)
        mc__pid_ref(c.node, c.pid, -1);
    MC_INFO("node: dummy client pid %u detached; its mappings are dropped", (unsigned)c.pid);
}

/* A TCP connection: the cluster secret's handshake first, when one is set (the unix socket is
 * this host's only; the port is the network's), then the same loop as a dummy's. */
static void mc__node_serve_tcp(void *ctx, int fd) {
    mc__node_t *n = ctx;
    if (n->auth.enabled &&
        mc__auth_server(&n->auth, fd, mc__now_ms() + (uint64_t)n->request_timeout_ms) != 0) {
        MC_WARN("node: a TCP peer failed the cluster-secret handshake");
        return;
    }
    mc__node_serve(ctx, fd);
}

/* Serves the node's channel on lfd (a negative lfd is the listen call's error, passed on). */
static int mc__node_serve_on(mc__node_t *n, int lfd, const char *name, int max_conns,
                             void (*serve)(void *ctx, int fd), mc_conn_server_t **srv) {
    mc_conn_server_opts_t so;
    if (lfd < 0)
        return lfd;
    memset(&so, 0, sizeof(so));
    so.name = name;
    so.listen_fd = lfd;
    so.max_conns = max_conns;
    so.serve = serve;
    so.ctx = n;
    return mc__conn_server_start(&so, srv);
}

int mc__node_start(mc_store_t *store, const mc__node_opts_t *opts, mc__node_t **out) {
    mc__node_t *n;
    int rc, max_conns;
    if (!store || !opts || !opts->socket_path || !out)
        return MC_ERR_INVALID_PARAMS;
    n = mc__calloc(1, sizeof(*n));
    if (!n)
        return MC_ERR_INTERNAL_ERROR;
    n->store = store;
    pthread_mutex_init(&n->pids_mu, NULL);
    n->max_regions = opts->max_regions ? opts->max_regions : 4096;
    n->request_timeout_ms = opts->request_timeout_ms > 0 ? opts->request_timeout_ms : 10000;
    if (opts->auth)
        n->auth = *opts->auth;
    max_conns = opts->max_dummies > 0 ? opts->max_dummies : 1024;
    rc = mc__node_serve_on(n, mc__unix_listen(opts->socket_path), "node", max_conns, mc__node_serve,
                           &n->srv);
    if (rc == 0 && opts->tcp_port) {
        const char *host =
            opts->tcp_host && strcmp(opts->tcp_host, "0.0.0.0") ? opts->tcp_host : NULL;
        rc = mc__node_serve_on(n, mc__tcp_listen(host, opts->tcp_port, 128, NULL), "node-tcp",
                               max_conns, mc__node_serve_tcp, &n->tcp_srv);
        if (rc != 0)
            mc__conn_server_stop(n->srv);
    }
    if (rc != 0) {
        pthread_mutex_destroy(&n->pids_mu);
        mc__free(n);
        return rc;
    }
    *out = n;
    return 0;
}

void mc__node_stop(mc__node_t *n) {
    if (!n)
        return;
    mc__conn_server_stop(n->tcp_srv);
    mc__conn_server_stop(n->srv);
    pthread_mutex_destroy(&n->pids_mu);
    mc__free(n->pids);
    mc__free(n);
}

int mc__node_dummies(mc__node_t *n) {
    int k;
    if (!n)
        return 0;
    pthread_mutex_lock(&n->pids_mu);
    k = (int)n->npids;
    pthread_mutex_unlock(&n->pids_mu);
    return k;
}

static void mc__metric(mc_buf_t *b, const char *name, const char *type, const char *help,
                       unsigned long long v) {
    char line[512];
    int k = snprintf(line, sizeof(line), "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", name, help, name,
                     type, name, v);
    mc__buf_put(b, line, (size_t)k);
}

/* One histogram's samples; label is "" or `rpc_name="..."`. */
static void mc__hist_render(mc_buf_t *b, const char *name, const char *label, const mc__hist_t *h) {
    char line[512];
    const char *sep = *label ? "," : "";
    uint64_t cum = 0;
    int k;
    for (int i = 0; i <= MC__LAT_BUCKETS; i++) {
        cum += atomic_load(&h->bucket[i]);
        if (i < MC__LAT_BUCKETS)
            k = snprintf(line, sizeof(line), "%s_bucket{%s%sle=\"%llu\"} %llu\n", name, label, sep,
                         (unsigned long long)mc__lat_le_us[i], (unsigned long long)cum);
        else
            k = snprintf(line, sizeof(line), "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, label, sep,
                         (unsigned long long)cum);
        mc__buf_put(b, line, (size_t)k);
    }
    k = snprintf(line, sizeof(line), "%s_sum%s%s%s %llu\n%s_count%s%s%s %llu\n", name,
                 *label ? "{" : "", label, *label ? "}" : "",
                 (unsigned long long)atomic_load(&h->sum_us), name, *label ? "{" : "", label,
                 *label ? "}" : "", (unsigned long long)atomic_load(&h->count));
    mc__buf_put(b, line, (size_t)k);
}

/* The process, as Prometheus client libraries describe theirs. */
static void mc__process_metrics(mc_buf_t *b) {
    struct rusage ru;
    struct rlimit rl;
    unsigned long long vpages = 0, rpages = 0;
    long page = sysconf(_SC_PAGESIZE);
    FILE *f = fopen("/proc/self/statm", "r");
    DIR *d = opendir("/proc/self/fd");
    char line[256];
    int k;
    if (f) {
        if (fscanf(f, "%llu %llu", &vpages, &rpages) == 2 && page > 0) {
            mc__metric(b, "process_resident_memory_bytes", "gauge", "resident memory size",
                       rpages * (unsigned long long)page);
            mc__metric(b, "process_virtual_memory_bytes", "gauge", "virtual memory size",
                       vpages * (unsigned long long)page);
        }
        fclose(f);
    }
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
                     ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6;
        k = snprintf(line, sizeof(line),
                     "# HELP process_cpu_seconds_total user and system CPU time spent\n"
                     "# TYPE process_cpu_seconds_total counter\n"
                     "process_cpu_seconds_total %.6f\n",
                     cpu);
        mc__buf_put(b, line, (size_t)k);
    }
    if (d) {
        unsigned long long fds = 0;
        for (struct dirent *e = readdir(d); e; e = readdir(d))
            fds += e->d_name[0] != '.';
        closedir(d);
        mc__metric(b, "process_open_fds", "gauge", "open file descriptors", fds ? fds - 1 : 0);
    }
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        mc__metric(b, "process_max_fds", "gauge", "the limit of open file descriptors",
                   (unsigned long long)rl.rlim_cur);
}

int mc__node_metrics(mc__node_t *n, mc_buf_t *b) {
    char line[512];
    int k;
    /* The reference client's names: they carry no _total suffix, so they are declared untyped
     * (Prometheus reads them as counters all the same). */
    mc__metric(b, "mooncake_transfer_read_bytes", "untyped",
               "bytes read from the pool for dummy clients (a counter)",
               atomic_load(&n->read_bytes));
    mc__metric(b, "mooncake_transfer_write_bytes", "untyped",
               "bytes written to the pool for dummy clients (a counter)",
               atomic_load(&n->write_bytes));
    mc__metric(b, "mooncake_client_dummy_clients", "gauge",
               "dummy clients (processes) attached now", (unsigned long long)mc__node_dummies(n));
    mc__metric(b, "mooncake_client_dummy_connections", "gauge",
               "control connections open now (a dummy opens up to 4)",
               (unsigned long long)atomic_load(&n->conns));
    mc__metric(b, "mooncake_client_dummy_connections_total", "counter",
               "control connections accepted", atomic_load(&n->conns_total));
    mc__metric(b, "mooncake_client_dummy_lost_total", "counter",
               "dummy clients that went away in the middle of a request",
               atomic_load(&n->lost_dummies));
    mc__metric(b, "mooncake_client_bad_requests_total", "counter",
               "control-channel requests refused as malformed", atomic_load(&n->bad_requests));
    mc__metric(b, "mooncake_client_shm_mapped_bytes", "gauge",
               "dummy shared memory mapped and registered now",
               (unsigned long long)atomic_load(&n->mapped_bytes));
    k = snprintf(line, sizeof(line),
                 "# HELP mooncake_client_rpc_count control-channel requests by call (a counter)\n"
                 "# TYPE mooncake_client_rpc_count untyped\n");
    mc__buf_put(b, line, (size_t)k);
    for (int t = 1; t < MC_NP_TYPE_MAX_; t++) {
        k = snprintf(line, sizeof(line), "mooncake_client_rpc_count{rpc_name=\"%s\"} %llu\n",
                     mc__np_type_name(t), (unsigned long long)atomic_load(&n->requests[t]));
        mc__buf_put(b, line, (size_t)k);
    }
    k = snprintf(line, sizeof(line),
                 "# HELP mooncake_client_rpc_latency time to serve a control-channel request, in "
                 "microseconds\n"
                 "# TYPE mooncake_client_rpc_latency histogram\n");
    mc__buf_put(b, line, (size_t)k);
    for (int t = 1; t < MC_NP_TYPE_MAX_; t++) {
        char label[64];
        snprintf(label, sizeof(label), "rpc_name=\"%s\"", mc__np_type_name(t));
        mc__hist_render(b, "mooncake_client_rpc_latency", label, &n->rpc_hist[t]);
    }
    for (int f = 0; f < MC__H_N; f++) {
        k = snprintf(line, sizeof(line),
                     "# HELP %s latency of dummy-client calls, in microseconds\n"
                     "# TYPE %s histogram\n",
                     mc__hist_names[f], mc__hist_names[f]);
        mc__buf_put(b, line, (size_t)k);
        mc__hist_render(b, mc__hist_names[f], "", &n->hist[f]);
    }
    mc__process_metrics(b);
    return b->failed ? MC_ERR_INTERNAL_ERROR : 0;
}
