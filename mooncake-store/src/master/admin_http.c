/* Admin HTTP endpoints on --metrics_port: the dispatcher, /metrics (metrics.c), the /api/v1/
 * routes (admin_api.c), the endpoints in the reference's shapes (admin_compat.c), and our
 * read-only JSON views of keys and segments under /json/ (here). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "master/master_internal.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/http.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"
#include "proto/master_client.h"

/* One line for people, led by the reference's role and state. */
static void mc__summary(mc__master_t *m, mc_buf_t *b) {
    char line[640];
    int n = snprintf(
        line, sizeof(line),
        "role=leader, state=serving, service_ready=true, master={objects=%lld object_bytes=%lld "
        "segments=%lld capacity_bytes=%lld used_bytes=%lld evictions=%llu discarded_puts=%llu "
        "expired_clients=%llu uptime_s=%llu}\n",
        (long long)atomic_load(&m->n_objects), (long long)atomic_load(&m->object_bytes),
        (long long)atomic_load(&m->n_segments), (long long)atomic_load(&m->capacity_bytes),
        (long long)atomic_load(&m->used_bytes), (unsigned long long)atomic_load(&m->evictions),
        (unsigned long long)atomic_load(&m->discarded_puts),
        (unsigned long long)atomic_load(&m->expired_clients),
        (unsigned long long)((mc__now_ms() - m->start_ms) / 1000));
    mc__buf_put(b, line, (size_t)n);
}

/* Adds a key (a C string from a query) as a JSON-safe string field. */
static void mc__key_json_field(cJSON *j, const char *field, const char *key) {
    size_t n = strlen(key);
    char *text = mc__malloc(4 * n + 1);
    if (!text)
        return;
    mc__key_text((const uint8_t *)key, n, text, 0);
    cJSON_AddStringToObject(j, field, text);
    mc__free(text);
}

static cJSON *mc__key_json(mc__master_t *m, const char *key) {
    mc__key_view_t v;
    cJSON *j = NULL, *arr = NULL;
    if (mc__key_view(m, key, 0, &v) != 0)
        return NULL;
    j = cJSON_CreateObject();
    mc__key_json_field(j, "key", key);
    cJSON_AddNumberToObject(j, "size", (double)v.size);
    cJSON_AddBoolToObject(j, "complete", (v.flags & MC__OBJ_COMPLETE) != 0);
    cJSON_AddNumberToObject(j, "lease_ttl_ms_left", (double)v.lease_left_ms);
    cJSON_AddBoolToObject(j, "hard_pinned", (v.flags & MC__OBJ_HARD_PIN) != 0);
    cJSON_AddBoolToObject(j, "soft_pinned", (v.flags & MC__OBJ_SOFT_PIN) != 0);
    arr = cJSON_AddArrayToObject(j, "replicas");
    for (uint8_t i = 0; i < v.n; i++) {
        char name[MC_MP_MAX_SEGMENT_NAME + 1];
        uint64_t base = 0;
        cJSON *r = NULL;
        if (!mc__segment_name(m, v.reps[i].seg, name, &base, NULL))
            continue;
        r = cJSON_CreateObject();
        cJSON_AddStringToObject(r, "segment", name);
        cJSON_AddNumberToObject(r, "addr", (double)(base + v.reps[i].off));
        cJSON_AddNumberToObject(r, "size", (double)v.size);
        cJSON_AddStringToObject(r, "status",
                                (v.flags & MC__OBJ_COMPLETE) ? "COMPLETE" : "PROCESSING");
        cJSON_AddItemToArray(arr, r);
    }
    return j;
}

/* The answer for a key with no object: the key itself (when given), error and code. */
static cJSON *mc__missing_json(const char *key) {
    cJSON *j = cJSON_CreateObject();
    if (key)
        mc__key_json_field(j, "key", key);
    cJSON_AddStringToObject(j, "error", "OBJECT_NOT_FOUND");
    cJSON_AddNumberToObject(j, "code", MC_ERR_OBJECT_NOT_FOUND);
    return j;
}

static int mc__all_keys_visit(mc__master_t *m, mc__object_t *o, void *arg) {
    char key[4 * MC_MP_MAX_KEY + 1];
    (void)m;
    if (!(o->flags & MC__OBJ_COMPLETE))
        return 0;
    mc__key_text(o->data, o->key_len, key, 0);
    cJSON_AddItemToArray((cJSON *)arg, cJSON_CreateString(key));
    return 0;
}

static cJSON *mc__segments_json(mc__master_t *m, const char *only) {
    cJSON *arr = cJSON_CreateArray();
    pthread_rwlock_rdlock(&m->registry);
    for (uint32_t i = 0; i < m->n_slots; i++) {
        mc__segment_t *s = m->slots[i];
        cJSON *j;
        if (!s || (only && strcmp(only, s->name) != 0))
            continue;
        j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "name", s->name);
        cJSON_AddNumberToObject(j, "base", (double)s->base);
        cJSON_AddNumberToObject(j, "size", (double)s->alloc.total_bytes);
        pthread_mutex_lock(&s->mu);
        cJSON_AddNumberToObject(j, "used", (double)s->alloc.used_bytes);
        cJSON_AddNumberToObject(j, "allocations", (double)s->alloc.n_allocs);
        cJSON_AddNumberToObject(j, "largest_free", (double)mc__seg_alloc_largest_free(&s->alloc));
        pthread_mutex_unlock(&s->mu);
        cJSON_AddBoolToObject(j, "unmounting", s->dying != 0);
        cJSON_AddItemToArray(arr, j);
    }
    pthread_rwlock_unlock(&m->registry);
    return arr;
}

