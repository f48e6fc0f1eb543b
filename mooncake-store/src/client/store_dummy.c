/* The dummy side of the storage node's control channel (proto/node_proto.h): a store handle whose
 * calls its local mooncake_client daemon runs. Shared-memory blocks are mapped at the daemon once
 * (MAP with the memfd) and then named by handle; memory that is no pool block is copied through
 * the local buffer, or through a block taken for the call. One request at a time per handle: the
 * socket is held for a whole round trip. A daemon that went away is dialed again by the next
 * call (its mappings start over). */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "client/backend.h"
#include "client/dummy.h"
#include "client/shm_pool.h"
#include "client/store_internal.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/log.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "proto/node_proto.h"

#define MC__DUMMY_DEFAULT_ADDR "127.0.0.1:50052"
#define MC__DUMMY_TIMEOUT_MS 60000

typedef struct mc__dummy_map {
    uint64_t id;
    uint32_t handle;
} mc__dummy_map_t;

/* One connection to the node, with the mappings made on it (the node keeps them per connection).
 * A call holds one channel for its round trips; threads of one dummy use up to MC__DUMMY_CHANNELS
 * at once, each opened the first time it is needed. */
#define MC__DUMMY_CHANNELS 4
typedef struct mc__chan {
    pthread_mutex_t mu; /* held for a whole call */
    int fd;             /* -1 while disconnected */
    const char *path;   /* the dummy's, as are timeout_ms and pool */
    int timeout_ms;
    mc_shm_pool_t *pool;
    uint64_t next_id;
    mc__dummy_map_t *maps;
    size_t nmaps, maps_cap;
    uint64_t seen_gen;
    mc_buf_t out;
} mc__chan_t;

typedef struct mc__dummy mc__dummy_t;
struct mc__dummy {
    char path[108];
    int timeout_ms;
    mc_shm_pool_t *pool;
    int own_pool;
    void *local; /* the local buffer: a pool block, the store's staging area */
    size_t local_len;
    mc__chan_t ch[MC__DUMMY_CHANNELS];
    _Atomic unsigned next_ch;
};

void mc_store_dummy_config_init(mc_store_dummy_config_t *c) {
    if (!c)
        return;
    memset(c, 0, sizeof(*c));
    snprintf(c->server_address, sizeof(c->server_address), "%s", MC__DUMMY_DEFAULT_ADDR);
}

int mc_store_is_dummy(const mc_store_t *s) {
    return s && s->dummy != NULL;
}

void *mc_store_dummy_alloc(mc_store_t *s, size_t len) {
    if (s && mc__store_inherited(s)) {
        (void)mc__store_refuse_inherited(s);
        return NULL;
    }
    return s && s->dummy ? mc_shm_pool_alloc(s->dummy->pool, len) : NULL;
}

static int mc__dummy_unsupported(const char *what) {
    MC_WARN("store: %s is not offered by a dummy client (it runs its calls at a storage node)",
            what);
    return MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS;
}

/* Metadata calls (below), which the data calls use too: one round trip with keys, and one with
 * a scalar answer. */
static int mc__dummy_keys(mc_store_t *s, int type, const char *const *keys, size_t n, int force,
                          int *results);
static int64_t mc__dummy_scalar(mc_store_t *s, int type, const char *text, int force);

/* ---- one round trip ------------------------------------------------------------------------- */

static void mc__dummy_drop(mc__chan_t *d) {
    if (d->fd >= 0)
        close(d->fd);
    d->fd = -1;
    d->nmaps = 0; /* the daemon forgets our mappings with the connection */
}

static int mc__dummy_roundtrip(mc__chan_t *d, int pass_fd, mc__np_reply_t *reply);

static int mc__dummy_dial(mc__chan_t *d, char *name, size_t cap) {
    mc__np_request_t hello;
    mc__np_reply_t reply;
    int rc;
    d->fd = mc__unix_connect(d->path, mc__now_ms() + 5000);
    if (d->fd < 0) {
        d->fd = -1;
        return MC_ERR_RPC_FAIL;
    }
    memset(&hello, 0, sizeof(hello));
    hello.pid = (uint32_t)getpid();
    mc__buf_reset(&d->out);
    if (mc__np_encode_simple(&d->out, MC_NP_HELLO, ++d->next_id, &hello) != 0)
        return MC_ERR_INTERNAL_ERROR;
    rc = mc__dummy_roundtrip(d, -1, &reply);
    if (rc == 0 && reply.rc != 0)
        rc = (int)reply.rc;
    if (rc == 0 && name)
        snprintf(name, cap, "%s", reply.text);
    mc__np_reply_free(&reply);
    if (rc != 0)
        mc__dummy_drop(d);
    return rc;
}

/* Sends d->out (with pass_fd on its first byte when >= 0) and reads the reply. A lost channel
 * (the daemon died or restarted) drops the connection: RPC_FAIL, and the next call dials again. */
