/* Replica-location cache: a bounded table, keyed by object key, of the replica lists the master
 * granted leases with, so that a get while the lease lasts moves bytes without asking again.
 *
 * Why a cached location still holds the object's bytes (the master's side of the argument):
 * - A lease is granted at the master at or after the moment this client sent the request, and
 *   lasts lease_ttl_ms from then; the master extends an object's lease, never shortens it (but
 *   for a forced removal, which still holds the space MC_MP_CACHED_LEASE_MS + slack). So until
 *   sent_ms + min(lease_ttl_ms, MC_MP_CACHED_LEASE_MS) on this client's monotonic clock (less
 *   MC__DRIFT, for clocks that run at slightly different rates) the master still counts the
 *   object as leased, or holds its space.
 * - While an object is leased, nothing frees or reuses its replicas' space: remove (without
 *   force) and replica clear answer OBJECT_HAS_LEASE, as the reference's do; eviction skips
 *   leased objects (evict.c); a put of an existing key fails and keeps the first value; an
 *   upsert writes the new value to new space and holds the old in the graveyard until the lease
 *   has passed (upsert.c); a move task's source replica waits there too (tasks.c); a forced
 *   remove, remove_all or remove_by_regex of a leased object also retires it to the graveyard
 *   instead of freeing it (objects.c), so force takes the key away at once but the bytes stay
 *   while a cached read may still start (ops.c, mc__lease_cap_for_force).
 * - Space leaves the master only with its segment: an unmount or an owner's death drops the
 *   segment, and its owner gives the memory a new incarnation (a random epoch) before anything
 *   is placed in it again (store.c's remount hook). Every cached replica names the epoch it was
 *   placed in and every transfer carries it, so the owner refuses a read of another
 *   incarnation's memory (MC__REP_REFUSED) instead of serving another object's bytes; such a
 *   read drops the entry and goes to the master. Replicas without an epoch (file segments,
 *   which may be remounted untagged) are therefore not cached, nor are disk replicas (LOCAL_DISK
 *   copies carry no lease: their node serves them by key).
 * - A read that starts before use_until may still be moving bytes when the lease ends; the
 *   caller checks the clock again when it finishes (read_by) and redoes a late read through the
 *   master, so no byte is trusted that was read after the master could free it.
 * Why a cached read never returns a value that is gone (linearizability): a request that takes a
 * leased value away (an upsert's new value, a forced remove) is answered only once every client
 * that may have cached it can no longer start a read through it: MC_MP_CACHED_LEASE_MS + slack
 * after the value's last get at the master (which came after this client sent its request), or
 * the lease's end when sooner (objects.c, mc__object_release; ops.c, mc__reply_wait). So a read
 * that starts after such an answer was seen finds its entry expired, and one that started
 * before is concurrent with it. This client's own remove, upsert, put and replica clear also
 * drop its entries at once. docs/store.md describes it; replica_cache_entries = 0 turns it
 * off. */
#include "client/replica_cache.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"

/* Clock-rate allowance: 1/64 of the lease (1.6%, far beyond any clock's rate error) plus 5 ms. */
#define MC__DRIFT(ttl) ((ttl) / 64u + 5u)
/* Room left for a read that starts near the end of the window to finish inside it: 1/8 of the
 * lease. A read that still ends later is redone, so this is for speed, not soundness. */
#define MC__READ_ROOM(ttl) ((ttl) / 8u)

typedef struct mc__rc_entry {
    struct mc__rc_entry *hnext;         /* hash chain */
    struct mc__rc_entry *older, *newer; /* age list: the oldest goes first when full */
    uint64_t hash;
    uint64_t granted, use_until, read_by; /* granted: the sent_ms the lease counts from */
    uint64_t seq;                         /* which grant this is (mc__replica_cache_renew) */
    int renewable;                        /* its lease is MC__RC_RENEW_MIN_LEASE_MS or longer */
    int hot;                              /* renewable, and a get hit it since it was granted */
    uint64_t size;
    uint32_t key_len;
    uint32_t n_replicas;
    mc__replica_desc_t *reps; /* inside the same allocation, after the record */
    char *key;                /* likewise, after the replicas */
} mc__rc_entry_t;

