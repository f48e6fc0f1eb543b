/* HTTP/1.1 request-head parser. It runs on untrusted bytes from any peer that can reach an admin
 * port, so it is strict: CRLF line ends only, no header folding, one Content-Length, no
 * Transfer-Encoding (we never need chunked uploads and it is the classic smuggling vector). */
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "mooncake/common/http.h"

static int mc__is_tchar(int c) {
    return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static int mc__hexval(int c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    c = tolower(c);
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Percent-decodes src[0..n) into out; plus_space turns '+' into ' ' (query values). Rejects bad
 * escapes and NUL bytes. */
static int mc__pct_decode(const char *src, size_t n, int plus_space, char *out, size_t cap) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)src[i];
        if (c == '%') {
            int h, l;
            if (i + 2 >= n)
                return -1;
            h = mc__hexval((unsigned char)src[i + 1]);
            l = mc__hexval((unsigned char)src[i + 2]);
            if (h < 0 || l < 0)
                return -1;
            c = h * 16 + l;
            i += 2;
        } else if (c == '+' && plus_space) {
            c = ' ';
        }
        if (c == 0 || o + 1 >= cap)
            return -1;
        out[o++] = (char)c;
    }
    if (cap == 0)
        return -1;
    out[o] = '\0';
    return 0;
}

static const uint8_t *mc__find_crlfcrlf(const uint8_t *p, size_t n) {
    for (size_t i = 0; i + 3 < n; i++) {
        if (p[i] == '\r' && p[i + 1] == '\n' && p[i + 2] == '\r' && p[i + 3] == '\n')
            return p + i;
    }
    return NULL;
}

/* Validates what we have of the method token early, so a peer sending garbage is refused at
 * once instead of after MC_HTTP_MAX_HEAD bytes or a timeout. */
static int mc__check_method_prefix(const uint8_t *buf, size_t len) {
    size_t i = 0;
    for (; i < len && buf[i] != ' '; i++) {
        if (i >= sizeof(((mc_http_request_t *)0)->method) - 1)
            return -501;
        if (buf[i] < 'A' || buf[i] > 'Z')
            return -400;
    }
    if (i < len && i == 0)
        return -400;
    return 0;
}

static int mc__parse_request_line(const char *l, size_t n, mc_http_request_t *req) {
    const char *sp1 = memchr(l, ' ', n);
    const char *target, *sp2, *q, *ver;
    size_t tlen, plen, qlen;
    if (!sp1 || sp1 == l || (size_t)(sp1 - l) >= sizeof(req->method))
        return -400;
    memcpy(req->method, l, (size_t)(sp1 - l));
    req->method[sp1 - l] = '\0';
    target = sp1 + 1;
    sp2 = memchr(target, ' ', n - (size_t)(target - l));
    if (!sp2 || sp2 == target || *target != '/')
        return -400;
    ver = sp2 + 1;
    if ((size_t)(l + n - ver) != 8 || memcmp(ver, "HTTP/1.", 7) != 0)
        return -400;
    if (ver[7] == '1')
        req->keep_alive = 1;
    else if (ver[7] == '0')
        req->keep_alive = 0;
    else
        return -505;
    tlen = (size_t)(sp2 - target);
    for (size_t i = 0; i < tlen; i++) {
        if ((unsigned char)target[i] <= 0x20 || (unsigned char)target[i] >= 0x7f)
            return -400;
    }
    req->target_off = (size_t)(target - l);
    req->target_len = tlen;
    q = memchr(target, '?', tlen);
    plen = q ? (size_t)(q - target) : tlen;
    qlen = q ? tlen - plen - 1 : 0;
    if (plen >= sizeof(req->path) || qlen >= sizeof(req->query))
        return -414;
    if (mc__pct_decode(target, plen, 0, req->path, sizeof(req->path)) != 0)
        return -400;
    memcpy(req->query, q ? q + 1 : "", qlen);
    req->query[qlen] = '\0';
    return 0;
}

static int mc__header_has_token(const char *v, size_t n, const char *tok) {
    size_t tl = strlen(tok);
    size_t i = 0;
    while (i < n) {
        size_t s, e;
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
            i++;
        s = i;
        while (i < n && v[i] != ',')
            i++;
        e = i;
        while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
            e--;
        if (e - s == tl && strncasecmp(v + s, tok, tl) == 0)
            return 1;
    }
    return 0;
}

