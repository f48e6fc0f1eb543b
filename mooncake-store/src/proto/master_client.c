/* Blocking master RPC client: one connection, calls serialized, transparent reconnect + remount. */
#include "proto/master_client.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/auth.h"
#include "mooncake/common/config.h"
#include "mooncake/common/etcd.h"
#include "mooncake/common/log.h"
#include "mooncake/common/random.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"
#include "proto/master_view.h"

/* Connection attempts refused in a row before a call gives up. A refusal is an immediate answer
 * that nothing listens: waiting out the whole deadline would only stall the caller (and every
 * call queued behind it on this client). A master that is restarting on the port gets a few
 * tries 50 ms apart; the next call tries again. */
#define MC__REFUSED_TRIES 4

/* The least time one network step (an etcd look-up of the leader, a TCP connect, the handshake,
 * one remount, one request and its reply) gets, however much of the call's deadline earlier steps
 * used up: on a loaded machine a reconnect can eat the whole deadline, and the step after it must
 * still be able to succeed rather than fail "within 1 ms". A call may so overrun its deadline by
 * one step (never more than the client's own timeout, so a short timeout stays short). */
#define MC__STEP_MIN_MS 2000

typedef struct mc__mount {
    char name[MC_MP_MAX_SEGMENT_NAME + 1];
    uint64_t base, size, epoch;
} mc__mount_t;

/* Most replies (a put's commit, a look-up of a few keys) fit this with their header. */
#define MC__MC_RBUF 4096

struct mc__master_client {
    pthread_mutex_t mu;
    char host[256];
    uint16_t port;
    /* An HA cluster ("etcd://..."): the leader's address is read from the master view before
     * every connect, so a reconnect after a failover finds the new leader. */
    char *view_endpoints; /* NULL: host and port name the one master */
    char view_cluster[MC_MASTER_VIEW_MAX_CLUSTER_ID + 1];
    int fd;
    /* over fd: a reply's header and a small body come in with one receive */
    mc__rbuf_t rb;
    uint8_t rb_mem[MC__MC_RBUF];
    int timeout_ms;
    uint64_t next_id;
    uint8_t id[MC_MP_CLIENT_ID_LEN];
    mc_buf_t out; /* request being sent */
    uint8_t *in;  /* reply body */
    size_t in_cap;
    mc__mount_t *mounts; /* what to mount again after a reconnect */
    size_t n_mounts, cap_mounts;
    mc__remount_fn remount; /* starts a new incarnation of a mount the master forgot */
    void *remount_ctx;
    mc_auth_t auth; /* the cluster secret, proved on every new connection */
    /* the master's segment view version as the last heartbeat reply gave it: it changes when a
     * segment is mounted or dropped (mc__master_client_view_version) */
    _Atomic uint64_t view;
    /* callers waiting for mu: a background caller lets them go first (mc__master_client_wanted) */
    _Atomic int waiting;
};

/* Takes the client's lock, counted while it waits (mc__master_client_wanted). */
static void mc__mc_lock(mc__master_client_t *c) {
    if (pthread_mutex_trylock(&c->mu) == 0)
        return;
    atomic_fetch_add_explicit(&c->waiting, 1, memory_order_relaxed);
    pthread_mutex_lock(&c->mu);
    atomic_fetch_sub_explicit(&c->waiting, 1, memory_order_relaxed);
}

int mc__master_client_wanted(mc__master_client_t *c) {
    return atomic_load_explicit(&c->waiting, memory_order_relaxed) > 0;
}

void mc__uuid_generate(uint8_t id[MC_MP_CLIENT_ID_LEN]) {
    mc__random_fill(id, MC_MP_CLIENT_ID_LEN);
    id[6] = (uint8_t)((id[6] & 0x0f) | 0x40);
    id[8] = (uint8_t)((id[8] & 0x3f) | 0x80);
}

void mc__uuid_format(const uint8_t id[MC_MP_CLIENT_ID_LEN], char out[37]) {
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (size_t i = 0; i < MC_MP_CLIENT_ID_LEN; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            out[o++] = '-';
        out[o++] = hex[id[i] >> 4];
        out[o++] = hex[id[i] & 15];
    }
    out[o] = '\0';
}

static uint64_t mc__mc_deadline(const mc__master_client_t *c) {
    return mc__now_ms() + (uint64_t)(c->timeout_ms > 0 ? c->timeout_ms : 1);
}

/* The deadline of one step of a call whose deadline is deadline (MC__STEP_MIN_MS). */
static uint64_t mc__mc_step_deadline(const mc__master_client_t *c, uint64_t deadline) {
    int least = c->timeout_ms < MC__STEP_MIN_MS ? c->timeout_ms : MC__STEP_MIN_MS;
    uint64_t floor = mc__now_ms() + (uint64_t)(least > 0 ? least : 1);
    return deadline > floor ? deadline : floor;
}

static void mc__mc_disconnect(mc__master_client_t *c) {
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
}

/* How long the wait for the master's reply to a request of n keys spins before it sleeps: the
 * master works through the keys one by one (a few hundred ns to 2 us each, a put's allocation the
 * most) before it answers, so a small batch's reply comes after the base spin; 16 x 64 KiB
 * put_batch went from 1.6-2.1 to 2.2-2.5 GB/s and single 4 KiB puts from 95 to 78 us p50 with
 * 2 us per key on the 2-core VM. A larger batch is answered after a wait long enough to sleep
 * through (the master's 1000-key look-ups take 400-800 us). */
