/* The node control channel's codec (see node_proto.h): cursor and end only; a request is decoded
 * twice, once to size its arena from the bytes that arrived and once to fill it. */
#include <stdio.h>
#include <string.h>

#include "mooncake/common/alloc.h"
#include "mooncake/error.h"
#include "proto/node_proto.h"

static const char *const mc__np_names[MC_NP_TYPE_MAX_] = {
    "unknown", "hello",  "map",  "unmap",      "put",          "upsert", "get",
    "exist",   "remove", "size", "remove_all", "remove_regex", "health"};

const char *mc__np_type_name(int type) {
    return type > 0 && type < MC_NP_TYPE_MAX_ ? mc__np_names[type] : mc__np_names[0];
}

int mc__np_socket_path(uint16_t port, char *out, size_t cap) {
    int n = snprintf(out, cap, "@mooncake_client_%u.sock", (unsigned)port);
    return n > 0 && (size_t)n < cap ? 0 : MC_ERR_INVALID_PARAMS;
}

/* A bump allocator; with base == NULL it only counts (the sizing pass). */
typedef struct mc__arena {
    uint8_t *base;
    size_t used;
    size_t cap;
} mc__arena_t;

static void *mc__take(mc__arena_t *a, size_t n) {
    size_t at = (a->used + 7u) & ~(size_t)7u;
    a->used = at + n;
    if (!a->base || a->used > a->cap)
        return NULL;
    return a->base + at;
}

typedef struct mc__dec {
    mc_cursor_t c;
    mc__arena_t a;
    char *err;
    size_t errcap;
} mc__dec_t;

static int mc__bad(mc__dec_t *d, const char *what) {
    snprintf(d->err, d->errcap, "%s", what);
    return MC_ERR_INVALID_PARAMS;
}

/* A key or other string, copied NUL-terminated into the arena. */
static int mc__dec_str(mc__dec_t *d, uint32_t max, int allow_empty, const char **out,
                       const char *what) {
    const uint8_t *p = NULL;
    uint32_t n = 0;
    char *s;
    if (mc__cur_bytes(&d->c, max, &p, &n) != 0) {
        snprintf(d->err, d->errcap, "%s: short or longer than %u bytes", what, max);
        return MC_ERR_INVALID_PARAMS;
    }
    if ((!allow_empty && n == 0) || memchr(p, 0, n)) {
        snprintf(d->err, d->errcap, "%s: empty or with a NUL byte", what);
        return MC_ERR_INVALID_PARAMS;
    }
    s = mc__take(&d->a, (size_t)n + 1);
    if (s) {
        memcpy(s, p, n);
        s[n] = '\0';
    }
    *out = s;
    return 0;
}

static int mc__dec_config(mc__dec_t *d, mc__np_request_t *r) {
    uint32_t replicas = 0, npref = 0;
    uint8_t soft = 0, hard = 0;
    int64_t ttl = 0;
    if (mc__cur_u32(&d->c, &replicas) || mc__cur_u8(&d->c, &soft) || mc__cur_u8(&d->c, &hard) ||
        mc__cur_i64(&d->c, &ttl))
        return mc__bad(d, "replicate config: short");
    if (replicas > 64 || soft > MC_SOFT_PIN_DISABLE || hard > 1)
        return mc__bad(d, "replicate config: replica_num over 64 or a bad pin value");
    if (mc__cur_count(&d->c, MC_NP_MAX_PREFERRED, 4, &npref) != 0)
        return mc__bad(d, "replicate config: more than 8 preferred segments");
    mc_replicate_config_init(&r->rc);
    r->rc.replica_num = (int)replicas;
    r->rc.with_soft_pin = soft;
    r->rc.with_hard_pin = hard;
    r->rc.soft_pin_ttl_ms = ttl;
    for (uint32_t i = 0; i < npref; i++) {
        int rc = mc__dec_str(d, MC_STORE_STR_MAX - 1, 0, &r->pref[i], "preferred segment");
        if (rc != 0)
            return rc;
    }
    r->rc.preferred_segments = npref ? r->pref : NULL;
    r->rc.preferred_segment_count = npref;
    return 0;
}

