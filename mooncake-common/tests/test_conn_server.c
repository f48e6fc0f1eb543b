/* mc__conn_server: connections are served concurrently, the limit refuses extras through the
 * reject hook, and stop() returns promptly even while handlers are blocked reading. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <stdatomic.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mooncake/common/conn_server.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"

typedef struct echo_ctx {
    atomic_int served;
    atomic_int rejected;
} echo_ctx_t;

/* Echoes one byte at a time until the peer closes or the server shuts the socket down. */
static void echo_serve(void *arg, int fd) {
    echo_ctx_t *ctx = arg;
    uint8_t b;
    atomic_fetch_add(&ctx->served, 1);
    while (mc__recv_all(fd, &b, 1, 0) == 0)
        if (mc__send_all(fd, &b, 1, mc__now_ms() + 2000) != 0)
            break;
}

static void echo_reject(void *arg, int fd) {
    echo_ctx_t *ctx = arg;
    atomic_fetch_add(&ctx->rejected, 1);
    (void)!write(fd, "!", 1);
}

static int connect_to(uint16_t port) {
    return mc__tcp_connect("127.0.0.1", port, mc__now_ms() + 2000);
}

static void wait_active(mc_conn_server_t *s, int n) {
    uint64_t deadline = mc__now_ms() + 3000;
    while (mc__conn_server_active(s) != n && mc__now_ms() < deadline)
        usleep(1000);
    assert_int_equal(mc__conn_server_active(s), n);
}

static void test_serves_concurrently_and_limits(void **state) {
    echo_ctx_t ctx = {0};
    mc_conn_server_t *s = NULL;
    mc_conn_server_opts_t o = {.name = "test",
                               .listen_fd = -1,
                               .host = "127.0.0.1",
                               .max_conns = 2,
                               .serve = echo_serve,
                               .reject = echo_reject,
                               .ctx = &ctx};
    int a, b, c;
    uint8_t x = 'a', y = 0;
    (void)state;
    assert_int_equal(mc__conn_server_start(&o, &s), 0);
    assert_true(mc__conn_server_port(s) > 0);
    a = connect_to(mc__conn_server_port(s));
    b = connect_to(mc__conn_server_port(s));
    assert_true(a >= 0 && b >= 0);
    wait_active(s, 2);
    /* both are served at once: each echoes while the other stays open */
    assert_int_equal(mc__send_all(b, &x, 1, 0), 0);
    assert_int_equal(mc__recv_all(b, &y, 1, mc__now_ms() + 2000), 0);
    assert_int_equal(y, 'a');
    x = 'b';
    assert_int_equal(mc__send_all(a, &x, 1, 0), 0);
    assert_int_equal(mc__recv_all(a, &y, 1, mc__now_ms() + 2000), 0);
    assert_int_equal(y, 'b');
    /* a third is over the limit: the reject hook answers, then it is closed */
    c = connect_to(mc__conn_server_port(s));
    assert_true(c >= 0);
    assert_int_equal(mc__recv_all(c, &y, 1, mc__now_ms() + 2000), 0);
    assert_int_equal(y, '!');
    assert_int_not_equal(mc__recv_all(c, &y, 1, mc__now_ms() + 2000), 0);
    assert_int_equal(atomic_load(&ctx.rejected), 1);
    close(c);
    /* a closed connection frees its slot */
    close(a);
    wait_active(s, 1);
    c = connect_to(mc__conn_server_port(s));
    wait_active(s, 2);
    /* active counts at accept; the handler's own count follows once its thread runs */
    for (uint64_t d = mc__now_ms() + 3000; atomic_load(&ctx.served) < 3 && mc__now_ms() < d;)
        usleep(1000);
    assert_int_equal(atomic_load(&ctx.served), 3);
    /* stop returns although both handlers are blocked in recv, and closes the peers */
    uint64_t t0 = mc__now_ms();
    mc__conn_server_stop(s);
    assert_true(mc__now_ms() - t0 < 2000);
    assert_int_not_equal(mc__recv_all(b, &y, 1, mc__now_ms() + 2000), 0);
    close(b);
    close(c);
}

static void test_takes_over_a_listening_socket(void **state) {
    echo_ctx_t ctx = {0};
    mc_conn_server_t *s = NULL;
    uint16_t port = 0;
    int lfd = mc__tcp_listen("127.0.0.1", 0, 16, &port);
    mc_conn_server_opts_t o = {.listen_fd = lfd, .serve = echo_serve, .ctx = &ctx};
    uint8_t x = 'z', y = 0;
    int a;
    (void)state;
    assert_true(lfd >= 0);
    assert_int_equal(mc__conn_server_start(&o, &s), 0);
    assert_int_equal(mc__conn_server_port(s), port);
    a = connect_to(port);
    assert_int_equal(mc__send_all(a, &x, 1, 0), 0);
    assert_int_equal(mc__recv_all(a, &y, 1, mc__now_ms() + 2000), 0);
    assert_int_equal(y, 'z');
    close(a);
    mc__conn_server_stop(s);
}

static void test_bad_arguments(void **state) {
    mc_conn_server_t *s = NULL;
    mc_conn_server_opts_t o = {.listen_fd = -1, .host = "127.0.0.1"};
    (void)state;
    assert_true(mc__conn_server_start(&o, &s) < 0); /* no serve function */
    assert_true(mc__conn_server_start(NULL, &s) < 0);
    assert_null(s);
    mc__conn_server_stop(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_serves_concurrently_and_limits),
        cmocka_unit_test(test_takes_over_a_listening_socket),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
