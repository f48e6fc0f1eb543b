/* Approximate-LRU eviction, discard of abandoned puts, and the monitor thread that runs them
 * together with client expiry. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "master/disk.h"
#include "master/master_internal.h"
#include "master/persist.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/log.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"

/* Segments where eviction can make room for one replica: a byte per registry slot, 1 when the
 * slot's free space plus what eviction could free there reaches the replica's size. NULL when
 * the caller needs no particular room (background eviction). */
typedef struct mc__room {
    uint8_t *ok;
    uint32_t n;
} mc__room_t;

/* Slots whose objects stay whatever their age: a byte per registry slot, 1 when the segment
 * takes no placements (restored and awaiting its owner, reported unreachable, dying). Evicting
 * there could not make room for any put, and a restored segment's objects are acknowledged data
 * that its owner may be about to serve again; an object with a replica in such a slot is not a
 * candidate. Taken once per eviction run; slots mounted since are not frozen. */
typedef struct mc__frozen {
    uint8_t *slot;
    uint32_t n;
} mc__frozen_t;

typedef struct mc__collect {
    uint64_t now;
    int soft; /* 0: plain objects; 1: soft-pinned ones */
    const mc__frozen_t *frozen;
    const mc__room_t *room;
    mc__cand_t *v;
    size_t n, cap;
    int oom;
} mc__collect_t;

static int mc__on_frozen(const mc__frozen_t *f, const mc__object_t *o) {
    const mc__replica_t *reps = mc__obj_reps((mc__object_t *)(uintptr_t)o);
    for (uint8_t i = 0; i < o->n_replicas; i++)
        if (reps[i].seg < f->n && f->slot[reps[i].seg])
            return 1;
    return 0;
}

/* Tier of an object for eviction: -1 never (leased, unfinished, hard-pinned, on a frozen
 * segment), 0 plain, 1 soft-pinned (only when allowed, and only after every plain candidate). */
static int mc__evict_tier(const mc__master_t *m, const mc__object_t *o, uint64_t now,
                          const mc__frozen_t *frozen) {
    if (!(o->flags & MC__OBJ_COMPLETE) ||
        (o->flags & (MC__OBJ_HARD_PIN | MC__OBJ_OFFLOAD_PENDING)) || o->lease_until > now ||
        mc__on_frozen(frozen, o))
        return -1;
    if ((o->flags & MC__OBJ_SOFT_PIN) && o->soft_pin_until > now)
        return m->cfg.allow_evict_soft_pinned_objects ? 1 : -1;
    return 0;
}

static uint64_t mc__obj_bytes(mc__object_t *o) {
    return mc__seg_round(o->size) * o->n_replicas;
}

/* Evicting o helps the caller only when one of its replicas frees space where room can be made;
 * elsewhere it would destroy data without making the put fit. */
static int mc__helps(const mc__room_t *room, mc__object_t *o) {
    const mc__replica_t *reps = mc__obj_reps(o);
    if (!room)
        return 1;
    for (uint8_t i = 0; i < o->n_replicas; i++)
        if (reps[i].seg < room->n && room->ok[reps[i].seg])
            return 1;
    return 0;
}

static int mc__collect_visit(mc__master_t *m, mc__object_t *o, void *arg) {
    mc__collect_t *c = arg;
    if (c->oom || mc__evict_tier(m, o, c->now, c->frozen) != c->soft || !mc__helps(c->room, o))
        return 0;
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 1024;
        mc__cand_t *p = mc__realloc(c->v, cap * sizeof(*p));
        if (!p) {
            c->oom = 1;
            return 0;
        }
        c->v = p;
        c->cap = cap;
    }
    c->v[c->n].access_ms = o->access_ms;
    c->v[c->n].bytes = mc__obj_bytes(o);
    c->n++;
    return 0;
}

/* A selection, not a sort: each round partitions the range left around a pivot, keeps the side
 * the answer is on and counts the bytes it passed, so the expected cost is linear where sorting
 * a million candidates took most of an eviction pass (which a put waiting for room waits out). */
