/* Initiator side of the shm transport: a same-host peer's managed buffers are mapped once (memfd
 * received over its unix socket) and a transfer is one memcpy in the submitting thread.
 *
 * Staleness: the owner bumps a generation counter (in a page we map) before it lets a buffer go.
 * A copy is trusted only when the generation equals the one our descriptor was fetched under;
 * when it moves during the copy, the descriptor is re-fetched and the copy counts only if the
 * buffer is still registered.
 *
 * Incarnations: a request naming an epoch only copies into a buffer of that epoch. An owner
 * that starts a new incarnation gives it a new memfd (mc_engine_alloc_managed_epoch), so a copy
 * that was already past these checks when the old one went (a stalled process resuming) lands in
 * pages nobody reads any more, never in the new incarnation's. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "devmem.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/log.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "transports/shm.h"
#include "transports/shm_wire.h"

#define MC__SHM_HANDSHAKE_MS 2000

typedef struct mc__shm_map {
    int64_t id;
    uint64_t addr;
    uint64_t len;
    uint8_t *ptr;
    size_t map_len;
} mc__shm_map_t;

/* Initiator-side view of a same-host peer's shared memory (p->tp_peer[MC__TP_SHM]). Guarded by
 * rw: copies hold it for reading so a mapping is never unmapped under a running memcpy. */
typedef struct mc__shm_peer {
    uint64_t instance_id;      /* owner instance the mappings belong to */
    _Atomic uint64_t *gen;     /* owner's generation counter, mapped from its control memfd */
    struct mc__shm_ctrl *ctrl; /* that control page (liveness lock) */
    void *ctrl_map;
    size_t ctrl_len;
    mc__shm_map_t *maps;
    size_t nmaps;
    size_t cap;
    int failed; /* handshake failed for this instance: use tcp */
    pthread_rwlock_t rw;
    uint64_t gen_seen; /* owner's generation when p->desc was fetched (under p->lock) */
} mc__shm_peer_t;

static mc__shm_peer_t *mc__shm_of(const mc__peer_t *p) {
    return p->tp_peer[MC__TP_SHM];
}

/* What a peer's descriptor says of shm (its "shm" part, read by mc__shm_desc_parse). */
typedef struct mc__shm_desc {
    char sock[108]; /* the abstract unix socket handing out its managed buffers */
} mc__shm_desc_t;

/* Copies the peer's socket name into sock[108]: 1, or 0 when it published none. */
static int mc__shm_sock_of(const mc__desc_t *d, char *sock) {
    const mc__shm_desc_t *sd = mc__desc_priv(d, "shm");
    if (!sd) {
        sock[0] = 0;
        return 0;
    }
    memcpy(sock, sd->sock, sizeof(sd->sock));
    return 1;
}

int mc__shm_ctrl_alive(mc__shm_ctrl_t *c) {
    int rc = pthread_mutex_trylock(&c->alive);
    if (rc == EBUSY)
        return 1;
    /* Got it: the owner is gone. After EOWNERDEAD, unlocking without marking it consistent
     * makes the lock unrecoverable, so every later trylock by anyone says "gone" too. */
    if (rc == 0 || rc == EOWNERDEAD)
        pthread_mutex_unlock(&c->alive);
    return 0;
}

/* Unmaps everything mapped from a peer (rw held for writing, or the peer is going). */
static void mc__shm_peer_reset(mc__shm_peer_t *s) {
    for (size_t i = 0; i < s->nmaps; i++)
        munmap(s->maps[i].ptr, s->maps[i].map_len);
    mc__free(s->maps);
    if (s->ctrl_map)
        munmap(s->ctrl_map, s->ctrl_len);
    s->instance_id = 0;
    s->gen = NULL;
    s->ctrl = NULL;
    s->ctrl_map = NULL;
    s->ctrl_len = 0;
    s->maps = NULL;
    s->nmaps = s->cap = 0;
    s->failed = 0;
}

