/* The bucket store's key index (see bucket_index.h). */
#include "disk/bucket_index.h"

#include <string.h>

#include "mooncake/common/alloc.h"

static uint64_t hash_key(const char *key, size_t len) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)key[i];
        h *= 1099511628211ull;
    }
    return h ^ (h >> 29);
}

int mc__bindex_init(struct mc__bindex *ix) {
    ix->nslots = 64;
    ix->count = 0;
    ix->slots = mc__calloc(ix->nslots, sizeof *ix->slots);
    return ix->slots ? 0 : -1;
}

void mc__bindex_free(struct mc__bindex *ix) {
    for (size_t i = 0; ix->slots && i < ix->nslots; i++) {
        mc_hlink_t *l = ix->slots[i];
        while (l) {
            mc_hlink_t *n = l->next;
            mc__free(l); /* the entry it begins */
            l = n;
        }
    }
    mc__free(ix->slots);
    ix->slots = NULL;
    ix->count = 0;
}

struct mc__bentry *mc__bindex_find(const struct mc__bindex *ix, const char *key, size_t key_len) {
    uint64_t h = hash_key(key, key_len);
    for (mc_hlink_t *l = ix->slots[h & (ix->nslots - 1)]; l; l = l->next) {
        struct mc__bentry *e = (struct mc__bentry *)l;
        if (l->hash == h && e->key_len == key_len && memcmp(e->key, key, key_len) == 0)
            return e;
    }
    return NULL;
}

/* Doubling is best effort: a failed allocation leaves the table as it was, only slower. */
static void grow(struct mc__bindex *ix) {
    size_t n = ix->nslots * 2;
    mc_hlink_t **slots = mc__calloc(n, sizeof *slots);
    if (!slots)
        return;
    mc__hlink_rehash(ix->slots, ix->nslots, slots, n);
    mc__free(ix->slots);
    ix->slots = slots;
    ix->nslots = n;
}

struct mc__bentry *mc__bindex_add(struct mc__bindex *ix, const char *key, size_t key_len) {
    struct mc__bentry *e = mc__calloc(1, sizeof *e + key_len + 1);
    if (!e)
        return NULL;
    if (ix->count >= ix->nslots)
        grow(ix);
    e->link.hash = hash_key(key, key_len);
    e->key_len = (uint32_t)key_len;
    memcpy(e->key, key, key_len);
    mc__hlink_push(ix->slots, ix->nslots, &e->link);
    ix->count++;
    return e;
}

void mc__bindex_del(struct mc__bindex *ix, struct mc__bentry *e) {
    mc_hlink_t **pp = &ix->slots[e->link.hash & (ix->nslots - 1)];
    while (*pp && *pp != &e->link)
        pp = &(*pp)->next;
    if (*pp) {
        *pp = e->link.next;
        ix->count--;
    }
    mc__free(e);
}

struct mc__bentry *mc__bindex_next(const struct mc__bindex *ix, struct mc__bindex_iter *it) {
    while (!it->next && it->slot < ix->nslots)
        it->next = ix->slots[it->slot++];
    mc_hlink_t *l = it->next;
    if (l)
        it->next = l->next;
    return (struct mc__bentry *)l;
}