static int mc__dec_items(mc__dec_t *d, mc__np_request_t *r) {
    uint32_t n = 0;
    /* an item is at least a 1-byte key (5) and a part count (4) */
    if (mc__cur_count(&d->c, MC_NP_MAX_ITEMS, 9, &n) != 0)
        return mc__bad(d, "item count: over the limit or more than the bytes sent");
    r->n = n;
    r->items = mc__take(&d->a, sizeof(*r->items) * n);
    for (uint32_t i = 0; i < n; i++) {
        const char *key = NULL;
        uint32_t np = 0;
        mc__np_part_t *parts;
        int rc = mc__dec_str(d, MC_STORE_MAX_KEY_LEN, 0, &key, "key");
        if (rc != 0)
            return rc;
        if (mc__cur_count(&d->c, MC_NP_MAX_PARTS, 20, &np) != 0)
            return mc__bad(d, "part count: over the limit or more than the bytes sent");
        parts = mc__take(&d->a, sizeof(*parts) * np);
        for (uint32_t k = 0; k < np; k++) {
            mc__np_part_t p;
            if (mc__cur_u32(&d->c, &p.handle) || mc__cur_u64(&d->c, &p.off) ||
                mc__cur_u64(&d->c, &p.len))
                return mc__bad(d, "part: short");
            if (parts)
                parts[k] = p;
        }
        if (r->items) {
            r->items[i].key = key;
            r->items[i].parts = parts;
            r->items[i].nparts = np;
        }
    }
    return 0;
}

static int mc__dec_keys(mc__dec_t *d, mc__np_request_t *r) {
    uint32_t n = 0;
    if (mc__cur_count(&d->c, MC_NP_MAX_ITEMS, 5, &n) != 0)
        return mc__bad(d, "key count: over the limit or more than the bytes sent");
    r->n = n;
    r->keys = mc__take(&d->a, sizeof(*r->keys) * n);
    for (uint32_t i = 0; i < n; i++) {
        const char *key = NULL;
        int rc = mc__dec_str(d, MC_STORE_MAX_KEY_LEN, 0, &key, "key");
        if (rc != 0)
            return rc;
        if (r->keys)
            r->keys[i] = key;
    }
    return 0;
}

static int mc__dec_body(mc__dec_t *d, mc__np_request_t *r) {
    int rc = 0;
    switch (r->type) {
    case MC_NP_HELLO:
        rc = mc__cur_u32(&d->c, &r->pid) ? mc__bad(d, "hello: short") : 0;
        break;
    case MC_NP_MAP:
        rc = mc__cur_u64(&d->c, &r->map_len) ? mc__bad(d, "map: short") : 0;
        break;
    case MC_NP_UNMAP:
        rc = mc__cur_u32(&d->c, &r->handle) ? mc__bad(d, "unmap: short") : 0;
        break;
    case MC_NP_PUT:
    case MC_NP_UPSERT:
        rc = mc__dec_config(d, r);
        if (rc == 0)
            rc = mc__dec_items(d, r);
        break;
    case MC_NP_GET:
        rc = mc__dec_items(d, r);
        break;
    case MC_NP_EXIST:
        rc = mc__dec_keys(d, r);
        break;
    case MC_NP_REMOVE:
        rc = mc__cur_u8(&d->c, &r->force) ? mc__bad(d, "remove: short") : mc__dec_keys(d, r);
        break;
    case MC_NP_SIZE:
        rc = mc__dec_str(d, MC_STORE_MAX_KEY_LEN, 0, &r->text, "key");
        break;
    case MC_NP_REMOVE_ALL:
        rc = mc__cur_u8(&d->c, &r->force) ? mc__bad(d, "remove_all: short") : 0;
        break;
    case MC_NP_REMOVE_REGEX:
        rc = mc__cur_u8(&d->c, &r->force)
                 ? mc__bad(d, "remove_regex: short")
                 : mc__dec_str(d, MC_STORE_MAX_KEY_LEN, 0, &r->text, "regex");
        break;
    case MC_NP_HEALTH:
        break;
    default:
        snprintf(d->err, d->errcap, "unknown request type %u", (unsigned)r->type);
        return MC_ERR_INVALID_PARAMS;
    }
    if (rc == 0 && mc__cur_left(&d->c) != 0)
        rc = mc__bad(d, "trailing bytes after the request");
    if (rc == 0 && r->force > 1)
        rc = mc__bad(d, "force must be 0 or 1");
    return rc;
}

