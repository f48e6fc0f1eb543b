/* The direct backend's entries (backend.h), each defined next to the work it does: puts in
 * store_put.c, reads in store_get.c and store_ranges.c, metadata calls in store_meta.c,
 * registrations in store_xfer.c, the health check in store.c. store_direct.c lists them. */
#ifndef MC_STORE_CLIENT_DIRECT_H
#define MC_STORE_CLIENT_DIRECT_H
#include <stddef.h>
#include <stdint.h>

#include "mooncake/store.h"

int mc__direct_put_parts(mc_store_t *s, int upsert, const char *key, const mc_store_iov_t *parts,
                         size_t nparts, const mc_replicate_config_t *rc);
int mc__direct_batch_put(mc_store_t *s, int upsert, const mc_store_item_t *items, size_t n,
                         const mc_replicate_config_t *rc, int *results);
int64_t mc__direct_get_into_parts(mc_store_t *s, const char *key, const mc_store_iov_t *iov,
                                  size_t iovcnt);
int mc__direct_batch_get_into(mc_store_t *s, const mc_store_item_t *items, size_t n,
                              int64_t *results);
int mc__direct_get_buffer(mc_store_t *s, const char *key, mc_store_buffer_t **out);
int mc__direct_batch_get_buffer(mc_store_t *s, const char *const *keys, size_t n,
                                mc_store_buffer_t **outs, int *results);
int mc__direct_batch_get_size(mc_store_t *s, const char *const *keys, size_t n, int64_t *sizes);
int mc__direct_batch_get_ranges(mc_store_t *s, mc_store_range_read_t *reads, size_t n);
int mc__direct_batch_get_replica_desc(mc_store_t *s, const char *const *keys, size_t n,
                                      mc_store_replica_list_t *out);
size_t mc__direct_replica_cache_capacity(mc_store_t *s);
int mc__direct_moves_any_memory(mc_store_t *s);
int mc__direct_is_exist(mc_store_t *s, const char *key);
int mc__direct_batch_is_exist(mc_store_t *s, const char *const *keys, size_t n, int *results);
int64_t mc__direct_get_size(mc_store_t *s, const char *key);
int mc__direct_remove(mc_store_t *s, const char *key, int force);
int mc__direct_batch_remove(mc_store_t *s, const char *const *keys, size_t n, int force,
                            int *results);
int mc__direct_batch_replica_clear(mc_store_t *s, const char *const *keys, size_t n,
                                   const char *segment, int *codes);
int64_t mc__direct_remove_all(mc_store_t *s, int force);
int64_t mc__direct_remove_by_regex(mc_store_t *s, const char *regex, int force);
int mc__direct_register_buffer(mc_store_t *s, void *addr, size_t len);
int mc__direct_unregister_buffer(mc_store_t *s, void *addr);
int mc__direct_is_registered(mc_store_t *s, const void *p, size_t len);
int mc__direct_health_check(mc_store_t *s);
#endif
