/* KV-event batch decoder (kv_event_decode.h): every layout read with the msgpack pull parser,
 * counts checked against the bytes left, strings pointing into the payload. */
#include "kv_event_decode.h"

#include <string.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/msgpack.h"
#include "mooncake/error.h"

#define MAX_DEPTH 16 /* nesting skipped inside an event (extra_keys, metadata) */

int mc__kv_medium(const uint8_t *p, uint32_t len) {
    static const struct {
        const char *name;
        int medium;
    } names[] = {{"GPU", MC_KV_MEDIUM_GPU},        {"gpu", MC_KV_MEDIUM_GPU},
                 {"CPU", MC_KV_MEDIUM_CPU},        {"cpu", MC_KV_MEDIUM_CPU},
                 {"CPU_PINNED", MC_KV_MEDIUM_CPU}, {"DISK", MC_KV_MEDIUM_DISK},
                 {"disk", MC_KV_MEDIUM_DISK},      {"EXTERNAL", MC_KV_MEDIUM_CPU}};
    for (size_t i = 0; p && i < sizeof(names) / sizeof(names[0]); i++)
        if (strlen(names[i].name) == len && memcmp(names[i].name, p, len) == 0)
            return names[i].medium;
    return MC_KV_MEDIUM_UNKNOWN;
}

static int read_hash(mc_cursor_t *c, uint64_t *h) {
    mc_mp_item_t it;
    if (mc__mp_next(c, &it) != 0)
        return -1;
    if (it.type == MC_MP_UINT) {
        *h = it.u;
        return 0;
    }
    if (it.type == MC_MP_INT) {
        *h = (uint64_t)it.i;
        return 0;
    }
    if ((it.type == MC_MP_BIN || it.type == MC_MP_STR) && it.n >= 8) {
        uint64_t v = 0;
        for (uint32_t i = it.n - 8; i < it.n; i++)
            v = (v << 8) | it.p[i];
        *h = v;
        return 0;
    }
    return -1;
}

static int read_hashes(mc_cursor_t *c, uint64_t *buf, uint32_t *n) {
    mc_mp_item_t it;
    if (mc__mp_next(c, &it) != 0 || it.type != MC_MP_ARRAY || it.n > MC_KV_MAX_HASHES)
        return -1;
    for (uint32_t i = 0; i < it.n; i++)
        if (read_hash(c, &buf[i]) != 0)
            return -1;
    *n = it.n;
    return 0;
}

/* nil, or a hash */
static int read_parent(mc_cursor_t *c, mc_kv_event_t *ev) {
    mc_mp_item_t it;
    mc_cursor_t peek = *c;
    if (mc__mp_next(&peek, &it) == 0 && it.type == MC_MP_NIL) {
        *c = peek;
        ev->has_parent = 0;
        return 0;
    }
    ev->has_parent = 1;
    return read_hash(c, &ev->parent);
}

/* nil or a string */
static int read_str(mc_cursor_t *c, mc_kv_str_t *s) {
    mc_mp_item_t it;
    if (mc__mp_next(c, &it) != 0)
        return -1;
    if (it.type == MC_MP_NIL) {
        s->p = NULL;
        s->len = 0;
        return 0;
    }
    if (it.type != MC_MP_STR)
        return -1;
    s->p = it.p;
    s->len = it.n;
    return 0;
}

/* nil (-1) or a non-negative integer */
static int read_opt_int(mc_cursor_t *c, int64_t *v) {
    mc_mp_item_t it;
    if (mc__mp_next(c, &it) != 0)
        return -1;
    if (it.type == MC_MP_NIL) {
        *v = -1;
        return 0;
    }
    if (it.type != MC_MP_UINT || it.u > INT64_MAX)
        return -1;
    *v = (int64_t)it.u;
    return 0;
}

static int read_tokens(mc_cursor_t *c, uint32_t *n) {
    mc_mp_item_t it;
    const uint8_t *at = c->pos;
    if (mc__mp_next(c, &it) != 0)
        return -1;
    if (it.type == MC_MP_NIL) {
        *n = 0;
        return 0;
    }
    c->pos = at;
    if (it.type != MC_MP_ARRAY || mc__mp_skip(c, 1) != 0)
        return -1;
    *n = it.n;
    return 0;
}

static int read_medium(mc_cursor_t *c, mc_kv_event_t *ev) {
    mc_kv_str_t s;
    if (read_str(c, &s) != 0)
        return -1;
    ev->medium = mc__kv_medium(s.p, s.len);
    return 0;
}

