/* Metadata back ends. P2PHANDSHAKE: the descriptor is asked from the peer itself over its RPC
 * port (the segment name is "host:port"). http://... and etcd://...: the descriptor is a value in
 * a key/value store, key "mooncake/ram/<segment name>" ("mooncake/<id>/ram/<segment name>" with
 * MC_METADATA_CLUSTER_ID set, as the reference lays it out). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "metadata/etcd_meta.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/http.h"
#include "mooncake/common/log.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "peer_conn.h"
#include "proto.h"
#include "te_internal.h"

#define MC__META_TIMEOUT_MS 5000

/* Our descriptor as JSON: what publishing stores and what GET_DESC answers. */
int mc__meta_desc_json(mc_engine_t *e, char **json) {
    mc__desc_t d;
    int rc = MC_ERR_MEMORY;
    memset(&d, 0, sizeof(d));
    snprintf(d.name, sizeof(d.name), "%s", e->name);
    d.instance_id = e->instance_id;
    snprintf(d.host_id, sizeof(d.host_id), "%s", e->host_id);
    snprintf(d.rpc_host, sizeof(d.rpc_host), "%s", e->host);
    d.rpc_port = e->port;
    pthread_rwlock_rdlock(&e->reg.lock);
    if (e->reg.n) {
        d.bufs = mc__calloc(e->reg.n, sizeof(*d.bufs));
        if (!d.bufs)
            goto out;
    }
    for (size_t i = 0; i < e->reg.n; i++) {
        d.bufs[i].addr = e->reg.regions[i].addr;
        d.bufs[i].len = e->reg.regions[i].len;
        d.bufs[i].shm_id = e->reg.regions[i].shm_id;
        d.bufs[i].epoch = e->reg.regions[i].epoch;
        snprintf(d.bufs[i].location, sizeof(d.bufs[i].location), "%s", e->reg.regions[i].location);
    }
    d.nbufs = e->reg.n;
    rc = 0;
out:
    pthread_rwlock_unlock(&e->reg.lock);
    if (!rc) {
        mc__transports_describe(e, &d); /* after the buffers: a transport may tag them */
        rc = mc__desc_encode(&d, json);
    }
    mc__desc_free_parts(&d);
    mc__free(d.bufs);
    return rc;
}

/* A descriptor fetch on a request's path waits no longer than a request may take. */
static int mc__meta_timeout_ms(const mc_engine_t *e) {
    return e->timeout_ms > 0 && e->timeout_ms < MC__META_TIMEOUT_MS ? e->timeout_ms
                                                                    : MC__META_TIMEOUT_MS;
}
#define MC__META_KEY_MAX (MC__TE_NAME_MAX + 160)

/* The segment's key: "mooncake/" [cluster id "/"] "ram/" name. */
static int mc__meta_key(const char *name, char *key, size_t cap) {
    const char *id = getenv("MC_METADATA_CLUSTER_ID");
    size_t il = id ? strlen(id) : 0;
    int n;
    if (il > 128)
        return MC_ERR_INVALID_ARGUMENT;
    n = snprintf(key, cap, "mooncake/%s%sram/%s", il ? id : "", il && id[il - 1] != '/' ? "/" : "",
                 name);
    return n < 0 || (size_t)n >= cap ? MC_ERR_INVALID_ARGUMENT : 0;
}

static int mc__meta_url(const mc_engine_t *e, const char *name, char **out) {
    char key[MC__META_KEY_MAX];
    char enc[3 * sizeof(key)];
    size_t n;
    *out = NULL;
    if (mc__meta_key(name, key, sizeof(key)) || mc__http_url_encode(key, enc, sizeof(enc)))
        return MC_ERR_INVALID_ARGUMENT;
    n = strlen(e->metadata_url) + strlen(enc) + 8;
    *out = mc__malloc(n);
    if (!*out)
        return MC_ERR_MEMORY;
    snprintf(*out, n, "%s%ckey=%s", e->metadata_url, strchr(e->metadata_url, '?') ? '&' : '?', enc);
    return 0;
}