struct mc__replica_cache {
    pthread_mutex_t mu;
    mc__rc_entry_t **buckets;
    size_t mask;
    size_t count, capacity;
    mc__rc_entry_t *oldest, *newest;
    uint64_t hits, misses;
    uint64_t next_seq;
    size_t hot; /* entries with hot set: the renewer sleeps while there are none */
    pthread_cond_t hot_cv;
    int closing;
};

int mc__replica_cache_window(uint64_t sent_ms, uint64_t ttl_ms, uint64_t *use_until,
                             uint64_t *read_by) {
    uint64_t keep;
    if (ttl_ms <= MC__DRIFT(ttl_ms) + MC__READ_ROOM(ttl_ms) + 1u || ttl_ms > UINT64_MAX / 4u ||
        sent_ms > UINT64_MAX / 4u)
        return 0;
    keep = ttl_ms - MC__DRIFT(ttl_ms);
    *read_by = sent_ms + keep;
    *use_until = *read_by - MC__READ_ROOM(ttl_ms);
    return 1;
}

int mc__replica_cache_create(size_t capacity, mc__replica_cache_t **out) {
    mc__replica_cache_t *c = NULL;
    size_t nb = 64;
    *out = NULL;
    if (capacity == 0)
        return 0;
    if (capacity > MC__REPLICA_CACHE_MAX_ENTRIES)
        return MC_ERR_INVALID_PARAMS;
    while (nb < capacity)
        nb *= 2;
    c = mc__calloc(1, sizeof(*c));
    if (!c)
        return MC_ERR_INTERNAL_ERROR;
    c->buckets = mc__calloc(nb, sizeof(*c->buckets));
    if (!c->buckets) {
        mc__free(c);
        return MC_ERR_INTERNAL_ERROR;
    }
    c->mask = nb - 1;
    c->capacity = capacity;
    pthread_mutex_init(&c->mu, NULL);
    {
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* naps a wall-clock step cannot stretch */
        pthread_cond_init(&c->hot_cv, &ca);
        pthread_condattr_destroy(&ca);
    }
    *out = c;
    return 0;
}

/* With mu held: unlinks e from its chain and the age list, and frees it. */
static void mc__rc_remove(mc__replica_cache_t *c, mc__rc_entry_t *e) {
    mc__rc_entry_t **pp = &c->buckets[e->hash & c->mask];
    while (*pp && *pp != e)
        pp = &(*pp)->hnext;
    if (*pp)
        *pp = e->hnext;
    if (e->older)
        e->older->newer = e->newer;
    else
        c->oldest = e->newer;
    if (e->newer)
        e->newer->older = e->older;
    else
        c->newest = e->older;
    c->count--;
    if (e->hot)
        c->hot--;
    mc__free(e);
}

void mc__replica_cache_clear(mc__replica_cache_t *c) {
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    while (c->oldest)
        mc__rc_remove(c, c->oldest);
    pthread_mutex_unlock(&c->mu);
}

void mc__replica_cache_destroy(mc__replica_cache_t *c) {
    if (!c)
        return;
    mc__replica_cache_clear(c);
    pthread_cond_destroy(&c->hot_cv);
    pthread_mutex_destroy(&c->mu);
    mc__free(c->buckets);
    mc__free(c);
}

static mc__rc_entry_t *mc__rc_find(mc__replica_cache_t *c, uint64_t hash, const char *key,
                                   size_t len) {
    for (mc__rc_entry_t *e = c->buckets[hash & c->mask]; e; e = e->hnext)
        if (e->hash == hash && e->key_len == len && memcmp(e->key, key, len) == 0)
            return e;
    return NULL;
}

/* Only lists whose every replica is a finished memory replica tagged with its incarnation. */
static int mc__rc_cacheable(const mc__key_replicas_t *kr) {
    if (kr->code != 0 || kr->n_replicas == 0 || kr->n_replicas > MC_MP_MAX_REPLICA_NUM)
        return 0;
    for (uint32_t i = 0; i < kr->n_replicas; i++)
        if (kr->replicas[i].status != MC_MP_REPLICA_COMPLETE || kr->replicas[i].epoch == 0)
            return 0;
    return 1;
}

/* A new entry for key's list kr granted at sent_ms, or NULL when the cache cannot vouch for kr
 * (mc__rc_cacheable, a lease too short to use) or memory ran out. */
