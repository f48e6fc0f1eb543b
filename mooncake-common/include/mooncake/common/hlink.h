/* Chained hash tables of our own entries (the disk tier's key index, the HTTP metadata store):
 * an entry begins with an mc_hlink_t, its first member, so a pointer to the entry converts to one
 * to its link and back; a table is an array of mc_hlink_t * slots whose length is a power of two.
 * What every such table does the same way lives here: pushing a link onto its chain and moving
 * the chains into a larger array. */
#ifndef MC_COMMON_HLINK_H
#define MC_COMMON_HLINK_H
#include <stddef.h>
#include <stdint.h>

typedef struct mc_hlink {
    struct mc_hlink *next;
    uint64_t hash;
} mc_hlink_t;

/* Puts l (its hash set) at the head of its chain in slots[0..n). */
static inline void mc__hlink_push(mc_hlink_t **slots, size_t n, mc_hlink_t *l) {
    mc_hlink_t **head = &slots[l->hash & (n - 1)];
    l->next = *head;
    *head = l;
}

/* Moves every link of from[0..n) into to[0..m) (zeroed, m a power of two). */
static inline void mc__hlink_rehash(mc_hlink_t **from, size_t n, mc_hlink_t **to, size_t m) {
    for (size_t i = 0; i < n; i++) {
        mc_hlink_t *l = from[i];
        while (l) {
            mc_hlink_t *next = l->next;
            mc__hlink_push(to, m, l);
            l = next;
        }
    }
}
#endif