/* Asks the owner for one memfd (the control page or a buffer) and maps it. */
static int mc__shm_fetch(const char *sock, uint32_t op, uint64_t id, int prot, mc__shm_rep_t *rep,
                         void **map) {
    mc__shm_req_t req = {.op = op, .id = id};
    uint64_t dl = mc__now_ms() + MC__SHM_HANDSHAKE_MS;
    int fds[1] = {-1};
    int nfds = 0;
    int rc = MC_ERR_SOCKET;
    int fd = mc__unix_connect(sock, dl);
    void *p;
    *map = NULL;
    if (fd < 0)
        goto out;
    if (mc__send_all(fd, &req, sizeof(req), dl) ||
        mc__recv_fds(fd, rep, sizeof(*rep), fds, 1, &nfds, dl))
        goto out;
    rc = rep->rc < 0 ? rep->rc : MC_ERR_SOCKET;
    if (rep->rc != 0 || nfds != 1 || rep->map_len < rep->len || rep->map_len == 0)
        goto out;
    p = mmap(NULL, rep->map_len, prot, MAP_SHARED, fds[0], 0);
    if (p == MAP_FAILED) {
        rc = MC_ERR_MEMORY;
        goto out;
    }
    *map = p;
    rc = 0;
out:
    if (nfds > 0 && fds[0] >= 0)
        close(fds[0]);
    if (fd >= 0)
        close(fd);
    return rc;
}

/* Snapshot of what a copy needs from the peer's descriptor. */
typedef struct mc__shm_target {
    uint64_t instance;
    char sock[108];
    int64_t shm_id;
    uint64_t buf_addr;
    uint64_t buf_len;
    long idx;
} mc__shm_target_t;

/* Reads the descriptor under p->lock: 1 = usable now, 0 = needs a refresh. */
static int mc__shm_snapshot(mc__peer_t *p, uint64_t gen, const mc__task_t *t,
                            mc__shm_target_t *out) {
    int ok = 0;
    pthread_mutex_lock(&p->lock);
    if (p->desc && !p->stale && mc__shm_of(p)->gen_seen == gen) {
        out->instance = p->desc->instance_id;
        mc__shm_sock_of(p->desc, out->sock);
        out->idx = mc__desc_find(p->desc, t->remote, t->len);
        /* a buffer of another incarnation is not the one the request was placed in, even at
         * the same address; the descriptor is current (same generation), so this is final */
        if (out->idx >= 0 && t->epoch && p->desc->bufs[out->idx].epoch != t->epoch)
            out->idx = -1;
        out->shm_id = out->idx >= 0 ? p->desc->bufs[out->idx].shm_id : -1;
        out->buf_addr = out->idx >= 0 ? p->desc->bufs[out->idx].addr : 0;
        out->buf_len = out->idx >= 0 ? p->desc->bufs[out->idx].len : 0;
        ok = 1;
    }
    pthread_mutex_unlock(&p->lock);
    return ok;
}

static int mc__shm_map_ctrl(mc__peer_t *p) {
    mc__shm_peer_t *sp = mc__shm_of(p);
    mc__shm_target_t tg;
    mc__shm_rep_t rep;
    void *map = NULL;
    int rc;
    pthread_mutex_lock(&p->lock);
    if (!p->desc || !mc__shm_sock_of(p->desc, tg.sock)) {
        pthread_mutex_unlock(&p->lock);
        return MC_ERR_NOT_IMPLEMENTED;
    }
    tg.instance = p->desc->instance_id;
    pthread_mutex_unlock(&p->lock);
    /* writable: the liveness trylock writes the lock word */
    rc = mc__shm_fetch(tg.sock, MC__SHM_OP_CTRL, 0, PROT_READ | PROT_WRITE, &rep, &map);
    if (!rc && (rep.map_len < sizeof(mc__shm_ctrl_t) ||
                ((mc__shm_ctrl_t *)map)->magic != MC__SHM_CTRL_MAGIC)) {
        munmap(map, rep.map_len);
        rc = MC_ERR_REJECT_HANDSHAKE;
    }
    pthread_rwlock_wrlock(&sp->rw);
    if (rc) {
        sp->failed = 1;
        sp->instance_id = tg.instance;
    } else if (sp->gen) {
        munmap(map, rep.map_len); /* another thread won the race */
    } else {
        sp->ctrl_map = map;
        sp->ctrl_len = rep.map_len;
        sp->gen = &((mc__shm_ctrl_t *)map)->gen;
        sp->ctrl = map;
        sp->instance_id = tg.instance;
    }
    pthread_rwlock_unlock(&sp->rw);
    if (rc)
        MC_WARN("shm hand-off with %s failed (%s); using tcp", p->name, mc_strerror(rc));
    return rc;
}

