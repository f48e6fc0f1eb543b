#include "proto.h"

#include <string.h>

#include "mooncake/error.h"

int mc__te_check_request(const mc_frame_header_t *h) {
    if (h->flags & MC_FRAME_F_REPLY)
        return MC_ERR_INVALID_ARGUMENT;
    switch (h->type) {
    case MC__TE_PING:
    case MC__TE_GET_DESC:
        return h->body_len == 0 ? 0 : MC_ERR_INVALID_ARGUMENT;
    case MC__TE_WRITE:
        return h->body_len >= MC__TE_RW_BODY && h->body_len <= MC__TE_RW_BODY + MC__TE_MAX_SLICE
                   ? 0
                   : MC_ERR_INVALID_ARGUMENT;
    case MC__TE_WRITE_ASK:
        /* the exact sum is checked with the head (mc__te_decode_ask) */
        return h->body_len >= MC__TE_ASK_BODY && h->body_len <= MC__TE_MAX_REQUEST_BODY
                   ? 0
                   : MC_ERR_INVALID_ARGUMENT;
    case MC__TE_READ:
        return h->body_len == MC__TE_RW_BODY ? 0 : MC_ERR_INVALID_ARGUMENT;
    case MC__TE_NOTIFY:
        return h->body_len <= MC__TE_MAX_NOTIFY_BODY ? 0 : MC_ERR_INVALID_ARGUMENT;
    default:
        /* skippable only when small: a huge unknown body is treated as garbage */
        return h->body_len <= MC__TE_MAX_NOTIFY_BODY ? MC_ERR_NOT_IMPLEMENTED
                                                     : MC_ERR_INVALID_ARGUMENT;
    }
}

void mc__te_encode_rw(uint8_t out[MC__TE_RW_HEAD], uint8_t type, uint64_t request_id, uint64_t addr,
                      uint64_t len, uint64_t epoch, uint16_t flags) {
    mc_frame_header_t h = {.magic = MC_FRAME_MAGIC,
                           .version = MC_FRAME_VERSION,
                           .type = type,
                           .flags = flags,
                           .request_id = request_id,
                           .body_len = MC__TE_RW_BODY + (type == MC__TE_WRITE ? len : 0)};
    mc__frame_header_encode(&h, out);
    for (int i = 0; i < 8; i++) {
        out[MC_FRAME_HEADER_SIZE + i] = (uint8_t)(addr >> (8 * i));
        out[MC_FRAME_HEADER_SIZE + 8 + i] = (uint8_t)(len >> (8 * i));
        out[MC_FRAME_HEADER_SIZE + 16 + i] = (uint8_t)(epoch >> (8 * i));
    }
}

int mc__te_decode_rw(const mc_frame_header_t *h, const uint8_t *body, size_t n, uint64_t *addr,
                     uint64_t *len, uint64_t *epoch) {
    mc_cursor_t c = {body, body + n};
    if (!body || mc__cur_u64(&c, addr) || mc__cur_u64(&c, len) || mc__cur_u64(&c, epoch))
        return MC_ERR_INVALID_ARGUMENT;
    if (*len == 0 || *len > MC__TE_MAX_SLICE)
        return MC_ERR_INVALID_ARGUMENT;
    if (h->type == MC__TE_WRITE && h->body_len != MC__TE_RW_BODY + *len)
        return MC_ERR_INVALID_ARGUMENT;
    return 0;
}

void mc__te_encode_reply(uint8_t out[MC_FRAME_HEADER_SIZE], uint8_t type, uint64_t request_id,
                         uint64_t body_len) {
    mc_frame_header_t h = {.magic = MC_FRAME_MAGIC,
                           .version = MC_FRAME_VERSION,
                           .type = type,
                           .flags = MC_FRAME_F_REPLY,
                           .request_id = request_id,
                           .body_len = body_len};
    mc__frame_header_encode(&h, out);
}

int mc__te_encode_error(mc_buf_t *b, uint8_t type, uint64_t request_id, int code, const char *msg) {
    size_t start = 0;
    size_t n = msg ? strlen(msg) : 0;
    if (n > MC__TE_MAX_ERROR_BODY - 16)
        n = MC__TE_MAX_ERROR_BODY - 16;
    mc__buf_frame_begin(b, type, MC_FRAME_F_REPLY | MC_FRAME_F_ERROR, request_id, &start);
    mc__buf_i32(b, code);
    mc__buf_bytes(b, msg ? msg : "", (uint32_t)n);
    if (b->failed)
        return MC_ERR_MEMORY;
    mc__buf_frame_end(b, start);
    return 0;
}

