/* Segment registry (mount, unmount, placement) and client liveness. */
#include <string.h>

#include "master/disk.h"
#include "master/master_internal.h"
#include "master/persist.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/log.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"

static int mc__seg_is(const mc__segment_t *s, const mc__mp_str_t *name, uint64_t base) {
    return s->base == base && s->name_len == name->len && memcmp(s->name, name->p, name->len) == 0;
}

int mc__client_touch(mc__master_t *m, const uint8_t *id) {
    uint64_t now = mc__now_ms();
    int unknown = 1;
    pthread_mutex_lock(&m->clients_mu);
    for (size_t i = 0; i < m->n_clients; i++) {
        if (memcmp(m->clients[i].id, id, MC_MP_CLIENT_ID_LEN) == 0) {
            m->clients[i].last_seen_ms = now;
            unknown = 0;
            goto out;
        }
    }
    if (m->n_clients == m->cap_clients) {
        size_t cap = m->cap_clients ? m->cap_clients * 2 : 16;
        mc__client_rec_t *p = mc__realloc(m->clients, cap * sizeof(*p));
        if (!p)
            goto out; /* untracked: it simply never expires */
        m->clients = p;
        m->cap_clients = cap;
    }
    memcpy(m->clients[m->n_clients].id, id, MC_MP_CLIENT_ID_LEN);
    m->clients[m->n_clients].last_seen_ms = now;
    m->n_clients++;
out:
    pthread_mutex_unlock(&m->clients_mu);
    return unknown;
}

uint32_t mc__segments_of(mc__master_t *m, const uint8_t *client) {
    uint32_t n = 0;
    pthread_rwlock_rdlock(&m->registry);
    for (uint32_t i = 0; i < m->n_slots; i++) {
        const mc__segment_t *s = m->slots[i];
        n += s && !s->dying && memcmp(s->owner, client, MC_MP_CLIENT_ID_LEN) == 0;
    }
    pthread_rwlock_unlock(&m->registry);
    return n;
}

static void mc__segment_drop(mc__master_t *m, uint32_t slot);

/* Registry lock held (read suffices: both flags are atomic). s's owner was heard from: it takes
 * placements again, and if it was restored, its objects may be evicted again. */
static void mc__segment_unawait(mc__master_t *m, mc__segment_t *s) {
    if (atomic_exchange(&s->awaiting_owner, 0) && atomic_fetch_sub(&m->n_awaiting, 1) == 1)
        MC_INFO("master: every restored segment's owner is back or gone: recovery is over");
}

static void mc__segment_heard(mc__master_t *m, mc__segment_t *s) {
    if (atomic_exchange(&s->unreachable, 0))
        atomic_fetch_sub(&m->n_unreachable, 1);
    mc__segment_unawait(m, s);
}

void mc__segment_restored(mc__master_t *m, mc__segment_t *seg) {
    if (!atomic_exchange(&seg->awaiting_owner, 1))
        atomic_fetch_add(&m->n_awaiting, 1);
}

int mc__segment_restore_add(mc__master_t *m, mc__segment_t *seg, uint32_t *slot) {
    mc__segment_t **slots = mc__realloc(m->slots, (size_t)(m->n_slots + 1) * sizeof(*slots));
    if (!slots)
        return MC_ERR_MEMORY;
    m->slots = slots;
    *slot = m->n_slots;
    m->slots[m->n_slots++] = seg;
    mc__gauge_space(m, 1, (int64_t)seg->alloc.total_bytes, (int64_t)seg->alloc.used_bytes);
    return 0;
}

int mc__master_recovering(const mc__master_t *m) {
    return atomic_load_explicit(&m->n_awaiting, memory_order_relaxed) > 0;
}

/* Registry write lock held; seg was just mounted. A segment is named after its owner's engine
 * (host:port), which one live process holds at a time, so an older mount of that name by
 * another client is a dead incarnation (a node killed and restarted under its name): it takes
 * no more placements from now on, rather than from its owner's expiry (client_ttl) on. Should
 * its owner still be alive after all, its next heartbeat makes it placeable again. */
