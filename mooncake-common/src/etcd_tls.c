/* etcd over TLS (https:// endpoints), through libcurl loaded at run time: the wheel links no TLS
 * library, a host that never names an https endpoint never loads one, and the TLS itself is a
 * well-kept library's, not ours. Certificates come from the environment, named as etcdctl names
 * them: MC_ETCD_CACERT (the CA that signed the members' certificates), MC_ETCD_CERT and
 * MC_ETCD_KEY (this client's certificate and key, for members started with client-cert-auth).
 *
 * The ABI used is libcurl's stable easy interface (option numbers and function signatures have
 * not changed since 7.x); the few numbers are written here because the build has no curl headers
 * to take them from. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "etcd_internal.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/log.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"

/* curl.h's numbers (CURLOPTTYPE_*: LONG 0, OBJECTPOINT 10000, FUNCTIONPOINT 20000, OFF_T 30000) */
enum {
    MC__CURLOPT_WRITEDATA = 10001,
    MC__CURLOPT_URL = 10002,
    MC__CURLOPT_POSTFIELDS = 10015,
    MC__CURLOPT_HTTPHEADER = 10023,
    MC__CURLOPT_SSLCERT = 10025,
    MC__CURLOPT_HEADERDATA = 10029,
    MC__CURLOPT_NOPROGRESS = 43,
    MC__CURLOPT_POST = 47,
    MC__CURLOPT_XFERINFODATA = 10057,
    MC__CURLOPT_CAINFO = 10065,
    MC__CURLOPT_SSLKEY = 10087,
    MC__CURLOPT_NOSIGNAL = 99,
    MC__CURLOPT_TIMEOUT_MS = 155,
    MC__CURLOPT_CONNECTTIMEOUT_MS = 156,
    MC__CURLOPT_TCP_KEEPALIVE = 213,
    MC__CURLOPT_TCP_KEEPIDLE = 214,
    MC__CURLOPT_TCP_KEEPINTVL = 215,
    MC__CURLOPT_WRITEFUNCTION = 20011,
    MC__CURLOPT_HEADERFUNCTION = 20079,
    MC__CURLOPT_XFERINFOFUNCTION = 20219,
    MC__CURLOPT_POSTFIELDSIZE_LARGE = 30120,
    MC__CURLINFO_RESPONSE_CODE = 0x200002,
    MC__CURLINFO_REQUEST_SIZE = 0x20000C,
    MC__CURL_GLOBAL_DEFAULT = 3,
    MC__CURLE_OK = 0,
};

typedef size_t (*mc__curl_data_fn)(char *p, size_t size, size_t n, void *ctx);
typedef int (*mc__curl_xfer_fn)(void *ctx, long long dltotal, long long dlnow, long long ultotal,
                                long long ulnow);

static struct {
    int (*global_init)(long flags);
    void *(*easy_init)(void);
    int (*easy_setopt)(void *h, int opt, ...);
    int (*easy_perform)(void *h);
    int (*easy_getinfo)(void *h, int info, ...);
    void (*easy_cleanup)(void *h);
    const char *(*easy_strerror)(int code);
    void *(*slist_append)(void *list, const char *s);
    void (*slist_free_all)(void *list);
    int loaded; /* 1 loaded, -1 not loadable */
} mc__curl;

static pthread_once_t mc__curl_once = PTHREAD_ONCE_INIT;

static void mc__curl_load(void) {
    static const char *const names[] = {"libcurl.so.4", "libcurl-gnutls.so.4", "libcurl.so"};
    void *lib = NULL;
    for (size_t i = 0; !lib && i < sizeof(names) / sizeof(names[0]); i++)
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    mc__curl.loaded = -1;
    if (!lib) {
        MC_ERROR("etcd: https:// endpoints need libcurl (libcurl.so.4, Debian: libcurl4): %s",
                 dlerror());
        return;
    }
#define MC__SYM(field, name)                                                                       \
    do {                                                                                           \
        *(void **)&mc__curl.field = dlsym(lib, name);                                              \
        if (!mc__curl.field) {                                                                     \
            MC_ERROR("etcd: libcurl lacks %s", name);                                              \
            return;                                                                                \
        }                                                                                          \
    } while (0)
    MC__SYM(global_init, "curl_global_init");
    MC__SYM(easy_init, "curl_easy_init");
    MC__SYM(easy_setopt, "curl_easy_setopt");
    MC__SYM(easy_perform, "curl_easy_perform");
    MC__SYM(easy_getinfo, "curl_easy_getinfo");
    MC__SYM(easy_cleanup, "curl_easy_cleanup");
    MC__SYM(easy_strerror, "curl_easy_strerror");
    MC__SYM(slist_append, "curl_slist_append");
    MC__SYM(slist_free_all, "curl_slist_free_all");
#undef MC__SYM
    if (mc__curl.global_init(MC__CURL_GLOBAL_DEFAULT) != MC__CURLE_OK) {
        MC_ERROR("etcd: libcurl did not initialise");
        return;
    }
    mc__curl.loaded = 1;
}

int mc__etcd_tls_available(void) {
    pthread_once(&mc__curl_once, mc__curl_load);
    return mc__curl.loaded == 1;
}

