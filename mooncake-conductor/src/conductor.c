/* The conductor service (conductor.h). */
#include "conductor.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "kv_subscriber.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/http.h"
#include "mooncake/common/log.h"
#include "mooncake/common/msgpack.h"
#include "mooncake/error.h"
#include "prefix_table.h"

#define MAX_REGS 1024
#define FIELD 256
#define MAX_QUERY_HASHES 65536

typedef struct reg {
    char endpoint[FIELD], replay[FIELD], instance[FIELD], tenant[FIELD], model[FIELD], lora[FIELD];
    int64_t block_size, dp_rank;
    int mooncake; /* the shared tier: not an instance row */
    int ctx, src;
    mc_kv_sub_t *sub;
    struct mc_conductor *c;
} reg_t;

struct mc_conductor {
    pthread_mutex_t mu; /* regs, the table, the counters */
    mc_prefix_table_t *pt;
    reg_t *regs[MAX_REGS];
    size_t n_regs;
    mc_http_server_t *http;
    uint64_t events, queries, bad_requests;
};

/* --- events from the subscriptions */

static void on_event(void *arg, const mc_kv_event_t *ev, const mc_kv_batch_t *batch) {
    reg_t *r = arg;
    struct mc_conductor *c = r->c;
    int medium = ev->medium;
    (void)batch;
    if (medium == MC_KV_MEDIUM_UNKNOWN)
        medium = r->mooncake ? MC_KV_MEDIUM_CPU : MC_KV_MEDIUM_GPU; /* vLLM sends GPU or nil */
    pthread_mutex_lock(&c->mu);
    c->events++;
    if (ev->kind == MC_KV_EV_STORED)
        mc__pt_stored(c->pt, r->ctx, r->src, medium, ev->hashes, ev->n_hashes);
    else if (ev->kind == MC_KV_EV_REMOVED)
        mc__pt_removed(c->pt, r->ctx, r->src, medium, ev->hashes, ev->n_hashes);
    else
        mc__pt_clear_source(c->pt, r->src);
    pthread_mutex_unlock(&c->mu);
}

static void on_restart(void *arg) {
    reg_t *r = arg;
    pthread_mutex_lock(&r->c->mu);
    mc__pt_clear_source(r->c->pt, r->src);
    pthread_mutex_unlock(&r->c->mu);
}

/* --- request bodies */

typedef struct body_err {
    const char *error, *reason, *field;
} body_err_t;

static int bad(body_err_t *e, const char *error, const char *reason, const char *field) {
    e->error = error;
    e->reason = reason;
    e->field = field;
    return -1;
}

static int str_field(mc_cursor_t *cur, char *out, const char *name, body_err_t *e) {
    const uint8_t *p;
    uint32_t n;
    if (mc__mp_read_str(cur, &p, &n) != 0 || n >= FIELD || memchr(p, 0, n))
        return bad(e, "field must be a string under 256 bytes", "invalid_field", name);
    memcpy(out, p, n);
    out[n] = 0;
    return 0;
}

static int int_field(mc_cursor_t *cur, int64_t *out, const char *name, body_err_t *e) {
    if (mc__mp_read_i64(cur, out) != 0 || *out < 0 || *out > INT32_MAX)
        return bad(e, "field must be an integer in 0..2147483647", "invalid_field", name);
    return 0;
}

/* nil or a string (a missing optional) */
static int opt_str_field(mc_cursor_t *cur, char *out, const char *name, body_err_t *e) {
    mc_mp_item_t it;
    mc_cursor_t peek = *cur;
    if (mc__mp_next(&peek, &it) == 0 && it.type == MC_MP_NIL) {
        *cur = peek;
        out[0] = 0;
        return 0;
    }
    return str_field(cur, out, name, e);
}