int mc__meta_publish(mc_engine_t *e) {
    char *url = NULL, *json = NULL;
    char key[MC__META_KEY_MAX];
    int status = 0;
    int rc = 0;
    if (!e->metadata_url)
        goto out;
    if (e->etcd) {
        rc = mc__meta_key(e->name, key, sizeof(key));
        if (!rc)
            rc = mc__meta_desc_json(e, &json);
        if (!rc)
            rc = mc__meta_etcd_publish(e->etcd, key, json);
        goto out;
    }
    rc = mc__meta_url(e, e->name, &url);
    if (!rc)
        rc = mc__meta_desc_json(e, &json);
    if (!rc)
        rc = mc__http_request_auth(&e->auth, "PUT", url, json, strlen(json), MC__META_TIMEOUT_MS,
                                   &status, NULL, NULL);
    if (!rc && (status < 200 || status > 299))
        rc = MC_ERR_METADATA;
    else if (rc && rc != MC_ERR_MEMORY)
        rc = MC_ERR_METADATA;
out:
    mc__free(url);
    mc__free(json);
    return rc;
}

/* Sends an engine at host:port a request of type with an empty body (PING, GET_DESC) and reads
 * the reply's header: 0 with *fd open at the reply body (the caller closes it) and *remote_err
 * the peer's verdict, or a negative code (DNS, REJECT_HANDSHAKE, SOCKET) with *fd -1. */
static int mc__meta_ask(mc_engine_t *e, const char *host, uint16_t port, uint8_t type,
                        uint64_t max_body, uint64_t dl, int *fd, mc_frame_header_t *h,
                        int *remote_err) {
    uint8_t req[MC_FRAME_HEADER_SIZE];
    mc_frame_header_t q = {
        .magic = MC_FRAME_MAGIC, .version = MC_FRAME_VERSION, .type = type, .request_id = 1};
    *fd = mc__peer_connect(e, host, port, dl);
    if (*fd < 0) {
        int rc = *fd == MC_ERR_DNS || *fd == MC_ERR_REJECT_HANDSHAKE ? *fd : MC_ERR_SOCKET;
        *fd = -1;
        return rc;
    }
    mc__frame_header_encode(&q, req);
    if (mc__send_all(*fd, req, sizeof(req), dl) ||
        mc__peer_read_reply(*fd, type, 1, max_body, dl, h, remote_err)) {
        close(*fd);
        *fd = -1;
        return MC_ERR_SOCKET;
    }
    return 0;
}

/* 1 when an engine answers a PING at host:port within the metadata timeout. */
static int mc__meta_peer_alive(mc_engine_t *e, const char *host, uint16_t port) {
    mc_frame_header_t h;
    int remote_err = 0, fd = -1;
    int rc = mc__meta_ask(e, host, port, MC__TE_PING, 0,
                          mc__now_ms() + (uint64_t)mc__meta_timeout_ms(e), &fd, &h, &remote_err);
    if (fd >= 0)
        close(fd);
    return rc == 0 || rc == MC_ERR_REJECT_HANDSHAKE; /* refusing us is an answer too */
}

/* The reference's sendProbe: where the peer's RPC port is comes from its name (P2PHANDSHAKE)
 * or from the metadata service (its published descriptor), then one PING must be answered. */
static int mc__probe(mc_engine_t *e, const char *peer_segment) {
    char host[MC__TE_NAME_MAX];
    uint16_t port = 0;
    mc__desc_t *d = NULL;
    mc_frame_header_t h;
    int remote_err = 0, fd = -1;
    int rc = MC_ERR_INVALID_ARGUMENT;
    if (!e || !peer_segment || !*peer_segment || strlen(peer_segment) >= MC__TE_NAME_MAX)
        goto out;
    if (e->metadata_url) {
        /* not published (or the service is unreachable): the reference's ERR_METADATA */
        if (mc__meta_fetch(e, peer_segment, &d) != 0) {
            rc = MC_ERR_METADATA;
            goto out;
        }
        snprintf(host, sizeof(host), "%s", d->rpc_host);
        port = d->rpc_port;
    } else if (mc__split_host_port(peer_segment, host, sizeof(host), &port) || port == 0) {
        goto out;
    }
    rc = mc__meta_ask(e, host, port, MC__TE_PING, 0,
                      mc__now_ms() + (uint64_t)mc__meta_timeout_ms(e), &fd, &h, &remote_err);
    if (rc == 0 && remote_err)
        rc = remote_err;
out:
    if (fd >= 0)
        close(fd);
    mc__desc_free(d);
    return rc;
}

int mc__meta_claim(mc_engine_t *e) {
    mc__desc_t *d = NULL;
    int rc = 0;
    if (!e->metadata_url || mc__meta_fetch(e, e->name, &d) != 0)
        return 0; /* nothing published under our name (or not readable: publish will say) */
    if (d->instance_id != e->instance_id && mc__meta_peer_alive(e, d->rpc_host, d->rpc_port)) {
        MC_ERROR("segment name \"%s\" is already served by another engine (at %s:%u); give "
                 "each engine its own local server name",
                 e->name, d->rpc_host, (unsigned)d->rpc_port);
        rc = MC_ERR_METADATA;
    }
    mc__desc_free(d);
    return rc;
}

