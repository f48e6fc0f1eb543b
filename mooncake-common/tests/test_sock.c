#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"

static uint64_t checksum(const uint8_t *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

typedef struct {
    int lfd;
    size_t n;
    uint64_t sum;
    int rc;
} echo_t;

/* Receives n bytes, checksums them, sends them back. */
static void *echo_main(void *arg) {
    echo_t *e = arg;
    int fd = mc__accept(e->lfd);
    uint8_t *buf = malloc(e->n);
    e->rc = fd < 0 ? -1 : mc__recv_all(fd, buf, e->n, mc__now_ms() + 10000);
    if (e->rc == 0) {
        e->sum = checksum(buf, e->n);
        e->rc = mc__send_all(fd, buf, e->n, mc__now_ms() + 10000);
    }
    free(buf);
    if (fd >= 0)
        close(fd);
    return NULL;
}

static void test_tcp_roundtrip(void **state) {
    uint16_t port = 0;
    echo_t e = {0};
    pthread_t t;
    size_t n = 8 << 20;
    uint8_t *out = malloc(n), *in = malloc(n);
    for (size_t i = 0; i < n; i++)
        out[i] = (uint8_t)(i * 131 + (i >> 9));
    e.lfd = mc__tcp_listen("127.0.0.1", 0, 16, &port);
    assert_true(e.lfd >= 0);
    assert_true(port != 0);
    e.n = n;
    pthread_create(&t, NULL, echo_main, &e);
    int fd = mc__tcp_connect("127.0.0.1", port, mc__now_ms() + 5000);
    assert_true(fd >= 0);
    assert_int_equal(mc__send2(fd, out, 100, out + 100, n - 100, mc__now_ms() + 10000), 0);
    assert_int_equal(mc__recv_all(fd, in, n, mc__now_ms() + 10000), 0);
    pthread_join(t, NULL);
    assert_int_equal(e.rc, 0);
    assert_true(e.sum == checksum(out, n));
    assert_memory_equal(in, out, n);
    /* peer closed: EOF is an error for recv_all */
    assert_int_equal(mc__recv_all(fd, in, 1, mc__now_ms() + 2000), MC_ERR_SOCKET);
    close(fd);
    close(e.lfd);
    free(in);
    free(out);
}

static void test_deadlines(void **state) {
    uint16_t port = 0;
    int lfd = mc__tcp_listen("127.0.0.1", 0, 16, &port);
    int fd = mc__tcp_connect("127.0.0.1", port, mc__now_ms() + 2000);
    uint8_t b;
    uint64_t t0 = mc__now_ms();
    assert_true(fd >= 0);
    /* Connected through the backlog, but nobody ever writes. */
    assert_int_equal(mc__recv_all(fd, &b, 1, mc__now_ms() + 200), MC_ERR_SOCKET);
    assert_int_equal(errno, ETIMEDOUT);
    assert_true(mc__now_ms() - t0 >= 190);
    assert_true(mc__now_ms() - t0 < 2000);
    close(fd);
    close(lfd);
}

typedef struct {
    int fd;
} dribble_t;

/* Writes "abcdefghij" in three pieces a few ms apart, then closes. */
static void *dribble_main(void *arg) {
    dribble_t *d = arg;
    const char *parts[] = {"abc", "defg", "hij"};
    for (int i = 0; i < 3; i++) {
        usleep(3000);
        if (write(d->fd, parts[i], strlen(parts[i])) < 0)
            break;
    }
    close(d->fd);
    return NULL;
}

/* n bytes into buf: mc__recv_all, or (reply != 0) mc__recv_reply spinning spin_ns first. */
static int recv_n(int reply, int fd, void *buf, size_t n, uint64_t deadline_ms, uint64_t spin_ns) {
    return reply ? mc__recv_reply(fd, buf, n, deadline_ms, spin_ns)
                 : mc__recv_all(fd, buf, n, deadline_ms);
}

/* A receive with no deadline (a server waiting for its next request) and one with a deadline
 * both gather bytes that arrive late and in pieces, and see the peer's close as an error; the
 * same for the wait for a reply (mc__recv_reply: the first piece comes ms after its spin ends,
 * with the default spin, with none and with a 1 ms one), and with MC_TCP_SPIN_US set (ctest
 * runs this file with and without it). */
static void test_recv_late_pieces(void **state) {
    (void)state;
    const uint64_t spins[] = {mc__reply_spin_for(4096), 0, 1000000};
    for (int mode = 0; mode < 8; mode++) {
        int with_deadline = mode & 1, reply = mode >= 2;
        uint64_t spin = reply ? spins[(mode - 2) / 2] : 0;
        int sv[2];
        char buf[11] = "";
        pthread_t t;
        dribble_t d;
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        d.fd = sv[1];
        assert_int_equal(pthread_create(&t, NULL, dribble_main, &d), 0);
        assert_int_equal(
            recv_n(reply, sv[0], buf, 10, with_deadline ? mc__now_ms() + 5000 : 0, spin), 0);
        assert_string_equal(buf, "abcdefghij");
        assert_int_equal(
            recv_n(reply, sv[0], buf, 1, with_deadline ? mc__now_ms() + 5000 : 0, spin),
            MC_ERR_SOCKET);
        pthread_join(t, NULL);
        close(sv[0]);
    }
}

/* A reply that never comes: the wait ends at its deadline (after its spin), ETIMEDOUT. */
static void test_recv_reply_deadline(void **state) {
    (void)state;
    int sv[2];
    uint8_t b;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    uint64_t t0 = mc__now_ms();
    assert_int_equal(mc__recv_reply(sv[0], &b, 1, mc__now_ms() + 200, 1000000), MC_ERR_SOCKET);
    assert_int_equal(errno, ETIMEDOUT);
    assert_true(mc__now_ms() - t0 >= 190);
    assert_true(mc__now_ms() - t0 < 5000);
    close(sv[0]);
    close(sv[1]);
}

/* The buffered reader: small reads come out of one receive, a large one goes past the buffer
 * straight to its destination, bytes that arrive late and in pieces are gathered (with and
 * without a deadline, with the wait before the first receive, with SO_RCVTIMEO as the wait),
 * the peer's close mid-read is an error, and a read nobody answers ends at its deadline. */
static void test_rbuf(void **state) {
    (void)state;
    for (int mode = 0; mode < 4; mode++) {
        int sv[2];
        uint8_t mem[64];
        uint8_t big[1000], got[1000];
        char small[11] = "";
        mc__rbuf_t rb;
        pthread_t t;
        dribble_t d;
        uint64_t dl = mode ? mc__now_ms() + 5000 : 0;
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        if (mode == 3)
            assert_int_equal(mc__set_recv_timeout(sv[0], 20), 0);
        mc__rbuf_init(&rb, sv[0], mem, sizeof(mem));
        rb.wait_first = mode >= 2;
        rb.timed_wait = mode == 3;
        for (size_t i = 0; i < sizeof(big); i++)
            big[i] = (uint8_t)(i * 7);
        /* 3 small records and a large one in one write: read back in pieces */
        assert_int_equal(mc__send2(sv[1], "xyz", 3, big, sizeof(big), 0), 0);
        assert_int_equal(mc__rbuf_read(&rb, small, 1, dl), 0);
        assert_int_equal(mc__rbuf_read(&rb, small + 1, 2, dl), 0);
        assert_memory_equal(small, "xyz", 3);
        assert_true(mc__rbuf_pending(&rb) > 0);
        assert_int_equal(mc__rbuf_read(&rb, got, sizeof(got), dl), 0);
        assert_memory_equal(got, big, sizeof(big));
        assert_int_equal(mc__rbuf_pending(&rb), 0);
        /* late pieces, then the close */
        d.fd = sv[1];
        rb.wait_first = mode >= 2;
        assert_int_equal(pthread_create(&t, NULL, dribble_main, &d), 0);
        memset(small, 0, sizeof(small));
        assert_int_equal(mc__rbuf_read(&rb, small, 10, dl), 0);
        assert_string_equal(small, "abcdefghij");
        assert_int_equal(mc__rbuf_read(&rb, small, 1, dl), MC_ERR_SOCKET);
        pthread_join(t, NULL);
        close(sv[0]);
    }
    /* a header read with its fill bounded takes nothing of the payload behind it */
    {
        int sv[2];
        uint8_t mem[4096], big[1000], got[1000];
        char hdr[4] = "";
        mc__rbuf_t rb;
        memset(big, 0x5a, sizeof(big));
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        mc__rbuf_init(&rb, sv[0], mem, sizeof(mem));
        assert_int_equal(mc__send2(sv[1], "HDR", 3, big, sizeof(big), 0), 0);
        assert_int_equal(mc__rbuf_read_max(&rb, hdr, 3, mc__now_ms() + 5000, 3), 0);
        assert_string_equal(hdr, "HDR");
        assert_int_equal(mc__rbuf_pending(&rb), 0);
        assert_int_equal(mc__recv_all(sv[0], got, sizeof(got), mc__now_ms() + 5000), 0);
        assert_memory_equal(got, big, sizeof(big));
        close(sv[0]);
        close(sv[1]);
    }
    /* nobody writes: the deadline ends the wait, in both waiting modes */
    for (int timed = 0; timed < 2; timed++) {
        int sv[2];
        uint8_t mem[64], b;
        mc__rbuf_t rb;
        uint64_t t0 = mc__now_ms();
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        if (timed)
            assert_int_equal(mc__set_recv_timeout(sv[0], 20), 0);
        mc__rbuf_init(&rb, sv[0], mem, sizeof(mem));
        rb.wait_first = 1;
        rb.timed_wait = timed;
        assert_int_equal(mc__rbuf_read(&rb, &b, 1, mc__now_ms() + 150), MC_ERR_SOCKET);
        assert_true(mc__now_ms() - t0 >= 140);
        assert_true(mc__now_ms() - t0 < 2000);
        close(sv[0]);
        close(sv[1]);
    }
}

/* A top-up takes what the socket holds without waiting, when the last receive filled what it
 * asked for: the pending bytes move to the front, the buffer fills to its capacity and no
 * further; after a receive that came short (the socket held no more then), or on an empty or
 * closed socket, it adds nothing and leaves the bytes, or the error, to the next read. */
static void test_rbuf_top_up(void **state) {
    (void)state;
    int sv[2];
    uint8_t mem[16], got[16];
    mc__rbuf_t rb;
    uint64_t t0;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    mc__rbuf_init(&rb, sv[0], mem, sizeof(mem));
    t0 = mc__now_ms();
    assert_int_equal(mc__rbuf_top_up(&rb), 0); /* nothing received yet: no wait */
    assert_true(mc__now_ms() - t0 < 1000);
    assert_int_equal(mc__send2(sv[1], "0123456789abcdefghij", 20, NULL, 0, 0), 0);
    assert_int_equal(mc__rbuf_read(&rb, got, 4, mc__now_ms() + 5000), 0); /* takes 16 */
    assert_memory_equal(got, "0123", 4);
    assert_int_equal(mc__rbuf_pending(&rb), 12);
    /* the 12 pending move to the front, the 4 the socket holds come in */
    assert_int_equal(mc__rbuf_top_up(&rb), 16);
    assert_int_equal(mc__rbuf_top_up(&rb), 16); /* full: takes nothing */
    assert_int_equal(mc__rbuf_read(&rb, got, 16, mc__now_ms() + 5000), 0);
    assert_memory_equal(got, "456789abcdefghij", 16);
    assert_int_equal(mc__rbuf_top_up(&rb), 0); /* the socket is empty: nothing, no wait */
    /* that receive came short: the next top-up does not ask the socket, a read gets the bytes */
    assert_int_equal(mc__send2(sv[1], "klmn", 4, NULL, 0, 0), 0);
    assert_int_equal(mc__rbuf_top_up(&rb), 0);
    assert_int_equal(mc__rbuf_read(&rb, got, 4, mc__now_ms() + 5000), 0);
    assert_memory_equal(got, "klmn", 4);
    /* a read that fills the buffer, then the peer closes: nothing added, the read reports it */
    assert_int_equal(mc__send2(sv[1], "0123456789abcdef", 16, NULL, 0, 0), 0);
    assert_int_equal(mc__rbuf_read(&rb, got, 16, mc__now_ms() + 5000), 0);
    close(sv[1]);
    assert_int_equal(mc__rbuf_top_up(&rb), 0);
    assert_int_equal(mc__rbuf_read(&rb, got, 1, mc__now_ms() + 5000), MC_ERR_SOCKET);
    close(sv[0]);
}

/* A scatter send of more pieces than one sendmsg takes (IOV_MAX) arrives whole and in order;
 * empty pieces are skipped; a peer that went away is an error, not a signal. */
static void test_sendv(void **state) {
    enum { PIECES = 3000 };
    static struct iovec iov[PIECES];
    static uint8_t src[PIECES * 3], dst[PIECES * 3];
    uint16_t port = 0;
    echo_t e = {0};
    pthread_t t;
    size_t total = 0;
    int fd;
    (void)state;
    for (size_t i = 0; i < sizeof(src); i++)
        src[i] = (uint8_t)(i * 13 + 1);
    for (int i = 0; i < PIECES; i++) {
        size_t len = (size_t)(i % 4); /* 0..3 bytes: every fourth piece is empty */
        iov[i] = (struct iovec){src + total, len};
        total += len;
    }
    e.lfd = mc__tcp_listen("127.0.0.1", 0, 16, &port);
    e.n = total;
    pthread_create(&t, NULL, echo_main, &e);
    fd = mc__tcp_connect("127.0.0.1", port, mc__now_ms() + 5000);
    assert_true(fd >= 0);
    assert_int_equal(mc__sendv(fd, iov, PIECES, mc__now_ms() + 10000), 0);
    assert_int_equal(mc__recv_all(fd, dst, total, mc__now_ms() + 10000), 0);
    pthread_join(t, NULL);
    assert_int_equal(e.rc, 0);
    assert_memory_equal(dst, src, total);
    /* the echo thread closed its end: sends fail soon (EPIPE / reset), without SIGPIPE */
    {
        int rc = 0;
        struct iovec one = {src, sizeof(src)};
        for (int i = 0; i < 50 && rc == 0; i++) {
            one = (struct iovec){src, sizeof(src)};
            rc = mc__sendv(fd, &one, 1, mc__now_ms() + 2000);
            usleep(1000);
        }
        assert_int_equal(rc, MC_ERR_SOCKET);
    }
    close(fd);
    close(e.lfd);
}

static void test_connect_errors(void **state) {
    uint16_t port = 0;
    int lfd = mc__tcp_listen("127.0.0.1", 0, 16, &port);
    close(lfd); /* nothing listens there now */
    assert_int_equal(mc__tcp_connect("127.0.0.1", port, mc__now_ms() + 2000), MC_ERR_SOCKET);
    assert_int_equal(mc__tcp_connect("no-such-host.invalid", 80, mc__now_ms() + 2000), MC_ERR_DNS);
    assert_int_equal(mc__tcp_connect("", 80, 0), MC_ERR_DNS);
    assert_true(mc__tcp_listen("256.1.1.1", 0, 1, NULL) < 0);
}

static void test_listen_range(void **state) {
    uint16_t p1 = 0, p2 = 0, p3 = 0;
    /* learn a free ephemeral port region to work in */
    int probe = mc__tcp_listen("127.0.0.1", 0, 1, &p1);
    close(probe);
    uint16_t lo = p1 > 60000 ? 20000 : p1;
    int a = mc__tcp_listen_range("127.0.0.1", lo, (uint16_t)(lo + 1), 4, &p2);
    int b = mc__tcp_listen_range("127.0.0.1", lo, (uint16_t)(lo + 1), 4, &p3);
    if (a >= 0 && b >= 0) {
        assert_true(p2 != p3);
        assert_true(p2 >= lo && p2 <= lo + 1);
        assert_true(p3 >= lo && p3 <= lo + 1);
        /* range exhausted */
        uint16_t p4 = 0;
        assert_true(mc__tcp_listen_range("127.0.0.1", lo, (uint16_t)(lo + 1), 4, &p4) < 0);
        assert_int_equal(errno, EADDRINUSE);
    } else {
        /* another process took a port of the range meanwhile; at least one must have bound */
        assert_true(a >= 0 || b >= 0);
    }
    if (a >= 0)
        close(a);
    if (b >= 0)
        close(b);
    assert_int_equal(mc__tcp_listen_range("127.0.0.1", 10, 5, 4, &p2), MC_ERR_INVALID_ARGUMENT);
}

static void test_split_host_port(void **state) {
    char host[64];
    uint16_t port = 0;
    assert_int_equal(mc__split_host_port("10.0.0.1:8080", host, sizeof(host), &port), 0);
    assert_string_equal(host, "10.0.0.1");
    assert_int_equal(port, 8080);
    assert_int_equal(mc__split_host_port("[::1]:17000", host, sizeof(host), &port), 0);
    assert_string_equal(host, "::1");
    assert_int_equal(port, 17000);
    assert_int_equal(mc__split_host_port("node-3:0", host, sizeof(host), &port), 0);
    const char *bad[] = {"host",     "host:",   ":80",  "host:65536", "host:-1",
                         "host:80x", "[::1]80", "[::1", "h:+1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(mc__split_host_port(bad[i], host, sizeof(host), &port),
                         MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc__split_host_port("verylonghostname:1", host, 4, &port),
                     MC_ERR_INVALID_ARGUMENT);
}

static void test_unix_fd_passing(void **state) {
    char path[64];
    int fds[4] = {-1, -1, -1, -1};
    int n = 0;
    char msg[6] = {0};
    snprintf(path, sizeof(path), "@mc-test-%d-%llu", (int)getpid(),
             (unsigned long long)mc__now_ns());
    int lfd = mc__unix_listen(path);
    assert_true(lfd >= 0);
    int c = mc__unix_connect(path, mc__now_ms() + 2000);
    assert_true(c >= 0);
    int s = mc__accept(lfd);
    assert_true(s >= 0);
    /* share a memory region by descriptor and check both sides see the same bytes */
    int mfd = memfd_create("mc-test", MFD_CLOEXEC);
    assert_true(mfd >= 0);
    assert_int_equal(ftruncate(mfd, 4096), 0);
    char *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
    strcpy(m, "shared bytes");
    int pass[2] = {mfd, mfd};
    assert_int_equal(mc__send_fds(c, "hello", 5, pass, 2), 0);
    assert_int_equal(mc__recv_fds(s, msg, 5, fds, 4, &n, mc__now_ms() + 2000), 0);
    assert_string_equal(msg, "hello");
    assert_int_equal(n, 2);
    char *m2 = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fds[0], 0);
    assert_string_equal(m2, "shared bytes");
    munmap(m2, 4096);
    close(fds[0]);
    close(fds[1]);
    /* more descriptors than the receiver can hold: extras are closed, the call succeeds with max */
    assert_int_equal(mc__send_fds(c, "x", 1, pass, 2), 0);
    assert_int_equal(mc__recv_fds(s, msg, 1, fds, 1, &n, mc__now_ms() + 2000), 0);
    assert_int_equal(n, 1);
    close(fds[0]);
    /* timeout with nothing to receive */
    assert_int_equal(mc__recv_fds(s, msg, 1, fds, 1, &n, mc__now_ms() + 100), MC_ERR_SOCKET);
    /* bad arguments */
    assert_int_equal(mc__send_fds(c, "x", 0, pass, 1), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc__send_fds(c, "x", 1, pass, 65), MC_ERR_INVALID_ARGUMENT);
    /* peer gone */
    close(c);
    assert_int_equal(mc__recv_fds(s, msg, 1, fds, 1, &n, mc__now_ms() + 1000), MC_ERR_SOCKET);
    munmap(m, 4096);
    close(mfd);
    close(s);
    close(lfd);
    assert_int_equal(mc__unix_connect(path, mc__now_ms() + 500), MC_ERR_SOCKET); /* gone */
    assert_int_equal(mc__unix_listen(""), MC_ERR_INVALID_ARGUMENT);
}

