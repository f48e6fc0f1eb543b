/* Blocking sockets with deadlines. Waits go through poll() with the time left to the caller's
 * absolute deadline, so no call can block past it; EINTR restarts the wait with the time left. */
#include "mooncake/common/sock.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "mooncake/common/config.h"
#include "mooncake/common/sock_spin.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"

/* Polls in slices of at most 1000 s, so that a far deadline fits poll's int. */
int mc__wait_fd(int fd, short events, uint64_t deadline_ms) {
    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = events};
        int timeout = -1;
        int rc;
        if (deadline_ms) {
            uint64_t now = mc__now_ms();
            if (now >= deadline_ms) {
                errno = ETIMEDOUT;
                return MC_ERR_SOCKET;
            }
            timeout = deadline_ms - now > 1000000 ? 1000000 : (int)(deadline_ms - now);
        }
        rc = poll(&pfd, 1, timeout);
        if (rc > 0)
            return 0;
        if (rc < 0 && errno != EINTR)
            return MC_ERR_SOCKET;
    }
}

static void mc__set_nodelay(int fd) {
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* Binds a listening TCP socket; returns the fd, or a negative code with errno kept. */
static int mc__tcp_listen_once(const char *host, uint16_t port, int backlog, uint16_t *bound_port) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    char service[8];
    int fd = -1;
    int rc = MC_ERR_SOCKET;
    int saved = 0;
    snprintf(service, sizeof(service), "%u", (unsigned)port);
    if (getaddrinfo(host && *host ? host : NULL, service, &hints, &res) != 0) {
        rc = MC_ERR_DNS;
        goto out;
    }
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        int one = 1;
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            saved = errno;
            continue;
        }
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, backlog) == 0)
            break;
        saved = errno;
        close(fd);
        fd = -1;
    }
    if (fd < 0) {
        errno = saved;
        goto out;
    }
    if (bound_port) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) {
            saved = errno;
            close(fd);
            fd = -1;
            errno = saved;
            goto out;
        }
        *bound_port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                     : ((struct sockaddr_in *)&ss)->sin_port);
    }
    rc = fd;
out:
    if (res)
        freeaddrinfo(res);
    return rc;
}

int mc__tcp_listen(const char *host, uint16_t port, int backlog, uint16_t *bound_port) {
    return mc__tcp_listen_once(host, port, backlog > 0 ? backlog : 128, bound_port);
}

int mc__tcp_listen_range(const char *host, uint16_t lo, uint16_t hi, int backlog,
                         uint16_t *bound_port) {
    uint32_t span = 0;
    uint32_t start = 0;
    int rc = MC_ERR_INVALID_ARGUMENT;
    if (lo == 0 || hi < lo)
        return MC_ERR_INVALID_ARGUMENT;
    span = (uint32_t)hi - lo + 1;
    /* A random start spreads concurrent processes over the range instead of all racing for lo. */
    start = (uint32_t)((mc__now_ns() ^ ((uint64_t)getpid() * 2654435761u)) % span);
    for (uint32_t i = 0; i < span; i++) {
        uint16_t port = (uint16_t)(lo + (start + i) % span);
        rc = mc__tcp_listen(host, port, backlog, bound_port);
        if (rc >= 0 || rc == MC_ERR_DNS || errno != EADDRINUSE)
            return rc;
    }
    errno = EADDRINUSE;
    return rc;
}

int mc__tcp_connect(const char *host, uint16_t port, uint64_t deadline_ms) {
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    char service[8];
    int fd = -1;
    int rc = MC_ERR_SOCKET;
    int saved = ECONNREFUSED;
    snprintf(service, sizeof(service), "%u", (unsigned)port);
    if (!host || !*host || getaddrinfo(host, service, &hints, &res) != 0) {
        rc = MC_ERR_DNS;
        goto out;
    }
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        int err = 0;
        socklen_t el = sizeof(err);
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
        if (fd < 0) {
            saved = errno;
            continue;
        }
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
            goto connected;
        if (errno == EINPROGRESS && mc__wait_fd(fd, POLLOUT, deadline_ms) == 0 &&
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0)
            goto connected;
        saved = err ? err : errno;
        close(fd);
        fd = -1;
        if (saved == ETIMEDOUT && deadline_ms && mc__now_ms() >= deadline_ms)
            break;
    }
    errno = saved;
    goto out;
connected:
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    mc__set_nodelay(fd);
    rc = fd;
out:
    if (res)
        freeaddrinfo(res);
    return rc;
}

