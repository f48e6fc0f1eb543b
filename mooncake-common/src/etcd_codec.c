/* The etcd JSON gateway's codec, no I/O: base64, request bodies, answers, and the watch stream's
 * chunked framing. The gateway writes int64 fields as JSON strings ("revision":"5") and leaves
 * out fields at their zero value (a PUT event has no "type", a failed txn no "succeeded"), so
 * every field is optional and numbers are read from strings or numbers alike. */
#include <cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "etcd_internal.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/etcd.h"
#include "mooncake/common/frame.h"
#include "mooncake/error.h"

/* --- base64 --- */
static const char mc__b64_alpha[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t mc__etcd_b64_len(size_t n) {
    return (n + 2) / 3 * 4;
}

void mc__etcd_b64_encode(const void *in, size_t n, char *out) {
    const uint8_t *p = in;
    size_t o = 0, i = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        out[o++] = mc__b64_alpha[v >> 18];
        out[o++] = mc__b64_alpha[(v >> 12) & 63];
        out[o++] = mc__b64_alpha[(v >> 6) & 63];
        out[o++] = mc__b64_alpha[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
        out[o++] = mc__b64_alpha[v >> 18];
        out[o++] = mc__b64_alpha[(v >> 12) & 63];
        out[o++] = i + 1 < n ? mc__b64_alpha[(v >> 6) & 63] : '=';
        out[o++] = '=';
    }
    out[o] = '\0';
}

static int mc__b64_val(char c) {
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

int mc__etcd_b64_decode(const char *in, size_t n, uint8_t *out, size_t *out_len) {
    size_t o = 0;
    if (n % 4)
        return MC_ERR_MALFORMED_JSON;
    for (size_t i = 0; i < n; i += 4) {
        int last = i + 4 == n;
        int a = mc__b64_val(in[i]), b = mc__b64_val(in[i + 1]);
        int c = mc__b64_val(in[i + 2]), d = mc__b64_val(in[i + 3]);
        uint32_t v;
        if (a < 0 || b < 0)
            return MC_ERR_MALFORMED_JSON;
        if (last && in[i + 2] == '=' && in[i + 3] == '=') {
            if (b & 15) /* non-canonical: bits that no byte carries */
                return MC_ERR_MALFORMED_JSON;
            out[o++] = (uint8_t)(a << 2 | b >> 4);
            break;
        }
        if (c < 0)
            return MC_ERR_MALFORMED_JSON;
        if (last && in[i + 3] == '=') {
            if (c & 3)
                return MC_ERR_MALFORMED_JSON;
            v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6;
            out[o++] = (uint8_t)(v >> 16);
            out[o++] = (uint8_t)(v >> 8);
            break;
        }
        if (d < 0)
            return MC_ERR_MALFORMED_JSON;
        v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6 | (uint32_t)d;
        out[o++] = (uint8_t)(v >> 16);
        out[o++] = (uint8_t)(v >> 8);
        out[o++] = (uint8_t)v;
    }
    *out_len = o;
    return 0;
}

/* --- reading answers --- */

/* An int64 field (string or number); absent is 0. -1 when present but not an integer. */
static int mc__j_i64(const cJSON *o, const char *name, int64_t *v) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, name);
    *v = 0;
    if (!f || cJSON_IsNull(f))
        return 0;
    if (cJSON_IsString(f)) {
        const char *s = f->valuestring;
        char *e = NULL;
        long long x;
        if (!*s || (!isdigit((unsigned char)*s) && *s != '-'))
            return -1;
        errno = 0;
        x = strtoll(s, &e, 10);
        if (errno || *e)
            return -1;
        *v = (int64_t)x;
        return 0;
    }
    if (cJSON_IsNumber(f)) {
        double d = f->valuedouble;
        if (d != d || d < -9.2e18 || d > 9.2e18 || (double)(int64_t)d != d)
            return -1;
        *v = (int64_t)d;
        return 0;
    }
    return -1;
}

static int mc__j_bool(const cJSON *o, const char *name) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, name);
    return f && cJSON_IsTrue(f);
}

