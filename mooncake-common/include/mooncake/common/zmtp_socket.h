/* ZeroMQ-compatible sockets over our ZMTP codec (zmtp.h): a bound server (PUB or ROUTER) driven by
 * one poll thread, and a blocking connected client (SUB, DEALER, REQ) with deadlines. libzmq
 * peers (pyzmq, vLLM, Dynamo) talk to both; nothing here links libzmq. Endpoints are
 * "tcp://host:port" ("*" for every address, port 0 for an ephemeral one). */
#ifndef MC_COMMON_ZMTP_SOCKET_H
#define MC_COMMON_ZMTP_SOCKET_H
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "mooncake/common/zmtp.h"

/* A received message's parts (mc_zmtp_msg_t) point into the receiver's buffer, valid until its
 * next receive (client) or until the callback returns (server). */

/* Splits "tcp://host:port" into host ("" for "*") and port. 0 or MC_ERR_INVALID_ARGUMENT. */
int mc__zmtp_endpoint_parse(const char *endpoint, char *host, size_t cap, uint16_t *port);

/* --- server */
typedef struct mc_zmtp_server mc_zmtp_server_t;
/* ROUTER: a whole message from connection conn, called on the server's thread. */
typedef void (*mc_zmtp_msg_cb)(mc_zmtp_server_t *s, uint64_t conn, const mc_zmtp_msg_t *m,
                               void *arg);

typedef struct mc_zmtp_server_stats {
    uint64_t peers;     /* connections past the handshake */
    uint64_t dropped;   /* messages a slow subscriber missed (its queue over hwm_bytes) */
    uint64_t bad_peers; /* connections closed for a protocol error */
} mc_zmtp_server_stats_t;

/* socket_type "PUB" or "ROUTER". hwm_bytes bounds each connection's unsent bytes; max_msg bounds a
 * message a peer may send us. */
int mc__zmtp_server_start(const char *endpoint, const char *socket_type, size_t hwm_bytes,
                          size_t max_msg, mc_zmtp_msg_cb cb, void *arg, mc_zmtp_server_t **out);
uint16_t mc__zmtp_server_port(const mc_zmtp_server_t *s);
/* PUB: queues a message for every subscriber whose subscription prefixes part 0. Never blocks. */
int mc__zmtp_server_publish(mc_zmtp_server_t *s, const struct iovec *parts, int n);
/* ROUTER: queues a message for one connection (MC_ERR_SOCKET when it is gone). Never blocks. */
int mc__zmtp_server_send_to(mc_zmtp_server_t *s, uint64_t conn, const struct iovec *parts, int n);
void mc__zmtp_server_stats(mc_zmtp_server_t *s, mc_zmtp_server_stats_t *out);
void mc__zmtp_server_stop(mc_zmtp_server_t *s);

/* --- client */
typedef struct mc_zmtp_client mc_zmtp_client_t;
/* Connects and completes the handshake by deadline_ms (absolute mc__now_ms()). */
int mc__zmtp_connect(const char *endpoint, const char *socket_type, size_t max_msg,
                     uint64_t deadline_ms, mc_zmtp_client_t **out);
/* SUB: subscribes to messages whose part 0 starts with topic (n = 0: all). */
int mc__zmtp_subscribe(mc_zmtp_client_t *c, const void *topic, size_t n, uint64_t deadline_ms);
/* Sends a message (REQ puts the empty delimiter first, as libzmq's REQ does). */
int mc__zmtp_send(mc_zmtp_client_t *c, const struct iovec *parts, int n, uint64_t deadline_ms);
/* Receives the next message (REQ drops the delimiter). MC_ERR_SOCKET with errno ETIMEDOUT at the
 * deadline, MC_ERR_SOCKET on a closed peer, MC_ERR_INVALID_ARGUMENT on a protocol error. */
int mc__zmtp_recv(mc_zmtp_client_t *c, mc_zmtp_msg_t *m, uint64_t deadline_ms);
void mc__zmtp_close(mc_zmtp_client_t *c);

#endif
