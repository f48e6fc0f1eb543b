/* Replica-task codec; see task_proto.h for the layouts. */
#include "proto/task_proto.h"

#include <string.h>

#include "mooncake/error.h"

static int mc__tp_is_task(uint8_t type) {
    return type >= MC_MP_TASK_CREATE && type <= MC_MP_TASK_REPORT;
}

int mc__tp_check_request(const mc__mp_request_t *r) {
    if (!mc__tp_is_task(r->type))
        return MC_ERR_INVALID_PARAMS;
    switch (r->type) {
    case MC_MP_TASK_CREATE:
        if (r->task_type > MC_TASK_MOVE || r->object_key.len == 0 ||
            r->object_key.len > MC_MP_MAX_KEY)
            return r->object_key.len > MC_MP_MAX_KEY || r->object_key.len == 0
                       ? MC_ERR_INVALID_KEY
                       : MC_ERR_INVALID_PARAMS;
        if (r->segment_name.len > MC_MP_MAX_SEGMENT_NAME || r->n_targets == 0 ||
            r->n_targets > MC_MP_MAX_REPLICA_NUM)
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

int mc__tp_encode_request(mc_buf_t *b, const mc__mp_request_t *r) {
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
    case MC_MP_TASK_REPORT:
        mc__buf_put(b, r->task_id, MC_MP_CLIENT_ID_LEN);
        mc__buf_i32(b, r->task_code);
        mc__buf_bytes(b, r->message.p, r->message.len);
        break;
    default:
        return MC_ERR_INVALID_PARAMS;
    }
    return b->failed ? MC_ERR_MEMORY : 0;
}

static int mc__cur_id(mc_cursor_t *cur, uint8_t id[MC_MP_CLIENT_ID_LEN]) {
    if (mc__cur_left(cur) < MC_MP_CLIENT_ID_LEN)
        return -1;
    memcpy(id, cur->pos, MC_MP_CLIENT_ID_LEN);
    cur->pos += MC_MP_CLIENT_ID_LEN;
    return 0;
}

int mc__tp_decode_request(mc_cursor_t *cur, mc__mp_request_t *out) {
    int rc = MC_ERR_INVALID_PARAMS;
    switch (out->type) {
    case MC_MP_TASK_CREATE:
        if (mc__cur_u8(cur, &out->task_type) ||
            mc__cur_bytes(cur, UINT32_MAX, &out->object_key.p, &out->object_key.len) ||
            mc__cur_bytes(cur, MC_MP_MAX_SEGMENT_NAME, &out->segment_name.p,
                          &out->segment_name.len) ||
            mc__cur_count(cur, MC_MP_MAX_REPLICA_NUM, 4, &out->n_targets))
            return MC_ERR_INVALID_PARAMS;
        for (uint32_t i = 0; i < out->n_targets; i++)
            if (mc__cur_bytes(cur, MC_MP_MAX_SEGMENT_NAME, &out->targets[i].p,
                              &out->targets[i].len))
                return MC_ERR_INVALID_PARAMS;
        rc = 0;
        break;
    case MC_MP_TASK_QUERY:
        rc = mc__cur_id(cur, out->task_id) ? MC_ERR_INVALID_PARAMS : 0;
        break;
    case MC_MP_TASK_FETCH:
        rc = mc__cur_u32(cur, &out->max_tasks) ? MC_ERR_INVALID_PARAMS : 0;
        break;
    case MC_MP_TASK_REPORT:
        rc = mc__cur_id(cur, out->task_id) || mc__cur_i32(cur, &out->task_code) ||
                     mc__cur_bytes(cur, MC_TP_MAX_MESSAGE, &out->message.p, &out->message.len)
                 ? MC_ERR_INVALID_PARAMS
                 : 0;
        break;
    default:
        break;
    }
    return rc == 0 ? mc__tp_check_request(out) : rc;
}

/* --- replies --- */

int mc__tp_encode_create_reply(mc_buf_t *b, uint64_t request_id,
                               const uint8_t id[MC_MP_CLIENT_ID_LEN]) {
    size_t start = 0;
    int rc = mc__buf_frame_begin(b, MC_MP_TASK_CREATE, MC_FRAME_F_REPLY, request_id, &start);
    if (rc)
        return rc;
    mc__buf_put(b, id, MC_MP_CLIENT_ID_LEN);
    mc__buf_frame_end(b, start);
    return b->failed ? MC_ERR_MEMORY : 0;
}

int mc__tp_encode_query_reply(mc_buf_t *b, uint64_t request_id, const mc__task_info_t *info) {
    size_t start = 0;
    int rc = mc__buf_frame_begin(b, MC_MP_TASK_QUERY, MC_FRAME_F_REPLY, request_id, &start);
    if (rc)
        return rc;
    mc__buf_u8(b, info->type);
    mc__buf_u8(b, info->status);
    mc__buf_u64(b, info->created_ms);
    mc__buf_u64(b, info->updated_ms);
    mc__buf_put(b, info->assigned, MC_MP_CLIENT_ID_LEN);
    mc__buf_bytes(b, info->message, (uint32_t)strnlen(info->message, MC_TP_MAX_MESSAGE));
    mc__buf_frame_end(b, start);
    return b->failed ? MC_ERR_MEMORY : 0;
}

int mc__tp_fetch_reply_begin(mc_buf_t *b, uint64_t request_id, uint32_t n, size_t *frame_start) {
    int rc = mc__buf_frame_begin(b, MC_MP_TASK_FETCH, MC_FRAME_F_REPLY, request_id, frame_start);
    if (rc)
        return rc;
    return mc__buf_u32(b, n);
}

static void mc__put_place(mc_buf_t *b, const mc__replica_desc_t *d) {
    mc__buf_bytes(b, d->segment_name, (uint32_t)strnlen(d->segment_name, MC_MP_MAX_SEGMENT_NAME));
    mc__buf_u64(b, d->addr);
    mc__buf_u64(b, d->epoch);
}

int mc__tp_fetch_reply_work(mc_buf_t *b, const mc__task_work_t *w) {
    uint32_t nt = w->n_targets > MC_MP_MAX_REPLICA_NUM ? MC_MP_MAX_REPLICA_NUM : w->n_targets;
    mc__buf_put(b, w->id, MC_MP_CLIENT_ID_LEN);
    mc__buf_u8(b, w->type);
    mc__buf_bytes(b, w->key, (uint32_t)strnlen(w->key, MC_MP_MAX_KEY));
    mc__buf_u64(b, w->size);
    mc__put_place(b, &w->src);
    mc__buf_u32(b, nt);
    for (uint32_t i = 0; i < nt; i++)
        mc__put_place(b, &w->targets[i]);
    return b->failed ? MC_ERR_MEMORY : 0;
}

int mc__tp_decode_create_reply(const mc_frame_header_t *h, const uint8_t *body, size_t len,
                               uint8_t id[MC_MP_CLIENT_ID_LEN]) {
    mc_cursor_t cur = {body, body + len};
    int rc = mc__mp_reply_check(h, body, len);
    if (rc)
        return rc;
    return mc__cur_id(&cur, id) || mc__cur_left(&cur) ? MC_ERR_RPC_FAIL : 0;
}

int mc__tp_decode_query_reply(const mc_frame_header_t *h, const uint8_t *body, size_t len,
                              mc__task_info_t *out) {
    mc_cursor_t cur = {body, body + len};
    const uint8_t *msg = NULL;
    uint32_t msg_len = 0;
    int rc = mc__mp_reply_check(h, body, len);
    if (rc)
        return rc;
    if (mc__cur_u8(&cur, &out->type) || mc__cur_u8(&cur, &out->status) ||
        mc__cur_u64(&cur, &out->created_ms) || mc__cur_u64(&cur, &out->updated_ms) ||
        mc__cur_id(&cur, out->assigned) || mc__cur_bytes(&cur, MC_TP_MAX_MESSAGE, &msg, &msg_len) ||
        mc__cur_left(&cur) || out->type > MC_TASK_MOVE || out->status > MC_TASK_SUCCESS)
        return MC_ERR_RPC_FAIL;
    memcpy(out->message, msg, msg_len);
    out->message[msg_len] = '\0';
    return 0;
}

static int mc__cur_place(mc_cursor_t *cur, mc__replica_desc_t *d) {
    const uint8_t *name = NULL;
    uint32_t name_len = 0;
    if (mc__cur_bytes(cur, MC_MP_MAX_SEGMENT_NAME, &name, &name_len) || name_len == 0 ||
        mc__cur_u64(cur, &d->addr) || mc__cur_u64(cur, &d->epoch))
        return -1;
    memcpy(d->segment_name, name, name_len);
    d->segment_name[name_len] = '\0';
    d->status = MC_MP_REPLICA_COMPLETE;
    return 0;
}

int mc__tp_decode_fetch_reply(const mc_frame_header_t *h, const uint8_t *body, size_t len,
                              uint32_t max, mc__task_work_t *out, uint32_t *n) {
    mc_cursor_t cur = {body, body + len};
    uint32_t got = 0;
    int rc = mc__mp_reply_check(h, body, len);
    *n = 0;
    if (rc)
        return rc;
    /* 16 id + 1 type + 4 key + 8 size + 20 source + 4 count: the least one work can take. */
    if (mc__cur_count(&cur, MC_TP_MAX_FETCH, 53, &got) || got > max)
        return MC_ERR_RPC_FAIL;
    for (uint32_t i = 0; i < got; i++) {
        mc__task_work_t *w = &out[i];
        const uint8_t *key = NULL;
        uint32_t key_len = 0;
        if (mc__cur_id(&cur, w->id) || mc__cur_u8(&cur, &w->type) || w->type > MC_TASK_MOVE ||
            mc__cur_bytes(&cur, MC_MP_MAX_KEY, &key, &key_len) || key_len == 0 ||
            mc__cur_u64(&cur, &w->size) || mc__cur_place(&cur, &w->src) ||
            mc__cur_count(&cur, MC_MP_MAX_REPLICA_NUM, 20, &w->n_targets))
            return MC_ERR_RPC_FAIL;
        memcpy(w->key, key, key_len);
        w->key[key_len] = '\0';
        w->src.size = w->size;
        for (uint32_t t = 0; t < w->n_targets; t++) {
            if (mc__cur_place(&cur, &w->targets[t]))
                return MC_ERR_RPC_FAIL;
            w->targets[t].size = w->size;
        }
    }
    if (mc__cur_left(&cur))
        return MC_ERR_RPC_FAIL;
    *n = got;
    return 0;
}
