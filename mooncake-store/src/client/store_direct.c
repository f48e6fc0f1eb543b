/* The direct backend row (backend.h): a client of its own, with its master connection, its
 * engine and its contributed segment. The entries live next to their work (direct.h). */
#include "client/backend.h"
#include "client/direct.h"

const mc__store_backend_t mc__store_direct = {
    .name = "direct",
    .table_only = 0,
    .put_parts = mc__direct_put_parts,
    .batch_put = mc__direct_batch_put,
    .get_into_parts = mc__direct_get_into_parts,
    .batch_get_into = mc__direct_batch_get_into,
    .get_buffer = mc__direct_get_buffer,
    .batch_get_buffer = mc__direct_batch_get_buffer,
    .batch_get_size = mc__direct_batch_get_size,
    .batch_get_ranges = mc__direct_batch_get_ranges,
    .batch_get_replica_desc = mc__direct_batch_get_replica_desc,
    .replica_cache_capacity = mc__direct_replica_cache_capacity,
    .moves_any_memory = mc__direct_moves_any_memory,
    .is_exist = mc__direct_is_exist,
    .batch_is_exist = mc__direct_batch_is_exist,
    .get_size = mc__direct_get_size,
    .remove = mc__direct_remove,
    .batch_remove = mc__direct_batch_remove,
    .batch_replica_clear = mc__direct_batch_replica_clear,
    .remove_all = mc__direct_remove_all,
    .remove_by_regex = mc__direct_remove_by_regex,
    .register_buffer = mc__direct_register_buffer,
    .unregister_buffer = mc__direct_unregister_buffer,
    .is_registered = mc__direct_is_registered,
    .health_check = mc__direct_health_check,
    /* close, release and a fork() child's destroy free the direct state in store.c itself */
    .disconnect = NULL,
    .release = NULL,
    .forget = NULL,
};
