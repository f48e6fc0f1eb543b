/* The in-memory index of a bucket store: key -> where its newest intact copy lies. A chained
 * hash table that doubles when its load passes 1; not thread-safe (the store's lock covers it). */
#ifndef MC_DISK_BUCKET_INDEX_H
#define MC_DISK_BUCKET_INDEX_H
#include <stddef.h>
#include <stdint.h>

#include "mooncake/common/hlink.h"

struct mc__bucket; /* bucket_store.c */

struct mc__bentry {
    mc_hlink_t link; /* first: the table's chain and the key's hash */
    struct mc__bucket *b;
    uint64_t off; /* record offset in b's file */
    uint64_t value_len;
    uint64_t seq;
    uint64_t last_use; /* the store's use clock at its last put or get (LRU) */
    uint32_t data_crc;
    uint32_t key_len;
    uint32_t pad; /* zero bytes after the record (O_DIRECT writes' alignment): they are its space */
    char key[];   /* NUL-terminated */
};

struct mc__bindex {
    mc_hlink_t **slots;
    size_t nslots; /* a power of two */
    size_t count;
};

int mc__bindex_init(struct mc__bindex *ix);
void mc__bindex_free(struct mc__bindex *ix);
struct mc__bentry *mc__bindex_find(const struct mc__bindex *ix, const char *key, size_t key_len);
/* A new entry for key (not yet present), zeroed but for key: NULL when out of memory. */
struct mc__bentry *mc__bindex_add(struct mc__bindex *ix, const char *key, size_t key_len);
/* Unlinks and frees e. */
void mc__bindex_del(struct mc__bindex *ix, struct mc__bentry *e);

/* Iteration: start from a zeroed iterator; NULL at the end. The entry returned (only that one)
 * may be deleted before the next call; nothing may be added during a walk. */
struct mc__bindex_iter {
    size_t slot;
    mc_hlink_t *next;
};
struct mc__bentry *mc__bindex_next(const struct mc__bindex *ix, struct mc__bindex_iter *it);
#endif
