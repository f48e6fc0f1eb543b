/* The conductor service (conductor.h). */
#include "conductor.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "block_hash.h"
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
#define MAX_QUERY_TOKENS (4u << 20)
/* a registration without hash_profile: vLLM's own default for its SHA-256 modes */
#define DEFAULT_SEED "vllm-none-hash"

typedef struct reg {
    char endpoint[FIELD], replay[FIELD], instance[FIELD], tenant[FIELD], model[FIELD], lora[FIELD];
    int64_t block_size, dp_rank;
    int64_t cache_group; /* -1: null */
    int mooncake;        /* the shared tier: not an instance row */
    char strategy[32], algorithm[32], projection[32], seed[FIELD];
    mc_bh_profile_t prof;
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
    long index1; /* the array element at fault, plus one (0: none) */
} body_err_t;

static int bad(body_err_t *e, const char *error, const char *reason, const char *field) {
    e->error = error;
    e->reason = reason;
    e->field = field;
    return -1;
}

/* The reference names the field: "unsupported request field: NAME", field NAME. The text lives
 * in this thread's buffers until its next request, which comes after the answer is sent. */
static int unknown_field(body_err_t *e, const mc_mp_item_t *key) {
    static _Thread_local char name[64], msg[96];
    size_t n = key->n < sizeof(name) - 1 ? key->n : sizeof(name) - 1;
    memcpy(name, key->p, n);
    name[n] = 0;
    for (size_t i = 0; i < n; i++)
        if (name[i] < 0x20 || name[i] == 0x7f)
            name[i] = '?'; /* a control byte in a key is not echoed */
    snprintf(msg, sizeof(msg), "unsupported request field: %s", name);
    return bad(e, msg, "unknown_field", name);
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

/* hash_profile: exactly strategy, algorithm, python_hash_seed and index_projection */
static int parse_profile(mc_cursor_t *cur, reg_t *r, body_err_t *e) {
    mc_mp_item_t m, k;
    int have = 0, rc;
    const char *why = "";
    if (mc__mp_next(cur, &m) != 0 || m.type != MC_MP_MAP)
        return bad(e, "hash_profile must be a map", "invalid_type", "hash_profile");
    for (uint32_t i = 0; i < m.n; i++) {
        char tmp[FIELD];
        if (mc__mp_next(cur, &k) != 0 || k.type != MC_MP_STR)
            return bad(e, "hash_profile keys must be strings", "invalid_field", "hash_profile");
        if (mc__mp_str_is(&k, "python_hash_seed")) {
            rc = str_field(cur, r->seed, "hash_profile", e), have |= 1;
        } else {
            char *dst = mc__mp_str_is(&k, "strategy")           ? (have |= 2, r->strategy)
                        : mc__mp_str_is(&k, "algorithm")        ? (have |= 4, r->algorithm)
                        : mc__mp_str_is(&k, "index_projection") ? (have |= 8, r->projection)
                                                                : NULL;
            if (!dst)
                return bad(e, "unsupported hash_profile field", "unknown_field", "hash_profile");
            rc = str_field(cur, tmp, "hash_profile", e);
            if (rc == 0 && strlen(tmp) >= 32)
                return bad(e, "unsupported hash_profile value", "invalid_field", "hash_profile");
            if (rc == 0)
                strcpy(dst, tmp);
        }
        if (rc != 0)
            return -1;
    }
    if (have != 15)
        return bad(e, "hash_profile needs strategy, algorithm, python_hash_seed, index_projection",
                   "missing_field", "hash_profile");
    if (!r->seed[0])
        return bad(e, "python_hash_seed must not be empty", "invalid_field", "hash_profile");
    int algo = mc__bh_algo(r->strategy, r->algorithm, r->projection, &why);
    if (algo < 0)
        return bad(e, why, "invalid_field", "hash_profile");
    if (mc__bh_profile_init(&r->prof, algo, r->seed) != 0)
        return bad(e, "python_hash_seed too long", "invalid_field", "hash_profile");
    return 0;
}

static int parse_register(const uint8_t *p, size_t n, reg_t *r, body_err_t *e) {
    mc_cursor_t cur = {p, p + n};
    mc_mp_item_t top, key;
    char type[FIELD] = "";
    int have = 0;
    r->block_size = r->dp_rank = r->cache_group = -1;
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
        else if (mc__mp_str_is(&key, "hash_profile"))
            rc = parse_profile(&cur, r, e), have |= 64;
        else if (mc__mp_str_is(&key, "cache_group")) {
            mc_mp_item_t g;
            rc = mc__mp_next(&cur, &g) != 0 ||
                         !(g.type == MC_MP_NIL || (g.type == MC_MP_UINT && g.u == 0))
                     ? bad(e, "cache_group must be 0 or nil", "invalid_field", "cache_group")
                     : 0;
            if (rc == 0 && g.type == MC_MP_UINT)
                r->cache_group = 0;
        } else
            return unknown_field(e, &key);
        if (rc != 0)
            return -1;
    }
    if (!(have & 64)) { /* ours: optional, vLLM's default profile */
        strcpy(r->strategy, "vllm_v1");
        strcpy(r->algorithm, "sha256_cbor");
        strcpy(r->projection, "low64_be");
        strcpy(r->seed, DEFAULT_SEED);
        mc__bh_profile_init(&r->prof, MC_BH_SHA256_CBOR, DEFAULT_SEED);
    }
    if ((have & 63) != 63)
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
    mc__mp_map(&b, 2 + (e->field ? 1u : 0u) + (e->index1 ? 1u : 0u));
    mc__mp_cstr(&b, "error");
    mc__mp_cstr(&b, e->error);
    mc__mp_cstr(&b, "reason");
    mc__mp_cstr(&b, e->reason);
    if (e->field) {
        mc__mp_cstr(&b, "field");
        mc__mp_cstr(&b, e->field);
    }
    if (e->index1) {
        mc__mp_cstr(&b, "index");
        mc__mp_uint(&b, (uint64_t)(e->index1 - 1));
    }
    pthread_mutex_lock(&c->mu);
    c->bad_requests++;
    pthread_mutex_unlock(&c->mu);
    respond_buf(resp, status, &b);
}