static int parse_register(const uint8_t *p, size_t n, reg_t *r, body_err_t *e) {
    mc_cursor_t cur = {p, p + n};
    mc_mp_item_t top, key;
    char type[FIELD] = "";
    int have = 0;
    r->block_size = r->dp_rank = -1;
    strcpy(r->tenant, "default");
    if (mc__mp_next(&cur, &top) != 0 || top.type != MC_MP_MAP)
        return bad(e, "the body must be a msgpack map", "invalid_body", NULL);
    for (uint32_t i = 0; i < top.n; i++) {
        int rc;
        if (mc__mp_next(&cur, &key) != 0 || key.type != MC_MP_STR)
            return bad(e, "keys must be strings", "invalid_body", NULL);
        if (mc__mp_str_is(&key, "endpoint"))
            rc = str_field(&cur, r->endpoint, "endpoint", e), have |= 1;
        else if (mc__mp_str_is(&key, "type"))
            rc = str_field(&cur, type, "type", e), have |= 2;
        else if (mc__mp_str_is(&key, "modelname"))
            rc = str_field(&cur, r->model, "modelname", e), have |= 4;
        else if (mc__mp_str_is(&key, "instance_id"))
            rc = str_field(&cur, r->instance, "instance_id", e), have |= 8;
        else if (mc__mp_str_is(&key, "block_size"))
            rc = int_field(&cur, &r->block_size, "block_size", e), have |= 16;
        else if (mc__mp_str_is(&key, "dp_rank"))
            rc = int_field(&cur, &r->dp_rank, "dp_rank", e), have |= 32;
        else if (mc__mp_str_is(&key, "replay_endpoint"))
            rc = opt_str_field(&cur, r->replay, "replay_endpoint", e);
        else if (mc__mp_str_is(&key, "lora_name"))
            rc = opt_str_field(&cur, r->lora, "lora_name", e);
        else if (mc__mp_str_is(&key, "tenant_id"))
            rc = opt_str_field(&cur, r->tenant, "tenant_id", e);
        else if (mc__mp_str_is(&key, "hash_profile") || mc__mp_str_is(&key, "cache_group"))
            rc = mc__mp_skip(&cur, 4); /* the hash profile matters for /query, not built yet */
        else
            return bad(e, "unsupported request field", "unknown_field", "?");
        if (rc != 0)
            return -1;
    }
    if (have != 63)
        return bad(e, "endpoint, type, modelname, instance_id, block_size and dp_rank are required",
                   "missing_field", NULL);
    if (!r->tenant[0])
        strcpy(r->tenant, "default");
    if (!strcmp(type, "Mooncake"))
        r->mooncake = 1;
    else if (strcmp(type, "vLLM") && strcmp(type, "SGLang"))
        return bad(e, "type must be vLLM, SGLang or Mooncake", "invalid_field", "type");
    if (!r->endpoint[0] || !r->model[0] || !r->instance[0] || r->block_size < 1)
        return bad(e, "endpoint, modelname and instance_id must be non-empty, block_size positive",
                   "invalid_field", NULL);
    return 0;
}

/* --- answers */

static void respond_buf(mc_http_response_t *resp, int status, mc_buf_t *b) {
    if (b->failed)
        mc__http_respond(resp, 500, "text/plain", "out of memory", 13);
    else
        mc__http_respond(resp, status, "application/msgpack", b->data, b->len);
    mc__buf_free(b);
}

static void respond_err(struct mc_conductor *c, mc_http_response_t *resp, int status,
                        const body_err_t *e) {
    mc_buf_t b;
    mc__buf_init(&b);
    mc__mp_map(&b, e->field ? 3 : 2);
    mc__mp_cstr(&b, "error");
    mc__mp_cstr(&b, e->error);
    mc__mp_cstr(&b, "reason");
    mc__mp_cstr(&b, e->reason);
    if (e->field) {
        mc__mp_cstr(&b, "field");
        mc__mp_cstr(&b, e->field);
    }
    pthread_mutex_lock(&c->mu);
    c->bad_requests++;
    pthread_mutex_unlock(&c->mu);
    respond_buf(resp, status, &b);
}