void mc__meta_unpublish(mc_engine_t *e) {
    char *url = NULL;
    char key[MC__META_KEY_MAX];
    int status = 0;
    if (e->etcd) {
        if (!mc__meta_key(e->name, key, sizeof(key)))
            mc__meta_etcd_unpublish(e->etcd, key);
        return;
    }
    if (!e->metadata_url || mc__meta_url(e, e->name, &url))
        return;
    if (mc__http_request_auth(&e->auth, "DELETE", url, NULL, 0, MC__META_TIMEOUT_MS, &status, NULL,
                              NULL) ||
        (status != 200 && status != 204 && status != 404))
        MC_WARN("could not remove segment %s from the metadata server", e->name);
    mc__free(url);
}

static int mc__meta_fetch_etcd(mc_engine_t *e, const char *name, mc__desc_t **out) {
    char key[MC__META_KEY_MAX];
    char *json = NULL;
    size_t len = 0;
    int rc = mc__meta_key(name, key, sizeof(key));
    if (!rc)
        rc = mc__meta_etcd_fetch(e->etcd, key, &json, &len);
    if (!rc)
        rc = mc__desc_decode(json, len, out);
    mc__free(json);
    return rc;
}

static int mc__meta_fetch_http(mc_engine_t *e, const char *name, mc__desc_t **out, int *absent) {
    char *url = NULL, *body = NULL;
    size_t len = 0;
    int status = 0;
    int rc;
    if (e->etcd)
        return mc__meta_fetch_etcd(e, name, out);
    rc = mc__meta_url(e, name, &url);
    if (rc)
        goto out;
    rc = mc__http_request_auth(&e->auth, "GET", url, NULL, 0, mc__meta_timeout_ms(e), &status,
                               &body, &len);
    if (rc) {
        rc = MC_ERR_METADATA;
        goto out;
    }
    if (status != 200) {
        MC_DEBUG("segment %s: metadata server answered %d", name, status);
        *absent = status == 404;
        rc = MC_ERR_METADATA;
        goto out;
    }
    rc = mc__desc_decode(body, len, out);
out:
    mc__free(url);
    mc__free(body);
    return rc;
}

static int mc__meta_fetch_p2p(mc_engine_t *e, const char *name, mc__desc_t **out) {
    char host[MC__TE_NAME_MAX];
    uint16_t port = 0;
    mc_frame_header_t h;
    uint64_t dl = mc__now_ms() + (uint64_t)mc__meta_timeout_ms(e);
    char *json = NULL;
    int remote_err = 0;
    int fd = -1;
    int rc = mc__split_host_port(name, host, sizeof(host), &port);
    if (rc || port == 0) {
        rc = MC_ERR_INVALID_ARGUMENT;
        goto out;
    }
    rc = mc__meta_ask(e, host, port, MC__TE_GET_DESC, MC__DESC_MAX_JSON, dl, &fd, &h, &remote_err);
    if (rc)
        goto out;
    rc = MC_ERR_SOCKET;
    if (remote_err) {
        rc = remote_err;
        goto out;
    }
    json = mc__malloc(h.body_len + 1);
    if (!json) {
        rc = MC_ERR_MEMORY;
        goto out;
    }
    if (mc__recv_all(fd, json, h.body_len, dl))
        goto out;
    json[h.body_len] = '\0';
    rc = mc__desc_decode(json, h.body_len, out);
out:
    if (fd >= 0)
        close(fd);
    mc__free(json);
    return rc;
}

int mc__meta_fetch_absent(mc_engine_t *e, const char *name, mc__desc_t **out, int *absent) {
    int rc;
    *out = NULL;
    *absent = 0;
    rc = e->metadata_url ? mc__meta_fetch_http(e, name, out, absent)
                         : mc__meta_fetch_p2p(e, name, out);
    if (!rc)
        mc__transports_desc_parsed(e, *out); /* each transport reads its own part */
    return rc;
}

int mc__meta_fetch(mc_engine_t *e, const char *name, mc__desc_t **out) {
    int absent;
    return mc__meta_fetch_absent(e, name, out, &absent);
}

int mc_engine_probe(mc_engine_t *e, const char *peer_segment) {
    int rc;
    MC__GATED(e, rc, mc__probe(e, peer_segment));
    return rc;
}
