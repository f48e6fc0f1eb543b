/* The store backend contract: every call whose work differs between the two kinds of client is
 * one entry of a table of functions, as the engine's transports are (transports/transport.h). A
 * client of its own (the `direct` row, store_direct.c: its master, engine and segment) and a
 * dummy client (the `dummy` row, store_dummy.c: its calls run by a local storage node) each fill
 * one row; the row is chosen once at setup (s->be), and the public entry points (store_api.c)
 * only call through it, so no file outside a row asks which kind of client it serves.
 *
 * Each entry has the public call's signature and contract (mooncake/store.h) and holds the store
 * open while it runs, as the public calls do. */
#ifndef MC_STORE_CLIENT_BACKEND_H
#define MC_STORE_CLIENT_BACKEND_H
#include <stddef.h>
#include <stdint.h>

#include "mooncake/store.h"

typedef struct mc__store_backend {
    const char *name;
    /* 1: the calls outside this table (segments, put sessions, disk reads, ...) are not offered
     * (a dummy has no master, engine or segment of its own): mc__store_enter refuses them. */
    int table_only;

    int (*put_parts)(mc_store_t *s, int upsert, const char *key, const mc_store_iov_t *parts,
                     size_t nparts, const mc_replicate_config_t *rc);
    int (*batch_put)(mc_store_t *s, int upsert, const mc_store_item_t *items, size_t n,
                     const mc_replicate_config_t *rc, int *results);
    int64_t (*get_into_parts)(mc_store_t *s, const char *key, const mc_store_iov_t *iov,
                              size_t iovcnt);
    int (*batch_get_into)(mc_store_t *s, const mc_store_item_t *items, size_t n, int64_t *results);
    int (*get_buffer)(mc_store_t *s, const char *key, mc_store_buffer_t **out);
    int (*batch_get_buffer)(mc_store_t *s, const char *const *keys, size_t n,
                            mc_store_buffer_t **outs, int *results);
    int (*batch_get_size)(mc_store_t *s, const char *const *keys, size_t n, int64_t *sizes);
    int (*batch_get_ranges)(mc_store_t *s, mc_store_range_read_t *reads, size_t n);
    int (*batch_get_replica_desc)(mc_store_t *s, const char *const *keys, size_t n,
                                  mc_store_replica_list_t *out);
    size_t (*replica_cache_capacity)(mc_store_t *s);
    int (*moves_any_memory)(mc_store_t *s);

    int (*is_exist)(mc_store_t *s, const char *key);
    int (*batch_is_exist)(mc_store_t *s, const char *const *keys, size_t n, int *results);
    int64_t (*get_size)(mc_store_t *s, const char *key);
    int (*remove)(mc_store_t *s, const char *key, int force);
    int (*batch_remove)(mc_store_t *s, const char *const *keys, size_t n, int force, int *results);
    int (*batch_replica_clear)(mc_store_t *s, const char *const *keys, size_t n,
                               const char *segment, int *codes);
    int64_t (*remove_all)(mc_store_t *s, int force);
    int64_t (*remove_by_regex)(mc_store_t *s, const char *regex, int force);

    int (*register_buffer)(mc_store_t *s, void *addr, size_t len);
    int (*unregister_buffer)(mc_store_t *s, void *addr);
    /* 1 when [p, p+len) lies inside one buffer registered through this backend (the staging
     * buffer is checked before, by mc__store_is_registered). */
    int (*is_registered)(mc_store_t *s, const void *p, size_t len);
    int (*health_check)(mc_store_t *s);

    /* Lifecycle, each may be NULL (store.c calls them at close, release and a fork() child's
     * destroy): drop the connections; free what the row holds (no buffer from get_buffer is out
     * any more); let the child's copies go without a word to anyone (see mc__store_forget). */
    void (*disconnect)(mc_store_t *s);
    void (*release)(mc_store_t *s);
    void (*forget)(mc_store_t *s);
} mc__store_backend_t;

extern const mc__store_backend_t mc__store_direct; /* store_direct.c */
extern const mc__store_backend_t mc__store_dummy;  /* store_dummy.c */
#endif
