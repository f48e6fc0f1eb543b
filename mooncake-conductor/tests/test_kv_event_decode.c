/* The conductor's event decoder on payloads made by the engines' own encoders
 * (tests/golden/make_event_golden.py: vLLM's event classes and msgspec encoder, SGLang's array
 * layout, the Mooncake master's maps): every field as sent; then what no publisher should send
 * (every truncation, a malformed event among good ones, no batch at all). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kv_event_decode.h"
#include "mooncake/error.h"

#define MAX_SEEN 8

typedef struct seen {
    int n;
    mc_kv_event_t ev[MAX_SEEN];
    uint64_t hashes[MAX_SEEN][4];
} seen_t;

static void collect(const mc_kv_event_t *ev, void *arg) {
    seen_t *s = arg;
    if (s->n == MAX_SEEN)
        return;
    s->ev[s->n] = *ev;
    for (uint32_t i = 0; i < ev->n_hashes && i < 4; i++)
        s->hashes[s->n][i] = ev->hashes[i];
    s->ev[s->n].hashes = s->hashes[s->n]; /* the decoder's array is reused */
    s->n++;
}

static void ignore(const mc_kv_event_t *ev, void *arg) {
    (void)ev;
    (*(int *)arg)++;
}

static uint8_t *slurp(const char *name, size_t *n) {
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", MC_GOLDEN_DIR, name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    uint8_t *buf = malloc(1 << 16);
    *n = fread(buf, 1, 1 << 16, f);
    fclose(f);
    return buf;
}

static void str_is(const mc_kv_str_t *s, const char *want) {
    if (!want) {
        assert_null(s->p);
        return;
    }
    assert_int_equal(s->len, strlen(want));
    assert_memory_equal(s->p, want, s->len);
}

static void test_vllm(void **state) {
    (void)state;
    size_t n;
    uint8_t *p = slurp("vllm_batch.msgpack", &n);
    seen_t s = {0};
    mc_kv_batch_t info;
    assert_int_equal(mc__kv_batch_decode(p, n, collect, &s, &info), 0);
    assert_true(info.ts == 1700000000.5);
    assert_int_equal(info.dp_rank, 1);
    assert_int_equal(info.events, 4);
    assert_int_equal(info.malformed, 0);
    assert_int_equal(s.n, 4);
    /* SHA-256 digests: their last eight bytes, big-endian */
    assert_int_equal(s.ev[0].kind, MC_KV_EV_STORED);
    assert_int_equal(s.ev[0].medium, MC_KV_MEDIUM_GPU);
    assert_int_equal(s.ev[0].n_hashes, 2);
    assert_true(s.hashes[0][0] == 0x18191a1b1c1d1e1full);
    assert_true(s.hashes[0][1] == 0x38393a3b3c3d3e3full);
    assert_int_equal(s.ev[0].has_parent, 0);
    assert_int_equal(s.ev[0].block_size, 16);
    assert_int_equal(s.ev[0].n_tokens, 32);
    str_is(&s.ev[0].lora_name, "adapter-1");
    /* integer hashes keep their 64 bits, negative ones too */
    assert_true(s.hashes[1][0] == (uint64_t)-5);
    assert_true(s.hashes[1][1] == (uint64_t)INT64_MAX);
    assert_int_equal(s.ev[1].has_parent, 1);
    assert_true(s.ev[1].parent == 7);
    assert_int_equal(s.ev[1].medium, MC_KV_MEDIUM_UNKNOWN);
    str_is(&s.ev[1].lora_name, NULL);
    assert_int_equal(s.ev[2].kind, MC_KV_EV_REMOVED);
    assert_int_equal(s.ev[2].medium, MC_KV_MEDIUM_CPU);
    assert_true(s.hashes[2][0] == 0x38393a3b3c3d3e3full);
    assert_int_equal(s.ev[3].kind, MC_KV_EV_CLEARED);
    free(p);
}

