/* Object table: 64 shards, each a chained hash table whose bucket array doubles with its load.
 * Records are single allocations with the key inline, so 1M objects cost ~100 bytes each plus
 * the key (see docs/master.md for the measured figure). */
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "master/master_internal.h"
#include "master/persist.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"

#define MC__MIN_BUCKETS 64u

uint32_t mc__key_hash(const uint8_t *key, uint32_t len) {
    return (uint32_t)XXH3_64bits(key, len);
}

mc__shard_t *mc__shard_of(mc__master_t *m, uint32_t hash) {
    /* Top bits pick the shard, low bits the bucket, so the two stay independent. */
    return &m->shards[hash >> 26];
}

int mc__shard_init(mc__shard_t *s) {
    memset(s, 0, sizeof(*s));
    s->buckets = mc__calloc(MC__MIN_BUCKETS, sizeof(*s->buckets));
    if (!s->buckets)
        return MC_ERR_MEMORY;
    s->mask = MC__MIN_BUCKETS - 1;
    pthread_mutex_init(&s->mu, NULL);
    return 0;
}

void mc__shard_destroy(mc__master_t *m, mc__shard_t *s) {
    if (!s->buckets)
        return;
    for (uint32_t i = 0; i <= s->mask; i++) {
        mc__object_t *o = s->buckets[i];
        while (o) {
            mc__object_t *next = o->next;
            /* Segments are gone by now; only the records need freeing. */
            mc__free(o);
            o = next;
        }
    }
    mc__free(s->buckets);
    __atomic_store_n(&s->buckets, NULL, __ATOMIC_RELAXED);
    while (s->retired) {
        mc__object_t **next = (mc__object_t **)(void *)s->retired[0];
        mc__free(s->retired);
        s->retired = next;
    }
    pthread_mutex_destroy(&s->mu);
}

mc__object_t *mc__shard_find(mc__shard_t *s, uint32_t hash, const uint8_t *key, uint32_t len) {
    for (mc__object_t *o = s->buckets[hash & s->mask]; o; o = o->next)
        if (o->hash == hash && o->key_len == len && memcmp(o->data, key, len) == 0)
            return o;
    return NULL;
}

/* Prefetching reads the table without the shard's lock: only as a hint, so a table that grows
 * or a chain that changes meanwhile leaves a stale address, which a prefetch tolerates (it never
 * faults). The loads that get that address must not fault either: a bucket array stays mapped
 * after a growth replaced it (mc__retire_buckets). The fields it reads (the bucket array, its
 * mask, the bucket slots) are therefore read as atomics here and written as atomics wherever they
 * change (mc__slot_set). */
static inline void mc__slot_set(mc__object_t **slot, mc__object_t *o) {
    __atomic_store_n(slot, o, __ATOMIC_RELAXED);
}

/* The mask first: a growth stores the new array before the new mask, so a reader that sees the
 * new mask sees the new array, and one that sees the old mask indexes either array within it. */
static mc__object_t **mc__bucket_hint(const mc__shard_t *s, uint32_t hash) {
    uint32_t mask = __atomic_load_n(&s->mask, __ATOMIC_ACQUIRE);
    mc__object_t **b = __atomic_load_n(&s->buckets, __ATOMIC_ACQUIRE);
    return b ? &b[hash & mask] : NULL;
}

void mc__shard_prefetch(const mc__shard_t *s, uint32_t hash) {
    mc__object_t **slot = mc__bucket_hint(s, hash);
    if (slot)
        __builtin_prefetch(slot);
}

void mc__shard_prefetch_object(const mc__shard_t *s, uint32_t hash) {
    mc__object_t **slot = mc__bucket_hint(s, hash);
    mc__object_t *o = slot ? __atomic_load_n(slot, __ATOMIC_RELAXED) : NULL;
    if (o)
        __builtin_prefetch(&o->hash); /* the line a look-up compares first */
}

/* Not freed: see retired (master_state.h). Its first slot links the retired arrays (a prefetch
 * that reads it there prefetches an array, which is harmless); its whole pages past that slot go
 * back to the system but stay mapped, so a late reader finds empty buckets there. Kept whole, a
 * million objects' retired arrays cost 8 more bytes of resident memory per object. */
