/* The admin endpoints in the reference master's shapes: /health (JSON), /role, /ha_status,
 * /query_key and /batch_query_keys (JSON replica descriptors), /get_all_keys, /get_all_segments
 * and /query_segment (text). Tools written for the reference (SGLang's launcher waits on
 * /get_all_segments) read these; our richer JSON views live under /json/ (admin_http.c). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "master/master_internal.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/http.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"

#define MC__TEXT "text/plain; charset=utf-8"

/* The replicas of a finished object, read without a lease (looking is not reading): 0,
 * OBJECT_NOT_FOUND, REPLICA_IS_NOT_READY for a put still being written (when complete_only),
 * INVALID_PARAMS for a key no client could have stored. The /json/ views (admin_http.c) read
 * unfinished objects too. */
int mc__key_view(mc__master_t *m, const char *key, int complete_only, mc__key_view_t *v) {
    size_t len = strlen(key);
    uint64_t now = mc__now_ms();
    uint32_t hash;
    mc__shard_t *s;
    mc__object_t *o;
    int rc = 0;
    if (len == 0 || len > MC_MP_MAX_KEY)
        return MC_ERR_INVALID_PARAMS;
    hash = mc__key_hash((const uint8_t *)key, (uint32_t)len);
    s = mc__shard_of(m, hash);
    pthread_mutex_lock(&s->mu);
    o = mc__shard_find(s, hash, (const uint8_t *)key, (uint32_t)len);
    if (!o) {
        rc = MC_ERR_OBJECT_NOT_FOUND;
    } else if (complete_only && !(o->flags & MC__OBJ_COMPLETE)) {
        rc = MC_ERR_REPLICA_IS_NOT_READY;
    } else {
        v->size = o->size;
        v->flags = o->flags;
        v->lease_left_ms = o->lease_until > now ? o->lease_until - now : 0;
        v->n = o->n_replicas;
        memcpy(v->reps, mc__obj_reps(o), (size_t)v->n * sizeof(v->reps[0]));
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

static cJSON *mc__descriptors(mc__master_t *m, const mc__key_view_t *v) {
    cJSON *arr = cJSON_CreateArray();
    for (uint8_t i = 0; arr && i < v->n; i++) {
        char name[MC_MP_MAX_SEGMENT_NAME + 1];
        char text[4 * MC_MP_MAX_SEGMENT_NAME + 1];
        uint64_t base = 0;
        cJSON *d;
        uint32_t len = mc__segment_name(m, v->reps[i].seg, name, &base, NULL);
        if (!len)
            continue; /* its segment went away meanwhile */
        mc__key_text((const uint8_t *)name, len, text, 0);
        d = cJSON_CreateObject();
        cJSON_AddNumberToObject(d, "size_", (double)v->size);
        cJSON_AddNumberToObject(d, "buffer_address_", (double)(base + v->reps[i].off));
        cJSON_AddStringToObject(d, "protocol_", "");
        cJSON_AddStringToObject(d, "transport_endpoint_", text);
        cJSON_AddItemToArray(arr, d);
    }
    return arr;
}

void mc__admin_send_json(mc_http_response_t *resp, int status, cJSON *j) {
    char *text = j ? cJSON_PrintUnformatted(j) : NULL;
    if (!text)
        mc__http_respond(resp, 500, MC__TEXT, "out of memory\n", 14);
    else
        mc__http_respond(resp, status, "application/json; charset=utf-8", text, strlen(text));
    cJSON_free(text);
    cJSON_Delete(j);
}

void mc__admin_send_error(mc_http_response_t *resp, int status, int code, const char *msg) {
    cJSON *j = cJSON_CreateObject();
    if (status == 0) /* the reference's map from codes to statuses */
        status = code == MC_ERR_INVALID_PARAMS ? 400
                 : code == MC_ERR_JOB_NOT_FOUND || code == MC_ERR_SEGMENT_NOT_FOUND ||
                         code == MC_ERR_OBJECT_NOT_FOUND
                     ? 404
                 : code == MC_ERR_UNAVAILABLE_IN_CURRENT_MODE ||
                         code == MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS
                     ? 409
                     : 500;
    cJSON_AddBoolToObject(j, "success", 0);
    cJSON_AddNumberToObject(j, "error_code", code);
    cJSON_AddStringToObject(j, "error_message", msg ? msg : mc_store_err_name(code));
    mc__admin_send_json(resp, status, j);
}

static void mc__send_error(mc_http_response_t *resp, int code, const char *msg) {
    mc__admin_send_error(resp, code == MC_ERR_INVALID_PARAMS ? 400 : 404, code, msg);
}

static void mc__query_key(mc__master_t *m, const mc_http_request_t *req, mc_http_response_t *resp,
                          char *arg, size_t cap) {
    mc__key_view_t v;
    cJSON *j;
    int rc;
    if (mc__http_query_get(req->query, "key", arg, cap) || !arg[0]) {
        mc__send_error(resp, MC_ERR_INVALID_PARAMS, "missing ?key=");
        return;
    }
    rc = mc__key_view(m, arg, 1, &v);
    if (rc) {
        mc__send_error(resp, rc, NULL);
        return;
    }
    j = cJSON_CreateObject();
    cJSON_AddBoolToObject(j, "success", 1);
    cJSON_AddItemToObject(j, "data", mc__descriptors(m, &v));
    mc__admin_send_json(resp, 200, j);
}

/* keys=a,b,c: every item answers ok with its replicas or an error name; an empty item is a key
 * no client could have stored (INVALID_PARAMS). A key named twice answers once. */
static void mc__batch_query_keys(mc__master_t *m, const mc_http_request_t *req,
                                 mc_http_response_t *resp, char *arg, size_t cap) {
    cJSON *all, *data;
    char *p = arg;
    char *name = NULL;
    if (mc__http_query_get(req->query, "keys", arg, cap) || !arg[0]) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddBoolToObject(e, "success", 0);
        cJSON_AddStringToObject(e, "error", "No keys provided. Use ?keys=key1,key2,...");
        mc__admin_send_json(resp, 400, e);
        return;
    }
    name = mc__malloc(4 * MC_HTTP_MAX_QUERY + 1);
    if (!name) {
        mc__http_respond(resp, 503, MC__TEXT, "out of memory\n", 14);
        return;
    }
    all = cJSON_CreateObject();
    cJSON_AddBoolToObject(all, "success", 1);
    data = cJSON_AddObjectToObject(all, "data");
    for (;;) {
        char *comma = strchr(p, ',');
        mc__key_view_t v;
        cJSON *item;
        int rc;
        if (comma)
            *comma = '\0';
        mc__key_text((const uint8_t *)p, strlen(p), name, 0);
        if (!cJSON_GetObjectItemCaseSensitive(data, name)) {
            item = cJSON_CreateObject();
            rc = mc__key_view(m, p, 1, &v);
            cJSON_AddBoolToObject(item, "ok", rc == 0);
            if (rc)
                cJSON_AddStringToObject(item, "error", mc_store_err_name(rc));
            else
                cJSON_AddItemToObject(item, "values", mc__descriptors(m, &v));
            cJSON_AddItemToObject(data, name, item);
        }
        if (!comma)
            break;
        p = comma + 1;
    }
    mc__free(name);
    mc__admin_send_json(resp, 200, all);
}

static int mc__key_line_visit(mc__master_t *m, mc__object_t *o, void *arg) {
    char text[4 * MC_MP_MAX_KEY + 2];
    size_t n;
    (void)m;
    if (!(o->flags & MC__OBJ_COMPLETE)) /* unfinished puts and upserts' shadows */
        return 0;
    mc__key_text(o->data, o->key_len, text, 1);
    n = strlen(text);
    text[n++] = '\n';
    mc__buf_put((mc_buf_t *)arg, text, n);
    return 0;
}

/* Names of mounted segments, one a line, each once (a client may mount several buffers under
 * one name); with only, the used and capacity bytes of that name instead. Returns the number
 * of mounts found. */
static int mc__segment_lines(mc__master_t *m, mc_buf_t *b, const char *only, uint64_t *used,
                             uint64_t *cap) {
    int found = 0;
    pthread_rwlock_rdlock(&m->registry);
    for (uint32_t i = 0; i < m->n_slots; i++) {
        mc__segment_t *s = m->slots[i];
        int seen = 0;
        if (!s || s->dying)
            continue;
        if (only) {
            if (strcmp(s->name, only) != 0)
                continue;
            pthread_mutex_lock(&s->mu);
            *used += s->alloc.used_bytes;
            *cap += s->alloc.total_bytes;
            pthread_mutex_unlock(&s->mu);
            found++;
            continue;
        }
        for (uint32_t j = 0; j < i && !seen; j++)
            seen = m->slots[j] && !m->slots[j]->dying && strcmp(m->slots[j]->name, s->name) == 0;
        if (!seen) {
            char text[4 * MC_MP_MAX_SEGMENT_NAME + 2];
            size_t n;
            mc__key_text((const uint8_t *)s->name, s->name_len, text, 1);
            n = strlen(text);
            text[n++] = '\n';
            mc__buf_put(b, text, n);
            found++;
        }
    }
    pthread_rwlock_unlock(&m->registry);
    return found;
}

static void mc__query_segment(mc__master_t *m, const mc_http_request_t *req,
                              mc_http_response_t *resp, char *arg, size_t cap, mc_buf_t *b) {
    uint64_t used = 0, total = 0;
    char line[128];
    int n;
    if (mc__http_query_get(req->query, "segment", arg, cap) || !arg[0]) {
        mc__http_respond(resp, 400, MC__TEXT, "missing ?segment=\n", 18);
        return;
    }
    if (strlen(arg) > MC_MP_MAX_SEGMENT_NAME || !mc__segment_lines(m, b, arg, &used, &total)) {
        mc__http_respond(resp, 404, MC__TEXT, "segment not found\n", 18);
        return;
    }
    mc__buf_put(b, arg, strlen(arg));
    n = snprintf(line, sizeof(line), "\nUsed(bytes): %llu\nCapacity(bytes) : %llu\n",
                 (unsigned long long)used, (unsigned long long)total);
    mc__buf_put(b, line, (size_t)n);
    mc__http_respond(resp, b->failed ? 500 : 200, MC__TEXT, b->data, b->len);
}

/* Every segment with its allocator's numbers, the reference's /get_segments_detail. */
static void mc__segments_detail(mc__master_t *m, mc_http_response_t *resp) {
    cJSON *j = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(j, "segments");
    int n = 0;
    pthread_rwlock_rdlock(&m->registry);
    for (uint32_t i = 0; i < m->n_slots; i++) {
        mc__segment_t *s = m->slots[i];
        char text[4 * MC_MP_MAX_SEGMENT_NAME + 1], buf[64];
        uint64_t used, total;
        int st;
        cJSON *d;
        if (!s)
            continue;
        st = s->dying                 ? MC__SEG_UNMOUNTING
             : atomic_load(&s->drain) ? atomic_load(&s->drain)
                                      : MC__SEG_OK;
        d = cJSON_CreateObject();
        mc__key_text((const uint8_t *)s->name, s->name_len, text, 0);
        cJSON_AddStringToObject(d, "segment_name", text);
        /* our segments are named by their log serial: shown in the reference's UUID form */
        snprintf(buf, sizeof(buf), "00000000-0000-0000-0000-%012llx",
                 (unsigned long long)(s->serial & 0xffffffffffffull));
        cJSON_AddStringToObject(d, "segment_id", buf);
        /* A client id is what authorizes unmounting a segment: only a digest of it is shown,
         * which tells clients apart without handing anyone their id. */
        snprintf(buf, sizeof(buf), "00000000-0000-0000-0000-0000%08x",
                 (unsigned)mc__key_hash(s->owner, MC_MP_CLIENT_ID_LEN));
        cJSON_AddStringToObject(d, "client_id", buf);
        snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)s->base);
        cJSON_AddStringToObject(d, "base_address", buf);
        cJSON_AddNumberToObject(d, "size_bytes", (double)s->size);
        snprintf(buf, sizeof(buf), "%g GiB", (double)s->size / 1024.0 / 1024.0 / 1024.0);
        cJSON_AddStringToObject(d, "size_human", buf);
        cJSON_AddStringToObject(d, "te_endpoint", text); /* a segment is named by its engine */
        cJSON_AddStringToObject(d, "protocol", "");      /* mounts do not say it here */
        cJSON_AddStringToObject(d, "status",
                                st == MC__SEG_OK         ? "OK"
                                : st == MC__SEG_DRAINING ? "DRAINING"
                                : st == MC__SEG_DRAINED  ? "DRAINED"
                                                         : "UNMOUNTING");
        pthread_mutex_lock(&s->mu);
        used = s->alloc.used_bytes;
        total = s->alloc.total_bytes;
        pthread_mutex_unlock(&s->mu);
        cJSON_AddNumberToObject(d, "allocator_used_bytes", (double)used);
        cJSON_AddNumberToObject(d, "allocator_capacity_bytes", (double)total);
        cJSON_AddNumberToObject(d, "allocator_usage_percent",
                                total ? (double)used / (double)total * 100.0 : 0.0);
        cJSON_AddItemToArray(arr, d);
        n++;
    }
    pthread_rwlock_unlock(&m->registry);
    cJSON_AddNumberToObject(j, "total_segments", n);
    mc__admin_send_json(resp, 200, j);
}

