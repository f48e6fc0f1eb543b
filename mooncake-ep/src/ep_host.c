/* The host reference build of ep_kernels.h: the per-element logic of ep_logic.h run in plain
 * loops over host memory, in the order the GPU's threads cover. It exists so that the logic the
 * CUDA kernels run is tested on any host against the Python fallback
 * (python/tests/integration/ep/test_ep_kernels_host.py builds it with the host compiler). */
#include <stdio.h>

#include "ep_check.h"
#include "mooncake_ep/ep_kernels.h"
#include "mooncake_ep/ep_logic.h"

static _Thread_local char last_error[160];

static int fail(const char *fn, const char *why) {
    snprintf(last_error, sizeof last_error, "%s: %s", fn, why);
    return -1;
}

int mc_ep_kernels_device(void) {
    return 0;
}

const char *mc_ep_kernels_last_error(void) {
    return last_error;
}

int mc_ep_dispatch_count(const int64_t *topk_idx, int64_t num_tokens, int32_t num_topk,
                         int32_t num_experts, int32_t *expert_count, int32_t *slot_rank,
                         void *stream) {
    (void)stream;
    const char *bad = mc_ep_check_shapes(num_tokens, num_topk, 1, num_experts, 1);
    if (bad)
        return fail("mc_ep_dispatch_count", bad);
    for (int32_t e = 0; e < num_experts; e++)
        expert_count[e] = 0;
    for (int64_t flat = 0; flat < num_tokens * num_topk; flat++) {
        int64_t e = mc_ep_dispatch_key(topk_idx, num_topk, flat);
        if (e >= num_experts)
            return fail("mc_ep_dispatch_count", "expert id >= num_experts");
        slot_rank[flat] = e < 0 ? -1 : expert_count[e]++;
    }
    return 0;
}

int mc_ep_dispatch_pack(const uint16_t *x, const int64_t *topk_idx, int64_t num_tokens,
                        int32_t num_topk, int64_t hidden, int32_t num_experts, int32_t num_ranks,
                        const int32_t *expert_count, const int32_t *slot_rank,
                        const int32_t *keep_dest, int64_t *expert_offset, uint16_t *send_x,
                        int64_t *send_meta, int32_t *slot_pos, void *stream) {
    (void)stream;
    const char *bad = mc_ep_check_shapes(num_tokens, num_topk, hidden, num_experts, num_ranks);
    if (bad)
        return fail("mc_ep_dispatch_pack", bad);
    int32_t num_local = num_experts / num_ranks;
    mc_ep_expert_offsets(expert_count, num_experts, num_local, keep_dest, expert_offset);
    for (int64_t flat = 0; flat < num_tokens * num_topk; flat++) {
        int32_t pos = mc_ep_slot_pos(topk_idx, num_topk, flat, slot_rank, expert_offset, keep_dest,
                                     num_local);
        slot_pos[flat] = pos;
        if (pos < 0)
            continue;
        int64_t t = flat / num_topk;
        send_meta[2 * pos] = topk_idx[flat] % num_local;
        send_meta[2 * pos + 1] = t;
        for (int64_t h = 0; h < hidden; h++)
            send_x[pos * hidden + h] = x[t * hidden + h];
    }
    return 0;
}

int mc_ep_dispatch_recv(const uint16_t *recv_x, const int64_t *recv_meta, int64_t num_recv,
                        const int64_t *recv_counts, int64_t hidden, int32_t num_local,
                        int32_t num_ranks, int64_t capacity, int32_t *bucket_count,
                        int32_t *row_rank, uint16_t *packed, int32_t *count, int32_t *src_info,
                        int64_t *layout, void *stream) {
    (void)stream;
    const char *bad = mc_ep_check_shapes(num_recv, 1, hidden, num_local * num_ranks, num_ranks);
    if (bad || num_local < 1)
        return fail("mc_ep_dispatch_recv", bad ? bad : "num_local must be >= 1");
    for (int64_t b = 0; b < (int64_t)num_local * num_ranks; b++)
        bucket_count[b] = 0;
    for (int64_t r = 0; r < num_recv; r++) {
        int64_t b = mc_ep_recv_key(recv_meta, recv_counts, num_ranks, num_local, r);
        if (b < 0)
            return fail("mc_ep_dispatch_recv", "a received row names no local expert or no source");
        row_rank[r] = bucket_count[b]++;
    }
    for (int32_t le = 0; le < num_local; le++) {
        int64_t total = mc_ep_recv_begin(bucket_count, num_ranks, le, num_ranks);
        if (total > capacity)
            return fail("mc_ep_dispatch_recv", "an expert received more rows than its capacity");
        count[le] = (int32_t)total;
        for (int32_t s = 0; s < num_ranks; s++)
            layout[(int64_t)le * num_ranks + s] =
                mc_ep_layout_entry(bucket_count, num_ranks, le, s);
    }
    for (int64_t r = 0; r < num_recv; r++) {
        int64_t b = mc_ep_recv_key(recv_meta, recv_counts, num_ranks, num_local, r);
        int64_t le = b / num_ranks;
        int64_t dst = le * capacity +
                      mc_ep_recv_begin(bucket_count, num_ranks, le, (int32_t)(b % num_ranks)) +
                      row_rank[r];
        src_info[dst] = (int32_t)recv_meta[2 * r + 1];
        for (int64_t h = 0; h < hidden; h++)
            packed[dst * hidden + h] = recv_x[r * hidden + h];
    }
    return 0;
}

int mc_ep_combine(const uint16_t *got, const int64_t *topk_idx, const float *topk_weights,
                  int64_t num_tokens, int32_t num_topk, int64_t hidden, int32_t num_local,
                  const int32_t *slot_pos, const int64_t *dest_shift, uint16_t *out, void *stream) {
    (void)stream;
    const char *bad = mc_ep_check_shapes(num_tokens, num_topk, hidden, num_local, 1);
    if (bad)
        return fail("mc_ep_combine", bad);
    for (int64_t t = 0; t < num_tokens; t++)
        for (int64_t h = 0; h < hidden; h++)
            out[t * hidden + h] = mc_ep_combine_elem(got, topk_idx, topk_weights, num_topk, hidden,
                                                     num_local, slot_pos, dest_shift, t, h);
    return 0;
}
