/* Peers' segments: opening by name, the cached descriptor and its refresh. A peer entry lives as
 * long as the engine, so a restarted peer keeps its segment id; its descriptor, pooled
 * connections and shm mappings are replaced when its instance id changes. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/log.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "peer_conn.h"
#include "te_internal.h"

static mc__peer_t *mc__peer_new(const mc_engine_t *e, const char *name) {
    mc__peer_t *p = mc__calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    snprintf(p->name, sizeof(p->name), "%s", name);
    if (mc__transports_peer_init(e, p) != 0) {
        mc__free(p);
        return NULL;
    }
    pthread_mutex_init(&p->lock, NULL);
    return p;
}

void mc__peer_destroy(mc_engine_t *e, mc__peer_t *p) {
    if (!p)
        return;
    mc__peer_conn_drop_locked(p);
    mc__transports_peer_destroy(e, p);
    mc__desc_free(p->desc);
    pthread_mutex_destroy(&p->lock);
    mc__free(p);
}

mc__peer_t *mc__peer_get(mc_engine_t *e, mc_segment_id_t id) {
    mc__peer_t *p = NULL;
    pthread_mutex_lock(&e->peers_lock);
    if (id > 0 && (uint64_t)id <= e->npeers)
        p = e->peers[id - 1];
    pthread_mutex_unlock(&e->peers_lock);
    return p;
}

void mc__peer_mark_broken(mc__peer_t *p) {
    pthread_mutex_lock(&p->lock);
    p->stale = 1;
    mc__peer_conn_drop_locked(p);
    pthread_mutex_unlock(&p->lock);
}

/* Where the peer's RPC port is reached: with P2P the name says it; with a metadata service the
 * descriptor does. */
static void mc__peer_set_addr(mc_engine_t *e, mc__peer_t *p, const mc__desc_t *d) {
    if (e->metadata_url || mc__split_host_port(p->name, p->host, sizeof(p->host), &p->port) != 0) {
        snprintf(p->host, sizeof(p->host), "%s", d->rpc_host);
        p->port = d->rpc_port;
    }
}

int mc__peer_refresh(mc_engine_t *e, mc__peer_t *p) {
    mc__desc_t *d = NULL;
    mc__desc_t *old = NULL;
    uint64_t tok[MC__TP_COUNT];
    int restarted = 0;
    int rc;
    mc__transports_peer_tokens(e, p, tok); /* before the fetch: see transport.h */
    rc = mc__meta_fetch(e, p->name, &d);
    if (rc) {
        mc__peer_mark_broken(p);
        return rc;
    }
    pthread_mutex_lock(&p->lock);
    old = p->desc;
    restarted = old && old->instance_id != d->instance_id;
    p->desc = d;
    p->stale = 0;
    mc__transports_peer_swapped(e, p, tok, restarted);
    mc__peer_set_addr(e, p, d);
    if (restarted)
        mc__peer_conn_drop_locked(p);
    pthread_mutex_unlock(&p->lock);
    mc__desc_free(old);
    mc__transports_peer_refreshed(e, p, restarted);
    return 0;
}

int mc__peer_check_range(mc_engine_t *e, mc__peer_t *p, uint64_t addr, uint64_t len, uint64_t epoch,
                         int64_t *shm_id, int *same_host, uint32_t *reach) {
    for (int attempt = 0; attempt < 2; attempt++) {
        int rc;
        pthread_mutex_lock(&p->lock);
        /* after our own re-fetch the descriptor is current enough for this request even when
         * another thread marked it stale meanwhile (a close_segment, a failed transfer): that
         * is news for the next request, not a reason to refuse this one */
        if (p->desc && (!p->stale || attempt)) {
            long i = mc__desc_find(p->desc, addr, len);
            if (i >= 0 && (epoch == 0 || p->desc->bufs[i].epoch == epoch)) {
                *shm_id = p->desc->bufs[i].shm_id;
                *same_host = !strcmp(p->desc->host_id, e->host_id);
                *reach = p->desc->reach;
                pthread_mutex_unlock(&p->lock);
                return 0;
            }
            if (attempt) {
                pthread_mutex_unlock(&p->lock);
                break;
            }
        }
        pthread_mutex_unlock(&p->lock);
        if (attempt)
            break;
        /* unknown range (or incarnation): the peer may have registered it since we looked */
        rc = mc__peer_refresh(e, p);
        if (rc)
            return rc;
    }
    return MC_ERR_ADDRESS_NOT_REGISTERED;
}

/* The id of the segment already open by that name (no I/O), or -1; caller holds peers_lock. */
static mc_segment_id_t mc__segment_find_locked(mc_engine_t *e, const char *name) {
    for (size_t i = 0; i < e->npeers; i++)
        if (!strcmp(e->peers[i]->name, name))
            return (mc_segment_id_t)i + 1;
    return -1;
}