static void mc__supersede_name(mc__master_t *m, const mc__segment_t *seg) {
    for (uint32_t i = 0; i < m->n_slots; i++) {
        mc__segment_t *s = m->slots[i];
        if (!s || s == seg || s->dying || s->name_len != seg->name_len ||
            memcmp(s->name, seg->name, seg->name_len) != 0 ||
            memcmp(s->owner, seg->owner, MC_MP_CLIENT_ID_LEN) == 0)
            continue;
        mc__segment_unawait(m, s); /* restored: no need to await an owner that is gone */
        if (!atomic_exchange(&s->unreachable, 1)) {
            atomic_fetch_add(&m->n_unreachable, 1);
            MC_INFO("segment %s base=0x%llx epoch=%llu: superseded by a new owner of its name; "
                    "no placements until its own owner heartbeats",
                    s->name, (unsigned long long)s->base, (unsigned long long)s->epoch);
        }
    }
}

static int mc__ranges_overlap(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen) {
    return a < b + blen && b < a + alen;
}

int mc__segment_mount(mc__master_t *m, const uint8_t *client, const mc__mp_str_t *name,
                      uint64_t base, uint64_t size, uint64_t epoch, uint8_t flags) {
    mc__segment_t *seg = NULL;
    uint32_t slot = 0;
    uint32_t replaced = UINT32_MAX;
    int rc = 0;
    if (name->len == 0 || name->len > MC_MP_MAX_SEGMENT_NAME || size < MC_SEG_ALIGN ||
        size > MC_MP_MAX_SEGMENT_SIZE || base + size < base)
        return MC_ERR_INVALID_PARAMS;
    /* A mount is word from its client as much as a heartbeat is. */
    mc__segments_reachable(m, client);
again:
    mc__client_touch(m, client);
    pthread_rwlock_wrlock(&m->registry);
    for (uint32_t i = 0; i < m->n_slots; i++) {
        mc__segment_t *s = m->slots[i];
        int mine;
        if (!s || s->name_len != name->len || memcmp(s->name, name->p, name->len) != 0)
            continue;
        mine = memcmp(s->owner, client, MC_MP_CLIENT_ID_LEN) == 0 && !s->dying;
        if (s->base == base && mine && s->epoch == epoch) {
            if (s->size != size)
                rc = MC_ERR_INVALID_PARAMS;
            else
                mc__segment_heard(m, s); /* e.g. restored: its owner is back */
            goto out; /* the same mount again (or the check found it): nothing to do */
        }
        if (flags & MC_MP_MOUNT_F_CHECK)
            continue;
        if (s->base == base && mine) {
            /* Its owner started a new incarnation of this memory: the old one's placements
             * must go before the new one takes any. */
            s->dying = 1;
            replaced = i;
            break;
        }
        /* Another mount of that memory (an alias, or someone else's claim on it) would let
         * two allocators hand out the same bytes. */
        if (mc__ranges_overlap(s->base, s->size, base, size)) {
            rc = MC_ERR_SEGMENT_ALREADY_EXISTS;
            goto out;
        }
    }
    if (replaced != UINT32_MAX) {
        pthread_rwlock_unlock(&m->registry);
        MC_INFO("segment %.*s base=0x%llx: new incarnation, dropping the old one", (int)name->len,
                (const char *)name->p, (unsigned long long)base);
        mc__segment_drop(m, replaced);
        replaced = UINT32_MAX;
        goto again;
    }
    if (flags & MC_MP_MOUNT_F_CHECK) {
        rc = MC_ERR_SEGMENT_NOT_FOUND;
        goto out;
    }
    for (slot = 0; slot < m->n_slots && m->slots[slot]; slot++)
        ;
    if (slot == m->n_slots) {
        mc__segment_t **p = mc__realloc(m->slots, (size_t)(m->n_slots + 1) * sizeof(*p));
        if (!p) {
            rc = MC_ERR_MEMORY;
            goto out;
        }
        m->slots = p;
        m->slots[m->n_slots++] = NULL;
    }
    seg = mc__calloc(1, sizeof(*seg));
    if (!seg) {
        rc = MC_ERR_MEMORY;
        goto out;
    }
    rc = mc__seg_alloc_init(&seg->alloc, size);
    if (rc) {
        mc__free(seg);
        goto out;
    }
    pthread_mutex_init(&seg->mu, NULL);
    memcpy(seg->name, name->p, name->len);
    seg->name_len = name->len;
    seg->base = base;
    seg->size = size;
    seg->epoch = epoch;
    memcpy(seg->owner, client, MC_MP_CLIENT_ID_LEN);
    seg->serial = atomic_fetch_add(&m->next_serial, 1);
    m->slots[slot] = seg;
    mc__supersede_name(m, seg);
    mc__persist_seg_mount(m, seg);
    mc__gauge_space(m, 1, (int64_t)seg->alloc.total_bytes, 0);
    atomic_fetch_add(&m->view_version, 1);
    MC_INFO("mounted segment %.*s base=0x%llx size=%llu epoch=%llu", (int)name->len,
            (const char *)name->p, (unsigned long long)base, (unsigned long long)size,
            (unsigned long long)epoch);
out:
    pthread_rwlock_unlock(&m->registry);
    return rc;
}