/* The leader as the master view names it: this master, when it leads under HA; a master without
 * HA observes no leader view (the reference's answer: present false). */
static void mc__leader_fields(mc__master_t *m, cJSON *j, int present_field) {
    int ha = m->cfg.enable_ha && m->cfg.ha_term > 0;
    char addr[320];
    if (present_field)
        cJSON_AddBoolToObject(j, "present", ha);
    if (!ha)
        return;
    snprintf(addr, sizeof(addr), "%s:%lld", m->cfg.rpc_address,
             (long long)m->cfg.port); /* HA: a fixed port */
    cJSON_AddStringToObject(j, "leader_address", addr);
    cJSON_AddNumberToObject(j, "view_version", (double)m->cfg.ha_term);
}

int mc__admin_compat(mc__master_t *m, const mc_http_request_t *req, mc_http_response_t *resp,
                     char *arg, size_t cap, mc_buf_t *b) {
    const char *path = req->path;
    if (!strcmp(path, "/health")) {
        /* one master, always serving: the reference's answer for its leader, and whether it is
         * recovering (restored segments await their owners; puts that find no room wait) */
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "status", "ok");
        cJSON_AddStringToObject(j, "role", "leader");
        cJSON_AddStringToObject(j, "ha_state", "serving");
        cJSON_AddBoolToObject(j, "service_ready", 1);
        cJSON_AddBoolToObject(j, "recovering", mc__master_recovering(m));
        cJSON_AddNumberToObject(j, "segments_awaiting_owner", (double)atomic_load(&m->n_awaiting));
        mc__leader_fields(m, j, 0);
        mc__admin_send_json(resp, 200, j);
    } else if (!strcmp(path, "/leader")) {
        cJSON *j = cJSON_CreateObject();
        mc__leader_fields(m, j, 1);
        mc__admin_send_json(resp, 200, j);
    } else if (!strcmp(path, "/kv_events/status")) {
        /* the reference's fields (enabled false and zeros when the publisher is off), then ours */
        mc__buf_reset(b);
        mc__kv_events_status_json(m, b);
        mc__http_respond(resp, b->failed ? 500 : 200, "application/json; charset=utf-8", b->data,
                         b->len);
    } else if (!strcmp(path, "/get_segments_detail")) {
        mc__segments_detail(m, resp);
    } else if (!strcmp(path, "/role")) {
        mc__http_respond(resp, 200, MC__TEXT, "leader", 6);
    } else if (!strcmp(path, "/ha_status")) {
        mc__http_respond(resp, 200, MC__TEXT, "serving", 7);
    } else if (!strcmp(path, "/query_key")) {
        mc__query_key(m, req, resp, arg, cap);
    } else if (!strcmp(path, "/batch_query_keys")) {
        mc__batch_query_keys(m, req, resp, arg, cap);
    } else if (!strcmp(path, "/get_all_keys")) {
        mc__objects_sweep(m, mc__key_line_visit, b);
        mc__http_respond(resp, b->failed ? 500 : 200, MC__TEXT, b->data, b->len);
    } else if (!strcmp(path, "/get_all_segments")) {
        mc__segment_lines(m, b, NULL, NULL, NULL);
        mc__http_respond(resp, b->failed ? 500 : 200, MC__TEXT, b->data, b->len);
    } else if (!strcmp(path, "/query_segment")) {
        mc__query_segment(m, req, resp, arg, cap, b);
    } else {
        return 0;
    }
    return 1;
}