static void mc__retire_buckets(mc__shard_t *s, mc__object_t **old, size_t n) {
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)&old[1] + page - 1) & ~(page - 1);
    uintptr_t hi = (uintptr_t)&old[n] & ~(page - 1);
    mc__slot_set(&old[0], (mc__object_t *)(void *)s->retired);
    s->retired = old;
    if (hi > lo)
        (void)madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

static void mc__shard_grow(mc__shard_t *s) {
    uint32_t n = (s->mask + 1) * 2;
    mc__object_t **nb = NULL, **old = s->buckets;
    if (n == 0)
        return;
    nb = mc__calloc(n, sizeof(*nb));
    if (!nb)
        return; /* longer chains, still correct */
    for (uint32_t i = 0; i <= s->mask; i++) {
        mc__object_t *o = s->buckets[i];
        while (o) {
            mc__object_t *next = o->next;
            o->next = nb[o->hash & (n - 1)];
            mc__slot_set(&nb[o->hash & (n - 1)], o);
            o = next;
        }
    }
    __atomic_store_n(&s->buckets, nb, __ATOMIC_RELEASE);
    __atomic_store_n(&s->mask, n - 1, __ATOMIC_RELEASE);
    mc__retire_buckets(s, old, n / 2);
}

void mc__shard_insert(mc__shard_t *s, mc__object_t *o) {
    if (s->count >= (uint64_t)s->mask + 1)
        mc__shard_grow(s);
    o->next = s->buckets[o->hash & s->mask];
    mc__slot_set(&s->buckets[o->hash & s->mask], o);
    s->count++;
    if (!(o->flags & MC__OBJ_COMPLETE)) {
        if (s->incomplete == 0 || o->access_ms < s->incomplete_since)
            s->incomplete_since = o->access_ms; /* its put start (0 if not set yet: scan soon) */
        s->incomplete++;
    }
}

void mc__shard_unlink(mc__shard_t *s, mc__object_t *o) {
    mc__object_t **pp = &s->buckets[o->hash & s->mask];
    while (*pp && *pp != o)
        pp = &(*pp)->next;
    if (!*pp)
        return;
    mc__slot_set(pp, o->next);
    o->next = NULL;
    s->count--;
    if (!(o->flags & MC__OBJ_COMPLETE))
        s->incomplete--;
}

mc__object_t *mc__object_new(const uint8_t *key, uint32_t len, uint32_t hash, uint8_t n_replicas) {
    size_t key_space = ((size_t)len + 7u) & ~(size_t)7u;
    mc__object_t *o =
        mc__malloc(sizeof(*o) + key_space + (size_t)n_replicas * sizeof(mc__replica_t));
    if (!o)
        return NULL;
    memset(o, 0, sizeof(*o));
    memcpy(o->data, key, len);
    o->key_len = (uint16_t)len;
    o->hash = hash;
    o->n_replicas = n_replicas;
    return o;
}

void mc__free_replica(mc__master_t *m, const mc__replica_t *r) {
    mc__segment_t *seg = NULL;
    pthread_rwlock_rdlock(&m->registry);
    if (r->seg < m->n_slots)
        seg = m->slots[r->seg];
    if (seg) {
        pthread_mutex_lock(&seg->mu);
        uint64_t before = seg->alloc.used_bytes;
        mc__seg_free(&seg->alloc, r->block);
        mc__gauge_space(m, 0, 0, -(int64_t)(before - seg->alloc.used_bytes));
        mc__persist_free(m, seg, r->off);
        pthread_mutex_unlock(&seg->mu);
    }
    pthread_rwlock_unlock(&m->registry);
}

void mc__object_destroy(mc__master_t *m, mc__object_t *o) {
    mc__replica_t *reps = mc__obj_reps(o);
    if (o->flags & MC__OBJ_COMPLETE) {
        mc__persist_obj_del(m, o);
        mc__kv_event(m, MC__KV_REMOVED, o->data, o->key_len, "cpu");
    }
    for (uint8_t i = 0; i < o->n_replicas; i++)
        mc__free_replica(m, &reps[i]);
    if (o->flags & MC__OBJ_COMPLETE) {
        mc__gauge_objects(m, -1, -(int64_t)o->size);
    }
    mc__free(o);
}

/* Buckets a yielding sweep walks between yields: about as many objects, some tens of
 * microseconds of cache misses, where a whole shard of a master with a million objects (about
 * 16k each) held its lock, and the walk of all of them a core, for milliseconds. */