static void service_key(const reg_t *r, char *out, size_t cap) {
    snprintf(out, cap, "%s|%s|%lld", r->instance, r->tenant, (long long)r->dp_rank);
}

static void respond_registered(mc_http_response_t *resp, const char *instance) {
    mc_buf_t b;
    mc__buf_init(&b);
    mc__mp_map(&b, 2);
    mc__mp_cstr(&b, "status");
    mc__mp_cstr(&b, "registered successfully");
    mc__mp_cstr(&b, "instance_id");
    mc__mp_cstr(&b, instance);
    respond_buf(resp, 200, &b);
}

/* a cache-sharing group: the fields that make the same hash mean the same block */
static int same_group(const reg_t *a, const reg_t *b) {
    return !strcmp(a->tenant, b->tenant) && !strcmp(a->model, b->model) &&
           !strcmp(a->lora, b->lora) && a->block_size == b->block_size;
}

static int same_profile(const reg_t *a, const reg_t *b) {
    return a->prof.algo == b->prof.algo && !strcmp(a->seed, b->seed);
}

static int same_registration(const reg_t *a, const reg_t *b) {
    return same_group(a, b) && same_profile(a, b) && !strcmp(a->endpoint, b->endpoint) &&
           !strcmp(a->replay, b->replay) && !strcmp(a->instance, b->instance) &&
           a->dp_rank == b->dp_rank && a->mooncake == b->mooncake &&
           a->cache_group == b->cache_group;
}

/* Registers the source a /register body describes: 200 (instance filled in), or 400 / 500 with
 * *e. The HTTP endpoint and the config file's static subscriptions both come here. */
