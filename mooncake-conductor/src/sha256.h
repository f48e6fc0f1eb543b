/* SHA-256 (FIPS 180-4) in our own C: the block hashes of vLLM's sha256 modes and SGLang's chain
 * are SHA-256 digests, and the conductor computes them for every /query, so no libcrypto (which a
 * plain host may lack, and which would be a new link-time dependency) is involved. */
#ifndef MC_CONDUCTOR_SHA256_H
#define MC_CONDUCTOR_SHA256_H
#include <stddef.h>
#include <stdint.h>

#define MC_SHA256_LEN 32

typedef struct mc_sha256 {
    uint32_t h[8];
    uint64_t total; /* bytes fed */
    uint8_t buf[64];
    uint32_t used;
} mc_sha256_t;

void mc__sha256_init(mc_sha256_t *s);
void mc__sha256_update(mc_sha256_t *s, const void *p, size_t n);
void mc__sha256_final(mc_sha256_t *s, uint8_t out[MC_SHA256_LEN]);
void mc__sha256(const void *p, size_t n, uint8_t out[MC_SHA256_LEN]);
#endif