static void service_key(const reg_t *r, char *out, size_t cap) {
    snprintf(out, cap, "%s|%s|%lld", r->instance, r->tenant, (long long)r->dp_rank);
}

static void do_register(struct mc_conductor *c, const mc_http_request_t *req,
                        mc_http_response_t *resp) {
    body_err_t e = {0};
    reg_t *r = mc__calloc(1, sizeof(*r));
    mc_kv_sub_ops_t ops = {on_event, on_restart};
    char key[3 * FIELD];
    if (!r) {
        mc__http_respond(resp, 500, "text/plain", "out of memory", 13);
        return;
    }
    r->c = c;
    if (parse_register(req->body, req->body_len, r, &e) != 0) {
        mc__free(r);
        respond_err(c, resp, 400, &e);
        return;
    }
    service_key(r, key, sizeof(key));
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->n_regs; i++) {
        char other[3 * FIELD];
        service_key(c->regs[i], other, sizeof(other));
        if (!strcmp(other, key) || !strcmp(c->regs[i]->endpoint, r->endpoint)) {
            pthread_mutex_unlock(&c->mu);
            mc__free(r);
            e = (body_err_t){"the service key or endpoint is registered already",
                             "invalid_registration", NULL};
            respond_err(c, resp, 400, &e);
            return;
        }
    }
    r->ctx = mc__pt_context(c->pt, r->tenant, r->model, r->lora, (uint32_t)r->block_size, "");
    r->src = mc__pt_source(c->pt, r->instance, (uint32_t)r->dp_rank);
    int full = c->n_regs == MAX_REGS || r->ctx < 0 || r->src < 0;
    if (!full)
        c->regs[c->n_regs++] = r;
    pthread_mutex_unlock(&c->mu);
    if (full) {
        mc__free(r);
        e = (body_err_t){"too many registrations", "invalid_registration", NULL};
        respond_err(c, resp, 400, &e);
        return;
    }
    int rc = mc__kv_sub_start(r->endpoint, r->replay, &ops, r, &r->sub);
    if (rc != 0) {
        pthread_mutex_lock(&c->mu);
        c->regs[--c->n_regs] = NULL; /* it was the last one added; nothing ran on it */
        pthread_mutex_unlock(&c->mu);
        mc__free(r);
        e = (body_err_t){"the endpoint is no tcp://host:port", "invalid_field", "endpoint"};
        respond_err(c, resp, 400, &e);
        return;
    }
    MC_INFO("conductor: registered %s (%s) on %s", key, r->mooncake ? "Mooncake" : "engine",
            r->endpoint);
    mc_buf_t b;
    mc__buf_init(&b);
    mc__mp_map(&b, 2);
    mc__mp_cstr(&b, "status");
    mc__mp_cstr(&b, "registered successfully");
    mc__mp_cstr(&b, "instance_id");
    mc__mp_cstr(&b, r->instance);
    respond_buf(resp, 200, &b);
}