static void test_unix_filesystem_path(void **state) {
    char path[128];
    snprintf(path, sizeof(path), "/tmp/mc-test-%d.sock", (int)getpid());
    int lfd = mc__unix_listen(path);
    assert_true(lfd >= 0);
    int c = mc__unix_connect(path, mc__now_ms() + 1000);
    assert_true(c >= 0);
    close(c);
    close(lfd);
    /* a stale file left behind does not block the next listener */
    lfd = mc__unix_listen(path);
    assert_true(lfd >= 0);
    close(lfd);
    unlink(path);
}

/* The reply-wait spin as the environment sets it (ctest runs this binary with the default, with
 * MC_TCP_REPLY_SPIN_US=0 and with a bad value, which reads as the default): the base, plus the
 * payload's time at 2 GB/s, and none past MC__SPIN_BYTES_MAX. */
static void test_reply_spin_for(void **state) {
    const char *env = getenv("MC_TCP_REPLY_SPIN_US");
    uint64_t base = env && strcmp(env, "0") == 0 ? 0 : 150000;
    (void)state;
    assert_true(mc__reply_spin_for(0) == base);
    assert_true(mc__reply_spin_for(4096) == (base ? base + 2048 : 0));
    assert_true(mc__reply_spin_for(MC__SPIN_BYTES_MAX) ==
                (base ? base + MC__SPIN_BYTES_MAX / 2 : 0));
    assert_true(mc__reply_spin_for(MC__SPIN_BYTES_MAX + 1) == 0);
    assert_true(mc__reply_spin_for(UINT64_MAX) == 0);
    /* The bound's two sides (docs/perf/issue26-inline/spin-bound-ab.md): the store's batch of
     * 32 x 4 KiB, one pipelined group, is spun for; a full group of the default pipeline
     * (MC_TCP_PIPELINE_BYTES, 256 KiB), a piece of a larger batch, sleeps at once. */
    assert_true(mc__reply_spin_for(32u * 4096u) == (base ? base + 32u * 4096u / 2 : 0));
    assert_true(mc__reply_spin_for(256u << 10) == 0);
}