static int mc__dummy_roundtrip(mc__chan_t *d, int pass_fd, mc__np_reply_t *reply) {
    uint64_t deadline = mc__now_ms() + (uint64_t)d->timeout_ms;
    uint8_t hdr[MC_FRAME_HEADER_SIZE];
    mc_frame_header_t h;
    uint8_t *body = NULL;
    int rc;
    memset(reply, 0, sizeof(*reply));
    if (d->out.failed)
        return MC_ERR_INTERNAL_ERROR;
    if (d->out.len - MC_FRAME_HEADER_SIZE > MC_NP_MAX_BODY) {
        MC_ERROR("store: a dummy request of %zu bytes is over the node's %u-byte limit; split "
                 "the batch",
                 d->out.len, MC_NP_MAX_BODY);
        return MC_ERR_INVALID_PARAMS;
    }
    if (pass_fd >= 0)
        rc = mc__send_fds(d->fd, d->out.data, d->out.len, &pass_fd, 1);
    else
        rc = mc__send_all(d->fd, d->out.data, d->out.len, deadline);
    if (rc == 0)
        rc = mc__recv_all(d->fd, hdr, sizeof(hdr), deadline);
    if (rc == 0 && mc__frame_header_decode(hdr, sizeof(hdr), MC_NP_MAX_BODY, &h) != 0)
        rc = MC_ERR_SOCKET;
    if (rc == 0 && (!(h.flags & MC_FRAME_F_REPLY) || h.request_id != d->next_id))
        rc = MC_ERR_SOCKET;
    if (rc == 0) {
        body = mc__malloc(h.body_len ? (size_t)h.body_len : 1);
        if (!body)
            return MC_ERR_INTERNAL_ERROR; /* the reply stays unread: drop below */
        rc = mc__recv_all(d->fd, body, (size_t)h.body_len, deadline);
    }
    if (rc == 0 && mc__np_decode_reply(h.flags, body, (size_t)h.body_len, reply) != 0)
        rc = MC_ERR_SOCKET;
    mc__free(body);
    if (rc != 0) {
        MC_ERROR("store: the storage node at %s did not answer (%s); is mooncake_client "
                 "running?",
                 d->path, strerror(errno));
        mc__dummy_drop(d);
        return MC_ERR_RPC_FAIL;
    }
    if (h.flags & MC_FRAME_F_ERROR)
        MC_ERROR("store: the storage node refused a request: %s", reply->text);
    return 0;
}

/* Connected, and every mapping of a block freed since the last call let go at the daemon. */
static int mc__dummy_ready(mc__chan_t *d) {
    uint64_t gen;
    if (d->fd >= 0) {
        /* Between calls the node sends nothing: a readable or hung-up socket is a node that
         * restarted or closed us (a full connection table takes the idlest). Dial again now
         * rather than fail this call. */
        struct pollfd p = {.fd = d->fd, .events = POLLIN | POLLRDHUP};
        if (poll(&p, 1, 0) > 0)
            mc__dummy_drop(d);
    }
    if (d->fd < 0) {
        int rc = mc__dummy_dial(d, NULL, 0);
        if (rc != 0)
            return rc;
    }
    gen = mc__shm_pool_free_gen(d->pool);
    if (gen == d->seen_gen)
        return 0;
    for (size_t i = 0; i < d->nmaps;) {
        mc__np_request_t r;
        mc__np_reply_t reply;
        if (mc__shm_pool_live(d->pool, d->maps[i].id)) {
            i++;
            continue;
        }
        memset(&r, 0, sizeof(r));
        r.handle = d->maps[i].handle;
        d->maps[i] = d->maps[--d->nmaps];
        mc__buf_reset(&d->out);
        if (mc__np_encode_simple(&d->out, MC_NP_UNMAP, ++d->next_id, &r) != 0)
            return MC_ERR_INTERNAL_ERROR;
        if (mc__dummy_roundtrip(d, -1, &reply) != 0)
            return MC_ERR_RPC_FAIL;
        mc__np_reply_free(&reply);
    }
    d->seen_gen = gen;
    return 0;
}

/* The daemon's handle for the pool block holding [p, p+len): MAPs it the first time. */
static int mc__dummy_handle(mc__chan_t *d, const void *p, size_t len, uint32_t *handle,
                            uint64_t *off) {
    mc__shm_block_t b;
    mc__np_request_t r;
    mc__np_reply_t reply;
    int rc = mc__shm_pool_find(d->pool, p, len, &b);
    if (rc != 0)
        return rc;
    *off = (uint64_t)((const uint8_t *)p - b.base);
    for (size_t i = 0; i < d->nmaps; i++)
        if (d->maps[i].id == b.id) {
            *handle = d->maps[i].handle;
            close(b.fd);
            return 0;
        }
    if (d->nmaps == d->maps_cap) {
        size_t cap = d->maps_cap ? d->maps_cap * 2 : 16;
        mc__dummy_map_t *v = mc__realloc(d->maps, cap * sizeof(*v));
        if (!v) {
            close(b.fd);
            return MC_ERR_INTERNAL_ERROR;
        }
        d->maps = v;
        d->maps_cap = cap;
    }
    memset(&r, 0, sizeof(r));
    r.map_len = b.len;
    mc__buf_reset(&d->out);
    rc = mc__np_encode_simple(&d->out, MC_NP_MAP, ++d->next_id, &r);
    if (rc == 0)
        rc = mc__dummy_roundtrip(d, b.fd, &reply);
    close(b.fd);
    if (rc != 0)
        return rc;
    rc = reply.rc < 0 ? (int)reply.rc : 0;
    if (rc == 0) {
        *handle = (uint32_t)reply.rc;
        d->maps[d->nmaps++] = (mc__dummy_map_t){b.id, *handle};
    }
    mc__np_reply_free(&reply);
    return rc;
}

