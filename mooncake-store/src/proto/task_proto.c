/* Replica-task codec; see task_proto.h for the layouts. */
#include "proto/task_proto.h"

#include <string.h>

#include "mooncake/error.h"

/* --- replies --- */

int mc__tp_encode_create_reply(mc_buf_t *b, uint64_t request_id,
                               const uint8_t id[MC_MP_CLIENT_ID_LEN]) {
    size_t start = mc__mp_reply_begin(b, MC_MP_TASK_CREATE, 0, request_id);
    mc__buf_put(b, id, MC_MP_CLIENT_ID_LEN);
    return mc__mp_reply_end(b, start);
}

int mc__tp_encode_query_reply(mc_buf_t *b, uint64_t request_id, const mc__task_info_t *info) {
    size_t start = mc__mp_reply_begin(b, MC_MP_TASK_QUERY, 0, request_id);
    mc__buf_u8(b, info->type);
    mc__buf_u8(b, info->status);
    mc__buf_u64(b, info->created_ms);
    mc__buf_u64(b, info->updated_ms);
    mc__buf_put(b, info->assigned, MC_MP_CLIENT_ID_LEN);
    mc__buf_bytes(b, info->message, (uint32_t)strnlen(info->message, MC_TP_MAX_MESSAGE));
    return mc__mp_reply_end(b, start);
}

int mc__tp_fetch_reply_begin(mc_buf_t *b, uint64_t request_id, uint32_t n, size_t *frame_start) {
    return mc__mp_list_reply_begin(b, MC_MP_TASK_FETCH, request_id, n, frame_start);
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

static int mc__tp_cur_id(mc_cursor_t *cur, void *id) {
    return mc__mp_cur_id(cur, id);
}

int mc__tp_decode_create_reply(const mc_frame_header_t *h, const uint8_t *body, size_t len,
                               uint8_t id[MC_MP_CLIENT_ID_LEN]) {
    return mc__mp_decode_fields(h, body, len, mc__tp_cur_id, id);
}

static int mc__tp_cur_info(mc_cursor_t *cur, void *entry) {
    mc__task_info_t *out = entry;
    return mc__cur_u8(cur, &out->type) || mc__cur_u8(cur, &out->status) ||
           mc__cur_u64(cur, &out->created_ms) || mc__cur_u64(cur, &out->updated_ms) ||
           mc__mp_cur_id(cur, out->assigned) ||
           mc__mp_cur_text(cur, MC_TP_MAX_MESSAGE, out->message, NULL) ||
           out->type > MC_TASK_MOVE || out->status > MC_TASK_SUCCESS;
}

int mc__tp_decode_query_reply(const mc_frame_header_t *h, const uint8_t *body, size_t len,
                              mc__task_info_t *out) {
    return mc__mp_decode_fields(h, body, len, mc__tp_cur_info, out);
}

/* A place the master reserved: a segment (never empty), an address and its epoch. */
static int mc__cur_place(mc_cursor_t *cur, mc__replica_desc_t *d) {
    uint32_t name_len = 0;
    if (mc__mp_cur_text(cur, MC_MP_MAX_SEGMENT_NAME, d->segment_name, &name_len) || name_len == 0 ||
        mc__cur_u64(cur, &d->addr) || mc__cur_u64(cur, &d->epoch))
        return -1;
    d->status = MC_MP_REPLICA_COMPLETE;
    return 0;
}

static int mc__tp_cur_work(mc_cursor_t *cur, void *entry) {
    mc__task_work_t *w = entry;
    uint32_t key_len = 0;
    if (mc__mp_cur_id(cur, w->id) || mc__cur_u8(cur, &w->type) || w->type > MC_TASK_MOVE ||
        mc__mp_cur_text(cur, MC_MP_MAX_KEY, w->key, &key_len) || key_len == 0 ||
        mc__cur_u64(cur, &w->size) || mc__cur_place(cur, &w->src) ||
        mc__cur_count(cur, MC_MP_MAX_REPLICA_NUM, 20, &w->n_targets))
        return -1;
    w->src.size = w->size;
    for (uint32_t t = 0; t < w->n_targets; t++) {
        if (mc__cur_place(cur, &w->targets[t]))
            return -1;
        w->targets[t].size = w->size;
    }
    return 0;
}

int mc__tp_decode_fetch_reply(const mc_frame_header_t *h, const uint8_t *body, size_t len,
                              uint32_t max, mc__task_work_t *out, uint32_t *n) {
    /* 16 id + 1 type + 4 key + 8 size + 20 source + 4 count: the least one work can take. */
    return mc__mp_decode_list(h, body, len, max < MC_TP_MAX_FETCH ? max : MC_TP_MAX_FETCH, 53,
                              mc__tp_cur_work, out, sizeof(*out), n);
}