static void mc__respond_json(mc_http_response_t *resp, int status, cJSON *j) {
    char *text = j ? cJSON_PrintUnformatted(j) : NULL;
    if (!text) {
        mc__http_respond(resp, 500, "text/plain", "out of memory\n", 14);
    } else {
        mc__http_respond(resp, status, "application/json", text, strlen(text));
        cJSON_free(text);
    }
    cJSON_Delete(j);
}

/* Reads the query argument name into arg (nonempty: an empty one counts as missing): 0, or -1
 * after answering 400 with the missing text. */
static int mc__query_arg(const mc_http_request_t *req, mc_http_response_t *resp, const char *name,
                         int nonempty, const char *missing, char *arg, size_t cap) {
    if (mc__http_query_get(req->query, name, arg, cap) == 0 && (!nonempty || arg[0]))
        return 0;
    mc__http_respond(resp, 400, "text/plain", missing, strlen(missing));
    return -1;
}

static void mc__admin_handle(void *ctx, const mc_http_request_t *req, mc_http_response_t *resp) {
    mc__master_t *m = ctx;
    static const char bad_method[] = "only GET is served here\n";
    char *arg = mc__malloc(MC_HTTP_MAX_QUERY); /* a query value: a key, or a list of them */
    const size_t arg_cap = MC_HTTP_MAX_QUERY;
    mc_buf_t b;
    mc__buf_init(&b);
    if (!arg) {
        mc__http_respond(resp, 503, "text/plain", "out of memory\n", 14);
        goto out;
    }
    if (mc__admin_api(m, req, resp, arg, arg_cap)) /* the /api/v1/ routes check their methods */
        goto out;
    if (strcmp(req->method, "GET") != 0 && strcmp(req->method, "HEAD") != 0) {
        mc__http_respond(resp, 405, "text/plain", bad_method, sizeof(bad_method) - 1);
        goto out;
    }
    if (!strcmp(req->path, "/metrics")) {
        mc__metrics_render(m, &b);
        mc__http_respond(resp, b.failed ? 500 : 200, "text/plain; version=0.0.4", b.data, b.len);
    } else if (!strcmp(req->path, "/metrics/summary")) {
        mc__summary(m, &b);
        mc__http_respond(resp, 200, "text/plain", b.data, b.len);
    } else if (mc__admin_compat(m, req, resp, arg, arg_cap, &b)) {
        /* answered in the reference's shape */
    } else if (!strcmp(req->path, "/json/query_key")) {
        cJSON *j = NULL;
        if (mc__query_arg(req, resp, "key", 1, "missing ?key=\n", arg, arg_cap))
            goto out;
        j = mc__key_json(m, arg);
        mc__respond_json(resp, j ? 200 : 404, j ? j : mc__missing_json(arg));
    } else if (!strcmp(req->path, "/json/batch_query_keys")) {
        cJSON *all = NULL;
        char *save = NULL;
        if (mc__query_arg(req, resp, "keys", 0, "missing ?keys=a,b\n", arg, arg_cap))
            goto out;
        all = cJSON_CreateObject();
        for (char *k = strtok_r(arg, ",", &save); k; k = strtok_r(NULL, ",", &save)) {
            cJSON *j = mc__key_json(m, k);
            if (!j)
                j = mc__missing_json(NULL);
            char *name = mc__malloc(4 * strlen(k) + 1);
            if (name)
                mc__key_text((const uint8_t *)k, strlen(k), name, 0);
            cJSON_AddItemToObject(all, name ? name : "?", j);
            mc__free(name);
        }
        mc__respond_json(resp, 200, all);
    } else if (!strcmp(req->path, "/json/get_all_keys")) {
        cJSON *arr = cJSON_CreateArray();
        mc__objects_sweep(m, mc__all_keys_visit, arr);
        mc__respond_json(resp, 200, arr);
    } else if (!strcmp(req->path, "/json/get_all_segments")) {
        mc__respond_json(resp, 200, mc__segments_json(m, NULL));
    } else if (!strcmp(req->path, "/json/query_segment")) {
        cJSON *arr = NULL;
        if (mc__query_arg(req, resp, "segment", 1, "missing ?segment=\n", arg, arg_cap))
            goto out;
        arr = mc__segments_json(m, arg);
        mc__respond_json(resp, cJSON_GetArraySize(arr) ? 200 : 404, arr);
    } else {
        static const char nf[] =
            "not found; try /metrics, /metrics/summary, /health, /role, /ha_status, /leader, "
            "/kv_events/status, /query_key?key=, /batch_query_keys?keys=, /get_all_keys, "
            "/get_all_segments, /get_segments_detail, /query_segment?segment=, "
            "/api/v1/segments/status?segment=, /api/v1/drain_jobs (POST), "
            "/api/v1/drain_jobs/query?job_id=, /api/v1/drain_jobs/cancel?job_id= (POST), "
            "/api/v1/tenant_quotas, /api/v1/remove_all (POST), and the JSON views "
            "/json/query_key?key=, "
            "/json/batch_query_keys?keys=, /json/get_all_keys, /json/get_all_segments, "
            "/json/query_segment?segment=\n";
        mc__http_respond(resp, 404, "text/plain", nf, sizeof(nf) - 1);
    }
out:
    mc__free(arg);
    mc__buf_free(&b);
}

int mc__admin_http_start(mc__master_t *m, uint16_t port) {
    /* a private address keeps /metrics and the key listings off the public network */
    const char *host = m->cfg.metrics_address && *m->cfg.metrics_address ? m->cfg.metrics_address
                                                                         : m->cfg.rpc_address;
    /* bodies: the JSON of a drain job or a tenant quota, never near this */
    return mc__http_server_start(host, port, 1u << 20, mc__admin_handle, m, &m->admin);
}