int mc__split_host_port(const char *s, char *host, size_t host_cap, uint16_t *port) {
    const char *hb = s;
    const char *he = NULL;
    const char *ps = NULL;
    char *end = NULL;
    unsigned long v = 0;
    if (!s || !host || host_cap == 0)
        return MC_ERR_INVALID_ARGUMENT;
    if (*s == '[') {
        hb = s + 1;
        he = strchr(hb, ']');
        if (!he || he[1] != ':')
            return MC_ERR_INVALID_ARGUMENT;
        ps = he + 2;
    } else {
        he = strrchr(s, ':');
        if (!he)
            return MC_ERR_INVALID_ARGUMENT;
        ps = he + 1;
    }
    if ((size_t)(he - hb) >= host_cap || he == hb || *ps < '0' || *ps > '9')
        return MC_ERR_INVALID_ARGUMENT;
    errno = 0;
    v = strtoul(ps, &end, 10);
    if (errno || *end || v > 65535)
        return MC_ERR_INVALID_ARGUMENT;
    memcpy(host, hb, (size_t)(he - hb));
    host[he - hb] = '\0';
    *port = (uint16_t)v;
    return 0;
}

int mc__accept(int lfd) {
    int fd;
    do {
        fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return MC_ERR_SOCKET;
    mc__set_nodelay(fd); /* fails harmlessly on unix sockets */
    return fd;
}

int mc__send_all(int fd, const void *p, size_t n, uint64_t deadline_ms) {
    return mc__send2(fd, p, n, NULL, 0, deadline_ms);
}

int mc__send2(int fd, const void *a, size_t an, const void *b, size_t bn, uint64_t deadline_ms) {
    struct iovec iov[2] = {{(void *)a, an}, {(void *)b, bn}};
    return mc__sendv(fd, iov, 2, deadline_ms);
}

void mc__iov_advance(struct iovec **v, int *cnt, size_t w) {
    while (*cnt > 0 && w >= (*v)->iov_len) {
        w -= (*v)->iov_len;
        (*v)++;
        (*cnt)--;
    }
    if (*cnt > 0) {
        (*v)->iov_base = (char *)(*v)->iov_base + w;
        (*v)->iov_len -= w;
    }
}

ssize_t mc__sendv_some(int fd, struct iovec *iov, int cnt) {
    for (;;) {
        /* the kernel takes at most IOV_MAX pieces per call; the rest go in the next one */
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)(cnt > 1024 ? 1024 : cnt)};
        ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w >= 0 || errno != EINTR)
            return w;
    }
}

int mc__sendv(int fd, struct iovec *iov, int cnt, uint64_t deadline_ms) {
    struct iovec *v = iov;
    mc__iov_advance(&v, &cnt, 0); /* skips leading empty pieces */
    while (cnt > 0) {
        struct msghdr mh = {.msg_iov = v, .msg_iovlen = (size_t)(cnt > 1024 ? 1024 : cnt)};
        ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL | (deadline_ms ? MSG_DONTWAIT : 0));
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if ((errno == EAGAIN || errno == EWOULDBLOCK) &&
                mc__wait_fd(fd, POLLOUT, deadline_ms) == 0)
                continue;
            return MC_ERR_SOCKET;
        }
        mc__iov_advance(&v, &cnt, (size_t)w);
    }
    return 0;
}

/* A spin setting in microseconds (0..1000; unset or unusable: def_us), read once into *cache,
 * since every receive looks at it. */
static uint64_t mc__spin_setting_ns(_Atomic int64_t *cache, const char *name, int64_t def_us) {
    int64_t v = atomic_load_explicit(cache, memory_order_relaxed);
    if (v < 0) {
        v = mc__env_i64_in(name, def_us, 0, 1000) * 1000;
        atomic_store_explicit(cache, v, memory_order_relaxed);
    }
    return (uint64_t)v;
}

/* MC_TCP_SPIN_US (0..1000, default 0): how long a receive that finds nothing keeps trying
 * before it sleeps. Waking a sleeping thread costs tens of microseconds on an idle virtual
 * machine, more than a small request takes (docs/performance.md); spinning trades CPU for it. */
static uint64_t mc__spin_ns(void) {
    static _Atomic int64_t cached = -1;
    return mc__spin_setting_ns(&cached, "MC_TCP_SPIN_US", 0);
}

