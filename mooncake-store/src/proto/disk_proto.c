/* Disk tier codec (see disk_proto.h). No I/O. */
#include "proto/disk_proto.h"

#include <string.h>

#include "mooncake/error.h"

int mc__dp_fetch_reply_begin(mc_buf_t *b, uint64_t request_id, uint32_t n, size_t *frame_start) {
    return mc__mp_list_reply_begin(b, MC_MP_DISK_FETCH, request_id, n, frame_start);
}

int mc__dp_fetch_reply_job(mc_buf_t *b, const mc__disk_job_t *j) {
    mc__buf_u8(b, j->kind);
    mc__buf_bytes(b, j->key, (uint32_t)strnlen(j->key, MC_MP_MAX_KEY));
    mc__buf_u64(b, j->size);
    mc__buf_u64(b, j->version);
    mc__buf_bytes(b, j->src.segment_name,
                  (uint32_t)strnlen(j->src.segment_name, MC_MP_MAX_SEGMENT_NAME));
    mc__buf_u64(b, j->src.addr);
    mc__buf_u64(b, j->src.epoch);
    return b->failed ? MC_ERR_MEMORY : 0;
}

/* A key on the wire: 1..MC_MP_MAX_KEY bytes without a NUL, copied NUL-terminated. */
static int mc__dp_cur_key(mc_cursor_t *cur, char *out) {
    const uint8_t *p = NULL;
    uint32_t n = 0;
    if (mc__cur_bytes(cur, MC_MP_MAX_KEY, &p, &n))
        return MC_ERR_INVALID_PARAMS;
    if (n == 0 || memchr(p, 0, n))
        return MC_ERR_INVALID_KEY;
    memcpy(out, p, n);
    out[n] = '\0';
    return 0;
}

static int mc__dp_cur_job(mc_cursor_t *cur, void *entry) {
    mc__disk_job_t *j = entry;
    uint32_t seg_len = 0;
    memset(&j->src, 0, sizeof(j->src));
    if (mc__cur_u8(cur, &j->kind) || j->kind < MC_DP_JOB_OFFLOAD || j->kind > MC_DP_JOB_PROMOTE ||
        mc__dp_cur_key(cur, j->key) || mc__cur_u64(cur, &j->size) ||
        mc__cur_u64(cur, &j->version) ||
        mc__mp_cur_text(cur, MC_MP_MAX_SEGMENT_NAME, j->src.segment_name, &seg_len) ||
        memchr(j->src.segment_name, 0, seg_len) || mc__cur_u64(cur, &j->src.addr) ||
        mc__cur_u64(cur, &j->src.epoch))
        return -1;
    j->src.size = j->size;
    j->src.status = MC_MP_REPLICA_COMPLETE;
    return 0;
}

int mc__dp_decode_fetch_reply(const mc_frame_header_t *h, const uint8_t *body, size_t len,
                              uint32_t max, mc__disk_job_t *out, uint32_t *n) {
    /* 1 kind + 4 key + 8 size + 8 version + 4 segment + 8 addr + 8 epoch: the least a job takes */
    return mc__mp_decode_list(h, body, len, max < MC_DP_MAX_FETCH ? max : MC_DP_MAX_FETCH, 41,
                              mc__dp_cur_job, out, sizeof(*out), n);
}

int mc__dp_encode_read(mc_buf_t *b, uint64_t request_id, const char *key, uint64_t version,
                       uint64_t cap) {
    size_t start = 0;
    size_t n = key ? strlen(key) : 0;
    int rc;
    if (n == 0 || n > MC_MP_MAX_KEY)
        return MC_ERR_INVALID_KEY;
    rc = mc__buf_frame_begin(b, MC_DP_READ, 0, request_id, &start);
    if (rc)
        return rc;
    mc__buf_bytes(b, key, (uint32_t)n);
    mc__buf_u64(b, version);
    mc__buf_u64(b, cap);
    mc__buf_frame_end(b, start);
    return b->failed ? MC_ERR_MEMORY : 0;
}