/* Drops the replicas that live in segment `slot`; objects left without one disappear. */
static int mc__drop_replicas_in(mc__master_t *m, mc__object_t *o, void *arg) {
    uint32_t slot = *(const uint32_t *)arg;
    mc__replica_t *reps = mc__obj_reps(o);
    uint8_t kept = 0;
    for (uint8_t i = 0; i < o->n_replicas; i++)
        if (reps[i].seg != slot)
            reps[kept++] = reps[i];
    if (kept == o->n_replicas)
        return 0;
    o->n_replicas = kept;
    return kept == 0;
}

static void mc__segment_drop(mc__master_t *m, uint32_t slot) {
    mc__segment_t *seg = NULL;
    /* 1. No new placements; the write lock also waits out put_starts that already allocated
     *    here but have not inserted their object yet. */
    pthread_rwlock_wrlock(&m->placement);
    pthread_rwlock_wrlock(&m->registry);
    m->slots[slot]->dying = 1;
    pthread_rwlock_unlock(&m->registry);
    pthread_rwlock_unlock(&m->placement);
    /* 2. Nothing may reference the slot afterwards. */
    mc__objects_sweep(m, mc__drop_replicas_in, &slot);
    mc__grave_filter(m, mc__drop_replicas_in, &slot);
    if (m->slot_dropped)
        m->slot_dropped(m, slot);
    /* 3. Forget it. */
    pthread_rwlock_wrlock(&m->registry);
    seg = m->slots[slot];
    m->slots[slot] = NULL;
    mc__persist_seg_drop(m, seg);
    mc__segment_heard(m, seg); /* gone: no longer counted as unreachable or awaited */
    mc__gauge_space(m, -1, -(int64_t)seg->alloc.total_bytes, -(int64_t)seg->alloc.used_bytes);
    atomic_fetch_add(&m->view_version, 1);
    pthread_rwlock_unlock(&m->registry);
    MC_INFO("unmounted segment %s base=0x%llx", seg->name, (unsigned long long)seg->base);
    mc__seg_alloc_destroy(&seg->alloc);
    pthread_mutex_destroy(&seg->mu);
    mc__free(seg);
}

int32_t mc__segment_unreachable(mc__master_t *m, const mc__mp_str_t *name) {
    int32_t rc = MC_ERR_SEGMENT_NOT_FOUND;
    if (name->len == 0 || name->len > MC_MP_MAX_SEGMENT_NAME)
        return MC_ERR_INVALID_PARAMS;
    pthread_rwlock_rdlock(&m->registry);
    for (uint32_t i = 0; i < m->n_slots; i++) {
        mc__segment_t *s = m->slots[i];
        if (s && s->name_len == name->len && !memcmp(s->name, name->p, name->len)) {
            if (!atomic_exchange(&s->unreachable, 1)) {
                atomic_fetch_add(&m->n_unreachable, 1);
                MC_INFO("segment %.*s reported unreachable: no placements until its owner "
                        "heartbeats",
                        (int)name->len, (const char *)name->p);
            }
            rc = 0;
        }
    }
    pthread_rwlock_unlock(&m->registry);
    return rc;
}

void mc__segments_reachable(mc__master_t *m, const uint8_t *client) {
    if (atomic_load(&m->n_unreachable) == 0 && atomic_load(&m->n_awaiting) == 0)
        return; /* every heartbeat comes here: no scan while nothing is marked */
    pthread_rwlock_rdlock(&m->registry);
    for (uint32_t i = 0; i < m->n_slots; i++) {
        mc__segment_t *s = m->slots[i];
        if (s && memcmp(s->owner, client, MC_MP_CLIENT_ID_LEN) == 0)
            mc__segment_heard(m, s);
    }
    pthread_rwlock_unlock(&m->registry);
}