/* A base64 field into a NUL-terminated mc__malloc'ed copy; absent is empty. */
static int mc__j_b64(const cJSON *o, const char *name, uint8_t **out, size_t *len) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, name);
    const char *s = "";
    size_t n;
    *out = NULL;
    *len = 0;
    if (f && !cJSON_IsNull(f)) {
        if (!cJSON_IsString(f))
            return MC_ERR_MALFORMED_JSON;
        s = f->valuestring;
    }
    n = strlen(s);
    *out = mc__malloc(n / 4 * 3 + 1);
    if (!*out)
        return MC_ERR_MEMORY;
    if (mc__etcd_b64_decode(s, n, *out, len)) {
        mc__free(*out);
        *out = NULL;
        return MC_ERR_MALFORMED_JSON;
    }
    (*out)[*len] = '\0';
    return 0;
}

void mc__etcd_kv_free(mc_etcd_kv_t *kv) {
    if (!kv)
        return;
    mc__free(kv->key);
    mc__free(kv->value);
    memset(kv, 0, sizeof(*kv));
}

void mc__etcd_kvs_free(mc_etcd_kvs_t *r) {
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++)
        mc__etcd_kv_free(&r->kvs[i]);
    mc__free(r->kvs);
    memset(r, 0, sizeof(*r));
}

static int mc__parse_kv(const cJSON *o, mc_etcd_kv_t *kv) {
    int rc;
    memset(kv, 0, sizeof(*kv));
    if (!cJSON_IsObject(o))
        return MC_ERR_MALFORMED_JSON;
    if (mc__j_i64(o, "create_revision", &kv->create_revision) ||
        mc__j_i64(o, "mod_revision", &kv->mod_revision) || mc__j_i64(o, "version", &kv->version) ||
        mc__j_i64(o, "lease", &kv->lease))
        return MC_ERR_MALFORMED_JSON;
    rc = mc__j_b64(o, "key", &kv->key, &kv->key_len);
    if (!rc)
        rc = mc__j_b64(o, "value", &kv->value, &kv->value_len);
    if (rc)
        mc__etcd_kv_free(kv);
    return rc;
}

/* Top-level answers of kv calls always carry etcd's header: one without is not etcd's. */
static int mc__has_header(const cJSON *o) {
    return cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(o, "header"));
}

static int mc__header_rev(const cJSON *o, int64_t *rev) {
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(o, "header");
    *rev = 0;
    if (!h)
        return 0;
    if (!cJSON_IsObject(h) || mc__j_i64(h, "revision", rev))
        return MC_ERR_MALFORMED_JSON;
    return 0;
}

/* A parsed object, or NULL for bytes that are not a JSON object. */
static cJSON *mc__parse_obj(const char *body, size_t len) {
    cJSON *j;
    if (!body || len == 0 || len > MC_ETCD_MAX_RESPONSE)
        return NULL;
    j = cJSON_ParseWithLength(body, len);
    if (j && !cJSON_IsObject(j)) {
        cJSON_Delete(j);
        j = NULL;
    }
    return j;
}

int mc__etcd_parse_error(const char *body, size_t len, char *msg, size_t cap) {
    cJSON *j = mc__parse_obj(body, len);
    const cJSON *m, *e;
    int64_t code = 0;
    int rc = -1;
    if (cap)
        msg[0] = '\0';
    if (!j)
        return -1;
    /* a stream's error is {"error": {"grpc_code":..,"message":..}}, a call's is flat */
    e = cJSON_GetObjectItemCaseSensitive(j, "error");
    if (cJSON_IsObject(e)) {
        m = cJSON_GetObjectItemCaseSensitive(e, "message");
        if (mc__j_i64(e, "grpc_code", &code) || (!code && mc__j_i64(e, "code", &code)))
            code = 2;
    } else {
        m = cJSON_GetObjectItemCaseSensitive(j, "message");
        if (!cJSON_IsString(m))
            m = e;
        if (mc__j_i64(j, "code", &code))
            code = 2;
    }
    if (!cJSON_IsString(m) && !e)
        goto out;
    if (cap)
        snprintf(msg, cap, "%s", cJSON_IsString(m) ? m->valuestring : "(no message)");
    rc = code < 0 || code > 1000 ? 2 : (int)code;
out:
    cJSON_Delete(j);
    return rc;
}

