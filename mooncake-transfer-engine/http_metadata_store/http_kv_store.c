/* A chained hash table under one rwlock: metadata traffic is small and read-mostly (peers look
 * up segment descriptors), so one lock is simpler than sharding and never the bottleneck. */
#include "http_kv_store.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
/* header-only use: no libxxhash at run time */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/hlink.h"
#include "mooncake/error.h"

typedef struct mc__kv_entry {
    mc_hlink_t link; /* first: the table's chain and the key's hash */
    char *key;
    uint8_t *val;
    size_t len;
} mc__kv_entry_t;

struct mc_http_kv_store {
    pthread_rwlock_t lock;
    mc_hlink_t **buckets; /* each begins an mc__kv_entry_t */
    size_t nbuckets;      /* power of two */
    size_t count;
    uint64_t bytes; /* keys and values held, against MC_HTTP_KV_MAX_TOTAL */
    mc_http_server_t *server;
};

int mc__http_kv_store_create(mc_http_kv_store_t **out) {
    mc_http_kv_store_t *s = NULL;
    int rc = MC_ERR_INVALID_ARGUMENT;
    if (!out)
        goto out;
    rc = MC_ERR_MEMORY;
    s = mc__calloc(1, sizeof(*s));
    if (!s)
        goto out;
    s->nbuckets = 64;
    s->buckets = mc__calloc(s->nbuckets, sizeof(*s->buckets));
    if (!s->buckets || pthread_rwlock_init(&s->lock, NULL) != 0)
        goto out;
    *out = s;
    s = NULL;
    rc = 0;
out:
    if (s) {
        mc__free(s->buckets);
        mc__free(s);
    }
    return rc;
}

static void mc__kv_handler(void *ctx, const mc_http_request_t *req, mc_http_response_t *resp) {
    mc__http_kv_store_handle(ctx, req, resp);
}

int mc__http_kv_store_start(const char *host, uint16_t port, mc_http_kv_store_t **out) {
    return mc__http_kv_store_start_auth(host, port, NULL, out);
}

int mc__http_kv_store_start_auth(const char *host, uint16_t port, const struct mc_auth *auth,
                                 mc_http_kv_store_t **out) {
    mc_http_kv_store_t *s = NULL;
    int rc = mc__http_kv_store_create(&s);
    if (rc)
        goto out;
    rc = mc__http_server_start_auth(host, port, MC_HTTP_KV_MAX_VALUE, mc__kv_handler, s, auth,
                                    &s->server);
    if (rc)
        goto out;
    *out = s;
    s = NULL;
out:
    if (s)
        mc__http_kv_store_stop(s);
    return rc;
}

uint16_t mc__http_kv_store_port(const mc_http_kv_store_t *s) {
    return s && s->server ? mc__http_server_port(s->server) : 0;
}

void mc__http_kv_store_stop(mc_http_kv_store_t *s) {
    if (!s)
        return;
    /* The server goes first so no handler can run while entries are freed. */
    if (s->server)
        mc__http_server_stop(s->server);
    for (size_t i = 0; i < s->nbuckets; i++) {
        mc_hlink_t *l = s->buckets[i];
        while (l) {
            mc__kv_entry_t *e = (mc__kv_entry_t *)l;
            l = l->next;
            mc__free(e->key);
            mc__free(e->val);
            mc__free(e);
        }
    }
    pthread_rwlock_destroy(&s->lock);
    mc__free(s->buckets);
    mc__free(s);
}

/* Where key's entry is linked (*slot its link), or the end of its chain when it has none. */
static mc_hlink_t **mc__kv_slot(mc_http_kv_store_t *s, const char *key, uint64_t h) {
    mc_hlink_t **pp = &s->buckets[h & (s->nbuckets - 1)];
    while (*pp && ((*pp)->hash != h || strcmp(((mc__kv_entry_t *)*pp)->key, key) != 0))
        pp = &(*pp)->next;
    return pp;
}