int mc__segment_unmount(mc__master_t *m, const uint8_t *client, const mc__mp_str_t *name,
                        uint64_t base) {
    uint32_t slot = UINT32_MAX;
    int rc = MC_ERR_SEGMENT_NOT_FOUND;
    pthread_rwlock_wrlock(&m->registry);
    for (uint32_t i = 0; i < m->n_slots; i++) {
        mc__segment_t *s = m->slots[i];
        if (s && !s->dying && mc__seg_is(s, name, base)) {
            if (memcmp(s->owner, client, MC_MP_CLIENT_ID_LEN) != 0) {
                rc = MC_ERR_ILLEGAL_CLIENT;
            } else {
                /* Claim it so a concurrent unmount or expiry does not drop it twice. */
                s->dying = 1;
                slot = i;
                rc = 0;
            }
            break;
        }
    }
    pthread_rwlock_unlock(&m->registry);
    if (rc == 0)
        mc__segment_drop(m, slot);
    return rc;
}

/* Expired clients logged one by one per pass; the rest of a pass gets one summary line, so that
 * a mass expiry (or a flood of short-lived fake clients) cannot flood the log. */
#define MC__EXPIRE_LOG_EACH 3

/* Unmounts every live segment the client owns (its objects handled as any unmount handles
 * them); returns how many. */
static unsigned long mc__client_drop_segments(mc__master_t *m, const uint8_t *id) {
    unsigned long n = 0;
    for (;; n++) {
        uint32_t slot = UINT32_MAX;
        pthread_rwlock_wrlock(&m->registry);
        for (uint32_t i = 0; i < m->n_slots; i++) {
            mc__segment_t *s = m->slots[i];
            if (s && !s->dying && memcmp(s->owner, id, MC_MP_CLIENT_ID_LEN) == 0) {
                s->dying = 1;
                slot = i;
                break;
            }
        }
        pthread_rwlock_unlock(&m->registry);
        if (slot == UINT32_MAX)
            break;
        mc__segment_drop(m, slot);
    }
    mc__disk_client_gone(m, id); /* its disk copies go with it (it re-announces them) */
    return n;
}

void mc__clients_expire(mc__master_t *m, uint64_t now) {
    uint64_t ttl = (uint64_t)m->cfg.client_ttl_s * 1000u;
    unsigned long expired = 0, segments = 0;
    for (;; expired++) {
        uint8_t id[MC_MP_CLIENT_ID_LEN];
        int found = 0;
        pthread_mutex_lock(&m->clients_mu);
        for (size_t i = 0; i < m->n_clients; i++) {
            if (m->clients[i].last_seen_ms + ttl <= now) {
                memcpy(id, m->clients[i].id, sizeof(id));
                m->clients[i] = m->clients[--m->n_clients];
                found = 1;
                break;
            }
        }
        pthread_mutex_unlock(&m->clients_mu);
        if (!found)
            break;
        mc__gauge_client_gone(m, 1);
        if (expired < MC__EXPIRE_LOG_EACH)
            MC_WARN("client expired after %llds without heartbeat; unmounting its segments",
                    (long long)m->cfg.client_ttl_s);
        segments += mc__client_drop_segments(m, id);
    }
    if (expired > MC__EXPIRE_LOG_EACH)
        MC_WARN("%lu more clients expired after %llds without heartbeat (%lu segments unmounted "
                "in all)",
                expired - MC__EXPIRE_LOG_EACH, (long long)m->cfg.client_ttl_s, segments);
}

int mc__client_unregister(mc__master_t *m, const uint8_t *id) {
    unsigned long segments = 0;
    int known = 0;
    pthread_mutex_lock(&m->clients_mu);
    for (size_t i = 0; i < m->n_clients; i++) {
        if (memcmp(m->clients[i].id, id, MC_MP_CLIENT_ID_LEN) == 0) {
            m->clients[i] = m->clients[--m->n_clients];
            known = 1;
            break;
        }
    }
    pthread_mutex_unlock(&m->clients_mu);
    /* Segments go even when the record is missing (its allocation failed, or a mount raced the
     * leave): whatever the client still owns is unmounted now rather than left to nobody. */
    segments = mc__client_drop_segments(m, id);
    if (known || segments) {
        mc__gauge_client_gone(m, 0);
        MC_INFO("client left (unregistered); %lu segments unmounted", segments);
    }
    return known;
}