/* Room for the items of arr (absent: none), zeroed; NULL when there are none. *rc: 0,
 * MC_ERR_MALFORMED_JSON (not an array) or MC_ERR_MEMORY. */
static void *mc__j_array_alloc(const cJSON *arr, size_t size, int *rc) {
    int n = arr ? cJSON_GetArraySize(arr) : 0;
    void *items = NULL;
    *rc = 0;
    if (arr && !cJSON_IsArray(arr))
        *rc = MC_ERR_MALFORMED_JSON;
    else if (n > 0 && !(items = mc__calloc((size_t)n, size)))
        *rc = MC_ERR_MEMORY;
    return items;
}

static int mc__parse_range_obj(const cJSON *j, mc_etcd_kvs_t *out) {
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "kvs"), *it;
    int rc = MC_ERR_MALFORMED_JSON;
    memset(out, 0, sizeof(*out));
    if (mc__header_rev(j, &out->revision) || mc__j_i64(j, "count", &out->count))
        goto out;
    out->more = mc__j_bool(j, "more");
    out->kvs = mc__j_array_alloc(arr, sizeof(*out->kvs), &rc);
    if (rc)
        goto out;
    rc = MC_ERR_MALFORMED_JSON;
    cJSON_ArrayForEach(it, arr) {
        if ((rc = mc__parse_kv(it, &out->kvs[out->n])) != 0)
            goto out;
        out->n++;
    }
    rc = 0;
out:
    if (rc)
        mc__etcd_kvs_free(out);
    return rc;
}

int mc__etcd_parse_range(const char *body, size_t len, mc_etcd_kvs_t *out) {
    cJSON *j = mc__parse_obj(body, len);
    int rc;
    memset(out, 0, sizeof(*out));
    if (!j)
        return MC_ERR_MALFORMED_JSON;
    rc = mc__has_header(j) ? mc__parse_range_obj(j, out) : MC_ERR_MALFORMED_JSON;
    cJSON_Delete(j);
    return rc;
}

int mc__etcd_parse_write(const char *body, size_t len, int64_t *revision, int64_t *deleted) {
    cJSON *j = mc__parse_obj(body, len);
    int64_t rev = 0, del = 0;
    int rc = MC_ERR_MALFORMED_JSON;
    if (!j)
        return rc;
    if (mc__has_header(j) && !mc__header_rev(j, &rev) && !mc__j_i64(j, "deleted", &del))
        rc = 0;
    if (revision)
        *revision = rev;
    if (deleted)
        *deleted = del;
    cJSON_Delete(j);
    return rc;
}

void mc__etcd_txn_result_free(mc_etcd_txn_result_t *r) {
    if (!r)
        return;
    for (size_t i = 0; i < r->n && r->ranges; i++)
        mc__etcd_kvs_free(&r->ranges[i]);
    mc__free(r->ranges);
    mc__free(r->deleted);
    memset(r, 0, sizeof(*r));
}

int mc__etcd_parse_txn(const char *body, size_t len, mc_etcd_txn_result_t *out) {
    cJSON *j = mc__parse_obj(body, len);
    const cJSON *arr, *it;
    int rc = MC_ERR_MALFORMED_JSON;
    memset(out, 0, sizeof(*out));
    if (!j)
        return rc;
    if (!mc__has_header(j) || mc__header_rev(j, &out->revision))
        goto out;
    out->succeeded = mc__j_bool(j, "succeeded");
    arr = cJSON_GetObjectItemCaseSensitive(j, "responses");
    out->ranges = mc__j_array_alloc(arr, sizeof(*out->ranges), &rc);
    if (!rc)
        out->deleted = mc__j_array_alloc(arr, sizeof(*out->deleted), &rc);
    if (rc)
        goto out;
    rc = MC_ERR_MALFORMED_JSON;
    cJSON_ArrayForEach(it, arr) {
        const cJSON *r;
        if (!cJSON_IsObject(it))
            goto out;
        if ((r = cJSON_GetObjectItemCaseSensitive(it, "response_range"))) {
            if (!cJSON_IsObject(r) || (rc = mc__parse_range_obj(r, &out->ranges[out->n])) != 0)
                goto out;
            rc = MC_ERR_MALFORMED_JSON;
        } else if ((r = cJSON_GetObjectItemCaseSensitive(it, "response_delete_range"))) {
            if (!cJSON_IsObject(r) || mc__j_i64(r, "deleted", &out->deleted[out->n]))
                goto out;
        }
        out->n++;
    }
    rc = 0;
out:
    if (rc)
        mc__etcd_txn_result_free(out);
    cJSON_Delete(j);
    return rc;
}

