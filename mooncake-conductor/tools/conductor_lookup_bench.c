/* conductor_lookup_bench: the in-process limit of a /query, for benchmarks/conductor.py to print
 * beside the service's latency: the same work without HTTP, msgpack or threads. A prefix table
 * holds one chain of vLLM sha256_cbor blocks (16 tokens, seed "0") on GPU for each of N sources,
 * source i the first (i+1)/N of it; each timed iteration hashes the request's tokens and walks
 * every source as /query's GPU phase does.
 *
 *   conductor_lookup_bench TOKENS INSTANCES ITERATIONS  ->  "p50_us=... p99_us=... blocks=..." */
#include <stdio.h>
#include <stdlib.h>

#include "block_hash.h"
#include "kv_event_decode.h"
#include "mooncake/common/time.h"
#include "prefix_table.h"

#define BS 16

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    long tokens = argc > 1 ? atol(argv[1]) : 0, n_src = argc > 2 ? atol(argv[2]) : 0,
         iters = argc > 3 ? atol(argv[3]) : 0;
    if (tokens < BS || tokens > (1 << 22) || n_src < 1 || n_src > 4096 || iters < 1) {
        fprintf(stderr,
                "usage: conductor_lookup_bench TOKENS(>=16) INSTANCES(1..4096) ITERATIONS\n");
        return 2;
    }
    int32_t *tok = malloc(sizeof(*tok) * (size_t)tokens);
    size_t blocks = (size_t)tokens / BS;
    uint64_t *h = malloc(sizeof(*h) * blocks), *lat = malloc(sizeof(*lat) * (size_t)iters);
    int *src = malloc(sizeof(*src) * (size_t)n_src);
    mc_bh_profile_t prof;
    mc_prefix_table_t *pt;
    const char *why;
    if (!tok || !h || !lat || !src || mc__pt_new(blocks * (size_t)n_src + 1, &pt) != 0)
        return 1;
    for (long i = 0; i < tokens; i++)
        tok[i] = (int32_t)((i * 7919 + 13) % 50000); /* the Python benchmark's tokens */
    mc__bh_profile_init(&prof, MC_BH_SHA256_CBOR, "0");
    if (mc__bh_chain(&prof, tok, (size_t)tokens, BS, NULL, NULL, h, blocks, &why) != (long)blocks)
        return 1;
    int ctx = mc__pt_context(pt, "default", "m", "", BS, "");
    for (long i = 0; i < n_src; i++) {
        char name[32];
        snprintf(name, sizeof(name), "e%ld", i);
        src[i] = mc__pt_source(pt, name, 0);
        mc__pt_stored(pt, ctx, src[i], MC_KV_MEDIUM_GPU, h,
                      (uint32_t)((size_t)(i + 1) * blocks / (size_t)n_src));
    }
    size_t best = 0;
    for (long it = 0; it < iters; it++) {
        uint64_t t0 = mc__now_ns();
        mc__bh_chain(&prof, tok, (size_t)tokens, BS, NULL, NULL, h, blocks, &why);
        best = 0;
        for (long i = 0; i < n_src; i++) {
            size_t k = 0;
            while (k < blocks &&
                   (mc__pt_held(pt, ctx, h[k], src[i], NULL) & (1u << MC_KV_MEDIUM_GPU)))
                k++;
            best = k > best ? k : best;
        }
        lat[it] = mc__now_ns() - t0;
    }
    qsort(lat, (size_t)iters, sizeof(*lat), cmp_u64);
    printf("p50_us=%.1f p99_us=%.1f blocks=%zu matched=%zu\n", lat[iters / 2] / 1e3,
           lat[(size_t)((double)iters * 0.99)] / 1e3, blocks, best);
    mc__pt_free(pt);
    free(tok);
    free(h);
    free(lat);
    free(src);
    return best == blocks ? 0 : 1;
}
