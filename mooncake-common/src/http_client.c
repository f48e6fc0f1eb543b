/* Blocking HTTP/1.1 client for metadata and admin calls: one request per connection
 * (Connection: close), the whole exchange bounded by one deadline. Understands Content-Length,
 * chunked and read-to-close bodies, since metadata servers of the reference (Go, Python) use all
 * three. */
#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/auth.h"
#include "mooncake/common/frame.h"
#include "mooncake/common/http.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"

#define MC__HTTP_CLIENT_MAX_HEAD 65536
#define MC__HTTP_CLIENT_MAX_BODY (1024u * 1024u * 1024u)

typedef struct mc__http_url {
    char host[256];
    uint16_t port;
    const char *target; /* points into the url: "/path?query" */
} mc__http_url_t;

static int mc__http_parse_url(const char *url, mc__http_url_t *u) {
    const char *hp, *slash;
    char hostport[300];
    size_t n;
    if (strncasecmp(url, "http://", 7) != 0)
        return MC_ERR_INVALID_ARGUMENT;
    hp = url + 7;
    slash = strchr(hp, '/');
    n = slash ? (size_t)(slash - hp) : strlen(hp);
    if (n == 0 || n >= sizeof(hostport) - 4)
        return MC_ERR_INVALID_ARGUMENT;
    memcpy(hostport, hp, n);
    hostport[n] = '\0';
    u->target = slash ? slash : "/";
    for (const char *t = u->target; *t; t++) {
        if ((unsigned char)*t <= 0x20 || (unsigned char)*t >= 0x7f)
            return MC_ERR_INVALID_ARGUMENT;
    }
    /* No port: default 80, unless the host is a bare IPv6 literal in brackets. */
    if (mc__split_host_port(hostport, u->host, sizeof(u->host), &u->port) == 0)
        return 0;
    if (strchr(hostport, ':') && hostport[0] != '[')
        return MC_ERR_INVALID_ARGUMENT;
    if (hostport[0] == '[') {
        if (hostport[n - 1] != ']' || n - 2 >= sizeof(u->host))
            return MC_ERR_INVALID_ARGUMENT;
        memcpy(u->host, hostport + 1, n - 2);
        u->host[n - 2] = '\0';
    } else {
        if (n >= sizeof(u->host))
            return MC_ERR_INVALID_ARGUMENT;
        memcpy(u->host, hostport, n + 1);
    }
    u->port = 80;
    return 0;
}

/* Reads more bytes into b; 1 got some, 0 EOF, negative error/timeout. */
static int mc__http_fill(int fd, mc_buf_t *b, uint64_t deadline) {
    ssize_t r;
    if (mc__buf_reserve(b, 16384) != 0)
        return MC_ERR_MEMORY;
    for (;;) {
        if (mc__wait_fd(fd, POLLIN, deadline) != 0)
            return MC_ERR_SOCKET;
        r = recv(fd, b->data + b->len, b->cap - b->len, MSG_DONTWAIT);
        if (r > 0) {
            b->len += (size_t)r;
            return 1;
        }
        if (r == 0)
            return 0;
        if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)
            return MC_ERR_SOCKET;
    }
}

static const char *mc__memmem_crlf2(const uint8_t *p, size_t n) {
    for (size_t i = 0; i + 3 < n; i++) {
        if (!memcmp(p + i, "\r\n\r\n", 4))
            return (const char *)p + i;
    }
    return NULL;
}

/* Reads until a blank line ends the response head. Returns head length or negative. */
static int mc__http_read_head(int fd, mc_buf_t *b, uint64_t deadline, size_t *head_len) {
    for (;;) {
        const char *e = mc__memmem_crlf2(b->data, b->len);
        int r;
        if (e) {
            *head_len = (size_t)(e - (const char *)b->data) + 4;
            return 0;
        }
        if (b->len > MC__HTTP_CLIENT_MAX_HEAD)
            return MC_ERR_SOCKET;
        r = mc__http_fill(fd, b, deadline);
        if (r <= 0)
            return r == 0 ? MC_ERR_SOCKET : r;
    }
}

/* Finds a header value in the head (lines after the status line). */
static const char *mc__http_find_header(const char *head, size_t n, const char *name,
                                        size_t *vlen) {
    size_t nl = strlen(name);
    const char *p = memchr(head, '\n', n);
    const char *end = head + n;
    while (p && p + 1 < end) {
        const char *line = p + 1;
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        if (!eol)
            break;
        if ((size_t)(eol - line) > nl && !strncasecmp(line, name, nl) && line[nl] == ':') {
            const char *v = line + nl + 1;
            const char *ve = eol;
            while (v < ve && (*v == ' ' || *v == '\t'))
                v++;
            while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            *vlen = (size_t)(ve - v);
            return v;
        }
        p = eol;
    }
    return NULL;
}

