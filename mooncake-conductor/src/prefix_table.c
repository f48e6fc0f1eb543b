/* The prefix table (prefix_table.h): one hash table of (context, block hash) entries, each with
 * the sources holding it as (source, media bits) pairs, and an LRU list for the bound. */
#include "prefix_table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mooncake/common/alloc.h"
#include "mooncake/error.h"

#define MAX_NAMES 4096

typedef struct holder {
    uint16_t src;
    uint8_t media; /* bit per MC_KV_MEDIUM_* */
} holder_t;

typedef struct entry {
    uint64_t hash;
    uint32_t ctx;
    uint16_t n, cap;
    holder_t *holders;
    struct entry *next;                /* bucket chain */
    struct entry *lru_prev, *lru_next; /* most recent at head */
} entry_t;

struct mc_prefix_table {
    entry_t **buckets;
    size_t mask, count, max_blocks;
    entry_t *lru_head, *lru_tail;
    char *ctx_names[MAX_NAMES], *src_names[MAX_NAMES];
    size_t n_ctx, n_src;
    uint64_t evicted;
};

static size_t slot(const mc_prefix_table_t *t, int ctx, uint64_t h) {
    uint64_t x = h ^ ((uint64_t)(uint32_t)ctx * 0x9E3779B97F4A7C15ull);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x & t->mask;
}

int mc__pt_new(size_t max_blocks, mc_prefix_table_t **out) {
    mc_prefix_table_t *t = mc__calloc(1, sizeof(*t));
    size_t nb = 1024;
    *out = NULL;
    if (!t || max_blocks == 0) {
        mc__free(t);
        return t ? MC_ERR_INVALID_ARGUMENT : MC_ERR_MEMORY;
    }
    while (nb < max_blocks && nb < (1u << 24))
        nb <<= 1;
    if (!(t->buckets = mc__calloc(nb, sizeof(*t->buckets)))) {
        mc__free(t);
        return MC_ERR_MEMORY;
    }
    t->mask = nb - 1;
    t->max_blocks = max_blocks;
    *out = t;
    return 0;
}

static void lru_unlink(mc_prefix_table_t *t, entry_t *e) {
    if (e->lru_prev)
        e->lru_prev->lru_next = e->lru_next;
    else
        t->lru_head = e->lru_next;
    if (e->lru_next)
        e->lru_next->lru_prev = e->lru_prev;
    else
        t->lru_tail = e->lru_prev;
    e->lru_prev = e->lru_next = NULL;
}

static void lru_front(mc_prefix_table_t *t, entry_t *e) {
    e->lru_next = t->lru_head;
    e->lru_prev = NULL;
    if (t->lru_head)
        t->lru_head->lru_prev = e;
    t->lru_head = e;
    if (!t->lru_tail)
        t->lru_tail = e;
}

static void entry_drop(mc_prefix_table_t *t, entry_t *e) {
    entry_t **pp = &t->buckets[slot(t, (int)e->ctx, e->hash)];
    while (*pp != e)
        pp = &(*pp)->next;
    *pp = e->next;
    lru_unlink(t, e);
    mc__free(e->holders);
    mc__free(e);
    t->count--;
}

void mc__pt_free(mc_prefix_table_t *t) {
    if (!t)
        return;
    while (t->lru_head)
        entry_drop(t, t->lru_head);
    for (size_t i = 0; i < t->n_ctx; i++)
        mc__free(t->ctx_names[i]);
    for (size_t i = 0; i < t->n_src; i++)
        mc__free(t->src_names[i]);
    mc__free(t->buckets);
    mc__free(t);
}

static int name_id(char **names, size_t *n, const char *name) {
    for (size_t i = 0; i < *n; i++)
        if (!strcmp(names[i], name))
            return (int)i;
    if (*n == MAX_NAMES)
        return MC_ERR_BUFFER_OVERFLOW;
    if (!(names[*n] = mc__strdup(name)))
        return MC_ERR_MEMORY;
    return (int)(*n)++;
}

int mc__pt_context(mc_prefix_table_t *t, const char *tenant, const char *model, const char *lora,
                   uint32_t block_size, const char *salt) {
    char key[1200];
    /* the unit separator cannot be confused with the fields' own characters */
    int n = snprintf(key, sizeof(key), "%s\x1f%s\x1f%s\x1f%u\x1f%s", tenant ? tenant : "default",
                     model ? model : "", lora ? lora : "", block_size, salt ? salt : "");
    if (n < 0 || (size_t)n >= sizeof(key))
        return MC_ERR_INVALID_ARGUMENT;
    return name_id(t->ctx_names, &t->n_ctx, key);
}

int mc__pt_source(mc_prefix_table_t *t, const char *instance, uint32_t dp_rank) {
    char key[600];
    int n = snprintf(key, sizeof(key), "%s\x1f%u", instance ? instance : "", dp_rank);
    if (n < 0 || (size_t)n >= sizeof(key))
        return MC_ERR_INVALID_ARGUMENT;
    return name_id(t->src_names, &t->n_src, key);
}

