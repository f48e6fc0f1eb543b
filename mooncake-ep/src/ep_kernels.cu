/* The CUDA build of ep_kernels.h: one GPU thread per element of ep_logic.h's functions (the same
 * functions the host reference runs in loops, ep_host.c). Linked against the static CUDA
 * runtime, so loading this library needs only the driver; without one every call fails with the
 * runtime's message. Stable per-bucket ranks (the token order within an expert, the arrival order
 * within a source) come from one block per bucket scanning the items in order. */
#include <cub/block/block_scan.cuh>
#include <cuda_runtime.h>
#include <stdio.h>

#include "ep_check.h"
#include "mooncake_ep/ep_kernels.h"
#include "mooncake_ep/ep_logic.h"

namespace {

constexpr int kThreads = 256;
thread_local char last_error[160];

int fail(const char *fn, const char *why) {
    snprintf(last_error, sizeof last_error, "%s: %s", fn, why);
    return -1;
}

/* After the launches of one call: 0, or the runtime's reason (no driver, no device, a fault). */
int launched(const char *fn) {
    cudaError_t err = cudaGetLastError();
    return err == cudaSuccess ? 0 : fail(fn, cudaGetErrorString(err));
}

struct DispatchKey {
    const int64_t *topk_idx;
    int32_t num_topk;
    __device__ int64_t operator()(int64_t i) const {
        return mc_ep_dispatch_key(topk_idx, num_topk, i);
    }
};

struct RecvKey {
    const int64_t *recv_meta;
    const int64_t *recv_counts;
    int32_t num_ranks;
    int32_t num_local;
    __device__ int64_t operator()(int64_t i) const {
        return mc_ep_recv_key(recv_meta, recv_counts, num_ranks, num_local, i);
    }
};

/* Block b ranks the items of bucket b in item order and writes its count; block 0 also marks
 * the items of no bucket with -1. */
template <typename Key>
__global__ void bucket_rank(Key key, int64_t num_items, int32_t num_buckets, int32_t *count,
                            int32_t *rank) {
    typedef cub::BlockScan<int, kThreads> Scan;
    __shared__ typename Scan::TempStorage tmp;
    int32_t b = blockIdx.x;
    int base = 0;
    for (int64_t start = 0; start < num_items; start += kThreads) {
        int64_t i = start + threadIdx.x;
        int64_t k = i < num_items ? key(i) : -1;
        int mine = k == b, before, total;
        Scan(tmp).ExclusiveSum(mine, before, total);
        if (mine)
            rank[i] = base + before;
        else if (b == 0 && i < num_items && (k < 0 || k >= num_buckets))
            rank[i] = -1;
        base += total;
        __syncthreads(); /* tmp is reused by the next chunk's scan */
    }
    if (threadIdx.x == 0)
        count[b] = base;
}

__global__ void expert_offsets(const int32_t *expert_count, int32_t num_experts, int32_t num_local,
                               const int32_t *keep_dest, int64_t *expert_offset) {
    mc_ep_expert_offsets(expert_count, num_experts, num_local, keep_dest, expert_offset);
}

/* Block per slot, threads over hidden. */
__global__ void pack_send(const uint16_t *x, const int64_t *topk_idx, int32_t num_topk,
                          int64_t hidden, int32_t num_local, const int32_t *slot_rank,
                          const int32_t *keep_dest, const int64_t *expert_offset, uint16_t *send_x,
                          int64_t *send_meta, int32_t *slot_pos) {
    int64_t flat = blockIdx.x;
    int32_t pos =
        mc_ep_slot_pos(topk_idx, num_topk, flat, slot_rank, expert_offset, keep_dest, num_local);
    int64_t t = flat / num_topk;
    if (threadIdx.x == 0) {
        slot_pos[flat] = pos;
        if (pos >= 0) {
            send_meta[2 * pos] = topk_idx[flat] % num_local;
            send_meta[2 * pos + 1] = t;
        }
    }
    if (pos >= 0)
        for (int64_t h = threadIdx.x; h < hidden; h += blockDim.x)
            send_x[pos * hidden + h] = x[t * hidden + h];
}

/* Thread per (local expert, source): its layout entry; source 0 also writes the expert's count. */
__global__ void recv_layout(const int32_t *bucket_count, int32_t num_local, int32_t num_ranks,
                            int32_t *count, int64_t *layout) {
    int64_t b = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= (int64_t)num_local * num_ranks)
        return;
    int64_t le = b / num_ranks;
    int32_t s = (int32_t)(b % num_ranks);
    layout[b] = mc_ep_layout_entry(bucket_count, num_ranks, le, s);
    if (s == 0)
        count[le] = (int32_t)mc_ep_recv_begin(bucket_count, num_ranks, le, num_ranks);
}

/* Block per received row, threads over hidden. A row past its expert's capacity (impossible for
 * rows of ranks that checked num_max_dispatch_tokens_per_rank) is dropped, not written out of
 * bounds. */
__global__ void recv_scatter(RecvKey key, const uint16_t *recv_x, int64_t hidden, int64_t capacity,
                             const int32_t *bucket_count, const int32_t *row_rank, uint16_t *packed,
                             int32_t *src_info) {
    int64_t r = blockIdx.x;
    int64_t b = key(r);
    if (b < 0)
        return;
    int64_t le = b / key.num_ranks;
    int64_t slot = mc_ep_recv_begin(bucket_count, key.num_ranks, le, (int32_t)(b % key.num_ranks)) +
                   row_rank[r];
    if (slot >= capacity)
        return;
    int64_t dst = le * capacity + slot;
    if (threadIdx.x == 0)
        src_info[dst] = (int32_t)key.recv_meta[2 * r + 1];
    for (int64_t h = threadIdx.x; h < hidden; h += blockDim.x)
        packed[dst * hidden + h] = recv_x[r * hidden + h];
}

