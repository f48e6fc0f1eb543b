/* Frame header codec, body cursor and growable buffer. No I/O here: every function works on
 * bytes the caller already holds, which is what makes the decoders fuzzable. */
#include "mooncake/common/frame.h"

#include <string.h>

#include "mooncake/common/alloc.h"
#include "mooncake/error.h"

static void mc__put_le16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void mc__put_le32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void mc__put_le64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint16_t mc__get_le16(const uint8_t *p) {
    return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t mc__get_le32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static uint64_t mc__get_le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

void mc__frame_header_encode(const mc_frame_header_t *h, uint8_t out[MC_FRAME_HEADER_SIZE]) {
    mc__put_le32(out, h->magic);
    out[4] = h->version;
    out[5] = h->type;
    mc__put_le16(out + 6, h->flags);
    mc__put_le64(out + 8, h->request_id);
    mc__put_le64(out + 16, h->body_len);
}

int mc__frame_header_decode(const uint8_t *in, size_t len, uint64_t max_body,
                            mc_frame_header_t *out) {
    memset(out, 0, sizeof(*out));
    if (!in || len < MC_FRAME_HEADER_SIZE)
        return MC_ERR_INVALID_ARGUMENT;
    out->magic = mc__get_le32(in);
    out->version = in[4];
    out->type = in[5];
    out->flags = mc__get_le16(in + 6);
    out->request_id = mc__get_le64(in + 8);
    out->body_len = mc__get_le64(in + 16);
    if (out->magic != MC_FRAME_MAGIC || out->version != MC_FRAME_VERSION ||
        out->body_len > max_body)
        return MC_ERR_INVALID_ARGUMENT;
    return 0;
}

/* --- cursor --- */

int mc__cur_u8(mc_cursor_t *c, uint8_t *v) {
    if (mc__cur_left(c) < 1)
        return -1;
    *v = *c->pos++;
    return 0;
}

int mc__cur_u16(mc_cursor_t *c, uint16_t *v) {
    if (mc__cur_left(c) < 2)
        return -1;
    *v = mc__get_le16(c->pos);
    c->pos += 2;
    return 0;
}

int mc__cur_u32(mc_cursor_t *c, uint32_t *v) {
    if (mc__cur_left(c) < 4)
        return -1;
    *v = mc__get_le32(c->pos);
    c->pos += 4;
    return 0;
}

int mc__cur_u64(mc_cursor_t *c, uint64_t *v) {
    if (mc__cur_left(c) < 8)
        return -1;
    *v = mc__get_le64(c->pos);
    c->pos += 8;
    return 0;
}

int mc__cur_i32(mc_cursor_t *c, int32_t *v) {
    uint32_t u = 0;
    if (mc__cur_u32(c, &u))
        return -1;
    memcpy(v, &u, sizeof(*v));
    return 0;
}

int mc__cur_i64(mc_cursor_t *c, int64_t *v) {
    uint64_t u = 0;
    if (mc__cur_u64(c, &u))
        return -1;
    memcpy(v, &u, sizeof(*v));
    return 0;
}

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

int mc__buf_u16(mc_buf_t *b, uint16_t v) {
    uint8_t t[2];
    mc__put_le16(t, v);
    return mc__buf_put(b, t, sizeof(t));
}

int mc__buf_u32(mc_buf_t *b, uint32_t v) {
    uint8_t t[4];
    mc__put_le32(t, v);
    return mc__buf_put(b, t, sizeof(t));
}

int mc__buf_u64(mc_buf_t *b, uint64_t v) {
    uint8_t t[8];
    mc__put_le64(t, v);
    return mc__buf_put(b, t, sizeof(t));
}

int mc__buf_i32(mc_buf_t *b, int32_t v) {
    uint32_t u;
    memcpy(&u, &v, sizeof(u));
    return mc__buf_u32(b, u);
}

int mc__buf_i64(mc_buf_t *b, int64_t v) {
    uint64_t u;
    memcpy(&u, &v, sizeof(u));
    return mc__buf_u64(b, u);
}

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
    mc_frame_header_t h = {MC_FRAME_MAGIC, MC_FRAME_VERSION, type, flags, request_id, 0};
    int rc = mc__buf_reserve(b, MC_FRAME_HEADER_SIZE);
    if (rc)
        return rc;
    *frame_start = b->len;
    mc__frame_header_encode(&h, b->data + b->len);
    b->len += MC_FRAME_HEADER_SIZE;
    return 0;
}

void mc__buf_frame_end(mc_buf_t *b, size_t frame_start) {
    if (b->failed || frame_start + MC_FRAME_HEADER_SIZE > b->len)
        return;
    mc__put_le64(b->data + frame_start + 16, b->len - frame_start - MC_FRAME_HEADER_SIZE);
}