void mc__segments_destroy(mc__master_t *m) {
    for (uint32_t i = 0; i < m->n_slots; i++) {
        mc__segment_t *s = m->slots[i];
        if (!s)
            continue;
        mc__seg_alloc_destroy(&s->alloc);
        pthread_mutex_destroy(&s->mu);
        mc__free(s);
    }
    mc__free(m->slots);
    m->slots = NULL;
    m->n_slots = 0;
    mc__free(m->clients);
    m->clients = NULL;
}

uint32_t mc__segment_name(mc__master_t *m, uint32_t slot, char *out, uint64_t *base,
                          uint64_t *epoch) {
    uint32_t n = 0;
    pthread_rwlock_rdlock(&m->registry);
    if (slot < m->n_slots && m->slots[slot]) {
        n = m->slots[slot]->name_len;
        memcpy(out, m->slots[slot]->name, n);
        if (base)
            *base = m->slots[slot]->base;
        if (epoch)
            *epoch = m->slots[slot]->epoch;
    }
    out[n] = '\0';
    pthread_rwlock_unlock(&m->registry);
    return n;
}

int mc__segment_owned_by(mc__master_t *m, uint32_t slot, const uint8_t *client) {
    int yes;
    pthread_rwlock_rdlock(&m->registry);
    yes = slot < m->n_slots && m->slots[slot] && !m->slots[slot]->dying &&
          memcmp(m->slots[slot]->owner, client, MC_MP_CLIENT_ID_LEN) == 0;
    pthread_rwlock_unlock(&m->registry);
    return yes;
}

int mc__segment_live(mc__master_t *m, uint32_t slot) {
    int yes;
    pthread_rwlock_rdlock(&m->registry);
    yes = slot < m->n_slots && m->slots[slot] && !m->slots[slot]->dying;
    pthread_rwlock_unlock(&m->registry);
    return yes;
}

int mc__segment_named(mc__master_t *m, const mc__mp_str_t *name, uint8_t *owner) {
    int found = 0;
    pthread_rwlock_rdlock(&m->registry);
    for (uint32_t i = 0; i < m->n_slots && !found; i++) {
        const mc__segment_t *s = m->slots[i];
        if (s && !s->dying && s->name_len == name->len && !memcmp(s->name, name->p, name->len)) {
            found = 1;
            if (owner)
                memcpy(owner, s->owner, MC_MP_CLIENT_ID_LEN);
        }
    }
    pthread_rwlock_unlock(&m->registry);
    return found;
}

int mc__slot_named(mc__master_t *m, uint32_t slot, const mc__mp_str_t *name) {
    int yes;
    pthread_rwlock_rdlock(&m->registry);
    yes = slot < m->n_slots && m->slots[slot] && m->slots[slot]->name_len == name->len &&
          !memcmp(m->slots[slot]->name, name->p, name->len);
    pthread_rwlock_unlock(&m->registry);
    return yes;
}

int mc__segment_set_drain(mc__master_t *m, const char *name, int from, int state) {
    int n = 0;
    pthread_rwlock_wrlock(&m->placement);
    pthread_rwlock_wrlock(&m->registry);
    for (uint32_t i = 0; i < m->n_slots; i++) {
        mc__segment_t *s = m->slots[i];
        if (!s || s->dying || strcmp(s->name, name) != 0 ||
            (from >= 0 && atomic_load(&s->drain) != from))
            continue;
        atomic_store(&s->drain, state);
        n++;
    }
    if (n)
        atomic_fetch_add(&m->view_version, 1);
    pthread_rwlock_unlock(&m->registry);
    pthread_rwlock_unlock(&m->placement);
    if (n)
        MC_INFO("segment %s: %s", name,
                state == MC__SEG_DRAINING  ? "draining (no new placements)"
                : state == MC__SEG_DRAINED ? "drained (awaits its unmount)"
                                           : "takes placements again");
    return n;
}

