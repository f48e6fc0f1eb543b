/* The one framing for every binary channel (TE RPC/data port, master RPC).
 *
 * Header, 24 bytes little-endian:
 *   u32 magic 'MCK1' (0x314B434D) | u8 version (1) | u8 type | u16 flags | u64 request_id |
 *   u64 body_len
 * followed by body_len bytes. body_len is checked against the channel's limit before anything is
 * buffered. The codec does no I/O: callers hand it bytes and get a header or an error back, which
 * makes every decoder fuzzable. Bodies are decoded with a cursor (pos, end) that never reads past
 * end; a count sent by a peer never sizes an allocation by itself (check it against bytes left). */
#ifndef MC_COMMON_FRAME_H
#define MC_COMMON_FRAME_H
#include <stddef.h>
#include <stdint.h>

#define MC_FRAME_MAGIC 0x314B434Du
#define MC_FRAME_VERSION 1
#define MC_FRAME_HEADER_SIZE 24

/* flags */
#define MC_FRAME_F_REPLY 0x0001u /* a reply to request_id */
#define MC_FRAME_F_ERROR 0x0002u /* body is: i32 code, str message */

typedef struct mc_frame_header {
    uint32_t magic;
    uint8_t version;
    uint8_t type;
    uint16_t flags;
    uint64_t request_id;
    uint64_t body_len;
} mc_frame_header_t;

/* Writes 24 bytes into out. */
void mc__frame_header_encode(const mc_frame_header_t *h, uint8_t out[MC_FRAME_HEADER_SIZE]);
/* Writes the 24-byte header of one of our frames (MC_FRAME_MAGIC, MC_FRAME_VERSION) into out. */
void mc__frame_header_put(uint8_t out[MC_FRAME_HEADER_SIZE], uint8_t type, uint16_t flags,
                          uint64_t request_id, uint64_t body_len);
/* Decodes 24 bytes; returns 0, or MC_ERR_INVALID_ARGUMENT on bad magic, unknown version, or
 * body_len > max_body. The header is filled even on error where it could be read. */
int mc__frame_header_decode(const uint8_t *in, size_t len, uint64_t max_body,
                            mc_frame_header_t *out);

/* Little-endian integers of n bytes (1 to 8) at p: the byte order of every frame and of the disk
 * tier's records. Inline so that a constant n unrolls. */
static inline void mc__le_put(uint8_t *p, uint64_t v, int n) {
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint64_t mc__le_get(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* --- body decoding: a cursor that never passes end. Every getter returns 0 or -1 (short). --- */
typedef struct mc_cursor {
    const uint8_t *pos;
    const uint8_t *end;
} mc_cursor_t;

static inline size_t mc__cur_left(const mc_cursor_t *c) {
    return (size_t)(c->end - c->pos);
}
int mc__cur_u8(mc_cursor_t *c, uint8_t *v);
int mc__cur_u16(mc_cursor_t *c, uint16_t *v);
int mc__cur_u32(mc_cursor_t *c, uint32_t *v);
int mc__cur_u64(mc_cursor_t *c, uint64_t *v);
int mc__cur_i32(mc_cursor_t *c, int32_t *v);
int mc__cur_i64(mc_cursor_t *c, int64_t *v);
/* Length-prefixed (u32) byte string, borrowed from the input: *p points into the buffer. Fails
 * if the length exceeds max or the bytes left. */
int mc__cur_bytes(mc_cursor_t *c, uint32_t max, const uint8_t **p, uint32_t *len);
/* A count (u32) of items each at least min_item_size bytes: fails if count > max or
 * count * min_item_size > bytes left, so a peer cannot make us allocate for items it did not send.
 */
int mc__cur_count(mc_cursor_t *c, uint32_t max, size_t min_item_size, uint32_t *count);

/* --- body encoding: a growable buffer. Appenders return 0 or MC_ERR_MEMORY and are sticky:
 * after one failure all later appends fail and buf.failed is set. --- */
typedef struct mc_buf {
    uint8_t *data;
    size_t len;
    size_t cap;
    int failed;
} mc_buf_t;

void mc__buf_init(mc_buf_t *b);
void mc__buf_free(mc_buf_t *b);
void mc__buf_reset(mc_buf_t *b); /* len = 0, keeps memory */
int mc__buf_reserve(mc_buf_t *b, size_t extra);
int mc__buf_put(mc_buf_t *b, const void *p, size_t n);
int mc__buf_u8(mc_buf_t *b, uint8_t v);
int mc__buf_u16(mc_buf_t *b, uint16_t v);
int mc__buf_u32(mc_buf_t *b, uint32_t v);
int mc__buf_u64(mc_buf_t *b, uint64_t v);
int mc__buf_i32(mc_buf_t *b, int32_t v);
int mc__buf_i64(mc_buf_t *b, int64_t v);
int mc__buf_bytes(mc_buf_t *b, const void *p, uint32_t n); /* u32 length + bytes */
int mc__buf_str(mc_buf_t *b, const char *s);               /* as bytes, without the NUL */
/* Starts a frame: appends a header whose body_len is patched by mc__buf_frame_end. */
int mc__buf_frame_begin(mc_buf_t *b, uint8_t type, uint16_t flags, uint64_t request_id,
                        size_t *frame_start);
void mc__buf_frame_end(mc_buf_t *b, size_t frame_start);
#endif
