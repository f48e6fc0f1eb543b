/* Metadata-only calls: existence, size, removal. */
#include "client/store_internal.h"
#include "mooncake/common/alloc.h"

static int mc__is_exist_impl(mc_store_t *s, const char *key) {
    int rc = mc__store_ready(s);
    if (rc != 0 || (rc = mc__store_check_key(key)) != 0)
        return rc;
    return mc__master_client_exist(s->master, key);
}

/* Runs a per-key master batch call over the keys that pass local checks; bad keys get their code
 * without reaching the master. */
static int mc__batch_keys(mc_store_t *s, const char *const *keys, size_t n, int force, int *results,
                          int remove) {
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
        rc = remove ? mc__master_client_batch_remove(s->master, m, ok, force, codes)
                    : mc__master_client_batch_exist(s->master, m, ok, codes);
    }
    for (size_t j = 0; j < m; j++)
        results[idx[j]] = rc != 0 ? rc : codes[j];
    for (size_t i = 0; i < n; i++)
        if (results[i] < 0 && first == 0)
            first = results[i];
out:
    mc__free(codes);
    mc__free(idx);
    mc__free(ok);
    return rc != 0 ? rc : first;
}

static int mc__batch_is_exist_impl(mc_store_t *s, const char *const *keys, size_t n, int *results) {
    return mc__batch_keys(s, keys, n, 0, results, 0);
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
    return mc__master_client_remove(s->master, key, force);
}

static int mc__batch_remove_impl(mc_store_t *s, const char *const *keys, size_t n, int force,
                                 int *results) {
    return mc__batch_keys(s, keys, n, force, results, 1);
}

static int64_t mc__remove_all_impl(mc_store_t *s, int force) {
    int rc = mc__store_ready(s);
    if (rc != 0)
        return rc;
    return mc__master_client_remove_all(s->master, force);
}

static int64_t mc__remove_by_regex_impl(mc_store_t *s, const char *regex, int force) {
    int rc = mc__store_ready(s);
    if (rc != 0)
        return rc;
    if (!regex || !*regex)
        return MC_ERR_INVALID_PARAMS;
    return mc__master_client_remove_by_regex(s->master, regex, force);
}

/* Public entry points: each holds the store open (close waits for it) while it runs. */

int mc_store_is_exist(mc_store_t *s, const char *key) {
    int rc;
    MC__STORE_HELD(s, rc, mc__is_exist_impl(s, key));
    return rc;
}

int mc_store_batch_is_exist(mc_store_t *s, const char *const *keys, size_t n, int *results) {
    int rc;
    MC__STORE_HELD(s, rc, mc__batch_is_exist_impl(s, keys, n, results));
    return rc;
}

int64_t mc_store_get_size(mc_store_t *s, const char *key) {
    int64_t rc;
    MC__STORE_HELD(s, rc, mc__get_size_impl(s, key));
    return rc;
}

int mc_store_remove(mc_store_t *s, const char *key, int force) {
    int rc;
    MC__STORE_HELD(s, rc, mc__remove_impl(s, key, force));
    return rc;
}

int mc_store_batch_remove(mc_store_t *s, const char *const *keys, size_t n, int force,
                          int *results) {
    int rc;
    MC__STORE_HELD(s, rc, mc__batch_remove_impl(s, keys, n, force, results));
    return rc;
}

int64_t mc_store_remove_all(mc_store_t *s, int force) {
    int64_t rc;
    MC__STORE_HELD(s, rc, mc__remove_all_impl(s, force));
    return rc;
}

int64_t mc_store_remove_by_regex(mc_store_t *s, const char *regex, int force) {
    int64_t rc;
    MC__STORE_HELD(s, rc, mc__remove_by_regex_impl(s, regex, force));
    return rc;
}
