/* The client's staging buffer: one registered region carved into variable-size blocks, so
 * copies and buffers returned to users need no per-call registration with the engine. */
#ifndef MC_STORE_CLIENT_STAGING_H
#define MC_STORE_CLIENT_STAGING_H
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef struct mc__extent {
    size_t off;
    size_t len;
} mc__extent_t;

/* Its fields are staging.c's: the other files go through the calls below. */
typedef struct mc__staging {
    uint8_t *base; /* NULL when the client has no staging buffer */
    size_t size;
    pthread_mutex_t mu;
    pthread_cond_t freed;
    mc__extent_t *free_list; /* sorted by offset, coalesced */
    size_t nfree;
    size_t free_cap;
    size_t in_use;
} mc__staging_t;

int mc__staging_init(mc__staging_t *st, void *base, size_t size);
void mc__staging_fini(mc__staging_t *st);
/* A block of exactly len bytes (64-byte aligned) or NULL when none is free now. */
void *mc__staging_try_alloc(mc__staging_t *st, size_t len);
/* A block of at least min_len and at most want bytes, waiting up to timeout_ms for one to be
 * freed. *got receives the size. NULL when even min_len never fits. */
void *mc__staging_alloc_range(mc__staging_t *st, size_t min_len, size_t want, int timeout_ms,
                              size_t *got);
void mc__staging_free(mc__staging_t *st, void *p, size_t len);
/* 1 when there is a staging buffer at all. */
int mc__staging_present(const mc__staging_t *st);
/* The bytes in blocks handed out now (a release waits while buffers from get_buffer hold some). */
size_t mc__staging_in_use(mc__staging_t *st);
#endif
