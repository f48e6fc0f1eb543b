/* Reads: the replica list (a lease) from the master, then the bytes from one replica, falling
 * back to the next when a transfer fails. */
#include <stdio.h>
#include <string.h>

#include "client/direct.h"
#include "client/get_forward.h"
#include "client/store_internal.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/failpoint.h"
#include "mooncake/common/log.h"
#include "mooncake/common/time.h"
#include "proto/disk_proto.h"

int mc__store_get_replicas(mc_store_t *s, const char *key, mc__key_replicas_t **kr) {
    int rc;
    uint64_t sent;
    *kr = mc__calloc(1, sizeof(**kr));
    if (!*kr)
        return MC_ERR_INTERNAL_ERROR;
    sent = mc__now_ms(); /* the lease counts from before the request left (replica_cache.c) */
    rc = mc__master_client_get_replica_list(s->master, key, *kr);
    if (rc == 0)
        mc__replica_cache_put(s->rcache, key, sent, *kr);
    (*kr)->key = key;
    /* a reader that stalls holding a lease (tests stop it here) */
    mc__failpoint("store_get_after_lease");
    return rc;
}

int mc__store_cached_read_ok(mc_store_t *s, const char *key, int64_t rc, uint64_t read_by) {
    if (rc >= 0 && mc__now_ms() < read_by)
        return 1;
    mc__replica_cache_drop(s->rcache, key);
    return 0;
}

/* The object of key into iov, through a replica list the master grants now. */
static int64_t mc__read_key_master(mc_store_t *s, const char *key, const mc_store_iov_t *iov,
                                   size_t iovcnt) {
    mc__key_replicas_t *kr = NULL;
    int64_t rc;
    if (mc__get_forward(s, key, iov, iovcnt, &rc))
        return rc; /* a holder answered in one round trip (get_forward.h) */
    rc = mc__store_get_replicas(s, key, &kr);
    if (rc == 0)
        rc = mc__store_read_replicas(s, kr, iov, iovcnt);
    if (rc < 0) /* a list whose read failed (another incarnation, a dead owner) is no use later */
        mc__replica_cache_drop(s->rcache, key);
    else
        mc__get_forward_learn(s, kr);
    mc__free(kr);
    return rc;
}

/* The object of key into iov: through its cached replica list when there is a live one, else
 * (or when that read fails) through the master. */
static int64_t mc__read_key(mc_store_t *s, const char *key, const mc_store_iov_t *iov,
                            size_t iovcnt) {
    mc__key_replicas_t *kr = NULL;
    uint64_t read_by = 0;
    int64_t rc;
    if (s->rcache) {
        kr = mc__calloc(1, sizeof(*kr));
        if (!kr)
            return MC_ERR_INTERNAL_ERROR;
        if (mc__replica_cache_get(s->rcache, key, mc__now_ms(), kr, &read_by)) {
            kr->key = key;
            /* a reader that stalls between its cached lookup and its read (tests stop it) */
            mc__failpoint("store_get_cached");
            rc = mc__store_read_replicas(s, kr, iov, iovcnt);
            if (mc__store_cached_read_ok(s, key, rc, read_by)) {
                mc__free(kr);
                return rc;
            }
        }
        mc__free(kr);
    }
    return mc__read_key_master(s, key, iov, iovcnt);
}

static int64_t mc__get_one(mc_store_t *s, const char *key, const mc_store_iov_t *iov,
                           size_t iovcnt) {
    int64_t rc = mc__store_ready(s);
    if (rc != 0)
        return rc;
    if ((rc = mc__store_check_key(key)) != 0)
        return rc;
    if (iovcnt && !iov)
        return MC_ERR_INVALID_PARAMS;
    for (size_t i = 0; i < iovcnt; i++)
        if (iov[i].len && !iov[i].base)
            return MC_ERR_INVALID_PARAMS;
    if (mc__store_iovs_overrun(s, iov, iovcnt))
        return MC_ERR_INVALID_PARAMS;
    return mc__read_key(s, key, iov, iovcnt);
}

