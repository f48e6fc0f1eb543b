/* Shared by etcd_client.c and etcd_watch.c: the client's endpoint list and the one call path
 * every unary request takes. */
#ifndef MC_COMMON_ETCD_INTERNAL_H
#define MC_COMMON_ETCD_INTERNAL_H
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "mooncake/common/etcd.h"
#include "mooncake/common/frame.h"

typedef struct mc__etcd_ep {
    char host[256];
    uint16_t port;
    char name[270]; /* "host:port", "[v6]:port" */
    int tls;        /* an https:// endpoint: its calls go through etcd_tls.c */
} mc__etcd_ep_t;

struct mc_etcd {
    mc__etcd_ep_t eps[MC_ETCD_MAX_ENDPOINTS];
    size_t n;
    int timeout_ms;
    _Atomic size_t current; /* the endpoint that answered last: tried first */
    /* https:// endpoints: the files named by MC_ETCD_CACERT, MC_ETCD_CERT, MC_ETCD_KEY ("" none) */
    char tls_cacert[512], tls_cert[512], tls_key[512];
    int tls_checked; /* the files were read (at the first https endpoint) */
};

/* POSTs body to path, failing over between endpoints, within timeout_ms (0: the client's). 200
 * answers give 0 and the body (mc__malloc'ed, NUL-terminated) in *resp. idempotent 0: a request
 * that was sent without an answer is not repeated (MC_ERR_ETCD_TRANSACTION_FAIL). */
int mc__etcd_call(mc_etcd_t *c, const char *path, const char *body, int idempotent, int timeout_ms,
                  char **resp, size_t *resp_len);
int mc__etcd_lease_keepalive_dl(mc_etcd_t *c, int64_t id, int timeout_ms, int64_t *ttl);
/* A lease time-to-live answer: TTL (-1: expired) and grantedTTL. */
int mc__etcd_parse_lease_ttl(const char *body, size_t len, int64_t *ttl, int64_t *granted);
void mc__etcd_sleep_ms(int ms);
/* Appends "name":"<base64 of p>" or "name":"<v>" to a JSON object being built in b, after a
 * comma unless b ends in '{' or ','. 0 or MC_ERR_MEMORY. */
int mc__etcd_field_b64(mc_buf_t *b, const char *name, const void *p, size_t n);
int mc__etcd_field_i64(mc_buf_t *b, const char *name, int64_t v);

/* --- https:// endpoints (etcd_tls.c: libcurl, loaded at run time) --- */
/* 1 once libcurl is loaded (the first call tries). */
int mc__etcd_tls_available(void);
/* Reads the certificate files' names from the environment into c; MC_ERR_INVALID_ARGUMENT for
 * an unreadable file, a certificate without its key, or no libcurl. */
int mc__etcd_tls_config(mc_etcd_t *c);
/* As mc__http_request_ex, for one POST to an https endpoint. */
int mc__etcd_tls_request(const mc_etcd_t *c, const mc__etcd_ep_t *ep, const char *path,
                         const char *body, size_t blen, int timeout_ms, size_t max_resp,
                         int *status, char **resp, size_t *resp_len, int *sent);
/* A streaming POST (the watch): the answer's status line ("HTTP/1.1 200 X\r\n\r\n") and then
 * its de-chunked body go to feed; idle is asked about once a second. Returns the first nonzero
 * that feed or idle returned, or 0 when the stream ended or broke. */
typedef int (*mc__etcd_tls_feed_fn)(void *ctx, const uint8_t *p, size_t n);
int mc__etcd_tls_stream(const mc_etcd_t *c, const mc__etcd_ep_t *ep, const char *path,
                        const char *body, size_t blen, int connect_ms, mc__etcd_tls_feed_fn feed,
                        int (*idle)(void *ctx), void *ctx);
#endif
