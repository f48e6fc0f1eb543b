/* etcd v3 unary calls over the JSON gateway: endpoint list, failover within one deadline, and
 * the kv / lease calls. The codec is etcd_codec.c; the keep-alive thread and watch streams are
 * etcd_watch.c. */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "etcd_internal.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/etcd.h"
#include "mooncake/common/frame.h"
#include "mooncake/common/http.h"
#include "mooncake/common/log.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"

/* gRPC status codes etcd answers with */
#define MC__GRPC_NOT_FOUND 5
#define MC__GRPC_UNAVAILABLE 14

int mc__etcd_open(const char *endpoints, int timeout_ms, mc_etcd_t **out) {
    mc_etcd_t *c;
    const char *p;
    int rc = MC_ERR_INVALID_ARGUMENT;
    *out = NULL;
    if (!endpoints)
        return rc;
    c = mc__calloc(1, sizeof(*c));
    if (!c)
        return MC_ERR_MEMORY;
    c->timeout_ms = timeout_ms > 0 ? timeout_ms : MC_ETCD_DEFAULT_TIMEOUT_MS;
    for (p = endpoints;;) {
        char one[300];
        const char *e = p + strcspn(p, ",;");
        size_t n;
        while (p < e && (*p == ' ' || *p == '\t'))
            p++;
        n = (size_t)(e - p);
        while (n && (p[n - 1] == ' ' || p[n - 1] == '\t' || p[n - 1] == '/'))
            n--;
        if (n >= sizeof(one))
            goto out;
        memcpy(one, p, n);
        one[n] = '\0';
        if (n) {
            const char *hp = one;
            mc__etcd_ep_t *ep;
            int tls = 0;
            if (!strncasecmp(hp, "http://", 7)) {
                hp += 7;
            } else if (!strncasecmp(hp, "https://", 8)) {
                hp += 8;
                tls = 1;
            } else if (strstr(hp, "://")) {
                MC_ERROR("etcd endpoint \"%s\": only http:// and https:// are supported", one);
                goto out;
            }
            if (c->n == MC_ETCD_MAX_ENDPOINTS) {
                MC_ERROR("more than %d etcd endpoints", MC_ETCD_MAX_ENDPOINTS);
                goto out;
            }
            ep = &c->eps[c->n];
            /* an IPv6 address needs brackets: "h:1:2" says nothing clear */
            if (!*hp || strchr(hp, '/') || (hp[0] != '[' && strchr(hp, ':') != strrchr(hp, ':')) ||
                (mc__split_host_port(hp, ep->host, sizeof(ep->host), &ep->port) != 0 &&
                 (strchr(hp, ':') ||
                  (size_t)snprintf(ep->host, sizeof(ep->host), "%s", hp) >= sizeof(ep->host)))) {
                MC_ERROR("etcd endpoint \"%s\" is not host:port", one);
                goto out;
            }
            if (ep->port == 0)
                ep->port = 2379;
            ep->tls = tls;
            if (tls && !c->tls_checked) {
                c->tls_checked = 1;
                if (mc__etcd_tls_config(c) != 0)
                    goto out;
            }
            {
                char nm[sizeof(ep->name)];
                int v6 = strchr(ep->host, ':') != NULL;
                snprintf(nm, sizeof(nm), "%s%s%s:%u", v6 ? "[" : "", ep->host, v6 ? "]" : "",
                         (unsigned)ep->port);
                memcpy(ep->name, nm, sizeof(nm));
            }
            c->n++;
        }
        if (!*e)
            break;
        p = e + 1;
    }
    if (!c->n) {
        MC_ERROR("no etcd endpoint in \"%s\"", endpoints);
        goto out;
    }
    *out = c;
    c = NULL;
    rc = 0;
out:
    mc__free(c);
    return rc;
}

void mc__etcd_close(mc_etcd_t *c) {
    mc__free(c);
}

size_t mc__etcd_endpoint_count(const mc_etcd_t *c) {
    return c ? c->n : 0;
}

int mc__etcd_timeout(const mc_etcd_t *c) {
    return c ? c->timeout_ms : 0;
}

