/* The per-element logic of mooncake.ep's dispatch and combine, written once for two builds: the
 * CUDA kernels (ep_kernels.cu, each function run by one GPU thread) and the host reference
 * (ep_host.c, the same functions in plain loops), so the logic the GPU runs is the logic the CPU
 * tests check against the Python fallback (python/mooncake/ep/_buffer.py).
 *
 * Layouts (all row-major, tokens and weights as the fallback takes them):
 *   topk_idx [T, K] int64, -1 masks a slot; topk_weights [T, K] float32; x [T, hidden] bf16 bits.
 *   A "selection" is slot (t, j) whose expert e is not -1 and not already listed earlier in row t
 *   (a token listing an expert twice sends it once). Send rows are ordered by destination rank,
 *   expert, token, which is by global expert then token since dest = e / num_local. */
#ifndef MOONCAKE_EP_LOGIC_H
#define MOONCAKE_EP_LOGIC_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define MC_EP_FN __host__ __device__ static inline
#else
#define MC_EP_FN static inline
#endif

/* bf16 <-> float32 by bit manipulation (round to nearest even, NaN kept quiet), as torch rounds:
 * the same bits on both builds, with no dependence on a device intrinsic. */
MC_EP_FN float mc_ep_bf16_to_f32(uint16_t v) {
    uint32_t u = (uint32_t)v << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

MC_EP_FN uint16_t mc_ep_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu) != 0)
        return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* Slot `flat` = t * K + j: its expert if it is a selection, else -1. */
MC_EP_FN int64_t mc_ep_dispatch_key(const int64_t *topk_idx, int32_t num_topk, int64_t flat) {
    int64_t e = topk_idx[flat];
    int64_t row = flat - flat % num_topk;
    if (e < 0)
        return -1;
    for (int64_t j = row; j < flat; j++)
        if (topk_idx[j] == e)
            return -1;
    return e;
}

/* Start row of every expert's block in the send buffer, skipping the experts of destinations
 * not sent to (keep_dest[d] == 0); returns the number of rows sent. Run by one thread. */
MC_EP_FN int64_t mc_ep_expert_offsets(const int32_t *expert_count, int32_t num_experts,
                                      int32_t num_local, const int32_t *keep_dest,
                                      int64_t *expert_offset) {
    int64_t next = 0;
    for (int32_t e = 0; e < num_experts; e++) {
        expert_offset[e] = next;
        if (keep_dest[e / num_local])
            next += expert_count[e];
    }
    return next;
}

/* The send row of slot `flat` (its rank among the tokens of its expert placed after that
 * expert's offset), or -1 when the slot is no selection or its destination is not sent to. */
MC_EP_FN int32_t mc_ep_slot_pos(const int64_t *topk_idx, int32_t num_topk, int64_t flat,
                                const int32_t *slot_rank, const int64_t *expert_offset,
                                const int32_t *keep_dest, int32_t num_local) {
    int64_t e = mc_ep_dispatch_key(topk_idx, num_topk, flat);
    if (e < 0 || !keep_dest[e / num_local])
        return -1;
    return (int32_t)(expert_offset[e] + slot_rank[flat]);
}

/* The source rank of received row `row`: rows arrive grouped by source, recv_counts[s] each. */
MC_EP_FN int32_t mc_ep_source_of(const int64_t *recv_counts, int32_t num_ranks, int64_t row) {
    int64_t end = 0;
    for (int32_t s = 0; s < num_ranks; s++) {
        end += recv_counts[s];
        if (row < end)
            return s;
    }
    return num_ranks; /* past every block: the caller's counts do not cover the rows */
}

/* Received row -> bucket (local expert, source) = le * num_ranks + src; -1 if malformed. */
MC_EP_FN int64_t mc_ep_recv_key(const int64_t *recv_meta, const int64_t *recv_counts,
                                int32_t num_ranks, int32_t num_local, int64_t row) {
    int64_t le = recv_meta[2 * row];
    int32_t src = mc_ep_source_of(recv_counts, num_ranks, row);
    if (le < 0 || le >= num_local || src >= num_ranks)
        return -1;
    return le * num_ranks + src;
}

/* First row of source `src`'s block within local expert `le` of the packed layout. */
MC_EP_FN int64_t mc_ep_recv_begin(const int32_t *bucket_count, int32_t num_ranks, int64_t le,
                                  int32_t src) {
    int64_t begin = 0;
    for (int32_t s = 0; s < src; s++)
        begin += bucket_count[le * num_ranks + s];
    return begin;
}

/* layout_range[le, src]: begin << 32 | count, or 0 for an empty block (the reference's form). */
MC_EP_FN int64_t mc_ep_layout_entry(const int32_t *bucket_count, int32_t num_ranks, int64_t le,
                                    int32_t src) {
    int64_t c = bucket_count[le * num_ranks + src];
    return c ? (int64_t)(((uint64_t)mc_ep_recv_begin(bucket_count, num_ranks, le, src) << 32) |
                         (uint64_t)c)
             : 0;
}

/* Token t's weight for expert e: the sum of its slots naming e (a repeated expert adds up). */
MC_EP_FN float mc_ep_weight_of(const int64_t *topk_idx, const float *topk_weights, int32_t num_topk,
                               int64_t t, int64_t e) {
    float w = 0.0f;
    for (int32_t j = 0; j < num_topk; j++)
        if (topk_idx[t * num_topk + j] == e)
            w += topk_weights[t * num_topk + j];
    return w;
}

/* Element h of combined token t: the weighted sum, in float32, of the expert rows returned for
 * it, added in ascending expert order (the fallback's order: its rows are sorted by expert), then
 * rounded to bf16. got holds the returned rows of the destinations that answered, in send order;
 * dest_shift[d] is how many send rows of non-answering destinations precede d's (so a send row
 * p of d is got row p - dest_shift[d]), or -1 when d did not answer (its rows add nothing). */
MC_EP_FN uint16_t mc_ep_combine_elem(const uint16_t *got, const int64_t *topk_idx,
                                     const float *topk_weights, int32_t num_topk, int64_t hidden,
                                     int32_t num_local, const int32_t *slot_pos,
                                     const int64_t *dest_shift, int64_t t, int64_t h) {
    float acc = 0.0f;
    int64_t prev = -1;
    for (;;) {
        int64_t e = -1, flat = -1; /* the next expert of row t above prev, and its first slot */
        for (int32_t j = 0; j < num_topk; j++) {
            int64_t v = topk_idx[t * num_topk + j];
            if (v > prev && (e < 0 || v < e)) {
                e = v;
                flat = t * num_topk + j;
            }
        }
        if (e < 0)
            break;
        prev = e;
        int32_t pos = slot_pos[flat];
        int64_t shift = dest_shift[e / num_local];
        if (pos < 0 || shift < 0)
            continue;
        float term = mc_ep_bf16_to_f32(got[(pos - shift) * hidden + h]) *
                     mc_ep_weight_of(topk_idx, topk_weights, num_topk, t, e);
        acc += term; /* two roundings, as the fallback's multiply then index_add_ (no FMA) */
    }
    return mc_ep_f32_to_bf16(acc);
}

#endif