static int register_body(struct mc_conductor *c, const uint8_t *body, size_t len, body_err_t *e,
                         char instance[FIELD]) {
    reg_t *r = mc__calloc(1, sizeof(*r));
    mc_kv_sub_ops_t ops = {on_event, on_restart};
    char key[3 * FIELD];
    if (!r) {
        *e = (body_err_t){"out of memory", "internal", NULL, 0};
        return 500;
    }
    r->c = c;
    if (parse_register(body, len, r, e) != 0) {
        mc__free(r);
        return 400;
    }
    service_key(r, key, sizeof(key));
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->n_regs; i++) {
        char other[3 * FIELD];
        const reg_t *o = c->regs[i];
        service_key(o, other, sizeof(other));
        int clash = !strcmp(other, key) || !strcmp(o->endpoint, r->endpoint);
        if (clash && same_registration(o, r)) { /* the same registration again: as it was */
            pthread_mutex_unlock(&c->mu);
            strcpy(instance, r->instance);
            mc__free(r);
            return 200;
        }
        if (clash || (same_group(o, r) && !same_profile(o, r))) {
            pthread_mutex_unlock(&c->mu);
            mc__free(r);
            *e = (body_err_t){clash ? "the service key or endpoint is registered already"
                                    : "the cache-sharing group has another hash profile",
                              "invalid_registration", NULL, 0};
            return 400;
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
        *e = (body_err_t){"too many registrations", "invalid_registration", NULL, 0};
        return 400;
    }
    int rc = mc__kv_sub_start(r->endpoint, r->replay, &ops, r, &r->sub);
    if (rc != 0) {
        pthread_mutex_lock(&c->mu);
        c->regs[--c->n_regs] = NULL; /* it was the last one added; nothing ran on it */
        pthread_mutex_unlock(&c->mu);
        mc__free(r);
        *e = (body_err_t){"the endpoint is no tcp://host:port", "invalid_field", "endpoint", 0};
        return 400;
    }
    MC_INFO("conductor: registered %s (%s) on %s", key, r->mooncake ? "Mooncake" : "engine",
            r->endpoint);
    strcpy(instance, r->instance);
    return 200;
}

static void do_register(struct mc_conductor *c, const mc_http_request_t *req,
                        mc_http_response_t *resp) {
    body_err_t e = {0};
    char instance[FIELD];
    int status = register_body(c, req->body, req->body_len, &e, instance);
    if (status == 200)
        respond_registered(resp, instance);
    else
        respond_err(c, resp, status, &e);
}

