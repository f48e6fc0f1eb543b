/* Fuzzes the conductor's block hashes (mooncake-conductor/src/block_hash.h) on any profile, block
 * size, LoRA / salt and token ids: never more hashes than complete blocks, the same input hashes
 * the same twice, and a chain's first blocks hash the same when the tokens after them are cut
 * (each block depends only on those before it). Input: algo, block size, flags, then int32s. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "block_hash.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CAP 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    mc_bh_profile_t p;
    uint64_t a[CAP], b[CAP];
    int32_t tok[1024];
    const char *why;
    if (size < 3)
        return 0;
    int algo = 1 + data[0] % MC_BH_XXH3_ROLLING;
    uint32_t bs = data[1] % 33; /* 0 is refused, the rest small enough for many blocks */
    const char *lora = data[2] & 1 ? "adapter" : NULL, *salt = data[2] & 2 ? "salt" : NULL;
    size_t n = (size - 3) / 4;
    if (n > sizeof(tok) / sizeof(tok[0]))
        n = sizeof(tok) / sizeof(tok[0]);
    for (size_t i = 0; i < n; i++)
        memcpy(&tok[i], data + 3 + 4 * i, 4);
    if (mc__bh_profile_init(&p, algo, data[2] & 4 ? "0" : "vllm-none-hash") != 0)
        abort();
    long got = mc__bh_chain(&p, tok, n, bs, lora, salt, a, CAP, &why);
    if (got < 0) {
        if (!why || !*why)
            abort(); /* a refusal says why */
        return 0;
    }
    if (bs == 0 || (size_t)got > n / bs || got > CAP)
        abort();
    if (mc__bh_chain(&p, tok, n, bs, lora, salt, b, CAP, &why) != got ||
        memcmp(a, b, (size_t)got * sizeof(a[0])))
        abort();
    if (got > 1) {
        long k = got / 2;
        if (mc__bh_chain(&p, tok, (size_t)k * bs, bs, lora, salt, b, CAP, &why) != k ||
            memcmp(a, b, (size_t)k * sizeof(a[0])))
            abort();
    }
    return 0;
}
