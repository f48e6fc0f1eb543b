#include <stdlib.h>
#include <string.h>

#include "bench_stats.h"
#include "mooncake/common/alloc.h"
#include "mooncake/error.h"

static int mc__samples_reserve(mc__samples_t *s, size_t need) {
    size_t cap = s->cap ? s->cap : 1024;
    uint64_t *grown = NULL;
    if (need <= s->cap)
        return 0;
    while (cap < need)
        cap *= 2;
    grown = mc__realloc(s->v, cap * sizeof(*grown));
    if (!grown)
        return MC_ERR_MEMORY;
    s->v = grown;
    s->cap = cap;
    return 0;
}

int mc__samples_add(mc__samples_t *s, uint64_t ns) {
    int rc = mc__samples_reserve(s, s->n + 1);
    if (rc == 0)
        s->v[s->n++] = ns;
    return rc;
}

int mc__samples_merge(mc__samples_t *into, const mc__samples_t *from) {
    int rc = mc__samples_reserve(into, into->n + from->n);
    if (rc == 0 && from->n > 0) {
        memcpy(into->v + into->n, from->v, from->n * sizeof(*from->v));
        into->n += from->n;
    }
    return rc;
}

static int mc__u64_cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

uint64_t mc__samples_percentile(mc__samples_t *s, double p) {
    size_t idx;
    if (s->n == 0)
        return 0;
    qsort(s->v, s->n, sizeof(*s->v), mc__u64_cmp);
    /* Nearest rank: the smallest sample with at least p% of samples at or below it. */
    idx = (size_t)((p / 100.0) * (double)s->n + 0.999999);
    if (idx == 0)
        idx = 1;
    if (idx > s->n)
        idx = s->n;
    return s->v[idx - 1];
}

void mc__samples_free(mc__samples_t *s) {
    mc__free(s->v);
    s->v = NULL;
    s->n = s->cap = 0;
}
