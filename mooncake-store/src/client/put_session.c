/* Put sessions: start reserves placements at the master (a put start), range writes move bytes
 * from caller memory into byte ranges of every replica, end publishes (a put end naming the
 * start's version), revoke abandons. Between start and end the client keeps each key's
 * placement here. A write in flight pins its session: end and revoke seal the session first
 * (no new writes start), then wait for the writes already moving bytes, so the master never
 * frees or publishes space that is still being written. */
#include "client/put_session.h"

#include <string.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "client/store_internal.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/log.h"

#define MC__SESSION_MIN_BUCKETS 64u

void mc__put_sessions_init(mc__put_sessions_t *t) {
    memset(t, 0, sizeof(*t));
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->idle, NULL);
}

static void mc__sessions_free_entries(mc__put_sessions_t *t) {
    for (size_t b = 0; b < t->nbuckets; b++) {
        mc__put_session_t *e = t->buckets[b];
        while (e) {
            mc__put_session_t *next = e->next;
            mc__free(e);
            e = next;
        }
    }
    mc__free(t->buckets);
    t->buckets = NULL;
    t->nbuckets = t->count = 0;
}

void mc__put_sessions_fini(mc__put_sessions_t *t) {
    mc__sessions_free_entries(t);
    pthread_cond_destroy(&t->idle);
    pthread_mutex_destroy(&t->mu);
}

static uint64_t mc__session_hash(const char *key) {
    return XXH3_64bits(key, strlen(key));
}

/* With t->mu held. */
static mc__put_session_t *mc__session_find(mc__put_sessions_t *t, const char *key) {
    uint64_t h;
    if (!t->nbuckets)
        return NULL;
    h = mc__session_hash(key);
    for (mc__put_session_t *e = t->buckets[h & (t->nbuckets - 1)]; e; e = e->next)
        if (e->hash == h && strcmp(e->key, key) == 0)
            return e;
    return NULL;
}

/* With t->mu held; 0 or MC_ERR_INTERNAL_ERROR (no memory: the table stays as it was). */
static int mc__session_grow(mc__put_sessions_t *t) {
    size_t nb = t->nbuckets ? t->nbuckets * 2 : MC__SESSION_MIN_BUCKETS;
    mc__put_session_t **nbk = mc__calloc(nb, sizeof(*nbk));
    if (!nbk)
        return MC_ERR_INTERNAL_ERROR;
    for (size_t b = 0; b < t->nbuckets; b++) {
        mc__put_session_t *e = t->buckets[b];
        while (e) {
            mc__put_session_t *next = e->next;
            e->next = nbk[e->hash & (nb - 1)];
            nbk[e->hash & (nb - 1)] = e;
            e = next;
        }
    }
    mc__free(t->buckets);
    t->buckets = nbk;
    t->nbuckets = nb;
    return 0;
}

/* With t->mu held. */
static int mc__session_insert(mc__put_sessions_t *t, const char *key,
                              const mc__key_replicas_t *kr) {
    size_t klen = strlen(key);
    mc__put_session_t *e;
    if (t->count >= t->nbuckets && mc__session_grow(t) != 0)
        return MC_ERR_INTERNAL_ERROR;
    e = mc__calloc(1, sizeof(*e) + klen + 1);
    if (!e)
        return MC_ERR_INTERNAL_ERROR;
    memcpy(e->key, key, klen + 1);
    e->hash = mc__session_hash(key);
    e->writable = 1;
    e->kr = *kr;
    e->next = t->buckets[e->hash & (t->nbuckets - 1)];
    t->buckets[e->hash & (t->nbuckets - 1)] = e;
    t->count++;
    return 0;
}

/* With t->mu held; e must be in the table. */
static void mc__session_erase(mc__put_sessions_t *t, mc__put_session_t *e) {
    mc__put_session_t **p = &t->buckets[e->hash & (t->nbuckets - 1)];
    while (*p != e)
        p = &(*p)->next;
    *p = e->next;
    t->count--;
    mc__free(e);
}

