/* The master's gauges and counters: what each request records, the value sizes of what is
 * published, and the totals of objects, segments and space that the model reports as it
 * changes them. A sink, their one writer: operations and the model report here, metrics.c and
 * the admin views read the totals, and no model file writes a metric itself. */
#include "master/master_internal.h"

const uint64_t mc__lat_le_us[MC__LAT_BUCKETS] = {10,   25,   50,    100,   250,    500,
                                                 1000, 2500, 10000, 50000, 250000, 1000000};
/* The reference's value-size buckets: 4 KiB .. 64 MiB. */
const uint64_t mc__size_le[MC__SIZE_BUCKETS] = {4096,    65536,    262144,  1048576,
                                                4194304, 16777216, 67108864};

void mc__op_record(mc__master_t *m, uint8_t type, uint32_t keys, uint32_t errors,
                   uint64_t elapsed_ns) {
    mc__op_stats_t *st = NULL;
    uint64_t us = elapsed_ns / 1000u;
    int b = 0;
    if (type == 0 || type >= MC_MP_TYPE_MAX_)
        return;
    st = &m->op[type];
    atomic_fetch_add_explicit(&st->ops, keys, memory_order_relaxed);
    atomic_fetch_add_explicit(&st->errors, errors, memory_order_relaxed);
    atomic_fetch_add_explicit(&st->rpcs, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&st->lat_sum_us, us, memory_order_relaxed);
    while (b < MC__LAT_BUCKETS && us > mc__lat_le_us[b])
        b++;
    atomic_fetch_add_explicit(&st->lat_bucket[b], 1, memory_order_relaxed);
    if (keys <= 1) {
        atomic_fetch_add_explicit(&st->single, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&st->single_failed, errors != 0, memory_order_relaxed);
        return;
    }
    atomic_fetch_add_explicit(&st->batch, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&st->batch_items, keys, memory_order_relaxed);
    atomic_fetch_add_explicit(&st->batch_failed_items, errors, memory_order_relaxed);
    if (errors == keys)
        atomic_fetch_add_explicit(&st->batch_failed, 1, memory_order_relaxed);
    else if (errors)
        atomic_fetch_add_explicit(&st->batch_partial, 1, memory_order_relaxed);
}

void mc__value_size_record(mc__master_t *m, uint64_t size) {
    int b = 0;
    while (b < MC__SIZE_BUCKETS && size > mc__size_le[b])
        b++;
    atomic_fetch_add_explicit(&m->value_size_bucket[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->value_size_sum, size, memory_order_relaxed);
}

/* The totals are seq_cst atomics, as each writer had them before they had one owner: a reader
 * (metrics, the admin summary, the eviction watermark) sees them without a lock. */
void mc__gauge_objects(mc__master_t *m, int64_t n, int64_t bytes) {
    atomic_fetch_add(&m->n_objects, n);
    atomic_fetch_add(&m->object_bytes, bytes);
}

void mc__gauge_space(mc__master_t *m, int64_t segments, int64_t capacity, int64_t used) {
    if (segments)
        atomic_fetch_add(&m->n_segments, segments);
    if (capacity)
        atomic_fetch_add(&m->capacity_bytes, capacity);
    if (used)
        atomic_fetch_add(&m->used_bytes, used);
}

void mc__gauge_put_discarded(mc__master_t *m) {
    atomic_fetch_add(&m->discarded_puts, 1);
}

void mc__gauge_put_released(mc__master_t *m) {
    atomic_fetch_add(&m->released_puts, 1);
}

void mc__gauge_eviction(mc__master_t *m, uint64_t objects, uint64_t bytes) {
    atomic_fetch_add(&m->eviction_runs, 1);
    atomic_fetch_add(&m->eviction_successes, objects > 0);
    atomic_fetch_add(&m->evictions, objects);
    atomic_fetch_add(&m->evicted_bytes, bytes);
}

void mc__gauge_client_gone(mc__master_t *m, int expired) {
    atomic_fetch_add(expired ? &m->expired_clients : &m->left_clients, 1);
}
