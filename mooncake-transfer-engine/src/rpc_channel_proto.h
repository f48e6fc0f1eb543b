/* The RPC channel's message codec (mooncake/rpc_channel.h has the wire format). No I/O. */
#ifndef MC_RPC_CHANNEL_PROTO_H
#define MC_RPC_CHANNEL_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "mooncake/common/frame.h"
#include "mooncake/rpc_channel.h"

/* frame types */
#define MC__RPC_DATA 1u
#define MC__RPC_TENSOR 2u

/* The largest tensor header; a body is at most this plus MC_RPC_MAX_MESSAGE. */
#define MC__RPC_MAX_META (4u + MC_RPC_MAX_DTYPE + 4u + 8u * MC_RPC_MAX_DIMS)
#define MC__RPC_MAX_BODY (MC_RPC_MAX_MESSAGE + MC__RPC_MAX_META)

typedef struct mc__rpc_tensor_view {
    char dtype[MC_RPC_MAX_DTYPE + 1];
    uint64_t shape[MC_RPC_MAX_DIMS];
    size_t ndim;
    size_t data_off; /* where the tensor's bytes start in the body */
} mc__rpc_tensor_view_t;

/* Appends the tensor header (the part of the body before the bytes). MC_ERR_INVALID_ARGUMENT for
 * an empty or too long dtype or too many dims, MC_ERR_MEMORY. */
int mc__rpc_encode_tensor_meta(mc_buf_t *b, const char *dtype, const uint64_t *shape, size_t ndim);
/* Decodes a TENSOR body's header: 0, or MC_ERR_INVALID_ARGUMENT when it is short, names no or a
 * too long dtype (or one with a NUL), or has more than MC_RPC_MAX_DIMS dims. */
int mc__rpc_decode_tensor_meta(const uint8_t *body, size_t n, mc__rpc_tensor_view_t *out);
#endif
