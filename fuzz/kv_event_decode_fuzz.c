/* Fuzzes the conductor's KV-event batch decoder: every event handed out has its hashes inside
 * the bound and its strings inside the input; a batch never yields more events than its bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kv_event_decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct span {
    const uint8_t *lo, *hi;
    size_t events;
} span_t;

static void inside(const span_t *s, const mc_kv_str_t *str) {
    if (str->p && (str->p < s->lo || str->p + str->len > s->hi))
        abort();
}

static void check(const mc_kv_event_t *ev, void *arg) {
    span_t *s = arg;
    s->events++;
    if (ev->n_hashes > MC_KV_MAX_HASHES || (ev->n_hashes && !ev->hashes))
        abort();
    if (ev->kind < MC_KV_EV_STORED || ev->kind > MC_KV_EV_CLEARED)
        abort();
    inside(s, &ev->lora_name);
    inside(s, &ev->tenant_id);
    inside(s, &ev->model_name);
    inside(s, &ev->backend_id);
    inside(s, &ev->object_key);
    /* touch every hash: ASan sees a read past the decoder's array */
    volatile uint64_t x = 0;
    for (uint32_t i = 0; i < ev->n_hashes; i++)
        x ^= ev->hashes[i];
    (void)x;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *buf = malloc(size ? size : 1);
    memcpy(buf, data, size);
    span_t s = {buf, buf + size, 0};
    mc_kv_batch_t info;
    if (mc__kv_batch_decode(buf, size, check, &s, &info) == 0 &&
        (info.events != s.events || info.events + info.malformed > size))
        abort();
    free(buf);
    return 0;
}
