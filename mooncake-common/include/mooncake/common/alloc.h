/* Every allocation in the native code goes through these wrappers so tests can count live bytes
 * and make the N-th allocation fail (to prove error paths free what they took). */
#ifndef MC_COMMON_ALLOC_H
#define MC_COMMON_ALLOC_H
#include <stddef.h>
#include <stdint.h>

void *mc__malloc(size_t n);
void *mc__calloc(size_t count, size_t n);
void *mc__realloc(void *p, size_t n);
void mc__free(void *p);
char *mc__strdup(const char *s);
char *mc__strndup(const char *s, size_t n);

/* Room for one more element in a growable array: arr itself while n < *cap, else arr grown to
 * twice *cap elements of elem bytes (first when *cap is 0) and *cap updated. NULL when memory or
 * the size runs out; arr and *cap are then unchanged (the caller still owns arr). */
void *mc__array_grow(void *arr, size_t n, size_t *cap, size_t elem, size_t first);

/* Test hooks. fail_after(k): the k-th allocation from now (1-based) and all later ones return
 * NULL; fail_after(0) disables injection. live_bytes: bytes currently allocated through us. */
void mc__alloc_fail_after(uint64_t k);
int64_t mc__alloc_live_bytes(void);
#endif
