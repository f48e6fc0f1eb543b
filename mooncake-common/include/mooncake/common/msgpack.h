/* MessagePack, the body encoding of KV events (the master's publisher, vLLM's and SGLang's
 * engines, the conductor). The encoder appends to an mc_buf_t (its failed flag records an
 * allocation failure, checked once at the end). The decoder is a pull parser over a cursor: each
 * call reads one item's head, so a caller walks arrays and maps itself and nothing is allocated
 * from a count the peer sent; strings and binaries point into the input. No I/O, fuzzed
 * (fuzz/msgpack_fuzz.c). */
#ifndef MC_COMMON_MSGPACK_H
#define MC_COMMON_MSGPACK_H
#include <stddef.h>
#include <stdint.h>

#include "mooncake/common/frame.h"

/* --- encoder: msgpack's smallest form for each value, as msgpack-c and Python's msgpack pick */
void mc__mp_nil(mc_buf_t *b);
void mc__mp_bool(mc_buf_t *b, int v);
void mc__mp_uint(mc_buf_t *b, uint64_t v);
void mc__mp_int(mc_buf_t *b, int64_t v); /* non-negative values encode as unsigned */
void mc__mp_double(mc_buf_t *b, double v);
void mc__mp_str(mc_buf_t *b, const char *s, size_t n);
void mc__mp_cstr(mc_buf_t *b, const char *s); /* NULL: nil */
void mc__mp_bin(mc_buf_t *b, const void *p, size_t n);
void mc__mp_array(mc_buf_t *b, uint32_t n);
void mc__mp_map(mc_buf_t *b, uint32_t n);

/* --- decoder */
typedef enum mc_mp_type {
    MC_MP_NIL,
    MC_MP_BOOL,
    MC_MP_UINT, /* u */
    MC_MP_INT,  /* i: negative values only */
    MC_MP_FLOAT,
    MC_MP_STR,   /* p, n */
    MC_MP_BIN,   /* p, n */
    MC_MP_ARRAY, /* n items follow */
    MC_MP_MAP,   /* n key/value pairs follow */
    MC_MP_EXT,   /* ext_type, p, n */
} mc_mp_type_t;

typedef struct mc_mp_item {
    mc_mp_type_t type;
    int8_t ext_type;
    uint32_t n;
    const uint8_t *p;
    uint64_t u;
    int64_t i;
    double f;
} mc_mp_item_t;

/* Reads one item's head. Returns 0, or -1 when the input is short or holds a reserved byte (0xc1),
 * leaving the cursor where it was. A container's count is at most the bytes left (every item
 * takes one byte at least), so a count never promises more than the input holds. */
int mc__mp_next(mc_cursor_t *c, mc_mp_item_t *it);
/* Skips one whole value holding at most max_depth levels of containers. 0 or -1. */
int mc__mp_skip(mc_cursor_t *c, int max_depth);
/* Reads an integer item (either sign) into *v, refusing values outside int64. 0 or -1. */
int mc__mp_read_i64(mc_cursor_t *c, int64_t *v);
/* Reads an unsigned integer (or a non-negative int). 0 or -1. */
int mc__mp_read_u64(mc_cursor_t *c, uint64_t *v);
/* Reads a str item (or bin) as a pointer and length. 0 or -1. */
int mc__mp_read_str(mc_cursor_t *c, const uint8_t **p, uint32_t *n);
/* Whether a str item equals the NUL-terminated s. */
int mc__mp_str_is(const mc_mp_item_t *it, const char *s);

#endif
