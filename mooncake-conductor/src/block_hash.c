/* Block hashes as the engines compute them (block_hash.h): the encodings (canonical CBOR, CPython's
 * pickle protocol 5 for the few shapes a block value has, raw little-endian tokens), the digests
 * (our SHA-256, XXH3 from xxhash.h) and the chains. */
#include "block_hash.h"

#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "mooncake/common/alloc.h"
#include "mooncake/error.h"
#include "sha256.h"

#define DYNAMO_SEED 1337
/* CPython's pickler starts a new frame past 64 KiB; one frame is all this codec writes */
#define PICKLE_FRAME_MAX 65536

typedef struct out {
    uint8_t *p;
    size_t len, cap;
} out_t;

static void put(out_t *o, const void *p, size_t n) {
    if (o->len + n <= o->cap)
        memcpy(o->p + o->len, p, n);
    o->len += n; /* past cap: counted, caught by the caller */
}

static void put1(out_t *o, uint8_t b) {
    put(o, &b, 1);
}

/* --- canonical CBOR (RFC 8949 preferred, shortest-length heads), as cbor2.dumps(canonical=True) */

static void cbor_head(out_t *o, uint8_t major, uint64_t v) {
    uint8_t b[9];
    int n;
    if (v < 24) {
        put1(o, (uint8_t)(major << 5 | v));
        return;
    }
    n = v <= 0xff ? 1 : v <= 0xffff ? 2 : v <= 0xffffffffu ? 4 : 8;
    b[0] = (uint8_t)(major << 5 | (n == 1 ? 24 : n == 2 ? 25 : n == 4 ? 26 : 27));
    for (int i = 0; i < n; i++)
        b[1 + i] = (uint8_t)(v >> (8 * (n - 1 - i)));
    put(o, b, (size_t)n + 1);
}

static void cbor_text(out_t *o, const char *s) {
    cbor_head(o, 3, strlen(s));
    put(o, s, strlen(s));
}

/* --- pickle protocol 5: bytes, str, small ints, None and tuples, each memoised as CPython does */

static void pk_bytes(out_t *o, const uint8_t *p, size_t n) {
    put1(o, 0x43); /* SHORT_BINBYTES: digests are 16 or 32 bytes */
    put1(o, (uint8_t)n);
    put(o, p, n);
    put1(o, 0x94); /* MEMOIZE */
}

static void pk_text(out_t *o, const char *s) {
    size_t n = strlen(s);
    if (n < 256) {
        put1(o, 0x8c); /* SHORT_BINUNICODE */
        put1(o, (uint8_t)n);
    } else {
        uint8_t b[5] = {0x58, (uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16),
                        (uint8_t)(n >> 24)}; /* BINUNICODE */
        put(o, b, 5);
    }
    put(o, s, n);
    put1(o, 0x94);
}

static void pk_int(out_t *o, int32_t v) {
    if (v >= 0 && v < 256) {
        uint8_t b[2] = {0x4b, (uint8_t)v}; /* BININT1 */
        put(o, b, 2);
    } else if (v >= 0 && v < 65536) {
        uint8_t b[3] = {0x4d, (uint8_t)v, (uint8_t)(v >> 8)}; /* BININT2 */
        put(o, b, 3);
    } else {
        uint32_t u = (uint32_t)v;
        uint8_t b[5] = {0x4a, (uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16),
                        (uint8_t)(u >> 24)}; /* BININT */
        put(o, b, 5);
    }
}

/* a tuple of n items: short ones end in TUPLE1..3, longer ones start with MARK, end in TUPLE */
static void pk_tuple_open(out_t *o, size_t n) {
    if (n > 3)
        put1(o, 0x28);
}

static void pk_tuple_close(out_t *o, size_t n) {
    static const uint8_t op[4] = {0x29, 0x85, 0x86, 0x87};
    put1(o, n <= 3 ? op[n] : 0x74);
    if (n)
        put1(o, 0x94);
}

/* Wraps a pickled body as pickle.dumps(..., protocol=5) does: PROTO 5, one FRAME, STOP inside. */
static int pk_frame(const out_t *body, out_t *o) {
    size_t n = body->len + 1;
    uint8_t h[11] = {0x80, 5, 0x95};
    if (n >= PICKLE_FRAME_MAX)
        return -1;
    for (int i = 0; i < 8; i++)
        h[3 + i] = (uint8_t)((uint64_t)n >> (8 * i));
    put(o, h, sizeof(h));
    put(o, body->p, body->len);
    put1(o, 0x2e);
    return 0;
}

/* --- the vLLM chain */

static int is_pickle(int algo) {
    return algo == MC_BH_SHA256_PICKLE || algo == MC_BH_XXHASH_PICKLE;
}