#define MC__MC_SPIN_KEYS_MAX 64u
#define MC__MC_SPIN_NS_PER_KEY 2000u
static uint64_t mc__mc_reply_spin(uint32_t n_keys) {
    uint64_t base = mc__reply_spin_for(0);
    if (base == 0 || n_keys > MC__MC_SPIN_KEYS_MAX)
        return 0;
    return base + (uint64_t)n_keys * MC__MC_SPIN_NS_PER_KEY;
}

/* Sends c->out (one request frame) and reads the matching reply into c->in, the first wait
 * spinning spin_ns (mc__mc_reply_spin). */
static int mc__mc_roundtrip(mc__master_client_t *c, uint64_t deadline, uint64_t spin_ns,
                            mc_frame_header_t *h) {
    uint8_t hdr[MC_FRAME_HEADER_SIZE];
    uint64_t want_id = c->next_id - 1;
    int rc = mc__send_all(c->fd, c->out.data, c->out.len, deadline);
    if (rc)
        goto out;
    for (;;) {
        c->rb.wait_first = 1; /* the request was just sent */
        c->rb.spin_ns = spin_ns;
        rc = mc__rbuf_read(&c->rb, hdr, sizeof(hdr), deadline);
        if (rc)
            goto out;
        if (mc__frame_header_decode(hdr, sizeof(hdr), MC_MP_MAX_BODY, h)) {
            rc = MC_ERR_RPC_FAIL;
            goto out;
        }
        if (h->body_len > c->in_cap) {
            uint8_t *p = mc__realloc(c->in, (size_t)h->body_len);
            if (!p) {
                rc = MC_ERR_MEMORY;
                goto out;
            }
            c->in = p;
            c->in_cap = (size_t)h->body_len;
        }
        rc = h->body_len ? mc__rbuf_read(&c->rb, c->in, (size_t)h->body_len, deadline) : 0;
        if (rc)
            goto out;
        if (h->type == MC_AUTH_FRAME_TYPE && (h->flags & MC_FRAME_F_ERROR)) {
            /* a master with a cluster secret refusing a client without (the right) one */
            char msg[128] = "";
            (void)mc__mp_decode_error(h, c->in, (size_t)h->body_len, msg, sizeof(msg));
            MC_ERROR("the master at %s:%u refused this client: %s", c->host, (unsigned)c->port,
                     msg);
            rc = MC_ERR_ILLEGAL_CLIENT;
            goto out;
        }
        /* A stale reply to a request that timed out earlier is skipped, not misread. */
        if (h->request_id == want_id)
            break;
    }
out:
    return rc;
}

static int mc__mc_connect_locked(mc__master_client_t *c, uint64_t deadline);

/* Encodes r, sends it and waits for the reply; reconnects once if the connection is broken. */
static int mc__mc_call(mc__master_client_t *c, mc__mp_request_t *r, mc_frame_header_t *h) {
    uint64_t deadline = mc__mc_deadline(c);
    int rc = 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        if (c->fd < 0) {
            rc = mc__mc_connect_locked(c, deadline);
            if (rc)
                goto out;
        }
        mc__buf_reset(&c->out);
        memcpy(r->client_id, c->id, MC_MP_CLIENT_ID_LEN);
        r->request_id = c->next_id++;
        rc = mc__mp_encode_request(&c->out, r);
        if (rc)
            goto out;
        rc =
            mc__mc_roundtrip(c, mc__mc_step_deadline(c, deadline), mc__mc_reply_spin(r->n_keys), h);
        if (rc == 0)
            goto out;
        mc__mc_disconnect(c);
        if (rc == MC_ERR_MEMORY || rc == MC_ERR_ILLEGAL_CLIENT)
            goto out; /* retrying cannot help */
        if (mc__now_ms() >= deadline)
            break;
    }
    rc = MC_ERR_RPC_FAIL;
out:
    return rc;
}

static void mc__mc_fill_request(mc__mp_request_t *r, const mc__mount_t *m, int mount,
                                uint8_t flags) {
    memset(r, 0, sizeof(*r));
    r->type = mount ? MC_MP_MOUNT_SEGMENT : MC_MP_UNMOUNT_SEGMENT;
    r->segment_name.p = (const uint8_t *)m->name;
    r->segment_name.len = (uint32_t)strlen(m->name);
    r->base = m->base;
    r->size = m->size;
    r->epoch = m->epoch;
    r->mount_flags = flags;
}

static int mc__mc_mount_rpc(mc__master_client_t *c, const mc__mount_t *m, int mount) {
    mc__mp_request_t r;
    mc_frame_header_t h;
    int rc = 0;
    mc__mc_fill_request(&r, m, mount, 0);
    rc = mc__mc_call(c, &r, &h);
    if (rc == 0)
        rc = mc__mp_decode_empty_reply(&h, c->in, (size_t)h.body_len);
    return rc;
}

/* One MOUNT over the connection as it is (no reconnect, so the reconnect path can use it).
 * Returns the master's answer, or MC_ERR_RPC_FAIL with the connection closed. */
static int mc__mc_mount_raw(mc__master_client_t *c, uint64_t deadline, const mc__mount_t *m,
                            uint8_t flags) {
    mc__mp_request_t r;
    mc_frame_header_t h;
    int rc;
    mc__mc_fill_request(&r, m, 1, flags);
    memcpy(r.client_id, c->id, MC_MP_CLIENT_ID_LEN);
    r.request_id = c->next_id++;
    mc__buf_reset(&c->out);
    rc = mc__mp_encode_request(&c->out, &r);
    if (rc == 0)
        rc = mc__mc_roundtrip(c, mc__mc_step_deadline(c, deadline), mc__reply_spin_for(0), &h);
    if (rc) {
        mc__mc_disconnect(c);
        return MC_ERR_RPC_FAIL;
    }
    return mc__mp_decode_empty_reply(&h, c->in, (size_t)h.body_len);
}

