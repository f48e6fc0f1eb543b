/* The storage node's control channel: how a dummy client (mc_store_setup_dummy) asks its local
 * mooncake_client daemon to run store calls for it. Codec only, no I/O (fuzzed by
 * fuzz/node_proto_fuzz.c).
 *
 * A unix stream socket, "@mooncake_client_<port>.sock" in the abstract namespace; every message is
 * one frame of mooncake/common/frame.h. Object bytes never travel on it: they sit in shared memory
 * (memfd regions) that the dummy hands over once with MAP (the descriptor passed with SCM_RIGHTS
 * on the frame's first byte) and then names by handle, offset and length. The daemon maps each
 * region, registers it with its store, and moves bytes straight from and to it.
 *
 * Request bodies, by type:
 *
 *   HELLO          u32 pid
 *   MAP            u64 len (the passed memfd's size to map)
 *   UNMAP          u32 handle
 *   PUT / UPSERT   config, u32 n, n x item
 *   GET            u32 n, n x item (the object is scattered into the parts in order)
 *   EXIST          u32 n, n x str key
 *   REMOVE         u8 force, u32 n, n x str key
 *   SIZE           str key
 *   REMOVE_ALL     u8 force
 *   REMOVE_REGEX   u8 force, str regex
 *   HEALTH         (empty)
 *   item:          str key, u32 nparts, nparts x (u32 handle, u64 off, u64 len)
 *   config:        u32 replica_num, u8 soft_pin (an MC_SOFT_PIN_*), u8 hard_pin,
 *                  i64 soft_pin_ttl_ms, u32 n_preferred, n_preferred x str segment
 *
 * Every reply (MC_FRAME_F_REPLY, same request id) has one body: i64 rc, u32 n, n x i64 result,
 * str text. rc is the call's code or value (a size, a count, HELLO's 0, MAP's handle); results are
 * per item or per key; text is HELLO's segment name, else "". A request the daemon cannot run at
 * all (malformed, unknown type, a handle it never gave out, an oversized frame) is answered with
 * MC_FRAME_F_ERROR and (i32 code, str message), the message saying what was wrong; the
 * connection stays up unless the framing itself was lost (bad magic or version, a body over
 * MC_NP_MAX_BODY), which is answered and then closed. */
#ifndef MC_STORE_PROTO_NODE_PROTO_H
#define MC_STORE_PROTO_NODE_PROTO_H
#include <stddef.h>
#include <stdint.h>

#include "mooncake/common/frame.h"
#include "mooncake/store.h"

#define MC_NP_MAX_BODY (16u << 20) /* one request or reply body */
#define MC_NP_MAX_ITEMS 65536u     /* keys or items in one request */
#define MC_NP_MAX_PARTS 1024u      /* parts of one item */
#define MC_NP_MAX_PREFERRED 8u

enum {
    MC_NP_HELLO = 1,
    MC_NP_MAP = 2,
    MC_NP_UNMAP = 3,
    MC_NP_PUT = 4,
    MC_NP_UPSERT = 5,
    MC_NP_GET = 6,
    MC_NP_EXIST = 7,
    MC_NP_REMOVE = 8,
    MC_NP_SIZE = 9,
    MC_NP_REMOVE_ALL = 10,
    MC_NP_REMOVE_REGEX = 11,
    MC_NP_HEALTH = 12,
    MC_NP_TYPE_MAX_
};

/* The socket a daemon serving --port listens on. */
int mc__np_socket_path(uint16_t port, char *out, size_t cap);
/* The name of a request type for logs and metrics ("put", ...; "unknown" otherwise). */
const char *mc__np_type_name(int type);

typedef struct mc__np_part {
    uint32_t handle;
    uint64_t off;
    uint64_t len;
} mc__np_part_t;

typedef struct mc__np_item {
    const char *key; /* NUL-terminated, in the request's arena */
    mc__np_part_t *parts;
    uint32_t nparts;
} mc__np_item_t;

/* A decoded request. Strings and arrays live in one allocation (arena) sized from the bytes that
 * actually arrived, never from a count alone. */
typedef struct mc__np_request {
    uint8_t type;
    uint32_t pid;             /* HELLO */
    uint64_t map_len;         /* MAP */
    uint32_t handle;          /* UNMAP */
    uint8_t force;            /* REMOVE, REMOVE_ALL, REMOVE_REGEX */
    const char *text;         /* SIZE's key, REMOVE_REGEX's regex */
    mc_replicate_config_t rc; /* PUT, UPSERT; preferred_segments point into arena */
    const char *pref[MC_NP_MAX_PREFERRED];
    mc__np_item_t *items; /* PUT, UPSERT, GET */
    const char **keys;    /* EXIST, REMOVE */
    uint32_t n;           /* items or keys */
    void *arena;
} mc__np_request_t;

/* Decodes the body of a request of the given type. Returns 0, or MC_ERR_INVALID_PARAMS with a
 * reason in err (unknown type, short or trailing bytes, a count over its limit, an empty or
 * over-long key, a key with a NUL in it), or MC_ERR_INTERNAL_ERROR when out of memory. The
 * request owns its arena either way: release it with mc__np_request_free. */
int mc__np_decode_request(uint8_t type, const uint8_t *body, size_t len, mc__np_request_t *req,
                          char *err, size_t errcap);
void mc__np_request_free(mc__np_request_t *req);

/* Encoders append one whole frame (header and body) to b; 0 or MC_ERR_INTERNAL_ERROR. */
int mc__np_encode_simple(mc_buf_t *b, uint8_t type, uint64_t id, const mc__np_request_t *req);
int mc__np_encode_items(mc_buf_t *b, uint8_t type, uint64_t id, const mc_replicate_config_t *rc,
                        const mc__np_item_t *items, uint32_t n);
int mc__np_encode_keys(mc_buf_t *b, uint8_t type, uint64_t id, uint8_t force,
                       const char *const *keys, uint32_t n);

/* A reply. */
typedef struct mc__np_reply {
    int64_t rc;
    uint32_t n;
    int64_t *results; /* mc__malloc'ed when n > 0 */
    char text[MC_STORE_STR_MAX];
} mc__np_reply_t;
int mc__np_encode_reply(mc_buf_t *b, uint8_t type, uint64_t id, int64_t rc, const int64_t *results,
                        uint32_t n, const char *text);
int mc__np_encode_error(mc_buf_t *b, uint8_t type, uint64_t id, int32_t code, const char *msg);
/* Decodes a reply body (flags from its header). A MC_FRAME_F_ERROR reply gives its code in
 * reply->rc and its message in reply->text, and returns 0 too. Returns MC_ERR_INVALID_PARAMS on
 * a malformed body, MC_ERR_INTERNAL_ERROR when out of memory. */
int mc__np_decode_reply(uint16_t flags, const uint8_t *body, size_t len, mc__np_reply_t *reply);
void mc__np_reply_free(mc__np_reply_t *reply);
#endif
