/* Engine lifecycle: options, the RPC listener, transports, publishing the segment descriptor. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "devmem.h"
#include "metadata/etcd_meta.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/config.h"
#include "mooncake/common/log.h"
#include "mooncake/common/proc.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "te_internal.h"

#define MC__DEFAULT_TIMEOUT_MS 30000

static int mc__mutex_init_all(mc_engine_t *e) {
    if (pthread_mutex_init(&e->peers_lock, NULL) || pthread_mutex_init(&e->batches_lock, NULL) ||
        pthread_mutex_init(&e->notify_lock, NULL) || mc__ask_init(e))
        return MC_ERR_MEMORY;
    return mc__reg_init(&e->reg);
}

int mc_engine_create(mc_engine_t **out) {
    mc_engine_t *e = NULL;
    int rc = MC_ERR_INVALID_ARGUMENT;
    if (!out)
        goto out;
    *out = NULL;
    rc = MC_ERR_MEMORY;
    e = mc__calloc(1, sizeof(*e));
    if (!e)
        goto out;
    rc = mc__te_gate_init(e);
    if (rc) {
        mc__free(e);
        goto out;
    }
    rc = mc__mutex_init_all(e);
    if (rc) {
        mc__te_gate_destroy(e);
        mc__free(e);
        goto out;
    }
    e->tps = mc__transport_list(&e->ntp);
    e->devmem = mc__devmem_select();
    for (int i = 0; i < MC__TP_COUNT; i++) {
        atomic_init(&e->stat_tasks[i], 0);
        atomic_init(&e->stat_bytes[i], 0);
    }
    *out = e;
    rc = 0;
out:
    return rc;
}

static int mc__parse_protocol(const char *p) {
    const char *force = getenv("MC_FORCE_TCP");
    int forced = 0;
    if (force && *force && mc__parse_bool(force, &forced) != 0)
        MC_WARN("ignoring MC_FORCE_TCP=%s (not a boolean: 1/0, true/false, yes/no)", force);
    else if (forced)
        return MC__PROTO_TCP;
    if (!p || !*p || !strcmp(p, "auto"))
        return MC__PROTO_AUTO;
    if (!strcmp(p, "tcp"))
        return MC__PROTO_TCP;
    if (!strcmp(p, "shm"))
        return MC__PROTO_SHM;
    /* vLLM and SGLang ask for "rdma" whatever the host has: the fabric transport when a provider
     * is up, else tcp/shm with one warning (transports/fabric.c decides at init). */
    if (!strcmp(p, "rdma"))
        return MC__PROTO_RDMA;
    if (!strcmp(p, "fabric"))
        return MC__PROTO_FABRIC;
    MC_WARN("protocol \"%s\" is not available on this host; using tcp/shm (auto)", p);
    return MC__PROTO_AUTO;
}

static int mc__transfer_timeout(int opt_ms) {
    const char *s = getenv("MC_TRANSFER_TIMEOUT");
    double sec = 0;
    if (opt_ms > 0)
        return opt_ms;
    if (s && *s) {
        if (mc__parse_double(s, &sec) == 0 && sec > 0 && sec < 86400)
            return (int)(sec * 1000);
        MC_WARN("ignoring MC_TRANSFER_TIMEOUT=%s", s);
    }
    return MC__DEFAULT_TIMEOUT_MS;
}

/* How long after its start an engine waits for a peer that has not yet published its segment
 * or buffers (MC_TE_STARTUP_WAIT_MS, 0: never). Processes started together (a target and its
 * initiator, a node and its clients) race their registrations; past this window a missing peer
 * is an answer, not a delay, so steady-state lookups of unknown segments stay fast. */
static uint64_t mc__startup_wait_ms(void) {
    return (uint64_t)mc__env_i64_in("MC_TE_STARTUP_WAIT_MS", 10000, 0, 600000);
}

/* Two engines can share memory over shm only on one host and in one network namespace: the
 * memfd hand-off goes through an abstract unix socket, and those are per network namespace
 * (several "hosts" on one machine, containers, ip netns). */
