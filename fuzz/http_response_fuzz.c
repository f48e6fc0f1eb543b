/* Fuzzes the HTTP client's response parsing (status line, interim 1xx responses, Content-Length,
 * chunked and read-to-close bodies). The parser reads from its socket as it goes and has no
 * entry point without I/O, so the harness runs the real client, mc__http_request, against a
 * loopback server thread that answers every request with the fuzz input and closes.
 *
 * Input: one byte choosing the method (GET, HEAD, PUT with a body, DELETE), then the response
 * bytes exactly as the server sends them. */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/http.h"
#include "mooncake/common/sock.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int g_lfd = -1;
static uint16_t g_port;
static const uint8_t *g_resp;
static size_t g_resp_len;
static sem_t g_served;

/* One connection: read the request head, send the response, close our side of it, then wait
 * for the client to close (so the response is never cut short by a reset). */
static void mc__fuzz_serve_one(int fd) {
    char req[4096];
    size_t have = 0;
    size_t off = 0;
    for (;;) {
        ssize_t r = recv(fd, req + have, sizeof(req) - 1 - have, 0);
        if (r <= 0)
            break;
        have += (size_t)r;
        req[have] = '\0';
        if (strstr(req, "\r\n\r\n") || have == sizeof(req) - 1)
            break;
    }
    while (off < g_resp_len) {
        ssize_t w = send(fd, g_resp + off, g_resp_len - off, MSG_NOSIGNAL);
        if (w <= 0)
            break; /* the client gave up early (e.g. a head over its limit) */
        off += (size_t)w;
    }
    shutdown(fd, SHUT_WR);
    while (recv(fd, req, sizeof(req), 0) > 0)
        ;
}

static void *mc__fuzz_server_main(void *arg) {
    (void)arg;
    for (;;) {
        int fd = mc__accept(g_lfd);
        if (fd < 0)
            continue;
        mc__fuzz_serve_one(fd);
        close(fd);
        sem_post(&g_served);
    }
    return NULL;
}

static void mc__fuzz_start_server(void) {
    pthread_t t;
    g_lfd = mc__tcp_listen("127.0.0.1", 0, 16, &g_port);
    if (g_lfd < 0 || sem_init(&g_served, 0, 0) != 0 ||
        pthread_create(&t, NULL, mc__fuzz_server_main, NULL) != 0)
        abort();
    pthread_detach(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *const methods[] = {"GET", "HEAD", "PUT", "DELETE"};
    static const char put_body[] = "{\"name\":\"fuzz\"}";
    const char *method;
    char url[64];
    char *body = NULL;
    size_t len = 0;
    int status = 0;
    uint8_t *resp = NULL;
    int rc;
    if (size < 1)
        return 0;
    if (g_lfd < 0)
        mc__fuzz_start_server();
    method = methods[data[0] & 3];
    /* a heap copy of exactly the response, what the server thread sends */
    resp = malloc(size - 1 ? size - 1 : 1);
    memcpy(resp, data + 1, size - 1);
    g_resp = resp;
    g_resp_len = size - 1;
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/metadata?key=fuzz", (unsigned)g_port);
    rc = mc__http_request(method, url, method[0] == 'P' ? put_body : NULL,
                          method[0] == 'P' ? sizeof(put_body) - 1 : 0, 5000, &status, &body, &len);
    /* The server thread is done with this input before it is freed or replaced. It always
     * is within moments (the client closed); a client that never connected would hang here. */
    {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 30;
        while (sem_timedwait(&g_served, &until) != 0) {
            if (errno != EINTR) {
                fprintf(stderr, "http_response_fuzz: no connection reached the server (rc %d)\n",
                        rc);
                abort();
            }
        }
    }
    if (rc == 0) {
        /* a 3-digit status; a body no larger than what was sent (chunked framing only shrinks
         * it), NUL-terminated; none for HEAD */
        if (status < 0 || status > 999 || (status >= 100 && status < 200) || !body ||
            len > size - 1 || body[len] != '\0' || (!strcmp(method, "HEAD") && len != 0))
            abort();
    } else if (body || len) {
        abort();
    }
    mc__free(body);
    free(resp);
    return 0;
}