static void do_unregister(struct mc_conductor *c, const mc_http_request_t *req,
                          mc_http_response_t *resp) {
    body_err_t e = {0};
    reg_t probe = {0}, *r = NULL;
    mc_cursor_t cur = {req->body, req->body + req->body_len};
    mc_mp_item_t top, k;
    int have = 0;
    strcpy(probe.tenant, "default");
    if (mc__mp_next(&cur, &top) != 0 || top.type != MC_MP_MAP) {
        e = (body_err_t){"the body must be a msgpack map", "invalid_body", NULL};
        respond_err(c, resp, 400, &e);
        return;
    }
    for (uint32_t i = 0; i < top.n; i++) {
        int rc;
        if (mc__mp_next(&cur, &k) != 0 || k.type != MC_MP_STR)
            rc = bad(&e, "keys must be strings", "invalid_body", NULL);
        else if (mc__mp_str_is(&k, "instance_id"))
            rc = str_field(&cur, probe.instance, "instance_id", &e), have |= 1;
        else if (mc__mp_str_is(&k, "dp_rank"))
            rc = int_field(&cur, &probe.dp_rank, "dp_rank", &e), have |= 2;
        else if (mc__mp_str_is(&k, "tenant_id"))
            rc = opt_str_field(&cur, probe.tenant, "tenant_id", &e);
        else
            rc = bad(&e, "unsupported request field", "unknown_field", "?");
        if (rc != 0) {
            respond_err(c, resp, 400, &e);
            return;
        }
    }
    if (have != 3) {
        e = (body_err_t){"instance_id and dp_rank are required", "missing_field", NULL};
        respond_err(c, resp, 400, &e);
        return;
    }
    if (!probe.tenant[0])
        strcpy(probe.tenant, "default");
    char key[3 * FIELD];
    service_key(&probe, key, sizeof(key));
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->n_regs; i++) {
        char other[3 * FIELD];
        service_key(c->regs[i], other, sizeof(other));
        if (!strcmp(other, key)) {
            r = c->regs[i];
            c->regs[i] = c->regs[--c->n_regs];
            break;
        }
    }
    pthread_mutex_unlock(&c->mu);
    if (!r) {
        e = (body_err_t){"no such registration", "not_found", NULL};
        respond_err(c, resp, 404, &e);
        return;
    }
    /* the subscription stops first (its callbacks take the lock), then what it held goes */
    mc__kv_sub_stop(r->sub);
    pthread_mutex_lock(&c->mu);
    mc__pt_clear_source(c->pt, r->src);
    pthread_mutex_unlock(&c->mu);
    mc__free(r);
    mc_buf_t b;
    mc__buf_init(&b);
    mc__mp_map(&b, 2);
    mc__mp_cstr(&b, "status");
    mc__mp_cstr(&b, "unregistered successfully");
    mc__mp_cstr(&b, "removed_instances");
    mc__mp_array(&b, 1);
    mc__mp_cstr(&b, key);
    respond_buf(resp, 200, &b);
}

