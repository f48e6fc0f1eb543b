/* The RPC channel's tensor header codec: cursor and end, counts bounded by the bytes left. */
#include <string.h>

#include "rpc_channel_proto.h"

int mc__rpc_encode_tensor_meta(mc_buf_t *b, const char *dtype, const uint64_t *shape, size_t ndim) {
    size_t n = dtype ? strlen(dtype) : 0;
    if (n == 0 || n > MC_RPC_MAX_DTYPE || ndim > MC_RPC_MAX_DIMS || (ndim && !shape))
        return MC_ERR_INVALID_ARGUMENT;
    mc__buf_bytes(b, dtype, (uint32_t)n);
    mc__buf_u32(b, (uint32_t)ndim);
    for (size_t i = 0; i < ndim; i++)
        mc__buf_u64(b, shape[i]);
    return b->failed ? MC_ERR_MEMORY : 0;
}

int mc__rpc_decode_tensor_meta(const uint8_t *body, size_t n, mc__rpc_tensor_view_t *out) {
    mc_cursor_t c = {body, body ? body + n : body}; /* NULL + 0 is undefined in C */
    const uint8_t *p = NULL;
    uint32_t len = 0, ndim = 0;
    if (!body || mc__cur_bytes(&c, MC_RPC_MAX_DTYPE, &p, &len) || len == 0 ||
        memchr(p, '\0', len) || mc__cur_count(&c, MC_RPC_MAX_DIMS, 8, &ndim))
        return MC_ERR_INVALID_ARGUMENT;
    memcpy(out->dtype, p, len);
    out->dtype[len] = '\0';
    for (uint32_t i = 0; i < ndim; i++)
        if (mc__cur_u64(&c, &out->shape[i]))
            return MC_ERR_INVALID_ARGUMENT;
    out->ndim = ndim;
    out->data_off = (size_t)(c.pos - body);
    return 0;
}