/* Ensures b holds at least need bytes from off (reading more as required). */
static int mc__http_need(int fd, mc_buf_t *b, size_t need, uint64_t deadline) {
    while (b->len < need) {
        int r = mc__http_fill(fd, b, deadline);
        if (r <= 0)
            return r == 0 ? MC_ERR_SOCKET : r;
    }
    return 0;
}

/* Decodes a chunked body starting at off in b into out. */
static int mc__http_read_chunked(int fd, mc_buf_t *b, size_t off, uint64_t deadline,
                                 size_t max_body, mc_buf_t *out) {
    for (;;) {
        uint64_t sz = 0;
        const uint8_t *nl;
        int rc;
        while (!(nl = memchr(b->data + off, '\n', b->len - off))) {
            if (b->len - off > 1024)
                return MC_ERR_SOCKET;
            if ((rc = mc__http_need(fd, b, b->len + 1, deadline)) != 0)
                return rc;
        }
        size_t i = off;
        int digits = 0;
        for (; i < (size_t)(nl - b->data) && isxdigit(b->data[i]); i++, digits++) {
            int c = tolower(b->data[i]);
            sz = sz * 16 + (uint64_t)(c <= '9' ? c - '0' : c - 'a' + 10);
            if (sz > max_body)
                return MC_ERR_BUFFER_OVERFLOW;
        }
        if (!digits)
            return MC_ERR_SOCKET;
        off = (size_t)(nl - b->data) + 1;
        if (sz == 0)
            return 0; /* trailers are ignored: the connection closes after this response */
        if (out->len + sz > max_body)
            return MC_ERR_BUFFER_OVERFLOW;
        if ((rc = mc__http_need(fd, b, off + sz + 2, deadline)) != 0)
            return rc;
        if (mc__buf_put(out, b->data + off, sz) != 0)
            return MC_ERR_MEMORY;
        off += sz + 2;
    }
}

/* One exchange; authz (may be NULL) is an Authorization header value; challenge (may be NULL,
 * 64 bytes) receives a 401's "MC-HMAC nonce=" hex nonce, or "". */
static int mc__http_exchange(const char *method, const char *url, const void *body, size_t body_len,
                             int timeout_ms, const char *authz, int *status, char **resp_body,
                             size_t *resp_len, char *challenge, size_t max_body, int *sent) {
    mc__http_url_t u;
    mc_buf_t req, in, out;
    uint64_t deadline = timeout_ms > 0 ? mc__now_ms() + (uint64_t)timeout_ms : 0;
    size_t head_len = 0;
    size_t vl = 0;
    const char *v;
    int fd = -1;
    int rc = MC_ERR_INVALID_ARGUMENT;
    int code = 0;
    int no_body;
    mc__buf_init(&req);
    mc__buf_init(&in);
    mc__buf_init(&out);
    if (!max_body || max_body > MC__HTTP_CLIENT_MAX_BODY)
        max_body = MC__HTTP_CLIENT_MAX_BODY;
    if (resp_body)
        *resp_body = NULL;
    if (resp_len)
        *resp_len = 0;
    if (!method || !url || !status || (body_len && !body) || strlen(method) > 7 ||
        mc__http_parse_url(url, &u) != 0)
        goto out;
    {
        char head[1024];
        int with_len = body_len || !strcmp(method, "PUT") || !strcmp(method, "POST");
        int n =
            snprintf(head, sizeof(head), "%s %s HTTP/1.1\r\nHost: %s:%u\r\nConnection: close\r\n",
                     method, u.target, u.host, (unsigned)u.port);
        if (n < 0 || (size_t)n >= sizeof(head) - 64)
            goto out;
        if (with_len)
            n += snprintf(head + n, sizeof(head) - (size_t)n, "Content-Length: %zu\r\n", body_len);
        if (authz && strlen(authz) < 256)
            n += snprintf(head + n, sizeof(head) - (size_t)n, "Authorization: %s\r\n", authz);
        n += snprintf(head + n, sizeof(head) - (size_t)n, "\r\n");
        if (mc__buf_put(&req, head, (size_t)n) != 0) {
            rc = MC_ERR_MEMORY;
            goto out;
        }
    }
    rc = mc__tcp_connect(u.host, u.port, deadline);
    if (rc < 0)
        goto out;
    fd = rc;
    if (sent)
        *sent = 1;
    rc = mc__send2(fd, req.data, req.len, body, body_len, deadline);
    if (rc)
        goto out;
    for (;;) {
        rc = mc__http_read_head(fd, &in, deadline, &head_len);
        if (rc)
            goto out;
        rc = MC_ERR_SOCKET;
        if (in.len < 12 || memcmp(in.data, "HTTP/1.", 7) != 0 || !isdigit(in.data[9]) ||
            !isdigit(in.data[10]) || !isdigit(in.data[11]))
            goto out;
        code = (in.data[9] - '0') * 100 + (in.data[10] - '0') * 10 + (in.data[11] - '0');
        if (code >= 200 || code < 100)
            break;
        /* An interim 1xx response: drop it and read the real one. */
        memmove(in.data, in.data + head_len, in.len - head_len);
        in.len -= head_len;
    }
    if (challenge) {
        static const char pfx[] = "MC-HMAC nonce=";
        challenge[0] = '\0';
        v = code == 401
                ? mc__http_find_header((const char *)in.data, head_len, "www-authenticate", &vl)
                : NULL;
        if (v && vl == sizeof(pfx) - 1 + 32 && !strncmp(v, pfx, sizeof(pfx) - 1)) {
            memcpy(challenge, v + sizeof(pfx) - 1, 32);
            challenge[32] = '\0';
        }
    }
    no_body = !strcmp(method, "HEAD") || code == 204 || code == 304;
    if (no_body) {
        rc = 0;
    } else if ((v = mc__http_find_header((const char *)in.data, head_len, "transfer-encoding",
                                         &vl)) &&
               vl >= 7 && !strncasecmp(v + vl - 7, "chunked", 7)) {
        rc = mc__http_read_chunked(fd, &in, head_len, deadline, max_body, &out);
    } else if ((v = mc__http_find_header((const char *)in.data, head_len, "content-length", &vl))) {
        char tmp[24];
        char *e = NULL;
        unsigned long long cl;
        if (vl == 0 || vl >= sizeof(tmp))
            goto out;
        memcpy(tmp, v, vl);
        tmp[vl] = '\0';
        errno = 0;
        cl = strtoull(tmp, &e, 10);
        if (errno || *e || !isdigit((unsigned char)tmp[0]))
            goto out;
        if (cl > max_body) {
            rc = MC_ERR_BUFFER_OVERFLOW;
            goto out;
        }
        rc = mc__http_need(fd, &in, head_len + cl, deadline);
        if (rc == 0)
            rc = mc__buf_put(&out, in.data + head_len, cl);
    } else {
        int r;
        while ((r = mc__http_fill(fd, &in, deadline)) > 0) {
            if (in.len - head_len > max_body) {
                r = MC_ERR_BUFFER_OVERFLOW;
                break;
            }
        }
        rc = r < 0 ? r : mc__buf_put(&out, in.data + head_len, in.len - head_len);
    }
    if (rc)
        goto out;
    if (mc__buf_u8(&out, 0) != 0) {
        rc = MC_ERR_MEMORY;
        goto out;
    }
    *status = code;
    if (resp_len)
        *resp_len = out.len - 1;
    if (resp_body) {
        *resp_body = (char *)out.data;
        mc__buf_init(&out);
    }
    rc = 0;
out:
    if (fd >= 0)
        close(fd);
    mc__buf_free(&req);
    mc__buf_free(&in);
    mc__buf_free(&out);
    return rc;
}

