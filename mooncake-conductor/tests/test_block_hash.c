/* Block hashes against the engines: every case of golden/hash_golden.json (made by vLLM's and
 * SGLang's own hash code, make_hash_golden.py) recomputed in C, our SHA-256 against the standard's
 * vectors, and the inputs a profile cannot take refused with a reason. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>
#include <cmocka.h>

#include "block_hash.h"
#include "mooncake/error.h"
#include "sha256.h"

static void hex(const uint8_t *d, size_t n, char *out) {
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", d[i]);
}

static void test_sha256_vectors(void **state) {
    (void)state;
    uint8_t d[32];
    char h[65];
    mc__sha256("", 0, d);
    hex(d, 32, h);
    assert_string_equal(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    mc__sha256("abc", 3, d);
    hex(d, 32, h);
    assert_string_equal(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"; /* 56 bytes */
    mc__sha256(two, strlen(two), d);
    hex(d, 32, h);
    assert_string_equal(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    /* fed in uneven pieces across block edges: one million 'a' */
    mc_sha256_t s;
    char chunk[997];
    memset(chunk, 'a', sizeof(chunk));
    mc__sha256_init(&s);
    for (size_t left = 1000000; left;) {
        size_t n = left < sizeof(chunk) ? left : sizeof(chunk);
        mc__sha256_update(&s, chunk, n);
        left -= n;
    }
    mc__sha256_final(&s, d);
    hex(d, 32, h);
    assert_string_equal(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static cJSON *load_golden(void) {
    char path[1024];
    snprintf(path, sizeof(path), "%s/hash_golden.json", MC_GOLDEN_DIR);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n + 1);
    assert_int_equal(fread(text, 1, (size_t)n, f), (size_t)n);
    text[n] = 0;
    fclose(f);
    cJSON *root = cJSON_Parse(text);
    free(text);
    assert_non_null(root);
    return root;
}

static const char *str(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    assert_true(cJSON_IsString(v));
    return v->valuestring;
}

/* hashes are hex text: they go above 2^53, past what a JSON number keeps */
static uint64_t u64_of(const cJSON *v) {
    assert_true(cJSON_IsString(v));
    return strtoull(v->valuestring, NULL, 16);
}

static void test_golden(void **state) {
    (void)state;
    cJSON *root = load_golden(), *c;
    int seen[MC_BH_XXH3_ROLLING + 1] = {0};
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(root, "cases")) {
        const char *why = NULL;
        int algo =
            mc__bh_algo(str(c, "strategy"), str(c, "algorithm"), str(c, "index_projection"), &why);
        assert_true(algo > 0);
        mc_bh_profile_t p;
        assert_int_equal(mc__bh_profile_init(&p, algo, str(c, "seed")), 0);
        const cJSON *toks = cJSON_GetObjectItemCaseSensitive(c, "token_ids");
        const cJSON *want = cJSON_GetObjectItemCaseSensitive(c, "hashes");
        int n = cJSON_GetArraySize(toks), nh = cJSON_GetArraySize(want);
        int32_t *t = malloc(sizeof(*t) * (size_t)(n + 1));
        uint64_t *got = malloc(sizeof(*got) * (size_t)(nh + 1));
        for (int i = 0; i < n; i++)
            t[i] = (int32_t)cJSON_GetArrayItem(toks, i)->valuedouble;
        long rc = mc__bh_chain(
            &p, t, (size_t)n, (uint32_t)cJSON_GetObjectItemCaseSensitive(c, "block_size")->valueint,
            str(c, "lora_name"), str(c, "cache_salt"), got, (size_t)nh, &why);
        if (rc != nh)
            fail_msg("%s/%s bs=%d: %ld blocks (%s)", str(c, "strategy"), str(c, "algorithm"),
                     cJSON_GetObjectItemCaseSensitive(c, "block_size")->valueint, rc, why);
        for (int i = 0; i < nh; i++)
            if (got[i] != u64_of(cJSON_GetArrayItem(want, i)))
                fail_msg("%s/%s seed=%s bs=%d lora=%s salt=%s: block %d differs",
                         str(c, "strategy"), str(c, "algorithm"), str(c, "seed"),
                         cJSON_GetObjectItemCaseSensitive(c, "block_size")->valueint,
                         str(c, "lora_name"), str(c, "cache_salt"), i);
        seen[algo]++;
        free(t);
        free(got);
    }
    for (int a = MC_BH_SHA256_CBOR; a <= MC_BH_XXH3_ROLLING; a++)
        assert_true(seen[a] > 0); /* every algorithm has vectors */
    cJSON_Delete(root);
}