/* A channel for one call: a free connected one, else a free one not yet connected (it dials at
 * its first use), else the next one in turn, waiting for it. Returned locked. */
static mc__chan_t *mc__chan_get(mc__dummy_t *d) {
    unsigned start = atomic_fetch_add(&d->next_ch, 1);
    for (int pass = 0; pass < 2; pass++)
        for (unsigned k = 0; k < MC__DUMMY_CHANNELS; k++) {
            mc__chan_t *c = &d->ch[(start + k) % MC__DUMMY_CHANNELS];
            if (pthread_mutex_trylock(&c->mu) != 0)
                continue;
            if (pass == 0 && c->fd < 0) {
                pthread_mutex_unlock(&c->mu);
                continue;
            }
            return c;
        }
    pthread_mutex_lock(&d->ch[start % MC__DUMMY_CHANNELS].mu);
    return &d->ch[start % MC__DUMMY_CHANNELS];
}

static void mc__chan_put(mc__chan_t *c) {
    pthread_mutex_unlock(&c->mu);
}

static void mc__chan_init(mc__dummy_t *d, mc__chan_t *c) {
    memset(c, 0, sizeof(*c));
    pthread_mutex_init(&c->mu, NULL);
    mc__buf_init(&c->out);
    c->fd = -1;
    c->path = d->path;
    c->timeout_ms = d->timeout_ms;
    c->pool = d->pool;
    c->seen_gen = mc__shm_pool_free_gen(d->pool);
}