int mc__http_request(const char *method, const char *url, const void *body, size_t body_len,
                     int timeout_ms, int *status, char **resp_body, size_t *resp_len) {
    return mc__http_exchange(method, url, body, body_len, timeout_ms, NULL, status, resp_body,
                             resp_len, NULL, 0, NULL);
}

int mc__http_request_ex(const char *method, const char *url, const void *body, size_t body_len,
                        int timeout_ms, size_t max_body, int *status, char **resp_body,
                        size_t *resp_len, int *sent) {
    if (sent)
        *sent = 0;
    return mc__http_exchange(method, url, body, body_len, timeout_ms, NULL, status, resp_body,
                             resp_len, NULL, max_body, sent);
}

int mc__http_request_auth(const struct mc_auth *a, const char *method, const char *url,
                          const void *body, size_t body_len, int timeout_ms, int *status,
                          char **resp_body, size_t *resp_len) {
    char challenge[64];
    char authz[160];
    char mac_hex[2 * MC_AUTH_MAC + 1];
    uint8_t nonce[MC_AUTH_NONCE], mac[MC_AUTH_MAC];
    mc__http_url_t u;
    int rc;
    if (!a || !a->enabled)
        return mc__http_request(method, url, body, body_len, timeout_ms, status, resp_body,
                                resp_len);
    rc = mc__http_exchange(method, url, body, body_len, timeout_ms, NULL, status, resp_body,
                           resp_len, challenge, 0, NULL);
    if (rc || *status != 401 || !challenge[0])
        return rc; /* served without a challenge (a server without a secret), or failed */
    if (resp_body) {
        mc__free(*resp_body);
        *resp_body = NULL;
    }
    if (mc__http_parse_url(url, &u) != 0 || mc__auth_unhex(challenge, MC_AUTH_NONCE, nonce) ||
        mc__auth_http_mac(a, nonce, method, u.target, strlen(u.target), body, body_len, mac))
        return MC_ERR_INVALID_ARGUMENT;
    mc__auth_hex(mac, sizeof(mac), mac_hex);
    snprintf(authz, sizeof(authz), "MC-HMAC nonce=%s, mac=%s", challenge, mac_hex);
    return mc__http_exchange(method, url, body, body_len, timeout_ms, authz, status, resp_body,
                             resp_len, NULL, 0, NULL);
}
