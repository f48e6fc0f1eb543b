/* The master's request counters and histograms: what each request records and the value sizes
 * of what is published. A sink: operations report here and metrics.c renders it, so the code
 * that serves a request never reaches into the exposition. */
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