int mc__etcd_parse_lease(const char *body, size_t len, int64_t *id, int64_t *ttl) {
    cJSON *j = mc__parse_obj(body, len);
    const cJSON *o;
    int64_t i = 0, t = 0;
    int rc = MC_ERR_MALFORMED_JSON;
    if (!j)
        return rc;
    o = cJSON_GetObjectItemCaseSensitive(j, "result");
    if (!o)
        o = j;
    if (cJSON_IsObject(o) && !mc__j_i64(o, "ID", &i) && !mc__j_i64(o, "TTL", &t))
        rc = 0;
    if (id)
        *id = i;
    if (ttl)
        *ttl = t;
    cJSON_Delete(j);
    return rc;
}

int mc__etcd_parse_lease_ttl(const char *body, size_t len, int64_t *ttl, int64_t *granted) {
    cJSON *j = mc__parse_obj(body, len);
    int rc = MC_ERR_MALFORMED_JSON;
    *ttl = *granted = 0;
    if (!j)
        return rc;
    if (!mc__j_i64(j, "TTL", ttl) && !mc__j_i64(j, "grantedTTL", granted))
        rc = 0;
    cJSON_Delete(j);
    return rc;
}

/* --- building requests: keys and values are base64, so only numbers need formatting --- */

/* A field's separator: none right after '{' or ',', else a comma. */
static int mc__field_sep(mc_buf_t *b) {
    if (b->len == 0 || b->data[b->len - 1] == '{' || b->data[b->len - 1] == ',')
        return 0;
    return mc__buf_put(b, ",", 1);
}

int mc__etcd_field_b64(mc_buf_t *b, const char *name, const void *p, size_t n) {
    size_t el = mc__etcd_b64_len(n);
    char pre[48];
    int m = snprintf(pre, sizeof(pre), "\"%s\":\"", name);
    if (mc__field_sep(b) || mc__buf_put(b, pre, (size_t)m) || mc__buf_reserve(b, el + 1))
        return MC_ERR_MEMORY;
    mc__etcd_b64_encode(p, n, (char *)b->data + b->len);
    b->len += el;
    return mc__buf_put(b, "\"", 1);
}

int mc__etcd_field_i64(mc_buf_t *b, const char *name, int64_t v) {
    char s[64];
    int m = snprintf(s, sizeof(s), "\"%s\":\"%" PRId64 "\"", name, v);
    if (mc__field_sep(b))
        return MC_ERR_MEMORY;
    return mc__buf_put(b, s, (size_t)m);
}

static int mc__put_str(mc_buf_t *b, const char *s) {
    return mc__buf_put(b, s, strlen(s));
}

static int mc__build_op(mc_buf_t *b, const mc_etcd_op_t *op) {
    static const char *const wrap[] = {"{\"request_put\":{", "{\"request_range\":{",
                                       "{\"request_delete_range\":{"};
    if (op->type < MC_ETCD_OP_PUT || op->type > MC_ETCD_OP_DELETE || (!op->key && op->key_len) ||
        (op->type == MC_ETCD_OP_PUT && !op->value && op->value_len))
        return MC_ERR_INVALID_ARGUMENT;
    mc__put_str(b, wrap[op->type]);
    mc__etcd_field_b64(b, "key", op->key, op->key_len);
    if (op->type == MC_ETCD_OP_PUT) {
        mc__etcd_field_b64(b, "value", op->value, op->value_len);
        if (op->lease)
            mc__etcd_field_i64(b, "lease", op->lease);
    } else if (op->range_end) {
        mc__etcd_field_b64(b, "range_end", op->range_end, op->range_end_len);
    }
    return mc__put_str(b, "}}");
}