#define MC__SWEEP_CHUNK 512u

void mc__objects_sweep_yielding(mc__master_t *m, mc__obj_visit_fn fn, void *arg,
                                const _Atomic int *urgent) {
    for (int si = 0; si < MC__SHARDS; si++) {
        mc__shard_t *s = &m->shards[si];
        pthread_mutex_lock(&s->mu);
        for (uint32_t b = 0; b <= s->mask; b++) {
            if (urgent && b && b % MC__SWEEP_CHUNK == 0 && !atomic_load(urgent)) {
                /* Between buckets no pointer into the shard is held, so the lock can go. The
                 * yield is what lets the requests in: without it this thread takes the lock
                 * back before a woken waiter runs, and a request thread that shares its core
                 * waits for the scheduler's slice (milliseconds) behind a walk of the table. A
                 * bucket index stays valid across a growth of the table (a bucket's objects go
                 * to it or to a bucket past the old end). */
                pthread_mutex_unlock(&s->mu);
                sched_yield();
                pthread_mutex_lock(&s->mu);
            }
            mc__object_t **pp = &s->buckets[b];
            while (*pp) {
                mc__object_t *o = *pp;
                int what = fn(m, o, arg);
                if (what != MC__SWEEP_KEEP) {
                    mc__slot_set(pp, o->next);
                    s->count--;
                    if (!(o->flags & MC__OBJ_COMPLETE))
                        s->incomplete--;
                    o->next = NULL;
                    if (what == MC__SWEEP_RETIRE)
                        mc__object_release(m, o, mc__now_ms());
                    else
                        mc__object_destroy(m, o);
                } else {
                    pp = &o->next;
                }
            }
        }
        pthread_mutex_unlock(&s->mu);
    }
}

void mc__objects_sweep(mc__master_t *m, mc__obj_visit_fn fn, void *arg) {
    mc__objects_sweep_yielding(m, fn, arg, NULL);
}

/* When the request this thread is handling may answer (0: at once; see mc__reply_hold_take).
 * Thread-local: a request runs start to end on its connection's thread. */
static _Thread_local uint64_t mc__hold_until;

void mc__reply_hold_note(uint64_t until) {
    if (until > mc__hold_until)
        mc__hold_until = until;
}

uint64_t mc__reply_hold_take(void) {
    uint64_t h = mc__hold_until;
    mc__hold_until = 0;
    return h;
}

void mc__object_release(mc__master_t *m, mc__object_t *o, uint64_t now) {
    if (o->flags & MC__OBJ_COMPLETE) {
        if (o->lease_until <= now) {
            mc__object_destroy(m, o);
            return;
        }
        /* A client may still start a read of this value through a replica list it cached from
         * its last get (access_ms), for MC_MP_CACHED_LEASE_MS from sending that get, and never
         * past the lease. The request taking it away (an upsert's new value, a forced remove)
         * answers only once that is over, so a read that starts after the answer never returns
         * the value that went. */
        mc__reply_hold_note(
            o->lease_until < o->access_ms + MC_MP_CACHED_LEASE_MS + MC_MP_CACHED_LEASE_SLACK_MS
                ? o->lease_until
                : o->access_ms + MC_MP_CACHED_LEASE_MS + MC_MP_CACHED_LEASE_SLACK_MS);
        /* No longer an object readers can find: count it out now, free it after its lease. */
        mc__persist_obj_del(m, o);
        mc__kv_event(m, MC__KV_REMOVED, o->data, o->key_len, "cpu");
        o->flags &= (uint8_t)~MC__OBJ_COMPLETE;
        mc__gauge_objects(m, -1, -(int64_t)o->size);
        mc__grave_add(m, o, 0); /* finished: no writer, only its lease holds it */
        return;
    }
    /* Unfinished (an upsert preempted, a put replaced): its writer may still be copying. */
    mc__grave_add(m, o, mc__put_release_at(m, o->access_ms));
}

void mc__object_retire(mc__master_t *m, mc__shard_t *s, mc__object_t *o, uint64_t now) {
    mc__shard_unlink(s, o);
    mc__object_release(m, o, now);
}