static int mc__shm_map_buffer(mc__peer_t *p, const mc__shm_target_t *tg) {
    mc__shm_peer_t *sp = mc__shm_of(p);
    mc__shm_rep_t rep;
    void *map = NULL;
    int rc = mc__shm_fetch(tg->sock, MC__SHM_OP_BUFFER, (uint64_t)tg->shm_id,
                           PROT_READ | PROT_WRITE, &rep, &map);
    if (rc)
        return rc;
    if (rep.addr != tg->buf_addr || rep.len != tg->buf_len) {
        munmap(map, rep.map_len);
        return MC_ERR_ADDRESS_NOT_REGISTERED;
    }
    pthread_rwlock_wrlock(&sp->rw);
    if (sp->instance_id != tg->instance || !sp->gen) {
        rc = MC_ERR_CONTEXT;
    } else {
        mc__shm_map_t *nm = mc__array_grow(sp->maps, sp->nmaps, &sp->cap, sizeof(*nm), 8);
        if (!nm)
            rc = MC_ERR_MEMORY;
        else
            sp->maps = nm;
    }
    if (!rc) {
        mc__shm_map_t *m = &sp->maps[sp->nmaps++];
        m->id = tg->shm_id;
        m->addr = rep.addr;
        m->len = rep.len;
        m->ptr = map;
        m->map_len = rep.map_len;
        map = NULL;
    }
    pthread_rwlock_unlock(&sp->rw);
    if (map)
        munmap(map, rep.map_len);
    return rc;
}

static mc__shm_map_t *mc__shm_find_map(mc__shm_peer_t *s, int64_t id) {
    for (size_t i = 0; i < s->nmaps; i++)
        if (s->maps[i].id == id)
            return &s->maps[i];
    return NULL;
}

/* After the generation moved under a copy: is the buffer we copied into still the same one? */
static int mc__shm_still_registered(mc_engine_t *e, mc__peer_t *p, const mc__shm_target_t *tg) {
    int ok = 0;
    if (mc__peer_refresh(e, p))
        return 0;
    pthread_mutex_lock(&p->lock);
    if (p->desc && p->desc->instance_id == tg->instance) {
        long i = mc__desc_find(p->desc, tg->buf_addr, tg->buf_len);
        ok = i >= 0 && p->desc->bufs[i].shm_id == tg->shm_id &&
             p->desc->bufs[i].addr == tg->buf_addr && p->desc->bufs[i].len == tg->buf_len;
    }
    pthread_mutex_unlock(&p->lock);
    return ok;
}

