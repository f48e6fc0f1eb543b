/* The C interface of mooncake.ep's token-movement kernels, loaded by python/mooncake/ep/_kernels.py
 * with ctypes. Two libraries export it: libmooncake_ep_kernels.so (CUDA, ep_kernels.cu; every
 * pointer is device memory of the current device and the work is queued on `stream`, a
 * cudaStream_t or NULL) and the host reference (ep_host.c; host pointers, `stream` ignored).
 * Every call returns 0, or -1 with mc_ep_kernels_last_error() saying why. Layouts: ep_logic.h.
 * bf16 tensors travel as their 16-bit patterns. */
#ifndef MOONCAKE_EP_KERNELS_H
#define MOONCAKE_EP_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The CUDA library is built with hidden visibility: only this interface is exported. */
#define MC_EP_API __attribute__((visibility("default")))

/* 1 in the CUDA build, 0 in the host reference build. */
MC_EP_API int mc_ep_kernels_device(void);

/* Why the calling thread's last call failed ("" when none did). */
MC_EP_API const char *mc_ep_kernels_last_error(void);

/* Dispatch, step 1: expert_count[e] = tokens selecting e; slot_rank[t*K+j] = the token's rank
 * among them (in token order) for a selection, -1 for any other slot. */
MC_EP_API int mc_ep_dispatch_count(const int64_t *topk_idx, int64_t num_tokens, int32_t num_topk,
                                   int32_t num_experts, int32_t *expert_count, int32_t *slot_rank,
                                   void *stream);

/* Dispatch, step 2: pack the selections sent (keep_dest[d] != 0) into send_x [R, hidden], by
 * destination, expert, token, with send_meta [R, 2] = (local expert, token) and slot_pos [T*K] =
 * each slot's send row or -1. expert_offset [num_experts] is scratch. */
MC_EP_API int mc_ep_dispatch_pack(const uint16_t *x, const int64_t *topk_idx, int64_t num_tokens,
                                  int32_t num_topk, int64_t hidden, int32_t num_experts,
                                  int32_t num_ranks, const int32_t *expert_count,
                                  const int32_t *slot_rank, const int32_t *keep_dest,
                                  int64_t *expert_offset, uint16_t *send_x, int64_t *send_meta,
                                  int32_t *slot_pos, void *stream);

/* Dispatch, step 3 (receiver): rows recv_x [num_recv, hidden] with recv_meta [num_recv, 2],
 * grouped by source (recv_counts [num_ranks]), packed per local expert by source then arrival:
 * packed [num_local, capacity, hidden], count [num_local], src_info [num_local, capacity] and
 * layout [num_local, num_ranks] (begin << 32 | count). Rows past each count are left as the
 * caller set them (the fallback's zeros and -1). bucket_count [num_local * num_ranks] and
 * row_rank [num_recv] are scratch. */
MC_EP_API int mc_ep_dispatch_recv(const uint16_t *recv_x, const int64_t *recv_meta,
                                  int64_t num_recv, const int64_t *recv_counts, int64_t hidden,
                                  int32_t num_local, int32_t num_ranks, int64_t capacity,
                                  int32_t *bucket_count, int32_t *row_rank, uint16_t *packed,
                                  int32_t *count, int32_t *src_info, int64_t *layout, void *stream);

/* Combine (source side): out [T, hidden] = per token the weighted sum of its returned rows
 * (ep_logic.h, mc_ep_combine_elem). */
MC_EP_API int mc_ep_combine(const uint16_t *got, const int64_t *topk_idx, const float *topk_weights,
                            int64_t num_tokens, int32_t num_topk, int64_t hidden, int32_t num_local,
                            const int32_t *slot_pos, const int64_t *dest_shift, uint16_t *out,
                            void *stream);

#ifdef __cplusplus
}
#endif

#endif