/* Whether to look again for a peer that is not there yet: inside this engine's start-up window
 * (engine.c) and while the engine is not closing, after a pause that grows from 20 ms to 250 ms
 * and never passes the window's end. */
static int mc__startup_retry(mc_engine_t *e, unsigned *attempt) {
    uint64_t now = mc__now_ms(), pause;
    if (now >= e->startup_until_ms || mc__gate_closing(&e->gate))
        return 0;
    pause = 20u << (*attempt < 4 ? *attempt : 4);
    if (pause > 250)
        pause = 250;
    if (pause > e->startup_until_ms - now)
        pause = e->startup_until_ms - now;
    if (*attempt == 0)
        MC_INFO("peer not published yet: waiting up to %" PRIu64 " ms (start-up window)",
                e->startup_until_ms - now);
    (*attempt)++;
    usleep((useconds_t)(pause * 1000));
    return 1;
}

static int mc__segment_open_as(mc_engine_t *e, const char *name, mc_segment_id_t *out, int wait) {
    mc__peer_t *p = NULL;
    mc__desc_t *d = NULL;
    int rc = MC_ERR_INVALID_ARGUMENT;
    if (!e || !name || !*name || !out || strlen(name) >= MC__TE_NAME_MAX || !e->initialized)
        goto out;
    if (!strcmp(name, e->name)) {
        *out = MC_LOCAL_SEGMENT_ID;
        rc = 0;
        goto out;
    }
    pthread_mutex_lock(&e->peers_lock);
    *out = mc__segment_find_locked(e, name);
    pthread_mutex_unlock(&e->peers_lock);
    if (*out > 0) {
        rc = 0;
        goto out;
    }
    for (unsigned attempt = 0;;) {
        int absent = 0;
        rc = mc__meta_fetch_absent(e, name, &d, &absent);
        if (!rc || !absent || !wait || !mc__startup_retry(e, &attempt))
            break;
    }
    if (rc)
        goto out;
    rc = MC_ERR_MEMORY;
    p = mc__peer_new(e, name);
    if (!p)
        goto out;
    p->desc = d;
    d = NULL;
    mc__peer_set_addr(e, p, p->desc);
    pthread_mutex_lock(&e->peers_lock);
    *out = mc__segment_find_locked(e, name); /* opened concurrently */
    if (*out > 0) {
        pthread_mutex_unlock(&e->peers_lock);
        rc = 0;
        goto out;
    }
    if (e->npeers == e->peers_cap) {
        size_t ncap = e->peers_cap ? e->peers_cap * 2 : 8;
        mc__peer_t **np = mc__realloc(e->peers, ncap * sizeof(*np));
        if (!np) {
            pthread_mutex_unlock(&e->peers_lock);
            goto out;
        }
        e->peers = np;
        e->peers_cap = ncap;
    }
    e->peers[e->npeers++] = p;
    *out = (mc_segment_id_t)e->npeers;
    p = NULL;
    pthread_mutex_unlock(&e->peers_lock);
    rc = 0;
out:
    mc__peer_destroy(e, p);
    mc__desc_free(d);
    return rc;
}

int mc__segment_open(mc_engine_t *e, const char *name, mc_segment_id_t *out) {
    return mc__segment_open_as(e, name, out, 0);
}

int mc_engine_open_segment(mc_engine_t *e, const char *name, mc_segment_id_t *out) {
    int rc;
    MC__GATED(e, rc, mc__segment_open_as(e, name, out, 0));
    return rc;
}

int mc_engine_open_segment_wait(mc_engine_t *e, const char *name, mc_segment_id_t *out) {
    int rc;
    MC__GATED(e, rc, mc__segment_open_as(e, name, out, 1));
    return rc;
}

int mc_engine_segment_id(mc_engine_t *e, const char *name, mc_segment_id_t *out) {
    int rc;
    if (!name || !*name || !out)
        return MC_ERR_INVALID_ARGUMENT;
    rc = mc__engine_enter(e);
    if (rc)
        return rc;
    if (e->initialized && !strcmp(name, e->name)) {
        *out = MC_LOCAL_SEGMENT_ID;
    } else {
        pthread_mutex_lock(&e->peers_lock);
        *out = mc__segment_find_locked(e, name);
        pthread_mutex_unlock(&e->peers_lock);
        if (*out < 0)
            rc = MC_ERR_INVALID_ARGUMENT;
    }
    mc__engine_leave(e);
    return rc;
}