int mc__dp_decode_read(const uint8_t *body, size_t len, char *key, uint64_t *version,
                       uint64_t *cap) {
    mc_cursor_t cur = {body, body + len};
    int rc;
    if (!body && len)
        return MC_ERR_INVALID_PARAMS;
    rc = mc__dp_cur_key(&cur, key);
    if (rc)
        return rc;
    if (mc__cur_u64(&cur, version) || mc__cur_u64(&cur, cap) || mc__cur_left(&cur))
        return MC_ERR_INVALID_PARAMS;
    return 0;
}

int mc__dp_encode_read_reply(mc_buf_t *b, uint64_t request_id, int32_t code, uint64_t len) {
    size_t start = mc__mp_reply_begin(b, MC_DP_READ, 0, request_id);
    mc__buf_i32(b, code);
    mc__buf_u64(b, len);
    return mc__mp_reply_end(b, start);
}

int mc__dp_decode_read_reply(const mc_frame_header_t *h, const uint8_t *body, size_t len,
                             int32_t *code, uint64_t *vlen) {
    mc_cursor_t cur = {body, body + len};
    if (!(h->flags & MC_FRAME_F_REPLY) || h->type != MC_DP_READ || (!body && len))
        return MC_ERR_RPC_FAIL;
    if (mc__cur_i32(&cur, code) || mc__cur_u64(&cur, vlen) || mc__cur_left(&cur) ||
        (*code == 0 && *vlen > MC_MP_MAX_SEGMENT_SIZE) || *code > 0)
        return MC_ERR_RPC_FAIL;
    return 0;
}

void mc__dp_encode_read_trailer(uint8_t out[MC_DP_TRAILER_SIZE], int32_t verdict) {
    uint32_t v = (uint32_t)verdict;
    for (int i = 0; i < 4; i++) {
        out[i] = (uint8_t)(MC_DP_TRAILER_MAGIC >> (8 * i));
        out[4 + i] = (uint8_t)(v >> (8 * i));
    }
}

int mc__dp_decode_read_trailer(const uint8_t *in, size_t len, int32_t *verdict) {
    uint32_t magic = 0, v = 0;
    if (!in || len != MC_DP_TRAILER_SIZE)
        return MC_ERR_RPC_FAIL;
    for (int i = 3; i >= 0; i--) {
        magic = (magic << 8) | in[i];
        v = (v << 8) | in[4 + i];
    }
    *verdict = (int32_t)v;
    if (magic != MC_DP_TRAILER_MAGIC || *verdict > 0)
        return MC_ERR_RPC_FAIL;
    return 0;
}

int mc__dp_encode_storage_config(mc_buf_t *b, uint64_t request_id, const char *fsdir,
                                 uint8_t enable_disk_eviction, uint64_t quota_bytes) {
    size_t start = mc__mp_reply_begin(b, MC_MP_STORAGE_CONFIG, 0, request_id);
    mc__buf_bytes(b, fsdir, (uint32_t)strnlen(fsdir, MC_MP_MAX_SEGMENT_NAME));
    mc__buf_u8(b, enable_disk_eviction);
    mc__buf_u64(b, quota_bytes);
    return mc__mp_reply_end(b, start);
}

typedef struct mc__dp_scfg {
    char *fsdir;
    uint8_t *eviction;
    uint64_t *quota;
} mc__dp_scfg_t;

static int mc__dp_cur_scfg(mc_cursor_t *cur, void *entry) {
    mc__dp_scfg_t *c = entry;
    uint32_t n = 0;
    if (mc__mp_cur_text(cur, MC_MP_MAX_SEGMENT_NAME, c->fsdir, &n) || memchr(c->fsdir, 0, n) ||
        mc__cur_u8(cur, c->eviction) || mc__cur_u64(cur, c->quota))
        return -1;
    return 0;
}

int mc__dp_decode_storage_config(const mc_frame_header_t *h, const uint8_t *body, size_t len,
                                 char *fsdir, uint8_t *enable_disk_eviction,
                                 uint64_t *quota_bytes) {
    mc__dp_scfg_t c = {fsdir, enable_disk_eviction, quota_bytes};
    fsdir[0] = '\0';
    return mc__mp_decode_fields(h, body, len, mc__dp_cur_scfg, &c);
}
