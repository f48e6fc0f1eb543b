/* Replica tasks: creating and querying them (any client), and running the ones the master
 * assigns to this client (a storage client owns the source replicas), from the heartbeat
 * thread. */
#include <string.h>

#include "client/store_internal.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/failpoint.h"
#include "mooncake/common/log.h"

#define MC__TASK_FETCH 4u
#define MC__TASK_CHUNK (4u << 20) /* bytes moved per step: a big object needs no big buffer */

static void mc__id_to_bytes(const mc_store_task_id_t *id, uint8_t out[MC_MP_CLIENT_ID_LEN]) {
    for (int i = 0; i < 8; i++) {
        out[i] = (uint8_t)(id->hi >> (56 - 8 * i));
        out[8 + i] = (uint8_t)(id->lo >> (56 - 8 * i));
    }
}

static void mc__id_from_bytes(const uint8_t in[MC_MP_CLIENT_ID_LEN], mc_store_task_id_t *id) {
    id->hi = id->lo = 0;
    for (int i = 0; i < 8; i++) {
        id->hi = (id->hi << 8) | in[i];
        id->lo = (id->lo << 8) | in[8 + i];
    }
}

static int mc__create_impl(mc_store_t *s, uint8_t type, const char *key, const char *source,
                           const char *const *targets, size_t n, mc_store_task_id_t *id) {
    uint8_t raw[MC_MP_CLIENT_ID_LEN];
    int rc = mc__store_check_key(key);
    if (rc != 0)
        return rc;
    if (!id || !targets || n == 0 || n > MC_MP_MAX_REPLICA_NUM)
        return MC_ERR_INVALID_PARAMS;
    for (size_t i = 0; i < n; i++)
        if (!targets[i] || !targets[i][0] || strlen(targets[i]) > MC_MP_MAX_SEGMENT_NAME)
            return MC_ERR_INVALID_PARAMS;
    rc = mc__master_client_task_create(s->master, type, key, source, n, targets, raw);
    if (rc == 0)
        mc__id_from_bytes(raw, id);
    return rc;
}

int mc_store_create_copy_task(mc_store_t *s, const char *key, const char *const *targets, size_t n,
                              mc_store_task_id_t *id) {
    int rc;
    MC__STORE_HELD(s, rc, mc__create_impl(s, MC_TASK_COPY, key, NULL, targets, n, id));
    return rc;
}

int mc_store_create_move_task(mc_store_t *s, const char *key, const char *source,
                              const char *target, mc_store_task_id_t *id) {
    int rc;
    if (!source || !source[0] || strlen(source) > MC_MP_MAX_SEGMENT_NAME)
        return MC_ERR_INVALID_PARAMS;
    MC__STORE_HELD(s, rc, mc__create_impl(s, MC_TASK_MOVE, key, source, &target, 1, id));
    return rc;
}

static int mc__query_impl(mc_store_t *s, const mc_store_task_id_t *id, mc_store_task_info_t *out) {
    uint8_t raw[MC_MP_CLIENT_ID_LEN];
    mc__task_info_t info;
    int rc;
    if (!id || !out)
        return MC_ERR_INVALID_PARAMS;
    mc__id_to_bytes(id, raw);
    rc = mc__master_client_task_query(s->master, raw, &info);
    if (rc != 0)
        return rc;
    memset(out, 0, sizeof(*out));
    out->id = *id;
    out->type = info.type;
    out->status = info.status;
    out->created_at_ms_epoch = (int64_t)info.created_ms;
    out->last_updated_at_ms_epoch = (int64_t)info.updated_ms;
    mc__id_from_bytes(info.assigned, &out->assigned_client);
    memcpy(out->message, info.message, sizeof(out->message));
    out->message[sizeof(out->message) - 1] = '\0';
    return 0;
}

int mc_store_query_task(mc_store_t *s, const mc_store_task_id_t *id, mc_store_task_info_t *out) {
    int rc;
    MC__STORE_HELD(s, rc, mc__query_impl(s, id, out));
    return rc;
}

/* Moves one task's bytes, a chunk at a time: from the source replica (our own memory, so a
 * plain copy, unless the segment changed incarnation: then through the engine, which refuses a
 * stale placement) into every target. */
static int mc__task_move_bytes(mc_store_t *s, const mc__task_work_t *w, uint8_t *buf) {
    for (uint64_t off = 0; off < w->size;) {
        size_t len = (size_t)(w->size - off < MC__TASK_CHUNK ? w->size - off : MC__TASK_CHUNK);
        mc_store_iov_t iov = {buf, len};
        mc__replica_desc_t src = w->src, dst[MC_MP_MAX_REPLICA_NUM];
        int rc;
        src.addr += off;
        src.size = len;
        if (mc__store_replica_is_local(s, &w->src))
            rc = mc__store_local_copy(s, MC_OPCODE_READ, &w->src, off, buf, len);
        else
            rc = mc__store_move(s, MC_OPCODE_READ, &iov, 1, &src, 1);
        for (uint32_t t = 0; rc == 0 && t < w->n_targets; t++) {
            dst[t] = w->targets[t];
            dst[t].addr += off;
            dst[t].size = len;
        }
        if (rc == 0)
            rc = mc__store_move(s, MC_OPCODE_WRITE, &iov, 1, dst, w->n_targets);
        if (rc != 0)
            return rc;
        off += len;
    }
    return 0;
}

void mc__store_run_tasks(mc_store_t *s) {
    mc__task_work_t w[MC__TASK_FETCH]; /* ~27 KiB on the maintenance thread's stack */
    uint8_t *buf = NULL;
    uint32_t n = 0;
    size_t extras;
    pthread_mutex_lock(&s->extras_mu);
    extras = s->n_extras;
    pthread_mutex_unlock(&s->extras_mu);
    if (!s->segment && extras == 0)
        return; /* a client that owns no replica is assigned nothing */
    if (mc__master_client_task_fetch(s->master, MC__TASK_FETCH, w, &n) != 0 || n == 0)
        return;
    mc__failpoint("store_task_after_fetch"); /* tests race removes and replaces against this */
    buf = mc__malloc(MC__TASK_CHUNK);
    for (uint32_t i = 0; i < n; i++) {
        int rc = buf ? mc__task_move_bytes(s, &w[i], buf) : MC_ERR_INTERNAL_ERROR;
        if (rc != 0)
            MC_WARN("store: replica task for '%s' failed: %s", w[i].key, mc_store_strerror(rc));
        rc = mc__master_client_task_report(s->master, w[i].id, rc, rc ? mc_store_strerror(rc) : "");
        if (rc != 0)
            MC_WARN("store: reporting a replica task for '%s' failed: %s", w[i].key,
                    mc_store_strerror(rc));
    }
    mc__free(buf);
}
