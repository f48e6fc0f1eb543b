/* Space allocator for one segment: offsets into [0, size), 64-byte granularity, no memory of the
 * segment is touched (the master never sees object data).
 *
 * Two-level segregated fit (TLSF-like): free blocks sit in size-class lists indexed by their
 * highest bit and the next 4 bits; a request takes the head of the first non-empty class that is
 * guaranteed to fit, splits off the remainder, and frees coalesce with both physical neighbours.
 * Every operation is O(1); with KV-block-sized objects the worst-case waste is 1/16 per block.
 * Block records live in an index-addressed pool (32 bytes each), so one allocation costs one
 * pool slot and callers keep a 32-bit handle. Not thread-safe: the segment's lock guards it. */
#ifndef MC_STORE_MASTER_SEG_ALLOC_H
#define MC_STORE_MASTER_SEG_ALLOC_H
#include <stdint.h>

#define MC_SEG_ALIGN 64u
#define MC_SEG_NIL UINT32_MAX
#define MC__SEG_FL 64
#define MC__SEG_SL 16

typedef struct mc__seg_block {
    uint64_t off;  /* in units of MC_SEG_ALIGN */
    uint64_t size; /* in units; top bit set while free */
    uint32_t prev_phys, next_phys;
    uint32_t prev_free, next_free; /* also the pool's free-slot chain */
} mc__seg_block_t;

typedef struct mc__seg_alloc {
    mc__seg_block_t *blocks;
    uint32_t n_blocks, cap_blocks;
    uint32_t spare; /* chain of unused pool slots */
    uint64_t fl_bitmap;
    uint16_t sl_bitmap[MC__SEG_FL];
    uint32_t heads[MC__SEG_FL][MC__SEG_SL];
    uint64_t total_bytes; /* usable: size rounded down to MC_SEG_ALIGN */
    uint64_t used_bytes;
    uint64_t n_allocs;
} mc__seg_alloc_t;

/* 0 or MC_ERR_MEMORY / MC_ERR_INVALID_PARAMS (size below MC_SEG_ALIGN). */
int mc__seg_alloc_init(mc__seg_alloc_t *a, uint64_t size);
void mc__seg_alloc_destroy(mc__seg_alloc_t *a);
/* Allocates len bytes (rounded up to MC_SEG_ALIGN). Returns a block handle and its byte offset,
 * or MC_SEG_NIL when no free block fits (or the pool cannot grow). */
uint32_t mc__seg_alloc(mc__seg_alloc_t *a, uint64_t len, uint64_t *offset);
void mc__seg_free(mc__seg_alloc_t *a, uint32_t handle);
/* Rebuilding an allocator from a list of allocated ranges sorted by offset (a restart from the
 * metadata log): each call takes [off, off+len) (len rounded up) out of *tail, the free block
 * that ends the segment, leaving the gap before it free. *tail starts as handle 0 (a new
 * allocator's one block) and is updated (MC_SEG_NIL once nothing is left after the range).
 * Returns the range's handle, or MC_SEG_NIL when it does not lie inside *tail (unsorted or
 * overlapping input) or the pool cannot grow. The block at offset 0 always has handle 0, so
 * next_phys from handle 0 walks the blocks in order. */
uint32_t mc__seg_alloc_take(mc__seg_alloc_t *a, uint32_t *tail, uint64_t off, uint64_t len);
static inline int mc__seg_block_is_free(const mc__seg_block_t *b) {
    return (b->size >> 63) != 0;
}
static inline uint64_t mc__seg_block_size(const mc__seg_block_t *b) {
    return b->size & ~(1ull << 63);
}
/* Largest block that an allocation could get right now, in bytes (for fragmentation stats). */
uint64_t mc__seg_alloc_largest_free(const mc__seg_alloc_t *a);
/* Bytes one allocation of len really takes. */
static inline uint64_t mc__seg_round(uint64_t len) {
    return (len + MC_SEG_ALIGN - 1) / MC_SEG_ALIGN * MC_SEG_ALIGN;
}
#endif