void mc__etcd_sleep_ms(int ms) {
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Maps an etcd error answer to our code, logging etcd's own message. */
static int mc__etcd_answer_error(const mc__etcd_ep_t *ep, const char *path, int status,
                                 const char *body, size_t len, int *grpc_code, int *no_leader) {
    char msg[256];
    int code = mc__etcd_parse_error(body, len, msg, sizeof(msg));
    *grpc_code = code;
    /* "no leader" is refused before anything is proposed; other Unavailable answers (a timed
     * out proposal, a leader change) may have been applied */
    *no_leader = code == MC__GRPC_UNAVAILABLE && strstr(msg, "no leader") != NULL;
    if (code < 0) {
        MC_WARN("etcd %s %s: HTTP %d without an etcd error body", ep->name, path, status);
        return MC_ERR_ETCD_OPERATION_ERROR;
    }
    if (code == MC__GRPC_NOT_FOUND) {
        MC_DEBUG("etcd %s %s: %s", ep->name, path, msg);
        return MC_ERR_ETCD_KEY_NOT_EXIST;
    }
    if (code == MC__GRPC_UNAVAILABLE)
        MC_DEBUG("etcd %s %s: %s (code %d)", ep->name, path, msg, code);
    else
        MC_WARN("etcd %s %s: %s (code %d)", ep->name, path, msg, code);
    return MC_ERR_ETCD_OPERATION_ERROR;
}

int mc__etcd_call(mc_etcd_t *c, const char *path, const char *body, int idempotent, int timeout_ms,
                  char **resp, size_t *resp_len) {
    uint64_t t0 = mc__now_ms();
    uint64_t deadline = t0 + (uint64_t)(timeout_ms > 0 ? timeout_ms : c->timeout_ms);
    size_t blen = strlen(body);
    int last = MC_ERR_ETCD_OPERATION_ERROR;
    int timed_out = 0;
    *resp = NULL;
    *resp_len = 0;
    for (int round = 0;; round++) {
        size_t start = atomic_load(&c->current) % c->n;
        int reached = 0; /* some endpoint answered or stalled: worth another round */
        for (size_t i = 0; i < c->n; i++) {
            const mc__etcd_ep_t *ep = &c->eps[(start + i) % c->n];
            char url[400];
            uint64_t now = mc__now_ms(), slice;
            char *rb = NULL;
            size_t rl = 0;
            int status = 0, sent = 0, grpc = -1, no_leader = 0, rc;
            if (now >= deadline)
                goto expired;
            /* a stalled endpoint takes at most its share of what is left, so the ones after it
             * still get a turn */
            slice = (deadline - now) / (c->n - i);
            if (slice < 200)
                slice = deadline - now < 200 ? deadline - now : 200;
            if (ep->tls) {
                rc = mc__etcd_tls_request(c, ep, path, body, blen, (int)slice, MC_ETCD_MAX_RESPONSE,
                                          &status, &rb, &rl, &sent);
            } else {
                snprintf(url, sizeof(url), "http://%s%s", ep->name, path);
                rc = mc__http_request_ex("POST", url, body, blen, (int)slice, MC_ETCD_MAX_RESPONSE,
                                         &status, &rb, &rl, &sent);
            }
            if (rc == MC_ERR_MEMORY)
                return rc;
            if (rc == MC_ERR_BUFFER_OVERFLOW) {
                MC_WARN("etcd %s %s: an answer over %u MiB; not etcd's, or a range to page",
                        ep->name, path, MC_ETCD_MAX_RESPONSE >> 20);
                return MC_ERR_MALFORMED_JSON;
            }
            if (rc) {
                int stalled = mc__now_ms() - now + 5 >= slice;
                timed_out |= stalled;
                reached |= stalled;
                MC_DEBUG("etcd %s %s: %s", ep->name, path,
                         stalled ? "no answer in time" : "cannot connect");
                if (sent && !idempotent) {
                    MC_WARN("etcd %s %s: connection lost after the request was sent; it may "
                            "have been applied",
                            ep->name, path);
                    return MC_ERR_ETCD_TRANSACTION_FAIL;
                }
                continue;
            }
            if (status == 200) {
                atomic_store(&c->current, (size_t)(ep - c->eps));
                *resp = rb;
                *resp_len = rl;
                return 0;
            }
            last = mc__etcd_answer_error(ep, path, status, rb, rl, &grpc, &no_leader);
            mc__free(rb);
            if (grpc != MC__GRPC_UNAVAILABLE && !(grpc < 0 && status >= 500))
                return last; /* etcd's verdict: another member would say the same */
            if (!idempotent && !no_leader) {
                MC_WARN("etcd %s %s: unavailable after the request was proposed; it may have "
                        "been applied",
                        ep->name, path);
                return MC_ERR_ETCD_TRANSACTION_FAIL;
            }
            reached = 1;
        }
        /* every endpoint refused connections twice: nothing is listening; do not wait out
         * the whole deadline */
        if (!reached && round >= 1)
            break;
        if (mc__now_ms() + 100 >= deadline)
            goto expired;
        mc__etcd_sleep_ms(100);
    }
    MC_WARN("etcd: no endpoint of %zu reachable for %s (first %s)", c->n, path, c->eps[0].name);
    return MC_ERR_ETCD_OPERATION_ERROR;
expired:
    MC_WARN("etcd %s: no answer within %d ms from %zu endpoint(s)", path, (int)(mc__now_ms() - t0),
            c->n);
    return timed_out || last == MC_ERR_ETCD_OPERATION_ERROR ? MC_ERR_ETCD_CTX_CANCELLED : last;
}

/* --- request bodies --- */
static int mc__body_end(mc_buf_t *b) {
    if (mc__buf_put(b, "}", 2) || b->failed) /* with the NUL */
        return MC_ERR_MEMORY;
    return 0;
}

/* Runs a call with a body built in b; frees b. */
static int mc__etcd_do(mc_etcd_t *c, const char *path, mc_buf_t *b, int idempotent, char **resp,
                       size_t *resp_len) {
    int rc = mc__body_end(b);
    if (!rc)
        rc = mc__etcd_call(c, path, (const char *)b->data, idempotent, 0, resp, resp_len);
    mc__buf_free(b);
    return rc;
}

/* Starts in b the body of a call on a key, or with range_end on the keys [key, range_end). */
static void mc__key_body(mc_buf_t *b, const void *key, size_t key_len, const void *range_end,
                         size_t range_end_len) {
    mc__buf_init(b);
    mc__buf_put(b, "{", 1);
    mc__etcd_field_b64(b, "key", key, key_len);
    if (range_end)
        mc__etcd_field_b64(b, "range_end", range_end, range_end_len);
}

/* A put or a delete with its body in b (freed): the revision it made, the keys it deleted. */
static int mc__etcd_write(mc_etcd_t *c, const char *path, mc_buf_t *b, int64_t *revision,
                          int64_t *deleted) {
    char *r = NULL;
    size_t rl = 0;
    int rc = mc__etcd_do(c, path, b, 1, &r, &rl);
    if (!rc)
        rc = mc__etcd_parse_write(r, rl, revision, deleted);
    mc__free(r);
    return rc;
}

int mc__etcd_put(mc_etcd_t *c, const void *key, size_t key_len, const void *val, size_t val_len,
                 int64_t lease, int64_t *revision) {
    mc_buf_t b;
    if (!c || !key || !key_len || (!val && val_len))
        return MC_ERR_INVALID_ARGUMENT;
    mc__key_body(&b, key, key_len, NULL, 0);
    mc__etcd_field_b64(&b, "value", val ? val : "", val_len);
    if (lease)
        mc__etcd_field_i64(&b, "lease", lease);
    return mc__etcd_write(c, "/v3/kv/put", &b, revision, NULL);
}

int mc__etcd_range(mc_etcd_t *c, const void *key, size_t key_len, const void *range_end,
                   size_t range_end_len, int64_t limit, int64_t revision, mc_etcd_kvs_t *out) {
    mc_buf_t b;
    char *r = NULL;
    size_t rl = 0;
    int rc;
    if (out)
        memset(out, 0, sizeof(*out));
    if (!c || !out || !key || !key_len || (range_end && !range_end_len) || limit < 0 ||
        revision < 0)
        return MC_ERR_INVALID_ARGUMENT;
    mc__key_body(&b, key, key_len, range_end, range_end_len);
    if (limit)
        mc__etcd_field_i64(&b, "limit", limit);
    if (revision)
        mc__etcd_field_i64(&b, "revision", revision);
    rc = mc__etcd_do(c, "/v3/kv/range", &b, 1, &r, &rl);
    if (!rc)
        rc = mc__etcd_parse_range(r, rl, out);
    mc__free(r);
    return rc;
}

int mc__etcd_get(mc_etcd_t *c, const void *key, size_t key_len, mc_etcd_kv_t *out) {
    mc_etcd_kvs_t r;
    int rc;
    if (out)
        memset(out, 0, sizeof(*out));
    if (!out)
        return MC_ERR_INVALID_ARGUMENT;
    rc = mc__etcd_range(c, key, key_len, NULL, 0, 0, 0, &r);
    if (rc)
        return rc;
    if (r.n == 0) {
        rc = MC_ERR_ETCD_KEY_NOT_EXIST;
    } else {
        *out = r.kvs[0];
        memset(&r.kvs[0], 0, sizeof(r.kvs[0]));
    }
    mc__etcd_kvs_free(&r);
    return rc;
}

size_t mc__etcd_prefix_end(const void *prefix, size_t prefix_len, uint8_t *out) {
    const uint8_t *p = prefix;
    for (size_t i = prefix_len; i > 0; i--) {
        if (p[i - 1] != 0xff) {
            memcpy(out, p, i - 1);
            out[i - 1] = (uint8_t)(p[i - 1] + 1);
            return i;
        }
    }
    out[0] = 0;
    return 1;
}

int mc__etcd_range_prefix(mc_etcd_t *c, const void *prefix, size_t prefix_len, int64_t page_size,
                          mc_etcd_kvs_t *out) {
    uint8_t *end = NULL, *from = NULL;
    size_t end_len, from_len = prefix_len;
    int rc = MC_ERR_INVALID_ARGUMENT;
    if (out)
        memset(out, 0, sizeof(*out));
    if (!c || !out || !prefix || !prefix_len || page_size < 0)
        return rc;
    if (!page_size)
        page_size = 1000;
    end = mc__malloc(prefix_len + 1);
    from = mc__malloc(prefix_len + 1);
    if (!end || !from) {
        rc = MC_ERR_MEMORY;
        goto out;
    }
    end_len = mc__etcd_prefix_end(prefix, prefix_len, end);
    memcpy(from, prefix, prefix_len);
    for (;;) {
        mc_etcd_kvs_t page;
        mc_etcd_kv_t *grown;
        const mc_etcd_kv_t *lastkv;
        rc = mc__etcd_range(c, from, from_len, end, end_len, page_size, out->revision, &page);
        if (rc)
            goto out;
        if (!out->revision) {
            out->revision = page.revision;
            out->count = page.count;
        }
        if (page.n) {
            grown = mc__realloc(out->kvs, (out->n + page.n) * sizeof(*out->kvs));
            if (!grown) {
                mc__etcd_kvs_free(&page);
                rc = MC_ERR_MEMORY;
                goto out;
            }
            out->kvs = grown;
            memcpy(out->kvs + out->n, page.kvs, page.n * sizeof(*page.kvs));
            out->n += page.n;
        }
        if (!page.more || !page.n) {
            mc__free(page.kvs);
            break;
        }
        /* the next page starts just after the last key: that key with a 0 byte appended */
        lastkv = &page.kvs[page.n - 1];
        mc__free(from);
        from = mc__malloc(lastkv->key_len + 1);
        if (!from) {
            mc__free(page.kvs);
            rc = MC_ERR_MEMORY;
            goto out;
        }
        memcpy(from, lastkv->key, lastkv->key_len);
        from[lastkv->key_len] = 0;
        from_len = lastkv->key_len + 1;
        mc__free(page.kvs);
    }
    rc = 0;
out:
    if (rc)
        mc__etcd_kvs_free(out);
    mc__free(end);
    mc__free(from);
    return rc;
}

int mc__etcd_delete(mc_etcd_t *c, const void *key, size_t key_len, const void *range_end,
                    size_t range_end_len, int64_t *deleted) {
    mc_buf_t b;
    if (deleted)
        *deleted = 0;
    if (!c || !key || !key_len || (range_end && !range_end_len))
        return MC_ERR_INVALID_ARGUMENT;
    mc__key_body(&b, key, key_len, range_end, range_end_len);
    return mc__etcd_write(c, "/v3/kv/deleterange", &b, NULL, deleted);
}

int mc__etcd_txn(mc_etcd_t *c, const mc_etcd_cmp_t *cmps, size_t ncmp, const mc_etcd_op_t *success,
                 size_t nsuccess, const mc_etcd_op_t *failure, size_t nfailure,
                 mc_etcd_txn_result_t *out) {
    mc_etcd_txn_result_t tmp;
    char *body = NULL, *r = NULL;
    size_t rl = 0;
    int rc;
    if (out)
        memset(out, 0, sizeof(*out));
    if (!c)
        return MC_ERR_INVALID_ARGUMENT;
    rc = mc__etcd_build_txn(cmps, ncmp, success, nsuccess, failure, nfailure, &body);
    if (!rc)
        rc = mc__etcd_call(c, "/v3/kv/txn", body, 0, 0, &r, &rl);
    if (!rc)
        rc = mc__etcd_parse_txn(r, rl, out ? out : &tmp);
    if (!rc && !out)
        mc__etcd_txn_result_free(&tmp);
    mc__free(body);
    mc__free(r);
    return rc;
}

int mc__etcd_compact(mc_etcd_t *c, int64_t revision) {
    char body[64];
    char *r = NULL;
    size_t rl = 0;
    int rc;
    if (!c || revision <= 0)
        return MC_ERR_INVALID_ARGUMENT;
    snprintf(body, sizeof(body), "{\"revision\":\"%" PRId64 "\"}", revision);
    rc = mc__etcd_call(c, "/v3/kv/compaction", body, 1, 0, &r, &rl);
    mc__free(r);
    return rc;
}

static int mc__lease_call(mc_etcd_t *c, const char *path, int64_t id, int64_t ttl, int timeout_ms,
                          int64_t *out_id, int64_t *out_ttl) {
    char body[96];
    char *r = NULL;
    size_t rl = 0;
    int rc;
    if (ttl)
        snprintf(body, sizeof(body), "{\"TTL\":\"%" PRId64 "\",\"ID\":\"%" PRId64 "\"}", ttl, id);
    else
        snprintf(body, sizeof(body), "{\"ID\":\"%" PRId64 "\"}", id);
    rc = mc__etcd_call(c, path, body, 1, timeout_ms, &r, &rl);
    if (!rc)
        rc = mc__etcd_parse_lease(r, rl, out_id, out_ttl);
    mc__free(r);
    return rc;
}

int mc__etcd_lease_grant(mc_etcd_t *c, int64_t ttl_s, int64_t *id, int64_t *granted_ttl) {
    int64_t got = 0, t = 0;
    int rc;
    if (!c || !id || ttl_s <= 0 || *id < 0)
        return MC_ERR_INVALID_ARGUMENT;
    rc = mc__lease_call(c, "/v3/lease/grant", *id, ttl_s, 0, &got, &t);
    if (!rc && got == 0)
        rc = MC_ERR_MALFORMED_JSON;
    if (!rc) {
        *id = got;
        if (granted_ttl)
            *granted_ttl = t;
    }
    return rc;
}

int mc__etcd_lease_keepalive_dl(mc_etcd_t *c, int64_t id, int timeout_ms, int64_t *ttl) {
    int64_t t = 0;
    int rc;
    if (!c || id <= 0)
        return MC_ERR_INVALID_ARGUMENT;
    rc = mc__lease_call(c, "/v3/lease/keepalive", id, 0, timeout_ms, NULL, &t);
    if (!rc && t <= 0)
        rc = MC_ERR_ETCD_KEY_NOT_EXIST; /* etcd answers a gone lease with TTL 0 */
    if (ttl)
        *ttl = rc ? 0 : t;
    return rc;
}

int mc__etcd_lease_keepalive(mc_etcd_t *c, int64_t id, int64_t *ttl) {
    return mc__etcd_lease_keepalive_dl(c, id, 0, ttl);
}

int mc__etcd_lease_revoke(mc_etcd_t *c, int64_t id) {
    if (!c || id <= 0)
        return MC_ERR_INVALID_ARGUMENT;
    return mc__lease_call(c, "/v3/lease/revoke", id, 0, 0, NULL, NULL);
}

int mc__etcd_lease_ttl(mc_etcd_t *c, int64_t id, int64_t *remaining, int64_t *granted) {
    char body[64];
    char *r = NULL;
    size_t rl = 0;
    int64_t t = 0, g = 0;
    int rc;
    if (!c || id <= 0)
        return MC_ERR_INVALID_ARGUMENT;
    snprintf(body, sizeof(body), "{\"ID\":\"%" PRId64 "\"}", id);
    rc = mc__etcd_call(c, "/v3/lease/timetolive", body, 1, 0, &r, &rl);
    if (!rc)
        rc = mc__etcd_parse_lease_ttl(r, rl, &t, &g);
    if (remaining)
        *remaining = t;
    if (granted)
        *granted = g;
    mc__free(r);
    return rc;
}