/* MC_TCP_REPLY_SPIN_US (0..1000, default 150): the same, but only for the receive that follows
 * a send on its connection (wait_first): the reply to a request just sent, which for a small
 * request comes within tens of microseconds, and on the serving side the next request after a
 * reply, which a caller in a loop sends at once, or after one call to another process (a store's
 * write is followed by its commit at the master, so the holder's next request comes one master
 * round trip later). Each saves a wake-up on each side (75 -> 8 us for a one-thread 4 KiB
 * transfer_sync_write on the idle VM; a single 4 KiB store put 105 -> 30 us,
 * docs/performance.md); a connection that stays idle spins once, then sleeps. 150 us rather than
 * 50: on the 2-core VM a wait that outlasted 50 us was as often one that slept, so its core went
 * idle and the answer came late (a wake through the host), which made the next wait longer too;
 * 150 kept the chain awake (32 x 4 KiB batched puts at one process 147k-160k -> 257k-258k
 * op/s, 8 processes' single 4 KiB first gets 39k-49k -> 68k-69k, one disk-tier reader's 64 KiB
 * gets p50 129-140 -> 107-123 us; 100 was between, 200 no better: docs/perf/issue26-spin150).
 * The spin yields its core between polls, but a yield only reaches threads of the spinner's own
 * scheduling group: with 8 clients in one session and the master and holder in sessions of their
 * own (autogroups), the clients' spins hold cores those two need, and 150 us costs such 8-client
 * runs on 2 cores up to a third of their single small gets (same A/B). */
static uint64_t mc__reply_spin_base_ns(void) {
    static _Atomic int64_t cached = -1;
    return mc__spin_setting_ns(&cached, "MC_TCP_REPLY_SPIN_US", 150);
}

/* Set in the environment, MC_TCP_REPLY_SPIN_US is the spin, always; unset, the default spin is
 * given only while it pays (mc__spin_allow: this thread's spins keep ending with the answer). */
static int mc__reply_spin_fixed(void) {
    static _Atomic int cached = -1;
    int v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (v < 0) {
        v = getenv("MC_TCP_REPLY_SPIN_US") != NULL;
        atomic_store_explicit(&cached, v, memory_order_relaxed);
    }
    return v;
}

/* An answer behind a payload comes no sooner than the payload crosses: a 64 KiB write's reply
 * takes 20-30 us on loopback, past the base spin, and sleeping then costs a wake-up (55 against
 * 29 us a call, docs/performance.md), and the same holds for a batch's small group (32 x 4 KiB
 * batched gets on the 2-core VM went from 229k to 560k op/s when their wait stopped sleeping at
 * once). Beyond MC__SPIN_BYTES_MAX the wait is long anyway (a full 256 KiB group of a larger
 * batch, a put_end after a large transfer): a spin would only burn CPU through it, and with 8
 * client processes on 2 cores it took the cores the holder needed (a bound of 256 KiB against
 * 128 KiB: 16 x 64 KiB gets 99k-108k against 126k-140k op/s; docs/perf/issue26-inline), so such
 * waits sleep at once. */
uint64_t mc__reply_spin_for(uint64_t bytes) {
    uint64_t base = mc__reply_spin_base_ns();
    if (base == 0 || bytes > MC__SPIN_BYTES_MAX)
        return 0;
    return base + bytes / 2; /* 2 bytes per ns */
}

/* The spin a wait that wants want_ns may take (sock.h: fixed, or this thread's record's say), and
 * how it ended: the one gate of every reply-like wait, socket receives (mc__recv_some) or not. */
static uint64_t mc__spin_gate(uint64_t want_ns) {
    return want_ns && !mc__reply_spin_fixed() ? mc__spin_allow(want_ns) : want_ns;
}

void mc__wait_spin_ended(int answered) {
    if (!mc__reply_spin_fixed())
        mc__spin_result(answered);
}

uint64_t mc__wait_spin_for(uint64_t bytes) {
    return mc__spin_gate(mc__reply_spin_for(bytes));
}

/* Tries to receive without sleeping for up to spin_ns: the bytes' count, 0 on EOF, -1 with
 * errno (EAGAIN when nothing came in time). The core is offered to any other runnable thread
 * between polls: the spin keeps the core from going idle (on a VM an idle core halts, and waking
 * it again costs tens of microseconds) without holding it from a thread that has work, such as
 * the peer that makes our answer when there are fewer cores than busy processes. Without the
 * yield, fixed spins of 60 and 150 us made a single put on 2 cores slower by about twice the
 * spin (docs/perf/issue26-quiet/spin-exp.txt). */