static void do_query_by_hash(struct mc_conductor *c, const mc_http_request_t *req,
                             mc_http_response_t *resp) {
    body_err_t e = {0};
    mc_cursor_t cur = {req->body, req->body + req->body_len};
    mc_mp_item_t top, k, arr;
    char model[FIELD] = "", tenant[FIELD] = "default", lora[FIELD] = "", salt[FIELD] = "";
    int64_t block_size = -1;
    uint64_t *hashes = NULL;
    uint32_t n = 0;
    int have = 0;
    if (mc__mp_next(&cur, &top) != 0 || top.type != MC_MP_MAP) {
        e = (body_err_t){"the body must be a msgpack map", "invalid_body", NULL};
        goto fail;
    }
    for (uint32_t i = 0; i < top.n; i++) {
        int rc = 0;
        if (mc__mp_next(&cur, &k) != 0 || k.type != MC_MP_STR) {
            rc = bad(&e, "keys must be strings", "invalid_body", NULL);
        } else if (mc__mp_str_is(&k, "model")) {
            rc = str_field(&cur, model, "model", &e), have |= 1;
        } else if (mc__mp_str_is(&k, "block_size")) {
            rc = int_field(&cur, &block_size, "block_size", &e), have |= 2;
        } else if (mc__mp_str_is(&k, "tenant_id")) {
            rc = opt_str_field(&cur, tenant, "tenant_id", &e);
        } else if (mc__mp_str_is(&k, "lora_name")) {
            rc = opt_str_field(&cur, lora, "lora_name", &e);
        } else if (mc__mp_str_is(&k, "cache_salt")) {
            rc = opt_str_field(&cur, salt, "cache_salt", &e);
        } else if (mc__mp_str_is(&k, "block_hashes")) {
            have |= 4;
            if (mc__mp_next(&cur, &arr) != 0 || arr.type != MC_MP_ARRAY ||
                arr.n > MAX_QUERY_HASHES || (hashes && (rc = -1))) {
                rc = bad(&e, "block_hashes must be a list of at most 65536 integers",
                         "invalid_field", "block_hashes");
            } else if (!(hashes = mc__malloc((arr.n ? arr.n : 1) * sizeof(*hashes)))) {
                rc = bad(&e, "out of memory", "internal", NULL);
            } else {
                for (n = 0; n < arr.n && rc == 0; n++) {
                    int64_t v;
                    mc_mp_item_t h;
                    if (mc__mp_next(&cur, &h) == 0 && h.type == MC_MP_UINT)
                        hashes[n] = h.u;
                    else if (h.type == MC_MP_INT && (v = h.i, 1))
                        hashes[n] = (uint64_t)v;
                    else
                        rc = bad(&e, "block_hashes must hold integers", "invalid_field",
                                 "block_hashes");
                }
            }
        } else {
            rc = bad(&e, "unsupported request field", "unknown_field", "?");
        }
        if (rc != 0)
            goto fail;
    }
    if (have != 7) {
        e = (body_err_t){"model, block_size and block_hashes are required", "missing_field", NULL};
        goto fail;
    }
    if (!tenant[0])
        strcpy(tenant, "default");
    {
        mc_buf_t b;
        mc_pt_match_t *m = mc__malloc(MAX_REGS * sizeof(*m));
        size_t nm = 0, rows = 0, shared = 0;
        if (!m) {
            e = (body_err_t){"out of memory", "internal", NULL};
            goto fail;
        }
        mc__buf_init(&b);
        pthread_mutex_lock(&c->mu);
        c->queries++;
        int ctx = mc__pt_context(c->pt, tenant, model, lora, (uint32_t)block_size, salt);
        if (ctx >= 0)
            nm = mc__pt_query(c->pt, ctx, hashes, n, m, MAX_REGS);
        /* one row per registered engine instance (all its ranks), one per shared tier */
        for (size_t i = 0; i < c->n_regs; i++)
            if (c->regs[i]->ctx == ctx)
                c->regs[i]->mooncake ? shared++ : rows++;
        mc__mp_map(&b, 2);
        mc__mp_cstr(&b, "instances");
        mc__mp_map(&b, (uint32_t)rows);
        for (int pass = 0; pass < 2; pass++) {
            if (pass == 1) {
                mc__mp_cstr(&b, "shared");
                mc__mp_map(&b, (uint32_t)shared);
            }
            for (size_t i = 0; i < c->n_regs; i++) {
                reg_t *r = c->regs[i];
                const mc_pt_match_t *hit = NULL;
                if (r->ctx != ctx || r->mooncake != pass)
                    continue;
                for (size_t j = 0; j < nm; j++)
                    if ((int)m[j].source == r->src)
                        hit = &m[j];
                char id[FIELD + 24];
                snprintf(id, sizeof(id), pass ? "%s" : "%s|%lld", r->instance,
                         (long long)r->dp_rank);
                mc__mp_cstr(&b, id);
                mc__mp_map(&b, pass ? 2 : 5);
                if (!pass) {
                    mc__mp_cstr(&b, "longest_matched");
                    mc__mp_uint(&b, hit ? (uint64_t)hit->any * (uint64_t)block_size : 0);
                    mc__mp_cstr(&b, "dp_rank");
                    mc__mp_uint(&b, (uint64_t)r->dp_rank);
                    mc__mp_cstr(&b, "gpu");
                    mc__mp_uint(&b,
                                hit ? (uint64_t)hit->medium[MC_KV_MEDIUM_GPU] * (uint64_t)block_size
                                    : 0);
                }
                mc__mp_cstr(&b, "cpu");
                mc__mp_uint(&b, hit ? (uint64_t)hit->medium[MC_KV_MEDIUM_CPU] * (uint64_t)block_size
                                    : 0);
                mc__mp_cstr(&b, "disk");
                mc__mp_uint(
                    &b, hit ? (uint64_t)hit->medium[MC_KV_MEDIUM_DISK] * (uint64_t)block_size : 0);
            }
        }
        pthread_mutex_unlock(&c->mu);
        mc__free(m);
        mc__free(hashes);
        respond_buf(resp, 200, &b);
        return;
    }
fail:
    mc__free(hashes);
    respond_err(c, resp, 400, &e);
}