static void mc__chan_fini(mc__chan_t *c) {
    mc__dummy_drop(c);
    mc__free(c->maps);
    c->maps = NULL;
    mc__buf_free(&c->out);
    pthread_mutex_destroy(&c->mu);
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

int mc__dummy_attach(mc_store_t *s, const mc_store_dummy_config_t *cfg) {
    mc__dummy_t *d = NULL;
    char host[MC_STORE_STR_MAX];
    uint16_t port = 0;
    const char *addr = cfg->server_address[0] ? cfg->server_address : MC__DUMMY_DEFAULT_ADDR;
    int rc;
    if (mc__split_host_port(addr, host, sizeof(host), &port) != 0 || port == 0) {
        MC_ERROR("store: setup_dummy: '%s' is no host:port of a mooncake_client", addr);
        return MC_ERR_INVALID_PARAMS;
    }
    d = mc__calloc(1, sizeof(*d));
    if (!d)
        return MC_ERR_INTERNAL_ERROR;
    d->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : MC__DUMMY_TIMEOUT_MS;
    mc__np_socket_path(port, d->path, sizeof(d->path));
    d->pool = cfg->pool;
    if (!d->pool) {
        rc = mc_shm_pool_create(&d->pool);
        if (rc != 0)
            goto fail;
        d->own_pool = 1;
    }
    for (int i = 0; i < MC__DUMMY_CHANNELS; i++)
        mc__chan_init(d, &d->ch[i]);
    d->ch[0].path = d->path;
    rc = mc__dummy_dial(&d->ch[0], s->hostname, sizeof(s->hostname));
    if (rc != 0) {
        MC_ERROR("store: setup_dummy: no storage node answers at %s (start mooncake_client "
                 "--port=%u on this host)",
                 d->path, (unsigned)port);
        goto fail;
    }
    if (cfg->local_buffer_size > 0) {
        d->local = mc_shm_pool_alloc(d->pool, (size_t)cfg->local_buffer_size);
        if (!d->local) {
            rc = MC_ERR_NO_AVAILABLE_HANDLE;
            goto fail;
        }
        d->local_len = (size_t)cfg->local_buffer_size;
        mc__staging_fini(&s->staging);
        rc = mc__staging_init(&s->staging, d->local, d->local_len);
        if (rc != 0)
            goto fail;
    }
    s->dummy = d;
    return 0;
fail:
    for (int i = 0; d->pool && i < MC__DUMMY_CHANNELS; i++)
        mc__chan_fini(&d->ch[i]);
    if (d->local) {
        /* the staging area may already sit on it: back to none */
        mc__staging_fini(&s->staging);
        mc__staging_init(&s->staging, NULL, 0);
        mc_shm_pool_free(d->pool, d->local);
    }
    if (d->own_pool)
        mc_shm_pool_destroy(d->pool);
    mc__free(d);
    return rc;
}

static void mc__dummy_disconnect(mc_store_t *s) {
    mc__dummy_t *d = s ? s->dummy : NULL;
    if (!d)
        return;
    for (int i = 0; i < MC__DUMMY_CHANNELS; i++) {
        pthread_mutex_lock(&d->ch[i].mu);
        mc__dummy_drop(&d->ch[i]);
        pthread_mutex_unlock(&d->ch[i].mu);
    }
}

static void mc__dummy_release(mc_store_t *s) {
    mc__dummy_t *d = s ? s->dummy : NULL;
    if (!d)
        return;
    s->dummy = NULL;
    for (int i = 0; i < MC__DUMMY_CHANNELS; i++)
        mc__chan_fini(&d->ch[i]);
    if (d->local)
        mc_shm_pool_free(d->pool, d->local);
    if (d->own_pool)
        mc_shm_pool_destroy(d->pool);
    mc__free(d);
}

static void mc__dummy_forget(mc_store_t *s) {
    mc__dummy_t *d = s ? s->dummy : NULL;
    if (!d)
        return;
    s->dummy = NULL;
    for (int i = 0; i < MC__DUMMY_CHANNELS; i++) {
        if (d->ch[i].fd >= 0)
            close(d->ch[i].fd);
        mc__free(d->ch[i].maps);
        mc__buf_free(&d->ch[i].out);
    }
    if (d->own_pool)
        mc_shm_pool_destroy(d->pool);
    mc__free(d);
}

/* ---- data calls ----------------------------------------------------------------------------- */

/* Where the bytes of a call that are not in pool blocks go on the way: one block of the local
 * buffer, or a block taken for this call. */
typedef struct mc__bounce {
    uint8_t *mem;
    size_t len;
    int staged;
} mc__bounce_t;

static int mc__bounce_get(mc_store_t *s, size_t len, mc__bounce_t *b) {
    memset(b, 0, sizeof(*b));
    if (len == 0)
        return 0;
    b->len = len;
    b->mem = mc__staging_try_alloc(&s->staging, len);
    if (b->mem) {
        b->staged = 1;
        return 0;
    }
    b->mem = mc_shm_pool_alloc(s->dummy->pool, len);
    return b->mem ? 0 : MC_ERR_NO_AVAILABLE_HANDLE;
}

static void mc__bounce_put(mc_store_t *s, mc__bounce_t *b) {
    if (!b->mem)
        return;
    if (b->staged)
        mc__staging_free(&s->staging, b->mem, b->len);
    else
        mc_shm_pool_free(s->dummy->pool, b->mem);
    b->mem = NULL;
}

/* Builds the wire items of a data call: every part named by (handle, off); parts outside the pool
 * go through bounce (filled from them for a write). */
static int mc__dummy_items(mc_store_t *s, mc__chan_t *d, int write, const mc_store_item_t *items,
                           size_t n, mc__np_item_t *wire, mc__np_part_t *parts,
                           mc__bounce_t *bounce) {
    size_t need = 0, at = 0, k = 0;
    int rc;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < items[i].iovcnt; j++)
            if (!mc_shm_pool_contains(d->pool, items[i].iov[j].base, items[i].iov[j].len))
                need += items[i].iov[j].len;
    rc = mc__bounce_get(s, need, bounce);
    if (rc != 0)
        return rc;
    for (size_t i = 0; i < n; i++) {
        wire[i].key = items[i].key;
        wire[i].parts = &parts[k];
        wire[i].nparts = (uint32_t)items[i].iovcnt;
        for (size_t j = 0; j < items[i].iovcnt; j++, k++) {
            const mc_store_iov_t *v = &items[i].iov[j];
            const void *p = v->base;
            if (!mc_shm_pool_contains(d->pool, v->base, v->len)) {
                p = bounce->mem + at;
                if (write && v->len)
                    memcpy(bounce->mem + at, v->base, v->len);
                at += v->len;
            }
            parts[k].len = v->len;
            if (v->len == 0)
                continue; /* names no memory: handle 0 */
            rc = mc__dummy_handle(d, p, v->len, &parts[k].handle, &parts[k].off);
            if (rc != 0)
                return rc;
        }
    }
    return 0;
}

/* Copies what a read put into bounce out to the caller's parts outside the pool. */
static void mc__dummy_copy_out(mc_store_t *s, const mc_store_item_t *items, size_t n,
                               const int64_t *results, const mc__bounce_t *bounce) {
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t left = results[i] > 0 ? results[i] : 0;
        for (size_t j = 0; j < items[i].iovcnt; j++) {
            const mc_store_iov_t *v = &items[i].iov[j];
            size_t m;
            if (mc_shm_pool_contains(s->dummy->pool, v->base, v->len)) {
                left -= left > (int64_t)v->len ? (int64_t)v->len : left;
                continue;
            }
            m = left > (int64_t)v->len ? v->len : (size_t)left;
            if (m)
                memcpy(v->base, bounce->mem + at, m);
            left -= (int64_t)m;
            at += v->len;
        }
    }
}

/* 0 for an item the daemon can be asked about, else its code (a bad key, a part without memory). */
static int mc__dummy_check_item(const mc_store_item_t *it) {
    int rc = mc__store_check_key(it->key);
    if (rc == 0 && (it->iovcnt > MC_NP_MAX_PARTS || (it->iovcnt && !it->iov)))
        rc = MC_ERR_INVALID_PARAMS;
    for (size_t j = 0; rc == 0 && j < it->iovcnt; j++)
        if (!it->iov[j].base && it->iov[j].len)
            rc = MC_ERR_INVALID_PARAMS;
    return rc;
}

