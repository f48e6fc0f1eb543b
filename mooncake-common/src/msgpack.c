/* MessagePack encoder and pull decoder (mooncake/common/msgpack.h). Integers are big-endian on
 * this wire, unlike our frames. */
#include "mooncake/common/msgpack.h"

#include <string.h>

static void put_be(mc_buf_t *b, uint8_t tag, uint64_t v, int n) {
    uint8_t out[9];
    out[0] = tag;
    for (int i = 0; i < n; i++)
        out[1 + i] = (uint8_t)(v >> (8 * (n - 1 - i)));
    mc__buf_put(b, out, (size_t)n + 1);
}

void mc__mp_nil(mc_buf_t *b) {
    mc__buf_u8(b, 0xc0);
}

void mc__mp_bool(mc_buf_t *b, int v) {
    mc__buf_u8(b, v ? 0xc3 : 0xc2);
}

void mc__mp_uint(mc_buf_t *b, uint64_t v) {
    if (v < 128)
        mc__buf_u8(b, (uint8_t)v);
    else if (v <= UINT8_MAX)
        put_be(b, 0xcc, v, 1);
    else if (v <= UINT16_MAX)
        put_be(b, 0xcd, v, 2);
    else if (v <= UINT32_MAX)
        put_be(b, 0xce, v, 4);
    else
        put_be(b, 0xcf, v, 8);
}

void mc__mp_int(mc_buf_t *b, int64_t v) {
    if (v >= 0) {
        mc__mp_uint(b, (uint64_t)v);
        return;
    }
    if (v >= -32)
        mc__buf_u8(b, (uint8_t)(int8_t)v);
    else if (v >= INT8_MIN)
        put_be(b, 0xd0, (uint64_t)v, 1);
    else if (v >= INT16_MIN)
        put_be(b, 0xd1, (uint64_t)v, 2);
    else if (v >= INT32_MIN)
        put_be(b, 0xd2, (uint64_t)v, 4);
    else
        put_be(b, 0xd3, (uint64_t)v, 8);
}

void mc__mp_double(mc_buf_t *b, double v) {
    uint64_t bits;
    memcpy(&bits, &v, sizeof(bits));
    put_be(b, 0xcb, bits, 8);
}

static void len_head(mc_buf_t *b, size_t n, uint8_t fix, size_t fix_max, uint8_t t8, uint8_t t16,
                     uint8_t t32) {
    if (fix && n <= fix_max)
        mc__buf_u8(b, (uint8_t)(fix | n));
    else if (t8 && n <= UINT8_MAX)
        put_be(b, t8, n, 1);
    else if (n <= UINT16_MAX)
        put_be(b, t16, n, 2);
    else
        put_be(b, t32, n, 4);
}

void mc__mp_str(mc_buf_t *b, const char *s, size_t n) {
    if (n > UINT32_MAX) {
        b->failed = 1;
        return;
    }
    len_head(b, n, 0xa0, 31, 0xd9, 0xda, 0xdb);
    mc__buf_put(b, s, n);
}

void mc__mp_cstr(mc_buf_t *b, const char *s) {
    if (!s)
        mc__mp_nil(b);
    else
        mc__mp_str(b, s, strlen(s));
}

void mc__mp_bin(mc_buf_t *b, const void *p, size_t n) {
    if (n > UINT32_MAX) {
        b->failed = 1;
        return;
    }
    len_head(b, n, 0, 0, 0xc4, 0xc5, 0xc6);
    mc__buf_put(b, p, n);
}

void mc__mp_array(mc_buf_t *b, uint32_t n) {
    len_head(b, n, 0x90, 15, 0, 0xdc, 0xdd);
}

void mc__mp_map(mc_buf_t *b, uint32_t n) {
    len_head(b, n, 0x80, 15, 0, 0xde, 0xdf);
}

/* --- decoder */

static int get_be(mc_cursor_t *c, int n, uint64_t *v) {
    if (mc__cur_left(c) < (size_t)n)
        return -1;
    uint64_t x = 0;
    for (int i = 0; i < n; i++)
        x = (x << 8) | c->pos[i];
    c->pos += n;
    *v = x;
    return 0;
}

/* A payload of n bytes at the cursor: p points at it and the cursor moves past. */
static int take(mc_cursor_t *c, uint64_t n, mc_mp_item_t *it) {
    if (n > mc__cur_left(c))
        return -1;
    it->p = c->pos;
    it->n = (uint32_t)n;
    c->pos += n;
    return 0;
}

static int container(mc_cursor_t *c, uint64_t n, uint64_t per_item, mc_mp_item_t *it) {
    if (n * per_item > mc__cur_left(c))
        return -1;
    it->n = (uint32_t)n;
    return 0;
}