int mc__conductor_register(mc_conductor_t *c, const uint8_t *body, size_t len, const char **why) {
    body_err_t e = {0};
    char instance[FIELD];
    int status = register_body(c, body, len, &e, instance);
    *why = status == 200 ? "" : e.error;
    return status == 200 ? 0 : status == 500 ? MC_ERR_MEMORY : MC_ERR_INVALID_ARGUMENT;
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
        e = (body_err_t){"the body must be a msgpack map", "invalid_body", NULL, 0};
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
            rc = unknown_field(&e, &k);
        if (rc != 0) {
            respond_err(c, resp, 400, &e);
            return;
        }
    }
    if (have != 3) {
        e = (body_err_t){"instance_id and dp_rank are required", "missing_field", NULL, 0};
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
        e = (body_err_t){"no such registration", "not_found", NULL, 0};
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
        e = (body_err_t){"the body must be a msgpack map", "invalid_body", NULL, 0};
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
            rc = unknown_field(&e, &k);
        }
        if (rc != 0)
            goto fail;
    }
    if (have != 7) {
        e = (body_err_t){"model, block_size and block_hashes are required", "missing_field", NULL,
                         0};
        goto fail;
    }
    if (!tenant[0])
        strcpy(tenant, "default");
    {
        mc_buf_t b;
        mc_pt_match_t *m = mc__malloc(MAX_REGS * sizeof(*m));
        size_t nm = 0, rows = 0, shared = 0;
        if (!m) {
            e = (body_err_t){"out of memory", "internal", NULL, 0};
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

/* token_ids: bin of little-endian int32 (4 bytes a token), or an array of int32 */
static int read_tokens(mc_cursor_t *cur, int32_t **out, size_t *n, body_err_t *e) {
    mc_mp_item_t it;
    if (*out)
        return bad(e, "token_ids given twice", "invalid_field", "token_ids");
    if (mc__mp_next(cur, &it) != 0)
        return bad(e, "Invalid msgpack object", "invalid_msgpack", NULL);
    if (it.type != MC_MP_BIN && it.type != MC_MP_ARRAY)
        return bad(e, "token_ids must be bin (little-endian int32) or an array of integers",
                   "invalid_type", "token_ids");
    if (it.type == MC_MP_BIN && it.n % 4)
        return bad(e, "token_ids bytes must be a whole number of int32", "invalid_field",
                   "token_ids");
    *n = it.type == MC_MP_BIN ? it.n / 4 : it.n;
    if (*n > MAX_QUERY_TOKENS)
        return bad(e, "token_ids holds too many tokens", "invalid_field", "token_ids");
    if (!(*out = mc__malloc((*n ? *n : 1) * sizeof(**out))))
        return bad(e, "out of memory", "internal", NULL);
    for (size_t i = 0; i < *n; i++) {
        mc_mp_item_t t;
        if (it.type == MC_MP_BIN) {
            const uint8_t *b = it.p + 4 * i;
            (*out)[i] = (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                                  (uint32_t)b[3] << 24);
            continue;
        }
        if (mc__mp_next(cur, &t) == 0 && t.type == MC_MP_UINT && t.u <= INT32_MAX) {
            (*out)[i] = (int32_t)t.u;
        } else if (t.type == MC_MP_INT && t.i >= INT32_MIN) {
            (*out)[i] = (int32_t)t.i;
        } else {
            e->index1 = (long)i + 1;
            return bad(e, "token_ids element must be a 32-bit integer", "invalid_type",
                       "token_ids");
        }
    }
    return 0;
}

/* One engine rank's ordered walk: its leading GPU blocks, then from the first GPU miss the blocks
 * held on CPU (its own or a shared tier's copy), then from the first CPU miss those on disk. A
 * request reuses a prefix only in that order, so a block past the first miss of every tier counts
 * for nothing. out: block counts after each phase. */
static void rank_walk(mc_prefix_table_t *pt, int ctx, int src, const uint8_t *shared,
                      const uint64_t *h, long n, uint32_t out[3]) {
    long i = 0;
    while (i < n && (mc__pt_held(pt, ctx, h[i], src, NULL) & (1u << MC_KV_MEDIUM_GPU)))
        i++;
    out[0] = (uint32_t)i;
    while (i < n && (mc__pt_held(pt, ctx, h[i], src, shared) & (1u << MC_KV_MEDIUM_CPU)))
        i++;
    out[1] = (uint32_t)i;
    while (i < n && (mc__pt_held(pt, ctx, h[i], src, shared) & (1u << MC_KV_MEDIUM_DISK)))
        i++;
    out[2] = (uint32_t)i;
}

static void put_tiers(mc_buf_t *b, const uint32_t t[3], uint64_t bs) {
    static const char *names[3] = {"gpu", "cpu", "disk"};
    for (int k = 0; k < 3; k++) {
        mc__mp_cstr(b, names[k]);
        mc__mp_uint(b, t[k] * bs);
    }
}

/* the {instances: ...} answer for the engine ranks of a group (res: each regs[i]'s walk) */
static void put_instances(mc_buf_t *b, reg_t *const *regs, const uint32_t (*res)[3], size_t n,
                          const uint8_t *in, uint64_t bs) {
    size_t rows = 0;
    for (size_t i = 0; i < n; i++) {
        size_t j = 0;
        while (j < i && !(in[j] && !strcmp(regs[j]->instance, regs[i]->instance)))
            j++;
        rows += in[i] && j == i;
    }
    mc__mp_map(b, 1);
    mc__mp_cstr(b, "instances");
    mc__mp_map(b, (uint32_t)rows);
    for (size_t i = 0; i < n; i++) {
        size_t j = 0, ranks = 0;
        uint32_t best[3] = {0, 0, 0};
        while (j < i && !(in[j] && !strcmp(regs[j]->instance, regs[i]->instance)))
            j++;
        if (!in[i] || j < i)
            continue; /* not asked, or the instance was written with its first rank */
        for (j = i; j < n; j++)
            if (in[j] && !strcmp(regs[j]->instance, regs[i]->instance)) {
                ranks++;
                for (int k = 0; k < 3; k++)
                    best[k] = res[j][k] > best[k] ? res[j][k] : best[k];
            }
        mc__mp_cstr(b, regs[i]->instance);
        mc__mp_map(b, 6);
        mc__mp_cstr(b, "longest_matched");
        mc__mp_uint(b, best[2] * bs);
        put_tiers(b, best, bs);
        for (int pass = 0; pass < 2; pass++) {
            mc__mp_cstr(b, pass ? "rank_matches" : "dp");
            mc__mp_map(b, (uint32_t)ranks);
            for (j = i; j < n; j++) {
                char rank[24];
                if (!in[j] || strcmp(regs[j]->instance, regs[i]->instance))
                    continue;
                snprintf(rank, sizeof(rank), "%lld", (long long)regs[j]->dp_rank);
                mc__mp_cstr(b, rank);
                if (pass) {
                    mc__mp_map(b, 3);
                    put_tiers(b, res[j], bs);
                } else {
                    mc__mp_uint(b, res[j][0] * bs);
                }
            }
        }
    }
}

static void do_query(struct mc_conductor *c, const mc_http_request_t *req,
                     mc_http_response_t *resp) {
    body_err_t e = {0};
    mc_cursor_t cur = {req->body, req->body + req->body_len};
    mc_mp_item_t top, k;
    reg_t probe = {0};
    char only[FIELD] = "", salt[FIELD] = "";
    int32_t *tok = NULL;
    uint64_t *h = NULL;
    size_t n_tok = 0;
    int have = 0, filter = 0, found = 0;
    mc_bh_profile_t prof;
    const char *why = "";
    strcpy(probe.tenant, "default");
    if (mc__mp_next(&cur, &top) != 0 || top.type != MC_MP_MAP) {
        e = (body_err_t){"Invalid msgpack object", "invalid_msgpack", NULL, 0};
        goto fail;
    }
    for (uint32_t i = 0; i < top.n; i++) {
        int rc;
        if (mc__mp_next(&cur, &k) != 0 || k.type != MC_MP_STR)
            rc = bad(&e, "Invalid msgpack object", "invalid_msgpack", NULL);
        else if (mc__mp_str_is(&k, "model"))
            rc = str_field(&cur, probe.model, "model", &e), have |= 1;
        else if (mc__mp_str_is(&k, "block_size"))
            rc = int_field(&cur, &probe.block_size, "block_size", &e), have |= 2;
        else if (mc__mp_str_is(&k, "token_ids"))
            rc = read_tokens(&cur, &tok, &n_tok, &e), have |= 4;
        else if (mc__mp_str_is(&k, "tenant_id"))
            rc = opt_str_field(&cur, probe.tenant, "tenant_id", &e);
        else if (mc__mp_str_is(&k, "lora_name"))
            rc = opt_str_field(&cur, probe.lora, "lora_name", &e);
        else if (mc__mp_str_is(&k, "cache_salt"))
            rc = opt_str_field(&cur, salt, "cache_salt", &e);
        else if (mc__mp_str_is(&k, "instance_id"))
            rc = str_field(&cur, only, "instance_id", &e), filter = 1;
        else
            rc = unknown_field(&e, &k);
        if (rc != 0)
            goto fail;
    }
    if (have != 7) {
        e = (body_err_t){"model, block_size and token_ids are required", "missing_field", NULL, 0};
        goto fail;
    }
    if (!probe.model[0] || probe.block_size < 1) {
        e = (body_err_t){"model must be non-empty and block_size positive", "invalid_field",
                         probe.model[0] ? "block_size" : "model", 0};
        goto fail;
    }
    if (!probe.tenant[0])
        strcpy(probe.tenant, "default");
    /* the group's hash profile (one per group, /register sees to it) */
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->n_regs && !found; i++)
        if (same_group(c->regs[i], &probe))
            prof = c->regs[i]->prof, found = 1;
    pthread_mutex_unlock(&c->mu);
    long nb = 0;
    if (found) {
        size_t blocks = n_tok / (size_t)probe.block_size;
        blocks = blocks > MAX_QUERY_HASHES ? MAX_QUERY_HASHES : blocks;
        if (!(h = mc__malloc((blocks ? blocks : 1) * sizeof(*h)))) {
            e = (body_err_t){"out of memory", "internal", NULL, 0};
            goto fail;
        }
        nb = mc__bh_chain(&prof, tok, n_tok, (uint32_t)probe.block_size, probe.lora, salt, h,
                          blocks, &why);
        if (nb < 0) {
            e = (body_err_t){why, "invalid_field", "token_ids", 0};
            goto fail;
        }
    }
    {
        mc_buf_t b;
        uint8_t *shared = mc__calloc(MC_PT_MAX_NAMES, 1), *in = mc__calloc(MAX_REGS, 1);
        uint32_t(*res)[3] = mc__calloc(MAX_REGS, sizeof(*res));
        if (!shared || !in || !res) {
            mc__free(shared);
            mc__free(in);
            mc__free(res);
            e = (body_err_t){"out of memory", "internal", NULL, 0};
            goto fail;
        }
        mc__buf_init(&b);
        pthread_mutex_lock(&c->mu);
        c->queries++;
        for (size_t i = 0; found && i < c->n_regs; i++)
            if (c->regs[i]->mooncake && same_group(c->regs[i], &probe))
                shared[c->regs[i]->src] = 1;
        for (size_t i = 0; found && i < c->n_regs; i++) {
            reg_t *r = c->regs[i];
            if (r->mooncake || !same_group(r, &probe) || (filter && strcmp(r->instance, only)))
                continue;
            in[i] = 1;
            rank_walk(c->pt, r->ctx, r->src, shared, h, nb, res[i]);
        }
        put_instances(&b, c->regs, (const uint32_t(*)[3])res, c->n_regs, in,
                      (uint64_t)probe.block_size);
        pthread_mutex_unlock(&c->mu);
        mc__free(shared);
        mc__free(in);
        mc__free(res);
        mc__free(tok);
        mc__free(h);
        respond_buf(resp, 200, &b);
        return;
    }
fail:
    mc__free(tok);
    mc__free(h);
    respond_err(c, resp, 400, &e);
}

static void put_profile(mc_buf_t *b, const reg_t *r) {
    char root[65] = "";
    for (uint32_t i = 0; i < r->prof.root_len; i++)
        snprintf(root + 2 * i, 3, "%02x", r->prof.root[i]);
    mc__mp_map(b, 5);
    mc__mp_cstr(b, "strategy");
    mc__mp_cstr(b, r->strategy);
    mc__mp_cstr(b, "algorithm");
    mc__mp_cstr(b, r->algorithm);
    mc__mp_cstr(b, "python_hash_seed");
    mc__mp_cstr(b, r->seed);
    mc__mp_cstr(b, "root_digest");
    mc__mp_cstr(b, root);
    mc__mp_cstr(b, "index_projection");
    mc__mp_cstr(b, r->projection);
}

/* GET /global_view: every cache-sharing group, its profile, blocks and engine ranks */
static void do_global_view(struct mc_conductor *c, mc_http_response_t *resp) {
    mc_buf_t b;
    size_t groups = 0;
    mc__buf_init(&b);
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->n_regs; i++) {
        size_t j = 0;
        while (j < i && !same_group(c->regs[j], c->regs[i]))
            j++;
        groups += j == i;
    }
    mc__mp_map(&b, 2);
    mc__mp_cstr(&b, "context_count");
    mc__mp_uint(&b, groups);
    mc__mp_cstr(&b, "contexts");
    mc__mp_array(&b, (uint32_t)groups);
    for (size_t i = 0; i < c->n_regs; i++) {
        reg_t *r = c->regs[i];
        size_t j = 0, names = 0;
        while (j < i && !same_group(c->regs[j], r))
            j++;
        if (j < i)
            continue;
        mc__mp_map(&b, 7);
        mc__mp_cstr(&b, "model_name");
        mc__mp_cstr(&b, r->model);
        mc__mp_cstr(&b, "lora_name");
        mc__mp_cstr(&b, r->lora);
        mc__mp_cstr(&b, "block_size");
        mc__mp_uint(&b, (uint64_t)r->block_size);
        mc__mp_cstr(&b, "tenant_id");
        mc__mp_cstr(&b, r->tenant);
        mc__mp_cstr(&b, "prefix_count");
        mc__mp_uint(&b, mc__pt_context_blocks(c->pt, r->ctx));
        mc__mp_cstr(&b, "hash_profile");
        put_profile(&b, r);
        /* engine instances of the group, each with its ranks */
        for (j = i; j < c->n_regs; j++) {
            size_t m = i;
            if (c->regs[j]->mooncake || !same_group(c->regs[j], r))
                continue;
            while (m < j && !(same_group(c->regs[m], r) && !c->regs[m]->mooncake &&
                              !strcmp(c->regs[m]->instance, c->regs[j]->instance)))
                m++;
            names += m == j;
        }
        mc__mp_cstr(&b, "instances");
        mc__mp_map(&b, (uint32_t)names);
        for (j = i; j < c->n_regs; j++) {
            size_t m = i, ranks = 0;
            const reg_t *x = c->regs[j];
            if (x->mooncake || !same_group(x, r))
                continue;
            while (m < j && !(same_group(c->regs[m], r) && !c->regs[m]->mooncake &&
                              !strcmp(c->regs[m]->instance, x->instance)))
                m++;
            if (m < j)
                continue;
            for (m = j; m < c->n_regs; m++)
                ranks += !c->regs[m]->mooncake && same_group(c->regs[m], r) &&
                         !strcmp(c->regs[m]->instance, x->instance);
            mc__mp_cstr(&b, x->instance);
            mc__mp_array(&b, (uint32_t)ranks);
            for (m = j; m < c->n_regs; m++)
                if (!c->regs[m]->mooncake && same_group(c->regs[m], r) &&
                    !strcmp(c->regs[m]->instance, x->instance))
                    mc__mp_uint(&b, (uint64_t)c->regs[m]->dp_rank);
        }
    }
    pthread_mutex_unlock(&c->mu);
    respond_buf(resp, 200, &b);
}

