/* A thread-per-connection TCP server: the accept loop, connection tracking and orderly stop that
 * the HTTP server, the master's RPC server and the engine's RPC/data server share. Each accepted
 * connection gets its own thread running serve(ctx, fd) until it returns; the server then closes
 * fd. stop() wakes the accept loop, shuts down every open socket so blocked serve() calls return,
 * and joins every thread: nothing runs on after it returns. */
#ifndef MC_COMMON_CONN_SERVER_H
#define MC_COMMON_CONN_SERVER_H
#include <stdint.h>

typedef struct mc_conn_server mc_conn_server_t;

typedef struct mc_conn_server_opts {
    const char *name; /* for log lines: "http", "rpc", ... */
    int listen_fd;    /* an already listening socket the server takes over, or -1 */
    const char *host; /* used when listen_fd < 0: NULL/"" = all addresses */
    uint16_t port;    /* used when listen_fd < 0: 0 = ephemeral */
    int backlog;      /* used when listen_fd < 0 (0: 128) */
    int max_conns;    /* the connection table's size (0: 256); see below */
    /* Connections from one peer address beyond this are refused (0: no limit below max_conns).
     * Peers are told apart by address only: processes of one host share the limit. */
    int max_per_peer;
    /* A connection that stays idle (see mc__conn_idle) this long is closed (0: never). */
    int idle_timeout_ms;
    size_t stack_size; /* per-connection thread stack (0: the system default) */
    /* Serves one connection; runs on its own thread. Must return once fd is shut down. */
    void (*serve)(void *ctx, int fd);
    /* Optional: called on a connection refused over max_conns, before it is closed. */
    void (*reject)(void *ctx, int fd);
    /* Optional: called on each accepted socket before its thread starts (socket options). */
    void (*tune)(void *ctx, int fd);
    void *ctx;
} mc_conn_server_opts_t;

/* Idle connections cannot lock others out: when the table is full, a new connection takes the
 * place of the connection that has been idle longest (it is shut down; a client reconnects),
 * and only with no idle one is it refused. */

/* Called by serve() on its own thread: idle (1) while it waits for the peer's next request,
 * busy (0) once one starts to arrive. Connections never marked are busy. */
void mc__conn_idle(int idle);

/* Listens (unless given listen_fd) and starts the accept thread. On failure a given listen_fd
 * is closed too. */
int mc__conn_server_start(const mc_conn_server_opts_t *opts, mc_conn_server_t **out);
uint16_t mc__conn_server_port(const mc_conn_server_t *s);
/* Connections being served right now. */
int mc__conn_server_active(mc_conn_server_t *s);
void mc__conn_server_stop(mc_conn_server_t *s);
/* In a fork() child, for a server its parent started: closes this process's copies of the
 * listening socket, the wake pipe and (when the table is consistent) the connections, and frees
 * nothing else. No byte to the pipe, no shutdown(), no join: those would stop the parent's server
 * (the pipe and the sockets are shared with it), and the threads are the parent's. */
void mc__conn_server_forget(mc_conn_server_t *s);
#endif