static void test_sglang(void **state) {
    (void)state;
    size_t n;
    uint8_t *p = slurp("sglang_array.msgpack", &n);
    seen_t s = {0};
    mc_kv_batch_t info;
    assert_int_equal(mc__kv_batch_decode(p, n, collect, &s, &info), 0);
    assert_true(info.ts == 12.25);
    assert_int_equal(info.dp_rank, 2);
    assert_int_equal(s.n, 3);
    assert_int_equal(s.ev[0].kind, MC_KV_EV_STORED);
    assert_int_equal(s.ev[0].medium, MC_KV_MEDIUM_CPU); /* CPU_PINNED */
    assert_int_equal(s.ev[0].n_hashes, 3);
    assert_true(s.hashes[0][2] == 13 && s.ev[0].parent == 10 && s.ev[0].n_tokens == 48);
    assert_int_equal(s.ev[1].kind, MC_KV_EV_REMOVED);
    assert_int_equal(s.ev[1].medium, MC_KV_MEDIUM_DISK);
    assert_int_equal(s.ev[2].kind, MC_KV_EV_CLEARED);
    free(p);
}

static void test_master(void **state) {
    (void)state;
    size_t n;
    uint8_t *p = slurp("master.msgpack", &n);
    seen_t s = {0};
    mc_kv_batch_t info;
    assert_int_equal(mc__kv_batch_decode(p, n, collect, &s, &info), 0);
    assert_true(info.ts == 1700000000123.0);
    assert_int_equal(info.dp_rank, 0);
    assert_int_equal(info.events, 2);
    assert_int_equal(info.malformed, 1); /* seq_hashes that is no list */
    assert_int_equal(s.ev[0].kind, MC_KV_EV_STORED);
    assert_int_equal(s.ev[0].medium, MC_KV_MEDIUM_CPU);
    assert_true(s.ev[0].n_hashes == 1 && s.hashes[0][0] == 12345);
    str_is(&s.ev[0].tenant_id, "default");
    str_is(&s.ev[0].backend_id, "pool-a");
    str_is(&s.ev[0].object_key, "12345");
    str_is(&s.ev[0].model_name, NULL);
    assert_int_equal(s.ev[1].kind, MC_KV_EV_REMOVED);
    assert_int_equal(s.ev[1].medium, MC_KV_MEDIUM_DISK);
    assert_true(s.hashes[1][0] == 99);
    free(p);
}

/* Every prefix of every golden payload: refused, or read with no more events than the whole. */
static void test_truncations(void **state) {
    (void)state;
    const char *names[] = {"vllm_batch.msgpack", "sglang_array.msgpack", "master.msgpack"};
    for (size_t k = 0; k < 3; k++) {
        size_t n;
        uint8_t *p = slurp(names[k], &n);
        for (size_t cut = 0; cut < n; cut++) {
            uint8_t *q = malloc(cut ? cut : 1);
            memcpy(q, p, cut);
            mc_kv_batch_t info;
            int count = 0;
            int rc = mc__kv_batch_decode(q, cut, ignore, &count, &info);
            assert_true(rc == 0 || rc == MC_ERR_INVALID_ARGUMENT);
            if (rc != 0)
                assert_true(count <= 4);
            free(q);
        }
        free(p);
    }
}

static void test_not_a_batch(void **state) {
    (void)state;
    static const uint8_t scalar[] = {0x05};
    static const uint8_t short_array[] = {0x91, 0x05};
    static const uint8_t events_not_list[] = {0x92, 0x01, 0x02};
    static const uint8_t unknown_tag[] = {0x92, 0x01, 0x91, 0x91, 0xa3, 'F', 'o', 'o'};
    mc_kv_batch_t info;
    int count = 0;
    assert_int_equal(mc__kv_batch_decode(NULL, 0, ignore, &count, &info), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc__kv_batch_decode(scalar, 1, ignore, &count, &info),
                     MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc__kv_batch_decode(short_array, 2, ignore, &count, &info),
                     MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc__kv_batch_decode(events_not_list, 3, ignore, &count, &info),
                     MC_ERR_INVALID_ARGUMENT);
    /* an event of a kind nobody defined: counted, the batch still read */
    assert_int_equal(mc__kv_batch_decode(unknown_tag, sizeof(unknown_tag), ignore, &count, &info),
                     0);
    assert_int_equal(info.malformed, 1);
    assert_int_equal(count, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vllm),        cmocka_unit_test(test_sglang),
        cmocka_unit_test(test_master),      cmocka_unit_test(test_truncations),
        cmocka_unit_test(test_not_a_batch),
    };
    return cmocka_run_group_tests_name("conductor_event_decode", tests, NULL, NULL);
}