int mc__te_decode_error(const uint8_t *body, size_t n, int *code, char *msg, size_t cap) {
    mc_cursor_t c = {body, body + n};
    int32_t v = 0;
    const uint8_t *p = NULL;
    uint32_t len = 0;
    if (!body || mc__cur_i32(&c, &v) || mc__cur_bytes(&c, MC__TE_MAX_ERROR_BODY, &p, &len))
        return MC_ERR_INVALID_ARGUMENT;
    *code = v < 0 ? v : MC_ERR_INVALID_ARGUMENT;
    if (msg && cap) {
        size_t k = len < cap - 1 ? len : cap - 1;
        memcpy(msg, p, k);
        msg[k] = '\0';
    }
    return 0;
}

int mc__te_encode_notify(mc_buf_t *b, uint64_t request_id, const char *from, const char *name,
                         const void *msg, size_t len) {
    size_t start = 0;
    size_t fl = strlen(from), nl = strlen(name);
    if (fl > MC__TE_MAX_NOTIFY_NAME || nl > MC__TE_MAX_NOTIFY_NAME || len > MC__TE_MAX_NOTIFY_MSG)
        return MC_ERR_INVALID_ARGUMENT;
    mc__buf_frame_begin(b, MC__TE_NOTIFY, 0, request_id, &start);
    mc__buf_bytes(b, from, (uint32_t)fl);
    mc__buf_bytes(b, name, (uint32_t)nl);
    mc__buf_bytes(b, msg, (uint32_t)len);
    if (b->failed)
        return MC_ERR_MEMORY;
    mc__buf_frame_end(b, start);
    return 0;
}

int mc__te_decode_notify(const uint8_t *body, size_t n, mc__te_notify_view_t *out) {
    mc_cursor_t c = {body, body + n};
    const uint8_t *p = NULL;
    memset(out, 0, sizeof(*out));
    if (!body && n)
        return MC_ERR_INVALID_ARGUMENT;
    if (mc__cur_bytes(&c, MC__TE_MAX_NOTIFY_NAME, &p, &out->from_len))
        return MC_ERR_INVALID_ARGUMENT;
    out->from = (const char *)p;
    if (mc__cur_bytes(&c, MC__TE_MAX_NOTIFY_NAME, &p, &out->name_len))
        return MC_ERR_INVALID_ARGUMENT;
    out->name = (const char *)p;
    if (mc__cur_bytes(&c, MC__TE_MAX_NOTIFY_MSG, &out->msg, &out->msg_len))
        return MC_ERR_INVALID_ARGUMENT;
    /* names are C strings for the receiver: no embedded NULs; nothing may trail */
    if (memchr(out->from, 0, out->from_len) || memchr(out->name, 0, out->name_len) ||
        mc__cur_left(&c) != 0)
        return MC_ERR_INVALID_ARGUMENT;
    return 0;
}

void mc__te_encode_ask(uint8_t out[MC__TE_ASK_HEAD], uint64_t request_id, uint64_t addr,
                       uint64_t len, uint64_t epoch, uint32_t msg_len) {
    mc_frame_header_t h = {.magic = MC_FRAME_MAGIC,
                           .version = MC_FRAME_VERSION,
                           .type = MC__TE_WRITE_ASK,
                           .request_id = request_id,
                           .body_len = MC__TE_ASK_BODY + (uint64_t)msg_len + len};
    uint8_t *b = out + MC_FRAME_HEADER_SIZE;
    mc__frame_header_encode(&h, out);
    for (int i = 0; i < 8; i++) {
        b[i] = (uint8_t)(addr >> (8 * i));
        b[8 + i] = (uint8_t)(len >> (8 * i));
        b[16 + i] = (uint8_t)(epoch >> (8 * i));
    }
    for (int i = 0; i < 4; i++)
        b[24 + i] = (uint8_t)(msg_len >> (8 * i));
}

int mc__te_decode_ask(const mc_frame_header_t *h, const uint8_t *body, size_t n, uint64_t *addr,
                      uint64_t *len, uint64_t *epoch, uint32_t *msg_len) {
    mc_cursor_t c = {body, body + n};
    if (!body || mc__cur_u64(&c, addr) || mc__cur_u64(&c, len) || mc__cur_u64(&c, epoch) ||
        mc__cur_u32(&c, msg_len))
        return MC_ERR_INVALID_ARGUMENT;
    if (*msg_len > MC__TE_MAX_ASK_MSG || *len > MC__TE_MAX_SLICE ||
        h->body_len != MC__TE_ASK_BODY + (uint64_t)*msg_len + *len)
        return MC_ERR_INVALID_ARGUMENT;
    return 0;
}
