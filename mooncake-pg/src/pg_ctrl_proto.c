/* The control plane's codec (the layouts are in pg_ctrl_proto.h): no I/O, every field checked
 * against what the body holds, strings copied out NUL-terminated. */
#include "pg_ctrl_proto.h"

#include <stdio.h>
#include <string.h>

#include "mooncake/error.h"

/* A length-prefixed string into a NUL-terminated buffer: fails when it does not fit, holds a
 * NUL, or (nonempty) is empty. */
static int cur_str(mc_cursor_t *c, char *out, size_t cap, int nonempty) {
    const uint8_t *p;
    uint32_t n;
    if (mc__cur_bytes(c, (uint32_t)cap - 1, &p, &n) != 0 || (nonempty && n == 0) || memchr(p, 0, n))
        return -1;
    memcpy(out, p, n);
    out[n] = '\0';
    return 0;
}

int mc__pgc_encode_request(const mc_pgc_req_t *r, uint64_t id, mc_buf_t *b) {
    size_t start;
    mc__buf_frame_begin(b, r->type, 0, id, &start);
    mc__buf_str(b, r->group);
    mc__buf_u32(b, r->rank);
    switch (r->type) {
    case MC_PGC_REGISTER:
        mc__buf_u32(b, r->size);
        mc__buf_u32(b, r->seats);
        mc__buf_u8(b, r->extension);
        mc__buf_str(b, r->addr);
        mc__buf_u32(b, r->timeout_ms);
        break;
    case MC_PGC_JOIN:
        mc__buf_str(b, r->addr);
        mc__buf_u64(b, r->round);
        mc__buf_u64(b, r->syncs);
        mc__buf_u32(b, r->timeout_ms);
        break;
    case MC_PGC_ACTIVATE:
        mc__buf_str(b, r->addr);
        mc__buf_u64(b, r->joiners);
        mc__buf_u64(b, r->active);
        mc__buf_u64(b, r->round);
        mc__buf_u64(b, r->syncs);
        mc__buf_u64(b, r->epoch);
        mc__buf_u32(b, r->window_ms);
        mc__buf_u32(b, r->timeout_ms);
        break;
    default:
        break;
    }
    mc__buf_frame_end(b, start);
    return b->failed ? MC_ERR_MEMORY : 0;
}

static int bad(char *err, size_t cap, const char *why) {
    if (err && cap)
        snprintf(err, cap, "%s", why);
    return MC_ERR_INVALID_ARGUMENT;
}

int mc__pgc_decode_request(uint8_t type, const uint8_t *body, size_t len, mc_pgc_req_t *out,
                           char *err, size_t err_cap) {
    memset(out, 0, sizeof(*out));
    out->type = type;
    if (type < MC_PGC_REGISTER || type > MC_PGC_VIEW)
        return bad(err, err_cap, "unknown message type");
    mc_cursor_t c = {body, body + len};
    if (cur_str(&c, out->group, sizeof(out->group), 1) || mc__cur_u32(&c, &out->rank))
        return bad(err, err_cap, "bad group name or rank");
    if (out->rank >= MC_PGC_MAX_SEATS)
        return bad(err, err_cap, "rank out of range");
    int short_body = 0;
    switch (type) {
    case MC_PGC_REGISTER:
        short_body = mc__cur_u32(&c, &out->size) || mc__cur_u32(&c, &out->seats) ||
                     mc__cur_u8(&c, &out->extension) ||
                     cur_str(&c, out->addr, sizeof(out->addr), 1) ||
                     mc__cur_u32(&c, &out->timeout_ms);
        if (!short_body &&
            (out->seats < 1 || out->seats > MC_PGC_MAX_SEATS || out->size < 1 ||
             out->size > out->seats || out->rank >= out->seats || out->extension > 1))
            return bad(err, err_cap, "bad size, seats or rank");
        break;
    case MC_PGC_JOIN:
        short_body = cur_str(&c, out->addr, sizeof(out->addr), 1) || mc__cur_u64(&c, &out->round) ||
                     mc__cur_u64(&c, &out->syncs) || mc__cur_u32(&c, &out->timeout_ms);
        break;
    case MC_PGC_ACTIVATE:
        short_body = cur_str(&c, out->addr, sizeof(out->addr), 1) ||
                     mc__cur_u64(&c, &out->joiners) || mc__cur_u64(&c, &out->active) ||
                     mc__cur_u64(&c, &out->round) || mc__cur_u64(&c, &out->syncs) ||
                     mc__cur_u64(&c, &out->epoch) || mc__cur_u32(&c, &out->window_ms) ||
                     mc__cur_u32(&c, &out->timeout_ms);
        /* a proposal admits someone, from a view that holds its sender and not the joiners */
        if (!short_body &&
            (!out->joiners || (out->joiners & out->active) || !(out->active >> out->rank & 1)))
            return bad(err, err_cap, "bad joiners or active set");
        break;
    default:
        break;
    }
    if (short_body)
        return bad(err, err_cap, "truncated or malformed body");
    if (mc__cur_left(&c))
        return bad(err, err_cap, "trailing bytes after the body");
    return 0;
}