static uint32_t vllm_digest(int algo, const uint8_t *p, size_t n, uint8_t out[32]) {
    if (algo == MC_BH_SHA256_CBOR || algo == MC_BH_SHA256_PICKLE) {
        mc__sha256(p, n, out);
        return 32;
    }
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(p, n));
    memcpy(out, c.digest, 16);
    return 16;
}

/* Encodes (parent, tuple(tokens), extra) in the algorithm's codec into o (scratch: pickle body). */
static int vllm_encode(int algo, const uint8_t *parent, uint32_t plen, const int32_t *tok,
                       uint32_t bs, const char *lora, const char *salt, out_t *o, out_t *scratch) {
    size_t n_extra = (lora ? 1u : 0u) + (salt ? 1u : 0u);
    o->len = 0;
    if (!is_pickle(algo)) {
        cbor_head(o, 4, 3);
        cbor_head(o, 2, plen);
        put(o, parent, plen);
        cbor_head(o, 4, bs);
        for (uint32_t i = 0; i < bs; i++)
            cbor_head(o, tok[i] >= 0 ? 0 : 1,
                      tok[i] >= 0 ? (uint64_t)tok[i] : (uint64_t)(-1 - (int64_t)tok[i]));
        if (!n_extra) {
            put1(o, 0xf6);
        } else {
            cbor_head(o, 4, n_extra);
            if (lora)
                cbor_text(o, lora);
            if (salt)
                cbor_text(o, salt);
        }
        return o->len <= o->cap ? 0 : -1;
    }
    scratch->len = 0;
    pk_bytes(scratch, parent, plen);
    pk_tuple_open(scratch, bs);
    for (uint32_t i = 0; i < bs; i++)
        pk_int(scratch, tok[i]);
    pk_tuple_close(scratch, bs);
    if (!n_extra) {
        put1(scratch, 0x4e); /* NONE */
    } else {
        if (lora)
            pk_text(scratch, lora);
        if (salt)
            pk_text(scratch, salt);
        pk_tuple_close(scratch, n_extra);
    }
    pk_tuple_close(scratch, 3);
    if (scratch->len > scratch->cap || pk_frame(scratch, o) != 0)
        return -1;
    return o->len <= o->cap ? 0 : -1;
}

int mc__bh_algo(const char *strategy, const char *algorithm, const char *projection,
                const char **why) {
    static const struct {
        const char *strategy, *algorithm, *projection;
        int algo;
    } known[] = {
        {"vllm_v1", "sha256_cbor", "low64_be", MC_BH_SHA256_CBOR},
        {"vllm_v1", "sha256", "low64_be", MC_BH_SHA256_PICKLE},
        {"vllm_v1", "xxhash_cbor", "low64_be", MC_BH_XXHASH_CBOR},
        {"vllm_v1", "xxhash", "low64_be", MC_BH_XXHASH_PICKLE},
        {"sglang", "sha256", "high64_be", MC_BH_SGLANG},
        {"sglang", "python_hash", "i64", MC_BH_PY_TUPLE},
        {"xxh3_rolling", "xxh3_64", "u64", MC_BH_XXH3_ROLLING},
    };
    int strategy_known = 0, algorithm_known = 0;
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
        if (strcmp(strategy, known[i].strategy))
            continue;
        strategy_known = 1;
        if (strcmp(algorithm, known[i].algorithm))
            continue;
        algorithm_known = 1;
        if (!strcmp(projection, known[i].projection))
            return known[i].algo;
    }
    *why = !strategy_known    ? "unsupported hash strategy"
           : !algorithm_known ? "unsupported hash algorithm"
                              : "unsupported index projection";
    return MC_ERR_INVALID_ARGUMENT;
}

int mc__bh_profile_init(mc_bh_profile_t *p, int algo, const char *seed) {
    uint8_t buf[600], body[600];
    out_t o = {buf, 0, sizeof(buf)}, b = {body, 0, sizeof(body)};
    memset(p, 0, sizeof(*p));
    p->algo = algo;
    if (algo < MC_BH_SHA256_CBOR || algo > MC_BH_XXH3_ROLLING || !seed || strlen(seed) > 512)
        return MC_ERR_INVALID_ARGUMENT;
    if (algo == MC_BH_SGLANG || algo == MC_BH_PY_TUPLE || algo == MC_BH_XXH3_ROLLING)
        return 0; /* no root: their chains start from nothing */
    /* NONE_HASH = hash_fn(seed text) */
    if (is_pickle(algo)) {
        pk_text(&b, seed);
        if (pk_frame(&b, &o) != 0)
            return MC_ERR_INVALID_ARGUMENT;
    } else {
        cbor_text(&o, seed);
    }
    p->root_len = vllm_digest(algo, buf, o.len, p->root);
    return 0;
}

static uint64_t be64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

static void le32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void le64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* CPython's hash() of a tuple of small ints (Objects/tupleobject.c since 3.8, an xxHash-style
 * combiner): an int's hash is itself, -1 becoming -2. */
