/* ZMTP: our PUB with our SUB clients (topic filtering, multipart order), our ROUTER answering a
 * DEALER and a REQ, and bad peers (a garbage greeting, an incompatible socket type, a frame over
 * the limit) closed while the server keeps serving. Interop with libzmq is the Python test's
 * (python/tests/integration/store/test_kv_events.py, pyzmq against the master). */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "mooncake/common/zmtp_socket.h"
#include "mooncake/error.h"

#define DEADLINE() (mc__now_ms() + 20000)

static void endpoint(char *out, size_t cap, mc_zmtp_server_t *s) {
    snprintf(out, cap, "tcp://127.0.0.1:%u", mc__zmtp_server_port(s));
}

static void wait_peers(mc_zmtp_server_t *s, uint64_t n) {
    uint64_t end = DEADLINE();
    mc_zmtp_server_stats_t st;
    for (;;) {
        mc__zmtp_server_stats(s, &st);
        if (st.peers == n)
            return;
        assert_true(mc__now_ms() < end);
        usleep(2000);
    }
}

/* Publishes until the subscriber sees a message (a subscription travels asynchronously, as with
 * libzmq), then checks that the following messages arrive in order. */
static void test_pub_sub(void **state) {
    (void)state;
    mc_zmtp_server_t *pub;
    mc_zmtp_client_t *a, *b;
    char ep[64];
    assert_int_equal(mc__zmtp_server_start("tcp://127.0.0.1:0", "PUB", 0, 0, NULL, NULL, &pub), 0);
    endpoint(ep, sizeof(ep), pub);
    assert_int_equal(mc__zmtp_connect(ep, "SUB", 0, DEADLINE(), &a), 0);
    assert_int_equal(mc__zmtp_connect(ep, "SUB", 0, DEADLINE(), &b), 0);
    assert_int_equal(mc__zmtp_subscribe(a, "", 0, DEADLINE()), 0);
    assert_int_equal(mc__zmtp_subscribe(b, "kv", 2, DEADLINE()), 0);
    wait_peers(pub, 2);
    mc_zmtp_msg_t m;
    uint64_t seq = 0;
    for (;;) {
        uint8_t seqb[8];
        char big[1000];
        memset(big, 'x', sizeof(big));
        for (int i = 0; i < 8; i++)
            seqb[i] = (uint8_t)(seq >> (56 - 8 * i));
        struct iovec other[2] = {{"zz", 2}, {seqb, 8}};
        struct iovec parts[3] = {{"kv", 2}, {seqb, 8}, {big, sizeof(big)}};
        assert_int_equal(mc__zmtp_server_publish(pub, other, 2), 0);
        assert_int_equal(mc__zmtp_server_publish(pub, parts, 3), 0);
        seq++;
        int rc = mc__zmtp_recv(b, &m, mc__now_ms() + 20);
        if (rc == 0)
            break;
        assert_int_equal(errno, ETIMEDOUT);
        assert_true(seq < 100000);
    }
    /* b subscribed to "kv" only: it never sees "zz" */
    assert_int_equal(m.nparts, 3);
    assert_memory_equal(m.part[0], "kv", 2);
    assert_int_equal(m.len[2], 1000);
    uint64_t first = 0;
    for (int i = 0; i < 8; i++)
        first = (first << 8) | m.part[1][i];
    for (uint64_t k = first + 1; k < seq; k++) {
        assert_int_equal(mc__zmtp_recv(b, &m, DEADLINE()), 0);
        assert_memory_equal(m.part[0], "kv", 2);
        uint64_t got = 0;
        for (int i = 0; i < 8; i++)
            got = (got << 8) | m.part[1][i];
        assert_true(got == k);
    }
    /* a subscribed to everything: it sees both topics */
    int saw_zz = 0, saw_kv = 0;
    while (!(saw_zz && saw_kv)) {
        assert_int_equal(mc__zmtp_recv(a, &m, DEADLINE()), 0);
        saw_zz |= m.len[0] == 2 && !memcmp(m.part[0], "zz", 2);
        saw_kv |= m.len[0] == 2 && !memcmp(m.part[0], "kv", 2);
    }
    mc__zmtp_close(a);
    mc__zmtp_close(b);
    wait_peers(pub, 0);
    mc__zmtp_server_stop(pub);
}

static void echo(mc_zmtp_server_t *s, uint64_t conn, const mc_zmtp_msg_t *m, void *arg) {
    struct iovec parts[MC_ZMTP_MAX_PARTS + 1];
    (void)arg;
    parts[0] = (struct iovec){"re", 2};
    for (int i = 0; i < m->nparts; i++)
        parts[i + 1] = (struct iovec){(void *)m->part[i], m->len[i]};
    mc__zmtp_server_send_to(s, conn, parts,
                            m->nparts + 1 > MC_ZMTP_MAX_PARTS ? MC_ZMTP_MAX_PARTS : m->nparts + 1);
}

