/* Two-level segregated-fit allocator over an offset range; see seg_alloc.h. */
#include "master/seg_alloc.h"

#include <string.h>

#include "mooncake/common/alloc.h"
#include "mooncake/error.h"

#define MC__FREE_BIT (1ull << 63)
#define MC__SL_LOG2 4

static int mc__msb(uint64_t v) {
    return 63 - __builtin_clzll(v);
}

/* Class of a block of s units (s >= 1). */
static void mc__seg_mapping(uint64_t s, int *fl, int *sl) {
    if (s < MC__SEG_SL) {
        *fl = 0;
        *sl = (int)s;
        return;
    }
    int m = mc__msb(s);
    *fl = m - MC__SL_LOG2 + 1;
    *sl = (int)((s >> (m - MC__SL_LOG2)) ^ MC__SEG_SL);
}

static uint64_t mc__blk_size(const mc__seg_block_t *b) {
    return b->size & ~MC__FREE_BIT;
}

static int mc__blk_free(const mc__seg_block_t *b) {
    return (b->size & MC__FREE_BIT) != 0;
}

static uint32_t mc__seg_new_block(mc__seg_alloc_t *a) {
    uint32_t i;
    if (a->spare != MC_SEG_NIL) {
        i = a->spare;
        a->spare = a->blocks[i].next_free;
        return i;
    }
    if (a->n_blocks == a->cap_blocks) {
        uint32_t cap = a->cap_blocks ? a->cap_blocks * 2 : 64;
        mc__seg_block_t *p = NULL;
        if (cap <= a->cap_blocks || cap == MC_SEG_NIL)
            return MC_SEG_NIL;
        p = mc__realloc(a->blocks, (size_t)cap * sizeof(*p));
        if (!p)
            return MC_SEG_NIL;
        a->blocks = p;
        a->cap_blocks = cap;
    }
    return a->n_blocks++;
}

static void mc__seg_release_block(mc__seg_alloc_t *a, uint32_t i) {
    a->blocks[i].next_free = a->spare;
    a->spare = i;
}

static void mc__seg_list_insert(mc__seg_alloc_t *a, uint32_t i) {
    mc__seg_block_t *b = &a->blocks[i];
    int fl, sl;
    mc__seg_mapping(mc__blk_size(b), &fl, &sl);
    b->size |= MC__FREE_BIT;
    b->prev_free = MC_SEG_NIL;
    b->next_free = a->heads[fl][sl];
    if (b->next_free != MC_SEG_NIL)
        a->blocks[b->next_free].prev_free = i;
    a->heads[fl][sl] = i;
    a->fl_bitmap |= 1ull << fl;
    a->sl_bitmap[fl] = (uint16_t)(a->sl_bitmap[fl] | (1u << sl));
}

static void mc__seg_list_remove(mc__seg_alloc_t *a, uint32_t i) {
    mc__seg_block_t *b = &a->blocks[i];
    int fl, sl;
    mc__seg_mapping(mc__blk_size(b), &fl, &sl);
    if (b->prev_free != MC_SEG_NIL)
        a->blocks[b->prev_free].next_free = b->next_free;
    else
        a->heads[fl][sl] = b->next_free;
    if (b->next_free != MC_SEG_NIL)
        a->blocks[b->next_free].prev_free = b->prev_free;
    if (a->heads[fl][sl] == MC_SEG_NIL) {
        a->sl_bitmap[fl] = (uint16_t)(a->sl_bitmap[fl] & ~(1u << sl));
        if (!a->sl_bitmap[fl])
            a->fl_bitmap &= ~(1ull << fl);
    }
    b->size &= ~MC__FREE_BIT;
}

int mc__seg_alloc_init(mc__seg_alloc_t *a, uint64_t size) {
    uint64_t units = size / MC_SEG_ALIGN;
    uint32_t i;
    memset(a, 0, sizeof(*a));
    memset(a->heads, 0xff, sizeof(a->heads));
    a->spare = MC_SEG_NIL;
    if (units == 0 || units >= MC__FREE_BIT)
        return MC_ERR_INVALID_PARAMS;
    i = mc__seg_new_block(a);
    if (i == MC_SEG_NIL)
        return MC_ERR_MEMORY;
    a->blocks[i] = (mc__seg_block_t){0, units, MC_SEG_NIL, MC_SEG_NIL, MC_SEG_NIL, MC_SEG_NIL};
    mc__seg_list_insert(a, i);
    a->total_bytes = units * MC_SEG_ALIGN;
    return 0;
}