/* Makes the master hold every mount of ours again. A mount it still holds (this incarnation)
 * is left as it is. One it forgot (it restarted, or expired us) is never mounted again as it
 * was: writers and readers that were handed placements in it may still be stalled somewhere
 * with them, so the owner first starts a new incarnation (the remount hook: new memory, new
 * epoch, the old one's requests refused by its engine) and that one is mounted. A mount whose
 * new incarnation cannot be made is dropped. */
static int mc__mc_remount_all(mc__master_client_t *c, uint64_t deadline) {
    size_t i = 0;
    while (i < c->n_mounts) {
        mc__mount_t *m = &c->mounts[i];
        int rc = mc__mc_mount_raw(c, deadline, m, MC_MP_MOUNT_F_CHECK);
        if (rc == MC_ERR_RPC_FAIL)
            return rc;
        if (rc == 0) {
            i++;
            continue;
        }
        if (c->remount) {
            rc = c->remount(c->remount_ctx, m->name, m->size, &m->base, &m->epoch);
            if (rc) {
                MC_WARN("segment %s: no new incarnation (%s); not mounted again", m->name,
                        mc_store_strerror(rc));
                c->mounts[i] = c->mounts[--c->n_mounts];
                continue;
            }
        }
        rc = mc__mc_mount_raw(c, deadline, m, 0);
        if (rc == MC_ERR_RPC_FAIL)
            return rc;
        if (rc)
            MC_WARN("remount of segment %s failed: %s", m->name, mc_store_strerror(rc));
        i++;
    }
    return 0;
}

/* HA: reads the leader's address into host and port. 0, or a code when no leader is known
 * now (none elected yet, etcd unreachable, a value that is no address). */
static int mc__mc_resolve_leader(mc__master_client_t *c, uint64_t deadline) {
    char addr[MC_MP_MAX_SEGMENT_NAME + 1];
    /* all that is left, and never less than one step: the etcd client itself moves on from a
     * stalled member within it */
    int wait = (int)(mc__mc_step_deadline(c, deadline) - mc__now_ms());
    int rc = mc__master_view_get(c->view_endpoints, c->view_cluster, addr, sizeof(addr), wait);
    if (rc)
        return rc;
    if (mc__split_host_port(addr, c->host, sizeof(c->host), &c->port) || c->port == 0) {
        MC_WARN("master view of cluster %s holds \"%s\", not a host:port", c->view_cluster, addr);
        return MC_ERR_INVALID_PARAMS;
    }
    return 0;
}

/* Connects and, since a fresh master knows nothing of us, mounts our segments again. */
static int mc__mc_connect_locked(mc__master_client_t *c, uint64_t deadline) {
    int fd = -1;
    int rc = 0;
    int refused = 0;
    for (;;) {
        if (c->view_endpoints && (rc = mc__mc_resolve_leader(c, deadline)) != 0) {
            /* no leader right now (an election is under way): ask again until the deadline */
            if (mc__now_ms() + 100 >= deadline) {
                MC_WARN("no master leader of cluster %s known in etcd %s before the call's "
                        "deadline: %s",
                        c->view_cluster, c->view_endpoints, mc_store_strerror(rc));
                rc = MC_ERR_RPC_FAIL;
                goto out;
            }
            usleep(100 * 1000);
            continue;
        }
        if ((fd = mc__tcp_connect(c->host, c->port, mc__mc_step_deadline(c, deadline))) >= 0) {
            /* a master that went silent fails the call in seconds (then: reconnect), not at
             * the end of a call's whole timeout with the connection left to hang */
            (void)mc__set_dead_peer_timeouts(fd);
            break;
        }
        /* Other failures (unreachable, slow network) keep trying until the deadline. In an HA
         * cluster a refused connect is the old leader, still in the view until its lease runs
         * out: that also waits for the view to change. */
        refused = errno == ECONNREFUSED && !c->view_endpoints ? refused + 1 : 0;
        if (refused >= MC__REFUSED_TRIES || mc__now_ms() + 50 >= deadline) {
            rc = MC_ERR_RPC_FAIL;
            goto out;
        }
        usleep((c->view_endpoints ? 100 : 50) * 1000);
    }
    if (c->auth.enabled &&
        (rc = mc__auth_client(&c->auth, fd, mc__mc_step_deadline(c, deadline))) != 0) {
        close(fd);
        /* a refusal is an answer (no retry helps); a broken handshake may be a restart */
        MC_ERROR("the master at %s:%u %s", c->host, (unsigned)c->port,
                 rc == MC_ERR_REJECT_HANDSHAKE ? "refused our cluster secret"
                                               : "dropped the connection during the handshake");
        rc = rc == MC_ERR_REJECT_HANDSHAKE ? MC_ERR_ILLEGAL_CLIENT : MC_ERR_RPC_FAIL;
        goto out;
    }
    c->fd = fd;
    mc__rbuf_init(&c->rb, fd, c->rb_mem, sizeof(c->rb_mem));
    rc = mc__mc_remount_all(c, deadline);
out:
    return rc;
}

int mc__master_client_connect(const char *addr, int timeout_ms,
                              const uint8_t client_id[MC_MP_CLIENT_ID_LEN],
                              mc__master_client_t **out) {
    mc_auth_t env;
    int rc = mc__auth_init(&env, NULL, NULL);
    if (rc) {
        *out = NULL;
        return MC_ERR_INVALID_PARAMS;
    }
    return mc__master_client_connect_auth(addr, timeout_ms, client_id, &env, out);
}