/* GET /services: {count, services: [...]} in the reference's casing, plus our subscription
 * counters (LastSeq, Events, Lost) */
static void do_services(struct mc_conductor *c, mc_http_response_t *resp) {
    mc_buf_t b;
    mc__buf_init(&b);
    pthread_mutex_lock(&c->mu);
    mc__mp_map(&b, 2);
    mc__mp_cstr(&b, "count");
    mc__mp_uint(&b, c->n_regs);
    mc__mp_cstr(&b, "services");
    mc__mp_array(&b, (uint32_t)c->n_regs);
    for (size_t i = 0; i < c->n_regs; i++) {
        reg_t *r = c->regs[i];
        mc_kv_sub_stats_t st;
        mc__kv_sub_stats(r->sub, &st);
        mc__mp_map(&b, 14);
        mc__mp_cstr(&b, "Endpoint");
        mc__mp_cstr(&b, r->endpoint);
        mc__mp_cstr(&b, "ReplayEndpoint");
        mc__mp_cstr(&b, r->replay);
        mc__mp_cstr(&b, "Type");
        mc__mp_cstr(&b, r->mooncake ? "Mooncake" : "vLLM");
        mc__mp_cstr(&b, "ModelName");
        mc__mp_cstr(&b, r->model);
        mc__mp_cstr(&b, "LoraName");
        mc__mp_cstr(&b, r->lora);
        mc__mp_cstr(&b, "TenantID");
        mc__mp_cstr(&b, r->tenant);
        mc__mp_cstr(&b, "InstanceID");
        mc__mp_cstr(&b, r->instance);
        mc__mp_cstr(&b, "BlockSize");
        mc__mp_uint(&b, (uint64_t)r->block_size);
        mc__mp_cstr(&b, "DPRank");
        mc__mp_uint(&b, (uint64_t)r->dp_rank);
        mc__mp_cstr(&b, "CacheGroup");
        if (r->cache_group < 0)
            mc__mp_nil(&b);
        else
            mc__mp_uint(&b, (uint64_t)r->cache_group);
        mc__mp_cstr(&b, "HashProfile");
        put_profile(&b, r);
        mc__mp_cstr(&b, "LastSeq");
        mc__mp_uint(&b, st.last_seq);
        mc__mp_cstr(&b, "Events");
        mc__mp_uint(&b, st.events);
        mc__mp_cstr(&b, "Lost");
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

static int known_path(const char *path) {
    static const char *paths[] = {"/register",    "/unregister", "/query",   "/query_by_hash",
                                  "/global_view", "/services",   "/metrics", "/health"};
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
        if (!strcmp(path, paths[i]))
            return 1;
    return 0;
}

/* a known path with the other method: the reference's 405 and its body */
static void respond_405(mc_http_response_t *resp) {
    mc_buf_t b;
    mc__buf_init(&b);
    mc__mp_map(&b, 1);
    mc__mp_cstr(&b, "error");
    mc__mp_cstr(&b, "Method not allowed");
    respond_buf(resp, 405, &b);
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
    else if (post && !strcmp(req->path, "/query"))
        do_query(c, req, resp);
    else if (get && !strcmp(req->path, "/global_view"))
        do_global_view(c, resp);
    else if (get && !strcmp(req->path, "/services"))
        do_services(c, resp);
    else if (get && !strcmp(req->path, "/metrics"))
        do_metrics(c, resp);
    else if (get && !strcmp(req->path, "/health"))
        mc__http_respond(resp, 200, "text/plain", "OK", 2);
    else if (known_path(req->path))
        respond_405(resp);
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