void mc__seg_alloc_destroy(mc__seg_alloc_t *a) {
    mc__free(a->blocks);
    memset(a, 0, sizeof(*a));
}

/* First non-empty class at or above (fl, sl); -1 if none. */
static uint32_t mc__seg_find(const mc__seg_alloc_t *a, int fl, int sl) {
    uint32_t sl_map = (uint32_t)a->sl_bitmap[fl] & (~0u << sl);
    if (!sl_map) {
        uint64_t fl_map = fl + 1 < MC__SEG_FL ? a->fl_bitmap & (~0ull << (fl + 1)) : 0;
        if (!fl_map)
            return MC_SEG_NIL;
        fl = __builtin_ctzll(fl_map);
        sl_map = a->sl_bitmap[fl];
    }
    sl = __builtin_ctz(sl_map);
    return a->heads[fl][sl];
}

uint32_t mc__seg_alloc(mc__seg_alloc_t *a, uint64_t len, uint64_t *offset) {
    uint64_t units = len / MC_SEG_ALIGN + (len % MC_SEG_ALIGN != 0);
    uint64_t search = units;
    uint32_t i, rest;
    int fl, sl;
    if (units == 0 || units > a->total_bytes / MC_SEG_ALIGN)
        return MC_SEG_NIL;
    /* Round up to the next class boundary so any block found in that class fits. */
    if (search >= MC__SEG_SL)
        search += (1ull << (mc__msb(search) - MC__SL_LOG2)) - 1;
    mc__seg_mapping(search, &fl, &sl);
    if (fl >= MC__SEG_FL)
        return MC_SEG_NIL;
    i = mc__seg_find(a, fl, sl);
    if (i == MC_SEG_NIL) {
        /* The rounded class is empty, but the exact class may hold a block that fits. */
        mc__seg_mapping(units, &fl, &sl);
        for (i = a->heads[fl][sl]; i != MC_SEG_NIL; i = a->blocks[i].next_free)
            if (mc__blk_size(&a->blocks[i]) >= units)
                break;
        if (i == MC_SEG_NIL)
            return MC_SEG_NIL;
    }
    /* Reserve the remainder's slot before touching lists: growth may move the pool. */
    rest = MC_SEG_NIL;
    if (mc__blk_size(&a->blocks[i]) > units) {
        rest = mc__seg_new_block(a);
        if (rest == MC_SEG_NIL)
            return MC_SEG_NIL;
    }
    mc__seg_list_remove(a, i);
    if (rest != MC_SEG_NIL) {
        mc__seg_block_t *b = &a->blocks[i];
        mc__seg_block_t *r = &a->blocks[rest];
        r->off = b->off + units;
        r->size = b->size - units;
        r->prev_phys = i;
        r->next_phys = b->next_phys;
        if (b->next_phys != MC_SEG_NIL)
            a->blocks[b->next_phys].prev_phys = rest;
        b->next_phys = rest;
        b->size = units;
        mc__seg_list_insert(a, rest);
    }
    a->used_bytes += units * MC_SEG_ALIGN;
    a->n_allocs++;
    *offset = a->blocks[i].off * MC_SEG_ALIGN;
    return i;
}

/* Folds block `next` into its physical predecessor `i` (both out of the free lists). */
static void mc__seg_absorb(mc__seg_alloc_t *a, uint32_t i, uint32_t next) {
    mc__seg_block_t *b = &a->blocks[i];
    mc__seg_block_t *n = &a->blocks[next];
    b->size = mc__blk_size(b) + mc__blk_size(n);
    b->next_phys = n->next_phys;
    if (n->next_phys != MC_SEG_NIL)
        a->blocks[n->next_phys].prev_phys = i;
    mc__seg_release_block(a, next);
}