static int mc__build_ops(mc_buf_t *b, const char *name, const mc_etcd_op_t *ops, size_t n) {
    int rc = 0;
    mc__put_str(b, ",\"");
    mc__put_str(b, name);
    mc__put_str(b, "\":[");
    for (size_t i = 0; i < n && !rc; i++) {
        if (i)
            mc__put_str(b, ",");
        rc = mc__build_op(b, &ops[i]);
    }
    mc__put_str(b, "]");
    return rc;
}

int mc__etcd_build_txn(const mc_etcd_cmp_t *cmps, size_t ncmp, const mc_etcd_op_t *success,
                       size_t nsuccess, const mc_etcd_op_t *failure, size_t nfailure, char **out) {
    static const char *const targets[] = {"VERSION", "CREATE", "MOD", "VALUE", "LEASE"};
    static const char *const fields[] = {"version", "create_revision", "mod_revision", "value",
                                         "lease"};
    static const char *const results[] = {"EQUAL", "GREATER", "LESS", "NOT_EQUAL"};
    mc_buf_t b;
    int rc = MC_ERR_INVALID_ARGUMENT;
    *out = NULL;
    mc__buf_init(&b);
    if ((ncmp && !cmps) || (nsuccess && !success) || (nfailure && !failure))
        goto out;
    mc__put_str(&b, "{\"compare\":[");
    for (size_t i = 0; i < ncmp; i++) {
        const mc_etcd_cmp_t *c = &cmps[i];
        char s[96];
        if (c->target < MC_ETCD_CMP_VERSION || c->target > MC_ETCD_CMP_LEASE ||
            c->result < MC_ETCD_EQUAL || c->result > MC_ETCD_NOT_EQUAL || (!c->key && c->key_len) ||
            (c->target == MC_ETCD_CMP_VALUE && !c->value && c->value_len))
            goto out;
        snprintf(s, sizeof(s), "%s{\"target\":\"%s\",\"result\":\"%s\",", i ? "," : "",
                 targets[c->target], results[c->result]);
        mc__put_str(&b, s);
        mc__etcd_field_b64(&b, "key", c->key, c->key_len);
        if (c->target == MC_ETCD_CMP_VALUE) {
            mc__etcd_field_b64(&b, "value", c->value, c->value_len);
        } else {
            mc__etcd_field_i64(&b, fields[c->target], c->number);
        }
        mc__put_str(&b, "}");
    }
    mc__put_str(&b, "]");
    if ((rc = mc__build_ops(&b, "success", success, nsuccess)) != 0 ||
        (rc = mc__build_ops(&b, "failure", failure, nfailure)) != 0)
        goto out;
    mc__put_str(&b, "}");
    if (mc__buf_u8(&b, 0) || b.failed) {
        rc = MC_ERR_MEMORY;
        goto out;
    }
    *out = (char *)b.data;
    mc__buf_init(&b);
    rc = 0;
out:
    mc__buf_free(&b);
    return rc;
}

/* --- the watch stream --- */
enum { MC__ST_HEAD, MC__ST_SIZE, MC__ST_DATA, MC__ST_DATA_CRLF, MC__ST_DONE, MC__ST_RAW };

void mc__etcd_stream_init(mc_etcd_stream_t *s, size_t max_msg) {
    memset(s, 0, sizeof(*s));
    s->max_msg = max_msg ? max_msg : MC_ETCD_MAX_WATCH_MSG;
}

void mc__etcd_stream_free(mc_etcd_stream_t *s) {
    mc__free(s->buf);
    s->buf = NULL;
    s->len = s->cap = 0;
}

static int mc__st_push(mc_etcd_stream_t *s, const uint8_t *p, size_t n, size_t limit) {
    if (s->len + n > limit)
        return MC_ERR_MALFORMED_JSON;
    if (s->len + n + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 256;
        uint8_t *q;
        while (cap < s->len + n + 1)
            cap *= 2;
        q = mc__realloc(s->buf, cap);
        if (!q)
            return MC_ERR_MEMORY;
        s->buf = q;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, p, n);
    s->len += n;
    s->buf[s->len] = '\0';
    return 0;
}