static entry_t *find(mc_prefix_table_t *t, int ctx, uint64_t h) {
    for (entry_t *e = t->buckets[slot(t, ctx, h)]; e; e = e->next)
        if (e->hash == h && e->ctx == (uint32_t)ctx)
            return e;
    return NULL;
}

static entry_t *find_or_add(mc_prefix_table_t *t, int ctx, uint64_t h) {
    entry_t *e = find(t, ctx, h);
    if (e) {
        lru_unlink(t, e);
        lru_front(t, e);
        return e;
    }
    /* the bound: the coldest block goes first */
    while (t->count >= t->max_blocks && t->lru_tail) {
        entry_drop(t, t->lru_tail);
        t->evicted++;
    }
    if (!(e = mc__calloc(1, sizeof(*e))))
        return NULL;
    e->hash = h;
    e->ctx = (uint32_t)ctx;
    size_t s = slot(t, ctx, h);
    e->next = t->buckets[s];
    t->buckets[s] = e;
    lru_front(t, e);
    t->count++;
    return e;
}

void mc__pt_stored(mc_prefix_table_t *t, int ctx, int src, int medium, const uint64_t *h,
                   uint32_t n) {
    if (ctx < 0 || src < 0 || medium < 0 || medium >= MC_PT_MEDIA)
        return;
    for (uint32_t i = 0; i < n; i++) {
        entry_t *e = find_or_add(t, ctx, h[i]);
        uint16_t k;
        if (!e)
            return;
        for (k = 0; k < e->n && e->holders[k].src != (uint16_t)src; k++) {
        }
        if (k == e->n) {
            if (e->n == e->cap) {
                uint16_t cap = e->cap ? (uint16_t)(e->cap * 2) : 2;
                holder_t *nh = e->cap < 32768 ? mc__realloc(e->holders, cap * sizeof(*nh)) : NULL;
                if (!nh) {
                    if (e->n == 0)
                        entry_drop(t, e); /* nobody holds it: it may not stay */
                    continue;
                }
                e->holders = nh;
                e->cap = cap;
            }
            e->holders[e->n++] = (holder_t){(uint16_t)src, 0};
        }
        e->holders[k].media |= (uint8_t)(1u << medium);
    }
}

/* Clears media bits of src in e; drops e when nobody holds it. */
static void unhold(mc_prefix_table_t *t, entry_t *e, int src, uint8_t bits) {
    for (uint16_t k = 0; k < e->n; k++) {
        if (e->holders[k].src != (uint16_t)src)
            continue;
        e->holders[k].media &= (uint8_t)~bits;
        if (!e->holders[k].media)
            e->holders[k] = e->holders[--e->n];
        break;
    }
    if (e->n == 0)
        entry_drop(t, e);
}

void mc__pt_removed(mc_prefix_table_t *t, int ctx, int src, int medium, const uint64_t *h,
                    uint32_t n) {
    if (ctx < 0 || src < 0 || medium < 0 || medium >= MC_PT_MEDIA)
        return;
    for (uint32_t i = 0; i < n; i++) {
        entry_t *e = find(t, ctx, h[i]);
        if (e)
            unhold(t, e, src, (uint8_t)(1u << medium));
    }
}

void mc__pt_clear_source(mc_prefix_table_t *t, int src) {
    entry_t *e = t->lru_head;
    while (e) {
        entry_t *next = e->lru_next;
        unhold(t, e, src, 0xff);
        e = next;
    }
}

size_t mc__pt_query(mc_prefix_table_t *t, int ctx, const uint64_t *h, uint32_t n,
                    mc_pt_match_t *out, size_t cap) {
    size_t m = 0;
    entry_t *first = n ? find(t, ctx, h[0]) : NULL;
    if (!first)
        return 0;
    /* the candidates are the holders of the first block; each walks on while it holds */
    for (uint16_t k = 0; k < first->n && m < cap; k++) {
        mc_pt_match_t r;
        uint8_t alive_any = 1, alive = 0xff;
        memset(&r, 0, sizeof(r));
        r.source = first->holders[k].src;
        for (uint32_t i = 0; i < n && (alive_any || alive); i++) {
            entry_t *e = i ? find(t, ctx, h[i]) : first;
            uint8_t media = 0;
            for (uint16_t j = 0; e && j < e->n; j++)
                if (e->holders[j].src == r.source)
                    media = e->holders[j].media;
            if (alive_any && media)
                r.any++;
            else
                alive_any = 0;
            for (int md = 0; md < MC_PT_MEDIA; md++) {
                if ((alive & (1u << md)) && (media & (1u << md)))
                    r.medium[md]++;
                else
                    alive &= (uint8_t) ~(1u << md);
            }
        }
        out[m++] = r;
    }
    /* longest first */
    for (size_t i = 1; i < m; i++)
        for (size_t j = i; j > 0 && out[j].any > out[j - 1].any; j--) {
            mc_pt_match_t x = out[j];
            out[j] = out[j - 1];
            out[j - 1] = x;
        }
    return m;
}

void mc__pt_stats(mc_prefix_table_t *t, mc_pt_stats_t *out) {
    out->blocks = t->count;
    out->evicted = t->evicted;
    out->contexts = t->n_ctx;
    out->sources = t->n_src;
}
