/* In-memory key/value store behind the HTTP metadata protocol of the reference Mooncake
 * (`http://host:port/metadata?key=K`, GET/PUT/DELETE). It runs standalone in
 * mooncake_http_metadata_server, or embedded: mooncake_master creates one without a server and
 * hands its own server's /metadata requests to mc__http_kv_store_handle. */
#ifndef MC_TE_HTTP_KV_STORE_H
#define MC_TE_HTTP_KV_STORE_H
#include <stddef.h>
#include <stdint.h>

#include "mooncake/common/http.h"

#define MC_HTTP_KV_MAX_VALUE (16u << 20)
#define MC_HTTP_KV_MAX_KEY 4096u
/* Keys and values held in all: a put past it is refused (507) rather than grown into. Segment
 * descriptors are a few KiB each, so this holds tens of thousands of engines. */
#define MC_HTTP_KV_MAX_TOTAL (256ull << 20)
#define MC_HTTP_KV_PATH "/metadata"

typedef struct mc_http_kv_store mc_http_kv_store_t;

/* GET /health answers 200 "OK" (the reference's probe); a key is stripped of surrounding white
 * space, and a blank or missing one is refused with 400 in JSON. */
/* A store with no server (for embedding). Free with mc__http_kv_store_stop. */
int mc__http_kv_store_create(mc_http_kv_store_t **out);
/* A store served on host:port (port 0 = ephemeral). */
int mc__http_kv_store_start(const char *host, uint16_t port, mc_http_kv_store_t **out);
/* The same, answering only requests that prove the cluster secret when auth is enabled. */
struct mc_auth;
int mc__http_kv_store_start_auth(const char *host, uint16_t port, const struct mc_auth *auth,
                                 mc_http_kv_store_t **out);
/* The bound port, or 0 for a store without a server. */
uint16_t mc__http_kv_store_port(const mc_http_kv_store_t *s);
/* Stops the server if there is one and frees the store and everything in it. */
void mc__http_kv_store_stop(mc_http_kv_store_t *s);
/* Answers one request for MC_HTTP_KV_PATH; any other path gets 404. Thread-safe. */
void mc__http_kv_store_handle(mc_http_kv_store_t *s, const mc_http_request_t *req,
                              mc_http_response_t *resp);

/* Direct access for in-process users. get copies the value (mc__malloc'ed) into *val;
 * both get and del return MC_ERR_METADATA when the key is absent. put returns MC_ERR_MEMORY when
 * the store would hold more than MC_HTTP_KV_MAX_TOTAL bytes with it. */
int mc__http_kv_store_put(mc_http_kv_store_t *s, const char *key, const void *val, size_t len);
int mc__http_kv_store_get(mc_http_kv_store_t *s, const char *key, uint8_t **val, size_t *len);
int mc__http_kv_store_del(mc_http_kv_store_t *s, const char *key);
size_t mc__http_kv_store_count(mc_http_kv_store_t *s);
#endif