/* One round trip for n valid items: PUT, UPSERT or GET; per-item results into res. */
static int mc__dummy_wire(mc_store_t *s, int type, const mc_store_item_t *items, size_t n,
                          const mc_replicate_config_t *rc, int64_t *res) {
    mc__chan_t *d;
    mc__np_item_t *wire = NULL;
    mc__np_part_t *parts = NULL;
    mc__np_reply_t reply;
    mc__bounce_t bounce;
    size_t nparts = 0;
    int code;
    memset(&bounce, 0, sizeof(bounce));
    memset(&reply, 0, sizeof(reply));
    for (size_t i = 0; i < n; i++)
        nparts += items[i].iovcnt;
    wire = mc__calloc(n ? n : 1, sizeof(*wire));
    parts = mc__calloc(nparts ? nparts : 1, sizeof(*parts));
    if (!wire || !parts) {
        code = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    d = mc__chan_get(s->dummy);
    code = mc__dummy_ready(d);
    if (code == 0)
        code = mc__dummy_items(s, d, type != MC_NP_GET, items, n, wire, parts, &bounce);
    if (code == 0) {
        mc__buf_reset(&d->out);
        code = mc__np_encode_items(&d->out, (uint8_t)type, ++d->next_id, rc, wire, (uint32_t)n);
    }
    if (code == 0)
        code = mc__dummy_roundtrip(d, -1, &reply);
    mc__chan_put(d);
    if (code == 0 && reply.n != n && reply.rc == 0)
        code = MC_ERR_INTERNAL_ERROR;
    if (code == 0)
        code = (int)reply.rc;
    for (size_t i = 0; i < n; i++)
        res[i] = i < reply.n ? reply.results[i] : (code != 0 ? code : MC_ERR_INTERNAL_ERROR);
    if (type == MC_NP_GET && bounce.mem)
        mc__dummy_copy_out(s, items, n, res, &bounce);
out:
    mc__bounce_put(s, &bounce);
    mc__np_reply_free(&reply);
    mc__free(parts);
    mc__free(wire);
    return code;
}

/* A data call of n items: the bad ones get their code here, the rest go to the daemon. Per-item
 * results in r64 (GET) or r32; returns 0 when every item succeeded, else the first error. */
static int mc__dummy_data(mc_store_t *s, int type, const mc_store_item_t *items, size_t n,
                          const mc_replicate_config_t *rc, int64_t *r64, int *r32) {
    mc_store_item_t *sub = NULL;
    int64_t *res = NULL, *all = NULL;
    size_t m = 0;
    int code = 0, first = 0;
    if (n > MC_NP_MAX_ITEMS) {
        code = MC_ERR_INVALID_PARAMS;
        goto out;
    }
    sub = mc__calloc(n, sizeof(*sub));
    res = mc__calloc(n, sizeof(*res));
    all = mc__calloc(n, sizeof(*all));
    if (!sub || !res || !all) {
        code = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        all[i] = mc__dummy_check_item(&items[i]);
        if (all[i] == 0)
            sub[m++] = items[i];
    }
    if (m)
        code = mc__dummy_wire(s, type, sub, m, rc, res);
    for (size_t i = 0, j = 0; i < n; i++) {
        if (all[i] == 0)
            all[i] = res[j++];
        if (first == 0 && all[i] < 0)
            first = (int)all[i];
    }
out:
    for (size_t i = 0; i < n; i++) {
        int64_t v = all ? all[i] : code;
        if (r64)
            r64[i] = v;
        if (r32)
            r32[i] = (int)v;
    }
    mc__free(all);
    mc__free(res);
    mc__free(sub);
    if (code == MC_ERR_RPC_FAIL || code == MC_ERR_INTERNAL_ERROR || first == 0)
        return code != 0 ? code : first;
    return first;
}

/* A batch data call held open (reads fill r64, writes r32): a store that cannot be entered
 * gives its code to every item. */
static int mc__dummy_data_held(mc_store_t *s, int type, const mc_store_item_t *items, size_t n,
                               const mc_replicate_config_t *rc, int64_t *r64, int *r32) {
    int code = mc__store_enter_any(s);
    if (code != 0) {
        for (size_t i = 0; i < n; i++) {
            if (r64)
                r64[i] = code;
            if (r32)
                r32[i] = code;
        }
        return code;
    }
    if (n > 0 && !items)
        code = MC_ERR_INVALID_PARAMS;
    else if (n > 0)
        code = mc__dummy_data(s, type, items, n, rc, r64, r32);
    mc__store_leave(s);
    return code;
}

static int mc__dummy_put(mc_store_t *s, int upsert, const mc_store_item_t *items, size_t n,
                         const mc_replicate_config_t *rc, int *results) {
    return mc__dummy_data_held(s, upsert ? MC_NP_UPSERT : MC_NP_PUT, items, n, rc, NULL, results);
}

static int mc__dummy_get(mc_store_t *s, const mc_store_item_t *items, size_t n, int64_t *results) {
    return mc__dummy_data_held(s, MC_NP_GET, items, n, NULL, results, NULL);
}

/* The single-key forms, on top of the batch ones. */
static int mc__dummy_put1(mc_store_t *s, int upsert, const char *key, const mc_store_iov_t *parts,
                          size_t nparts, const mc_replicate_config_t *rc) {
    mc_store_item_t it = {key, parts, nparts};
    int r = 0;
    int rc2 = mc__dummy_put(s, upsert, &it, 1, rc, &r);
    return rc2 != 0 ? rc2 : r;
}

static int64_t mc__dummy_get1(mc_store_t *s, const char *key, const mc_store_iov_t *iov,
                              size_t iovcnt) {
    mc_store_item_t it = {key, iov, iovcnt};
    int64_t r = 0;
    int rc = mc__dummy_get(s, &it, 1, &r);
    return rc != 0 && r >= 0 ? rc : r;
}

/* A whole object into memory of our own: the local buffer when it fits (the bytes move once),
 * else the heap. The size is asked first; an object that changed size meanwhile is read again. */
static int mc__dummy_get_buffer(mc_store_t *s, const char *key, mc_store_buffer_t **out) {
    mc_store_buffer_t *b = NULL;
    int rc = MC_ERR_INTERNAL_ERROR;
    *out = NULL;
    for (int tries = 0; tries < 4; tries++) {
        int64_t size = mc__dummy_scalar(s, MC_NP_SIZE, key, 0);
        mc_store_iov_t iov;
        int64_t got;
        if (size < 0)
            return (int)size;
        b = mc__calloc(1, sizeof(*b));
        if (!b)
            return MC_ERR_INTERNAL_ERROR;
        b->store = s;
        b->size = (size_t)size;
        b->data = size ? mc__staging_try_alloc(&s->staging, (size_t)size) : NULL;
        b->staged = b->data != NULL;
        if (!b->data)
            b->data = mc__malloc(size ? (size_t)size : 1);
        if (!b->data) {
            mc__free(b);
            return MC_ERR_INTERNAL_ERROR;
        }
        iov.base = b->data;
        iov.len = b->size;
        got = mc__dummy_get1(s, key, &iov, 1);
        if (got == size) {
            *out = b;
            return 0;
        }
        mc_store_buffer_free(b);
        b = NULL;
        rc = got < 0 ? (int)got : MC_ERR_BUFFER_OVERFLOW;
        if (got < 0 && got != MC_ERR_BUFFER_OVERFLOW)
            return rc;
    }
    return rc;
}

static int mc__dummy_batch_get_buffer(mc_store_t *s, const char *const *keys, size_t n,
                                      mc_store_buffer_t **outs, int *results) {
    int first = 0;
    if (n > 0 && (!keys || !outs || !results))
        return MC_ERR_INVALID_PARAMS;
    for (size_t i = 0; i < n; i++) {
        outs[i] = NULL;
        results[i] = mc__dummy_get_buffer(s, keys[i], &outs[i]);
        if (first == 0 && results[i] != 0)
            first = results[i];
    }
    return first;
}

/* Byte ranges: each object is read whole into memory of ours (the node has no ranged read to
 * offer), then its ranges are copied out. */
static int mc__dummy_get_ranges(mc_store_t *s, mc_store_range_read_t *reads, size_t n) {
    if (n > 0 && !reads)
        return MC_ERR_INVALID_PARAMS;
    for (size_t i = 0; i < n; i++) {
        mc_store_buffer_t *b = NULL;
        int rc = reads[i].n && !reads[i].ranges ? MC_ERR_INVALID_PARAMS
                                                : mc__dummy_get_buffer(s, reads[i].key, &b);
        if (rc == MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS)
            return rc;
        for (size_t j = 0; reads[i].ranges && j < reads[i].n; j++) {
            mc_store_range_t *r = &reads[i].ranges[j];
            size_t size = b ? mc_store_buffer_size(b) : 0;
            if (rc != 0)
                r->result = rc;
            else if (r->src_off > size || r->len > size - r->src_off || (!r->dst && r->len) ||
                     (r->len && mc__store_registered_overrun(s, r->dst, (size_t)r->len)))
                r->result = MC_ERR_INVALID_PARAMS;
            else {
                if (r->len)
                    memcpy(r->dst, (const uint8_t *)mc_store_buffer_data(b) + r->src_off,
                           (size_t)r->len);
                r->result = (int64_t)r->len;
            }
        }
        mc_store_buffer_free(b);
    }
    return 0;
}

/* ---- metadata calls ------------------------------------------------------------------------- */

static int mc__dummy_keys(mc_store_t *s, int type, const char *const *keys, size_t n, int force,
                          int *results) {
    mc__dummy_t *d;
    mc__np_reply_t reply;
    const char **sub = NULL;
    size_t m = 0;
    int first = 0;
    int code = mc__store_enter_any(s);
    if (code != 0) {
        for (size_t i = 0; results && i < n; i++)
            results[i] = code;
        return code;
    }
    d = s->dummy;
    memset(&reply, 0, sizeof(reply));
    if (n > 0 && (!keys || !results)) {
        code = MC_ERR_INVALID_PARAMS;
        goto out;
    }
    if (n > MC_NP_MAX_ITEMS) {
        for (size_t i = 0; i < n; i++)
            results[i] = MC_ERR_INVALID_PARAMS;
        code = MC_ERR_INVALID_PARAMS;
        goto out;
    }
    if (n == 0)
        goto out;
    sub = mc__calloc(n, sizeof(*sub));
    if (!sub) {
        code = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        results[i] = mc__store_check_key(keys[i]);
        if (results[i] == 0)
            sub[m++] = keys[i];
    }
    if (m) {
        mc__chan_t *ch = mc__chan_get(d);
        code = mc__dummy_ready(ch);
        if (code == 0) {
            mc__buf_reset(&ch->out);
            code = mc__np_encode_keys(&ch->out, (uint8_t)type, ++ch->next_id, force ? 1 : 0, sub,
                                      (uint32_t)m);
        }
        if (code == 0)
            code = mc__dummy_roundtrip(ch, -1, &reply);
        mc__chan_put(ch);
        if (code == 0)
            code = (int)reply.rc;
    }
    for (size_t i = 0, j = 0; i < n; i++) {
        if (results[i] == 0) {
            results[i] =
                j < reply.n ? (int)reply.results[j] : (code ? code : MC_ERR_INTERNAL_ERROR);
            j++;
        }
        if (first == 0 && results[i] < 0)
            first = results[i];
    }
    if (code == 0)
        code = first;
out:
    mc__free(sub);
    mc__np_reply_free(&reply);
    mc__store_leave(s);
    return code;
}

static int64_t mc__dummy_scalar(mc_store_t *s, int type, const char *text, int force) {
    mc__dummy_t *d;
    mc__np_request_t r;
    mc__np_reply_t reply;
    int64_t code = mc__store_enter_any(s);
    if (code != 0)
        return code;
    d = s->dummy;
    memset(&reply, 0, sizeof(reply));
    if (type == MC_NP_SIZE && (code = mc__store_check_key(text)) != 0)
        goto out;
    if (type == MC_NP_REMOVE_REGEX && (!text || !*text || strlen(text) > MC_STORE_MAX_KEY_LEN)) {
        code = MC_ERR_INVALID_PARAMS;
        goto out;
    }
    memset(&r, 0, sizeof(r));
    r.text = text;
    r.force = force ? 1 : 0;
    mc__chan_t *ch = mc__chan_get(d);
    code = mc__dummy_ready(ch);
    if (code == 0) {
        mc__buf_reset(&ch->out);
        code = mc__np_encode_simple(&ch->out, (uint8_t)type, ++ch->next_id, &r);
    }
    if (code == 0)
        code = mc__dummy_roundtrip(ch, -1, &reply);
    mc__chan_put(ch);
    if (code == 0)
        code = reply.rc;
out:
    mc__np_reply_free(&reply);
    mc__store_leave(s);
    return code;
}

static int mc__dummy_health(mc_store_t *s) {
    int64_t rc = mc__dummy_scalar(s, MC_NP_HEALTH, NULL, 0);
    if (rc == MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS)
        return 1;
    if (rc < 0)
        return 2; /* the node is gone: for us that is the master out of reach */
    return (int)rc;
}

/* The registered range, kept where a normal client keeps its own (s->regs), so that the checks
 * against registered buffers (a range that starts in one but runs past it) hold for dummies too. */
static int mc__dummy_remember(mc_store_t *s, void *addr, size_t len) {
    int rc = 0;
    size_t i;
    pthread_rwlock_wrlock(&s->reg_lock);
    for (i = 0; i < s->nregs && s->regs[i].base != addr; i++)
        ;
    if (i == s->nregs) {
        mc_store_iov_t *v = mc__array_grow(s->regs, s->nregs, &s->regs_cap, sizeof(*v), 8);
        if (!v)
            rc = MC_ERR_INTERNAL_ERROR;
        else
            s->regs = v;
    }
    if (rc == 0) {
        s->regs[i] = (mc_store_iov_t){addr, len};
        if (i == s->nregs)
            s->nregs++;
    }
    pthread_rwlock_unlock(&s->reg_lock);
    return rc;
}

/* Registering is mapping at the daemon now rather than at the first call; only pool memory can
 * be shared with it. */
static int mc__dummy_register(mc_store_t *s, void *addr, size_t len) {
    mc__dummy_t *d;
    uint32_t handle = 0;
    uint64_t off = 0;
    int rc = mc__store_enter_any(s);
    if (rc != 0)
        return rc;
    d = s->dummy;
    if (!addr || len == 0 || !mc_shm_pool_contains(d->pool, addr, len)) {
        MC_ERROR("store: a dummy client registers only memory from its shared memory pool "
                 "(MooncakeHostMemAllocator / alloc_from_mem_pool)");
        rc = MC_ERR_INVALID_PARAMS;
    } else {
        mc__chan_t *ch = mc__chan_get(d);
        rc = mc__dummy_ready(ch);
        if (rc == 0)
            rc = mc__dummy_handle(ch, addr, len, &handle, &off);
        mc__chan_put(ch);
    }
    if (rc == 0)
        rc = mc__dummy_remember(s, addr, len);
    mc__store_leave(s);
    return rc;
}

static int mc__dummy_unregister(mc_store_t *s, void *addr) {
    int rc = mc__store_enter_any(s);
    if (rc != 0)
        return rc;
    /* The mapping stays until the block is freed: a later call reuses it. */
    rc = MC_ERR_INVALID_PARAMS;
    pthread_rwlock_wrlock(&s->reg_lock);
    for (size_t i = 0; i < s->nregs; i++)
        if (s->regs[i].base == addr) {
            s->regs[i] = s->regs[--s->nregs];
            rc = 0;
            break;
        }
    pthread_rwlock_unlock(&s->reg_lock);
    mc__store_leave(s);
    return rc;
}

/* 1 when [p, p+len) lies inside one range this dummy registered (mc__dummy_remember). */
static int mc__dummy_is_registered(mc_store_t *s, const void *p, size_t len) {
    uintptr_t a = (uintptr_t)p;
    int found = 0;
    pthread_rwlock_rdlock(&s->reg_lock);
    for (size_t i = 0; i < s->nregs && !found; i++) {
        uintptr_t b = (uintptr_t)s->regs[i].base;
        found = a >= b && a + len <= b + s->regs[i].len;
    }
    pthread_rwlock_unlock(&s->reg_lock);
    return found;
}

/* ---- the backend row ------------------------------------------------------------------------ */

/* The entries whose public form differs from the node's calls: single keys on top of the batch
 * round trips, and what a dummy does not offer. */

static int mc__dummy_get_buffer_entry(mc_store_t *s, const char *key, mc_store_buffer_t **out) {
    return out ? mc__dummy_get_buffer(s, key, out) : MC_ERR_INVALID_PARAMS;
}

static int mc__dummy_batch_get_size(mc_store_t *s, const char *const *keys, size_t n,
                                    int64_t *sizes) {
    (void)s, (void)keys, (void)n, (void)sizes;
    /* quietly: the bindings try it first and then read the other way */
    return MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS;
}

static int mc__dummy_replica_desc(mc_store_t *s, const char *const *keys, size_t n,
                                  mc_store_replica_list_t *out) {
    (void)s, (void)keys, (void)n, (void)out;
    return mc__dummy_unsupported("batch_get_replica_desc");
}

/* No replica cache and no engine of its own: the quiet answers of a store without them. */
static size_t mc__dummy_no_cache(mc_store_t *s) {
    (void)s;
    return 0;
}

static int mc__dummy_no_direct_memory(mc_store_t *s) {
    (void)s;
    return 0;
}

static int mc__dummy_key1(mc_store_t *s, int type, const char *key, int force) {
    int r = 0;
    (void)mc__dummy_keys(s, type, &key, 1, force, &r);
    return r;
}

static int mc__dummy_is_exist(mc_store_t *s, const char *key) {
    return mc__dummy_key1(s, MC_NP_EXIST, key, 0);
}

static int mc__dummy_batch_is_exist(mc_store_t *s, const char *const *keys, size_t n,
                                    int *results) {
    return mc__dummy_keys(s, MC_NP_EXIST, keys, n, 0, results);
}

static int64_t mc__dummy_get_size(mc_store_t *s, const char *key) {
    return mc__dummy_scalar(s, MC_NP_SIZE, key, 0);
}

static int mc__dummy_remove(mc_store_t *s, const char *key, int force) {
    return mc__dummy_key1(s, MC_NP_REMOVE, key, force);
}

static int mc__dummy_batch_remove(mc_store_t *s, const char *const *keys, size_t n, int force,
                                  int *results) {
    return mc__dummy_keys(s, MC_NP_REMOVE, keys, n, force, results);
}

static int mc__dummy_replica_clear(mc_store_t *s, const char *const *keys, size_t n,
                                   const char *segment, int *codes) {
    (void)s, (void)keys, (void)n, (void)segment, (void)codes;
    return mc__dummy_unsupported("batch_replica_clear");
}

static int64_t mc__dummy_remove_all(mc_store_t *s, int force) {
    return mc__dummy_scalar(s, MC_NP_REMOVE_ALL, NULL, force);
}

static int64_t mc__dummy_remove_by_regex(mc_store_t *s, const char *regex, int force) {
    return mc__dummy_scalar(s, MC_NP_REMOVE_REGEX, regex, force);
}

const mc__store_backend_t mc__store_dummy = {
    .name = "dummy",
    .table_only = 1,
    .put_parts = mc__dummy_put1,
    .batch_put = mc__dummy_put,
    .get_into_parts = mc__dummy_get1,
    .batch_get_into = mc__dummy_get,
    .get_buffer = mc__dummy_get_buffer_entry,
    .batch_get_buffer = mc__dummy_batch_get_buffer,
    .batch_get_size = mc__dummy_batch_get_size,
    .batch_get_ranges = mc__dummy_get_ranges,
    .batch_get_replica_desc = mc__dummy_replica_desc,
    .replica_cache_capacity = mc__dummy_no_cache,
    .moves_any_memory = mc__dummy_no_direct_memory,
    .is_exist = mc__dummy_is_exist,
    .batch_is_exist = mc__dummy_batch_is_exist,
    .get_size = mc__dummy_get_size,
    .remove = mc__dummy_remove,
    .batch_remove = mc__dummy_batch_remove,
    .batch_replica_clear = mc__dummy_replica_clear,
    .remove_all = mc__dummy_remove_all,
    .remove_by_regex = mc__dummy_remove_by_regex,
    .register_buffer = mc__dummy_register,
    .unregister_buffer = mc__dummy_unregister,
    .is_registered = mc__dummy_is_registered,
    .health_check = mc__dummy_health,
    .disconnect = mc__dummy_disconnect,
    .release = mc__dummy_release,
    .forget = mc__dummy_forget,
};