int mc__store_batch_replicas(mc_store_t *s, const char *const *keys, size_t n,
                             mc__key_replicas_t *kr) {
    const char **ok = NULL;
    size_t *idx = NULL;
    mc__key_replicas_t *tmp = NULL;
    size_t m = 0;
    uint64_t sent;
    int rc = MC_ERR_INTERNAL_ERROR;

    ok = mc__calloc(n, sizeof(*ok));
    idx = mc__calloc(n, sizeof(*idx));
    tmp = mc__calloc(n, sizeof(*tmp));
    if (!ok || !idx || !tmp)
        goto out;
    for (size_t i = 0; i < n; i++) {
        memset(&kr[i], 0, sizeof(kr[i]));
        kr[i].code = mc__store_check_key(keys[i]);
        if (kr[i].code == 0) {
            ok[m] = keys[i];
            idx[m++] = i;
        }
    }
    rc = 0;
    sent = mc__now_ms(); /* the leases count from before the request left (replica_cache.c) */
    if (m > 0)
        rc = mc__master_client_batch_get_replica_list(s->master, m, ok, tmp);
    for (size_t j = 0; j < m; j++) {
        if (rc != 0) {
            kr[idx[j]].code = rc;
        } else {
            kr[idx[j]] = tmp[j];
            mc__replica_cache_put(s->rcache, keys[idx[j]], sent, &tmp[j]);
        }
        kr[idx[j]].key = keys[idx[j]];
    }
out:
    mc__free(tmp);
    mc__free(idx);
    mc__free(ok);
    return rc;
}

int mc__store_lookup_arrays(size_t n, mc__key_replicas_t **kr, const char ***keys,
                            uint64_t **read_by) {
    *kr = mc__calloc(n, sizeof(**kr));
    *keys = mc__calloc(n, sizeof(**keys));
    *read_by = mc__calloc(n, sizeof(**read_by));
    return *kr && *keys && *read_by ? 0 : MC_ERR_INTERNAL_ERROR;
}

int mc__store_batch_lookup(mc_store_t *s, const char *const *keys, size_t n, mc__key_replicas_t *kr,
                           uint64_t *read_by) {
    const char **miss = NULL;
    size_t *idx = NULL;
    mc__key_replicas_t *got = NULL;
    uint64_t now = mc__now_ms();
    size_t m = 0;
    int rc = MC_ERR_INTERNAL_ERROR;
    for (size_t i = 0; i < n; i++)
        read_by[i] = 0;
    if (!s->rcache)
        return mc__store_batch_replicas(s, keys, n, kr);
    miss = mc__calloc(n, sizeof(*miss));
    idx = mc__calloc(n, sizeof(*idx));
    if (!miss || !idx)
        goto out;
    for (size_t i = 0; i < n; i++) {
        memset(&kr[i], 0, sizeof(kr[i]));
        if (mc__store_check_key(keys[i]) == 0 &&
            mc__replica_cache_get(s->rcache, keys[i], now, &kr[i], &read_by[i])) {
            kr[i].key = keys[i];
            continue;
        }
        miss[m] = keys[i];
        idx[m++] = i;
    }
    rc = 0;
    if (m == 0)
        goto out;
    got = mc__calloc(m, sizeof(*got));
    if (!got) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    rc = mc__store_batch_replicas(s, miss, m, got);
    for (size_t j = 0; j < m; j++)
        kr[idx[j]] = got[j];
out:
    mc__free(got);
    mc__free(idx);
    mc__free(miss);
    return rc;
}

static int mc__batch_get_into_impl(mc_store_t *s, const mc_store_item_t *items, size_t n,
                                   int64_t *results) {
    mc__key_replicas_t *kr = NULL;
    const char **keys = NULL;
    uint64_t *read_by = NULL;
    int first = 0;
    int rc = mc__store_batch_check(s, n, items && results);
    if (rc != 0 || n == 0)
        return rc;
    rc = mc__store_lookup_arrays(n, &kr, &keys, &read_by);
    if (rc != 0)
        goto out;
    for (size_t i = 0; i < n; i++)
        keys[i] = items[i].key;
    rc = mc__store_batch_lookup(s, keys, n, kr, read_by);
    if (rc != 0)
        goto out;
    mc__store_batch_read(s, kr, items, n, results);
    /* Reads through cached lists that failed or ended too late: again through the master. */
    for (size_t i = 0; i < n; i++) {
        if (read_by[i] && !mc__store_cached_read_ok(s, keys[i], results[i], read_by[i]))
            results[i] = mc__read_key_master(s, keys[i], items[i].iov, items[i].iovcnt);
        else if (!read_by[i] && results[i] < 0)
            mc__replica_cache_drop(s->rcache, keys[i]); /* see mc__read_key_master */
    }
    for (size_t i = 0; i < n && first == 0; i++)
        if (results[i] < 0)
            first = (int)results[i];
out:
    mc__free(read_by);
    mc__free(keys);
    mc__free(kr);
    return rc != 0 ? rc : first;
}