int mc__etcd_tls_config(mc_etcd_t *c) {
    static const struct {
        const char *env;
        size_t off;
    } files[] = {{"MC_ETCD_CACERT", offsetof(mc_etcd_t, tls_cacert)},
                 {"MC_ETCD_CERT", offsetof(mc_etcd_t, tls_cert)},
                 {"MC_ETCD_KEY", offsetof(mc_etcd_t, tls_key)}};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        const char *v = getenv(files[i].env);
        char *dst = (char *)c + files[i].off;
        if (!v || !*v)
            continue;
        if (strlen(v) >= sizeof(c->tls_cacert)) {
            MC_ERROR("etcd: %s is longer than %zu bytes", files[i].env, sizeof(c->tls_cacert) - 1);
            return MC_ERR_INVALID_ARGUMENT;
        }
        if (access(v, R_OK) != 0) {
            MC_ERROR("etcd: %s=%s cannot be read", files[i].env, v);
            return MC_ERR_INVALID_ARGUMENT;
        }
        strcpy(dst, v);
    }
    if (!c->tls_cert[0] != !c->tls_key[0]) {
        MC_ERROR("etcd: MC_ETCD_CERT and MC_ETCD_KEY go together (a client certificate and its "
                 "key)");
        return MC_ERR_INVALID_ARGUMENT;
    }
    return mc__etcd_tls_available() ? 0 : MC_ERR_INVALID_ARGUMENT;
}

/* A handle for one POST of body to https://ep/path with the client's certificates: 0, or
 * MC_ERR_ETCD_OPERATION_ERROR without libcurl, MC_ERR_MEMORY. */
static int mc__tls_handle(const mc_etcd_t *c, const mc__etcd_ep_t *ep, const char *path,
                          const char *body, size_t blen, void **headers, void **out) {
    char url[400];
    void *h;
    *out = NULL;
    if (!mc__etcd_tls_available())
        return MC_ERR_ETCD_OPERATION_ERROR;
    h = mc__curl.easy_init();
    if (!h)
        return MC_ERR_MEMORY;
    snprintf(url, sizeof(url), "https://%s%s", ep->name, path);
    *headers = mc__curl.slist_append(NULL, "Content-Type: application/json");
    /* a member cut off from the quorum ends a watch instead of going quiet (see etcd_watch.c) */
    *headers = mc__curl.slist_append(*headers, "Grpc-Metadata-Hasleader: true");
    mc__curl.easy_setopt(h, MC__CURLOPT_URL, url);
    mc__curl.easy_setopt(h, MC__CURLOPT_POST, 1L);
    mc__curl.easy_setopt(h, MC__CURLOPT_POSTFIELDS, body);
    mc__curl.easy_setopt(h, MC__CURLOPT_POSTFIELDSIZE_LARGE, (long long)blen);
    mc__curl.easy_setopt(h, MC__CURLOPT_HTTPHEADER, *headers);
    mc__curl.easy_setopt(h, MC__CURLOPT_NOSIGNAL, 1L); /* threads: no SIGALRM for timeouts */
    if (c->tls_cacert[0])
        mc__curl.easy_setopt(h, MC__CURLOPT_CAINFO, c->tls_cacert);
    if (c->tls_cert[0]) {
        mc__curl.easy_setopt(h, MC__CURLOPT_SSLCERT, c->tls_cert);
        mc__curl.easy_setopt(h, MC__CURLOPT_SSLKEY, c->tls_key);
    }
    *out = h;
    return 0;
}

typedef struct mc__tls_body {
    char *data;
    size_t len, cap, max;
    int overflow;
} mc__tls_body_t;

static size_t mc__tls_collect(char *p, size_t size, size_t n, void *ctx) {
    mc__tls_body_t *b = ctx;
    size_t add = size * n;
    if (b->len + add > b->max) {
        b->overflow = 1;
        return 0; /* curl ends the transfer */
    }
    if (b->len + add + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        char *d;
        while (cap < b->len + add + 1)
            cap *= 2;
        d = mc__realloc(b->data, cap);
        if (!d)
            return 0;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, add);
    b->len += add;
    b->data[b->len] = '\0';
    return add;
}