static int next_item(mc_cursor_t *c, mc_mp_item_t *it) {
    uint8_t t;
    uint64_t v;
    if (mc__cur_u8(c, &t) != 0)
        return -1;
    if (t <= 0x7f) {
        it->type = MC_MP_UINT;
        it->u = t;
        return 0;
    }
    if (t >= 0xe0) {
        it->type = MC_MP_INT;
        it->i = (int8_t)t;
        return 0;
    }
    if ((t & 0xf0) == 0x80) {
        it->type = MC_MP_MAP;
        return container(c, t & 0x0f, 2, it);
    }
    if ((t & 0xf0) == 0x90) {
        it->type = MC_MP_ARRAY;
        return container(c, t & 0x0f, 1, it);
    }
    if ((t & 0xe0) == 0xa0) {
        it->type = MC_MP_STR;
        return take(c, t & 0x1f, it);
    }
    switch (t) {
    case 0xc0:
        it->type = MC_MP_NIL;
        return 0;
    case 0xc2:
    case 0xc3:
        it->type = MC_MP_BOOL;
        it->u = t == 0xc3;
        return 0;
    case 0xc4:
    case 0xc5:
    case 0xc6:
        it->type = MC_MP_BIN;
        if (get_be(c, 1 << (t - 0xc4), &v) != 0)
            return -1;
        return take(c, v, it);
    case 0xc7:
    case 0xc8:
    case 0xc9: {
        uint64_t et;
        it->type = MC_MP_EXT;
        if (get_be(c, 1 << (t - 0xc7), &v) != 0 || get_be(c, 1, &et) != 0)
            return -1;
        it->ext_type = (int8_t)(uint8_t)et;
        return take(c, v, it);
    }
    case 0xca: {
        uint32_t bits;
        float f;
        if (get_be(c, 4, &v) != 0)
            return -1;
        bits = (uint32_t)v;
        memcpy(&f, &bits, sizeof(f));
        it->type = MC_MP_FLOAT;
        it->f = f;
        return 0;
    }
    case 0xcb:
        if (get_be(c, 8, &v) != 0)
            return -1;
        it->type = MC_MP_FLOAT;
        memcpy(&it->f, &v, sizeof(it->f));
        return 0;
    case 0xcc:
    case 0xcd:
    case 0xce:
    case 0xcf:
        if (get_be(c, 1 << (t - 0xcc), &v) != 0)
            return -1;
        it->type = MC_MP_UINT;
        it->u = v;
        return 0;
    case 0xd0:
    case 0xd1:
    case 0xd2:
    case 0xd3: {
        int n = 1 << (t - 0xd0);
        if (get_be(c, n, &v) != 0)
            return -1;
        /* sign-extend the n-byte value */
        if (n < 8 && (v >> (8 * n - 1)) & 1)
            v |= ~0ull << (8 * n);
        it->i = (int64_t)v;
        if (it->i >= 0) {
            it->type = MC_MP_UINT;
            it->u = (uint64_t)it->i;
        } else {
            it->type = MC_MP_INT;
        }
        return 0;
    }
    case 0xd4:
    case 0xd5:
    case 0xd6:
    case 0xd7:
    case 0xd8: {
        uint64_t et;
        if (get_be(c, 1, &et) != 0)
            return -1;
        it->type = MC_MP_EXT;
        it->ext_type = (int8_t)(uint8_t)et;
        return take(c, 1u << (t - 0xd4), it);
    }
    case 0xd9:
    case 0xda:
    case 0xdb:
        it->type = MC_MP_STR;
        if (get_be(c, 1 << (t - 0xd9), &v) != 0)
            return -1;
        return take(c, v, it);
    case 0xdc:
    case 0xdd:
        it->type = MC_MP_ARRAY;
        if (get_be(c, t == 0xdc ? 2 : 4, &v) != 0)
            return -1;
        return container(c, v, 1, it);
    case 0xde:
    case 0xdf:
        it->type = MC_MP_MAP;
        if (get_be(c, t == 0xde ? 2 : 4, &v) != 0)
            return -1;
        return container(c, v, 2, it);
    default: /* 0xc1: never used */
        return -1;
    }
}

int mc__mp_next(mc_cursor_t *c, mc_mp_item_t *it) {
    const uint8_t *start = c->pos;
    memset(it, 0, sizeof(*it));
    if (next_item(c, it) != 0) {
        c->pos = start;
        return -1;
    }
    return 0;
}

int mc__mp_skip(mc_cursor_t *c, int max_depth) {
    mc_mp_item_t it;
    /* Items still to skip at this level, kept as a count instead of recursion per item, so a deep
     * or wide input costs no stack beyond max_depth frames. */
    if (max_depth < 0 || mc__mp_next(c, &it) != 0)
        return -1;
    if (it.type != MC_MP_ARRAY && it.type != MC_MP_MAP)
        return 0;
    if (max_depth == 0)
        return -1;
    uint64_t n = it.type == MC_MP_MAP ? 2ull * it.n : it.n;
    for (uint64_t k = 0; k < n; k++)
        if (mc__mp_skip(c, max_depth - 1) != 0)
            return -1;
    return 0;
}

int mc__mp_read_i64(mc_cursor_t *c, int64_t *v) {
    mc_mp_item_t it;
    const uint8_t *start = c->pos;
    if (mc__mp_next(c, &it) != 0)
        return -1;
    if (it.type == MC_MP_INT) {
        *v = it.i;
        return 0;
    }
    if (it.type == MC_MP_UINT && it.u <= INT64_MAX) {
        *v = (int64_t)it.u;
        return 0;
    }
    c->pos = start;
    return -1;
}

int mc__mp_read_u64(mc_cursor_t *c, uint64_t *v) {
    mc_mp_item_t it;
    const uint8_t *start = c->pos;
    if (mc__mp_next(c, &it) != 0)
        return -1;
    if (it.type == MC_MP_UINT) {
        *v = it.u;
        return 0;
    }
    c->pos = start;
    return -1;
}

int mc__mp_read_str(mc_cursor_t *c, const uint8_t **p, uint32_t *n) {
    mc_mp_item_t it;
    const uint8_t *start = c->pos;
    if (mc__mp_next(c, &it) != 0)
        return -1;
    if (it.type == MC_MP_STR || it.type == MC_MP_BIN) {
        *p = it.p;
        *n = it.n;
        return 0;
    }
    c->pos = start;
    return -1;
}

int mc__mp_str_is(const mc_mp_item_t *it, const char *s) {
    size_t n = strlen(s);
    return it->type == MC_MP_STR && it->n == n && memcmp(it->p, s, n) == 0;
}