static void do_services(struct mc_conductor *c, mc_http_response_t *resp) {
    mc_buf_t b;
    mc__buf_init(&b);
    pthread_mutex_lock(&c->mu);
    mc__mp_array(&b, (uint32_t)c->n_regs);
    for (size_t i = 0; i < c->n_regs; i++) {
        reg_t *r = c->regs[i];
        mc_kv_sub_stats_t st;
        mc__kv_sub_stats(r->sub, &st);
        mc__mp_map(&b, 12);
        mc__mp_cstr(&b, "endpoint");
        mc__mp_cstr(&b, r->endpoint);
        mc__mp_cstr(&b, "replay_endpoint");
        mc__mp_cstr(&b, r->replay);
        mc__mp_cstr(&b, "type");
        mc__mp_cstr(&b, r->mooncake ? "Mooncake" : "vLLM");
        mc__mp_cstr(&b, "modelname");
        mc__mp_cstr(&b, r->model);
        mc__mp_cstr(&b, "instance_id");
        mc__mp_cstr(&b, r->instance);
        mc__mp_cstr(&b, "tenant_id");
        mc__mp_cstr(&b, r->tenant);
        mc__mp_cstr(&b, "lora_name");
        mc__mp_cstr(&b, r->lora);
        mc__mp_cstr(&b, "block_size");
        mc__mp_uint(&b, (uint64_t)r->block_size);
        mc__mp_cstr(&b, "dp_rank");
        mc__mp_uint(&b, (uint64_t)r->dp_rank);
        mc__mp_cstr(&b, "last_seq");
        mc__mp_uint(&b, st.last_seq);
        mc__mp_cstr(&b, "events");
        mc__mp_uint(&b, st.events);
        mc__mp_cstr(&b, "lost");
        mc__mp_uint(&b, st.lost);
    }
    pthread_mutex_unlock(&c->mu);
    respond_buf(resp, 200, &b);
}