static void mc__engine_host_id(mc_engine_t *e) {
    struct stat st;
    if (stat("/proc/self/ns/net", &st) == 0)
        snprintf(e->host_id, sizeof(e->host_id), "%s/net:%llx:%llx", mc__host_id(),
                 (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
    else
        snprintf(e->host_id, sizeof(e->host_id), "%s", mc__host_id());
}

/* Binds the RPC listener; fills e->host, e->port, e->name. */
static int mc__engine_listen(mc_engine_t *e, const mc_engine_options_t *opts, int p2p) {
    const char *given = opts ? opts->local_server_name : NULL;
    int named_port = p2p || (opts && opts->name_with_port);
    char host[MC__TE_NAME_MAX - 16]; /* room for "[...]:port" in the name */
    char given_host[MC__TE_NAME_MAX - 16] = "";
    uint16_t port = 0, bound = 0;
    int has_port = 0;
    int fd;
    if (given && *given && mc__split_host_port(given, host, sizeof(host), &port) == 0) {
        has_port = 1;
        snprintf(given_host, sizeof(given_host), "%s", host);
    } else if (given && *given) {
        size_t n = strlen(given);
        if (n >= sizeof(host))
            return MC_ERR_INVALID_ARGUMENT;
        if (given[0] == '[' && n > 2 && given[n - 1] == ']') /* "[::1]": an IPv6 host, no port */
            snprintf(host, sizeof(host), "%.*s", (int)(n - 2), given + 1);
        else
            snprintf(host, sizeof(host), "%s", given);
    } else if (mc__local_ip(host, sizeof(host))) {
        snprintf(host, sizeof(host), "127.0.0.1");
    }
    for (int attempt = 0; attempt < 2; attempt++) {
        if (has_port) {
            fd = mc__tcp_listen(host, port, 256, &bound);
        } else {
            int lo = opts && opts->rpc_port_lo > 0 && opts->rpc_port_lo <= 65535
                         ? opts->rpc_port_lo
                         : (int)mc__env_i64_in("MC_MIN_RPC_PORT", 15000, 1, 65535);
            int hi = opts && opts->rpc_port_hi >= lo && opts->rpc_port_hi <= 65535
                         ? opts->rpc_port_hi
                         : (int)mc__env_i64_in("MC_MAX_RPC_PORT", 17000, 1, 65535);
            if (lo > hi) {
                MC_ERROR("no RPC port to pick: the range %d..%d is empty (MC_MIN_RPC_PORT above "
                         "MC_MAX_RPC_PORT?)",
                         lo, hi);
                return MC_ERR_INVALID_ARGUMENT;
            }
            fd = mc__tcp_listen_range(host, (uint16_t)lo, (uint16_t)hi, 256, &bound);
        }
        /* With a metadata service the segment name is just a name ("prefill-0"); the RPC port
         * then lives on this host's address, which the descriptor tells peers. */
        if (fd != MC_ERR_DNS || named_port || attempt)
            break;
        if (mc__local_ip(host, sizeof(host)))
            snprintf(host, sizeof(host), "127.0.0.1");
    }
    if (fd < 0) {
        int v6 = strchr(host, ':') != NULL;
        MC_ERROR("cannot listen on %s%s%s:%u: %s", v6 ? "[" : "", host, v6 ? "]" : "",
                 (unsigned)port, errno ? strerror(errno) : mc_strerror(fd));
        return fd;
    }
    snprintf(e->host, sizeof(e->host), "%s", host);
    e->port = bound;
    /* "host:0" asks for a picked port, and the name must then carry it: with a metadata service
     * several processes asking "host:0" would otherwise publish under one name */
    if (named_port || !given || !*given || (has_port && port == 0)) {
        if (has_port && port == 0 && !p2p)
            snprintf(host, sizeof(host), "%s", given_host);
        if (strchr(host, ':'))
            snprintf(e->name, sizeof(e->name), "[%s]:%u", host, (unsigned)bound);
        else
            snprintf(e->name, sizeof(e->name), "%s:%u", host, (unsigned)bound);
    } else {
        snprintf(e->name, sizeof(e->name), "%s", given);
    }
    return fd;
}

static int mc__engine_init(mc_engine_t *e, const mc_engine_options_t *opts) {
    const char *meta;
    int p2p;
    int lfd = -1;
    int rc = MC_ERR_INVALID_ARGUMENT;
    if (!e || e->initialized)
        goto out;
    /* From here the engine's threads, sockets and memory are this process's (gate.c). */
    mc__gate_own(&e->gate);
    meta =
        opts && opts->metadata_conn && *opts->metadata_conn ? opts->metadata_conn : "P2PHANDSHAKE";
    p2p = !strcmp(meta, "P2PHANDSHAKE");
    if (!p2p) {
        const char *eps = NULL;
        int etcd = mc__meta_etcd_parse(meta, &eps);
        if (strncmp(meta, "http://", 7) && !etcd) {
            MC_ERROR("metadata server \"%s\" is not supported (P2PHANDSHAKE, http:// or "
                     "etcd://)",
                     meta);
            rc = MC_ERR_NOT_IMPLEMENTED;
            goto out;
        }
        if (etcd) {
            /* a metadata call waits no longer than a transfer may (metadata.c does the same) */
            int t = mc__transfer_timeout(opts ? opts->transfer_timeout_ms : 0);
            rc = mc__meta_etcd_open(eps, t > 0 && t < 5000 ? t : 5000, &e->etcd);
            if (rc) /* the reason is logged where it was found */
                goto out;
        }
        e->metadata_url = mc__strdup(meta);
        if (!e->metadata_url) {
            rc = MC_ERR_MEMORY;
            goto out;
        }
    }
    if (opts && opts->local_server_name && strlen(opts->local_server_name) >= MC__TE_NAME_MAX)
        goto out;
    e->proto = mc__parse_protocol(opts ? opts->protocol : NULL);
    e->timeout_ms = mc__transfer_timeout(opts ? opts->transfer_timeout_ms : 0);
    rc = mc__auth_init(&e->auth, opts ? opts->cluster_secret : NULL,
                       opts ? opts->cluster_secret_file : NULL);
    if (rc)
        goto out;
    /* an unregister never waits on a stalled peer longer than a transfer may take */
    if (e->timeout_ms < e->reg.grace_ms)
        e->reg.grace_ms = e->timeout_ms;
    if (getrandom(&e->instance_id, sizeof(e->instance_id), 0) != sizeof(e->instance_id))
        e->instance_id = mc__now_ns() ^ ((uint64_t)getpid() << 32);
    e->instance_id |= 1;
    mc__engine_host_id(e);
    lfd = mc__engine_listen(e, opts, p2p);
    if (lfd < 0) {
        rc = lfd;
        goto out;
    }
    rc = mc__transports_init(e);
    if (rc)
        goto out;
    rc = mc__server_start(e, lfd, &e->server);
    lfd = -1; /* the server owns it now, also when it failed */
    if (rc)
        goto out;
    e->initialized = 1;
    rc = mc__meta_claim(e);
    if (!rc)
        rc = mc__meta_publish(e);
    if (rc) {
        MC_ERROR("cannot publish segment %s to %s: %s", e->name, meta, mc_strerror(rc));
        e->initialized = 0;
        goto out;
    }
    e->startup_until_ms = mc__now_ms() + mc__startup_wait_ms();
    MC_INFO("transfer engine %s up (instance %016" PRIx64 ")", e->name, e->instance_id);
out:
    if (lfd >= 0)
        close(lfd);
    if (rc && e && !e->initialized) {
        /* leave the handle reusable for destroy only */
        mc__server_stop(e->server);
        e->server = NULL;
        mc__transports_close(e);
        mc__transports_release(e);
    }
    return rc;
}

int mc_engine_init(mc_engine_t *e, const mc_engine_options_t *opts) {
    int rc;
    MC__GATED(e, rc, mc__engine_init(e, opts));
    return rc;
}

/* What close frees, once no call is inside the gate. */
static void mc__engine_release(mc_engine_t *e) {
    if (e->initialized)
        mc__meta_unpublish(e);
    mc__server_stop(e->server);
    e->server = NULL;
    mc__transports_close(e);
    for (size_t i = 0; i < e->npeers; i++)
        mc__peer_destroy(e, e->peers[i]);
    mc__free(e->peers);
    e->peers = NULL;
    e->npeers = e->peers_cap = 0;
    for (size_t i = 0; i < e->nslots; i++) {
        mc__batch_t *b = e->slots[i].b;
        if (!b)
            continue;
        pthread_mutex_destroy(&b->lock);
        pthread_cond_destroy(&b->cond);
        mc__free(b->tasks);
        mc__free(b);
    }
    mc__free(e->slots);
    e->slots = NULL;
    e->nslots = e->slots_cap = 0;
    /* what peers map of ours stops being served (shm bumps the generation they watch); the
     * managed memory itself stays mapped until destroy (below), so a caller that still points
     * into it (a store whose shared engine was closed under it) fails its calls, not crashes */
    mc__transports_release(e);
    /* what the device-memory hook noted of our registrations goes now: the caller may free that
     * memory once its engine is closed (the fake backend would take a reuse of the address for
     * its device memory still) */
    for (size_t i = 0; i < e->reg.n; i++)
        e->devmem->forget((const void *)(uintptr_t)e->reg.regions[i].addr);
    mc__notify_clear(e);
    pthread_mutex_destroy(&e->peers_lock);
    pthread_mutex_destroy(&e->batches_lock);
    pthread_mutex_destroy(&e->notify_lock);
    mc__ask_destroy(e); /* the server (its only caller) stopped above */
    mc__meta_etcd_close(e->etcd);
    e->etcd = NULL;
    mc__free(e->metadata_url);
    e->metadata_url = NULL;
}

void mc_engine_close(mc_engine_t *e) {
    /* A fork() child closes nothing of its parent's engine: unpublishing would take the parent's
     * segment away from its peers, waking the server would stop the parent's, and the threads to
     * wait for are not in this process. Its destroy lets go of the child's copies only. */
    if (!e || mc__engine_inherited(e) || !mc__te_gate_shut(e))
        return;
    /* waiters on batches give up now, transfers waiting on peers end now (a stalled peer would
     * hold a synchronous transfer, and so the close, until its deadline); every other call
     * inside ends by its own deadline */
    mc__batches_wake(e);
    mc__transports_interrupt(e);
    mc__te_gate_wait_calls(e);
    mc__engine_release(e);
    mc__te_gate_mark_closed(e);
}

/* The managed memory this process maps (its pages stay while another process maps them). */
static void mc__engine_unmap_managed(mc_engine_t *e) {
    for (size_t i = 0; i < e->reg.n; i++) {
        mc__region_t *g = &e->reg.regions[i];
        if (g->memfd >= 0) {
            munmap((void *)(uintptr_t)g->addr, g->map_len);
            close(g->memfd);
        }
    }
}

/* Destroy in a fork() child of the engine's process: the child's own copies go (its mappings
 * of the managed memory, its copies of the listening socket and the server's connections);
 * nothing is said to peers or the metadata service and nothing of the parent's is shut down or
 * woken. Locks are not taken (a parent's thread may have held one at the fork); what the
 * transports and peer table hold stays in the child's copy of the heap until it exits. */
static void mc__engine_forget(mc_engine_t *e) {
    mc__engine_unmap_managed(e);
    mc__server_forget(e->server);
    mc__free(e->reg.regions);
    mc__free(e);
}

void mc_engine_destroy(mc_engine_t *e) {
    if (!e)
        return;
    if (mc__engine_inherited(e)) {
        mc__engine_forget(e);
        return;
    }
    mc_engine_close(e);
    mc__engine_unmap_managed(e);
    mc__reg_destroy(&e->reg);
    mc__te_gate_destroy(e);
    mc__free(e);
}

const char *mc_engine_local_name(const mc_engine_t *e) {
    return e && e->initialized ? e->name : "";
}

int mc_engine_rpc_port(const mc_engine_t *e) {
    return e && e->initialized ? e->port : 0;
}

const char *mc_engine_protocol(const mc_engine_t *e) {
    if (!e)
        return "";
    switch (e->proto) {
    case MC__PROTO_TCP:
        return "tcp";
    case MC__PROTO_SHM:
        return "shm";
    case MC__PROTO_RDMA:
        return "rdma";
    case MC__PROTO_FABRIC:
        return "fabric";
    default:
        return "auto";
    }
}

int mc_engine_get_stats(mc_engine_t *e, const char *transport, uint64_t *tasks, uint64_t *bytes) {
    /* the counters are atomics inside the engine struct, which only destroy frees: no gate */
    for (int i = 0; e && transport && i < MC__TP_COUNT; i++) {
        if (strcmp(mc__transport_get(e, i)->name, transport))
            continue;
        if (tasks)
            *tasks = atomic_load(&e->stat_tasks[i]);
        if (bytes)
            *bytes = atomic_load(&e->stat_bytes[i]);
        return 0;
    }
    return MC_ERR_INVALID_ARGUMENT;
}