/* A wait that is not a receive (mc__wait_spin_for) spins as a reply wait does: with
 * MC_TCP_REPLY_SPIN_US set, that spin every time; unset, while the thread's spins end with the
 * answer, and after many that did not, only one wait in 16 (a probe). Run on a thread of its own,
 * whose record is fresh. */
static void *wait_spin_checks(void *arg) {
    int fixed = getenv("MC_TCP_REPLY_SPIN_US") != NULL, spun = 0;
    uint64_t want = mc__reply_spin_for(4096);
    (void)arg;
    if (mc__wait_spin_for(4096) != want)
        return "a fresh thread does not spin the reply spin";
    for (int i = 0; i < 64; i++)
        mc__wait_spin_ended(0);
    for (int i = 0; i < 16; i++)
        spun += mc__wait_spin_for(4096) != 0;
    if (want && spun != (fixed ? 16 : 1))
        return "16 waits after 64 unanswered spins did not spin as the setting says";
    if (!want && spun != 0)
        return "a wait spun with the reply spin off";
    for (int i = 0; i < 64; i++)
        mc__wait_spin_ended(1);
    if (mc__wait_spin_for(4096) != want)
        return "answered spins did not bring the spin back";
    return NULL;
}

static void test_wait_spin_for(void **state) {
    pthread_t t;
    void *why = NULL;
    (void)state;
    assert_int_equal(pthread_create(&t, NULL, wait_spin_checks, NULL), 0);
    assert_int_equal(pthread_join(t, &why), 0);
    if (why)
        fail_msg("%s", (const char *)why);
}

