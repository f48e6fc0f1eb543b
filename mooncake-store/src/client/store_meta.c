/* Metadata-only calls: existence, size, removal, replica clearing. */
#include <string.h>

#include "client/direct.h"
#include "client/store_internal.h"
#include "mooncake/common/alloc.h"

static int mc__is_exist_impl(mc_store_t *s, const char *key) {
    int rc = mc__store_ready(s);
    if (rc != 0 || (rc = mc__store_check_key(key)) != 0)
        return rc;
    return mc__master_client_exist(s->master, key);
}

enum { MC__KEYS_EXIST, MC__KEYS_REMOVE, MC__KEYS_CLEAR };

/* Runs a per-key master batch call (op: MC__KEYS_*) over the keys that pass local checks; bad
 * keys get their code without reaching the master. */
static int mc__batch_keys(mc_store_t *s, int op, const char *const *keys, size_t n, int force,
                          const char *segment, int *results) {
    const char **ok = NULL;
    size_t *idx = NULL;
    int32_t *codes = NULL;
    size_t m = 0;
    int first = 0;
    int rc = mc__store_batch_check(s, n, keys && results);
    if (rc != 0 || n == 0)
        return rc;
    ok = mc__calloc(n, sizeof(*ok));
    idx = mc__calloc(n, sizeof(*idx));
    codes = mc__calloc(n, sizeof(*codes));
    if (!ok || !idx || !codes) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        results[i] = mc__store_check_key(keys[i]);
        if (results[i] == 0) {
            ok[m] = keys[i];
            idx[m++] = i;
        }
    }
    if (m > 0) {
        rc = op == MC__KEYS_REMOVE ? mc__master_client_batch_remove(s->master, m, ok, force, codes)
             : op == MC__KEYS_CLEAR
                 ? mc__master_client_batch_replica_clear(s->master, m, ok, segment, codes)
                 : mc__master_client_batch_exist(s->master, m, ok, codes);
    }
    for (size_t j = 0; j < m; j++) {
        results[idx[j]] = rc != 0 ? rc : codes[j];
        if (op != MC__KEYS_EXIST) /* our own removal: drop what we cached of the key */
            mc__replica_cache_drop(s->rcache, ok[j]);
    }
    for (size_t i = 0; i < n; i++)
        if (results[i] < 0 && first == 0)
            first = results[i];
out:
    mc__free(codes);
    mc__free(idx);
    mc__free(ok);
    /* A clear that skips a key (leased, missing) is the call working as meant. */
    return rc != 0 ? rc : op == MC__KEYS_CLEAR ? 0 : first;
}

static int mc__batch_is_exist_impl(mc_store_t *s, const char *const *keys, size_t n, int *results) {
    return mc__batch_keys(s, MC__KEYS_EXIST, keys, n, 0, NULL, results);
}

static int64_t mc__get_size_impl(mc_store_t *s, const char *key) {
    mc__key_replicas_t *kr;
    int64_t rc = mc__store_ready(s);
    if (rc != 0 || (rc = mc__store_check_key(key)) != 0)
        return rc;
    /* The replica list carries the size; the short lease it grants expires on its own. */
    rc = mc__store_get_replicas(s, key, &kr);
    if (rc == 0)
        rc = kr->code != 0 ? kr->code : (int64_t)kr->size;
    mc__free(kr);
    return rc;
}

static int mc__remove_impl(mc_store_t *s, const char *key, int force) {
    int rc = mc__store_ready(s);
    if (rc != 0 || (rc = mc__store_check_key(key)) != 0)
        return rc;
    rc = mc__master_client_remove(s->master, key, force);
    mc__replica_cache_drop(s->rcache, key); /* our own removal: forget its locations */
    return rc;
}

static int mc__batch_remove_impl(mc_store_t *s, const char *const *keys, size_t n, int force,
                                 int *results) {
    return mc__batch_keys(s, MC__KEYS_REMOVE, keys, n, force, NULL, results);
}

static int mc__batch_replica_clear_impl(mc_store_t *s, const char *const *keys, size_t n,
                                        const char *segment, int *codes) {
    if (segment && strlen(segment) > MC_MP_MAX_SEGMENT_NAME) {
        int rc = mc__store_batch_check(s, n, keys && codes);
        return rc ? rc : MC_ERR_INVALID_PARAMS;
    }
    return mc__batch_keys(s, MC__KEYS_CLEAR, keys, n, 0, segment, codes);
}

static int64_t mc__remove_all_impl(mc_store_t *s, int force) {
    int rc = mc__store_ready(s);
    if (rc != 0)
        return rc;
    int64_t n = mc__master_client_remove_all(s->master, force);
    mc__replica_cache_clear(s->rcache);
    return n;
}

static int64_t mc__remove_by_regex_impl(mc_store_t *s, const char *regex, int force) {
    int rc = mc__store_ready(s);
    if (rc != 0)
        return rc;
    if (!regex || !*regex)
        return MC_ERR_INVALID_PARAMS;
    int64_t n = mc__master_client_remove_by_regex(s->master, regex, force);
    mc__replica_cache_clear(s->rcache);
    return n;
}

/* The direct backend's entries (backend.h): each holds the store open while it runs. */

int mc__direct_is_exist(mc_store_t *s, const char *key) {
    int rc;
    MC__STORE_HELD(s, rc, mc__is_exist_impl(s, key));
    return rc;
}

int mc__direct_batch_is_exist(mc_store_t *s, const char *const *keys, size_t n, int *results) {
    int rc;
    MC__STORE_HELD_BATCH(s, rc, mc__batch_is_exist_impl(s, keys, n, results), results, n);
    return rc;
}

int64_t mc__direct_get_size(mc_store_t *s, const char *key) {
    int64_t rc;
    MC__STORE_HELD(s, rc, mc__get_size_impl(s, key));
    return rc;
}

int mc__direct_remove(mc_store_t *s, const char *key, int force) {
    int rc;
    MC__STORE_HELD(s, rc, mc__remove_impl(s, key, force));
    return rc;
}

int mc__direct_batch_remove(mc_store_t *s, const char *const *keys, size_t n, int force,
                            int *results) {
    int rc;
    MC__STORE_HELD_BATCH(s, rc, mc__batch_remove_impl(s, keys, n, force, results), results, n);
    return rc;
}

int mc__direct_batch_replica_clear(mc_store_t *s, const char *const *keys, size_t n,
                                   const char *segment, int *codes) {
    int rc;
    MC__STORE_HELD_BATCH(s, rc, mc__batch_replica_clear_impl(s, keys, n, segment, codes), codes, n);
    return rc;
}

int64_t mc__direct_remove_all(mc_store_t *s, int force) {
    int64_t rc;
    MC__STORE_HELD(s, rc, mc__remove_all_impl(s, force));
    return rc;
}

int64_t mc__direct_remove_by_regex(mc_store_t *s, const char *regex, int force) {
    int64_t rc;
    MC__STORE_HELD(s, rc, mc__remove_by_regex_impl(s, regex, force));
    return rc;
}