static int mc__shm_submit(mc_engine_t *e, mc__task_t *t) {
    mc__peer_t *p = t->peer;
    mc__shm_peer_t *sp = p ? mc__shm_of(p) : NULL;
    mc__shm_target_t tg;
    if (!sp)
        return MC__TP_DECLINED;
    /* After a peer restart the worst case takes five rounds: re-fetch the descriptor (new
     * instance, old mappings dropped), map the new control page, re-fetch once more so the
     * descriptor is dated by the new generation, map the buffer, copy. */
    for (int attempt = 0; attempt < 6; attempt++) {
        mc__shm_map_t *m;
        uint64_t g0, g1;
        uint8_t *ptr;
        int crc;
        pthread_rwlock_rdlock(&sp->rw);
        if (sp->failed) {
            pthread_rwlock_unlock(&sp->rw);
            return MC__TP_DECLINED;
        }
        if (!sp->gen) {
            pthread_rwlock_unlock(&sp->rw);
            if (mc__shm_map_ctrl(p))
                return MC__TP_DECLINED;
            continue;
        }
        g0 = atomic_load(sp->gen);
        if (!mc__shm_snapshot(p, g0, t, &tg) || tg.instance != sp->instance_id) {
            pthread_rwlock_unlock(&sp->rw);
            if (mc__peer_refresh(e, p))
                return MC__TP_DECLINED; /* tcp reports the failure */
            continue;
        }
        if (tg.idx < 0) {
            pthread_rwlock_unlock(&sp->rw);
            mc__task_finish(t, MC_STATUS_FAILED, MC_ERR_ADDRESS_NOT_REGISTERED);
            return 0;
        }
        if (tg.shm_id < 0) {
            pthread_rwlock_unlock(&sp->rw);
            return MC__TP_DECLINED;
        }
        if (!mc__shm_ctrl_alive(sp->ctrl)) {
            /* killed without a word: what we map is a dead process's memory, and whoever
             * serves this name now (restarted, maybe at the same addresses) is someone else */
            pthread_rwlock_unlock(&sp->rw);
            mc__peer_mark_broken(p);
            if (mc__peer_refresh(e, p))
                return MC__TP_DECLINED; /* tcp reports the failure */
            continue;
        }
        m = mc__shm_find_map(sp, tg.shm_id);
        if (!m) {
            pthread_rwlock_unlock(&sp->rw);
            if (mc__shm_map_buffer(p, &tg))
                return MC__TP_DECLINED;
            continue;
        }
        ptr = m->ptr + (t->remote - m->addr);
        /* a peer's managed buffers are host memory; ours may be a GPU's, copied by the device
         * (devmem.h) straight into or out of the shared mapping */
        if (t->opcode == MC_OPCODE_WRITE)
            crc = mc__devmem_move(e->devmem, ptr, -1, t->local, t->local_device, t->len);
        else
            crc = mc__devmem_move(e->devmem, t->local, t->local_device, ptr, -1, t->len);
        g1 = atomic_load(sp->gen);
        pthread_rwlock_unlock(&sp->rw);
        if (crc) {
            mc__task_finish(t, MC_STATUS_FAILED, crc);
            return 0;
        }
        if (g1 != g0 && !mc__shm_still_registered(e, p, &tg)) {
            mc__task_finish(t, MC_STATUS_FAILED, MC_ERR_ADDRESS_NOT_REGISTERED);
            return 0;
        }
        atomic_store(&t->transferred, t->len);
        mc__transport_account(e, MC__TP_SHM, t->len);
        mc__task_finish(t, MC_STATUS_COMPLETED, 0);
        return 0;
    }
    return MC__TP_DECLINED;
}

/* Engine-wide: the owner side (shm_owner.c). Without it the engine still maps its peers'
 * memory; its own is reached over tcp. */
static int mc__shm_init(mc_engine_t *e) {
    if (mc__shm_owner_start(e))
        MC_WARN("shared memory transport unavailable; same-host peers will use tcp");
    return 0;
}

/* Same host and network namespace, a shareable buffer, and shm not turned off (protocol tcp)
 * nor passed over (protocol fabric asks for the fabric transport even on one host). */
static int mc__shm_carries(const mc_engine_t *e, const mc__route_t *r) {
    (void)e;
    return r->peer && r->proto != MC__PROTO_TCP && r->proto != MC__PROTO_FABRIC && r->same_host &&
           r->shm_id >= 0 && (r->reach & (1u << MC__TP_SHM));
}

/* Our part of the descriptor: {"socket": "@..."}, the abstract unix socket that hands out our
 * managed buffers (none when the owner side did not start). */
static void mc__shm_describe(const mc_engine_t *e, mc__desc_t *d) {
    const char *sock = mc__shm_owner_socket(e);
    cJSON *o;
    char *text;
    if (!sock || !*sock)
        return;
    o = cJSON_CreateObject();
    text = o && cJSON_AddStringToObject(o, "socket", sock) ? cJSON_PrintUnformatted(o) : NULL;
    if (!text || mc__desc_add_part(d, "shm", text))
        MC_WARN("shm: could not describe socket %s; same-host peers use another transport", sock);
    cJSON_free(text);
    cJSON_Delete(o);
}