/* What a test expects of one dead-peer setting: def when unset or not a number in lo..hi. */
static int64_t expected_setting(const char *name, int64_t def, int64_t hi) {
    const char *v = getenv(name);
    char *end = NULL;
    long long n;
    if (!v || !*v)
        return def;
    n = strtoll(v, &end, 10);
    return *end || n < 0 || n > hi ? def : n;
}

static int sockopt(int fd, int level, int name) {
    int v = -1;
    socklen_t len = sizeof(v);
    assert_int_equal(getsockopt(fd, level, name, &v, &len), 0);
    return v;
}

/* The dead-peer settings as the environment sets them (ctest runs this binary with the
 * defaults, with both off, and with values that are no setting, which read as the defaults),
 * applied to both ends of a real connection. */
static void test_dead_peer_timeouts(void **state) {
    int64_t user = expected_setting("MC_TCP_USER_TIMEOUT_MS", 5000, 600000);
    int64_t idle = expected_setting("MC_TCP_KEEPALIVE_S", 2, 3600);
    uint16_t port = 0;
    int lfd, c, a;
    (void)state;
    assert_true(mc__tcp_user_timeout_ms() == user);
    assert_true(mc__tcp_keepalive_s() == idle);
    lfd = mc__tcp_listen("127.0.0.1", 0, 4, &port);
    assert_true(lfd >= 0);
    c = mc__tcp_connect("127.0.0.1", port, mc__now_ms() + 5000);
    assert_true(c >= 0);
    a = mc__accept(lfd);
    assert_true(a >= 0);
    for (int i = 0; i < 2; i++) {
        int fd = i ? a : c;
        assert_int_equal(mc__set_dead_peer_timeouts(fd), 0);
        assert_int_equal(sockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT), (int)user);
        assert_int_equal(sockopt(fd, SOL_SOCKET, SO_KEEPALIVE), idle > 0);
        if (idle > 0) {
            assert_int_equal(sockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE), (int)idle);
            assert_int_equal(sockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL), 1);
            assert_int_equal(sockopt(fd, IPPROTO_TCP, TCP_KEEPCNT), 3);
        }
    }
    /* the connection still works, and a socket that is none fails cleanly */
    assert_int_equal(mc__send_all(c, "ok", 2, mc__now_ms() + 5000), 0);
    char buf[2];
    assert_int_equal(mc__recv_all(a, buf, 2, mc__now_ms() + 5000), 0);
    assert_memory_equal(buf, "ok", 2);
    assert_int_equal(mc__set_dead_peer_timeouts(-1), user || idle ? MC_ERR_SOCKET : 0);
    close(a);
    close(c);
    close(lfd);
}

