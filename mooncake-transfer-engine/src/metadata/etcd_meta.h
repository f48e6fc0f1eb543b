/* The Transfer Engine's etcd metadata back end (etcd_meta.c): one segment key on a lease that a
 * thread keeps alive. Codes returned are the engine's (MC_ERR_METADATA for any etcd failure). */
#ifndef MC_TE_ETCD_META_H
#define MC_TE_ETCD_META_H
#include <stddef.h>

typedef struct mc__meta_etcd mc__meta_etcd_t;

/* 1 with *endpoints set when conn names etcd: "etcd://h1:2379,h2:2379" (',' or ';' between
 * endpoints) or, as the reference reads it, a list without a scheme ("h1:2379"). */
int mc__meta_etcd_parse(const char *conn, const char **endpoints);
/* A client for the endpoints (MC_ERR_INVALID_ARGUMENT for a malformed list); no I/O yet. The
 * lease TTL is MC_METADATA_LEASE_TTL seconds (default 10). */
int mc__meta_etcd_open(const char *endpoints, int timeout_ms, mc__meta_etcd_t **out);
/* Puts key = json on this engine's lease (taken on first use) and keeps the lease alive. */
int mc__meta_etcd_publish(mc__meta_etcd_t *m, const char *key, const char *json);
/* The value under key (mc__malloc'ed, NUL-terminated); MC_ERR_METADATA when absent. */
int mc__meta_etcd_fetch(mc__meta_etcd_t *m, const char *key, char **json, size_t *len);
/* Stops the keep-alive, deletes key, revokes the lease. */
void mc__meta_etcd_unpublish(mc__meta_etcd_t *m, const char *key);
void mc__meta_etcd_close(mc__meta_etcd_t *m);
#endif
