/* Socket helpers. Blocking sockets with deadlines: every wait is bounded (deadline_ms is an
 * absolute mc__now_ms() value; 0 means no deadline). Functions return 0 / fd, or a negative
 * MC_ERR_* code (MC_ERR_SOCKET, MC_ERR_DNS); errno is left as the failing call set it. */
#ifndef MC_COMMON_SOCK_H
#define MC_COMMON_SOCK_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Listening TCP socket on host:port (host NULL or "" = all addresses; port 0 = ephemeral).
 * *bound_port receives the port actually bound. */
int mc__tcp_listen(const char *host, uint16_t port, int backlog, uint16_t *bound_port);
/* Like mc__tcp_listen but tries ports in [lo, hi] starting at a random one. */
int mc__tcp_listen_range(const char *host, uint16_t lo, uint16_t hi, int backlog,
                         uint16_t *bound_port);
/* Connects with a deadline; sets TCP_NODELAY. */
int mc__tcp_connect(const char *host, uint16_t port, uint64_t deadline_ms);
/* Splits "host:port" (also "[v6]:port"); host buffer gets the host part. */
int mc__split_host_port(const char *s, char *host, size_t host_cap, uint16_t *port);
int mc__accept(int lfd); /* accept4(CLOEXEC), TCP_NODELAY when TCP; negative on error */

int mc__send_all(int fd, const void *p, size_t n, uint64_t deadline_ms);
int mc__recv_all(int fd, void *p, size_t n, uint64_t deadline_ms); /* MC_ERR_SOCKET on EOF */
/* Scatter send of two pieces (header + payload) without copying them together. */
int mc__send2(int fd, const void *a, size_t an, const void *b, size_t bn, uint64_t deadline_ms);
int mc__set_buffers(int fd, int sndbuf, int rcvbuf);

/* Unix-domain stream sockets (abstract namespace when path starts with '@'). */
int mc__unix_listen(const char *path);
int mc__unix_connect(const char *path, uint64_t deadline_ms);
/* Passes file descriptors with SCM_RIGHTS alongside a small payload. */
int mc__send_fds(int sock, const void *p, size_t n, const int *fds, int nfds);
/* Receives up to max_fds descriptors; *nfds gets the count. */
int mc__recv_fds(int sock, void *p, size_t n, int *fds, int max_fds, int *nfds,
                 uint64_t deadline_ms);

/* A stable identity of this host for same-host detection (boot id + hostname). */
const char *mc__host_id(void);
/* The first non-loopback IPv4 of this host, or "127.0.0.1". */
int mc__local_ip(char *out, size_t cap);
#endif