static int mc__shm_desc_parse(const char *json, void **priv, void (**priv_free)(void *)) {
    cJSON *o = cJSON_Parse(json);
    mc__shm_desc_t *sd = mc__calloc(1, sizeof(*sd));
    int rc = MC_ERR_MALFORMED_JSON;
    if (!sd)
        rc = MC_ERR_MEMORY;
    else if (o && !mc__desc_json_str(o, "socket", sd->sock, sizeof(sd->sock)) && sd->sock[0] == '@')
        rc = 0;
    cJSON_Delete(o);
    if (rc) {
        mc__free(sd);
        return rc;
    }
    *priv = sd;
    *priv_free = mc__free;
    return 0;
}

static int mc__shm_peer_init(mc__peer_t *p) {
    mc__shm_peer_t *sp = mc__calloc(1, sizeof(*sp));
    if (!sp)
        return MC_ERR_MEMORY;
    pthread_rwlock_init(&sp->rw, NULL);
    sp->gen_seen = UINT64_MAX;
    p->tp_peer[MC__TP_SHM] = sp;
    return 0;
}

static void mc__shm_peer_destroy(mc__peer_t *p) {
    mc__shm_peer_t *sp = mc__shm_of(p);
    if (!sp)
        return;
    mc__shm_peer_reset(sp);
    pthread_rwlock_destroy(&sp->rw);
    mc__free(sp);
    p->tp_peer[MC__TP_SHM] = NULL;
}

/* Read before a descriptor is fetched: the descriptor is at least as new as this generation. */
static uint64_t mc__shm_fetch_token(mc__peer_t *p) {
    mc__shm_peer_t *sp = mc__shm_of(p);
    uint64_t gen = UINT64_MAX;
    pthread_rwlock_rdlock(&sp->rw);
    if (sp->gen)
        gen = atomic_load(sp->gen);
    pthread_rwlock_unlock(&sp->rw);
    return gen;
}

static void mc__shm_peer_swapped(mc__peer_t *p, uint64_t token, int restarted) {
    (void)restarted;
    mc__shm_of(p)->gen_seen = token;
}

/* A restarted peer's mappings are someone else's memory now; of a live one, those of buffers it
 * no longer registers go (their pages stay alive while we map them). */
static void mc__shm_peer_refreshed(mc__peer_t *p, int restarted) {
    mc__shm_peer_t *sp = mc__shm_of(p);
    (void)restarted;
    pthread_rwlock_wrlock(&sp->rw);
    pthread_mutex_lock(&p->lock);
    if (sp->instance_id && p->desc && sp->instance_id != p->desc->instance_id) {
        pthread_mutex_unlock(&p->lock);
        MC_INFO("segment %s restarted; dropping its mappings", p->name);
        mc__shm_peer_reset(sp);
    } else {
        size_t k = 0;
        for (size_t i = 0; i < sp->nmaps; i++) {
            mc__shm_map_t *m = &sp->maps[i];
            long j = p->desc ? mc__desc_find(p->desc, m->addr, m->len) : -1;
            if (j >= 0 && p->desc->bufs[j].shm_id == m->id)
                sp->maps[k++] = *m;
            else
                munmap(m->ptr, m->map_len);
        }
        sp->nmaps = k;
        pthread_mutex_unlock(&p->lock);
    }
    pthread_rwlock_unlock(&sp->rw);
}

const mc__transport_t mc__tp_shm = {.name = "shm",
                                    .id = MC__TP_SHM,
                                    .init = mc__shm_init,
                                    .release = mc__shm_owner_stop,
                                    .carries = mc__shm_carries,
                                    .submit = mc__shm_submit,
                                    .peer_init = mc__shm_peer_init,
                                    .peer_destroy = mc__shm_peer_destroy,
                                    .peer_fetch_token = mc__shm_fetch_token,
                                    .peer_swapped = mc__shm_peer_swapped,
                                    .peer_refreshed = mc__shm_peer_refreshed,
                                    .describe = mc__shm_describe,
                                    .desc_parse = mc__shm_desc_parse};