void mc__seg_free(mc__seg_alloc_t *a, uint32_t i) {
    mc__seg_block_t *b;
    if (i >= a->n_blocks || mc__blk_free(&a->blocks[i]))
        return;
    b = &a->blocks[i];
    a->used_bytes -= mc__blk_size(b) * MC_SEG_ALIGN;
    a->n_allocs--;
    if (b->next_phys != MC_SEG_NIL && mc__blk_free(&a->blocks[b->next_phys])) {
        uint32_t n = b->next_phys;
        mc__seg_list_remove(a, n);
        mc__seg_absorb(a, i, n);
    }
    if (b->prev_phys != MC_SEG_NIL && mc__blk_free(&a->blocks[b->prev_phys])) {
        uint32_t p = b->prev_phys;
        mc__seg_list_remove(a, p);
        mc__seg_absorb(a, p, i);
        i = p;
    }
    mc__seg_list_insert(a, i);
}

/* Links block n into the physical chain right after block i. */
static void mc__seg_link_after(mc__seg_alloc_t *a, uint32_t i, uint32_t n) {
    mc__seg_block_t *b = &a->blocks[i];
    mc__seg_block_t *x = &a->blocks[n];
    x->prev_phys = i;
    x->next_phys = b->next_phys;
    if (b->next_phys != MC_SEG_NIL)
        a->blocks[b->next_phys].prev_phys = n;
    b->next_phys = n;
}

uint32_t mc__seg_alloc_take(mc__seg_alloc_t *a, uint32_t *tail, uint64_t off, uint64_t len) {
    uint64_t units = len / MC_SEG_ALIGN + (len % MC_SEG_ALIGN != 0);
    uint64_t at = off / MC_SEG_ALIGN, b_off, b_size;
    uint32_t t = *tail, used, rest = MC_SEG_NIL;
    if (t == MC_SEG_NIL || t >= a->n_blocks || off % MC_SEG_ALIGN != 0 || units == 0 ||
        !mc__blk_free(&a->blocks[t]))
        return MC_SEG_NIL;
    b_off = a->blocks[t].off;
    b_size = mc__blk_size(&a->blocks[t]);
    if (at < b_off || units > b_size || at - b_off > b_size - units)
        return MC_SEG_NIL;
    /* Both new slots first: growth may move the pool. */
    used = at > b_off ? mc__seg_new_block(a) : t;
    if (used == MC_SEG_NIL)
        return MC_SEG_NIL;
    if (at + units < b_off + b_size && (rest = mc__seg_new_block(a)) == MC_SEG_NIL) {
        if (used != t)
            mc__seg_release_block(a, used);
        return MC_SEG_NIL;
    }
    mc__seg_list_remove(a, t);
    if (used != t) { /* t stays, as the free gap before the range */
        a->blocks[t].size = at - b_off;
        a->blocks[used] =
            (mc__seg_block_t){at, units, MC_SEG_NIL, MC_SEG_NIL, MC_SEG_NIL, MC_SEG_NIL};
        mc__seg_link_after(a, t, used);
        mc__seg_list_insert(a, t);
    } else {
        a->blocks[t].size = units;
    }
    if (rest != MC_SEG_NIL) {
        a->blocks[rest] = (mc__seg_block_t){at + units, b_off + b_size - at - units,
                                            MC_SEG_NIL, MC_SEG_NIL,
                                            MC_SEG_NIL, MC_SEG_NIL};
        mc__seg_link_after(a, used, rest);
        mc__seg_list_insert(a, rest);
    }
    a->used_bytes += units * MC_SEG_ALIGN;
    a->n_allocs++;
    *tail = rest;
    return used;
}

uint64_t mc__seg_alloc_largest_free(const mc__seg_alloc_t *a) {
    uint64_t best = 0;
    if (!a->fl_bitmap)
        return 0;
    int fl = mc__msb(a->fl_bitmap);
    int sl = mc__msb(a->sl_bitmap[fl]);
    for (uint32_t i = a->heads[fl][sl]; i != MC_SEG_NIL; i = a->blocks[i].next_free)
        if (mc__blk_size(&a->blocks[i]) > best)
            best = mc__blk_size(&a->blocks[i]);
    return best * MC_SEG_ALIGN;
}
