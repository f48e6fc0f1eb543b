/* Socket helpers. Blocking sockets with deadlines: every wait is bounded (deadline_ms is an
 * absolute mc__now_ms() value; 0 means no deadline). Functions return 0 / fd, or a negative
 * MC_ERR_* code (MC_ERR_SOCKET, MC_ERR_DNS); errno is left as the failing call set it. */
#ifndef MC_COMMON_SOCK_H
#define MC_COMMON_SOCK_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

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

/* Waits until fd is ready for events (poll's POLLIN, POLLOUT, ...; an error or hang-up counts as
 * ready) or the deadline passes (MC_ERR_SOCKET with errno ETIMEDOUT). EINTR waits on. */
int mc__wait_fd(int fd, short events, uint64_t deadline_ms);
int mc__send_all(int fd, const void *p, size_t n, uint64_t deadline_ms);
int mc__recv_all(int fd, void *p, size_t n, uint64_t deadline_ms); /* MC_ERR_SOCKET on EOF */
/* How long the receive that follows a send may spin before it sleeps, when `bytes` of payload
 * must still cross before the answer can come (the request's own payload, the reads it asks
 * for, a transfer the peer makes first): MC_TCP_REPLY_SPIN_US plus their time at 2 GB/s, and 0
 * (sleep at once) past MC__SPIN_BYTES_MAX, whose wait outlasts any spin (sock.c). */
#define MC__SPIN_BYTES_MAX (128u << 10)
uint64_t mc__reply_spin_for(uint64_t bytes);
/* The same spin for a wait that is not a receive but also ends within one round trip (a thread
 * waiting for another's request to answer for it): mc__reply_spin_for(bytes) while this thread's
 * spins keep ending with the answer, as a reply wait's do, or always when MC_TCP_REPLY_SPIN_US
 * is set; 0 when the caller should sleep at once. A caller that spun tells how the spin ended
 * with mc__wait_spin_ended (answered: it ended with what it waited for). */
uint64_t mc__wait_spin_for(uint64_t bytes);
void mc__wait_spin_ended(int answered);
/* mc__recv_all for the reply to a request just sent on fd: the first receive waits first and
 * spins up to spin_ns (mc__reply_spin_for) before it sleeps, as the reply waits of the buffered
 * readers do (mc__rbuf_t's wait_first). For a caller that reads straight from the socket. */
int mc__recv_reply(int fd, void *p, size_t n, uint64_t deadline_ms, uint64_t spin_ns);
/* Scatter send of two pieces (header + payload) without copying them together. */
int mc__send2(int fd, const void *a, size_t an, const void *b, size_t bn, uint64_t deadline_ms);
/* Scatter send of cnt pieces in as few sendmsg calls as the socket allows (several small
 * requests coalesced into one call). iov is consumed (its entries are modified). */
int mc__sendv(int fd, struct iovec *iov, int cnt, uint64_t deadline_ms);
/* One non-blocking sendmsg of up to cnt pieces: the bytes taken, or -1 with errno (EAGAIN when
 * the socket buffer is full). The caller advances with mc__iov_advance. */
ssize_t mc__sendv_some(int fd, struct iovec *iov, int cnt);
/* Moves (*v, *cnt) past w bytes that were sent. */
void mc__iov_advance(struct iovec **v, int *cnt, size_t w);

/* A receive buffer over a socket, so that a header, its body and a small payload (or several
 * replies) come in with one recv instead of one each. Large reads go straight to their
 * destination. Bytes still buffered belong to the stream: a caller handing the socket on must
 * have consumed them (mc__rbuf_pending() == 0). */
typedef struct mc__rbuf {
    int fd;
    uint8_t *data;
    size_t cap;
    size_t off;
    size_t len;
    int wait_first;   /* set by the caller after sending: wait before the next receive */
    uint64_t spin_ns; /* ... spinning this long first (mc__reply_spin_for; init: for 0 bytes) */
    /* set by the caller when fd has SO_RCVTIMEO (mc__set_recv_timeout): that wait is then a
     * blocking receive, looked at every SO_RCVTIMEO against the deadline, instead of poll */
    int timed_wait;
    /* the last receive took all it asked for: the socket may hold more (mc__rbuf_top_up) */
    int filled;
} mc__rbuf_t;
void mc__rbuf_init(mc__rbuf_t *b, int fd, void *mem, size_t cap);
/* Reads exactly n bytes (mc__recv_all's deadline and EOF rules). */
int mc__rbuf_read(mc__rbuf_t *b, void *dst, size_t n, uint64_t deadline_ms);
/* The same, with a receive into the buffer taking at most max(fill, n) bytes: a caller that
 * knows a large payload follows reads the header alone, so the payload is received in place
 * instead of being copied out of the buffer. */
int mc__rbuf_read_max(mc__rbuf_t *b, void *dst, size_t n, uint64_t deadline_ms, size_t fill);
static inline size_t mc__rbuf_pending(const mc__rbuf_t *b) {
    return b->len - b->off;
}
/* Takes what the socket already holds into the buffer's free room (the pending bytes moved to
 * its front first), without waiting: the bytes now pending. Asks the socket only when the last
 * receive filled what it asked for (b->filled): otherwise the socket held no more then, and
 * a lone request's server would pay a failed receive per reply. A server answering pipelined
 * requests asks this before it sends the replies it holds, so that requests already sent to it
 * are answered together (one send, one wake-up of the peer) instead of a buffer's worth at a
 * time. A closed or failed socket is left to the next read to report. */
size_t mc__rbuf_top_up(mc__rbuf_t *b);
int mc__set_buffers(int fd, int sndbuf, int rcvbuf);
/* SO_RCVTIMEO: a blocking receive on fd returns EAGAIN after ms (see mc__rbuf_t.timed_wait). */
int mc__set_recv_timeout(int fd, int ms);
/* Dead-peer detection on a long-lived TCP connection (data and master links): a peer that
 * stops answering without a network error (a host gone, a black-holed link) ends the connection
 * with ETIMEDOUT within seconds instead of the kernel's ~15 minutes. TCP_USER_TIMEOUT of
 * MC_TCP_USER_TIMEOUT_MS (default 5000, 0..600000; 0: the kernel's) bounds how long sent data may
 * stay unacknowledged; keep-alive probes after MC_TCP_KEEPALIVE_S idle seconds (default 2,
 * 0..3600; 0: none), one a second, three unanswered, find a peer that vanished while we waited
 * for its answer. A live peer's kernel answers both, however busy or stopped its process is.
 * The settings are read once per process. Returns 0 or MC_ERR_SOCKET (the fd is still usable). */
int mc__set_dead_peer_timeouts(int fd);
/* The two settings in force (ms; 0: off), for logs and tests. */
int64_t mc__tcp_user_timeout_ms(void);
int64_t mc__tcp_keepalive_s(void);

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