static void test_host_identity(void **state) {
    char ip[64];
    const char *id = mc__host_id();
    assert_non_null(id);
    assert_true(strlen(id) > 3);
    assert_non_null(strchr(id, '/'));
    assert_ptr_equal(id, mc__host_id());
    assert_int_equal(mc__local_ip(ip, sizeof(ip)), 0);
    assert_true(strlen(ip) >= 7);
    assert_int_equal(mc__local_ip(ip, 4), MC_ERR_INVALID_ARGUMENT);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tcp_roundtrip),      cmocka_unit_test(test_deadlines),
        cmocka_unit_test(test_recv_late_pieces),   cmocka_unit_test(test_connect_errors),
        cmocka_unit_test(test_listen_range),       cmocka_unit_test(test_split_host_port),
        cmocka_unit_test(test_unix_fd_passing),    cmocka_unit_test(test_unix_filesystem_path),
        cmocka_unit_test(test_host_identity),      cmocka_unit_test(test_reply_spin_for),
        cmocka_unit_test(test_wait_spin_for),      cmocka_unit_test(test_recv_reply_deadline),
        cmocka_unit_test(test_dead_peer_timeouts), cmocka_unit_test(test_rbuf),
        cmocka_unit_test(test_rbuf_top_up),        cmocka_unit_test(test_sendv),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
