/* Latency samples of a benchmark run: appended per thread, merged, then read as percentiles. */
#ifndef MC_BENCH_STATS_H
#define MC_BENCH_STATS_H
#include <stddef.h>
#include <stdint.h>

typedef struct mc__samples {
    uint64_t *v; /* nanoseconds */
    size_t n, cap;
} mc__samples_t;

int mc__samples_add(mc__samples_t *s, uint64_t ns);
int mc__samples_merge(mc__samples_t *into, const mc__samples_t *from);
/* Sorts in place; p in [0, 100]. 0 when empty. */
uint64_t mc__samples_percentile(mc__samples_t *s, double p);
void mc__samples_free(mc__samples_t *s);
#endif