static int mc__session_start_impl(mc_store_t *s, const char *const *keys, const uint64_t *sizes,
                                  size_t n, const mc_replicate_config_t *rc_cfg, int *codes) {
    mc__put_sessions_t *t = &s->sessions;
    mc__put_batch_t b;
    size_t m = 0;
    int rc = mc__put_batch_init(s, n, keys && sizes && codes, rc_cfg, &b);
    const char **start = b.keys;
    uint64_t *lens = b.lens;
    size_t *idx = b.idx;
    mc__key_replicas_t *kr = b.kr;
    if (rc != 0 || n == 0) {
        mc__put_batch_free(&b);
        return rc;
    }
    /* A key named twice in one call, or already in a session, is refused (its first session is
     * left alone); the others start together in one master round trip. */
    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i < n; i++) {
        int r = mc__store_check_key(keys[i]);
        if (r == 0 && (sizes[i] == 0 || mc__session_find(t, keys[i])))
            r = MC_ERR_INVALID_PARAMS;
        for (size_t j = 0; r == 0 && j < m; j++)
            if (strcmp(start[j], keys[i]) == 0)
                r = MC_ERR_INVALID_PARAMS;
        codes[i] = r;
        if (r != 0)
            continue;
        start[m] = keys[i];
        lens[m] = sizes[i];
        idx[m++] = i;
    }
    pthread_mutex_unlock(&t->mu);
    if (m == 0)
        goto out;
    rc = mc__master_client_batch_start(s->master, 0, m, start, lens, &b.wc, kr);
    if (rc != 0) {
        for (size_t j = 0; j < m; j++)
            codes[idx[j]] = rc;
        goto out;
    }
    pthread_mutex_lock(&t->mu);
    for (size_t j = 0; j < m; j++) {
        int r = kr[j].code;
        if (r == 0 && kr[j].n_replicas == 0)
            r = MC_ERR_NO_AVAILABLE_HANDLE; /* placed nothing: nothing to give back */
        codes[idx[j]] = r;
        /* Two callers may have started the same key at once: the master gave the second
         * OBJECT_ALREADY_EXISTS, so at most one of them gets here with a placement. */
        if (r != 0 || (codes[idx[j]] = mc__session_insert(t, start[j], &kr[j])) == 0)
            continue;
        /* A placement we cannot keep is given back at once. */
        pthread_mutex_unlock(&t->mu);
        (void)mc__master_client_put_revoke(s->master, start[j], kr[j].version);
        pthread_mutex_lock(&t->mu);
    }
    pthread_mutex_unlock(&t->mu);
out:
    mc__put_batch_free(&b);
    return rc;
}

/* The code of one range before any bytes move (0: write it). */
static int mc__put_range_check(mc_store_t *s, const mc__put_session_t *e,
                               const mc_store_put_range_t *r) {
    if (r->len == 0 || !r->src || r->dst_off > e->kr.size || r->len > e->kr.size - r->dst_off ||
        mc__store_registered_overrun(s, r->src, (size_t)r->len))
        return MC_ERR_INVALID_PARAMS;
    return 0;
}

/* The placement of range [off, off+len) of a session's object. */
static void mc__narrow_put(const mc__key_replicas_t *kr, uint64_t off, uint64_t len,
                           mc__key_replicas_t *out) {
    uint32_t nr = kr->n_replicas < MC_MP_MAX_REPLICA_NUM ? kr->n_replicas : MC_MP_MAX_REPLICA_NUM;
    out->code = 0;
    out->size = len;
    out->version = kr->version;
    out->n_replicas = nr;
    memcpy(out->replicas, kr->replicas, (size_t)nr * sizeof(kr->replicas[0]));
    for (uint32_t r = 0; r < nr; r++) {
        out->replicas[r].addr += off;
        out->replicas[r].size = len;
    }
}