static void test_reference_root(void **state) {
    (void)state;
    /* the reference conductor's documented root for python_hash_seed "0" under sha256_cbor */
    mc_bh_profile_t p;
    char h[65];
    assert_int_equal(mc__bh_profile_init(&p, MC_BH_SHA256_CBOR, "0"), 0);
    assert_int_equal(p.root_len, 32);
    hex(p.root, 32, h);
    assert_string_equal(h, "4e1195df020de59e0d65a33a4279f1183e7ae4e5d980e309f8b55adff2e61c3e");
}

static void test_refusals(void **state) {
    (void)state;
    const char *why = NULL;
    mc_bh_profile_t p;
    int32_t t[4] = {1, 2, -3, 4};
    uint64_t out[4];
    assert_int_equal(mc__bh_algo("vllm_v2", "sha256_cbor", "low64_be", &why),
                     MC_ERR_INVALID_ARGUMENT);
    assert_string_equal(why, "unsupported hash strategy");
    assert_int_equal(mc__bh_algo("vllm_v1", "md5", "low64_be", &why), MC_ERR_INVALID_ARGUMENT);
    assert_string_equal(why, "unsupported hash algorithm");
    assert_int_equal(mc__bh_algo("vllm_v1", "sha256_cbor", "high64_be", &why),
                     MC_ERR_INVALID_ARGUMENT);
    assert_string_equal(why, "unsupported index projection");
    assert_int_equal(mc__bh_profile_init(&p, 99, "0"), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc__bh_profile_init(&p, MC_BH_SHA256_CBOR, NULL), MC_ERR_INVALID_ARGUMENT);
    /* SGLang and XXH3 take tokens as u32 and have no LoRA or salt */
    assert_int_equal(mc__bh_profile_init(&p, MC_BH_SGLANG, ""), 0);
    assert_int_equal(mc__bh_chain(&p, t, 4, 1, NULL, NULL, out, 4, &why), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc__bh_chain(&p, t, 2, 1, "lora", NULL, out, 4, &why),
                     MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc__bh_chain(&p, t, 2, 1, NULL, "", out, 4, &why), 2); /* "" is no salt */
    assert_int_equal(mc__bh_chain(&p, t, 4, 0, NULL, NULL, out, 4, &why), MC_ERR_INVALID_ARGUMENT);
    /* only complete blocks, at most cap of them */
    assert_int_equal(mc__bh_profile_init(&p, MC_BH_SHA256_CBOR, "0"), 0);
    assert_int_equal(mc__bh_chain(&p, t, 4, 3, NULL, NULL, out, 4, &why), 1);
    assert_int_equal(mc__bh_chain(&p, t, 4, 1, NULL, NULL, out, 2, &why), 2);
    /* a pickled block past one 64 KiB frame is refused, not hashed wrongly */
    size_t big = 20000;
    int32_t *many = calloc(big, sizeof(*many));
    for (size_t i = 0; i < big; i++)
        many[i] = 70000;
    assert_int_equal(mc__bh_profile_init(&p, MC_BH_SHA256_PICKLE, "0"), 0);
    assert_int_equal(mc__bh_chain(&p, many, big, (uint32_t)big, NULL, NULL, out, 1, &why),
                     MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc__bh_profile_init(&p, MC_BH_SHA256_CBOR, "0"), 0);
    assert_int_equal(mc__bh_chain(&p, many, big, (uint32_t)big, NULL, NULL, out, 1, &why), 1);
    free(many);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256_vectors),
        cmocka_unit_test(test_golden),
        cmocka_unit_test(test_reference_root),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