static int tag_kind(const mc_mp_item_t *t) {
    if (mc__mp_str_is(t, "BlockStored") || mc__mp_str_is(t, "stored"))
        return MC_KV_EV_STORED;
    if (mc__mp_str_is(t, "BlockRemoved") || mc__mp_str_is(t, "removed"))
        return MC_KV_EV_REMOVED;
    if (mc__mp_str_is(t, "AllBlocksCleared") || mc__mp_str_is(t, "cleared"))
        return MC_KV_EV_CLEARED;
    return 0;
}

/* ["BlockStored", hashes, parent, token_ids, block_size, lora_id, medium, lora_name, ...] */
static int event_array(mc_cursor_t *c, uint32_t n, mc_kv_event_t *ev, uint64_t *buf) {
    mc_mp_item_t tag;
    uint32_t k = 1;
    int64_t ignored;
    if (n < 1 || mc__mp_next(c, &tag) != 0 || !(ev->kind = tag_kind(&tag)))
        return -1;
    if (ev->kind == MC_KV_EV_STORED) {
        if (n < 5 || read_hashes(c, buf, &ev->n_hashes) != 0 || read_parent(c, ev) != 0 ||
            read_tokens(c, &ev->n_tokens) != 0 || read_opt_int(c, &ev->block_size) != 0)
            return -1;
        k = 5;
        if (k < n && read_opt_int(c, &ignored) == 0) /* lora_id */
            k++;
        else if (k < n)
            return -1;
        if (k < n && read_medium(c, ev) == 0)
            k++;
        else if (k < n)
            return -1;
        if (k < n && read_str(c, &ev->lora_name) == 0)
            k++;
        else if (k < n)
            return -1;
    } else if (ev->kind == MC_KV_EV_REMOVED) {
        if (n < 2 || read_hashes(c, buf, &ev->n_hashes) != 0)
            return -1;
        k = 2;
        if (k < n && read_medium(c, ev) == 0)
            k++;
        else if (k < n)
            return -1;
    }
    for (; k < n; k++) /* fields added later (extra_keys, group_idx, ...) */
        if (mc__mp_skip(c, MAX_DEPTH) != 0)
            return -1;
    return 0;
}

/* {"type": "BlockStored", ...} (vLLM's map layout) or the master's {"event_type": ...} */
static int event_map(mc_cursor_t *c, uint32_t n, mc_kv_event_t *ev, uint64_t *buf) {
    int have_seq = 0;
    for (uint32_t i = 0; i < n; i++) {
        mc_mp_item_t key, tag;
        uint32_t count;
        int rc = 0;
        if (mc__mp_next(c, &key) != 0 || key.type != MC_MP_STR)
            return -1;
        if (mc__mp_str_is(&key, "type") || mc__mp_str_is(&key, "event_type")) {
            int kind;
            if (mc__mp_next(c, &tag) != 0 || !(kind = tag_kind(&tag)))
                return -1;
            /* the master sends both; they agree */
            if (ev->kind && ev->kind != kind)
                return -1;
            ev->kind = kind;
        } else if (mc__mp_str_is(&key, "seq_hashes")) {
            rc = read_hashes(c, buf, &ev->n_hashes);
            have_seq = 1;
        } else if (mc__mp_str_is(&key, "block_hashes") && !have_seq) {
            rc = read_hashes(c, buf, &ev->n_hashes);
        } else if (mc__mp_str_is(&key, "parent_block_hash") || mc__mp_str_is(&key, "parent_hash")) {
            rc = read_parent(c, ev);
        } else if (mc__mp_str_is(&key, "token_ids")) {
            rc = read_tokens(c, &count);
            ev->n_tokens = count;
        } else if (mc__mp_str_is(&key, "block_size")) {
            rc = read_opt_int(c, &ev->block_size);
        } else if (mc__mp_str_is(&key, "medium")) {
            rc = read_medium(c, ev);
        } else if (mc__mp_str_is(&key, "lora_name")) {
            rc = read_str(c, &ev->lora_name);
        } else if (mc__mp_str_is(&key, "tenant_id")) {
            rc = read_str(c, &ev->tenant_id);
        } else if (mc__mp_str_is(&key, "model_name")) {
            rc = read_str(c, &ev->model_name);
        } else if (mc__mp_str_is(&key, "backend_id")) {
            rc = read_str(c, &ev->backend_id);
        } else if (mc__mp_str_is(&key, "object_key")) {
            rc = read_str(c, &ev->object_key);
        } else {
            rc = mc__mp_skip(c, MAX_DEPTH);
        }
        if (rc != 0)
            return -1;
    }
    return ev->kind ? 0 : -1;
}

