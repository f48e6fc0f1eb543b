/* The reference master's /api/v1/ admin routes, with its methods, bodies and answers:
 *   POST /api/v1/drain_jobs            {"segments": [..], "target_segments": [..],
 *                                       "max_concurrency": n} -> {success, job_id, status}
 *   GET  /api/v1/drain_jobs/query?job_id=   the job's status and unit counts
 *   POST /api/v1/drain_jobs/cancel?job_id=
 *   GET  /api/v1/segments/status?segment=   OK / DRAINING / DRAINED / UNMOUNTING
 *   GET|PUT|DELETE /api/v1/tenant_quotas    answered as the reference's master answers with
 *                                           multi-tenancy off (409), after the same checks
 *   POST /api/v1/remove_all?force=          {success, removed_count}
 * Errors are {success: false, error_code, error_message}, with the reference's statuses. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "master/master_internal.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/http.h"
#include "mooncake/error.h"
#include "proto/master_client.h"

static const char *const mc__job_status_names[] = {"CREATED",   "PLANNING", "RUNNING",
                                                   "SUCCEEDED", "FAILED",   "CANCELED"};

static const char *mc__seg_status_name(int st) {
    switch (st) {
    case MC__SEG_OK:
        return "OK";
    case MC__SEG_DRAINING:
        return "DRAINING";
    case MC__SEG_DRAINED:
        return "DRAINED";
    case MC__SEG_UNMOUNTING:
        return "UNMOUNTING";
    default:
        return "UNDEFINED";
    }
}

static int mc__hex_digit(char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* The 8-4-4-4-12 hex form mc__uuid_format writes: 0, or -1. */
static int mc__uuid_parse(const char *s, uint8_t id[16]) {
    int n = 0;
    if (strlen(s) != 36)
        return -1;
    for (int i = 0; i < 36; i += 2) {
        int hi, lo;
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-')
                return -1;
            i--; /* the next pair starts right after the dash */
            continue;
        }
        hi = mc__hex_digit(s[i]);
        lo = mc__hex_digit(s[i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        id[n++] = (uint8_t)(hi << 4 | lo);
    }
    return n == 16 ? 0 : -1;
}

static int mc__job_id_arg(const mc_http_request_t *req, mc_http_response_t *resp, char *arg,
                          size_t cap, uint8_t id[16]) {
    if (mc__http_query_get(req->query, "job_id", arg, cap) == 0 && mc__uuid_parse(arg, id) == 0)
        return 0;
    mc__admin_send_error(resp, 400, MC_ERR_INVALID_PARAMS, "Missing or invalid job_id");
    return -1;
}

/* A JSON array of strings into names (borrowed from the document): its length, or -1. */
static int mc__string_list(const cJSON *arr, const char **names, int cap) {
    int n = 0;
    const cJSON *it;
    if (!cJSON_IsArray(arr))
        return -1;
    cJSON_ArrayForEach(it, arr) {
        if (!cJSON_IsString(it) || n == cap)
            return -1;
        names[n++] = it->valuestring;
    }
    return n;
}

#define MC__API_MAX_NAMES 1024

static void mc__drain_create_route(mc__master_t *m, const mc_http_request_t *req,
                                   mc_http_response_t *resp) {
    const char *segs[MC__API_MAX_NAMES], *targets[MC__API_MAX_NAMES];
    cJSON *doc = cJSON_ParseWithLength((const char *)req->body, req->body_len);
    const cJSON *conc = NULL, *tl = NULL;
    mc__drain_request_t r;
    const char *bad = NULL;
    uint8_t id[16];
    char text[37];
    int n;
    memset(&r, 0, sizeof(r));
    r.max_concurrency = 4; /* the reference's default */
    if (!cJSON_IsObject(doc)) {
        bad = "Invalid JSON body: expected an object";
        goto out;
    }
    n = mc__string_list(cJSON_GetObjectItemCaseSensitive(doc, "segments"), segs, MC__API_MAX_NAMES);
    if (n < 0) {
        bad = "Invalid JSON body: \"segments\" must be a list of segment names";
        goto out;
    }
    r.segments = segs;
    r.n_segments = (uint32_t)n;
    tl = cJSON_GetObjectItemCaseSensitive(doc, "target_segments");
    if (tl && !cJSON_IsNull(tl)) {
        n = mc__string_list(tl, targets, MC__API_MAX_NAMES);
        if (n < 0) {
            bad = "Invalid JSON body: \"target_segments\" must be a list of segment names";
            goto out;
        }
        r.targets = targets;
        r.n_targets = (uint32_t)n;
    }
    conc = cJSON_GetObjectItemCaseSensitive(doc, "max_concurrency");
    if (conc) {
        double v = cJSON_IsNumber(conc) ? conc->valuedouble : -1.0;
        if (v < 0 || v > 4294967295.0 || v != (double)(uint64_t)v) {
            bad = "Invalid JSON body: \"max_concurrency\" must be an integer in 0..2^32-1";
            goto out;
        }
        r.max_concurrency = (uint32_t)v;
    }
    n = mc__drain_create(m, &r, id);
    if (n != 0) {
        mc__admin_send_error(resp, 0, n, NULL);
    } else {
        cJSON *j = cJSON_CreateObject();
        mc__uuid_format(id, text);
        cJSON_AddBoolToObject(j, "success", 1);
        cJSON_AddStringToObject(j, "job_id", text);
        cJSON_AddStringToObject(j, "status", "CREATED");
        cJSON_AddNumberToObject(j, "error_code", 0);
        cJSON_AddStringToObject(j, "error_message", "");
        mc__admin_send_json(resp, 200, j);
    }
out:
    if (bad)
        mc__admin_send_error(resp, 400, MC_ERR_INVALID_PARAMS, bad);
    cJSON_Delete(doc);
}

static void mc__add_segment_name(void *ctx, const char *name) {
    cJSON_AddItemToArray((cJSON *)ctx, cJSON_CreateString(name));
}

static void mc__drain_query_route(mc__master_t *m, const mc_http_request_t *req,
                                  mc_http_response_t *resp, char *arg, size_t cap) {
    mc__drain_info_t info;
    uint8_t id[16];
    cJSON *j, *segs;
    int32_t rc;
    if (mc__job_id_arg(req, resp, arg, cap, id))
        return;
    segs = cJSON_CreateArray();
    rc = mc__drain_query(m, id, &info, mc__add_segment_name, segs);
    if (rc) {
        cJSON_Delete(segs);
        mc__admin_send_error(resp, 0, rc, NULL);
        return;
    }
    j = cJSON_CreateObject();
    cJSON_AddBoolToObject(j, "success", 1);
    cJSON_AddStringToObject(j, "job_id", arg);
    cJSON_AddNumberToObject(j, "type", 0);
    cJSON_AddStringToObject(j, "type_name", "DRAIN");
    cJSON_AddNumberToObject(j, "status", info.status);
    cJSON_AddStringToObject(j, "status_name", mc__job_status_names[info.status]);
    cJSON_AddNumberToObject(j, "created_at_ms_epoch", (double)info.created_ms);
    cJSON_AddNumberToObject(j, "last_updated_at_ms_epoch", (double)info.updated_ms);
    cJSON_AddItemToObject(j, "segments", segs);
    cJSON_AddNumberToObject(j, "succeeded_units", (double)info.succeeded_units);
    cJSON_AddNumberToObject(j, "failed_units", (double)info.failed_units);
    cJSON_AddNumberToObject(j, "blocked_units", (double)info.blocked_units);
    cJSON_AddNumberToObject(j, "active_units", (double)info.active_units);
    cJSON_AddNumberToObject(j, "migrated_bytes", (double)info.migrated_bytes);
    cJSON_AddStringToObject(j, "message", info.message);
    cJSON_AddNumberToObject(j, "error_code", 0);
    cJSON_AddStringToObject(j, "error_message", "");
    mc__admin_send_json(resp, 200, j);
}

static void mc__drain_cancel_route(mc__master_t *m, const mc_http_request_t *req,
                                   mc_http_response_t *resp, char *arg, size_t cap) {
    uint8_t id[16];
    cJSON *j;
    int32_t rc;
    if (mc__job_id_arg(req, resp, arg, cap, id))
        return;
    rc = mc__drain_cancel(m, id);
    if (rc) {
        mc__admin_send_error(resp, 0, rc, NULL);
        return;
    }
    j = cJSON_CreateObject();
    cJSON_AddBoolToObject(j, "success", 1);
    cJSON_AddStringToObject(j, "job_id", arg);
    cJSON_AddStringToObject(j, "status", "CANCELED");
    cJSON_AddNumberToObject(j, "error_code", 0);
    cJSON_AddStringToObject(j, "error_message", "");
    mc__admin_send_json(resp, 200, j);
}

static void mc__segment_status_route(mc__master_t *m, const mc_http_request_t *req,
                                     mc_http_response_t *resp, char *arg, size_t cap) {
    cJSON *j;
    int st;
    if (mc__http_query_get(req->query, "segment", arg, cap) != 0 || !arg[0]) {
        mc__admin_send_error(resp, 400, MC_ERR_INVALID_PARAMS, "Missing segment query parameter");
        return;
    }
    st = strlen(arg) > MC_MP_MAX_SEGMENT_NAME ? -1 : mc__segment_status(m, arg);
    if (st < 0) {
        mc__admin_send_error(resp, 0, MC_ERR_SEGMENT_NOT_FOUND, NULL);
        return;
    }
    j = cJSON_CreateObject();
    cJSON_AddBoolToObject(j, "success", 1);
    cJSON_AddStringToObject(j, "segment", arg);
    cJSON_AddNumberToObject(j, "status", st);
    cJSON_AddStringToObject(j, "status_name", mc__seg_status_name(st));
    cJSON_AddNumberToObject(j, "error_code", 0);
    cJSON_AddStringToObject(j, "error_message", "");
    mc__admin_send_json(resp, 200, j);
}

/* The reference's tenant id rule: printable ASCII, not starting with '_' (reserved). */
static int mc__tenant_ok(const char *t) {
    if (!t[0] || t[0] == '_')
        return 0;
    for (const unsigned char *p = (const unsigned char *)t; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return 0;
    return 1;
}

/* Multi-tenancy is not built here: every route answers, once its input passed the reference's
 * checks, what the reference's master answers with it disabled. */
static void mc__tenant_quotas_route(const mc_http_request_t *req, mc_http_response_t *resp,
                                    char *arg, size_t cap) {
    int has = mc__http_query_get(req->query, "tenant_id", arg, cap) == 0 && arg[0];
    if (!strcmp(req->method, "GET")) {
        if (has && !mc__tenant_ok(arg)) {
            mc__admin_send_error(resp, 400, MC_ERR_INVALID_PARAMS, "Invalid tenant_id");
            return;
        }
    } else if (!has || !mc__tenant_ok(arg)) {
        mc__admin_send_error(resp, 400, MC_ERR_INVALID_PARAMS, "Missing or invalid tenant_id");
        return;
    } else if (!strcmp(req->method, "PUT")) {
        cJSON *doc = cJSON_ParseWithLength((const char *)req->body, req->body_len);
        const cJSON *q = cJSON_GetObjectItemCaseSensitive(doc, "requested_quota_bytes");
        double v = cJSON_IsNumber(q) ? q->valuedouble : -1.0;
        int ok = cJSON_IsObject(doc);
        cJSON_Delete(doc);
        if (!ok) {
            mc__admin_send_error(resp, 400, MC_ERR_INVALID_PARAMS,
                                 "Invalid JSON body: expected an object");
            return;
        }
        if (!(v >= 1.0 && v <= 9223372036854775807.0)) {
            mc__admin_send_error(resp, 400, MC_ERR_INVALID_PARAMS,
                                 "Tenant quota must be in [1, 2^63 - 1] bytes");
            return;
        }
    }
    mc__admin_send_error(resp, 409, MC_ERR_UNAVAILABLE_IN_CURRENT_MODE, NULL);
}

/* Through the master's own dispatch, as a client's remove_all goes (recorded, counted). */
static void mc__remove_all_route(mc__master_t *m, const mc_http_request_t *req,
                                 mc_http_response_t *resp, char *arg, size_t cap) {
    mc__mp_request_t r;
    mc_frame_header_t h;
    mc_buf_t out;
    int64_t removed = 0;
    int rc;
    memset(&r, 0, sizeof(r));
    r.type = MC_MP_REMOVE_ALL;
    r.force = mc__http_query_get(req->query, "force", arg, cap) == 0 &&
              (!strcmp(arg, "true") || !strcmp(arg, "1"));
    /* Every object here is the default tenant's: another tenant holds none. */
    if (mc__http_query_get(req->query, "tenant_id", arg, cap) == 0 && arg[0] &&
        strcmp(arg, "default") != 0) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddBoolToObject(j, "success", 1);
        cJSON_AddNumberToObject(j, "removed_count", 0);
        mc__admin_send_json(resp, 200, j);
        return;
    }
    mc__buf_init(&out);
    rc = mc__master_handle(m, &r, &out);
    if (rc == 0)
        rc = out.failed ? MC_ERR_MEMORY : mc__frame_header_decode(out.data, out.len, out.len, &h);
    if (rc == 0)
        rc = mc__mp_decode_remove_all_reply(&h, out.data + MC_FRAME_HEADER_SIZE,
                                            out.len - MC_FRAME_HEADER_SIZE, &removed);
    mc__buf_free(&out);
    if (rc == MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS) {
        mc__admin_send_error(resp, 503, MC_ERR_UNAVAILABLE_IN_CURRENT_MODE,
                             "service plane is not active");
    } else if (rc != 0) {
        mc__admin_send_error(resp, 500, rc, NULL);
    } else {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddBoolToObject(j, "success", 1);
        cJSON_AddNumberToObject(j, "removed_count", (double)removed);
        mc__admin_send_json(resp, 200, j);
    }
}

static int mc__method_is(const mc_http_request_t *req, mc_http_response_t *resp, const char *want) {
    char msg[64];
    if (!strcmp(req->method, want))
        return 1;
    snprintf(msg, sizeof(msg), "method %s is not allowed here (use %s)", req->method, want);
    mc__admin_send_error(resp, 405, MC_ERR_INVALID_PARAMS, msg);
    return 0;
}

int mc__admin_api(mc__master_t *m, const mc_http_request_t *req, mc_http_response_t *resp,
                  char *arg, size_t cap) {
    const char *path = req->path;
    if (!strcmp(path, "/api/v1/drain_jobs")) {
        if (mc__method_is(req, resp, "POST"))
            mc__drain_create_route(m, req, resp);
    } else if (!strcmp(path, "/api/v1/drain_jobs/query")) {
        if (mc__method_is(req, resp, "GET"))
            mc__drain_query_route(m, req, resp, arg, cap);
    } else if (!strcmp(path, "/api/v1/drain_jobs/cancel")) {
        if (mc__method_is(req, resp, "POST"))
            mc__drain_cancel_route(m, req, resp, arg, cap);
    } else if (!strcmp(path, "/api/v1/segments/status")) {
        if (mc__method_is(req, resp, "GET"))
            mc__segment_status_route(m, req, resp, arg, cap);
    } else if (!strcmp(path, "/api/v1/tenant_quotas")) {
        if (strcmp(req->method, "GET") && strcmp(req->method, "PUT") &&
            strcmp(req->method, "DELETE"))
            mc__admin_send_error(resp, 405, MC_ERR_INVALID_PARAMS, "use GET, PUT or DELETE here");
        else
            mc__tenant_quotas_route(req, resp, arg, cap);
    } else if (!strcmp(path, "/api/v1/remove_all")) {
        if (mc__method_is(req, resp, "POST"))
            mc__remove_all_route(m, req, resp, arg, cap);
    } else {
        return 0;
    }
    return 1;
}