static ssize_t mc__recv_spin(int fd, void *c, size_t n, uint64_t spin_ns) {
    uint64_t until = mc__now_ns() + spin_ns;
    for (;;) {
        ssize_t r = recv(fd, c, n, MSG_DONTWAIT);
        if (r >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK) || mc__now_ns() >= until)
            return r;
        sched_yield();
    }
}

/* One receive of 1..n bytes within the deadline: the count, or MC_ERR_SOCKET (EOF reads as
 * ECONNRESET). wait_first polls before the first receive instead of after a failed one: for a
 * caller that has just sent a request, whose reply cannot be there yet, this saves the receive
 * that would fail with EAGAIN. */
static ssize_t mc__recv_some(int fd, void *c, size_t n, uint64_t deadline_ms, int wait_first,
                             uint64_t wait_spin_ns, int timed) {
    uint64_t spin = mc__spin_ns();
    uint64_t reply_spin = wait_first && !spin ? mc__spin_gate(wait_spin_ns) : 0;
    if (reply_spin) {
        ssize_t r = mc__recv_spin(fd, c, n, reply_spin);
        mc__wait_spin_ended(r >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK));
        if (r > 0)
            return r;
        if (r == 0) {
            errno = ECONNRESET;
            return MC_ERR_SOCKET;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return MC_ERR_SOCKET;
        /* nothing yet: wait as below */
    }
    /* A socket with SO_RCVTIMEO set: the wait is the receive itself (one call instead of poll
     * and receive), woken every SO_RCVTIMEO to look at the deadline. */
    while (wait_first && timed && !spin && deadline_ms) {
        ssize_t r = recv(fd, c, n, 0);
        if (r > 0)
            return r;
        if (r == 0)
            errno = ECONNRESET;
        else if (errno == EINTR)
            continue;
        else if ((errno == EAGAIN || errno == EWOULDBLOCK) && mc__now_ms() < deadline_ms)
            continue;
        else if (errno == EAGAIN || errno == EWOULDBLOCK)
            errno = ETIMEDOUT;
        return MC_ERR_SOCKET;
    }
    if (wait_first && !spin && deadline_ms && mc__wait_fd(fd, POLLIN, deadline_ms) != 0)
        return MC_ERR_SOCKET;
    for (;;) {
        ssize_t r =
            spin ? mc__recv_spin(fd, c, n, spin) : recv(fd, c, n, deadline_ms ? MSG_DONTWAIT : 0);
        if (r < 0 && spin && !deadline_ms && (errno == EAGAIN || errno == EWOULDBLOCK))
            r = recv(fd, c, n, 0); /* no deadline: sleep in the receive itself */
        if (r == 0) {
            errno = ECONNRESET;
            return MC_ERR_SOCKET;
        }
        if (r > 0)
            return r;
        if (errno == EINTR)
            continue;
        if ((errno == EAGAIN || errno == EWOULDBLOCK) && mc__wait_fd(fd, POLLIN, deadline_ms) == 0)
            continue;
        return MC_ERR_SOCKET;
    }
}

/* n bytes into p; the first receive waits first, spinning up to first_spin_ns. */
static int mc__recv_n(int fd, void *p, size_t n, uint64_t deadline_ms, int wait_first,
                      uint64_t first_spin_ns) {
    char *c = p;
    while (n > 0) {
        ssize_t r = mc__recv_some(fd, c, n, deadline_ms, wait_first, first_spin_ns, 0);
        if (r < 0)
            return MC_ERR_SOCKET;
        wait_first = 0;
        c += r;
        n -= (size_t)r;
    }
    return 0;
}

int mc__recv_all(int fd, void *p, size_t n, uint64_t deadline_ms) {
    return mc__recv_n(fd, p, n, deadline_ms, 0, 0);
}

int mc__recv_reply(int fd, void *p, size_t n, uint64_t deadline_ms, uint64_t spin_ns) {
    return mc__recv_n(fd, p, n, deadline_ms, 1, spin_ns);
}

void mc__rbuf_init(mc__rbuf_t *b, int fd, void *mem, size_t cap) {
    b->fd = fd;
    b->data = mem;
    b->cap = cap;
    b->off = b->len = 0;
    b->wait_first = 0;
    b->spin_ns = mc__reply_spin_for(0);
    b->timed_wait = 0;
    b->filled = 0;
}

int mc__rbuf_read(mc__rbuf_t *b, void *dst, size_t n, uint64_t deadline_ms) {
    return mc__rbuf_read_max(b, dst, n, deadline_ms, b->cap);
}