int mc__etcd_tls_request(const mc_etcd_t *c, const mc__etcd_ep_t *ep, const char *path,
                         const char *body, size_t blen, int timeout_ms, size_t max_resp,
                         int *status, char **resp, size_t *resp_len, int *sent) {
    mc__tls_body_t b = {.max = max_resp};
    void *headers = NULL;
    long code = 0, req_size = 0;
    int rc;
    void *h;
    *status = 0;
    *sent = 0;
    *resp = NULL;
    *resp_len = 0;
    rc = mc__tls_handle(c, ep, path, body, blen, &headers, &h);
    if (rc)
        return rc;
    mc__curl.easy_setopt(h, MC__CURLOPT_TIMEOUT_MS, (long)timeout_ms);
    mc__curl.easy_setopt(h, MC__CURLOPT_WRITEFUNCTION, (mc__curl_data_fn)mc__tls_collect);
    mc__curl.easy_setopt(h, MC__CURLOPT_WRITEDATA, &b);
    rc = mc__curl.easy_perform(h);
    mc__curl.easy_getinfo(h, MC__CURLINFO_RESPONSE_CODE, &code);
    mc__curl.easy_getinfo(h, MC__CURLINFO_REQUEST_SIZE, &req_size);
    *sent = req_size > 0; /* the request went out: a lost answer may hide an applied write */
    if (rc != MC__CURLE_OK) {
        MC_DEBUG("etcd %s %s over TLS: %s", ep->name, path, mc__curl.easy_strerror(rc));
        mc__free(b.data);
        rc = b.overflow ? MC_ERR_BUFFER_OVERFLOW : MC_ERR_ETCD_OPERATION_ERROR;
    } else {
        *status = (int)code;
        *resp = b.data ? b.data : mc__calloc(1, 1);
        *resp_len = b.len;
        rc = *resp ? 0 : MC_ERR_MEMORY;
    }
    mc__curl.slist_free_all(headers);
    mc__curl.easy_cleanup(h);
    return rc;
}

typedef struct mc__tls_stream {
    mc__etcd_tls_feed_fn feed;
    int (*idle)(void *ctx);
    void *ctx;
    int fed_head;
    int result;
} mc__tls_stream_t;

/* The status line as the stream parser reads it, once the answer's code is known; the rest of
 * the head is curl's business (it has already undone the chunked framing). */
static size_t mc__tls_head(char *p, size_t size, size_t n, void *ctx) {
    mc__tls_stream_t *s = ctx;
    size_t len = size * n;
    char line[32];
    int k;
    if (!s->fed_head && len > 12 && !strncmp(p, "HTTP/", 5)) {
        const char *sp = memchr(p, ' ', len);
        if (sp && sp + 4 <= p + len) {
            k = snprintf(line, sizeof(line), "HTTP/1.1 %.3s X\r\n\r\n", sp + 1);
            s->fed_head = 1;
            s->result = s->feed(s->ctx, (const uint8_t *)line, (size_t)k);
        }
    }
    return s->result ? 0 : len;
}

static size_t mc__tls_stream_body(char *p, size_t size, size_t n, void *ctx) {
    mc__tls_stream_t *s = ctx;
    if (!s->result)
        s->result = s->feed(s->ctx, (const uint8_t *)p, size * n);
    return s->result ? 0 : size * n;
}

static int mc__tls_stream_progress(void *ctx, long long a, long long b, long long c, long long d) {
    mc__tls_stream_t *s = ctx;
    if (!s->result)
        s->result = s->idle(s->ctx);
    return s->result != 0; /* nonzero: curl aborts the transfer */
}

int mc__etcd_tls_stream(const mc_etcd_t *c, const mc__etcd_ep_t *ep, const char *path,
                        const char *body, size_t blen, int connect_ms, mc__etcd_tls_feed_fn feed,
                        int (*idle)(void *ctx), void *ctx) {
    mc__tls_stream_t s = {.feed = feed, .idle = idle, .ctx = ctx};
    void *headers = NULL;
    int rc;
    void *h;
    rc = mc__tls_handle(c, ep, path, body, blen, &headers, &h);
    if (rc)
        return rc;
    mc__curl.easy_setopt(h, MC__CURLOPT_CONNECTTIMEOUT_MS, (long)connect_ms);
    /* as the plain stream: a member whose host vanished is noticed by keep-alive in ~11 s */
    mc__curl.easy_setopt(h, MC__CURLOPT_TCP_KEEPALIVE, 1L);
    mc__curl.easy_setopt(h, MC__CURLOPT_TCP_KEEPIDLE, 5L);
    mc__curl.easy_setopt(h, MC__CURLOPT_TCP_KEEPINTVL, 2L);
    mc__curl.easy_setopt(h, MC__CURLOPT_HEADERFUNCTION, (mc__curl_data_fn)mc__tls_head);
    mc__curl.easy_setopt(h, MC__CURLOPT_HEADERDATA, &s);
    mc__curl.easy_setopt(h, MC__CURLOPT_WRITEFUNCTION, (mc__curl_data_fn)mc__tls_stream_body);
    mc__curl.easy_setopt(h, MC__CURLOPT_WRITEDATA, &s);
    /* the progress callback runs about once a second even when nothing arrives: idle() then
     * sees the stop flag and the creation deadline */
    mc__curl.easy_setopt(h, MC__CURLOPT_NOPROGRESS, 0L);
    mc__curl.easy_setopt(h, MC__CURLOPT_XFERINFOFUNCTION,
                         (mc__curl_xfer_fn)mc__tls_stream_progress);
    mc__curl.easy_setopt(h, MC__CURLOPT_XFERINFODATA, &s);
    rc = mc__curl.easy_perform(h);
    if (rc != MC__CURLE_OK && !s.result)
        MC_DEBUG("etcd %s %s over TLS: %s", ep->name, path, mc__curl.easy_strerror(rc));
    mc__curl.slist_free_all(headers);
    mc__curl.easy_cleanup(h);
    return s.result; /* feed's or idle's verdict, else 0: the stream ended or broke */
}
