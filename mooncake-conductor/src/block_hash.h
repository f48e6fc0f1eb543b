/* Block hashes computed as the engines compute them, so that POST /query can turn a request's token
 * ids into the hashes the engines publish in their KV events:
 *
 *   vllm_v1   vLLM v1's chain: block i's digest is hash_fn((parent digest, tuple(block tokens),
 *             extra keys)), the parent of block 0 being NONE_HASH = hash_fn(seed) (the seed is
 *             PYTHONHASHSEED's text); extra keys are None, or (lora_name?, cache_salt?) with the
 *             salt on block 0 only. hash_fn is one of vLLM's --prefix-caching-hash-algo modes:
 *             sha256_cbor (canonical CBOR, SHA-256), sha256 (pickle protocol 5, SHA-256),
 *             xxhash_cbor and xxhash (the same encodings, XXH3-128). The published (and indexed)
 *             value is the digest's last eight bytes, big-endian (low64_be).
 *   sglang    SGLang's page chain: digest_i = SHA-256(digest_{i-1} || tokens as u32 little-endian),
 *             published as the first eight bytes, big-endian (high64_be). Older SGLang (0.5.4's
 *             radix cache) publishes Python's hash(tuple(page tokens)) instead, unchained and
 *             independent of PYTHONHASHSEED for integers: algorithm python_hash (i64).
 *   xxh3_rolling  the XXH3 rolling sequence hash (Dynamo's KV router): block_i = XXH3-64(tokens
 *             as u32 little-endian, seed 1337), seq_0 = block_0, seq_i = XXH3-64(seq_{i-1} ||
 *             block_i as u64 little-endian, seed 1337); the value is seq_i.
 *
 * Builtin Python hash() modes (vLLM's old "builtin") are not reproducible outside the process
 * and are not offered. Golden vectors from the engines' own code: tests/golden/make_hash_golden.py.
 */
#ifndef MC_CONDUCTOR_BLOCK_HASH_H
#define MC_CONDUCTOR_BLOCK_HASH_H
#include <stddef.h>
#include <stdint.h>

enum {
    MC_BH_SHA256_CBOR = 1,
    MC_BH_SHA256_PICKLE,
    MC_BH_XXHASH_CBOR,
    MC_BH_XXHASH_PICKLE,
    MC_BH_SGLANG,
    MC_BH_PY_TUPLE,
    MC_BH_XXH3_ROLLING
};

typedef struct mc_bh_profile {
    int algo;
    uint32_t root_len; /* vLLM: NONE_HASH's length (32 for SHA-256, 16 for XXH3-128) */
    uint8_t root[32];
} mc_bh_profile_t;

/* The algorithm for a (strategy, algorithm, index_projection) triple as /register names it, or
 * MC_ERR_INVALID_ARGUMENT with *why set. */
int mc__bh_algo(const char *strategy, const char *algorithm, const char *projection,
                const char **why);
/* Derives the root (vLLM's NONE_HASH) from the seed text. 0 or MC_ERR_INVALID_ARGUMENT. */
int mc__bh_profile_init(mc_bh_profile_t *p, int algo, const char *seed);
/* The hashes of the complete blocks of tok (at most cap of them): how many, or
 * MC_ERR_INVALID_ARGUMENT with *why set (a token the algorithm cannot encode, a LoRA or salt it
 * has no place for, a block too large for the pickle codec), MC_ERR_MEMORY. lora and salt: NULL or
 * "" for none. */
long mc__bh_chain(const mc_bh_profile_t *p, const int32_t *tok, size_t n_tok, uint32_t block_size,
                  const char *lora, const char *salt, uint64_t *out, size_t cap, const char **why);
#endif
