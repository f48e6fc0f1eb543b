/* Random bytes from the kernel (getrandom), for ids, nonces and epochs. */
#ifndef MC_COMMON_RANDOM_H
#define MC_COMMON_RANDOM_H
#include <stddef.h>

/* Fills p with n random bytes. Without an entropy source (very old kernels, seccomp) it falls
 * back to time and addresses: still unique within a host, but guessable. */
void mc__random_fill(void *p, size_t n);
#endif