static int mc__segment_name(mc_engine_t *e, mc_segment_id_t id, char *buf, size_t cap) {
    const char *name = NULL;
    mc__peer_t *p;
    if (!buf || !cap)
        return MC_ERR_INVALID_ARGUMENT;
    if (id == MC_LOCAL_SEGMENT_ID) {
        name = e->initialized ? e->name : NULL;
    } else {
        p = mc__peer_get(e, id);
        name = p ? p->name : NULL; /* set at creation, never changed: no lock needed */
    }
    if (!name || strlen(name) >= cap)
        return MC_ERR_INVALID_ARGUMENT;
    memcpy(buf, name, strlen(name) + 1);
    return 0;
}

int mc_engine_segment_name(mc_engine_t *e, mc_segment_id_t id, char *buf, size_t cap) {
    int rc;
    MC__GATED(e, rc, mc__segment_name(e, id, buf, cap));
    return rc;
}

/* Why closing keeps the peer entry: tasks in flight to the segment point at it, and a segment id
 * must never come to name another segment. So a close forgets what may be out of date (the
 * cached descriptor is marked stale, idle pooled connections are closed) and leaves the tasks in
 * flight alone: they end on the connections they hold, as if no close had happened. The next
 * request to the id re-fetches the descriptor, which is what a caller that suspects a restarted
 * peer wants. An abort (aborting) is a close whose tasks to the segment that are queued or
 * waiting end now too: the raised count marks every task submitted before it (task.aborts) so
 * that none starts or retries later. */
static int mc__segment_close_as(mc_engine_t *e, mc_segment_id_t id, int aborting) {
    mc__peer_t *p;
    if (id == MC_LOCAL_SEGMENT_ID)
        return 0;
    p = mc__peer_get(e, id);
    if (!p)
        return MC_ERR_INVALID_ARGUMENT;
    if (aborting)
        atomic_fetch_add(&p->aborts, 1);
    mc__peer_mark_broken(p);
    if (aborting) {
        mc__transports_peer_abort(e, p);
        MC_INFO("segment %s aborted: its transfers in flight fail now", p->name);
    }
    return 0;
}

int mc_engine_close_segment(mc_engine_t *e, mc_segment_id_t id) {
    int rc;
    MC__GATED(e, rc, mc__segment_close_as(e, id, 0));
    return rc;
}

static int mc__segment_stalled(mc_engine_t *e, mc_segment_id_t id, uint64_t *ms) {
    mc__peer_t *p;
    uint64_t now, last;
    if (!ms)
        return MC_ERR_INVALID_ARGUMENT;
    *ms = 0;
    if (id == MC_LOCAL_SEGMENT_ID)
        return 0;
    p = mc__peer_get(e, id);
    if (!p)
        return MC_ERR_INVALID_ARGUMENT;
    if (atomic_load(&p->inflight) == 0)
        return 0;
    now = mc__now_ms();
    last = atomic_load(&p->progress_ms);
    *ms = now > last ? now - last : 0;
    return 0;
}

int mc_engine_segment_stalled_ms(mc_engine_t *e, mc_segment_id_t id, uint64_t *ms) {
    int rc;
    MC__GATED(e, rc, mc__segment_stalled(e, id, ms));
    return rc;
}

int mc_engine_abort_segment(mc_engine_t *e, mc_segment_id_t id) {
    int rc;
    MC__GATED(e, rc, mc__segment_close_as(e, id, 1));
    return rc;
}

static int mc__segment_first_buffer(mc_engine_t *e, mc_segment_id_t id, uint64_t *addr,
                                    uint64_t *len) {
    mc__peer_t *p;
    int rc;
    if (!e || !addr || !len)
        return MC_ERR_INVALID_ARGUMENT;
    *addr = *len = 0;
    if (id == MC_LOCAL_SEGMENT_ID) {
        pthread_rwlock_rdlock(&e->reg.lock);
        if (e->reg.n) {
            *addr = e->reg.regions[0].addr;
            *len = e->reg.regions[0].len;
        }
        pthread_rwlock_unlock(&e->reg.lock);
        return 0;
    }
    p = mc__peer_get(e, id);
    if (!p)
        return MC_ERR_INVALID_ARGUMENT;
    /* always fresh: callers ask this after a peer restarted to learn its new addresses; a peer
     * that published its segment but no buffer yet is waited for in the start-up window */
    for (unsigned attempt = 0;;) {
        rc = mc__peer_refresh(e, p);
        if (rc)
            return rc;
        pthread_mutex_lock(&p->lock);
        if (p->desc && p->desc->nbufs) {
            *addr = p->desc->bufs[0].addr;
            *len = p->desc->bufs[0].len;
        }
        pthread_mutex_unlock(&p->lock);
        if (*len || !mc__startup_retry(e, &attempt))
            return 0;
    }
}

int mc_engine_segment_first_buffer(mc_engine_t *e, mc_segment_id_t id, uint64_t *addr,
                                   uint64_t *len) {
    int rc;
    MC__GATED(e, rc, mc__segment_first_buffer(e, id, addr, len));
    return rc;
}
