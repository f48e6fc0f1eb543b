/* Counting allocator. Each block carries a small header with its size so frees can be counted
 * without a side table; the header is max_align_t-sized so returned pointers keep malloc's
 * alignment. The counters are process-wide test hooks (the one sanctioned kind of global). */
#include "mooncake/common/alloc.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef union mc__alloc_hdr {
    size_t size;
    max_align_t align;
} mc__alloc_hdr_t;

static _Atomic int64_t mc__live_bytes;
/* 0 = injection off; 1 = every allocation fails; k > 1 = k-1 more succeed. */
static _Atomic uint64_t mc__fail_countdown;

static int mc__alloc_should_fail(void) {
    uint64_t c = atomic_load_explicit(&mc__fail_countdown, memory_order_relaxed);
    while (c > 1) {
        if (atomic_compare_exchange_weak(&mc__fail_countdown, &c, c - 1))
            return 0;
    }
    return c == 1;
}

void mc__alloc_fail_after(uint64_t k) {
    atomic_store(&mc__fail_countdown, k);
}

int64_t mc__alloc_live_bytes(void) {
    return atomic_load(&mc__live_bytes);
}

void *mc__malloc(size_t n) {
    mc__alloc_hdr_t *h = NULL;
    if (n > SIZE_MAX - sizeof(*h) || mc__alloc_should_fail())
        return NULL;
    h = malloc(sizeof(*h) + n);
    if (!h)
        return NULL;
    h->size = n;
    atomic_fetch_add_explicit(&mc__live_bytes, (int64_t)n, memory_order_relaxed);
    return h + 1;
}

void *mc__calloc(size_t count, size_t n) {
    void *p = NULL;
    if (n && count > SIZE_MAX / n)
        return NULL;
    p = mc__malloc(count * n);
    if (p)
        memset(p, 0, count * n);
    return p;
}

void *mc__realloc(void *p, size_t n) {
    mc__alloc_hdr_t *h = NULL;
    mc__alloc_hdr_t *nh = NULL;
    size_t old = 0;
    if (!p)
        return mc__malloc(n);
    if (n > SIZE_MAX - sizeof(*h) || mc__alloc_should_fail())
        return NULL;
    h = (mc__alloc_hdr_t *)p - 1;
    old = h->size;
    nh = realloc(h, sizeof(*nh) + n);
    if (!nh)
        return NULL;
    nh->size = n;
    atomic_fetch_add_explicit(&mc__live_bytes, (int64_t)n - (int64_t)old, memory_order_relaxed);
    return nh + 1;
}

void mc__free(void *p) {
    mc__alloc_hdr_t *h = NULL;
    if (!p)
        return;
    h = (mc__alloc_hdr_t *)p - 1;
    atomic_fetch_sub_explicit(&mc__live_bytes, (int64_t)h->size, memory_order_relaxed);
    free(h);
}

char *mc__strndup(const char *s, size_t n) {
    size_t len = strnlen(s, n);
    char *d = mc__malloc(len + 1);
    if (!d)
        return NULL;
    memcpy(d, s, len);
    d[len] = '\0';
    return d;
}

char *mc__strdup(const char *s) {
    return mc__strndup(s, SIZE_MAX);
}

void *mc__array_grow(void *arr, size_t n, size_t *cap, size_t elem, size_t first) {
    size_t want;
    void *p;
    if (n < *cap)
        return arr;
    want = *cap ? *cap * 2 : first;
    if (want <= *cap || !elem || want > SIZE_MAX / elem)
        return NULL;
    p = mc__realloc(arr, want * elem);
    if (p)
        *cap = want;
    return p;
}