/* A buffer for kr's object: a staging block when one is free (bytes land once, in registered
 * memory), else heap memory that reads reach through the staged path. */
static int mc__new_buffer(mc_store_t *s, const mc__key_replicas_t *kr, mc_store_buffer_t **out) {
    mc_store_buffer_t *b = NULL;
    int rc = kr->code;
    *out = NULL;
    if (rc != 0)
        return rc;
    b = mc__calloc(1, sizeof(*b));
    if (!b)
        return MC_ERR_INTERNAL_ERROR;
    b->store = s;
    b->size = (size_t)kr->size;
    b->data = mc__staging_try_alloc(&s->staging, b->size);
    b->staged = b->data != NULL;
    if (!b->data)
        b->data = mc__malloc(b->size ? b->size : 1);
    if (!b->data) {
        mc_store_buffer_free(b);
        return MC_ERR_INTERNAL_ERROR;
    }
    *out = b;
    return 0;
}

static int mc__read_to_buffer(mc_store_t *s, const mc__key_replicas_t *kr,
                              mc_store_buffer_t **out) {
    mc_store_iov_t v;
    int64_t n;
    int rc = mc__new_buffer(s, kr, out);
    if (rc != 0)
        return rc;
    v.base = (*out)->data;
    v.len = (*out)->size;
    n = mc__store_read_replicas(s, kr, &v, 1);
    if (n < 0) {
        mc_store_buffer_free(*out);
        *out = NULL;
    }
    return n < 0 ? (int)n : 0;
}

/* A new buffer for kr's object from the bytes a holder sent (value), or read through kr. */
static int mc__fill_buffer(mc_store_t *s, const mc__key_replicas_t *kr, const uint8_t *value,
                           mc_store_buffer_t **out) {
    int rc;
    if (!value)
        return mc__read_to_buffer(s, kr, out);
    rc = mc__new_buffer(s, kr, out);
    if (rc == 0 && kr->size > 0)
        memcpy((*out)->data, value, (size_t)kr->size); /* staging or heap: host memory */
    return rc;
}

/* The object of key into a new buffer, through a replica list the master grants now. */
static int mc__get_buffer_master(mc_store_t *s, const char *key, mc_store_buffer_t **out) {
    mc__key_replicas_t *kr = NULL;
    int rc;
    if (mc__get_forward_buffer(s, key, mc__fill_buffer, out, &rc))
        return rc; /* a holder answered in one round trip (get_forward.h) */
    rc = mc__store_get_replicas(s, key, &kr);
    if (rc == 0) {
        mc__get_forward_sized(s, kr->size);
        rc = mc__read_to_buffer(s, kr, out);
    }
    if (rc < 0) /* see mc__read_key_master */
        mc__replica_cache_drop(s->rcache, key);
    else
        mc__get_forward_learn(s, kr);
    mc__free(kr);
    return rc;
}

static int mc__get_buffer_impl(mc_store_t *s, const char *key, mc_store_buffer_t **out) {
    mc__key_replicas_t *kr = NULL;
    int rc = mc__store_ready(s);
    if (!out)
        return MC_ERR_INVALID_PARAMS;
    *out = NULL;
    if (rc != 0 || (rc = mc__store_check_key(key)) != 0)
        return rc;
    if (s->rcache) {
        uint64_t read_by = 0;
        kr = mc__calloc(1, sizeof(*kr));
        if (!kr)
            return MC_ERR_INTERNAL_ERROR;
        if (mc__replica_cache_get(s->rcache, key, mc__now_ms(), kr, &read_by)) {
            kr->key = key;
            mc__failpoint("store_get_cached"); /* as in mc__read_key */
            rc = mc__read_to_buffer(s, kr, out);
            if (mc__store_cached_read_ok(s, key, rc, read_by)) {
                mc__free(kr);
                return rc;
            }
            mc_store_buffer_free(*out);
            *out = NULL;
        }
        mc__free(kr);
        kr = NULL;
    }
    return mc__get_buffer_master(s, key, out);
}