static int mc__session_write_impl(mc_store_t *s, mc_store_range_write_t *w, size_t n) {
    mc__put_sessions_t *t = &s->sessions;
    mc__put_session_t **held = NULL; /* the session each write pinned (NULL: refused) */
    mc__key_replicas_t *nkr = NULL;
    mc_store_item_t *items = NULL;
    mc_store_iov_t *iov = NULL;
    size_t *idx = NULL, *owner = NULL;
    int *res = NULL;
    size_t total = 0, m = 0;
    int rc = mc__store_batch_check(s, n, w != NULL);
    if (rc != 0 || n == 0)
        return rc;
    for (size_t i = 0; i < n; i++) {
        if (w[i].n && !w[i].ranges)
            return MC_ERR_INVALID_PARAMS;
        total += w[i].n;
    }
    held = mc__calloc(n, sizeof(*held));
    if (total) {
        nkr = mc__calloc(total, sizeof(*nkr));
        items = mc__calloc(total, sizeof(*items));
        iov = mc__calloc(total, sizeof(*iov));
        idx = mc__calloc(total, sizeof(*idx));
        owner = mc__calloc(total, sizeof(*owner));
        res = mc__calloc(total, sizeof(*res));
    }
    if (!held || (total && (!nkr || !items || !iov || !idx || !owner || !res))) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i < n; i++) {
        mc__put_session_t *e =
            mc__store_check_key(w[i].key) == 0 ? mc__session_find(t, w[i].key) : NULL;
        int64_t bad = e && e->writable && w[i].n ? 0 : MC_ERR_INVALID_PARAMS;
        /* Every range of a write is checked before any of its bytes move: a write is all or
         * nothing at the check, as the reference's is. */
        for (size_t j = 0; bad == 0 && j < w[i].n; j++)
            bad = mc__put_range_check(s, e, &w[i].ranges[j]);
        w[i].result = bad;
        if (bad != 0)
            continue;
        e->inflight++;
        held[i] = e;
        for (size_t j = 0; j < w[i].n; j++) {
            const mc_store_put_range_t *r = &w[i].ranges[j];
            mc__narrow_put(&e->kr, r->dst_off, r->len, &nkr[m]);
            iov[m].base = (void *)(uintptr_t)r->src;
            iov[m].len = (size_t)r->len;
            items[m].key = e->key;
            items[m].iov = &iov[m];
            items[m].iovcnt = 1;
            idx[m] = m;
            owner[m++] = i;
        }
    }
    pthread_mutex_unlock(&t->mu);
    if (m > 0)
        mc__store_batch_write(s, items, idx, m, nkr, res);
    for (size_t k = 0; k < m; k++) {
        mc_store_range_write_t *wi = &w[owner[k]];
        if (wi->result < 0)
            continue;
        wi->result = res[k] < 0 ? res[k] : wi->result + (int64_t)iov[k].len;
    }
    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i < n; i++)
        if (held[i])
            held[i]->inflight--;
    pthread_cond_broadcast(&t->idle);
    pthread_mutex_unlock(&t->mu);
out:
    mc__free(res);
    mc__free(owner);
    mc__free(idx);
    mc__free(iov);
    mc__free(items);
    mc__free(nkr);
    mc__free(held);
    return rc;
}

/* End (end = 1) or revoke (0): seals each named session, waits for its writes in flight, then
 * asks the master once for all of them. A session the master answered for is forgotten; one
 * whose answer was lost (the RPC failed) stays sealed, for the caller to end or revoke again. */