/* Doubles the table when it gets crowded; on allocation failure keeps the old one (only slower). */
static void mc__kv_grow(mc_http_kv_store_t *s) {
    size_t n = s->nbuckets * 2;
    mc_hlink_t **nb = NULL;
    if (s->count < s->nbuckets * 2 || n > ((size_t)1 << 26))
        return;
    nb = mc__calloc(n, sizeof(*nb));
    if (!nb)
        return;
    mc__hlink_rehash(s->buckets, s->nbuckets, nb, n);
    mc__free(s->buckets);
    s->buckets = nb;
    s->nbuckets = n;
}

int mc__http_kv_store_put(mc_http_kv_store_t *s, const char *key, const void *val, size_t len) {
    size_t klen = key ? strlen(key) : 0;
    uint64_t h;
    uint8_t *copy = NULL;
    char *kcopy = NULL;
    mc__kv_entry_t *e = NULL, *old;
    mc_hlink_t **pp;
    int rc = MC_ERR_INVALID_ARGUMENT;
    if (!s || klen == 0 || klen > MC_HTTP_KV_MAX_KEY || len > MC_HTTP_KV_MAX_VALUE || (len && !val))
        goto out;
    rc = MC_ERR_MEMORY;
    copy = mc__malloc(len ? len : 1);
    if (!copy)
        goto out;
    if (len)
        memcpy(copy, val, len);
    h = XXH3_64bits(key, klen);
    pthread_rwlock_wrlock(&s->lock);
    pp = mc__kv_slot(s, key, h);
    old = (mc__kv_entry_t *)*pp;
    if (s->bytes - (old ? old->len : 0) + len + (old ? 0 : klen) > MC_HTTP_KV_MAX_TOTAL) {
        /* over the total: refused, the old value (if any) stays */
    } else if (old) {
        s->bytes = s->bytes - old->len + len;
        mc__free(old->val);
        old->val = copy;
        old->len = len;
        copy = NULL;
        rc = 0;
    } else if ((e = mc__calloc(1, sizeof(*e))) && (kcopy = mc__strdup(key))) {
        e->link.hash = h;
        e->key = kcopy;
        e->val = copy;
        e->len = len;
        e->link.next = NULL;
        *pp = &e->link;
        s->count++;
        s->bytes += klen + len;
        mc__kv_grow(s);
        copy = NULL;
        e = NULL;
        kcopy = NULL;
        rc = 0;
    }
    pthread_rwlock_unlock(&s->lock);
out:
    mc__free(e);
    mc__free(kcopy);
    mc__free(copy);
    return rc;
}

int mc__http_kv_store_get(mc_http_kv_store_t *s, const char *key, uint8_t **val, size_t *len) {
    mc__kv_entry_t *e;
    int rc = MC_ERR_INVALID_ARGUMENT;
    if (!s || !key || !val || !len)
        return rc;
    pthread_rwlock_rdlock(&s->lock);
    e = (mc__kv_entry_t *)*mc__kv_slot(s, key, XXH3_64bits(key, strlen(key)));
    rc = MC_ERR_METADATA;
    if (e) {
        rc = MC_ERR_MEMORY;
        *val = mc__malloc(e->len ? e->len : 1);
        if (*val) {
            if (e->len)
                memcpy(*val, e->val, e->len);
            *len = e->len;
            rc = 0;
        }
    }
    pthread_rwlock_unlock(&s->lock);
    return rc;
}

int mc__http_kv_store_del(mc_http_kv_store_t *s, const char *key) {
    mc_hlink_t **pp;
    mc__kv_entry_t *e = NULL;
    if (!s || !key)
        return MC_ERR_INVALID_ARGUMENT;
    pthread_rwlock_wrlock(&s->lock);
    pp = mc__kv_slot(s, key, XXH3_64bits(key, strlen(key)));
    if (*pp) {
        e = (mc__kv_entry_t *)*pp;
        *pp = e->link.next;
        s->count--;
        s->bytes -= strlen(e->key) + e->len;
    }
    pthread_rwlock_unlock(&s->lock);
    if (!e)
        return MC_ERR_METADATA;
    mc__free(e->key);
    mc__free(e->val);
    mc__free(e);
    return 0;
}