/* All buffers first, then one batched read into them (items point at the buffers). */
static void mc__read_to_buffers(mc_store_t *s, const mc__key_replicas_t *kr, size_t n,
                                mc_store_buffer_t **outs, int *results, mc_store_item_t *items,
                                mc_store_iov_t *iov, int64_t *got) {
    for (size_t i = 0; i < n; i++) {
        results[i] = mc__new_buffer(s, &kr[i], &outs[i]);
        iov[i].base = outs[i] ? outs[i]->data : NULL;
        iov[i].len = outs[i] ? outs[i]->size : 0;
        items[i].iov = &iov[i];
        items[i].iovcnt = 1;
    }
    mc__store_batch_read(s, kr, items, n, got);
    for (size_t i = 0; i < n; i++) {
        if (results[i] == 0 && got[i] < 0)
            results[i] = (int)got[i];
        if (results[i] != 0) {
            mc_store_buffer_free(outs[i]);
            outs[i] = NULL;
        }
    }
}

static int mc__batch_get_buffer_impl(mc_store_t *s, const char *const *keys, size_t n,
                                     mc_store_buffer_t **outs, int *results) {
    mc__key_replicas_t *kr = NULL;
    mc_store_item_t *items = NULL;
    mc_store_iov_t *iov = NULL;
    int64_t *got = NULL;
    uint64_t *read_by = NULL;
    int first = 0;
    int rc = mc__store_batch_check(s, n, keys && outs && results);
    if (rc != 0 || n == 0)
        return rc;
    for (size_t i = 0; i < n; i++)
        outs[i] = NULL;
    kr = mc__calloc(n, sizeof(*kr));
    items = mc__calloc(n, sizeof(*items));
    iov = mc__calloc(n, sizeof(*iov));
    got = mc__calloc(n, sizeof(*got));
    read_by = mc__calloc(n, sizeof(*read_by));
    if (!kr || !items || !iov || !got || !read_by) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    rc = mc__store_batch_lookup(s, keys, n, kr, read_by);
    if (rc != 0)
        goto out;
    mc__read_to_buffers(s, kr, n, outs, results, items, iov, got);
    /* Reads through cached lists that failed or ended too late: again through the master. */
    for (size_t i = 0; i < n; i++) {
        if (!read_by[i] && results[i] < 0)
            mc__replica_cache_drop(s->rcache, keys[i]); /* see mc__read_key_master */
        if (!read_by[i] || mc__store_cached_read_ok(s, keys[i], results[i], read_by[i]))
            continue;
        mc_store_buffer_free(outs[i]);
        outs[i] = NULL;
        results[i] = mc__get_buffer_master(s, keys[i], &outs[i]);
    }
    for (size_t i = 0; i < n && first == 0; i++)
        first = results[i];
out:
    mc__free(read_by);
    mc__free(got);
    mc__free(iov);
    mc__free(items);
    mc__free(kr);
    return rc != 0 ? rc : first;
}

void *mc_store_buffer_data(const mc_store_buffer_t *b) {
    return b ? b->data : NULL;
}

size_t mc_store_buffer_size(const mc_store_buffer_t *b) {
    return b ? b->size : 0;
}

void mc_store_buffer_free(mc_store_buffer_t *b) {
    if (!b)
        return;
    if (b->staged)
        mc__staging_free(&b->store->staging, b->data, b->size);
    else
        mc__free(b->data);
    mc__free(b);
}

/* The direct backend's entries (backend.h): each holds the store open while it runs. */

int64_t mc__direct_get_into_parts(mc_store_t *s, const char *key, const mc_store_iov_t *iov,
                                  size_t iovcnt) {
    int64_t rc;
    MC__STORE_HELD(s, rc, mc__get_one(s, key, iov, iovcnt));
    return rc;
}

int mc__direct_batch_get_into(mc_store_t *s, const mc_store_item_t *items, size_t n,
                              int64_t *results) {
    int rc;
    MC__STORE_HELD_BATCH(s, rc, mc__batch_get_into_impl(s, items, n, results), results, n);
    return rc;
}