int mc__master_client_connect_auth(const char *addr, int timeout_ms,
                                   const uint8_t client_id[MC_MP_CLIENT_ID_LEN],
                                   const mc_auth_t *auth, mc__master_client_t **out) {
    mc__master_client_t *c = NULL;
    int rc = 0;
    *out = NULL;
    if (!addr) {
        rc = MC_ERR_INVALID_PARAMS;
        goto out;
    }
    c = mc__calloc(1, sizeof(*c));
    if (!c) {
        rc = MC_ERR_MEMORY;
        goto out;
    }
    c->fd = -1;
    c->next_id = 1;
    if (auth)
        c->auth = *auth;
    c->timeout_ms = timeout_ms > 0 ? timeout_ms : 5000;
    mc__buf_init(&c->out);
    pthread_mutex_init(&c->mu, NULL);
    if (client_id)
        memcpy(c->id, client_id, MC_MP_CLIENT_ID_LEN);
    else
        mc__uuid_generate(c->id);
    if (mc__master_view_endpoints(addr)) {
        const char *ep = mc__master_view_endpoints(addr);
        mc_etcd_t *probe = NULL;
        /* a malformed endpoint list is the caller's mistake, not a leader to wait for */
        if (mc__etcd_open(ep, 0, &probe) != 0) {
            MC_ERROR("master address %s: bad etcd endpoint list", addr);
            rc = MC_ERR_INVALID_PARAMS;
            goto out;
        }
        mc__etcd_close(probe);
        c->view_endpoints = mc__strdup(ep);
        if (!c->view_endpoints) {
            rc = MC_ERR_MEMORY;
            goto out;
        }
        snprintf(c->view_cluster, sizeof(c->view_cluster), "%s", mc__master_view_cluster_id());
    } else if (mc__split_host_port(addr, c->host, sizeof(c->host), &c->port) || c->port == 0) {
        rc = MC_ERR_INVALID_PARAMS;
        goto out;
    }
    rc = mc__mc_connect_locked(c, mc__mc_deadline(c));
out:
    if (rc && c) {
        mc__master_client_close(c);
        c = NULL;
    }
    *out = c;
    return rc;
}

void mc__master_client_close(mc__master_client_t *c) {
    if (!c)
        return;
    mc__mc_disconnect(c);
    mc__buf_free(&c->out);
    mc__free(c->in);
    mc__free(c->mounts);
    mc__free(c->view_endpoints);
    pthread_mutex_destroy(&c->mu);
    mc__free(c);
}

const uint8_t *mc__master_client_id(const mc__master_client_t *c) {
    return c->id;
}

void mc__master_client_set_timeout(mc__master_client_t *c, int timeout_ms) {
    mc__mc_lock(c);
    c->timeout_ms = timeout_ms > 0 ? timeout_ms : 5000;
    pthread_mutex_unlock(&c->mu);
}

static int mc__mc_fill_mount(mc__mount_t *m, const char *name, uint64_t base, uint64_t size,
                             uint64_t epoch) {
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > MC_MP_MAX_SEGMENT_NAME)
        return MC_ERR_INVALID_PARAMS;
    memcpy(m->name, name, n + 1);
    m->base = base;
    m->size = size;
    m->epoch = epoch;
    return 0;
}

void mc__master_client_set_remount_hook(mc__master_client_t *c, mc__remount_fn fn, void *ctx) {
    mc__mc_lock(c);
    c->remount = fn;
    c->remount_ctx = ctx;
    pthread_mutex_unlock(&c->mu);
}

int mc__master_client_mount_segment(mc__master_client_t *c, const char *segment_name, uint64_t base,
                                    uint64_t size) {
    return mc__master_client_mount_segment_epoch(c, segment_name, base, size, 0);
}