uint64_t mc__evict_threshold(mc__cand_t *v, size_t n, uint64_t target) {
    size_t lo = 0, hi = n;  /* the answer's candidate is in v[lo..hi) */
    uint64_t need = target; /* bytes still to pass within v[lo..hi) */
    uint64_t rnd = 0x9e3779b97f4a7c15ull ^ n;
    if (n == 0)
        return 0;
    while (hi - lo > 1) {
        size_t lt = lo, gt = hi, i = lo;
        uint64_t pivot, below = 0, equal = 0;
        rnd = rnd * 6364136223846793005ull + 1442695040888963407ull;
        pivot = v[lo + (size_t)((rnd >> 33) % (hi - lo))].access_ms;
        /* three ways: v[lo..lt) older than the pivot, v[lt..gt) as old, v[gt..hi) newer */
        while (i < gt) {
            mc__cand_t c = v[i];
            if (c.access_ms < pivot) {
                v[i++] = v[lt];
                v[lt++] = c;
                below += c.bytes;
            } else if (c.access_ms > pivot) {
                v[i] = v[--gt];
                v[gt] = c;
            } else {
                i++;
                equal += c.bytes;
            }
        }
        if (need <= below && lt > lo) {
            hi = lt;
        } else if (need <= below + equal || gt == hi) {
            return pivot;
        } else {
            need -= below + equal;
            lo = gt;
        }
    }
    return v[lo].access_ms;
}

typedef struct mc__evict_pass {
    uint64_t now;
    int soft;
    const mc__frozen_t *frozen;
    const mc__room_t *room;
    uint64_t threshold; /* evict objects last used at or before this */
    uint64_t target, freed, count;
} mc__evict_pass_t;

static int mc__evict_visit(mc__master_t *m, mc__object_t *o, void *arg) {
    mc__evict_pass_t *p = arg;
    if (p->freed >= p->target || mc__evict_tier(m, o, p->now, p->frozen) != p->soft ||
        o->access_ms > p->threshold || !mc__helps(p->room, o))
        return 0;
    if (mc__disk_evict_offload(m, o)) {
        /* offload_on_evict: it leaves memory once its disk copy is durable (the next pass, or
         * the put waiting for it, evicts it then); counted, so this pass stops at its target
         * rather than sending everything to disk. */
        p->freed += mc__obj_bytes(o);
        return 0;
    }
    p->freed += mc__obj_bytes(o);
    p->count++;
    return 1;
}

/* One tier: find the access time below which enough bytes are, then evict up to it. The two
 * passes see slightly different states (the shards are not frozen): that is the approximation. */
static uint64_t mc__evict_tier_run(mc__master_t *m, int soft, const mc__frozen_t *frozen,
                                   const mc__room_t *room, uint64_t target, int background,
                                   uint64_t *count) {
    /* A background pass yields to requests until a put waits for it; a pass that a put asked
     * for (blocking) does not yield at all. */
    const _Atomic int *urgent = background ? &m->evict_waiting : NULL;
    mc__collect_t c;
    mc__evict_pass_t p;
    memset(&c, 0, sizeof(c));
    memset(&p, 0, sizeof(p));
    c.now = mc__now_ms();
    c.soft = soft;
    c.frozen = frozen;
    c.room = room;
    mc__objects_sweep_yielding(m, mc__collect_visit, &c, urgent);
    if (c.n == 0)
        goto out;
    p.threshold = mc__evict_threshold(c.v, c.n, target);
    p.now = c.now;
    p.soft = soft;
    p.frozen = frozen;
    p.room = room;
    p.target = target;
    mc__objects_sweep_yielding(m, mc__evict_visit, &p, urgent);
    *count += p.count;
out:
    mc__free(c.v);
    return p.freed;
}

typedef struct mc__room_scan {
    uint64_t now;
    const mc__frozen_t *frozen;
    uint64_t *evictable; /* per slot */
    uint32_t n;
    int soft_ok;
} mc__room_scan_t;

static int mc__room_visit(mc__master_t *m, mc__object_t *o, void *arg) {
    mc__room_scan_t *r = arg;
    const mc__replica_t *reps = mc__obj_reps(o);
    int tier = mc__evict_tier(m, o, r->now, r->frozen);
    if (tier < 0 || (tier == 1 && !r->soft_ok))
        return 0;
    for (uint8_t i = 0; i < o->n_replicas; i++)
        if (reps[i].seg < r->n)
            r->evictable[reps[i].seg] += mc__seg_round(o->size);
    return 0;
}

