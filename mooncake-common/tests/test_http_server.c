#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/http.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"

#define MAX_BODY (4u << 20)

static uint64_t checksum(const void *v, size_t n) {
    const uint8_t *p = v;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* Echo handler: "/echo" returns the body; "/sum" returns the body's checksum; else 404. */
static void handler(void *ctx, const mc_http_request_t *req, mc_http_response_t *resp) {
    char line[128];
    int n;
    (void)ctx;
    if (strcmp(req->path, "/echo") == 0) {
        mc__http_respond(resp, 200, "application/octet-stream", req->body, req->body_len);
    } else if (strcmp(req->path, "/sum") == 0) {
        n = snprintf(line, sizeof(line), "%s %zu %llx %s", req->method, req->body_len,
                     (unsigned long long)checksum(req->body, req->body_len), req->query);
        mc__http_respond(resp, 200, NULL, line, (size_t)n);
    } else {
        mc__http_respond(resp, 404, NULL, "nope", 4);
    }
}

typedef struct {
    mc_http_server_t *srv;
    char base[64];
} fixture_t;

static int setup(void **state) {
    fixture_t *f = calloc(1, sizeof(*f));
    assert_int_equal(mc__http_server_start("127.0.0.1", 0, MAX_BODY, handler, NULL, &f->srv), 0);
    snprintf(f->base, sizeof(f->base), "http://127.0.0.1:%u", mc__http_server_port(f->srv));
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture_t *f = *state;
    mc__http_server_stop(f->srv);
    free(f);
    return 0;
}

static void request_ok(fixture_t *f, const char *method, const char *path, const void *body,
                       size_t len, int want_status, char **out, size_t *out_len) {
    char url[256];
    int status = 0;
    snprintf(url, sizeof(url), "%s%s", f->base, path);
    assert_int_equal(mc__http_request(method, url, body, len, 5000, &status, out, out_len), 0);
    assert_int_equal(status, want_status);
}

static void test_roundtrip_large_body(void **state) {
    fixture_t *f = *state;
    size_t n = 3u << 20;
    uint8_t *data = malloc(n);
    char *out = NULL;
    size_t out_len = 0;
    char want[128];
    for (size_t i = 0; i < n; i++)
        data[i] = (uint8_t)((i * 2654435761u) >> 13);
    request_ok(f, "PUT", "/echo", data, n, 200, &out, &out_len);
    assert_int_equal(out_len, n);
    assert_true(checksum(out, out_len) == checksum(data, n));
    mc__free(out);
    request_ok(f, "POST", "/sum?k=v", data, n, 200, &out, &out_len);
    snprintf(want, sizeof(want), "POST %zu %llx k=v", n, (unsigned long long)checksum(data, n));
    assert_string_equal(out, want);
    mc__free(out);
    request_ok(f, "GET", "/missing", NULL, 0, 404, &out, NULL);
    assert_string_equal(out, "nope");
    mc__free(out);
    request_ok(f, "DELETE", "/sum", NULL, 0, 200, NULL, &out_len);
    request_ok(f, "HEAD", "/echo", NULL, 0, 200, &out, &out_len);
    assert_int_equal(out_len, 0);
    mc__free(out);
    free(data);
}

static void test_too_large_body(void **state) {
    fixture_t *f = *state;
    size_t n = MAX_BODY + 1;
    uint8_t *data = calloc(1, n);
    char url[128];
    int status = 0;
    snprintf(url, sizeof(url), "%s/echo", f->base);
    /* The server may answer 413 before reading, then close: either 413 or a send error. */
    int rc = mc__http_request("PUT", url, data, n, 5000, &status, NULL, NULL);
    assert_true((rc == 0 && status == 413) || rc == MC_ERR_SOCKET);
    free(data);
    request_ok(f, "PUT", "/sum", "ok", 2, 200, NULL, NULL);
}

/* Sends raw bytes and returns what the server answered before closing (or timing out). */
static size_t raw_exchange(fixture_t *f, const void *req, size_t n, char *resp, size_t cap,
                           int shut) {
    int fd = mc__tcp_connect("127.0.0.1", mc__http_server_port(f->srv), mc__now_ms() + 2000);
    size_t got = 0;
    assert_true(fd >= 0);
    mc__send_all(fd, req, n, mc__now_ms() + 2000);
    if (shut)
        shutdown(fd, SHUT_WR);
    uint64_t deadline = mc__now_ms() + 3000;
    while (got + 1 < cap && mc__now_ms() < deadline) {
        ssize_t r = recv(fd, resp + got, cap - 1 - got, MSG_DONTWAIT);
        if (r == 0)
            break;
        if (r < 0) {
            usleep(2000);
            continue;
        }
        got += (size_t)r;
    }
    resp[got] = '\0';
    close(fd);
    return got;
}

static void test_bad_requests_keep_server_up(void **state) {
    fixture_t *f = *state;
    static char big[MC_HTTP_MAX_HEAD + 100];
    char resp[4096];
    raw_exchange(f, "\x16\x03\x01\x02\x00garbage\r\n\r\n", 16, resp, sizeof(resp), 0);
    assert_non_null(strstr(resp, "HTTP/1.1 400"));
    memset(big, 'A', sizeof(big));
    memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
    raw_exchange(f, big, sizeof(big), resp, sizeof(resp), 0);
    assert_non_null(strstr(resp, "HTTP/1.1 431"));
    const char *huge = "PUT /echo HTTP/1.1\r\nContent-Length: 99999999999999\r\n\r\n";
    raw_exchange(f, huge, strlen(huge), resp, sizeof(resp), 0);
    assert_non_null(strstr(resp, "HTTP/1.1 413"));
    const char *te = "PUT /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
    raw_exchange(f, te, strlen(te), resp, sizeof(resp), 0);
    assert_non_null(strstr(resp, "HTTP/1.1 501"));
    /* body shorter than announced, then the client hangs up: no response, no crash */
    const char *shortb = "PUT /echo HTTP/1.1\r\nContent-Length: 100\r\n\r\nabc";
    raw_exchange(f, shortb, strlen(shortb), resp, sizeof(resp), 1);
    assert_int_equal(strlen(resp), 0);
    request_ok(f, "GET", "/sum", NULL, 0, 200, NULL, NULL);
}

static void test_keep_alive_pipelining(void **state) {
    fixture_t *f = *state;
    char resp[4096];
    const char *two = "PUT /echo HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"
                      "GET /sum?z=1 HTTP/1.1\r\nConnection: close\r\n\r\n";
    raw_exchange(f, two, strlen(two), resp, sizeof(resp), 0);
    char *second = strstr(resp + 1, "HTTP/1.1 200");
    assert_non_null(strstr(resp, "HTTP/1.1 200 OK\r\n"));
    assert_non_null(strstr(resp, "\r\n\r\nabc"));
    assert_non_null(second);
    assert_non_null(strstr(second, "GET 0 "));
    assert_non_null(strstr(second, "z=1"));
    /* Expect: 100-continue gets the interim response before the body is sent */
    const char *exp = "PUT /echo HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n"
                      "Connection: close\r\n\r\n";
    int fd = mc__tcp_connect("127.0.0.1", mc__http_server_port(f->srv), mc__now_ms() + 2000);
    char buf[26] = {0};
    assert_int_equal(mc__send_all(fd, exp, strlen(exp), 0), 0);
    assert_int_equal(mc__recv_all(fd, buf, 25, mc__now_ms() + 2000), 0);
    assert_string_equal(buf, "HTTP/1.1 100 Continue\r\n\r\n");
    assert_int_equal(mc__send_all(fd, "hi", 2, 0), 0);
    close(fd);
}

static void test_client_errors(void **state) {
    fixture_t *f = *state;
    int status = 0;
    char *out = (char *)1;
    uint16_t port = 0;
    assert_int_equal(mc__http_request("GET", "ftp://x/", NULL, 0, 1000, &status, &out, NULL),
                     MC_ERR_INVALID_ARGUMENT);
    assert_null(out);
    assert_int_equal(mc__http_request("GET", "http://:80/", NULL, 0, 1000, &status, NULL, NULL),
                     MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc__http_request("GET", "http://h:99999/", NULL, 0, 1000, &status, NULL, NULL),
                     MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc__http_request("GET", "http://h/a b", NULL, 0, 1000, &status, NULL, NULL),
                     MC_ERR_INVALID_ARGUMENT);
    /* a server that accepts (via backlog) but never answers: the deadline holds */
    int lfd = mc__tcp_listen("127.0.0.1", 0, 4, &port);
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/x", port);
    uint64_t t0 = mc__now_ms();
    assert_int_equal(mc__http_request("GET", url, NULL, 0, 300, &status, NULL, NULL),
                     MC_ERR_SOCKET);
    assert_true(mc__now_ms() - t0 < 2000);
    close(lfd);
    /* nobody listening */
    assert_int_equal(mc__http_request("GET", url, NULL, 0, 1000, &status, NULL, NULL),
                     MC_ERR_SOCKET);
    (void)f;
}

static void test_stop_with_idle_connection(void **state) {
    mc_http_server_t *s = NULL;
    assert_int_equal(mc__http_server_start("127.0.0.1", 0, 16, handler, NULL, &s), 0);
    int fd = mc__tcp_connect("127.0.0.1", mc__http_server_port(s), mc__now_ms() + 2000);
    assert_true(fd >= 0);
    mc__send_all(fd, "GET /", 5, 0); /* half a request, then silence */
    usleep(50000);
    uint64_t t0 = mc__now_ms();
    mc__http_server_stop(s); /* must not wait for the head timeout */
    assert_true(mc__now_ms() - t0 < 3000);
    close(fd);
    assert_int_equal(mc__http_server_start("256.0.0.1", 0, 16, handler, NULL, &s) < 0, 1);
    assert_int_equal(mc__http_server_start("127.0.0.1", 0, 16, NULL, NULL, &s),
                     MC_ERR_INVALID_ARGUMENT);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_roundtrip_large_body, setup, teardown),
        cmocka_unit_test_setup_teardown(test_too_large_body, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_requests_keep_server_up, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keep_alive_pipelining, setup, teardown),
        cmocka_unit_test_setup_teardown(test_client_errors, setup, teardown),
        cmocka_unit_test(test_stop_with_idle_connection),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