int mc__direct_get_buffer(mc_store_t *s, const char *key, mc_store_buffer_t **out) {
    int rc;
    MC__STORE_HELD(s, rc, mc__get_buffer_impl(s, key, out));
    return rc;
}

int mc__direct_batch_get_buffer(mc_store_t *s, const char *const *keys, size_t n,
                                mc_store_buffer_t **outs, int *results) {
    int rc;
    MC__STORE_HELD_BATCH(s, rc, mc__batch_get_buffer_impl(s, keys, n, outs, results), results, n);
    return rc;
}

static int mc__batch_get_size_impl(mc_store_t *s, const char *const *keys, size_t n,
                                   int64_t *sizes) {
    mc__key_replicas_t *kr = NULL;
    uint64_t *read_by = NULL;
    int first = 0;
    int rc = mc__store_batch_check(s, n, keys && sizes);
    if (rc != 0 || n == 0)
        return rc;
    kr = mc__calloc(n, sizeof(*kr));
    read_by = mc__calloc(n, sizeof(*read_by));
    if (!kr || !read_by) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    rc = mc__store_batch_lookup(s, keys, n, kr, read_by);
    for (size_t i = 0; i < n; i++) {
        sizes[i] = rc != 0 ? rc : kr[i].code != 0 ? kr[i].code : (int64_t)kr[i].size;
        if (sizes[i] < 0 && first == 0)
            first = (int)sizes[i];
    }
out:
    mc__free(read_by);
    mc__free(kr);
    return rc != 0 ? rc : first;
}

int mc__direct_batch_get_size(mc_store_t *s, const char *const *keys, size_t n, int64_t *sizes) {
    int rc;
    MC__STORE_HELD_BATCH(s, rc, mc__batch_get_size_impl(s, keys, n, sizes), sizes, n);
    return rc;
}

size_t mc__direct_replica_cache_capacity(mc_store_t *s) {
    size_t n = 0;
    if (s && mc__store_enter(s) == 0) {
        n = s->rcache ? (size_t)s->cfg.replica_cache_entries : 0;
        mc__store_leave(s);
    }
    return n;
}

int mc__direct_moves_any_memory(mc_store_t *s) {
    int yes = 0;
    if (s && mc__store_enter(s) == 0) {
        yes = s->direct_mem;
        mc__store_leave(s);
    }
    return yes;
}

static int mc__batch_replica_desc_impl(mc_store_t *s, const char *const *keys, size_t n,
                                       mc_store_replica_list_t *out) {
    mc__key_replicas_t *kr = NULL;
    int rc = mc__store_batch_check(s, n, keys && out);
    if (rc != 0 || n == 0)
        return rc;
    kr = mc__calloc(n, sizeof(*kr));
    if (!kr)
        return MC_ERR_INTERNAL_ERROR;
    rc = mc__store_batch_replicas(s, keys, n, kr);
    for (size_t i = 0; i < n; i++) {
        mc_store_replica_list_t *o = &out[i];
        memset(o, 0, sizeof(*o));
        o->code = rc != 0 ? rc : kr[i].code;
        for (uint32_t r = 0; o->code == 0 && r < kr[i].n_replicas && r < MC_STORE_MAX_REPLICAS;
             r++) {
            const mc__replica_desc_t *d = &kr[i].replicas[r];
            mc_store_replica_t *e = &o->replicas[o->n++];
            snprintf(e->transport_endpoint, sizeof(e->transport_endpoint), "%s", d->segment_name);
            e->buffer_address = d->addr;
            e->size = d->size;
            e->status = d->status == MC_MP_REPLICA_PROCESSING ? MC_STORE_REPLICA_PROCESSING
                                                              : MC_STORE_REPLICA_COMPLETE;
            e->is_disk = 0;
            if (d->status == MC_MP_REPLICA_DISK) /* 2: a file of the shared directory */
                e->is_disk =
                    strncmp(d->segment_name, MC_DP_SHARED_PREFIX, strlen(MC_DP_SHARED_PREFIX)) == 0
                        ? 2
                        : 1;
        }
    }
    mc__free(kr);
    return rc;
}

int mc__direct_batch_get_replica_desc(mc_store_t *s, const char *const *keys, size_t n,
                                      mc_store_replica_list_t *out) {
    int rc;
    MC__STORE_HELD(s, rc, mc__batch_replica_desc_impl(s, keys, n, out));
    return rc;
}