static void do_metrics(struct mc_conductor *c, mc_http_response_t *resp) {
    char text[4096];
    mc_pt_stats_t pt;
    mc_kv_sub_stats_t sum = {0};
    pthread_mutex_lock(&c->mu);
    mc__pt_stats(c->pt, &pt);
    for (size_t i = 0; i < c->n_regs; i++) {
        mc_kv_sub_stats_t st;
        mc__kv_sub_stats(c->regs[i]->sub, &st);
        sum.batches += st.batches;
        sum.malformed_batches += st.malformed_batches;
        sum.malformed_events += st.malformed_events;
        sum.gaps += st.gaps;
        sum.replayed += st.replayed;
        sum.lost += st.lost;
        sum.restarts += st.restarts;
    }
    int n = snprintf(
        text, sizeof(text),
        "# TYPE mooncake_conductor_registrations gauge\nmooncake_conductor_registrations %zu\n"
        "# TYPE mooncake_conductor_blocks gauge\nmooncake_conductor_blocks %" PRIu64 "\n"
        "# TYPE mooncake_conductor_evicted_blocks_total counter\n"
        "mooncake_conductor_evicted_blocks_total %" PRIu64 "\n"
        "# TYPE mooncake_conductor_events_total counter\nmooncake_conductor_events_total %" PRIu64
        "\n# TYPE mooncake_conductor_batches_total counter\n"
        "mooncake_conductor_batches_total %" PRIu64 "\n"
        "# TYPE mooncake_conductor_malformed_batches_total counter\n"
        "mooncake_conductor_malformed_batches_total %" PRIu64 "\n"
        "# TYPE mooncake_conductor_malformed_events_total counter\n"
        "mooncake_conductor_malformed_events_total %" PRIu64 "\n"
        "# TYPE mooncake_conductor_sequence_gaps_total counter\n"
        "mooncake_conductor_sequence_gaps_total %" PRIu64 "\n"
        "# TYPE mooncake_conductor_replayed_batches_total counter\n"
        "mooncake_conductor_replayed_batches_total %" PRIu64 "\n"
        "# TYPE mooncake_conductor_lost_batches_total counter\n"
        "mooncake_conductor_lost_batches_total %" PRIu64 "\n"
        "# TYPE mooncake_conductor_publisher_restarts_total counter\n"
        "mooncake_conductor_publisher_restarts_total %" PRIu64 "\n"
        "# TYPE mooncake_conductor_queries_total counter\nmooncake_conductor_queries_total %" PRIu64
        "\n# TYPE mooncake_conductor_bad_requests_total counter\n"
        "mooncake_conductor_bad_requests_total %" PRIu64 "\n",
        c->n_regs, pt.blocks, pt.evicted, c->events, sum.batches, sum.malformed_batches,
        sum.malformed_events, sum.gaps, sum.replayed, sum.lost, sum.restarts, c->queries,
        c->bad_requests);
    pthread_mutex_unlock(&c->mu);
    mc__http_respond(resp, 200, "text/plain; version=0.0.4", text, (size_t)n);
}

static void handle(void *ctx, const mc_http_request_t *req, mc_http_response_t *resp) {
    struct mc_conductor *c = ctx;
    int post = !strcmp(req->method, "POST"), get = !strcmp(req->method, "GET");
    if (post && !strcmp(req->path, "/register"))
        do_register(c, req, resp);
    else if (post && !strcmp(req->path, "/unregister"))
        do_unregister(c, req, resp);
    else if (post && !strcmp(req->path, "/query_by_hash"))
        do_query_by_hash(c, req, resp);
    else if (get && !strcmp(req->path, "/services"))
        do_services(c, resp);
    else if (get && !strcmp(req->path, "/metrics"))
        do_metrics(c, resp);
    else if (get && !strcmp(req->path, "/health"))
        mc__http_respond(resp, 200, "text/plain", "OK", 2);
    else
        mc__http_respond(resp, 404, "text/plain", "not found", 9);
}

int mc__conductor_start(const mc_conductor_config_t *cfg, mc_conductor_t **out) {
    struct mc_conductor *c;
    int rc;
    *out = NULL;
    if (cfg->port < 0 || cfg->port > 65535 || cfg->max_blocks < 1)
        return MC_ERR_INVALID_ARGUMENT;
    if (!(c = mc__calloc(1, sizeof(*c))))
        return MC_ERR_MEMORY;
    pthread_mutex_init(&c->mu, NULL);
    rc = mc__pt_new((size_t)cfg->max_blocks, &c->pt);
    if (rc == 0)
        rc = mc__http_server_start(cfg->host, (uint16_t)cfg->port, 16u << 20, handle, c, &c->http);
    if (rc != 0) {
        mc__pt_free(c->pt);
        pthread_mutex_destroy(&c->mu);
        mc__free(c);
        return rc;
    }
    *out = c;
    return 0;
}

uint16_t mc__conductor_port(const mc_conductor_t *c) {
    return mc__http_server_port(c->http);
}

void mc__conductor_stop(mc_conductor_t *c) {
    if (!c)
        return;
    mc__http_server_stop(c->http);
    for (size_t i = 0; i < c->n_regs; i++) {
        mc__kv_sub_stop(c->regs[i]->sub);
        mc__free(c->regs[i]);
    }
    mc__pt_free(c->pt);
    pthread_mutex_destroy(&c->mu);
    mc__free(c);
}