int mc__master_client_mount_segment_epoch(mc__master_client_t *c, const char *segment_name,
                                          uint64_t base, uint64_t size, uint64_t epoch) {
    mc__mount_t m;
    int rc = mc__mc_fill_mount(&m, segment_name, base, size, epoch);
    if (rc)
        return rc;
    mc__mc_lock(c);
    rc = mc__mc_mount_rpc(c, &m, 1);
    if (rc == 0) {
        size_t i = 0;
        while (i < c->n_mounts &&
               !(c->mounts[i].base == base && !strcmp(c->mounts[i].name, m.name)))
            i++;
        if (i == c->n_mounts) {
            mc__mount_t *p = mc__array_grow(c->mounts, c->n_mounts, &c->cap_mounts, sizeof(*p), 4);
            if (!p) {
                rc = MC_ERR_MEMORY;
                goto out;
            }
            c->mounts = p;
            c->mounts[c->n_mounts++] = m;
        }
    }
out:
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int mc__master_client_unmount_segment(mc__master_client_t *c, const char *segment_name,
                                      uint64_t base) {
    mc__mount_t m;
    int rc = mc__mc_fill_mount(&m, segment_name, base, 0, 0);
    if (rc)
        return rc;
    mc__mc_lock(c);
    /* Forget it first: even if the RPC fails, a reconnect must not mount it again. */
    for (size_t i = 0; i < c->n_mounts; i++) {
        if (c->mounts[i].base == base && !strcmp(c->mounts[i].name, m.name)) {
            c->mounts[i] = c->mounts[--c->n_mounts];
            break;
        }
    }
    rc = mc__mc_mount_rpc(c, &m, 0);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int mc__master_client_unregister(mc__master_client_t *c) {
    mc__mp_request_t r;
    mc_frame_header_t h;
    int rc = 0;
    memset(&r, 0, sizeof(r));
    r.type = MC_MP_UNREGISTER_CLIENT;
    mc__mc_lock(c);
    /* Nothing is ours at the master any more: a reconnect must not mount anything again. */
    c->n_mounts = 0;
    rc = mc__mc_call(c, &r, &h);
    if (rc == 0)
        rc = mc__mp_decode_empty_reply(&h, c->in, (size_t)h.body_len);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* Fills key views for keys[0..n); 0 or MC_ERR_INVALID_KEY. */
static int mc__mc_key_views(size_t n, const char *const *keys, mc__mp_str_t *views) {
    for (size_t i = 0; i < n; i++) {
        size_t len = keys[i] ? strnlen(keys[i], MC_MP_MAX_KEY + 1) : 0;
        if (len == 0 || len > MC_MP_MAX_KEY)
            return MC_ERR_INVALID_KEY;
        views[i].p = (const uint8_t *)keys[i];
        views[i].len = (uint32_t)len;
    }
    return 0;
}

enum { MC__OUT_CODES, MC__OUT_REPLICAS };

/* Runs a keyed batch in chunks of MC_MP_MAX_BATCH. */
static int mc__mc_batch(mc__master_client_t *c, uint8_t type, size_t n, const char *const *keys,
                        const uint64_t *value_lens, const mc__replicate_config_t *cfg, int force,
                        const char *segment, int32_t *codes, mc__key_replicas_t *reps) {
    mc__mp_str_t *views = NULL;
    int rc = 0;
    if (n == 0)
        return 0;
    if (!keys || (!codes && !reps))
        return MC_ERR_INVALID_PARAMS;
    views = mc__malloc(sizeof(*views) * (n < MC_MP_MAX_BATCH ? n : MC_MP_MAX_BATCH));
    if (!views)
        return MC_ERR_MEMORY;
    mc__mc_lock(c);
    for (size_t done = 0; done < n;) {
        size_t k = n - done < MC_MP_MAX_BATCH ? n - done : MC_MP_MAX_BATCH;
        mc__mp_request_t r;
        mc_frame_header_t h;
        memset(&r, 0, sizeof(r));
        rc = mc__mc_key_views(k, keys + done, views);
        if (rc)
            goto out;
        r.type = type;
        r.n_keys = (uint32_t)k;
        r.keys = views;
        r.force = force ? 1 : 0;
        if (value_lens) /* lengths (PUT_START, UPSERT_START) or versions (UPSERT_END, REVOKE) */
            r.value_lens = (uint64_t *)(uintptr_t)(value_lens + done);
        if (mc__mp_is_put_start(type)) {
            if (cfg)
                r.config = *cfg;
            else
                r.config.replica_num = 1;
        }
        if (segment) {
            r.segment_name.p = (const uint8_t *)segment;
            r.segment_name.len = (uint32_t)strnlen(segment, MC_MP_MAX_SEGMENT_NAME + 1);
        }
        rc = mc__mc_call(c, &r, &h);
        if (rc)
            goto out;
        if (reps)
            rc = mc__mp_decode_replicas_reply(&h, c->in, (size_t)h.body_len, (uint32_t)k,
                                              reps + done);
        else
            rc =
                mc__mp_decode_codes_reply(&h, c->in, (size_t)h.body_len, (uint32_t)k, codes + done);
        if (rc)
            goto out;
        done += k;
    }
out:
    pthread_mutex_unlock(&c->mu);
    mc__free(views);
    return rc;
}

/* How long a put asks a recovering master again for a placement (it answers
 * UNAVAILABLE_IN_CURRENT_STATUS while a segment restored from its metadata log awaits its owner
 * and no other segment has room). An owner is back within a heartbeat or expires after the
 * master's client_ttl (10 s by default), so the default covers three of those. */
#define MC__RECOVERY_WAIT_MS_DEFAULT 30000
#define MC__RECOVERY_POLL_MS_MIN 20
#define MC__RECOVERY_POLL_MS_MAX 250

int mc__master_client_batch_start(mc__master_client_t *c, int upsert, size_t n,
                                  const char *const *keys, const uint64_t *value_lens,
                                  const mc__replicate_config_t *cfg, mc__key_replicas_t *out) {
    uint8_t type = upsert ? MC_MP_UPSERT_START : MC_MP_PUT_START;
    const char **wait_keys = NULL;
    uint64_t *wait_lens = NULL;
    size_t *wait_idx = NULL;
    mc__key_replicas_t *again = NULL;
    uint64_t until = 0, poll = MC__RECOVERY_POLL_MS_MIN;
    int rc;
    if (n && !value_lens)
        return MC_ERR_INVALID_PARAMS;
    rc = mc__mc_batch(c, type, n, keys, value_lens, cfg, 0, NULL, NULL, out);
    for (;;) {
        size_t w = 0;
        for (size_t i = 0; rc == 0 && i < n; i++)
            w += out[i].code == MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS;
        if (w == 0)
            break;
        if (!until)
            until = mc__now_ms() + (uint64_t)mc__env_i64_in("MC_STORE_RECOVERY_WAIT_MS",
                                                            MC__RECOVERY_WAIT_MS_DEFAULT, 0,
                                                            24 * 3600 * 1000);
        if (mc__now_ms() + poll > until)
            break; /* the keys keep the master's answer */
        if (!again) {
            wait_keys = mc__calloc(n, sizeof(*wait_keys));
            wait_lens = mc__calloc(n, sizeof(*wait_lens));
            wait_idx = mc__calloc(n, sizeof(*wait_idx));
            again = mc__calloc(n, sizeof(*again));
            if (!wait_keys || !wait_lens || !wait_idx || !again)
                break;
            MC_INFO("store: the master is recovering its segments; waiting up to %llu ms for "
                    "room for %zu keys",
                    (unsigned long long)(until - mc__now_ms()), w);
        }
        w = 0;
        for (size_t i = 0; i < n; i++)
            if (out[i].code == MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS) {
                wait_keys[w] = keys[i];
                wait_lens[w] = value_lens[i];
                wait_idx[w++] = i;
            }
        usleep((useconds_t)(poll * 1000));
        poll = poll * 2 < MC__RECOVERY_POLL_MS_MAX ? poll * 2 : MC__RECOVERY_POLL_MS_MAX;
        /* Only the deferred keys: the others hold placements this put is already using. A
         * request that failed may still have been served (placed, the reply lost): asking again
         * would then find the key being put and answer as for an existing key, so those keys
         * fail with the request's error instead, and their placements are discarded later. */
        int sent = mc__mc_batch(c, type, w, wait_keys, wait_lens, cfg, 0, NULL, NULL, again);
        for (size_t j = 0; j < w; j++) {
            if (sent != 0) {
                memset(&out[wait_idx[j]], 0, sizeof(out[wait_idx[j]]));
                out[wait_idx[j]].code = sent;
            } else {
                out[wait_idx[j]] = again[j];
            }
        }
    }
    mc__free(again);
    mc__free(wait_idx);
    mc__free(wait_lens);
    mc__free(wait_keys);
    return rc;
}

int mc__master_client_batch_finish(mc__master_client_t *c, int upsert, int end, size_t n,
                                   const char *const *keys, const uint64_t *versions,
                                   int32_t *codes) {
    uint8_t type = upsert ? (end ? MC_MP_UPSERT_END : MC_MP_UPSERT_REVOKE)
                          : (end ? MC_MP_PUT_END : MC_MP_PUT_REVOKE);
    if (n && !versions)
        return MC_ERR_INVALID_PARAMS;
    return mc__mc_batch(c, type, n, keys, versions, NULL, 0, NULL, codes, NULL);
}

typedef struct mc__mc_list_ctx {
    uint32_t n;
    mc__key_replicas_t *reps;
    int32_t *codes;
} mc__mc_list_ctx_t;

static int mc__mc_list_reply(void *ctx, const mc_frame_header_t *h, const uint8_t *body,
                             size_t len) {
    mc__mc_list_ctx_t *a = ctx;
    return a->reps ? mc__mp_decode_replicas_reply(h, body, len, a->n, a->reps)
                   : mc__mp_decode_codes_reply(h, body, len, a->n, a->codes);
}

int mc__master_client_put_reserve(mc__master_client_t *c, uint32_t n, uint64_t len,
                                  const mc__replicate_config_t *cfg, mc__key_replicas_t *out) {
    mc__mc_list_ctx_t a = {n, out, NULL};
    mc__mp_request_t r;
    if (n == 0 || n > MC_MP_MAX_SLOTS || !cfg || !out)
        return MC_ERR_INVALID_PARAMS;
    memset(&r, 0, sizeof(r));
    r.type = MC_MP_PUT_RESERVE;
    r.n_slots = n;
    r.size = len;
    r.config = *cfg;
    return mc__master_client_call(c, &r, mc__mc_list_reply, &a);
}

/* PUT_COMMIT (clients NULL: this client's slots) or PUT_COMMIT_FOR (clients[i] names whose slot
 * entry i commits), in chunks of MC_MP_MAX_BATCH. Sent as any call is (mc__mc_call: resent once
 * over a new connection when the first broke): a resend of a commit the master already applied
 * changes nothing, as the slot is gone by then; its entries answer OBJECT_NOT_FOUND instead. */
static int mc__mc_commit(mc__master_client_t *c, size_t n,
                         const uint8_t (*clients)[MC_MP_CLIENT_ID_LEN], const char *const *keys,
                         const uint64_t *lens, const uint64_t *slots, int32_t *codes) {
    mc__mp_str_t *views = NULL;
    int rc = 0;
    if (n == 0)
        return 0;
    if (!keys || !lens || !slots || !codes)
        return MC_ERR_INVALID_PARAMS;
    views = mc__malloc(sizeof(*views) * (n < MC_MP_MAX_BATCH ? n : MC_MP_MAX_BATCH));
    if (!views)
        return MC_ERR_MEMORY;
    for (size_t done = 0; rc == 0 && done < n;) {
        size_t k = n - done < MC_MP_MAX_BATCH ? n - done : MC_MP_MAX_BATCH;
        mc__mc_list_ctx_t a = {(uint32_t)k, NULL, codes + done};
        mc__mp_request_t r;
        memset(&r, 0, sizeof(r));
        rc = mc__mc_key_views(k, keys + done, views);
        if (rc)
            break;
        r.type = clients ? MC_MP_PUT_COMMIT_FOR : MC_MP_PUT_COMMIT;
        r.n_keys = (uint32_t)k;
        r.keys = views;
        r.value_lens = (uint64_t *)(uintptr_t)(lens + done);
        r.slots = (uint64_t *)(uintptr_t)(slots + done);
        if (clients) /* only read by the encoder */
            r.key_clients = (uint8_t(*)[MC_MP_CLIENT_ID_LEN])(uintptr_t)(clients + done);
        rc = mc__master_client_call(c, &r, mc__mc_list_reply, &a);
        done += k;
    }
    mc__free(views);
    return rc;
}

int mc__master_client_put_commit(mc__master_client_t *c, size_t n, const char *const *keys,
                                 const uint64_t *lens, const uint64_t *slots, int32_t *codes) {
    return mc__mc_commit(c, n, NULL, keys, lens, slots, codes);
}

int mc__master_client_put_commit_for(mc__master_client_t *c, size_t n,
                                     const uint8_t (*clients)[MC_MP_CLIENT_ID_LEN],
                                     const char *const *keys, const uint64_t *lens,
                                     const uint64_t *slots, int32_t *codes) {
    if (n && !clients)
        return MC_ERR_INVALID_PARAMS;
    return mc__mc_commit(c, n, clients, keys, lens, slots, codes);
}

int mc__master_client_batch_put_start(mc__master_client_t *c, size_t n, const char *const *keys,
                                      const uint64_t *value_lens, const mc__replicate_config_t *cfg,
                                      mc__key_replicas_t *out) {
    return mc__master_client_batch_start(c, 0, n, keys, value_lens, cfg, out);
}

int mc__master_client_batch_replica_clear(mc__master_client_t *c, size_t n, const char *const *keys,
                                          const char *segment, int32_t *codes) {
    if (segment && strlen(segment) > MC_MP_MAX_SEGMENT_NAME)
        return MC_ERR_INVALID_PARAMS;
    return mc__mc_batch(c, MC_MP_REPLICA_CLEAR, n, keys, NULL, NULL, 0, segment ? segment : "",
                        codes, NULL);
}

int mc__master_client_batch_get_replica_list(mc__master_client_t *c, size_t n,
                                             const char *const *keys, mc__key_replicas_t *out) {
    return mc__mc_batch(c, MC_MP_GET_REPLICA_LIST, n, keys, NULL, NULL, 0, NULL, NULL, out);
}

int mc__master_client_batch_exist(mc__master_client_t *c, size_t n, const char *const *keys,
                                  int32_t *results) {
    return mc__mc_batch(c, MC_MP_EXIST, n, keys, NULL, NULL, 0, NULL, results, NULL);
}

int mc__master_client_batch_remove(mc__master_client_t *c, size_t n, const char *const *keys,
                                   int force, int32_t *codes) {
    return mc__mc_batch(c, MC_MP_REMOVE, n, keys, NULL, NULL, force, NULL, codes, NULL);
}

int mc__master_client_segment_unreachable(mc__master_client_t *c, size_t n,
                                          const char *const *names, int32_t *codes) {
    return mc__mc_batch(c, MC_MP_SEGMENT_UNREACHABLE, n, names, NULL, NULL, 0, NULL, codes, NULL);
}

int mc__master_client_put_start(mc__master_client_t *c, const char *key, uint64_t value_len,
                                const mc__replicate_config_t *cfg, mc__key_replicas_t *out) {
    int rc = mc__master_client_batch_put_start(c, 1, &key, &value_len, cfg, out);
    return rc ? rc : out->code;
}

static int mc__mc_single(mc__master_client_t *c, uint8_t type, const char *key, int force) {
    int32_t code = 0;
    int rc = mc__mc_batch(c, type, 1, &key, NULL, NULL, force, NULL, &code, NULL);
    return rc ? rc : code;
}

int mc__master_client_put_end(mc__master_client_t *c, const char *key, uint64_t version) {
    int32_t code = 0;
    int rc = mc__master_client_batch_finish(c, 0, 1, 1, &key, &version, &code);
    return rc ? rc : code;
}

int mc__master_client_put_revoke(mc__master_client_t *c, const char *key, uint64_t version) {
    int32_t code = 0;
    int rc = mc__master_client_batch_finish(c, 0, 0, 1, &key, &version, &code);
    return rc ? rc : code;
}

int mc__master_client_exist(mc__master_client_t *c, const char *key) {
    return mc__mc_single(c, MC_MP_EXIST, key, 0);
}

int mc__master_client_remove(mc__master_client_t *c, const char *key, int force) {
    return mc__mc_single(c, MC_MP_REMOVE, key, force);
}

int mc__master_client_get_replica_list(mc__master_client_t *c, const char *key,
                                       mc__key_replicas_t *out) {
    int rc = mc__master_client_batch_get_replica_list(c, 1, &key, out);
    return rc ? rc : out->code;
}

int64_t mc__master_client_remove_all(mc__master_client_t *c, int force) {
    return mc__master_client_remove_by_regex(c, NULL, force);
}

int64_t mc__master_client_remove_by_regex(mc__master_client_t *c, const char *regex, int force) {
    mc__mp_request_t r;
    mc_frame_header_t h;
    int64_t removed = 0;
    int rc = 0;
    memset(&r, 0, sizeof(r));
    r.type = MC_MP_REMOVE_ALL;
    r.force = force ? 1 : 0;
    if (regex) {
        size_t n = strlen(regex);
        if (n == 0 || n > MC_MP_MAX_KEY)
            return MC_ERR_INVALID_PARAMS;
        r.pattern.p = (const uint8_t *)regex;
        r.pattern.len = (uint32_t)n;
    }
    mc__mc_lock(c);
    rc = mc__mc_call(c, &r, &h);
    if (rc == 0)
        rc = mc__mp_decode_remove_all_reply(&h, c->in, (size_t)h.body_len, &removed);
    pthread_mutex_unlock(&c->mu);
    return rc ? rc : removed;
}

int mc__master_client_heartbeat(mc__master_client_t *c, uint8_t *status) {
    mc__mp_request_t r;
    mc_frame_header_t h;
    uint8_t st = 0;
    uint64_t view = 0;
    int rc = 0;
    memset(&r, 0, sizeof(r));
    r.type = MC_MP_HEARTBEAT;
    mc__mc_lock(c);
    r.n_mounted = (uint32_t)c->n_mounts;
    rc = mc__mc_call(c, &r, &h);
    if (rc == 0)
        rc = mc__mp_decode_heartbeat_reply(&h, c->in, (size_t)h.body_len, &st, &view);
    if (rc == 0)
        atomic_store(&c->view, view);
    if (rc == 0 && st == MC_MP_CLIENT_NEED_REMOUNT) {
        /* The master lost segments of ours (it expired us, or restarted): mount them again
         * now rather than lose their capacity (in new incarnations where it forgot them). */
        if (mc__mc_remount_all(c, mc__mc_deadline(c)) != 0)
            MC_WARN("remounting after the master forgot this client failed; retrying later");
    }
    pthread_mutex_unlock(&c->mu);
    if (status)
        *status = st;
    return rc;
}

uint64_t mc__master_client_view_version(mc__master_client_t *c) {
    return atomic_load(&c->view);
}

/* --- replica tasks --- */

static int mc__mc_str(const char *s, uint32_t max, mc__mp_str_t *out) {
    size_t n = s ? strlen(s) : 0;
    if (n > max)
        return MC_ERR_INVALID_PARAMS;
    out->p = (const uint8_t *)s;
    out->len = (uint32_t)n;
    return 0;
}

/* Reply readers for mc__master_client_call: the task calls differ only in the request they
 * fill and the decoder they read the reply with. */
static int mc__mc_create_reply(void *ctx, const mc_frame_header_t *h, const uint8_t *body,
                               size_t len) {
    return mc__tp_decode_create_reply(h, body, len, ctx);
}

static int mc__mc_empty_reply(void *ctx, const mc_frame_header_t *h, const uint8_t *body,
                              size_t len) {
    (void)ctx;
    return mc__mp_decode_empty_reply(h, body, len);
}

static int mc__mc_query_reply(void *ctx, const mc_frame_header_t *h, const uint8_t *body,
                              size_t len) {
    return mc__tp_decode_query_reply(h, body, len, ctx);
}

typedef struct mc__mc_fetch {
    uint32_t max;
    mc__task_work_t *out;
    uint32_t *n;
} mc__mc_fetch_t;

static int mc__mc_fetch_reply(void *ctx, const mc_frame_header_t *h, const uint8_t *body,
                              size_t len) {
    const mc__mc_fetch_t *f = ctx;
    return mc__tp_decode_fetch_reply(h, body, len, f->max, f->out, f->n);
}

int mc__master_client_task_create(mc__master_client_t *c, uint8_t type, const char *key,
                                  const char *source, size_t n, const char *const *targets,
                                  uint8_t id[MC_MP_CLIENT_ID_LEN]) {
    mc__mp_request_t r;
    memset(&r, 0, sizeof(r));
    r.type = MC_MP_TASK_CREATE;
    r.task_type = type;
    if (n == 0 || n > MC_MP_MAX_REPLICA_NUM || !targets)
        return MC_ERR_INVALID_PARAMS;
    if (mc__mc_str(key, MC_MP_MAX_KEY, &r.object_key) != 0 || r.object_key.len == 0)
        return MC_ERR_INVALID_KEY;
    if (mc__mc_str(source, MC_MP_MAX_SEGMENT_NAME, &r.segment_name) != 0)
        return MC_ERR_INVALID_PARAMS;
    r.n_targets = (uint32_t)n;
    for (size_t i = 0; i < n; i++)
        if (mc__mc_str(targets[i], MC_MP_MAX_SEGMENT_NAME, &r.targets[i]) != 0 ||
            r.targets[i].len == 0)
            return MC_ERR_INVALID_PARAMS;
    return mc__master_client_call(c, &r, mc__mc_create_reply, id);
}

int mc__master_client_task_query(mc__master_client_t *c, const uint8_t id[MC_MP_CLIENT_ID_LEN],
                                 mc__task_info_t *out) {
    mc__mp_request_t r;
    memset(&r, 0, sizeof(r));
    r.type = MC_MP_TASK_QUERY;
    memcpy(r.task_id, id, MC_MP_CLIENT_ID_LEN);
    return mc__master_client_call(c, &r, mc__mc_query_reply, out);
}

int mc__master_client_task_fetch(mc__master_client_t *c, uint32_t max, mc__task_work_t *out,
                                 uint32_t *n) {
    mc__mp_request_t r;
    mc__mc_fetch_t f = {max, out, n};
    *n = 0;
    memset(&r, 0, sizeof(r));
    r.type = MC_MP_TASK_FETCH;
    r.max_tasks = max;
    return mc__master_client_call(c, &r, mc__mc_fetch_reply, &f);
}

int mc__master_client_task_report(mc__master_client_t *c, const uint8_t id[MC_MP_CLIENT_ID_LEN],
                                  int32_t code, const char *message) {
    mc__mp_request_t r;
    memset(&r, 0, sizeof(r));
    r.type = MC_MP_TASK_REPORT;
    memcpy(r.task_id, id, MC_MP_CLIENT_ID_LEN);
    r.task_code = code;
    r.message.p = (const uint8_t *)(message ? message : "");
    r.message.len = (uint32_t)strnlen((const char *)r.message.p, MC_TP_MAX_MESSAGE);
    return mc__master_client_call(c, &r, mc__mc_empty_reply, NULL);
}

int mc__master_client_call(mc__master_client_t *c, mc__mp_request_t *r, mc__reply_fn fn,
                           void *ctx) {
    mc_frame_header_t h;
    int rc;
    mc__mc_lock(c);
    rc = mc__mc_call(c, r, &h);
    if (rc == 0)
        rc = fn(ctx, &h, c->in, (size_t)h.body_len);
    pthread_mutex_unlock(&c->mu);
    return rc;
}