int mc__pgc_encode_view(const mc_pgc_view_t *v, uint64_t id, mc_buf_t *b) {
    size_t start;
    uint32_t count = 0;
    for (int i = 0; i < MC_PGC_MAX_SEATS; i++)
        count += (uint32_t)(v->known >> i & 1);
    mc__buf_frame_begin(b, 0, MC_FRAME_F_REPLY, id, &start);
    mc__buf_u8(b, v->status);
    mc__buf_u32(b, v->seats);
    mc__buf_u64(b, v->epoch);
    mc__buf_u64(b, v->active);
    mc__buf_u64(b, v->dropped);
    mc__buf_u64(b, v->joining);
    mc__buf_u64(b, v->round);
    mc__buf_u64(b, v->syncs);
    mc__buf_u32(b, count);
    for (uint32_t i = 0; i < MC_PGC_MAX_SEATS; i++)
        if (v->known >> i & 1) {
            mc__buf_u32(b, i);
            mc__buf_str(b, v->addrs[i]);
        }
    mc__buf_str(b, v->reason);
    mc__buf_frame_end(b, start);
    return b->failed ? MC_ERR_MEMORY : 0;
}

int mc__pgc_encode_error(int code, const char *msg, uint64_t id, mc_buf_t *b) {
    size_t start;
    mc__buf_frame_begin(b, 0, MC_FRAME_F_REPLY | MC_FRAME_F_ERROR, id, &start);
    mc__buf_i32(b, code);
    mc__buf_str(b, msg);
    mc__buf_frame_end(b, start);
    return b->failed ? MC_ERR_MEMORY : 0;
}

int mc__pgc_decode_reply(uint16_t flags, const uint8_t *body, size_t len, mc_pgc_view_t *out) {
    memset(out, 0, sizeof(*out));
    mc_cursor_t c = {body, body + len};
    if (!(flags & MC_FRAME_F_REPLY))
        return MC_ERR_INVALID_ARGUMENT;
    if (flags & MC_FRAME_F_ERROR) {
        int32_t code;
        if (mc__cur_i32(&c, &code) || cur_str(&c, out->reason, sizeof(out->reason), 0) ||
            mc__cur_left(&c) || code >= 0)
            return MC_ERR_INVALID_ARGUMENT;
        return code;
    }
    uint32_t count;
    if (mc__cur_u8(&c, &out->status) || mc__cur_u32(&c, &out->seats) ||
        mc__cur_u64(&c, &out->epoch) || mc__cur_u64(&c, &out->active) ||
        mc__cur_u64(&c, &out->dropped) || mc__cur_u64(&c, &out->joining) ||
        mc__cur_u64(&c, &out->round) || mc__cur_u64(&c, &out->syncs) ||
        mc__cur_count(&c, MC_PGC_MAX_SEATS, 8, &count))
        return MC_ERR_INVALID_ARGUMENT;
    if (out->status < MC_PGC_APPLIED || out->status > MC_PGC_REJECTED || out->seats < 1 ||
        out->seats > MC_PGC_MAX_SEATS)
        return MC_ERR_INVALID_ARGUMENT;
    for (uint32_t i = 0; i < count; i++) {
        uint32_t seat;
        if (mc__cur_u32(&c, &seat) || seat >= out->seats || (out->known >> seat & 1) ||
            cur_str(&c, out->addrs[seat], MC_PGC_ADDR_MAX, 1))
            return MC_ERR_INVALID_ARGUMENT;
        out->known |= 1ull << seat;
    }
    /* every set names seats of the group only */
    uint64_t mask = out->seats == 64 ? ~0ull : (1ull << out->seats) - 1;
    if (cur_str(&c, out->reason, sizeof(out->reason), 0) || mc__cur_left(&c) ||
        (out->active & ~mask) || (out->dropped & ~mask) || (out->joining & ~mask))
        return MC_ERR_INVALID_ARGUMENT;
    return 0;
}
