/* Frame header codec, body cursor and growable buffer. No I/O here: every function works on
 * bytes the caller already holds, which is what makes the decoders fuzzable. */
#include "mooncake/common/frame.h"

#include <string.h>

#include "mooncake/common/alloc.h"
#include "mooncake/error.h"

void mc__frame_header_encode(const mc_frame_header_t *h, uint8_t out[MC_FRAME_HEADER_SIZE]) {
    mc__le_put(out, h->magic, 4);
    out[4] = h->version;
    out[5] = h->type;
    mc__le_put(out + 6, h->flags, 2);
    mc__le_put(out + 8, h->request_id, 8);
    mc__le_put(out + 16, h->body_len, 8);
}

void mc__frame_header_put(uint8_t out[MC_FRAME_HEADER_SIZE], uint8_t type, uint16_t flags,
                          uint64_t request_id, uint64_t body_len) {
    mc_frame_header_t h = {MC_FRAME_MAGIC, MC_FRAME_VERSION, type, flags, request_id, body_len};
    mc__frame_header_encode(&h, out);
}

int mc__frame_header_decode(const uint8_t *in, size_t len, uint64_t max_body,
                            mc_frame_header_t *out) {
    memset(out, 0, sizeof(*out));
    if (!in || len < MC_FRAME_HEADER_SIZE)
        return MC_ERR_INVALID_ARGUMENT;
    out->magic = (uint32_t)mc__le_get(in, 4);
    out->version = in[4];
    out->type = in[5];
    out->flags = (uint16_t)mc__le_get(in + 6, 2);
    out->request_id = mc__le_get(in + 8, 8);
    out->body_len = mc__le_get(in + 16, 8);
    if (out->magic != MC_FRAME_MAGIC || out->version != MC_FRAME_VERSION ||
        out->body_len > max_body)
        return MC_ERR_INVALID_ARGUMENT;
    return 0;
}

/* --- cursor --- */

/* The unsigned getters, one definition for every width. */
#define MC__CUR_UINT(bits)                                                                         \
    int mc__cur_u##bits(mc_cursor_t *c, uint##bits##_t *v) {                                       \
        if (mc__cur_left(c) < (bits) / 8)                                                          \
            return -1;                                                                             \
        *v = (uint##bits##_t)mc__le_get(c->pos, (bits) / 8);                                       \
        c->pos += (bits) / 8;                                                                      \
        return 0;                                                                                  \
    }
MC__CUR_UINT(8)
MC__CUR_UINT(16)
MC__CUR_UINT(32)
MC__CUR_UINT(64)
#undef MC__CUR_UINT

/* The signed ones read the unsigned value and keep its bits. */
#define MC__CUR_INT(bits)                                                                          \
    int mc__cur_i##bits(mc_cursor_t *c, int##bits##_t *v) {                                        \
        uint##bits##_t u = 0;                                                                      \
        if (mc__cur_u##bits(c, &u))                                                                \
            return -1;                                                                             \
        memcpy(v, &u, sizeof(*v));                                                                 \
        return 0;                                                                                  \
    }
MC__CUR_INT(32)
MC__CUR_INT(64)
#undef MC__CUR_INT

int mc__cur_bytes(mc_cursor_t *c, uint32_t max, const uint8_t **p, uint32_t *len) {
    const uint8_t *save = c->pos;
    uint32_t n = 0;
    if (mc__cur_u32(c, &n))
        return -1;
    if (n > max || n > mc__cur_left(c)) {
        c->pos = save;
        return -1;
    }
    *p = c->pos;
    *len = n;
    c->pos += n;
    return 0;
}

int mc__cur_count(mc_cursor_t *c, uint32_t max, size_t min_item_size, uint32_t *count) {
    const uint8_t *save = c->pos;
    uint32_t n = 0;
    if (mc__cur_u32(c, &n))
        return -1;
    /* Division keeps the check overflow-free for any min_item_size. */
    if (n > max || (min_item_size && n > mc__cur_left(c) / min_item_size)) {
        c->pos = save;
        return -1;
    }
    *count = n;
    return 0;
}

/* --- buffer --- */

void mc__buf_init(mc_buf_t *b) {
    memset(b, 0, sizeof(*b));
}

void mc__buf_free(mc_buf_t *b) {
    mc__free(b->data);
    mc__buf_init(b);
}

void mc__buf_reset(mc_buf_t *b) {
    b->len = 0;
    b->failed = 0;
}

int mc__buf_reserve(mc_buf_t *b, size_t extra) {
    size_t need = 0;
    size_t cap = 0;
    uint8_t *p = NULL;
    if (b->failed)
        return MC_ERR_MEMORY;
    if (extra > SIZE_MAX - b->len)
        goto fail;
    need = b->len + extra;
    if (need <= b->cap)
        return 0;
    cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    p = mc__realloc(b->data, cap);
    if (!p)
        goto fail;
    b->data = p;
    b->cap = cap;
    return 0;
fail:
    b->failed = 1;
    return MC_ERR_MEMORY;
}

int mc__buf_put(mc_buf_t *b, const void *p, size_t n) {
    int rc = mc__buf_reserve(b, n);
    if (rc)
        return rc;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

int mc__buf_u8(mc_buf_t *b, uint8_t v) {
    return mc__buf_put(b, &v, 1);
}

/* The appenders of every width, likewise. */
#define MC__BUF_UINT(bits)                                                                         \
    int mc__buf_u##bits(mc_buf_t *b, uint##bits##_t v) {                                           \
        uint8_t t[(bits) / 8];                                                                     \
        mc__le_put(t, v, (bits) / 8);                                                              \
        return mc__buf_put(b, t, sizeof(t));                                                       \
    }
MC__BUF_UINT(16)
MC__BUF_UINT(32)
MC__BUF_UINT(64)
#undef MC__BUF_UINT

#define MC__BUF_INT(bits)                                                                          \
    int mc__buf_i##bits(mc_buf_t *b, int##bits##_t v) {                                            \
        uint##bits##_t u;                                                                          \
        memcpy(&u, &v, sizeof(u));                                                                 \
        return mc__buf_u##bits(b, u);                                                              \
    }
MC__BUF_INT(32)
MC__BUF_INT(64)
#undef MC__BUF_INT

int mc__buf_bytes(mc_buf_t *b, const void *p, uint32_t n) {
    int rc = mc__buf_reserve(b, (size_t)n + 4);
    if (rc)
        return rc;
    mc__buf_u32(b, n);
    return mc__buf_put(b, p, n);
}

int mc__buf_str(mc_buf_t *b, const char *s) {
    size_t n = s ? strlen(s) : 0;
    if (n > UINT32_MAX) {
        b->failed = 1;
        return MC_ERR_MEMORY;
    }
    return mc__buf_bytes(b, s, (uint32_t)n);
}

int mc__buf_frame_begin(mc_buf_t *b, uint8_t type, uint16_t flags, uint64_t request_id,
                        size_t *frame_start) {
    int rc = mc__buf_reserve(b, MC_FRAME_HEADER_SIZE);
    if (rc)
        return rc;
    *frame_start = b->len;
    mc__frame_header_put(b->data + b->len, type, flags, request_id, 0);
    b->len += MC_FRAME_HEADER_SIZE;
    return 0;
}

void mc__buf_frame_end(mc_buf_t *b, size_t frame_start) {
    if (b->failed || frame_start + MC_FRAME_HEADER_SIZE > b->len)
        return;
    mc__le_put(b->data + frame_start + 16, b->len - frame_start - MC_FRAME_HEADER_SIZE, 8);
}