static void test_router(void **state) {
    (void)state;
    mc_zmtp_server_t *r;
    mc_zmtp_client_t *d, *q;
    mc_zmtp_msg_t m;
    char ep[64];
    assert_int_equal(mc__zmtp_server_start("tcp://127.0.0.1:0", "ROUTER", 0, 4096, echo, NULL, &r),
                     0);
    endpoint(ep, sizeof(ep), r);
    assert_int_equal(mc__zmtp_connect(ep, "DEALER", 0, DEADLINE(), &d), 0);
    assert_int_equal(mc__zmtp_connect(ep, "REQ", 0, DEADLINE(), &q), 0);
    struct iovec one[2] = {{"", 0}, {"hello", 5}};
    assert_int_equal(mc__zmtp_send(d, one, 2, DEADLINE()), 0);
    assert_int_equal(mc__zmtp_recv(d, &m, DEADLINE()), 0);
    assert_int_equal(m.nparts, 3);
    assert_memory_equal(m.part[0], "re", 2);
    assert_int_equal(m.len[1], 0);
    assert_memory_equal(m.part[2], "hello", 5);
    /* REQ: the delimiter goes on the wire and comes off again on both sides */
    assert_int_equal(mc__zmtp_send(q, &one[1], 1, DEADLINE()), 0);
    assert_int_equal(mc__zmtp_recv(q, &m, DEADLINE()), 0);
    assert_int_equal(m.nparts, 2);
    assert_memory_equal(m.part[1], "hello", 5);
    /* a message over the server's limit: that peer is closed, the other still served */
    static char big[8192];
    struct iovec huge = {big, sizeof(big)};
    assert_int_equal(mc__zmtp_send(d, &huge, 1, DEADLINE()), 0);
    int rc = mc__zmtp_recv(d, &m, DEADLINE());
    assert_int_equal(rc, MC_ERR_SOCKET);
    assert_int_equal(mc__zmtp_send(q, &one[1], 1, DEADLINE()), 0);
    assert_int_equal(mc__zmtp_recv(q, &m, DEADLINE()), 0);
    mc_zmtp_server_stats_t st;
    mc__zmtp_server_stats(r, &st);
    assert_true(st.bad_peers >= 1);
    mc__zmtp_close(d);
    mc__zmtp_close(q);
    mc__zmtp_server_stop(r);
}

static void test_bad_peers(void **state) {
    (void)state;
    mc_zmtp_server_t *pub;
    mc_zmtp_client_t *c;
    char ep[64];
    assert_int_equal(mc__zmtp_server_start("tcp://127.0.0.1:0", "PUB", 0, 0, NULL, NULL, &pub), 0);
    endpoint(ep, sizeof(ep), pub);
    /* a REQ may not talk to a PUB: the handshake fails on our side too */
    assert_int_not_equal(mc__zmtp_connect(ep, "REQ", 0, DEADLINE(), &c), 0);
    /* garbage instead of a greeting: the server closes the connection */
    int fd = mc__tcp_connect("127.0.0.1", mc__zmtp_server_port(pub), DEADLINE());
    assert_true(fd >= 0);
    char junk[64];
    memset(junk, 'G', sizeof(junk));
    assert_int_equal(mc__send_all(fd, junk, sizeof(junk), DEADLINE()), 0);
    char sink[256];
    ssize_t r;
    assert_int_equal(mc__wait_fd(fd, POLLIN, DEADLINE()), 0);
    while ((r = read(fd, sink, sizeof(sink))) > 0)
        assert_int_equal(mc__wait_fd(fd, POLLIN, DEADLINE()), 0);
    assert_true(r == 0 || errno == ECONNRESET);
    close(fd);
    /* bad endpoints and types */
    mc_zmtp_server_t *x;
    assert_int_equal(mc__zmtp_server_start("udp://1.2.3.4:5", "PUB", 0, 0, NULL, NULL, &x),
                     MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc__zmtp_server_start("tcp://127.0.0.1:0", "REP", 0, 0, NULL, NULL, &x),
                     MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc__zmtp_connect("tcp://127.0.0.1", "SUB", 0, DEADLINE(), &c),
                     MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc__zmtp_connect(ep, "PUB", 0, DEADLINE(), &c), MC_ERR_INVALID_ARGUMENT);
    /* still serving */
    assert_int_equal(mc__zmtp_connect(ep, "SUB", 0, DEADLINE(), &c), 0);
    mc__zmtp_close(c);
    mc__zmtp_server_stop(pub);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pub_sub),
        cmocka_unit_test(test_router),
        cmocka_unit_test(test_bad_peers),
    };
    return cmocka_run_group_tests_name("common_zmtp", tests, NULL, NULL);
}