int mc__np_decode_request(uint8_t type, const uint8_t *body, size_t len, mc__np_request_t *req,
                          char *err, size_t errcap) {
    mc__dec_t d;
    int rc;
    memset(req, 0, sizeof(*req));
    if (err && errcap)
        err[0] = '\0';
    req->type = type;
    d.c.pos = body;
    d.c.end = body ? body + len : body; /* NULL + 0 is undefined in C */
    d.a.base = NULL;
    d.a.used = 0;
    d.a.cap = 0;
    d.err = err;
    d.errcap = err ? errcap : 0;
    rc = mc__dec_body(&d, req); /* sizing pass: validates everything */
    if (rc != 0)
        return rc;
    {
        size_t need = d.a.used ? d.a.used : 1;
        memset(req, 0, sizeof(*req));
        req->type = type;
        req->arena = mc__calloc(1, need);
        if (!req->arena) {
            snprintf(err, errcap, "out of memory");
            return MC_ERR_INTERNAL_ERROR;
        }
        d.c.pos = body;
        d.a.base = req->arena;
        d.a.used = 0;
        d.a.cap = need;
    }
    return mc__dec_body(&d, req);
}

void mc__np_request_free(mc__np_request_t *req) {
    if (!req)
        return;
    mc__free(req->arena);
    req->arena = NULL;
}

/* ---- encoders -------------------------------------------------------------------------------- */

static int mc__enc_done(mc_buf_t *b, size_t start) {
    if (b->failed)
        return MC_ERR_INTERNAL_ERROR;
    mc__buf_frame_end(b, start);
    return 0;
}

int mc__np_encode_simple(mc_buf_t *b, uint8_t type, uint64_t id, const mc__np_request_t *req) {
    size_t start = 0;
    mc__buf_frame_begin(b, type, 0, id, &start);
    switch (type) {
    case MC_NP_HELLO:
        mc__buf_u32(b, req->pid);
        break;
    case MC_NP_MAP:
        mc__buf_u64(b, req->map_len);
        break;
    case MC_NP_UNMAP:
        mc__buf_u32(b, req->handle);
        break;
    case MC_NP_SIZE:
        mc__buf_str(b, req->text ? req->text : "");
        break;
    case MC_NP_REMOVE_ALL:
        mc__buf_u8(b, req->force);
        break;
    case MC_NP_REMOVE_REGEX:
        mc__buf_u8(b, req->force);
        mc__buf_str(b, req->text ? req->text : "");
        break;
    default: /* HEALTH and anything a test wants empty */
        break;
    }
    return mc__enc_done(b, start);
}

int mc__np_encode_items(mc_buf_t *b, uint8_t type, uint64_t id, const mc_replicate_config_t *rc,
                        const mc__np_item_t *items, uint32_t n) {
    size_t start = 0;
    mc__buf_frame_begin(b, type, 0, id, &start);
    if (type == MC_NP_PUT || type == MC_NP_UPSERT) {
        mc_replicate_config_t def;
        size_t np;
        if (!rc) {
            mc_replicate_config_init(&def);
            rc = &def;
        }
        np = rc->preferred_segments ? rc->preferred_segment_count : 0;
        if (np > MC_NP_MAX_PREFERRED)
            np = MC_NP_MAX_PREFERRED;
        mc__buf_u32(b, rc->replica_num > 0 ? (uint32_t)rc->replica_num : 1u);
        mc__buf_u8(b, (uint8_t)rc->with_soft_pin);
        mc__buf_u8(b, rc->with_hard_pin ? 1 : 0);
        mc__buf_i64(b, rc->soft_pin_ttl_ms);
        mc__buf_u32(b, (uint32_t)np);
        for (size_t i = 0; i < np; i++)
            mc__buf_str(b, rc->preferred_segments[i] ? rc->preferred_segments[i] : "");
    }
    mc__buf_u32(b, n);
    for (uint32_t i = 0; i < n; i++) {
        mc__buf_str(b, items[i].key ? items[i].key : "");
        mc__buf_u32(b, items[i].nparts);
        for (uint32_t k = 0; k < items[i].nparts; k++) {
            mc__buf_u32(b, items[i].parts[k].handle);
            mc__buf_u64(b, items[i].parts[k].off);
            mc__buf_u64(b, items[i].parts[k].len);
        }
    }
    return mc__enc_done(b, start);
}