int mc__rbuf_read_max(mc__rbuf_t *b, void *dst, size_t n, uint64_t deadline_ms, size_t fill) {
    char *d = dst;
    if (fill > b->cap)
        fill = b->cap;
    for (;;) {
        size_t have = b->len - b->off;
        ssize_t r;
        if (have) {
            size_t k = have < n ? have : n;
            memcpy(d, b->data + b->off, k);
            b->off += k;
            d += k;
            n -= k;
        }
        if (n == 0)
            return 0;
        /* A large remainder goes straight to its destination: copying through the buffer would
         * only add a memcpy. */
        if (n >= b->cap / 2) {
            int wait = b->wait_first;
            b->wait_first = 0;
            r = mc__recv_some(b->fd, d, n, deadline_ms, wait, b->spin_ns, b->timed_wait);
            if (r < 0)
                return MC_ERR_SOCKET;
            b->filled = (size_t)r == n;
            if ((size_t)r == n)
                return 0;
            d += r;
            n -= (size_t)r;
            if (mc__recv_all(b->fd, d, n, deadline_ms))
                return MC_ERR_SOCKET;
            b->filled = 1;
            return 0;
        }
        r = mc__recv_some(b->fd, b->data, fill > n ? fill : n, deadline_ms, b->wait_first,
                          b->spin_ns, b->timed_wait);
        b->wait_first = 0;
        if (r < 0)
            return MC_ERR_SOCKET;
        b->filled = (size_t)r == (fill > n ? fill : n);
        b->off = 0;
        b->len = (size_t)r;
    }
}

size_t mc__rbuf_top_up(mc__rbuf_t *b) {
    size_t have = b->len - b->off;
    ssize_t r;
    if (have == b->cap || !b->filled)
        return have;
    if (b->off) {
        memmove(b->data, b->data + b->off, have);
        b->off = 0;
        b->len = have;
    }
    do
        r = recv(b->fd, b->data + have, b->cap - have, MSG_DONTWAIT);
    while (r < 0 && errno == EINTR);
    b->filled = r > 0 && (size_t)r == b->cap - have;
    if (r > 0)
        b->len += (size_t)r;
    return b->len - b->off;
}

int mc__set_buffers(int fd, int sndbuf, int rcvbuf) {
    if (sndbuf > 0 && setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)) != 0)
        return MC_ERR_SOCKET;
    if (rcvbuf > 0 && setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)) != 0)
        return MC_ERR_SOCKET;
    return 0;
}

int mc__set_recv_timeout(int fd, int ms) {
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    return setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0 ? 0 : MC_ERR_SOCKET;
}

/* A setting read once into *cache (-1: not read yet): every connection looks at it. */
static int64_t mc__cached_setting(_Atomic int64_t *cache, const char *name, int64_t def,
                                  int64_t hi) {
    int64_t v = atomic_load_explicit(cache, memory_order_relaxed);
    if (v < 0) {
        v = mc__env_i64_in(name, def, 0, hi);
        atomic_store_explicit(cache, v, memory_order_relaxed);
    }
    return v;
}

/* 5 s: far above any round trip a live network has (a busy host still acknowledges within
 * milliseconds: its kernel does, not its process), and short enough that a put to a silent node
 * fails, and is placed elsewhere, before the master would expire that node (client_ttl, 10 s). */
int64_t mc__tcp_user_timeout_ms(void) {
    static _Atomic int64_t cached = -1;
    return mc__cached_setting(&cached, "MC_TCP_USER_TIMEOUT_MS", 5000, 600000);
}

/* 2 s idle + 3 probes 1 s apart: a connection waiting for an answer (its request acknowledged)
 * learns within ~5 s that the peer's host is gone. A probe is one empty segment per idle
 * connection every 2 s, nothing next to the traffic that keeps a connection busy. */
int64_t mc__tcp_keepalive_s(void) {
    static _Atomic int64_t cached = -1;
    return mc__cached_setting(&cached, "MC_TCP_KEEPALIVE_S", 2, 3600);
}

int mc__set_dead_peer_timeouts(int fd) {
    int rc = 0;
    int user = (int)mc__tcp_user_timeout_ms();
    int idle = (int)mc__tcp_keepalive_s();
    if (user > 0 && setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user, sizeof(user)) != 0)
        rc = MC_ERR_SOCKET;
    if (idle > 0) {
        int on = 1, intvl = 1, cnt = 3;
        if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on)) != 0 ||
            setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle)) != 0 ||
            setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl)) != 0 ||
            setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt)) != 0)
            rc = MC_ERR_SOCKET;
    }
    return rc;
}