/* The head is complete in s->buf[0..len): status and framing. */
static int mc__st_head(mc_etcd_stream_t *s) {
    const char *h = (const char *)s->buf;
    const char *line;
    if (s->len < 12 || memcmp(h, "HTTP/1.", 7) || !isdigit((unsigned char)h[9]) ||
        !isdigit((unsigned char)h[10]) || !isdigit((unsigned char)h[11]))
        return MC_ERR_MALFORMED_JSON;
    s->status = (h[9] - '0') * 100 + (h[10] - '0') * 10 + (h[11] - '0');
    s->chunked = 0;
    for (line = strchr(h, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
        static const char te[] = "transfer-encoding:";
        const char *v = line + 1;
        const char *eol = strchr(v, '\n');
        size_t ll = eol ? (size_t)(eol - v) : strlen(v);
        if (ll > sizeof(te) - 1 && !strncasecmp(v, te, sizeof(te) - 1)) {
            for (size_t i = sizeof(te) - 1; i + 7 <= ll; i++) {
                if (!strncasecmp(v + i, "chunked", 7))
                    s->chunked = 1;
            }
        }
    }
    return 0;
}

/* A message line of the body is complete: hand it over unless blank. */
static int mc__st_emit(mc_etcd_stream_t *s, mc_etcd_msg_fn msg, void *ctx) {
    size_t n = s->len;
    int rc = 0;
    while (n && (s->buf[n - 1] == '\r' || s->buf[n - 1] == ' '))
        n--;
    if (n)
        rc = msg(ctx, (const char *)s->buf, n);
    s->len = 0;
    return rc;
}

/* Body bytes (after de-chunking): split at newlines into messages. */
static int mc__st_body(mc_etcd_stream_t *s, const uint8_t *p, size_t n, mc_etcd_msg_fn msg,
                       void *ctx) {
    while (n) {
        const uint8_t *nl = s->status == 200 ? memchr(p, '\n', n) : NULL;
        size_t take = nl ? (size_t)(nl - p) : n;
        int rc = mc__st_push(s, p, take, s->max_msg);
        if (rc)
            return rc;
        if (nl) {
            if ((rc = mc__st_emit(s, msg, ctx)) != 0)
                return rc;
            take++;
        }
        p += take;
        n -= take;
    }
    return 0;
}

int mc__etcd_stream_feed(mc_etcd_stream_t *s, const uint8_t *p, size_t n, mc_etcd_msg_fn msg,
                         void *ctx) {
    int rc;
    while (n) {
        switch (s->state) {
        case MC__ST_HEAD: {
            /* byte by byte until the blank line: heads are small and this keeps the body's
             * first bytes for the body states */
            if ((rc = mc__st_push(s, p, 1, 16384)) != 0)
                return rc;
            p++;
            n--;
            if (s->len >= 4 && !memcmp(s->buf + s->len - 4, "\r\n\r\n", 4)) {
                if ((rc = mc__st_head(s)) != 0)
                    return rc;
                s->len = 0;
                if (s->status >= 100 && s->status < 200)
                    break; /* an interim answer: the real head follows */
                s->state = s->chunked ? MC__ST_SIZE : MC__ST_RAW;
            }
            break;
        }
        case MC__ST_SIZE: {
            /* the size line goes to its own buffer: s->buf may hold a message split across
             * chunks */
            uint64_t sz = 0;
            size_t i = 0;
            char c0 = (char)*p++;
            n--;
            if (c0 != '\n') {
                if (s->size_len + 1 >= sizeof(s->size_line))
                    return MC_ERR_MALFORMED_JSON;
                s->size_line[s->size_len++] = c0;
                break;
            }
            s->size_line[s->size_len] = '\0';
            for (; i < s->size_len && isxdigit((unsigned char)s->size_line[i]); i++) {
                int c = tolower((unsigned char)s->size_line[i]);
                sz = sz * 16 + (uint64_t)(c <= '9' ? c - '0' : c - 'a' + 10);
                if (sz > s->max_msg + 2)
                    return MC_ERR_MALFORMED_JSON;
            }
            if (i == 0 || (i < s->size_len && s->size_line[i] != '\r' && s->size_line[i] != ';'))
                return MC_ERR_MALFORMED_JSON;
            s->size_len = 0;
            s->chunk_left = sz;
            s->state = sz ? MC__ST_DATA : MC__ST_DONE;
            break;
        }
        case MC__ST_DATA: {
            size_t take = n < s->chunk_left ? n : (size_t)s->chunk_left;
            if ((rc = mc__st_body(s, p, take, msg, ctx)) != 0)
                return rc;
            p += take;
            n -= take;
            s->chunk_left -= take;
            if (!s->chunk_left)
                s->state = MC__ST_DATA_CRLF;
            break;
        }
        case MC__ST_DATA_CRLF: /* the "\r\n" after a chunk's data */
            if (*p == '\n')
                s->state = MC__ST_SIZE;
            else if (*p != '\r')
                return MC_ERR_MALFORMED_JSON;
            p++;
            n--;
            break;
        case MC__ST_RAW:
            if ((rc = mc__st_body(s, p, n, msg, ctx)) != 0)
                return rc;
            n = 0;
            break;
        default: /* MC__ST_DONE: trailers and anything after are ignored */
            n = 0;
            break;
        }
    }
    return 0;
}

int mc__etcd_stream_end(mc_etcd_stream_t *s, mc_etcd_msg_fn msg, void *ctx) {
    /* a read-to-close body (an error answer) ends here; a chunked one must have ended */
    if (s->state == MC__ST_RAW)
        return mc__st_emit(s, msg, ctx);
    if (s->state == MC__ST_DONE)
        return 0;
    return MC_ERR_MALFORMED_JSON;
}

/* --- watch messages --- */
void mc__etcd_watch_msg_free(mc_etcd_watch_msg_t *m) {
    if (!m)
        return;
    for (size_t i = 0; i < m->n; i++)
        mc__etcd_kv_free(&m->events[i].kv);
    mc__free(m->events);
    memset(m, 0, sizeof(*m));
}

int mc__etcd_parse_watch_msg(const char *msg, size_t len, mc_etcd_watch_msg_t *out) {
    cJSON *j = mc__parse_obj(msg, len);
    const cJSON *r, *arr, *it, *reason;
    int rc = MC_ERR_MALFORMED_JSON;
    memset(out, 0, sizeof(*out));
    if (!j)
        return rc;
    r = cJSON_GetObjectItemCaseSensitive(j, "result");
    if (!cJSON_IsObject(r))
        goto out;
    if (mc__header_rev(r, &out->revision) || mc__j_i64(r, "watch_id", &out->watch_id) ||
        mc__j_i64(r, "compact_revision", &out->compact_revision))
        goto out;
    out->created = mc__j_bool(r, "created");
    out->canceled = mc__j_bool(r, "canceled");
    reason = cJSON_GetObjectItemCaseSensitive(r, "cancel_reason");
    if (cJSON_IsString(reason))
        snprintf(out->cancel_reason, sizeof(out->cancel_reason), "%s", reason->valuestring);
    arr = cJSON_GetObjectItemCaseSensitive(r, "events");
    out->events = mc__j_array_alloc(arr, sizeof(*out->events), &rc);
    if (rc)
        goto out;
    rc = MC_ERR_MALFORMED_JSON;
    cJSON_ArrayForEach(it, arr) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(it, "type");
        mc_etcd_event_t *ev = &out->events[out->n];
        if (!cJSON_IsObject(it))
            goto out;
        if (!t || (cJSON_IsString(t) && !strcmp(t->valuestring, "PUT")) ||
            (cJSON_IsNumber(t) && t->valuedouble == 0))
            ev->type = MC_ETCD_EVENT_PUT;
        else if ((cJSON_IsString(t) && !strcmp(t->valuestring, "DELETE")) ||
                 (cJSON_IsNumber(t) && t->valuedouble == 1))
            ev->type = MC_ETCD_EVENT_DELETE;
        else
            goto out;
        if ((rc = mc__parse_kv(cJSON_GetObjectItemCaseSensitive(it, "kv"), &ev->kv)) != 0)
            goto out;
        rc = MC_ERR_MALFORMED_JSON;
        out->n++;
    }
    rc = 0;
out:
    if (rc)
        mc__etcd_watch_msg_free(out);
    cJSON_Delete(j);
    return rc;
}