static uint64_t py_tuple_hash(const int32_t *t, uint32_t n) {
    const uint64_t p1 = 11400714785074694791ull, p2 = 14029467366897019727ull,
                   p5 = 2870177450012600261ull;
    uint64_t acc = p5;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t lane = (uint64_t)(int64_t)(t[i] == -1 ? -2 : t[i]);
        acc += lane * p2;
        acc = acc << 31 | acc >> 33;
        acc *= p1;
    }
    acc += (uint64_t)n ^ (p5 ^ 3527539ull);
    return acc == UINT64_MAX ? 1546275796u : acc;
}

static long raw_chain(const mc_bh_profile_t *p, const int32_t *tok, size_t blocks, uint32_t bs,
                      uint64_t *out, const char **why) {
    uint8_t *bytes = mc__malloc((size_t)bs * 4 + 1), digest[32];
    uint64_t seq = 0;
    if (!bytes)
        return MC_ERR_MEMORY;
    for (size_t b = 0; b < blocks; b++) {
        const int32_t *t = tok + b * bs;
        for (uint32_t i = 0; i < bs; i++) {
            if (t[i] < 0) {
                mc__free(bytes);
                *why = "token ids must be non-negative for this hash profile";
                return MC_ERR_INVALID_ARGUMENT;
            }
            le32(bytes + 4 * i, (uint32_t)t[i]);
        }
        if (p->algo == MC_BH_SGLANG) {
            mc_sha256_t s;
            mc__sha256_init(&s);
            if (b)
                mc__sha256_update(&s, digest, sizeof(digest));
            mc__sha256_update(&s, bytes, (size_t)bs * 4);
            mc__sha256_final(&s, digest);
            out[b] = be64(digest);
        } else {
            uint64_t block = XXH3_64bits_withSeed(bytes, (size_t)bs * 4, DYNAMO_SEED);
            uint8_t pair[16];
            le64(pair, seq);
            le64(pair + 8, block);
            seq = b ? XXH3_64bits_withSeed(pair, sizeof(pair), DYNAMO_SEED) : block;
            out[b] = seq;
        }
    }
    mc__free(bytes);
    return (long)blocks;
}

long mc__bh_chain(const mc_bh_profile_t *p, const int32_t *tok, size_t n_tok, uint32_t bs,
                  const char *lora, const char *salt, uint64_t *out, size_t cap, const char **why) {
    size_t blocks;
    *why = "";
    if (bs == 0 || bs > (1u << 20)) {
        *why = "block_size must be in 1..1048576";
        return MC_ERR_INVALID_ARGUMENT;
    }
    blocks = n_tok / bs;
    if (blocks > cap)
        blocks = cap;
    if (lora && !*lora)
        lora = NULL;
    if (salt && !*salt)
        salt = NULL;
    if ((lora && strlen(lora) > 1024) || (salt && strlen(salt) > 1024)) {
        *why = "lora_name and cache_salt must be under 1 KiB";
        return MC_ERR_INVALID_ARGUMENT;
    }
    if (p->algo == MC_BH_PY_TUPLE) {
        if (lora || salt) {
            *why = "this hash profile has no place for lora_name or cache_salt";
            return MC_ERR_INVALID_ARGUMENT;
        }
        for (size_t b = 0; b < blocks; b++)
            out[b] = py_tuple_hash(tok + b * bs, bs);
        return (long)blocks;
    }
    if (p->algo == MC_BH_SGLANG || p->algo == MC_BH_XXH3_ROLLING) {
        if (lora || salt) {
            *why = "this hash profile has no place for lora_name or cache_salt";
            return MC_ERR_INVALID_ARGUMENT;
        }
        return raw_chain(p, tok, blocks, bs, out, why);
    }
    /* the largest block value: heads, 9 bytes a token, the texts */
    size_t cap_bytes = 64 + (size_t)bs * 9 + 2 * 1040 + 32;
    uint8_t *enc = mc__malloc(cap_bytes), *body = mc__malloc(cap_bytes), parent[32];
    uint32_t plen = p->root_len;
    long rc = (long)blocks;
    if (!enc || !body) {
        mc__free(enc);
        mc__free(body);
        return MC_ERR_MEMORY;
    }
    memcpy(parent, p->root, plen);
    for (size_t b = 0; b < blocks; b++) {
        out_t o = {enc, 0, cap_bytes}, s = {body, 0, cap_bytes};
        if (vllm_encode(p->algo, parent, plen, tok + b * bs, bs, lora, b == 0 ? salt : NULL, &o,
                        &s) != 0) {
            *why = "block_size too large for the pickle codec (one 64 KiB frame)";
            rc = MC_ERR_INVALID_ARGUMENT;
            break;
        }
        plen = vllm_digest(p->algo, enc, o.len, parent);
        out[b] = be64(parent + plen - 8);
    }
    mc__free(enc);
    mc__free(body);
    return rc;
}
