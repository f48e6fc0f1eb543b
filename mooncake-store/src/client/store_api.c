/* The public entry points whose work differs between a client of its own and a dummy client:
 * each calls through the backend row the store's setup chose (backend.h), so none of them asks
 * which kind of client it serves. A NULL handle goes to the direct row, whose entries refuse it
 * as the public calls always did. */
#include <stdint.h>

#include "client/backend.h"
#include "client/store_internal.h"

static const mc__store_backend_t *mc__be(const mc_store_t *s) {
    return s ? s->be : &mc__store_direct;
}

int mc_store_create(mc_store_t **out) {
    int rc = mc__store_create(out);
    if (rc == 0)
        (*out)->be = &mc__store_direct; /* until a setup chooses */
    return rc;
}

int mc_store_setup(mc_store_t *s, const mc_store_config_t *cfg) {
    return mc__store_setup(s, cfg, &mc__store_direct);
}

int mc_store_setup_dummy(mc_store_t *s, const mc_store_dummy_config_t *cfg) {
    return mc__store_setup_dummy(s, cfg, &mc__store_dummy);
}

int mc_store_health_check(mc_store_t *s) {
    if (s && mc__store_inherited(s)) {
        (void)mc__store_refuse_inherited(s);
        return 1; /* as for a store that is not set up */
    }
    return mc__be(s)->health_check(s);
}

/* ---- puts ----------------------------------------------------------------------------------- */

int mc_store_put(mc_store_t *s, const char *key, const void *data, size_t len,
                 const mc_replicate_config_t *rc) {
    mc_store_iov_t part = {(void *)(uintptr_t)data, len};
    return mc__be(s)->put_parts(s, 0, key, &part, 1, rc);
}

int mc_store_put_parts(mc_store_t *s, const char *key, const mc_store_iov_t *parts, size_t nparts,
                       const mc_replicate_config_t *rc) {
    return mc__be(s)->put_parts(s, 0, key, parts, nparts, rc);
}

int mc_store_upsert(mc_store_t *s, const char *key, const void *data, size_t len,
                    const mc_replicate_config_t *rc) {
    mc_store_iov_t part = {(void *)(uintptr_t)data, len};
    return mc__be(s)->put_parts(s, 1, key, &part, 1, rc);
}

int mc_store_upsert_parts(mc_store_t *s, const char *key, const mc_store_iov_t *parts,
                          size_t nparts, const mc_replicate_config_t *rc) {
    return mc__be(s)->put_parts(s, 1, key, parts, nparts, rc);
}

int mc_store_batch_put(mc_store_t *s, const mc_store_item_t *items, size_t n,
                       const mc_replicate_config_t *rc, int *results) {
    return mc__be(s)->batch_put(s, 0, items, n, rc, results);
}

int mc_store_batch_upsert(mc_store_t *s, const mc_store_item_t *items, size_t n,
                          const mc_replicate_config_t *rc, int *results) {
    return mc__be(s)->batch_put(s, 1, items, n, rc, results);
}

/* ---- reads ---------------------------------------------------------------------------------- */

int64_t mc_store_get_into(mc_store_t *s, const char *key, void *buf, size_t cap) {
    mc_store_iov_t one = {buf, cap};
    return mc__be(s)->get_into_parts(s, key, &one, 1);
}

int64_t mc_store_get_into_parts(mc_store_t *s, const char *key, const mc_store_iov_t *iov,
                                size_t iovcnt) {
    return mc__be(s)->get_into_parts(s, key, iov, iovcnt);
}

int mc_store_batch_get_into(mc_store_t *s, const mc_store_item_t *items, size_t n,
                            int64_t *results) {
    return mc__be(s)->batch_get_into(s, items, n, results);
}

int mc_store_get_buffer(mc_store_t *s, const char *key, mc_store_buffer_t **out) {
    if (out)
        *out = NULL;
    return mc__be(s)->get_buffer(s, key, out);
}

int mc_store_batch_get_buffer(mc_store_t *s, const char *const *keys, size_t n,
                              mc_store_buffer_t **outs, int *results) {
    return mc__be(s)->batch_get_buffer(s, keys, n, outs, results);
}

int mc_store_batch_get_size(mc_store_t *s, const char *const *keys, size_t n, int64_t *sizes) {
    return mc__be(s)->batch_get_size(s, keys, n, sizes);
}

int mc_store_batch_get_ranges(mc_store_t *s, mc_store_range_read_t *reads, size_t n) {
    int rc = mc__be(s)->batch_get_ranges(s, reads, n);
    /* A call that failed as a whole failed every range (none was read). */
    for (size_t i = 0; rc != 0 && reads && i < n; i++)
        for (size_t j = 0; reads[i].ranges && j < reads[i].n; j++)
            reads[i].ranges[j].result = rc;
    return rc;
}

int mc_store_batch_get_replica_desc(mc_store_t *s, const char *const *keys, size_t n,
                                    mc_store_replica_list_t *out) {
    return mc__be(s)->batch_get_replica_desc(s, keys, n, out);
}

size_t mc_store_replica_cache_capacity(mc_store_t *s) {
    return mc__be(s)->replica_cache_capacity(s);
}

int mc_store_moves_any_memory(mc_store_t *s) {
    return mc__be(s)->moves_any_memory(s);
}

/* ---- metadata ------------------------------------------------------------------------------- */

int mc_store_is_exist(mc_store_t *s, const char *key) {
    return mc__be(s)->is_exist(s, key);
}

int mc_store_batch_is_exist(mc_store_t *s, const char *const *keys, size_t n, int *results) {
    return mc__be(s)->batch_is_exist(s, keys, n, results);
}

int64_t mc_store_get_size(mc_store_t *s, const char *key) {
    return mc__be(s)->get_size(s, key);
}

int mc_store_remove(mc_store_t *s, const char *key, int force) {
    return mc__be(s)->remove(s, key, force);
}

int mc_store_batch_remove(mc_store_t *s, const char *const *keys, size_t n, int force,
                          int *results) {
    return mc__be(s)->batch_remove(s, keys, n, force, results);
}

int mc_store_batch_replica_clear(mc_store_t *s, const char *const *keys, size_t n,
                                 const char *segment, int *codes) {
    return mc__be(s)->batch_replica_clear(s, keys, n, segment, codes);
}

int64_t mc_store_remove_all(mc_store_t *s, int force) {
    return mc__be(s)->remove_all(s, force);
}

int64_t mc_store_remove_by_regex(mc_store_t *s, const char *regex, int force) {
    return mc__be(s)->remove_by_regex(s, regex, force);
}

/* ---- registrations -------------------------------------------------------------------------- */

int mc_store_register_buffer(mc_store_t *s, void *addr, size_t len) {
    return mc__be(s)->register_buffer(s, addr, len);
}

int mc_store_unregister_buffer(mc_store_t *s, void *addr) {
    return mc__be(s)->unregister_buffer(s, addr);
}