static int mc__parse_header(const char *l, size_t n, size_t max_body, int *have_cl,
                            mc_http_request_t *req) {
    const char *colon = memchr(l, ':', n);
    const char *v;
    size_t nl, vl;
    if (!colon || colon == l)
        return -400;
    nl = (size_t)(colon - l);
    for (size_t i = 0; i < nl; i++) {
        if (!mc__is_tchar((unsigned char)l[i]))
            return -400;
    }
    v = colon + 1;
    vl = n - nl - 1;
    while (vl && (*v == ' ' || *v == '\t')) {
        v++;
        vl--;
    }
    while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
        vl--;
    for (size_t i = 0; i < vl; i++) {
        if (v[i] == 0 || v[i] == '\r' || v[i] == '\n')
            return -400;
    }
    if (nl == 14 && strncasecmp(l, "content-length", nl) == 0) {
        size_t cl = 0;
        if (vl == 0)
            return -400;
        for (size_t i = 0; i < vl; i++) {
            if (v[i] < '0' || v[i] > '9')
                return -400;
            size_t d = (size_t)(v[i] - '0');
            if (cl > max_body / 10 || d > max_body - cl * 10)
                return -413;
            cl = cl * 10 + d;
        }
        if (*have_cl && cl != req->content_length)
            return -400;
        *have_cl = 1;
        req->content_length = cl;
    } else if (nl == 13 && strncasecmp(l, "authorization", nl) == 0) {
        if (vl < sizeof(req->authorization)) {
            memcpy(req->authorization, v, vl);
            req->authorization[vl] = '\0';
        }
    } else if (nl == 17 && strncasecmp(l, "transfer-encoding", nl) == 0) {
        return -501;
    } else if (nl == 10 && strncasecmp(l, "connection", nl) == 0) {
        if (mc__header_has_token(v, vl, "close"))
            req->keep_alive = 0;
        else if (mc__header_has_token(v, vl, "keep-alive"))
            req->keep_alive = 1;
    }
    return 0;
}

int mc__http_parse_request(const uint8_t *buf, size_t len, size_t max_body,
                           mc_http_request_t *req) {
    const uint8_t *end = NULL;
    const char *p, *stop;
    int have_cl = 0;
    int rc;
    memset(req, 0, sizeof(*req));
    rc = mc__check_method_prefix(buf, len);
    if (rc)
        return rc;
    end = mc__find_crlfcrlf(buf, len < MC_HTTP_MAX_HEAD ? len : MC_HTTP_MAX_HEAD);
    if (!end)
        return len >= MC_HTTP_MAX_HEAD ? -431 : 0;
    if (memchr(buf, '\0', (size_t)(end - buf)))
        return -400;
    req->head_len = (size_t)(end - buf) + 4;
    p = (const char *)buf;
    stop = (const char *)end + 2; /* every line, including the last header, ends in CRLF */
    for (int first = 1; p < stop; first = 0) {
        const char *nl = memchr(p, '\n', (size_t)(stop - p));
        size_t n;
        if (!nl || nl == p || nl[-1] != '\r')
            return -400;
        n = (size_t)(nl - 1 - p);
        if (memchr(p, '\r', n))
            return -400;
        if (first) {
            rc = mc__parse_request_line(p, n, req);
        } else {
            if (*p == ' ' || *p == '\t')
                return -400; /* obsolete line folding */
            rc = mc__parse_header(p, n, max_body, &have_cl, req);
        }
        if (rc)
            return rc;
        p = nl + 1;
    }
    return 1;
}

int mc__http_query_get(const char *query, const char *key, char *out, size_t cap) {
    size_t kl;
    const char *p = query;
    if (!query || !key || !out || cap == 0)
        return -1;
    kl = strlen(key);
    while (*p) {
        const char *amp = strchr(p, '&');
        size_t n = amp ? (size_t)(amp - p) : strlen(p);
        if (n >= kl && strncmp(p, key, kl) == 0 && (n == kl || p[kl] == '=')) {
            const char *v = n == kl ? p + n : p + kl + 1;
            size_t vl = n == kl ? 0 : n - kl - 1;
            return mc__pct_decode(v, vl, 1, out, cap);
        }
        p += n;
        if (*p == '&')
            p++;
    }
    return -1;
}

int mc__http_url_encode(const char *s, char *out, size_t cap) {
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    if (!s || !out || cap == 0)
        return -1;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
            if (o + 1 >= cap)
                return -1;
            out[o++] = (char)c;
        } else {
            if (o + 3 >= cap)
                return -1;
            out[o++] = '%';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    out[o] = '\0';
    return 0;
}