/* Which segments could hold `fit` bytes once their evictable objects are gone: only segments
 * placement would use (a put can never land elsewhere). Returns 1 when at least one could, 0
 * when eviction cannot help (nothing may be evicted), or -1 when memory ran out (the caller then
 * evicts nothing). The free-space figure ignores fragmentation: the allocator coalesces what
 * eviction frees. */
static int mc__room_find(mc__master_t *m, uint64_t fit, const mc__frozen_t *frozen,
                         mc__room_t *room) {
    mc__room_scan_t scan;
    uint64_t *free_bytes = NULL; /* per slot; UINT64_MAX: gone, dying or smaller than fit */
    int any = 0, rc = -1;
    memset(&scan, 0, sizeof(scan));
    room->ok = NULL;
    room->n = 0;
    pthread_rwlock_rdlock(&m->registry);
    scan.n = m->n_slots;
    free_bytes = scan.n ? mc__calloc(scan.n, sizeof(*free_bytes)) : NULL;
    for (uint32_t i = 0; free_bytes && i < scan.n; i++) {
        mc__segment_t *s = m->slots[i];
        free_bytes[i] = UINT64_MAX;
        if (!mc__seg_placeable(s) || s->alloc.total_bytes < fit)
            continue;
        pthread_mutex_lock(&s->mu);
        free_bytes[i] = s->alloc.total_bytes - s->alloc.used_bytes;
        pthread_mutex_unlock(&s->mu);
        any = 1;
    }
    pthread_rwlock_unlock(&m->registry);
    if (scan.n && !free_bytes)
        goto out;
    if (!any) {
        rc = 0; /* larger than every segment: no eviction can help */
        goto out;
    }
    scan.now = mc__now_ms();
    scan.frozen = frozen;
    scan.soft_ok = m->cfg.allow_evict_soft_pinned_objects;
    scan.evictable = mc__calloc(scan.n, sizeof(*scan.evictable));
    room->ok = mc__calloc(scan.n, 1);
    if (!scan.evictable || !room->ok)
        goto out;
    mc__objects_sweep(m, mc__room_visit, &scan);
    rc = 0;
    for (uint32_t i = 0; i < scan.n; i++) {
        if (free_bytes[i] != UINT64_MAX && free_bytes[i] + scan.evictable[i] >= fit) {
            room->ok[i] = 1;
            rc = 1;
        }
    }
    room->n = scan.n;
out:
    if (rc != 1) {
        mc__free(room->ok);
        room->ok = NULL;
        room->n = 0;
    }
    mc__free(scan.evictable);
    mc__free(free_bytes);
    return rc;
}

/* The frozen slots (mc__frozen_t) as the registry says now; 0, or -1 when memory ran out. */
static int mc__frozen_take(mc__master_t *m, mc__frozen_t *f) {
    int rc = 0;
    pthread_rwlock_rdlock(&m->registry);
    f->n = m->n_slots;
    f->slot = f->n ? mc__calloc(f->n, 1) : NULL;
    if (f->n && !f->slot)
        rc = -1;
    for (uint32_t i = 0; rc == 0 && i < f->n; i++)
        f->slot[i] = m->slots[i] && !mc__seg_placeable(m->slots[i]);
    pthread_rwlock_unlock(&m->registry);
    return rc;
}

uint64_t mc__evict(mc__master_t *m, uint64_t need, uint64_t fit, int blocking) {
    uint64_t cap = (uint64_t)atomic_load(&m->capacity_bytes);
    uint64_t used = (uint64_t)atomic_load(&m->used_bytes);
    uint64_t target = (uint64_t)(m->cfg.eviction_ratio * (double)cap);
    uint64_t high = (uint64_t)(m->cfg.eviction_high_watermark_ratio * (double)cap);
    uint64_t freed = 0, count = 0;
    mc__room_t room = {NULL, 0};
    mc__frozen_t frozen = {NULL, 0};
    const mc__room_t *filter = NULL;
    if (blocking) {
        atomic_fetch_add(&m->evict_waiting, 1);
        pthread_mutex_lock(&m->evict_mu);
        atomic_fetch_sub(&m->evict_waiting, 1);
    } else if (pthread_mutex_trylock(&m->evict_mu) != 0) {
        return 0;
    }
    if (target < need)
        target = need;
    if (used > high && target < used - high)
        target = used - high;
    /* Without the frozen slots nothing can be evicted safely: evict nothing this time. */
    if (target == 0 || mc__frozen_take(m, &frozen) != 0)
        goto out;
    if (fit) {
        if (mc__room_find(m, fit, &frozen, &room) != 1)
            goto out;
        filter = &room;
    }
    freed = mc__evict_tier_run(m, 0, &frozen, filter, target, !blocking, &count);
    if (freed < target && m->cfg.allow_evict_soft_pinned_objects)
        freed += mc__evict_tier_run(m, 1, &frozen, filter, target - freed, !blocking, &count);
    mc__gauge_eviction(m, count, freed);
    if (count)
        MC_INFO("evicted %llu objects, %llu bytes", (unsigned long long)count,
                (unsigned long long)freed);
out:
    pthread_mutex_unlock(&m->evict_mu);
    mc__free(room.ok);
    mc__free(frozen.slot);
    return freed;
}