/* One event; on a malformed one the cursor is moved past it when it can be (the batch goes on)
 * and -1 returned; -2 when the rest of the batch cannot be found. */
static int one_event(mc_cursor_t *c, uint64_t *buf, mc_kv_event_fn fn, void *arg) {
    mc_cursor_t whole = *c;
    mc_mp_item_t it;
    mc_kv_event_t ev;
    int rc;
    if (mc__mp_skip(&whole, MAX_DEPTH + 2) != 0)
        return -2;
    memset(&ev, 0, sizeof(ev));
    ev.block_size = -1;
    ev.hashes = buf;
    if (mc__mp_next(c, &it) != 0)
        return -2;
    if (it.type == MC_MP_ARRAY)
        rc = event_array(c, it.n, &ev, buf);
    else if (it.type == MC_MP_MAP)
        rc = event_map(c, it.n, &ev, buf);
    else
        rc = -1;
    /* a bad event ends where its value ends, however far its own reading got */
    *c = whole;
    if (rc != 0)
        return -1;
    fn(&ev, arg);
    return 0;
}

static int events(mc_cursor_t *c, uint64_t *buf, mc_kv_event_fn fn, void *arg,
                  mc_kv_batch_t *info) {
    mc_mp_item_t it;
    if (mc__mp_next(c, &it) != 0 || it.type != MC_MP_ARRAY)
        return -1;
    for (uint32_t i = 0; i < it.n; i++) {
        int rc = one_event(c, buf, fn, arg);
        if (rc == -2)
            return -1;
        if (rc == 0)
            info->events++;
        else
            info->malformed++;
    }
    return 0;
}

static int read_ts(mc_cursor_t *c, double *ts) {
    mc_mp_item_t it;
    if (mc__mp_next(c, &it) != 0)
        return -1;
    if (it.type == MC_MP_FLOAT)
        *ts = it.f;
    else if (it.type == MC_MP_UINT)
        *ts = (double)it.u;
    else if (it.type == MC_MP_INT)
        *ts = (double)it.i;
    else
        return -1;
    return 0;
}

int mc__kv_batch_decode(const uint8_t *p, size_t n, mc_kv_event_fn fn, void *arg,
                        mc_kv_batch_t *info) {
    mc_cursor_t c = {p, p + n};
    mc_mp_item_t top;
    uint64_t *buf;
    int rc = MC_ERR_INVALID_ARGUMENT;
    memset(info, 0, sizeof(*info));
    info->dp_rank = -1;
    if (!p || mc__mp_next(&c, &top) != 0 || (top.type != MC_MP_ARRAY && top.type != MC_MP_MAP))
        return MC_ERR_INVALID_ARGUMENT;
    if (!(buf = mc__malloc(MC_KV_MAX_HASHES * sizeof(*buf))))
        return MC_ERR_MEMORY;
    if (top.type == MC_MP_ARRAY) {
        /* [ts, events, dp_rank?, ...] */
        if (top.n < 2 || read_ts(&c, &info->ts) != 0 || events(&c, buf, fn, arg, info) != 0)
            goto out;
        if (top.n >= 3 && read_opt_int(&c, &info->dp_rank) != 0)
            goto out;
    } else {
        /* {"ts", "events", "data_parallel_rank" | "attn_dp_rank"}: events read where they are
         * once the rest is known */
        mc_cursor_t ev_at = {NULL, NULL};
        for (uint32_t i = 0; i < top.n; i++) {
            mc_mp_item_t key;
            if (mc__mp_next(&c, &key) != 0 || key.type != MC_MP_STR)
                goto out;
            if (mc__mp_str_is(&key, "ts")) {
                if (read_ts(&c, &info->ts) != 0)
                    goto out;
            } else if (mc__mp_str_is(&key, "data_parallel_rank") ||
                       mc__mp_str_is(&key, "attn_dp_rank")) {
                if (read_opt_int(&c, &info->dp_rank) != 0)
                    goto out;
            } else {
                if (mc__mp_str_is(&key, "events"))
                    ev_at = c;
                if (mc__mp_skip(&c, MAX_DEPTH + 4) != 0)
                    goto out;
            }
        }
        if (!ev_at.pos || events(&ev_at, buf, fn, arg, info) != 0)
            goto out;
    }
    rc = 0;
out:
    mc__free(buf);
    return rc;
}
