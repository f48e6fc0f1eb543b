/* The storage node's side of the control channel (node_proto.h): serves the dummy clients of this
 * host with the node's own store. One thread per dummy; a dummy's mappings belong to its
 * connection and go with it, whether the dummy closed, exited or was killed. */
#ifndef MC_STORE_NODE_NODE_SERVER_H
#define MC_STORE_NODE_NODE_SERVER_H
#include <stddef.h>
#include <stdint.h>

#include "mooncake/common/auth.h"
#include "mooncake/common/frame.h"
#include "mooncake/store.h"

typedef struct mc__node mc__node_t;

typedef struct mc__node_opts {
    const char *socket_path; /* "@mooncake_client_<port>.sock" */
    int max_dummies;         /* connections at once (0: 1024) */
    size_t max_regions;      /* mappings per dummy (0: 4096) */
    int request_timeout_ms;  /* a started request's body must arrive within (0: 10000) */
    /* The reference's real-client service port: the same channel over TCP on tcp_host:tcp_port
     * (0: none; tcp_host NULL or "0.0.0.0": all addresses), for tools and readiness probes. No
     * memory can be handed over TCP, so there the requests that move bytes through a dummy's
     * shared memory are refused and the rest (exist, size, remove, health...) served. With a
     * cluster secret (auth->enabled) a TCP peer must pass the handshake first. */
    const char *tcp_host;
    uint16_t tcp_port;
    const mc_auth_t *auth;
} mc__node_opts_t;

/* Listens and serves; the store must stay set up until mc__node_stop returned. */
int mc__node_start(mc_store_t *store, const mc__node_opts_t *opts, mc__node_t **out);
/* Disconnects every dummy (their mappings are dropped) and joins the threads. */
void mc__node_stop(mc__node_t *n);
/* Appends the node's Prometheus metrics (text format 0.0.4). 0 or MC_ERR_INTERNAL_ERROR. */
int mc__node_metrics(mc__node_t *n, mc_buf_t *out);
/* Dummies connected now. */
int mc__node_dummies(mc__node_t *n);
#endif