/* Block per token, threads over hidden. */
__global__ void combine_rows(const uint16_t *got, const int64_t *topk_idx,
                             const float *topk_weights, int32_t num_topk, int64_t hidden,
                             int32_t num_local, const int32_t *slot_pos, const int64_t *dest_shift,
                             uint16_t *out) {
    int64_t t = blockIdx.x;
    for (int64_t h = threadIdx.x; h < hidden; h += blockDim.x)
        out[t * hidden + h] = mc_ep_combine_elem(got, topk_idx, topk_weights, num_topk, hidden,
                                                 num_local, slot_pos, dest_shift, t, h);
}

unsigned blocks_for(int64_t n) {
    return (unsigned)((n + kThreads - 1) / kThreads);
}

} // namespace

extern "C" int mc_ep_kernels_device(void) {
    return 1;
}

extern "C" const char *mc_ep_kernels_last_error(void) {
    return last_error;
}

extern "C" int mc_ep_dispatch_count(const int64_t *topk_idx, int64_t num_tokens, int32_t num_topk,
                                    int32_t num_experts, int32_t *expert_count, int32_t *slot_rank,
                                    void *stream) {
    const char *bad = mc_ep_check_shapes(num_tokens, num_topk, 1, num_experts, 1);
    if (bad)
        return fail("mc_ep_dispatch_count", bad);
    cudaStream_t s = (cudaStream_t)stream;
    bucket_rank<<<num_experts, kThreads, 0, s>>>(DispatchKey{topk_idx, num_topk},
                                                 num_tokens * num_topk, num_experts, expert_count,
                                                 slot_rank);
    return launched("mc_ep_dispatch_count");
}

extern "C" int mc_ep_dispatch_pack(const uint16_t *x, const int64_t *topk_idx, int64_t num_tokens,
                                   int32_t num_topk, int64_t hidden, int32_t num_experts,
                                   int32_t num_ranks, const int32_t *expert_count,
                                   const int32_t *slot_rank, const int32_t *keep_dest,
                                   int64_t *expert_offset, uint16_t *send_x, int64_t *send_meta,
                                   int32_t *slot_pos, void *stream) {
    const char *bad = mc_ep_check_shapes(num_tokens, num_topk, hidden, num_experts, num_ranks);
    if (bad)
        return fail("mc_ep_dispatch_pack", bad);
    cudaStream_t s = (cudaStream_t)stream;
    int32_t num_local = num_experts / num_ranks;
    expert_offsets<<<1, 1, 0, s>>>(expert_count, num_experts, num_local, keep_dest, expert_offset);
    if (num_tokens > 0)
        pack_send<<<(unsigned)(num_tokens * num_topk), kThreads, 0, s>>>(
            x, topk_idx, num_topk, hidden, num_local, slot_rank, keep_dest, expert_offset, send_x,
            send_meta, slot_pos);
    return launched("mc_ep_dispatch_pack");
}

extern "C" int mc_ep_dispatch_recv(const uint16_t *recv_x, const int64_t *recv_meta,
                                   int64_t num_recv, const int64_t *recv_counts, int64_t hidden,
                                   int32_t num_local, int32_t num_ranks, int64_t capacity,
                                   int32_t *bucket_count, int32_t *row_rank, uint16_t *packed,
                                   int32_t *count, int32_t *src_info, int64_t *layout,
                                   void *stream) {
    const char *bad = mc_ep_check_shapes(num_recv, 1, hidden, num_local * num_ranks, num_ranks);
    if (bad || num_local < 1)
        return fail("mc_ep_dispatch_recv", bad ? bad : "num_local must be >= 1");
    cudaStream_t s = (cudaStream_t)stream;
    RecvKey key{recv_meta, recv_counts, num_ranks, num_local};
    int32_t buckets = num_local * num_ranks;
    bucket_rank<<<buckets, kThreads, 0, s>>>(key, num_recv, buckets, bucket_count, row_rank);
    recv_layout<<<blocks_for(buckets), kThreads, 0, s>>>(bucket_count, num_local, num_ranks, count,
                                                         layout);
    if (num_recv > 0)
        recv_scatter<<<(unsigned)num_recv, kThreads, 0, s>>>(
            key, recv_x, hidden, capacity, bucket_count, row_rank, packed, src_info);
    return launched("mc_ep_dispatch_recv");
}

extern "C" int mc_ep_combine(const uint16_t *got, const int64_t *topk_idx,
                             const float *topk_weights, int64_t num_tokens, int32_t num_topk,
                             int64_t hidden, int32_t num_local, const int32_t *slot_pos,
                             const int64_t *dest_shift, uint16_t *out, void *stream) {
    const char *bad = mc_ep_check_shapes(num_tokens, num_topk, hidden, num_local, 1);
    if (bad)
        return fail("mc_ep_combine", bad);
    if (num_tokens > 0)
        combine_rows<<<(unsigned)num_tokens, kThreads, 0, (cudaStream_t)stream>>>(
            got, topk_idx, topk_weights, num_topk, hidden, num_local, slot_pos, dest_shift, out);
    return launched("mc_ep_combine");
}