static mc__rc_entry_t *mc__rc_make(const char *key, size_t len, uint64_t hash, uint64_t sent_ms,
                                   const mc__key_replicas_t *kr) {
    mc__rc_entry_t *e;
    uint64_t use_until, read_by, ttl;
    size_t reps_off, key_off;
    /* Never longer than the master's forced removals wait for (MC_MP_CACHED_LEASE_MS). */
    ttl = kr->lease_ttl_ms < MC_MP_CACHED_LEASE_MS ? kr->lease_ttl_ms : MC_MP_CACHED_LEASE_MS;
    if (!mc__rc_cacheable(kr) || !mc__replica_cache_window(sent_ms, ttl, &use_until, &read_by))
        return NULL;
    reps_off = (sizeof(*e) + 15u) & ~(size_t)15u;
    key_off = reps_off + (size_t)kr->n_replicas * sizeof(mc__replica_desc_t);
    e = mc__malloc(key_off + len + 1);
    if (!e)
        return NULL; /* a cache that cannot grow just misses */
    memset(e, 0, sizeof(*e));
    e->reps = (mc__replica_desc_t *)((uint8_t *)e + reps_off);
    e->key = (char *)e + key_off;
    memcpy(e->reps, kr->replicas, (size_t)kr->n_replicas * sizeof(mc__replica_desc_t));
    memcpy(e->key, key, len);
    e->key[len] = '\0';
    e->hash = hash;
    e->key_len = (uint32_t)len;
    e->n_replicas = kr->n_replicas;
    e->size = kr->size;
    e->granted = sent_ms;
    e->renewable = kr->lease_ttl_ms >= MC__RC_RENEW_MIN_LEASE_MS;
    e->use_until = use_until;
    e->read_by = read_by;
    return e;
}

/* With mu held: e (no entry of its key in the cache) becomes the newest entry, after the
 * expired ones at the old end go, and then the oldest live one if there is still no room. */
static void mc__rc_insert(mc__replica_cache_t *c, mc__rc_entry_t *e) {
    while (c->oldest && (c->oldest->use_until <= e->granted || c->count >= c->capacity))
        mc__rc_remove(c, c->oldest);
    e->seq = ++c->next_seq;
    e->hnext = c->buckets[e->hash & c->mask];
    c->buckets[e->hash & c->mask] = e;
    e->older = c->newest;
    if (c->newest)
        c->newest->newer = e;
    else
        c->oldest = e;
    c->newest = e;
    c->count++;
}

/* key's entry becomes the list kr granted at sent_ms (or goes, when the cache cannot vouch for
 * kr); with only_grant, only while the entry is still grant seq (mc__replica_cache_renew). */
static void mc__rc_replace(mc__replica_cache_t *c, const char *key, uint64_t sent_ms,
                           const mc__key_replicas_t *kr, int only_grant, uint64_t seq) {
    mc__rc_entry_t *e, *old;
    uint64_t hash;
    size_t len;
    if (!c || !key || !kr)
        return;
    len = strlen(key);
    hash = XXH3_64bits(key, len);
    e = mc__rc_make(key, len, hash, sent_ms, kr);
    pthread_mutex_lock(&c->mu);
    old = mc__rc_find(c, hash, key, len);
    if (!only_grant || (old && old->seq == seq)) {
        if (old)
            mc__rc_remove(c, old);
        if (e) {
            mc__rc_insert(c, e);
            e = NULL;
        }
    }
    pthread_mutex_unlock(&c->mu);
    mc__free(e);
}

void mc__replica_cache_put(mc__replica_cache_t *c, const char *key, uint64_t sent_ms,
                           const mc__key_replicas_t *kr) {
    mc__rc_replace(c, key, sent_ms, kr, 0, 0);
}

int mc__replica_cache_get(mc__replica_cache_t *c, const char *key, uint64_t now_ms,
                          mc__key_replicas_t *kr, uint64_t *read_by_ms) {
    mc__rc_entry_t *e;
    size_t len;
    uint64_t hash;
    int hit = 0;
    if (!c || !key)
        return 0;
    len = strlen(key);
    hash = XXH3_64bits(key, len);
    pthread_mutex_lock(&c->mu);
    e = mc__rc_find(c, hash, key, len);
    if (e && e->use_until <= now_ms) {
        mc__rc_remove(c, e);
        e = NULL;
    }
    if (e) {
        kr->code = 0;
        kr->size = e->size;
        kr->lease_ttl_ms = e->read_by - now_ms;
        kr->version = 0;
        kr->n_replicas = e->n_replicas;
        memcpy(kr->replicas, e->reps, (size_t)e->n_replicas * sizeof(mc__replica_desc_t));
        *read_by_ms = e->read_by;
        c->hits++;
        hit = 1;
        if (!e->hot && e->renewable) {
            e->hot = 1;
            if (c->hot++ == 0)
                pthread_cond_signal(&c->hot_cv); /* the renewer's nap ends */
        }
    } else {
        c->misses++;
    }
    pthread_mutex_unlock(&c->mu);
    return hit;
}