size_t mc__http_kv_store_count(mc_http_kv_store_t *s) {
    size_t n;
    pthread_rwlock_rdlock(&s->lock);
    n = s->count;
    pthread_rwlock_unlock(&s->lock);
    return n;
}

static void mc__kv_text(mc_http_response_t *resp, int status, const char *msg) {
    (void)mc__http_respond(resp, status, "text/plain", msg, strlen(msg));
}

/* A refused request, as the reference's Python server answers it: 400 in JSON. */
static void mc__kv_bad(mc_http_response_t *resp, const char *msg) {
    char body[160];
    int n = snprintf(body, sizeof(body), "{\"success\":false,\"error\":\"%s\"}", msg);
    (void)mc__http_respond(resp, 400, "application/json", body, (size_t)n);
}

static int mc__kv_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* The key= parameter with surrounding white space removed (the reference strips it, so
 * "  k  " names k); 0, or -1 when absent, too long or blank. */
static int mc__kv_key(const mc_http_request_t *req, char *key, size_t cap) {
    size_t a = 0, n;
    if (mc__http_query_get(req->query, "key", key, cap) != 0)
        return -1;
    n = strlen(key);
    while (n > 0 && mc__kv_space(key[n - 1]))
        n--;
    while (a < n && mc__kv_space(key[a]))
        a++;
    memmove(key, key + a, n - a);
    key[n - a] = '\0';
    return n > a ? 0 : -1;
}

void mc__http_kv_store_handle(mc_http_kv_store_t *s, const mc_http_request_t *req,
                              mc_http_response_t *resp) {
    char key[MC_HTTP_KV_MAX_KEY + 1];
    uint8_t *val = NULL;
    size_t len = 0;
    int rc;
    if (strcmp(req->path, "/health") == 0 &&
        (strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0)) {
        mc__kv_text(resp, 200, "OK"); /* the reference's liveness probe */
        return;
    }
    if (strcmp(req->path, MC_HTTP_KV_PATH) != 0) {
        mc__kv_text(resp, 404, "not found");
        return;
    }
    if (strcmp(req->method, "GET") && strcmp(req->method, "HEAD") && strcmp(req->method, "PUT") &&
        strcmp(req->method, "DELETE")) {
        mc__kv_text(resp, 405, "method not allowed");
        return;
    }
    if (mc__kv_key(req, key, sizeof(key)) != 0) {
        mc__kv_bad(resp, "metadata key is required");
        return;
    }
    if (req->method[0] == 'P') {
        if (req->body_len > MC_HTTP_KV_MAX_VALUE) {
            mc__kv_text(resp, 413, "value too large");
            return;
        }
        rc = mc__http_kv_store_put(s, key, req->body, req->body_len);
        if (rc == MC_ERR_MEMORY)
            mc__kv_text(resp, 507, "metadata store full");
        else
            mc__kv_text(resp, rc ? 500 : 200, rc ? mc_strerror(rc) : "metadata updated");
    } else if (req->method[0] == 'D') {
        rc = mc__http_kv_store_del(s, key);
        mc__kv_text(resp, rc ? 404 : 200, rc ? "metadata not found" : "metadata deleted");
    } else {
        rc = mc__http_kv_store_get(s, key, &val, &len);
        if (rc == 0) {
            /* Hand the copy over instead of copying it a second time. */
            mc__free(resp->body);
            resp->status = 200;
            resp->content_type = "application/json";
            resp->body = val;
            resp->body_len = len;
        } else {
            mc__kv_text(resp, rc == MC_ERR_METADATA ? 404 : 500,
                        rc == MC_ERR_METADATA ? "metadata not found" : mc_strerror(rc));
        }
    }
}