int mc__np_encode_keys(mc_buf_t *b, uint8_t type, uint64_t id, uint8_t force,
                       const char *const *keys, uint32_t n) {
    size_t start = 0;
    mc__buf_frame_begin(b, type, 0, id, &start);
    if (type == MC_NP_REMOVE)
        mc__buf_u8(b, force);
    mc__buf_u32(b, n);
    for (uint32_t i = 0; i < n; i++)
        mc__buf_str(b, keys[i] ? keys[i] : "");
    return mc__enc_done(b, start);
}

int mc__np_encode_reply(mc_buf_t *b, uint8_t type, uint64_t id, int64_t rc, const int64_t *results,
                        uint32_t n, const char *text) {
    size_t start = 0;
    mc__buf_frame_begin(b, type, MC_FRAME_F_REPLY, id, &start);
    mc__buf_i64(b, rc);
    mc__buf_u32(b, n);
    for (uint32_t i = 0; i < n; i++)
        mc__buf_i64(b, results[i]);
    mc__buf_str(b, text ? text : "");
    return mc__enc_done(b, start);
}

int mc__np_encode_error(mc_buf_t *b, uint8_t type, uint64_t id, int32_t code, const char *msg) {
    size_t start = 0;
    mc__buf_frame_begin(b, type, MC_FRAME_F_REPLY | MC_FRAME_F_ERROR, id, &start);
    mc__buf_i32(b, code);
    mc__buf_str(b, msg ? msg : "");
    return mc__enc_done(b, start);
}

static void mc__copy_text(char *dst, size_t cap, const uint8_t *p, uint32_t n) {
    size_t k = n < cap - 1 ? n : cap - 1;
    memcpy(dst, p, k);
    dst[k] = '\0';
}

int mc__np_decode_reply(uint16_t flags, const uint8_t *body, size_t len, mc__np_reply_t *reply) {
    mc_cursor_t c = {body, body + (body ? len : 0)};
    const uint8_t *p = NULL;
    uint32_t n = 0;
    memset(reply, 0, sizeof(*reply));
    if (flags & MC_FRAME_F_ERROR) {
        int32_t code = 0;
        if (mc__cur_i32(&c, &code) || mc__cur_bytes(&c, MC_NP_MAX_BODY, &p, &n))
            return MC_ERR_INVALID_PARAMS;
        reply->rc = code < 0 ? code : MC_ERR_INTERNAL_ERROR;
        mc__copy_text(reply->text, sizeof(reply->text), p, n);
        return 0;
    }
    if (mc__cur_i64(&c, &reply->rc) || mc__cur_count(&c, MC_NP_MAX_ITEMS, 8, &reply->n))
        return MC_ERR_INVALID_PARAMS;
    if (reply->n) {
        reply->results = mc__calloc(reply->n, sizeof(*reply->results));
        if (!reply->results) {
            reply->n = 0;
            return MC_ERR_INTERNAL_ERROR;
        }
    }
    for (uint32_t i = 0; i < reply->n; i++)
        if (mc__cur_i64(&c, &reply->results[i]))
            goto bad;
    if (mc__cur_bytes(&c, MC_NP_MAX_BODY, &p, &n) || mc__cur_left(&c) != 0)
        goto bad;
    mc__copy_text(reply->text, sizeof(reply->text), p, n);
    return 0;
bad:
    mc__np_reply_free(reply);
    return MC_ERR_INVALID_PARAMS;
}

void mc__np_reply_free(mc__np_reply_t *reply) {
    if (!reply)
        return;
    mc__free(reply->results);
    reply->results = NULL;
    reply->n = 0;
}
