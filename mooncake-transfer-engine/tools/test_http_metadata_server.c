/* Runs mooncake_http_metadata_server as a real process and talks to it over real sockets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/http.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "mooncake/common/version.h"

static const char *g_bin; /* path of the binary under test, from argv */

typedef struct {
    pid_t pid;
    uint16_t port;
    char base[64];
} server_t;

/* Runs the binary with args; captures stdout into out (if given) and returns the exit status. */
static int run_to_exit(char *const args[], char *out, size_t cap) {
    int p[2];
    pid_t pid;
    int st = 0;
    size_t got = 0;
    assert_int_equal(pipe(p), 0);
    pid = fork();
    if (pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        execv(g_bin, args);
        _exit(127);
    }
    close(p[1]);
    for (;;) {
        ssize_t r = read(p[0], out ? out + got : (char[256]){0}, out ? cap - 1 - got : 256);
        if (r <= 0)
            break;
        if (out)
            got += (size_t)r;
        if (out && got + 1 >= cap)
            break;
    }
    if (out)
        out[got] = '\0';
    close(p[0]);
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void server_start(server_t *s) {
    int p[2];
    char line[256] = {0};
    size_t got = 0;
    assert_int_equal(pipe(p), 0);
    s->pid = fork();
    if (s->pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        execl(g_bin, g_bin, "--host=127.0.0.1", "--port", "0", (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    while (got + 1 < sizeof(line) && !strchr(line, '\n')) {
        ssize_t r = read(p[0], line + got, sizeof(line) - 1 - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(p[0]);
    unsigned port = 0;
    assert_int_equal(sscanf(line, "listening on 127.0.0.1:%u", &port), 1);
    assert_true(port > 0 && port < 65536);
    s->port = (uint16_t)port;
    snprintf(s->base, sizeof(s->base), "http://127.0.0.1:%u", port);
}

static void server_stop(server_t *s, int sig) {
    int st = 0;
    uint64_t deadline = mc__now_ms() + 5000;
    kill(s->pid, sig);
    while (waitpid(s->pid, &st, WNOHANG) == 0) {
        if (mc__now_ms() > deadline) {
            kill(s->pid, SIGKILL);
            waitpid(s->pid, &st, 0);
            fail_msg("server did not exit on signal %d", sig);
        }
        usleep(10000);
    }
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

static int req(server_t *s, const char *method, const char *path, const void *body, size_t n,
               char **out, size_t *out_len) {
    char url[512];
    int status = 0;
    snprintf(url, sizeof(url), "%s%s", s->base, path);
    assert_int_equal(mc__http_request(method, url, body, n, 5000, &status, out, out_len), 0);
    return status;
}

static uint64_t checksum(const void *v, size_t n) {
    const uint8_t *p = v;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static void test_put_get_delete(void **state) {
    server_t s;
    char *out = NULL;
    size_t len = 0;
    size_t n = 1u << 20;
    uint8_t *val = malloc(n);
    char path[256], enc[128];
    for (size_t i = 0; i < n; i++)
        val[i] = (uint8_t)(i ^ (i >> 8) ^ 0x5a);
    server_start(&s);
    assert_int_equal(mc__http_url_encode("mooncake/ram/node 1:12345", enc, sizeof(enc)), 0);
    snprintf(path, sizeof(path), "/metadata?key=%s", enc);
    assert_int_equal(req(&s, "GET", path, NULL, 0, &out, NULL), 404);
    assert_string_equal(out, "metadata not found");
    mc__free(out);
    assert_int_equal(req(&s, "PUT", path, val, n, &out, NULL), 200);
    assert_string_equal(out, "metadata updated");
    mc__free(out);
    assert_int_equal(req(&s, "GET", path, NULL, 0, &out, &len), 200);
    assert_int_equal(len, n);
    assert_true(checksum(out, len) == checksum(val, n));
    mc__free(out);
    /* overwrite with something shorter */
    assert_int_equal(req(&s, "PUT", path, "{\"v\":2}", 7, NULL, NULL), 200);
    assert_int_equal(req(&s, "GET", path, NULL, 0, &out, &len), 200);
    assert_string_equal(out, "{\"v\":2}");
    mc__free(out);
    /* an empty value is a value */
    assert_int_equal(req(&s, "PUT", "/metadata?key=empty", NULL, 0, NULL, NULL), 200);
    assert_int_equal(req(&s, "GET", "/metadata?key=empty", NULL, 0, NULL, &len), 200);
    assert_int_equal(len, 0);
    assert_int_equal(req(&s, "DELETE", path, NULL, 0, NULL, NULL), 200);
    assert_int_equal(req(&s, "DELETE", path, NULL, 0, NULL, NULL), 404);
    assert_int_equal(req(&s, "GET", path, NULL, 0, NULL, NULL), 404);
    /* many keys survive a table resize */
    for (int i = 0; i < 500; i++) {
        char p2[64], v[32];
        snprintf(p2, sizeof(p2), "/metadata?key=k%d", i);
        snprintf(v, sizeof(v), "v%d", i * 7);
        assert_int_equal(req(&s, "PUT", p2, v, strlen(v), NULL, NULL), 200);
    }
    for (int i = 0; i < 500; i += 37) {
        char p2[64], v[32];
        snprintf(p2, sizeof(p2), "/metadata?key=k%d", i);
        snprintf(v, sizeof(v), "v%d", i * 7);
        assert_int_equal(req(&s, "GET", p2, NULL, 0, &out, NULL), 200);
        assert_string_equal(out, v);
        mc__free(out);
    }
    server_stop(&s, SIGTERM);
    free(val);
}

static void test_bad_http_requests(void **state) {
    server_t s;
    server_start(&s);
    assert_int_equal(req(&s, "GET", "/metadata", NULL, 0, NULL, NULL), 400);
    assert_int_equal(req(&s, "GET", "/metadata?key=", NULL, 0, NULL, NULL), 400);
    assert_int_equal(req(&s, "GET", "/metadata?other=1", NULL, 0, NULL, NULL), 400);
    assert_int_equal(req(&s, "GET", "/metadata?key=%zz", NULL, 0, NULL, NULL), 400);
    assert_int_equal(req(&s, "GET", "/elsewhere?key=a", NULL, 0, NULL, NULL), 404);
    assert_int_equal(req(&s, "POST", "/metadata?key=a", "x", 1, NULL, NULL), 405);
    assert_int_equal(req(&s, "PATCH", "/metadata?key=a", "x", 1, NULL, NULL), 405);
    /* oversized value: 413, or the server closes before reading it all */
    size_t big = (16u << 20) + 1;
    char *v = calloc(1, big);
    char url[128];
    int status = 0;
    snprintf(url, sizeof(url), "%s/metadata?key=big", s.base);
    int rc = mc__http_request("PUT", url, v, big, 10000, &status, NULL, NULL);
    assert_true((rc == 0 && status == 413) || rc < 0);
    free(v);
    assert_int_equal(req(&s, "GET", "/metadata?key=big", NULL, 0, NULL, NULL), 404);
    assert_int_equal(req(&s, "PUT", "/metadata?key=after", "ok", 2, NULL, NULL), 200);
    server_stop(&s, SIGINT);
}

/* Sends raw bytes and returns what came back before the server closed or 3 s passed. */
static void raw(server_t *s, const void *p, size_t n, char *resp, size_t cap) {
    int fd = mc__tcp_connect("127.0.0.1", s->port, mc__now_ms() + 2000);
    size_t got = 0;
    uint64_t deadline = mc__now_ms() + 3000;
    assert_true(fd >= 0);
    mc__send_all(fd, p, n, mc__now_ms() + 2000);
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
}

static void test_raw_garbage(void **state) {
    server_t s;
    char resp[2048];
    static char head[MC_HTTP_MAX_HEAD + 512];
    server_start(&s);
    raw(&s, "\x00\x01\x02\x03garbage\r\n\r\n", 15, resp, sizeof(resp));
    assert_non_null(strstr(resp, "HTTP/1.1 400"));
    assert_int_equal(req(&s, "PUT", "/metadata?key=a", "1", 1, NULL, NULL), 200);
    memset(head, 'h', sizeof(head));
    memcpy(head, "GET /metadata?key=a HTTP/1.1\r\nX: ", 33);
    raw(&s, head, sizeof(head), resp, sizeof(resp));
    assert_non_null(strstr(resp, "HTTP/1.1 431"));
    const char *huge =
        "PUT /metadata?key=a HTTP/1.1\r\nContent-Length: 18446744073709551615\r\n\r\n";
    raw(&s, huge, strlen(huge), resp, sizeof(resp));
    assert_non_null(strstr(resp, "HTTP/1.1 413"));
    const char *ver = "GET /metadata?key=a HTTP/3.0\r\n\r\n";
    raw(&s, ver, strlen(ver), resp, sizeof(resp));
    assert_non_null(strstr(resp, "HTTP/1.1 400"));
    /* the value stored before all this is intact */
    char *out = NULL;
    assert_int_equal(req(&s, "GET", "/metadata?key=a", NULL, 0, &out, NULL), 200);
    assert_string_equal(out, "1");
    mc__free(out);
    server_stop(&s, SIGTERM);
}

static void test_command_line(void **state) {
    char out[4096];
    char want[128];
    char *version[] = {(char *)g_bin, "--version", NULL};
    char *help[] = {(char *)g_bin, "--help", NULL};
    char *bad[] = {(char *)g_bin, "--bogus", NULL};
    char *badport[] = {(char *)g_bin, "--port=70000", NULL};
    char *notnum[] = {(char *)g_bin, "--port=http", NULL};
    char *positional[] = {(char *)g_bin, "8080", NULL};
    assert_int_equal(run_to_exit(version, out, sizeof(out)), 0);
    snprintf(want, sizeof(want), "mooncake_http_metadata_server %s\n", MC_VERSION_STRING);
    assert_string_equal(out, want);
    assert_int_equal(run_to_exit(help, out, sizeof(out)), 0);
    assert_non_null(strstr(out, "--host"));
    assert_non_null(strstr(out, "--port"));
    assert_int_equal(run_to_exit(bad, NULL, 0), 2);
    assert_int_equal(run_to_exit(badport, NULL, 0), 2);
    assert_int_equal(run_to_exit(notnum, NULL, 0), 2);
    assert_int_equal(run_to_exit(positional, NULL, 0), 2);
    /* a port already taken: exits non-zero with a message, does not hang */
    uint16_t port = 0;
    int lfd = mc__tcp_listen("127.0.0.1", 0, 4, &port);
    char portflag[32];
    snprintf(portflag, sizeof(portflag), "--port=%u", port);
    char *taken[] = {(char *)g_bin, "--host=127.0.0.1", portflag, NULL};
    assert_int_equal(run_to_exit(taken, NULL, 0), 1);
    close(lfd);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_get_delete),
        cmocka_unit_test(test_bad_http_requests),
        cmocka_unit_test(test_raw_garbage),
        cmocka_unit_test(test_command_line),
    };
    if (argc < 2) {
        fprintf(stderr, "usage: %s <path to mooncake_http_metadata_server>\n", argv[0]);
        return 2;
    }
    g_bin = argv[1];
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