static int mc__session_finish_impl(mc_store_t *s, int end, const char *const *keys, size_t n,
                                   int *codes) {
    mc__put_sessions_t *t = &s->sessions;
    const char **fk = NULL;
    uint64_t *ver = NULL;
    size_t *idx = NULL, m = 0;
    int32_t *mc = NULL;
    int rc = mc__store_batch_check(s, n, keys && codes);
    if (rc != 0 || n == 0)
        return rc;
    fk = mc__calloc(n, sizeof(*fk));
    ver = mc__calloc(n, sizeof(*ver));
    idx = mc__calloc(n, sizeof(*idx));
    mc = mc__calloc(n, sizeof(*mc));
    if (!fk || !ver || !idx || !mc) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i < n; i++) {
        mc__put_session_t *e =
            mc__store_check_key(keys[i]) == 0 ? mc__session_find(t, keys[i]) : NULL;
        int dup = 0;
        for (size_t j = 0; e && j < m; j++)
            dup |= strcmp(fk[j], keys[i]) == 0;
        codes[i] = e && !dup ? 0 : MC_ERR_INVALID_PARAMS;
        if (codes[i] != 0)
            continue;
        e->writable = 0;
        fk[m] = keys[i]; /* not e->key: a concurrent finish of the same key may free e */
        ver[m] = e->kr.version;
        idx[m++] = i;
    }
    for (size_t j = 0; j < m; j++) {
        mc__put_session_t *e;
        while ((e = mc__session_find(t, fk[j])) != NULL && e->inflight > 0)
            pthread_cond_wait(&t->idle, &t->mu);
    }
    pthread_mutex_unlock(&t->mu);
    if (m == 0)
        goto out;
    rc = mc__master_client_batch_finish(s->master, 0, end, m, fk, ver, mc);
    pthread_mutex_lock(&t->mu);
    for (size_t j = 0; j < m; j++) {
        int r = rc != 0 ? rc : mc[j];
        /* A revoke of a placement the master no longer holds (discarded as stale) has nothing
         * left to undo: done. An end of one has lost its bytes: the caller is told. */
        if (!end && r == MC_ERR_OBJECT_NOT_FOUND)
            r = 0;
        codes[idx[j]] = r;
        if (rc == 0) {
            mc__put_session_t *e = mc__session_find(t, fk[j]);
            if (e)
                mc__session_erase(t, e);
        }
    }
    pthread_mutex_unlock(&t->mu);
    rc = 0;
out:
    mc__free(mc);
    mc__free(idx);
    mc__free(ver);
    mc__free(fk);
    return rc;
}

void mc__put_sessions_revoke_all(mc_store_t *s) {
    mc__put_sessions_t *t = &s->sessions;
    pthread_mutex_lock(&t->mu);
    for (size_t b = 0; s->master && b < t->nbuckets; b++)
        for (mc__put_session_t *e = t->buckets[b]; e; e = e->next)
            (void)mc__master_client_put_revoke(s->master, e->key, e->kr.version);
    if (t->count)
        MC_INFO("store: close revoked %zu unfinished put session(s)", t->count);
    mc__sessions_free_entries(t);
    pthread_mutex_unlock(&t->mu);
}

int mc_store_put_session_start(mc_store_t *s, const char *const *keys, const uint64_t *sizes,
                               size_t n, const mc_replicate_config_t *rc, int *codes) {
    int r;
    MC__STORE_HELD_BATCH(s, r, mc__session_start_impl(s, keys, sizes, n, rc, codes), codes, n);
    return r;
}

int mc_store_put_session_write(mc_store_t *s, mc_store_range_write_t *writes, size_t n) {
    int r;
    MC__STORE_HELD(s, r, mc__session_write_impl(s, writes, n));
    for (size_t i = 0; r != 0 && writes && i < n; i++)
        writes[i].result = r;
    return r;
}

int mc_store_put_session_end(mc_store_t *s, const char *const *keys, size_t n, int *codes) {
    int r;
    MC__STORE_HELD_BATCH(s, r, mc__session_finish_impl(s, 1, keys, n, codes), codes, n);
    return r;
}

int mc_store_put_session_revoke(mc_store_t *s, const char *const *keys, size_t n, int *codes) {
    int r;
    MC__STORE_HELD_BATCH(s, r, mc__session_finish_impl(s, 0, keys, n, codes), codes, n);
    return r;
}