void mc__discard_stale_puts(mc__master_t *m, uint64_t now) {
    uint64_t discard = (uint64_t)m->cfg.put_start_discard_timeout_s * 1000u;
    for (int si = 0; si < MC__SHARDS; si++) {
        mc__shard_t *s = &m->shards[si];
        uint64_t oldest = UINT64_MAX; /* of the unfinished puts the walk leaves */
        pthread_mutex_lock(&s->mu);
        if (!s->incomplete || s->incomplete_since + discard > now) {
            pthread_mutex_unlock(&s->mu);
            continue; /* none can be due yet */
        }
        uint64_t walked = 0;
        for (uint32_t b = 0; s->incomplete && b <= s->mask; b++) {
            mc__object_t *o = s->buckets[b];
            while (o) {
                mc__object_t *next = o->next;
                walked++;
                if (!mc__maybe_discard(m, s, o, now) && !(o->flags & MC__OBJ_COMPLETE) &&
                    o->access_ms < oldest)
                    oldest = o->access_ms;
                o = next;
            }
        }
        s->incomplete_since = oldest;
        pthread_mutex_unlock(&s->mu);
        atomic_fetch_add(&m->stale_put_sweep_objects, walked);
    }
}

static void mc__report(mc__master_t *m) {
    fprintf(stderr,
            "mooncake_master: objects=%lld bytes=%lld segments=%lld capacity=%lld used=%lld "
            "evictions=%llu\n",
            (long long)atomic_load(&m->n_objects), (long long)atomic_load(&m->object_bytes),
            (long long)atomic_load(&m->n_segments), (long long)atomic_load(&m->capacity_bytes),
            (long long)atomic_load(&m->used_bytes), (unsigned long long)atomic_load(&m->evictions));
}

void *mc__monitor_main(void *arg) {
    mc__master_t *m = arg;
    uint64_t last_report = mc__now_ms();
    uint64_t last_evict = 0;
    pthread_mutex_lock(&m->mon_mu);
    while (!m->stopping) {
        struct timespec ts;
        int evict = 0;
        uint64_t now;
        ts = mc__realtime_after_ms(100);
        if (!m->evict_wanted)
            pthread_cond_timedwait(&m->mon_cv, &m->mon_mu, &ts);
        if (m->stopping)
            break;
        evict = m->evict_wanted;
        m->evict_wanted = 0;
        pthread_mutex_unlock(&m->mon_mu);

        now = mc__now_ms();
        mc__clients_expire(m, now);
        mc__discard_stale_puts(m, now);
        mc__grave_release(m, now, 0);
        mc__tasks_expire(m, now);
        mc__persist_commit(m); /* what this pass freed and removed */
        mc__persist_maybe_compact(m);
        /* Background eviction scans every object; when nothing is evictable (all leased) that
         * scan must not run back to back. */
        if ((evict ||
             (double)atomic_load(&m->used_bytes) >
                 m->cfg.eviction_high_watermark_ratio * (double)atomic_load(&m->capacity_bytes)) &&
            atomic_load(&m->capacity_bytes) > 0 && now - last_evict >= 200) {
            mc__evict(m, 0, 0, 0);
            last_evict = now;
        }
        mc__disk_promote_retry(m);
        if (m->cfg.enable_metric_reporting && now - last_report >= 10000) {
            mc__report(m);
            last_report = now;
        }
        pthread_mutex_lock(&m->mon_mu);
    }
    pthread_mutex_unlock(&m->mon_mu);
    return NULL;
}
