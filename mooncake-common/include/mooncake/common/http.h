/* Small HTTP/1.1 pieces: a request parser with no I/O (fuzzed), a thread-per-connection server
 * for admin and metadata endpoints, and a blocking client for GET/PUT/DELETE. Limits are enforced
 * while parsing: request line + headers at most MC_HTTP_MAX_HEAD bytes, bodies at most the
 * server's max_body; anything else is answered 400/413/431 and the connection closed. */
#ifndef MC_COMMON_HTTP_H
#define MC_COMMON_HTTP_H
#include <stddef.h>
#include <stdint.h>

/* Room for the longest key (4 KiB, up to 12 KiB URL-encoded) and for batch queries naming
 * hundreds of keys; the server keeps this much per connection while it reads a request. */
#define MC_HTTP_MAX_HEAD (64u << 10)
#define MC_HTTP_MAX_QUERY (60u << 10)

typedef struct mc_http_request {
    char method[8];                /* GET, PUT, POST, DELETE, HEAD */
    char path[1024];               /* decoded path without query, e.g. "/metadata" */
    char query[MC_HTTP_MAX_QUERY]; /* raw query string without '?', may be empty */
    size_t content_length;
    int keep_alive;
    size_t head_len; /* bytes of request line + headers incl. the blank line */
    /* the raw request target ("/path?query", as sent) inside the parsed buffer */
    size_t target_off, target_len;
    char authorization[192]; /* the Authorization header, "" when absent or too long */
    const uint8_t *body;     /* set by the server once the body is read */
    size_t body_len;
} mc_http_request_t;

/* Parses the head of a request in buf[0..len). Returns 1 when complete (req filled, head_len set),
 * 0 when more bytes are needed, or a negative HTTP status (-400, -413, -431, -501) when invalid.
 * max_body bounds Content-Length. */
int mc__http_parse_request(const uint8_t *buf, size_t len, size_t max_body, mc_http_request_t *req);
/* Looks up key in a query string and URL-decodes its value into out. Returns 0, or -1 if absent
 * or too long. */
int mc__http_query_get(const char *query, const char *key, char *out, size_t cap);
/* Percent-encodes s for use in a query value. */
int mc__http_url_encode(const char *s, char *out, size_t cap);

typedef struct mc_http_response {
    int status;               /* 200, 404, ... */
    const char *content_type; /* default "text/plain" */
    uint8_t *body;            /* malloc'ed by the handler with mc__malloc, freed by the server */
    size_t body_len;
    const char *www_authenticate; /* a WWW-Authenticate header value, or NULL */
} mc_http_response_t;

typedef void (*mc_http_handler_fn)(void *ctx, const mc_http_request_t *req,
                                   mc_http_response_t *resp);

typedef struct mc_http_server mc_http_server_t;
/* Starts serving on host:port (port 0 = ephemeral) in background threads. */
int mc__http_server_start(const char *host, uint16_t port, size_t max_body, mc_http_handler_fn fn,
                          void *ctx, mc_http_server_t **out);
uint16_t mc__http_server_port(const mc_http_server_t *s);
/* The same, where every request must prove the cluster secret when a is enabled (see
 * mooncake/common/auth.h): one without a valid Authorization gets 401 and a fresh single-use
 * challenge nonce in WWW-Authenticate ("MC-HMAC nonce=<32 hex>"); the retry carries
 * "MC-HMAC nonce=<hex>, mac=<64 hex>", the MAC covering the nonce, the method, the raw request
 * target and the body. */
struct mc_auth;
int mc__http_server_start_auth(const char *host, uint16_t port, size_t max_body,
                               mc_http_handler_fn fn, void *ctx, const struct mc_auth *a,
                               mc_http_server_t **out);
/* Stops accepting, closes connections, joins threads. */
void mc__http_server_stop(mc_http_server_t *s);

/* Blocking client. url like "http://host:port/path?query". On success returns 0 and sets *status;
 * a response body over 1 GiB is MC_ERR_BUFFER_OVERFLOW, other failures MC_ERR_SOCKET;
 * *body (NUL-terminated, mc__malloc'ed, may be NULL when body_len is NULL) receives the body. */
int mc__http_request(const char *method, const char *url, const void *body, size_t body_len,
                     int timeout_ms, int *status, char **resp_body, size_t *resp_len);
/* The same, with a body bound (0: the default, 1 GiB; a larger body fails with
 * MC_ERR_BUFFER_OVERFLOW, and is never buffered whole) and *sent (may be NULL) set to 1 once the
 * connection is up, so a failure with *sent 0 certainly did nothing on the server (the etcd client
 * retries those). */
int mc__http_request_ex(const char *method, const char *url, const void *body, size_t body_len,
                        int timeout_ms, size_t max_body, int *status, char **resp_body,
                        size_t *resp_len, int *sent);
/* The same, answering a server's cluster-secret challenge (a 401 with an MC-HMAC nonce) with one
 * retry when a is enabled; a NULL or disabled a is mc__http_request. */
int mc__http_request_auth(const struct mc_auth *a, const char *method, const char *url,
                          const void *body, size_t body_len, int timeout_ms, int *status,
                          char **resp_body, size_t *resp_len);

/* Helper for handlers: sets a copied body. */
int mc__http_respond(mc_http_response_t *r, int status, const char *content_type, const void *body,
                     size_t len);
#endif