mc__object_t *mc__object_grow(mc__shard_t *s, mc__object_t *o, const mc__replica_t *add,
                              uint8_t n_add) {
    size_t key_space = ((size_t)o->key_len + 7u) & ~(size_t)7u;
    size_t old_size = sizeof(*o) + key_space + (size_t)o->n_replicas * sizeof(mc__replica_t);
    mc__object_t *g = mc__malloc(old_size + (size_t)n_add * sizeof(mc__replica_t));
    mc__object_t **pp = &s->buckets[o->hash & s->mask];
    if (!g)
        return NULL;
    memcpy(g, o, old_size);
    memcpy(mc__obj_reps(g) + o->n_replicas, add, (size_t)n_add * sizeof(*add));
    g->n_replicas = (uint8_t)(o->n_replicas + n_add);
    while (*pp != o)
        pp = &(*pp)->next;
    mc__slot_set(pp, g); /* g->next is o->next: the chain is as it was, with g in o's place */
    mc__free(o);
    return g;
}

uint64_t mc__put_release_at(const mc__master_t *m, uint64_t start_ms) {
    return start_ms + (uint64_t)m->cfg.put_start_release_timeout_s * 1000u;
}

void mc__grave_add(mc__master_t *m, mc__object_t *o, uint64_t hold_until) {
    o->access_ms = hold_until;
    pthread_mutex_lock(&m->grave_mu);
    o->next = m->grave;
    m->grave = o;
    pthread_mutex_unlock(&m->grave_mu);
}

int mc__maybe_discard(mc__master_t *m, mc__shard_t *s, mc__object_t *o, uint64_t now) {
    uint64_t discard = (uint64_t)m->cfg.put_start_discard_timeout_s * 1000u;
    uint64_t release_at = mc__put_release_at(m, o->access_ms); /* access_ms: its put_start */
    if ((o->flags & MC__OBJ_COMPLETE) || o->access_ms + discard > now)
        return 0;
    mc__shard_unlink(s, o);
    o->flags |= MC__OBJ_DISCARDED; /* counted while it waits in the graveyard */
    mc__gauge_put_discarded(m);
    if (release_at <= now) {
        mc__gauge_put_released(m);
        mc__object_destroy(m, o);
    } else
        mc__grave_add(m, o, release_at);
    return 1;
}

void mc__grave_release(mc__master_t *m, uint64_t now, int all) {
    mc__object_t *due = NULL;
    mc__object_t **pp = NULL;
    pthread_mutex_lock(&m->grave_mu);
    pp = &m->grave;
    while (*pp) {
        mc__object_t *o = *pp;
        /* access_ms: the hold mc__grave_add was given (0: none) */
        if (all || (o->access_ms <= now && o->lease_until <= now)) {
            *pp = o->next;
            o->next = due;
            due = o;
        } else {
            pp = &o->next;
        }
    }
    pthread_mutex_unlock(&m->grave_mu);
    /* Freed outside grave_mu: freeing takes the registry lock. */
    while (due) {
        mc__object_t *next = due->next;
        if (due->flags & MC__OBJ_DISCARDED) /* not a replaced value or a moved replica */
            mc__gauge_put_released(m);
        mc__object_destroy(m, due);
        due = next;
    }
}

void mc__grave_filter(mc__master_t *m, mc__obj_visit_fn fn, void *arg) {
    mc__object_t **pp = NULL;
    pthread_mutex_lock(&m->grave_mu);
    pp = &m->grave;
    while (*pp) {
        mc__object_t *o = *pp;
        if (fn(m, o, arg)) {
            *pp = o->next;
            mc__free(o);
        } else {
            pp = &o->next;
        }
    }
    pthread_mutex_unlock(&m->grave_mu);
}

uint64_t mc__grave_discarded_bytes(mc__master_t *m) {
    uint64_t bytes = 0;
    pthread_mutex_lock(&m->grave_mu);
    for (mc__object_t *o = m->grave; o; o = o->next)
        if (o->flags & MC__OBJ_DISCARDED) /* the others are kept for readers or tasks */
            bytes += o->size * o->n_replicas;
    pthread_mutex_unlock(&m->grave_mu);
    return bytes;
}

void mc__grave_destroy(mc__master_t *m) {
    while (m->grave) {
        mc__object_t *next = m->grave->next;
        mc__free(m->grave);
        m->grave = next;
    }
}
