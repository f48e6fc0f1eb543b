/* First-fit allocator over the staging region. The free list is a sorted array; its capacity is
 * kept above (live blocks + 2) when a block is handed out, so freeing never needs memory. */
#include "staging.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"

#define MC__STAGING_ALIGN 64

static size_t mc__round_up(size_t n) {
    return (n + MC__STAGING_ALIGN - 1) & ~(size_t)(MC__STAGING_ALIGN - 1);
}

int mc__staging_init(mc__staging_t *st, void *base, size_t size) {
    memset(st, 0, sizeof(*st));
    pthread_mutex_init(&st->mu, NULL);
    pthread_cond_init(&st->freed, NULL);
    if (!base || size < MC__STAGING_ALIGN)
        return 0;
    st->free_list = mc__malloc(4 * sizeof(mc__extent_t));
    if (!st->free_list)
        return MC_ERR_INTERNAL_ERROR;
    st->free_cap = 4;
    st->base = base;
    st->size = size & ~(size_t)(MC__STAGING_ALIGN - 1);
    st->free_list[0].off = 0;
    st->free_list[0].len = st->size;
    st->nfree = 1;
    return 0;
}

void mc__staging_fini(mc__staging_t *st) {
    mc__free(st->free_list);
    st->free_list = NULL;
    st->nfree = st->free_cap = 0;
    st->base = NULL;
    pthread_cond_destroy(&st->freed);
    pthread_mutex_destroy(&st->mu);
}

/* Called with mu held. */
static void *mc__alloc_locked(mc__staging_t *st, size_t len) {
    size_t need = mc__round_up(len ? len : 1);
    size_t blocks = st->in_use + 1;
    if (!st->base || need > st->size)
        return NULL;
    if (st->free_cap < blocks + 2) {
        size_t cap = (blocks + 2) * 2;
        mc__extent_t *n = mc__realloc(st->free_list, cap * sizeof(*n));
        if (!n)
            return NULL;
        st->free_list = n;
        st->free_cap = cap;
    }
    for (size_t i = 0; i < st->nfree; i++) {
        mc__extent_t *e = &st->free_list[i];
        size_t off;
        if (e->len < need)
            continue;
        off = e->off;
        e->off += need;
        e->len -= need;
        if (e->len == 0) {
            memmove(e, e + 1, (st->nfree - i - 1) * sizeof(*e));
            st->nfree--;
        }
        st->in_use++;
        return st->base + off;
    }
    return NULL;
}

void *mc__staging_try_alloc(mc__staging_t *st, size_t len) {
    void *p;
    pthread_mutex_lock(&st->mu);
    p = mc__alloc_locked(st, len);
    pthread_mutex_unlock(&st->mu);
    return p;
}

/* The largest free extent, rounded down to the alignment. */
static size_t mc__largest_locked(const mc__staging_t *st) {
    size_t best = 0;
    for (size_t i = 0; i < st->nfree; i++)
        if (st->free_list[i].len > best)
            best = st->free_list[i].len;
    return best;
}

void *mc__staging_alloc_range(mc__staging_t *st, size_t min_len, size_t want, int timeout_ms,
                              size_t *got) {
    struct timespec deadline;
    void *p = NULL;

    if (!st->base || mc__round_up(min_len) > st->size)
        return NULL;
    deadline = mc__realtime_after_ms(timeout_ms);
    pthread_mutex_lock(&st->mu);
    for (;;) {
        size_t largest = mc__largest_locked(st);
        size_t take = want < largest ? want : largest;
        if (take >= min_len && take > 0) {
            p = mc__alloc_locked(st, take);
            if (p) {
                *got = take;
                break;
            }
        }
        if (pthread_cond_timedwait(&st->freed, &st->mu, &deadline) == ETIMEDOUT)
            break;
    }
    pthread_mutex_unlock(&st->mu);
    return p;
}

void mc__staging_free(mc__staging_t *st, void *p, size_t len) {
    size_t off, need, i;
    if (!p)
        return;
    off = (size_t)((uint8_t *)p - st->base);
    need = mc__round_up(len ? len : 1);
    pthread_mutex_lock(&st->mu);
    for (i = 0; i < st->nfree && st->free_list[i].off < off; i++)
        ;
    /* Merge with the previous and/or next extent when adjacent, else insert. */
    if (i > 0 && st->free_list[i - 1].off + st->free_list[i - 1].len == off) {
        st->free_list[i - 1].len += need;
        if (i < st->nfree && off + need == st->free_list[i].off) {
            st->free_list[i - 1].len += st->free_list[i].len;
            memmove(&st->free_list[i], &st->free_list[i + 1],
                    (st->nfree - i - 1) * sizeof(mc__extent_t));
            st->nfree--;
        }
    } else if (i < st->nfree && off + need == st->free_list[i].off) {
        st->free_list[i].off = off;
        st->free_list[i].len += need;
    } else {
        memmove(&st->free_list[i + 1], &st->free_list[i], (st->nfree - i) * sizeof(mc__extent_t));
        st->free_list[i].off = off;
        st->free_list[i].len = need;
        st->nfree++;
    }
    st->in_use--;
    pthread_cond_broadcast(&st->freed);
    pthread_mutex_unlock(&st->mu);
}

int mc__staging_present(const mc__staging_t *st) {
    return st->base != NULL;
}

size_t mc__staging_in_use(mc__staging_t *st) {
    size_t n;
    pthread_mutex_lock(&st->mu);
    n = st->in_use;
    pthread_mutex_unlock(&st->mu);
    return n;
}
