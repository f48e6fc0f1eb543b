/* Argument checks both builds of ep_kernels.h run before touching memory: a bad size from the
 * Python side becomes an error message, not an out-of-bounds kernel. */
#ifndef MOONCAKE_EP_CHECK_H
#define MOONCAKE_EP_CHECK_H

#include <stdint.h>

/* NULL when the shapes are usable, else what is wrong. */
static inline const char *mc_ep_check_shapes(int64_t num_tokens, int32_t num_topk, int64_t hidden,
                                             int32_t num_experts, int32_t num_ranks) {
    if (num_tokens < 0 || num_tokens > INT32_MAX)
        return "num_tokens out of range";
    if (num_topk < 1)
        return "num_topk must be >= 1";
    if (hidden < 1)
        return "hidden must be >= 1";
    if (num_ranks < 1 || num_experts < 1 || num_experts % num_ranks != 0)
        return "num_experts must be a positive multiple of num_ranks";
    return 0;
}

#endif