int mc__segment_status(mc__master_t *m, const char *name) {
    int st = -1;
    pthread_rwlock_rdlock(&m->registry);
    for (uint32_t i = 0; i < m->n_slots; i++) {
        const mc__segment_t *s = m->slots[i];
        if (!s || strcmp(s->name, name) != 0)
            continue;
        if (s->dying) {
            st = MC__SEG_UNMOUNTING;
            continue;
        }
        st = atomic_load(&s->drain);
        if (st == 0)
            st = MC__SEG_OK;
        break;
    }
    pthread_rwlock_unlock(&m->registry);
    return st;
}

/* --- placement --- */

static int mc__name_used(mc__master_t *m, const mc__replica_t *out, int n, const mc__segment_t *s) {
    for (int i = 0; i < n; i++) {
        const mc__segment_t *o = m->slots[out[i].seg];
        if (o == s || (o->name_len == s->name_len && !memcmp(o->name, s->name, s->name_len)))
            return 1;
    }
    return 0;
}

static int mc__slot_used(const mc__replica_t *out, int n, uint32_t slot) {
    for (int i = 0; i < n; i++)
        if (out[i].seg == slot)
            return 1;
    return 0;
}

static int mc__is_preferred(const mc__replicate_config_t *cfg, const mc__segment_t *s) {
    for (uint32_t i = 0; i < cfg->n_preferred; i++)
        if (cfg->preferred[i].len == s->name_len &&
            !memcmp(cfg->preferred[i].p, s->name, s->name_len))
            return 1;
    return 0;
}

static int mc__try_alloc(mc__master_t *m, uint32_t slot, uint64_t len, mc__replica_t *r) {
    mc__segment_t *s = m->slots[slot];
    uint64_t off = 0;
    uint32_t h;
    pthread_mutex_lock(&s->mu);
    h = mc__seg_alloc(&s->alloc, len, &off);
    pthread_mutex_unlock(&s->mu);
    if (h == MC_SEG_NIL)
        return 0;
    mc__gauge_space(m, 0, 0, (int64_t)mc__seg_round(len));
    mc__persist_alloc(m, s, off, mc__seg_round(len));
    r->seg = slot;
    r->block = h;
    r->off = off;
    return 1;
}

/* Passes, each filling what the previous left: preferred segments, then segments on hosts not
 * used yet (distinct names survive a host loss), then any unused segment. */
int mc__place(mc__master_t *m, uint64_t len, const mc__replicate_config_t *cfg,
              mc__replica_t *out) {
    int want = (int)cfg->replica_num;
    int n = 0;
    uint32_t start;
    pthread_rwlock_rdlock(&m->registry);
    if (m->n_slots == 0)
        goto out;
    start = __atomic_fetch_add(&m->place_cursor, 1, __ATOMIC_RELAXED) % m->n_slots;
    for (int pass = 0; pass < 3 && n < want; pass++) {
        if (pass == 0 && cfg->n_preferred == 0)
            continue;
        for (uint32_t k = 0; k < m->n_slots && n < want; k++) {
            uint32_t slot = (start + k) % m->n_slots;
            mc__segment_t *s = m->slots[slot];
            if (!mc__seg_placeable(s) || s->alloc.total_bytes < len || mc__slot_used(out, n, slot))
                continue;
            if (pass == 0 && !mc__is_preferred(cfg, s))
                continue;
            if (pass == 1 && mc__name_used(m, out, n, s))
                continue;
            n += mc__try_alloc(m, slot, len, &out[n]);
        }
    }
out:
    pthread_rwlock_unlock(&m->registry);
    return n > 0 ? n : MC_ERR_NO_AVAILABLE_HANDLE;
}

int mc__place_on(mc__master_t *m, uint64_t len, const mc__mp_str_t *name,
                 const mc__replica_t *avoid, int n_avoid, mc__replica_t *out) {
    int placed = 0;
    pthread_rwlock_rdlock(&m->registry);
    for (uint32_t slot = 0; slot < m->n_slots && !placed; slot++) {
        mc__segment_t *s = m->slots[slot];
        if (!mc__seg_placeable(s) || s->name_len != name->len ||
            memcmp(s->name, name->p, name->len) != 0 || s->alloc.total_bytes < len ||
            mc__slot_used(avoid, n_avoid, slot))
            continue;
        placed = mc__try_alloc(m, slot, len, out);
    }
    pthread_rwlock_unlock(&m->registry);
    return placed ? 0 : MC_ERR_NO_AVAILABLE_HANDLE;
}