void mc__replica_cache_drop(mc__replica_cache_t *c, const char *key) {
    mc__rc_entry_t *e;
    size_t len;
    uint64_t hash;
    if (!c || !key)
        return;
    len = strlen(key);
    hash = XXH3_64bits(key, len);
    pthread_mutex_lock(&c->mu);
    if ((e = mc__rc_find(c, hash, key, len)) != NULL)
        mc__rc_remove(c, e);
    pthread_mutex_unlock(&c->mu);
}

size_t mc__replica_cache_count(mc__replica_cache_t *c) {
    size_t n;
    if (!c)
        return 0;
    pthread_mutex_lock(&c->mu);
    n = c->count;
    pthread_mutex_unlock(&c->mu);
    return n;
}

void mc__replica_cache_stats(mc__replica_cache_t *c, uint64_t *hits, uint64_t *misses) {
    *hits = *misses = 0;
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    *hits = c->hits;
    *misses = c->misses;
    pthread_mutex_unlock(&c->mu);
}

/* ---- renewal (replica_renew.c drives it) ---- */

/* An entry is due for renewal past half its life: at most MC_MP_CACHED_LEASE_MS / 2 before its
 * reads must stop, so a renewer that looks every MC__RC_RENEW_EVERY_MS (replica_cache.h) finds
 * it with a quarter of its life still left for the round trip. */
static int mc__rc_due(const mc__rc_entry_t *e, uint64_t now_ms) {
    return now_ms >= e->granted + (e->use_until - e->granted) / 2u;
}

size_t mc__replica_cache_due(mc__replica_cache_t *c, uint64_t now_ms, mc__rc_due_t *out,
                             size_t max) {
    size_t n = 0;
    mc__rc_entry_t *e, *next;
    if (!c || max == 0)
        return 0;
    pthread_mutex_lock(&c->mu);
    /* Entries are added at the new end with near-increasing grant times, so those due (and the
     * expired, which go now) sit at the old end: the walk stops at the first that is not. */
    for (e = c->oldest; e && n < max; e = next) {
        next = e->newer;
        if (e->use_until <= now_ms) {
            mc__rc_remove(c, e);
            continue;
        }
        if (!mc__rc_due(e, now_ms))
            break;
        if (!e->hot)
            continue; /* not read since its grant (or a short lease): left to expire */
        out[n].key = mc__malloc((size_t)e->key_len + 1);
        if (!out[n].key)
            break;
        memcpy(out[n].key, e->key, (size_t)e->key_len + 1);
        out[n].seq = e->seq;
        n++;
    }
    pthread_mutex_unlock(&c->mu);
    return n;
}

void mc__replica_cache_renew(mc__replica_cache_t *c, const char *key, uint64_t seq,
                             uint64_t sent_ms, const mc__key_replicas_t *kr) {
    /* Only the grant the renewer saw is replaced: once this client dropped or re-fetched the
     * key meanwhile (its own put, upsert or remove; a failed read), that state is newer. */
    mc__rc_replace(c, key, sent_ms, kr, 1, seq);
}

int mc__replica_cache_nap(mc__replica_cache_t *c, uint64_t ms) {
    int open;
    if (!c)
        return 0;
    pthread_mutex_lock(&c->mu);
    while (!c->closing && c->hot == 0)
        pthread_cond_wait(&c->hot_cv, &c->mu);
    if (!c->closing) {
        struct timespec ts = mc__clock_after_ms(CLOCK_MONOTONIC, ms);
        while (!c->closing && pthread_cond_timedwait(&c->hot_cv, &c->mu, &ts) != ETIMEDOUT) {
        }
    }
    open = !c->closing;
    pthread_mutex_unlock(&c->mu);
    return open;
}

void mc__replica_cache_wake_renewer(mc__replica_cache_t *c) {
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    c->closing = 1;
    pthread_cond_broadcast(&c->hot_cv);
    pthread_mutex_unlock(&c->mu);
}
