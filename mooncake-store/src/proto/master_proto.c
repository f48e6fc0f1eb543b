/* Master RPC codec. No I/O; see master_proto.h for the body layouts. */
#include "proto/master_proto.h"

#include <string.h>

#include "proto/disk_proto.h"
#include "proto/task_proto.h"

#include "mooncake/common/alloc.h"
#include "mooncake/error.h"

/* Smallest encoded size of one key entry: the u32 length (an empty key is then refused as
 * INVALID_KEY, which tells the peer more than a framing error). */
#define MC_MP_MIN_KEY_ENTRY 4u

/* The map's rows by type value; "" in a reference column is no metric (NULL here). */
#define MC__MP_REF(s) (sizeof(s) > 1 ? (s) : NULL)
static const mc__mp_type_info_t mc__mp_types[MC_MP_TYPE_MAX_] = {
#define MC__MP_ROW(T, name, value, body, op, single, batch)                                        \
    [value] = {#name, (body), MC__MP_REF(single), MC__MP_REF(batch)},
    MC_MP_TYPE_MAP(MC__MP_ROW)
#undef MC__MP_ROW
};

const mc__mp_type_info_t *mc__mp_type_info(uint8_t type) {
    return type < MC_MP_TYPE_MAX_ && mc__mp_types[type].name ? &mc__mp_types[type] : NULL;
}

const char *mc__mp_type_name(uint8_t type) {
    const mc__mp_type_info_t *t = mc__mp_type_info(type);
    return t ? t->name : "unknown";
}

int mc__mp_is_task(uint8_t type) {
    switch (type) {
#define MC__MP_CASE(T, name, value, body, op, single, batch) case MC_MP_##T:
        MC_MP_TASK_MAP(MC__MP_CASE)
#undef MC__MP_CASE
        return 1;
    default:
        return 0;
    }
}

/* Types this build knows (a removed type's number stays unused). */
static int mc__mp_known(uint8_t type) {
    return mc__mp_type_info(type) != NULL;
}

/* 1 when the type's request body has all these MC_MP_B_* parts. */
static int mc__mp_has(uint8_t type, unsigned bits) {
    const mc__mp_type_info_t *t = mc__mp_type_info(type);
    return t && (t->body & bits) == bits;
}

int mc__mp_is_put_start(uint8_t type) {
    return mc__mp_has(type, MC_MP_B_CONFIG);
}

/* --- task bodies (layouts in task_proto.h) --- */

/* The limits a task request must keep, checked by the encoder and after decoding. */
static int mc__mp_task_check(const mc__mp_request_t *r) {
    switch (r->type) {
    case MC_MP_TASK_CREATE:
        if (r->object_key.len == 0 || r->object_key.len > MC_MP_MAX_KEY)
            return MC_ERR_INVALID_KEY;
        if (r->task_type > MC_TASK_MOVE || r->segment_name.len > MC_MP_MAX_SEGMENT_NAME ||
            r->n_targets == 0 || r->n_targets > MC_MP_MAX_REPLICA_NUM)
            return MC_ERR_INVALID_PARAMS;
        for (uint32_t i = 0; i < r->n_targets; i++)
            if (r->targets[i].len == 0 || r->targets[i].len > MC_MP_MAX_SEGMENT_NAME)
                return MC_ERR_INVALID_PARAMS;
        return 0;
    case MC_MP_TASK_FETCH:
        return r->max_tasks >= 1 && r->max_tasks <= MC_TP_MAX_FETCH ? 0 : MC_ERR_INVALID_PARAMS;
    case MC_MP_TASK_REPORT:
        return r->message.len <= MC_TP_MAX_MESSAGE ? 0 : MC_ERR_INVALID_PARAMS;
    default:
        return 0;
    }
}

static void mc__mp_task_encode(mc_buf_t *b, const mc__mp_request_t *r) {
    switch (r->type) {
    case MC_MP_TASK_CREATE:
        mc__buf_u8(b, r->task_type);
        mc__buf_bytes(b, r->object_key.p, r->object_key.len);
        mc__buf_bytes(b, r->segment_name.p, r->segment_name.len);
        mc__buf_u32(b, r->n_targets);
        for (uint32_t i = 0; i < r->n_targets; i++)
            mc__buf_bytes(b, r->targets[i].p, r->targets[i].len);
        break;
    case MC_MP_TASK_QUERY:
        mc__buf_put(b, r->task_id, MC_MP_CLIENT_ID_LEN);
        break;
    case MC_MP_TASK_FETCH:
        mc__buf_u32(b, r->max_tasks);
        break;
    default: /* MC_MP_TASK_REPORT */
        mc__buf_put(b, r->task_id, MC_MP_CLIENT_ID_LEN);
        mc__buf_i32(b, r->task_code);
        mc__buf_bytes(b, r->message.p, r->message.len);
        break;
    }
}

int mc__mp_cur_id(mc_cursor_t *cur, uint8_t id[MC_MP_CLIENT_ID_LEN]) {
    if (mc__cur_left(cur) < MC_MP_CLIENT_ID_LEN)
        return -1;
    memcpy(id, cur->pos, MC_MP_CLIENT_ID_LEN);
    cur->pos += MC_MP_CLIENT_ID_LEN;
    return 0;
}

static int mc__mp_task_decode(mc_cursor_t *cur, mc__mp_request_t *out) {
    int bad = 0;
    switch (out->type) {
    case MC_MP_TASK_CREATE:
        bad = mc__cur_u8(cur, &out->task_type) ||
              mc__cur_bytes(cur, UINT32_MAX, &out->object_key.p, &out->object_key.len) ||
              mc__cur_bytes(cur, MC_MP_MAX_SEGMENT_NAME, &out->segment_name.p,
                            &out->segment_name.len) ||
              mc__cur_count(cur, MC_MP_MAX_REPLICA_NUM, 4, &out->n_targets);
        for (uint32_t i = 0; !bad && i < out->n_targets; i++)
            bad = mc__cur_bytes(cur, MC_MP_MAX_SEGMENT_NAME, &out->targets[i].p,
                                &out->targets[i].len);
        break;
    case MC_MP_TASK_QUERY:
        bad = mc__mp_cur_id(cur, out->task_id);
        break;
    case MC_MP_TASK_FETCH:
        bad = mc__cur_u32(cur, &out->max_tasks);
        break;
    default: /* MC_MP_TASK_REPORT */
        bad = mc__mp_cur_id(cur, out->task_id) || mc__cur_i32(cur, &out->task_code) ||
              mc__cur_bytes(cur, MC_TP_MAX_MESSAGE, &out->message.p, &out->message.len);
        break;
    }
    return bad ? MC_ERR_INVALID_PARAMS : mc__mp_task_check(out);
}

/* --- requests --- */

static void mc__mp_encode_config(mc_buf_t *b, const mc__replicate_config_t *cfg) {
    mc__buf_u32(b, cfg->replica_num);
    mc__buf_u8(b, cfg->flags);
    mc__buf_u64(b, cfg->soft_pin_ttl_ms);
    mc__buf_u32(b, cfg->n_preferred);
    for (uint32_t i = 0; i < cfg->n_preferred; i++)
        mc__buf_bytes(b, cfg->preferred[i].p, cfg->preferred[i].len);
}

int mc__mp_encode_request(mc_buf_t *b, const mc__mp_request_t *r) {
    size_t start = 0;
    size_t body_start = 0;
    int rc = 0;
    if (!mc__mp_known(r->type))
        return MC_ERR_INVALID_PARAMS;
    if (mc__mp_is_task(r->type) && (rc = mc__mp_task_check(r)) != 0)
        return rc;
    if (mc__mp_has(r->type, MC_MP_B_KEYS)) {
        if (r->n_keys > MC_MP_MAX_BATCH || (r->n_keys && !r->keys))
            return MC_ERR_INVALID_PARAMS;
        for (uint32_t i = 0; i < r->n_keys; i++)
            if (r->keys[i].len == 0 || r->keys[i].len > MC_MP_MAX_KEY)
                return MC_ERR_INVALID_KEY;
    }
    if ((r->type == MC_MP_MOUNT_SEGMENT || r->type == MC_MP_UNMOUNT_SEGMENT) &&
        (r->segment_name.len == 0 || r->segment_name.len > MC_MP_MAX_SEGMENT_NAME))
        return MC_ERR_INVALID_PARAMS;
    if (r->type == MC_MP_REPLICA_CLEAR && r->segment_name.len > MC_MP_MAX_SEGMENT_NAME)
        return MC_ERR_INVALID_PARAMS;
    if ((mc__mp_has(r->type, MC_MP_B_CONFIG) || r->type == MC_MP_PUT_RESERVE) &&
        r->config.n_preferred > MC_MP_MAX_PREFERRED)
        return MC_ERR_INVALID_PARAMS;
    if (r->type == MC_MP_PUT_RESERVE && (r->n_slots == 0 || r->n_slots > MC_MP_MAX_SLOTS))
        return MC_ERR_INVALID_PARAMS;
    if (mc__mp_has(r->type, MC_MP_B_KEY_SLOT) && r->n_keys && !r->slots)
        return MC_ERR_INVALID_PARAMS;
    if (mc__mp_has(r->type, MC_MP_B_KEY_CLIENT) && r->n_keys && !r->key_clients)
        return MC_ERR_INVALID_PARAMS;
    if (r->type == MC_MP_DISK_ANNOUNCE && (r->segment_name.len > MC_MP_MAX_SEGMENT_NAME ||
                                           (r->mount_flags & ~MC_DP_ANNOUNCE_FLAGS) != 0))
        return MC_ERR_INVALID_PARAMS;
    if (r->type == MC_MP_DISK_FETCH && (r->max_tasks == 0 || r->max_tasks > MC_DP_MAX_FETCH))
        return MC_ERR_INVALID_PARAMS;

    rc = mc__buf_frame_begin(b, r->type, 0, r->request_id, &start);
    if (rc)
        return rc;
    body_start = b->len;
    mc__buf_put(b, r->client_id, MC_MP_CLIENT_ID_LEN);
    switch (r->type) {
    case MC_MP_MOUNT_SEGMENT:
    case MC_MP_UNMOUNT_SEGMENT:
        mc__buf_bytes(b, r->segment_name.p, r->segment_name.len);
        mc__buf_u64(b, r->base);
        if (r->type == MC_MP_MOUNT_SEGMENT) {
            mc__buf_u64(b, r->size);
            mc__buf_u64(b, r->epoch);
            mc__buf_u8(b, r->mount_flags);
        }
        break;
    case MC_MP_REMOVE_ALL:
        mc__buf_u8(b, r->force ? 1 : 0);
        if (r->pattern.len)
            mc__buf_bytes(b, r->pattern.p, r->pattern.len);
        break;
    case MC_MP_HEARTBEAT:
        mc__buf_u32(b, r->n_mounted);
        break;
    case MC_MP_UNREGISTER_CLIENT:
    case MC_MP_STORAGE_CONFIG:
        break; /* the client id says it all */
    case MC_MP_PUT_RESERVE:
        mc__buf_u32(b, r->n_slots);
        mc__buf_u64(b, r->size);
        mc__mp_encode_config(b, &r->config);
        break;
    case MC_MP_DISK_FETCH:
        mc__buf_u32(b, r->max_tasks);
        break;
    case MC_MP_TASK_CREATE:
    case MC_MP_TASK_QUERY:
    case MC_MP_TASK_FETCH:
    case MC_MP_TASK_REPORT:
        mc__mp_task_encode(b, r);
        break;
    default:
        if (r->type == MC_MP_REMOVE)
            mc__buf_u8(b, r->force ? 1 : 0);
        if (r->type == MC_MP_REPLICA_CLEAR)
            mc__buf_bytes(b, r->segment_name.p, r->segment_name.len);
        if (r->type == MC_MP_DISK_ANNOUNCE) {
            mc__buf_u8(b, r->mount_flags);
            mc__buf_bytes(b, r->segment_name.p, r->segment_name.len);
            mc__buf_u64(b, r->size);
            mc__buf_u64(b, r->base);
        }
        if (r->type == MC_MP_DISK_DONE)
            mc__buf_u8(b, r->force ? 1 : 0);
        mc__buf_u32(b, r->n_keys);
        for (uint32_t i = 0; i < r->n_keys; i++) {
            if (mc__mp_has(r->type, MC_MP_B_KEY_CLIENT))
                mc__buf_put(b, r->key_clients[i], MC_MP_CLIENT_ID_LEN);
            mc__buf_bytes(b, r->keys[i].p, r->keys[i].len);
            if (mc__mp_has(r->type, MC_MP_B_KEY_U64))
                mc__buf_u64(b, r->value_lens ? r->value_lens[i] : 0);
            if (mc__mp_has(r->type, MC_MP_B_KEY_SLOT))
                mc__buf_u64(b, r->slots[i]);
        }
        if (mc__mp_has(r->type, MC_MP_B_CONFIG))
            mc__mp_encode_config(b, &r->config);
        break;
    }
    if (b->failed)
        return MC_ERR_MEMORY;
    if (b->len - body_start > MC_MP_MAX_BODY) {
        b->len = start;
        return MC_ERR_INVALID_PARAMS;
    }
    mc__buf_frame_end(b, start);
    return 0;
}

void mc__mp_request_free(mc__mp_request_t *r) {
    if (!r)
        return;
    mc__free(r->owned_);
    r->owned_ = NULL;
    r->keys = NULL;
    r->value_lens = NULL;
    r->slots = NULL;
    r->key_clients = NULL;
}

static int mc__mp_decode_keys(mc_cursor_t *cur, mc__mp_request_t *out) {
    int put = mc__mp_has(out->type, MC_MP_B_KEY_U64);
    int slot = mc__mp_has(out->type, MC_MP_B_KEY_SLOT);
    size_t id = mc__mp_has(out->type, MC_MP_B_KEY_CLIENT) ? MC_MP_CLIENT_ID_LEN : 0u;
    size_t min_entry = MC_MP_MIN_KEY_ENTRY + (put ? 8u : 0u) + (slot ? 8u : 0u) + id;
    size_t item = sizeof(mc__mp_str_t) + (put ? sizeof(uint64_t) : 0u) + (slot ? 8u : 0u) + id;
    uint8_t *mem = NULL;
    uint32_t n = 0;
    if (mc__cur_count(cur, MC_MP_MAX_BATCH, min_entry, &n))
        return MC_ERR_INVALID_PARAMS;
    out->n_keys = n;
    if (n == 0)
        return 0;
    /* Bounded by the bytes the peer actually sent (mc__cur_count), not by its claim alone. */
    mem = mc__malloc((size_t)n * item);
    if (!mem)
        return MC_ERR_MEMORY;
    out->owned_ = mem;
    out->keys = (mc__mp_str_t *)(void *)mem;
    if (put)
        out->value_lens = (uint64_t *)(void *)(mem + (size_t)n * sizeof(mc__mp_str_t));
    if (slot)
        out->slots = out->value_lens + n;
    /* copied, not borrowed: the ids lie apart in the body; bytes need no alignment, so last */
    if (id)
        out->key_clients = (uint8_t(*)[MC_MP_CLIENT_ID_LEN])(void *)(mem + (size_t)n * (item - id));
    for (uint32_t i = 0; i < n; i++) {
        mc__mp_str_t *k = &out->keys[i];
        if ((id && mc__mp_cur_id(cur, out->key_clients[i])) ||
            mc__cur_bytes(cur, UINT32_MAX, &k->p, &k->len))
            return MC_ERR_INVALID_PARAMS;
        if (k->len == 0 || k->len > MC_MP_MAX_KEY)
            return MC_ERR_INVALID_KEY;
        if (put && mc__cur_u64(cur, &out->value_lens[i]))
            return MC_ERR_INVALID_PARAMS;
        if (slot && mc__cur_u64(cur, &out->slots[i]))
            return MC_ERR_INVALID_PARAMS;
    }
    return 0;
}

static int mc__mp_decode_config(mc_cursor_t *cur, mc__replicate_config_t *cfg) {
    if (mc__cur_u32(cur, &cfg->replica_num) || mc__cur_u8(cur, &cfg->flags) ||
        mc__cur_u64(cur, &cfg->soft_pin_ttl_ms) ||
        mc__cur_count(cur, MC_MP_MAX_PREFERRED, 4, &cfg->n_preferred))
        return MC_ERR_INVALID_PARAMS;
    for (uint32_t i = 0; i < cfg->n_preferred; i++)
        if (mc__cur_bytes(cur, MC_MP_MAX_SEGMENT_NAME, &cfg->preferred[i].p,
                          &cfg->preferred[i].len))
            return MC_ERR_INVALID_PARAMS;
    return 0;
}

int mc__mp_decode_request(const mc_frame_header_t *h, const uint8_t *body, size_t len,
                          mc__mp_request_t *out) {
    mc_cursor_t cur = {body, body ? body + len : body}; /* NULL + 0 is undefined in C */
    int rc = 0;
    memset(out, 0, sizeof(*out));
    out->type = h->type;
    out->request_id = h->request_id;
    if (!mc__mp_known(h->type)) {
        rc = MC_ERR_NOT_IMPLEMENTED;
        goto out;
    }
    if (!body && len) {
        rc = MC_ERR_INVALID_PARAMS;
        goto out;
    }
    if (mc__mp_cur_id(&cur, out->client_id)) {
        rc = MC_ERR_INVALID_PARAMS;
        goto out;
    }
    switch (h->type) {
    case MC_MP_MOUNT_SEGMENT:
    case MC_MP_UNMOUNT_SEGMENT:
        if (mc__cur_bytes(&cur, MC_MP_MAX_SEGMENT_NAME, &out->segment_name.p,
                          &out->segment_name.len) ||
            out->segment_name.len == 0 || mc__cur_u64(&cur, &out->base) ||
            (h->type == MC_MP_MOUNT_SEGMENT &&
             (mc__cur_u64(&cur, &out->size) || mc__cur_u64(&cur, &out->epoch) ||
              mc__cur_u8(&cur, &out->mount_flags) ||
              (out->mount_flags & ~MC_MP_MOUNT_F_CHECK) != 0)))
            rc = MC_ERR_INVALID_PARAMS;
        break;
    case MC_MP_REMOVE_ALL:
        if (mc__cur_u8(&cur, &out->force) ||
            (mc__cur_left(&cur) != 0 &&
             (mc__cur_bytes(&cur, MC_MP_MAX_KEY, &out->pattern.p, &out->pattern.len) ||
              out->pattern.len == 0)))
            rc = MC_ERR_INVALID_PARAMS;
        break;
    case MC_MP_HEARTBEAT:
        /* Optional, so that a client that predates the field still gets an answer. */
        out->n_mounted = MC_MP_MOUNTS_UNKNOWN;
        if (mc__cur_left(&cur) != 0 && mc__cur_u32(&cur, &out->n_mounted))
            rc = MC_ERR_INVALID_PARAMS;
        break;
    case MC_MP_UNREGISTER_CLIENT:
    case MC_MP_STORAGE_CONFIG:
        break; /* trailing bytes are refused below */
    case MC_MP_PUT_RESERVE:
        if (mc__cur_u32(&cur, &out->n_slots) || out->n_slots == 0 ||
            out->n_slots > MC_MP_MAX_SLOTS || mc__cur_u64(&cur, &out->size) ||
            mc__mp_decode_config(&cur, &out->config))
            rc = MC_ERR_INVALID_PARAMS;
        break;
    case MC_MP_DISK_FETCH:
        if (mc__cur_u32(&cur, &out->max_tasks) || out->max_tasks == 0 ||
            out->max_tasks > MC_DP_MAX_FETCH)
            rc = MC_ERR_INVALID_PARAMS;
        break;
    case MC_MP_TASK_CREATE:
    case MC_MP_TASK_QUERY:
    case MC_MP_TASK_FETCH:
    case MC_MP_TASK_REPORT:
        rc = mc__mp_task_decode(&cur, out);
        break;
    default:
        if ((h->type == MC_MP_REMOVE && mc__cur_u8(&cur, &out->force)) ||
            (h->type == MC_MP_REPLICA_CLEAR &&
             mc__cur_bytes(&cur, MC_MP_MAX_SEGMENT_NAME, &out->segment_name.p,
                           &out->segment_name.len)) ||
            (h->type == MC_MP_DISK_ANNOUNCE &&
             (mc__cur_u8(&cur, &out->mount_flags) ||
              (out->mount_flags & ~MC_DP_ANNOUNCE_FLAGS) != 0 ||
              mc__cur_bytes(&cur, MC_MP_MAX_SEGMENT_NAME, &out->segment_name.p,
                            &out->segment_name.len) ||
              mc__cur_u64(&cur, &out->size) || mc__cur_u64(&cur, &out->base))) ||
            (h->type == MC_MP_DISK_DONE && (mc__cur_u8(&cur, &out->force) || out->force > 1))) {
            rc = MC_ERR_INVALID_PARAMS;
            break;
        }
        rc = mc__mp_decode_keys(&cur, out);
        if (rc == 0 && mc__mp_has(h->type, MC_MP_B_CONFIG))
            rc = mc__mp_decode_config(&cur, &out->config);
        break;
    }
    /* Trailing bytes mean the peer and we disagree on the layout; refuse rather than guess. */
    if (rc == 0 && mc__cur_left(&cur) != 0)
        rc = MC_ERR_INVALID_PARAMS;
out:
    if (rc)
        mc__mp_request_free(out);
    return rc;
}

/* --- reply encoders --- */

size_t mc__mp_reply_begin(mc_buf_t *b, uint8_t type, uint16_t flags, uint64_t request_id) {
    size_t start = 0;
    (void)mc__buf_frame_begin(b, type, MC_FRAME_F_REPLY | flags, request_id, &start);
    return start;
}

int mc__mp_reply_end(mc_buf_t *b, size_t frame_start) {
    mc__buf_frame_end(b, frame_start);
    return b->failed ? MC_ERR_MEMORY : 0;
}

int mc__mp_encode_error_reply(mc_buf_t *b, uint8_t type, uint64_t request_id, int32_t code,
                              const char *msg) {
    size_t start = mc__mp_reply_begin(b, type, MC_FRAME_F_ERROR, request_id);
    mc__buf_i32(b, code);
    mc__buf_str(b, msg ? msg : "");
    return mc__mp_reply_end(b, start);
}

int mc__mp_encode_empty_reply(mc_buf_t *b, uint8_t type, uint64_t request_id) {
    return mc__mp_reply_end(b, mc__mp_reply_begin(b, type, 0, request_id));
}

int mc__mp_encode_codes_reply(mc_buf_t *b, uint8_t type, uint64_t request_id, uint32_t n,
                              const int32_t *codes) {
    size_t start = mc__mp_reply_begin(b, type, 0, request_id);
    mc__buf_reserve(b, 4 + (size_t)n * 4);
    mc__buf_u32(b, n);
    for (uint32_t i = 0; i < n; i++)
        mc__buf_i32(b, codes[i]);
    return mc__mp_reply_end(b, start);
}

int mc__mp_list_reply_begin(mc_buf_t *b, uint8_t type, uint64_t request_id, uint32_t n,
                            size_t *frame_start) {
    *frame_start = mc__mp_reply_begin(b, type, 0, request_id);
    return mc__buf_u32(b, n);
}

int mc__mp_replicas_reply_begin(mc_buf_t *b, uint8_t type, uint64_t request_id, uint32_t n,
                                size_t *frame_start) {
    return mc__mp_list_reply_begin(b, type, request_id, n, frame_start);
}

int mc__mp_replicas_reply_item(mc_buf_t *b, int32_t code, uint64_t size, uint64_t lease_ttl_ms,
                               uint32_t n_replicas) {
    mc__buf_i32(b, code);
    mc__buf_u64(b, size);
    mc__buf_u64(b, lease_ttl_ms);
    return mc__buf_u32(b, n_replicas);
}

int mc__mp_replicas_reply_replica(mc_buf_t *b, const char *segment_name, uint32_t name_len,
                                  uint64_t addr, uint64_t size, uint64_t epoch, uint8_t status) {
    mc__buf_bytes(b, segment_name, name_len);
    mc__buf_u64(b, addr);
    mc__buf_u64(b, size);
    mc__buf_u64(b, epoch);
    return mc__buf_u8(b, status);
}

int mc__mp_encode_replicas_reply(mc_buf_t *b, uint8_t type, uint64_t request_id, uint32_t n,
                                 const mc__key_replicas_t *items) {
    size_t start = 0;
    int rc = mc__mp_list_reply_begin(b, type, request_id, n, &start);
    if (rc)
        return rc;
    for (uint32_t i = 0; i < n; i++) {
        const mc__key_replicas_t *it = &items[i];
        uint32_t nr =
            it->n_replicas > MC_MP_MAX_REPLICA_NUM ? MC_MP_MAX_REPLICA_NUM : it->n_replicas;
        mc__mp_replicas_reply_item(b, it->code, it->size, it->lease_ttl_ms, nr);
        for (uint32_t j = 0; j < nr; j++) {
            const mc__replica_desc_t *d = &it->replicas[j];
            mc__mp_replicas_reply_replica(
                b, d->segment_name, (uint32_t)strnlen(d->segment_name, MC_MP_MAX_SEGMENT_NAME),
                d->addr, d->size, d->epoch, d->status);
        }
    }
    return mc__mp_reply_end(b, start);
}

int mc__mp_encode_remove_all_reply(mc_buf_t *b, uint64_t request_id, int64_t removed) {
    size_t start = mc__mp_reply_begin(b, MC_MP_REMOVE_ALL, 0, request_id);
    mc__buf_i64(b, removed);
    return mc__mp_reply_end(b, start);
}

int mc__mp_encode_heartbeat_reply(mc_buf_t *b, uint64_t request_id, uint8_t status,
                                  uint64_t view_version) {
    size_t start = mc__mp_reply_begin(b, MC_MP_HEARTBEAT, 0, request_id);
    mc__buf_u8(b, status);
    mc__buf_u64(b, view_version);
    return mc__mp_reply_end(b, start);
}

/* --- reply decoders --- */

int mc__mp_decode_error(const mc_frame_header_t *h, const uint8_t *body, size_t len, char *err,
                        size_t err_cap) {
    mc_cursor_t cur = {body, body + len};
    int32_t code = 0;
    const uint8_t *msg = NULL;
    uint32_t msg_len = 0;
    if (err && err_cap)
        err[0] = '\0';
    if (!(h->flags & MC_FRAME_F_ERROR))
        return 0;
    if (!body || mc__cur_i32(&cur, &code) || mc__cur_bytes(&cur, UINT32_MAX, &msg, &msg_len))
        return MC_ERR_RPC_FAIL;
    /* A peer claiming success in an error frame is itself broken. */
    if (code >= 0)
        return MC_ERR_RPC_FAIL;
    if (err && err_cap) {
        size_t n = msg_len < err_cap - 1 ? msg_len : err_cap - 1;
        memcpy(err, msg, n);
        err[n] = '\0';
    }
    return code;
}

int mc__mp_reply_check(const mc_frame_header_t *h, const uint8_t *body, size_t len) {
    if (!(h->flags & MC_FRAME_F_REPLY))
        return MC_ERR_RPC_FAIL;
    if (h->flags & MC_FRAME_F_ERROR)
        return mc__mp_decode_error(h, body, len, NULL, 0);
    if (!body && len)
        return MC_ERR_RPC_FAIL;
    return 0;
}

int mc__mp_reply_open(const mc_frame_header_t *h, const uint8_t *body, size_t len,
                      mc_cursor_t *cur) {
    cur->pos = body;
    cur->end = body ? body + len : body; /* NULL + 0 is undefined in C */
    return mc__mp_reply_check(h, body, len);
}

int mc__mp_reply_list(const mc_frame_header_t *h, const uint8_t *body, size_t len, uint32_t limit,
                      size_t min_entry, mc_cursor_t *cur, uint32_t *n) {
    int rc = mc__mp_reply_open(h, body, len, cur);
    if (rc)
        return rc;
    return mc__cur_count(cur, limit, min_entry, n) ? MC_ERR_RPC_FAIL : 0;
}

/* The replies that answer a batch of n keys: a list of exactly n entries. */
static int mc__mp_reply_batch(const mc_frame_header_t *h, const uint8_t *body, size_t len,
                              uint32_t n, size_t min_entry, mc_cursor_t *cur) {
    uint32_t got = 0;
    int rc = mc__mp_reply_list(h, body, len, MC_MP_MAX_BATCH, min_entry, cur, &got);
    return rc ? rc : got == n ? 0 : MC_ERR_RPC_FAIL;
}

int mc__mp_cur_text(mc_cursor_t *cur, uint32_t max, char *out, uint32_t *len) {
    const uint8_t *p = NULL;
    uint32_t n = 0;
    if (mc__cur_bytes(cur, max, &p, &n))
        return -1;
    memcpy(out, p, n);
    out[n] = '\0';
    if (len)
        *len = n;
    return 0;
}

int mc__mp_decode_empty_reply(const mc_frame_header_t *h, const uint8_t *body, size_t len) {
    int rc = mc__mp_reply_check(h, body, len);
    if (rc)
        return rc;
    return len == 0 ? 0 : MC_ERR_RPC_FAIL;
}

/* Reads the entries of a list reply one by one with fn, into out (entries of size bytes),
 * then wants nothing left: 0 or MC_ERR_RPC_FAIL. The list decoders differ only in fn. */
static int mc__mp_cur_each(mc_cursor_t *cur, uint32_t n, mc__mp_entry_fn fn, void *out,
                           size_t size) {
    for (uint32_t i = 0; i < n; i++)
        if (fn(cur, (uint8_t *)out + (size_t)i * size))
            return MC_ERR_RPC_FAIL;
    return mc__cur_left(cur) == 0 ? 0 : MC_ERR_RPC_FAIL;
}

int mc__mp_decode_list(const mc_frame_header_t *h, const uint8_t *body, size_t len, uint32_t limit,
                       size_t min_entry, mc__mp_entry_fn fn, void *out, size_t size, uint32_t *n) {
    mc_cursor_t cur;
    uint32_t got = 0;
    int rc = mc__mp_reply_list(h, body, len, limit, min_entry, &cur, &got);
    *n = 0;
    if (rc == 0)
        rc = mc__mp_cur_each(&cur, got, fn, out, size);
    if (rc == 0)
        *n = got;
    return rc;
}

/* A batch reply: exactly n entries, each read by fn. */
static int mc__mp_decode_batch(const mc_frame_header_t *h, const uint8_t *body, size_t len,
                               uint32_t n, size_t min_entry, mc__mp_entry_fn fn, void *out,
                               size_t size) {
    mc_cursor_t cur;
    int rc = mc__mp_reply_batch(h, body, len, n, min_entry, &cur);
    return rc ? rc : mc__mp_cur_each(&cur, n, fn, out, size);
}

static int mc__mp_cur_code(mc_cursor_t *cur, void *entry) {
    return mc__cur_i32(cur, entry);
}

int mc__mp_decode_codes_reply(const mc_frame_header_t *h, const uint8_t *body, size_t len,
                              uint32_t n, int32_t *codes) {
    return mc__mp_decode_batch(h, body, len, n, 4, mc__mp_cur_code, codes, sizeof(*codes));
}

static int mc__mp_cur_key_replicas(mc_cursor_t *cur, void *entry) {
    mc__key_replicas_t *it = entry;
    if (mc__cur_i32(cur, &it->code) || mc__cur_u64(cur, &it->size) ||
        mc__cur_u64(cur, &it->lease_ttl_ms) ||
        mc__cur_count(cur, MC_MP_MAX_REPLICA_NUM, 29, &it->n_replicas) || it->code > 0)
        return -1;
    for (uint32_t j = 0; j < it->n_replicas; j++) {
        mc__replica_desc_t *d = &it->replicas[j];
        if (mc__mp_cur_text(cur, MC_MP_MAX_SEGMENT_NAME, d->segment_name, NULL) ||
            mc__cur_u64(cur, &d->addr) || mc__cur_u64(cur, &d->size) ||
            mc__cur_u64(cur, &d->epoch) || mc__cur_u8(cur, &d->status))
            return -1;
    }
    return 0;
}

int mc__mp_decode_replicas_reply(const mc_frame_header_t *h, const uint8_t *body, size_t len,
                                 uint32_t n, mc__key_replicas_t *out) {
    int rc = mc__mp_decode_batch(h, body, len, n, 24, mc__mp_cur_key_replicas, out, sizeof(*out));
    for (uint32_t i = 0; rc == 0 && i < n; i++) {
        mc__key_replicas_t *it = &out[i];
        it->version = 0;
        if (mc__mp_is_put_start(h->type) || h->type == MC_MP_PUT_RESERVE) {
            /* that field is the writer's version there (a slot's) */
            it->version = it->lease_ttl_ms;
            it->lease_ttl_ms = 0;
        }
    }
    return rc;
}

int mc__mp_decode_fields(const mc_frame_header_t *h, const uint8_t *body, size_t len,
                         mc__mp_entry_fn fn, void *out) {
    mc_cursor_t cur;
    int rc = mc__mp_reply_open(h, body, len, &cur);
    if (rc)
        return rc;
    return fn(&cur, out) || mc__cur_left(&cur) != 0 ? MC_ERR_RPC_FAIL : 0;
}

static int mc__mp_cur_removed(mc_cursor_t *cur, void *out) {
    return mc__cur_i64(cur, out);
}

int mc__mp_decode_remove_all_reply(const mc_frame_header_t *h, const uint8_t *body, size_t len,
                                   int64_t *removed) {
    return mc__mp_decode_fields(h, body, len, mc__mp_cur_removed, removed);
}

int mc__mp_decode_heartbeat_reply(const mc_frame_header_t *h, const uint8_t *body, size_t len,
                                  uint8_t *status, uint64_t *view_version) {
    mc_cursor_t cur;
    int rc = mc__mp_reply_open(h, body, len, &cur);
    if (rc)
        return rc;
    if (mc__cur_u8(&cur, status) || mc__cur_u64(&cur, view_version) || mc__cur_left(&cur) != 0)
        return MC_ERR_RPC_FAIL;
    return 0;
}
