/* Mooncake RPC channel: whole messages (raw bytes, or a tensor's bytes with its dtype and shape)
 * sent to a listening server, which hands each one to a handler. The C side of the reference's
 * RpcInterface (mooncake.engine.RpcInterface); it runs beside an engine and needs none.
 *
 * Wire: the common framing (mooncake/common/frame.h) on a TCP connection of its own. A request
 * is one frame of type DATA (body: the bytes) or TENSOR (body: u32 dtype length, dtype,
 * u32 ndim, ndim u64 dims, then the bytes); the server answers with an empty reply frame once
 * the handler returned, or an error frame. With a cluster secret (see the options) both ends run
 * the challenge-response handshake first, as the engine's own port does.
 *
 * send returns only after the server's handler has returned for that message. Clients keep up to
 * pool_size idle connections per target. All functions return 0 or a negative MC_ERR_* code
 * unless documented otherwise; a server or client object may be used from several threads.
 *
 * After fork(): a client belongs to the process that created it, a started server to the one
 * that started it. In a child, a client's sends fail with MC_ERR_CONTEXT (its pooled
 * connections are the parent's), start fails the same way, wait returns at once, stop does
 * nothing, and destroy closes the child's copies of the sockets only: nothing of the parent's
 * is stopped or shut down. */
#ifndef MOONCAKE_RPC_CHANNEL_H
#define MOONCAKE_RPC_CHANNEL_H

#include <stddef.h>
#include <stdint.h>

#include "mooncake/error.h"
#include "mooncake/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mc_rpc_server mc_rpc_server_t;
typedef struct mc_rpc_client mc_rpc_client_t;

enum mc_rpc_kind { MC_RPC_DATA = 1, MC_RPC_TENSOR = 2 };

#define MC_RPC_MAX_MESSAGE (1ull << 30) /* bytes of one message's payload */
#define MC_RPC_MAX_DIMS 16
#define MC_RPC_MAX_DTYPE 128

typedef struct mc_rpc_message {
    int kind;           /* enum mc_rpc_kind */
    const char *source; /* the sending connection's "ip:port" */
    const void *data;
    size_t len;
    /* MC_RPC_TENSOR only (else "" and 0) */
    const char *dtype; /* as the sender named it, e.g. "torch.float32" */
    size_t ndim;
    const uint64_t *shape;
} mc_rpc_message_t;

/* Runs on one of the server's connection threads, one message at a time per connection; msg and
 * everything it points to belong to the server and live only during the call. */
typedef void (*mc_rpc_handler_t)(void *ctx, const mc_rpc_message_t *msg);

typedef struct mc_rpc_server_options {
    /* "host:port" ("[v6]:port"); host "" or "0.0.0.0" listens on all addresses; port 0 picks
     * a free one (mc_rpc_server_port tells which). */
    const char *listen_address;
    int timeout_ms;           /* a started message must arrive completely within this (0: 30 s) */
    int max_conns;            /* connections served at once (0: 256) */
    mc_rpc_handler_t handler; /* NULL: messages are received and dropped */
    void *ctx;
    /* The opt-in cluster secret or a file holding it; NULL: MC_CLUSTER_SECRET(_FILE) from the
     * environment, else none. */
    const char *cluster_secret;
    const char *cluster_secret_file;
} mc_rpc_server_options_t;

/* Checks the options and makes a stopped server (nothing listens yet). */
MC_API int mc_rpc_server_create(const mc_rpc_server_options_t *o, mc_rpc_server_t **out);
/* Listens and starts serving. MC_ERR_SOCKET when the address cannot be bound,
 * MC_ERR_INVALID_ARGUMENT when already started. A stopped server may be started again. */
MC_API int mc_rpc_server_start(mc_rpc_server_t *s);
/* The port listened on, or MC_ERR_INVALID_ARGUMENT when not started. */
MC_API int mc_rpc_server_port(const mc_rpc_server_t *s);
/* Blocks until the server is stopped (returns at once when it is not started). */
MC_API void mc_rpc_server_wait(mc_rpc_server_t *s);
/* Stops listening, shuts down every connection and joins its thread: no handler runs after it
 * returns. Wakes mc_rpc_server_wait. Idempotent. Must not be called from a handler. */
MC_API void mc_rpc_server_stop(mc_rpc_server_t *s);
/* Stops and frees. No mc_rpc_server_wait may be running. NULL is accepted. */
MC_API void mc_rpc_server_destroy(mc_rpc_server_t *s);

typedef struct mc_rpc_client_options {
    size_t pool_size; /* idle connections kept per target (0: 100) */
    int timeout_ms;   /* connect + send + the server's answer (0: 30 s) */
    const char *cluster_secret;
    const char *cluster_secret_file;
} mc_rpc_client_options_t;

MC_API int mc_rpc_client_create(const mc_rpc_client_options_t *o, mc_rpc_client_t **out);
/* Sends len bytes (len <= MC_RPC_MAX_MESSAGE) to the server at target ("host:port") and waits
 * for its answer. MC_ERR_INVALID_ARGUMENT (bad address, too long), MC_ERR_DNS, MC_ERR_SOCKET
 * (nobody listening, connection lost, no answer in time), MC_ERR_REJECT_HANDSHAKE. */
MC_API int mc_rpc_client_send(mc_rpc_client_t *c, const char *target, const void *data, size_t len);
/* The same for a tensor: dtype is a non-empty name of at most MC_RPC_MAX_DTYPE bytes, ndim at
 * most MC_RPC_MAX_DIMS. */
MC_API int mc_rpc_client_send_tensor(mc_rpc_client_t *c, const char *target, const char *dtype,
                                     const uint64_t *shape, size_t ndim, const void *data,
                                     size_t len);
/* Closes the pooled connections and frees. No send may be running. NULL is accepted. */
MC_API void mc_rpc_client_destroy(mc_rpc_client_t *c);

#ifdef __cplusplus
}
#endif
#endif
