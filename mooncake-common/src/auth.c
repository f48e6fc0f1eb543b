#include "mooncake/common/auth.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/config.h"
#include "mooncake/common/frame.h"
#include "mooncake/common/log.h"
#include "mooncake/common/random.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"

/* The two libcrypto entry points we use; both have had this signature since OpenSSL 1.1. */
typedef const void *(*mc__evp_md_fn)(void);
typedef unsigned char *(*mc__hmac_fn)(const void *md, const void *key, int key_len,
                                      const unsigned char *d, size_t n, unsigned char *out,
                                      unsigned int *out_len);

static pthread_once_t mc__crypto_once = PTHREAD_ONCE_INIT;
static mc__evp_md_fn mc__sha256;
static mc__hmac_fn mc__hmac;

static void mc__crypto_load(void) {
    static const char *const names[] = {"libcrypto.so.3", "libcrypto.so.1.1", "libcrypto.so"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!h)
            continue;
        mc__sha256 = (mc__evp_md_fn)dlsym(h, "EVP_sha256");
        mc__hmac = (mc__hmac_fn)dlsym(h, "HMAC");
        if (mc__sha256 && mc__hmac)
            return; /* kept loaded for the life of the process */
        mc__sha256 = NULL;
        mc__hmac = NULL;
        dlclose(h);
    }
}

static int mc__read_secret_file(const char *path, mc_auth_t *a) {
    FILE *f = fopen(path, "rb");
    size_t n;
    int extra;
    if (!f) {
        MC_ERROR("cluster secret file %s: %s", path, strerror(errno));
        return MC_ERR_INVALID_ARGUMENT;
    }
    n = fread(a->key, 1, sizeof(a->key), f);
    extra = fgetc(f) != EOF;
    fclose(f);
    if (extra) {
        MC_ERROR("cluster secret file %s: longer than %u bytes", path, MC_AUTH_MAX_SECRET);
        return MC_ERR_INVALID_ARGUMENT;
    }
    while (n && (a->key[n - 1] == '\n' || a->key[n - 1] == '\r' || a->key[n - 1] == ' ' ||
                 a->key[n - 1] == '\t'))
        n--;
    a->len = n;
    return 0;
}

int mc__auth_init(mc_auth_t *a, const char *secret, const char *secret_file) {
    const char *file = secret_file;
    int rc = 0;
    memset(a, 0, sizeof(*a));
    if ((!secret || !*secret) && (!file || !*file)) {
        secret = getenv("MC_CLUSTER_SECRET");
        file = getenv("MC_CLUSTER_SECRET_FILE");
    }
    if (secret && *secret) {
        size_t n = strlen(secret);
        if (n > MC_AUTH_MAX_SECRET) {
            MC_ERROR("cluster secret longer than %u bytes", MC_AUTH_MAX_SECRET);
            return MC_ERR_INVALID_ARGUMENT;
        }
        memcpy(a->key, secret, n);
        a->len = n;
    } else if (file && *file) {
        rc = mc__read_secret_file(file, a);
        if (rc)
            return rc;
    }
    if (a->len == 0)
        return 0; /* no secret: nothing is authenticated */
    pthread_once(&mc__crypto_once, mc__crypto_load);
    if (!mc__hmac) {
        MC_ERROR("a cluster secret is set, but no libcrypto (OpenSSL 3 or 1.1) can be loaded");
        memset(a, 0, sizeof(*a));
        return MC_ERR_NOT_IMPLEMENTED;
    }
    a->enabled = 1;
    return 0;
}

int mc__auth_mac(const mc_auth_t *a, const char *label, const uint8_t *p1, size_t n1,
                 const uint8_t *p2, size_t n2, uint8_t out[MC_AUTH_MAC]) {
    uint8_t msg[64 + 2 * 256];
    size_t ll = strlen(label), n = 0;
    unsigned int olen = 0;
    if (!a->enabled || !mc__hmac || ll > 64 || n1 > 256 || n2 > 256)
        return MC_ERR_NOT_IMPLEMENTED;
    memcpy(msg, label, ll);
    n += ll;
    memcpy(msg + n, p1, n1);
    n += n1;
    memcpy(msg + n, p2, n2);
    n += n2;
    if (!mc__hmac(mc__sha256(), a->key, (int)a->len, msg, n, out, &olen) || olen != MC_AUTH_MAC)
        return MC_ERR_NOT_IMPLEMENTED;
    return 0;
}

int mc__auth_equal(const uint8_t *x, const uint8_t *y) {
    uint8_t d = 0;
    for (size_t i = 0; i < MC_AUTH_MAC; i++)
        d |= (uint8_t)(x[i] ^ y[i]);
    return d == 0;
}

void mc__auth_nonce(uint8_t out[MC_AUTH_NONCE]) {
    mc__random_fill(out, MC_AUTH_NONCE);
}

/* Sends one auth frame (step id in the request id, body as given). */
static int mc__auth_send(int fd, uint16_t flags, uint64_t step, const uint8_t *body, size_t n,
                         uint64_t deadline) {
    uint8_t hdr[MC_FRAME_HEADER_SIZE];
    mc__frame_header_put(hdr, MC_AUTH_FRAME_TYPE, flags, step, n);
    return mc__send2(fd, hdr, sizeof(hdr), body, n, deadline) ? MC_ERR_SOCKET : 0;
}

/* Receives one frame of at most cap body bytes into body; *n gets its length. */
static int mc__auth_recv(int fd, mc_frame_header_t *h, uint8_t *body, size_t cap, size_t *n,
                         uint64_t deadline) {
    uint8_t hdr[MC_FRAME_HEADER_SIZE];
    if (mc__recv_all(fd, hdr, sizeof(hdr), deadline) ||
        mc__frame_header_decode(hdr, sizeof(hdr), cap, h) ||
        (h->body_len && mc__recv_all(fd, body, (size_t)h->body_len, deadline)))
        return MC_ERR_SOCKET;
    *n = (size_t)h->body_len;
    return 0;
}

/* Logs why a server refused us: its error frame's message, else what we conclude. */
static void mc__auth_log_refusal(const mc_frame_header_t *h, const uint8_t *body, size_t n,
                                 const char *otherwise) {
    mc_cursor_t c = {body, body + n};
    const uint8_t *msg = NULL;
    uint32_t len = 0;
    int32_t code = 0;
    if ((h->flags & MC_FRAME_F_ERROR) && mc__cur_i32(&c, &code) == 0 &&
        mc__cur_bytes(&c, (uint32_t)n, &msg, &len) == 0) {
        MC_WARN("authentication with the server failed: %.*s", (int)len, (const char *)msg);
        return;
    }
    MC_WARN("authentication with the server failed: %s", otherwise);
}

enum { MC__AUTH_HELLO = 1, MC__AUTH_CHALLENGE = 2, MC__AUTH_RESPONSE = 3, MC__AUTH_ACCEPT = 4 };

int mc__auth_client(const mc_auth_t *a, int fd, uint64_t deadline) {
    uint8_t cn[MC_AUTH_NONCE], body[512], want[MC_AUTH_MAC], proof[MC_AUTH_MAC];
    mc_frame_header_t h;
    size_t n = 0;
    mc__auth_nonce(cn);
    if (mc__auth_send(fd, 0, MC__AUTH_HELLO, cn, sizeof(cn), deadline) ||
        mc__auth_recv(fd, &h, body, sizeof(body), &n, deadline))
        return MC_ERR_SOCKET;
    /* an error frame (or anything but a challenge): a server without our secret, or none */
    if ((h.flags & MC_FRAME_F_ERROR) || h.type != MC_AUTH_FRAME_TYPE ||
        h.request_id != MC__AUTH_CHALLENGE || n != MC_AUTH_NONCE + MC_AUTH_MAC) {
        mc__auth_log_refusal(&h, body, n, "the server does not use a cluster secret");
        return MC_ERR_REJECT_HANDSHAKE;
    }
    if (mc__auth_mac(a, "mc-server", cn, sizeof(cn), body, MC_AUTH_NONCE, want) ||
        !mc__auth_equal(want, body + MC_AUTH_NONCE))
        return MC_ERR_REJECT_HANDSHAKE; /* it does not know the secret */
    if (mc__auth_mac(a, "mc-client", body, MC_AUTH_NONCE, cn, sizeof(cn), proof) ||
        mc__auth_send(fd, 0, MC__AUTH_RESPONSE, proof, sizeof(proof), deadline) ||
        mc__auth_recv(fd, &h, body, sizeof(body), &n, deadline))
        return MC_ERR_SOCKET;
    if ((h.flags & MC_FRAME_F_ERROR) || h.type != MC_AUTH_FRAME_TYPE ||
        h.request_id != MC__AUTH_ACCEPT) {
        mc__auth_log_refusal(&h, body, n, "refused");
        return MC_ERR_REJECT_HANDSHAKE;
    }
    return 0;
}

/* Tells the peer why it is being dropped, as an error frame (i32 code, str message) that both
 * protocols' clients decode. */
static void mc__auth_refuse(int fd, const char *why, uint64_t deadline) {
    mc_buf_t b;
    size_t start = 0;
    mc__buf_init(&b);
    if (mc__buf_frame_begin(&b, MC_AUTH_FRAME_TYPE, MC_FRAME_F_REPLY | MC_FRAME_F_ERROR, 0,
                            &start) == 0) {
        mc__buf_i32(&b, MC_ERR_REJECT_HANDSHAKE);
        mc__buf_str(&b, why);
        mc__buf_frame_end(&b, start);
        if (!b.failed)
            (void)mc__send_all(fd, b.data, b.len, deadline);
    }
    mc__buf_free(&b);
}

int mc__auth_server(const mc_auth_t *a, int fd, uint64_t deadline) {
    uint8_t body[512], sn[MC_AUTH_NONCE], out[MC_AUTH_NONCE + MC_AUTH_MAC], want[MC_AUTH_MAC];
    uint8_t cn[MC_AUTH_NONCE];
    mc_frame_header_t h;
    size_t n = 0;
    if (mc__auth_recv(fd, &h, body, sizeof(body), &n, deadline))
        return MC_ERR_SOCKET;
    if (h.type != MC_AUTH_FRAME_TYPE || h.request_id != MC__AUTH_HELLO || n != MC_AUTH_NONCE) {
        mc__auth_refuse(fd, "this service requires the cluster secret (MC_CLUSTER_SECRET)",
                        deadline);
        return MC_ERR_REJECT_HANDSHAKE;
    }
    memcpy(cn, body, sizeof(cn));
    mc__auth_nonce(sn);
    memcpy(out, sn, sizeof(sn));
    if (mc__auth_mac(a, "mc-server", cn, sizeof(cn), sn, sizeof(sn), out + MC_AUTH_NONCE) ||
        mc__auth_send(fd, MC_FRAME_F_REPLY, MC__AUTH_CHALLENGE, out, sizeof(out), deadline) ||
        mc__auth_recv(fd, &h, body, sizeof(body), &n, deadline))
        return MC_ERR_SOCKET;
    if (h.type != MC_AUTH_FRAME_TYPE || h.request_id != MC__AUTH_RESPONSE || n != MC_AUTH_MAC ||
        mc__auth_mac(a, "mc-client", sn, sizeof(sn), cn, sizeof(cn), want) ||
        !mc__auth_equal(want, body)) {
        mc__auth_refuse(fd, "cluster secret mismatch", deadline);
        return MC_ERR_REJECT_HANDSHAKE;
    }
    return mc__auth_send(fd, MC_FRAME_F_REPLY, MC__AUTH_ACCEPT, NULL, 0, deadline);
}

int mc__auth_http_mac(const mc_auth_t *a, const uint8_t nonce[MC_AUTH_NONCE], const char *method,
                      const char *target, size_t target_len, const void *body, size_t body_len,
                      uint8_t out[MC_AUTH_MAC]) {
    static const char label[] = "mc-http";
    size_t ml = strlen(method);
    size_t n = sizeof(label) - 1 + MC_AUTH_NONCE + ml + 1 + target_len + 1 + body_len;
    uint8_t *msg;
    uint8_t *p;
    unsigned int olen = 0;
    int rc = MC_ERR_NOT_IMPLEMENTED;
    if (!a->enabled || !mc__hmac)
        return rc;
    msg = mc__malloc(n);
    if (!msg)
        return MC_ERR_MEMORY;
    p = msg;
    memcpy(p, label, sizeof(label) - 1);
    p += sizeof(label) - 1;
    memcpy(p, nonce, MC_AUTH_NONCE);
    p += MC_AUTH_NONCE;
    memcpy(p, method, ml);
    p += ml;
    *p++ = ' ';
    memcpy(p, target, target_len);
    p += target_len;
    *p++ = '\n';
    if (body_len)
        memcpy(p, body, body_len);
    if (mc__hmac(mc__sha256(), a->key, (int)a->len, msg, n, out, &olen) && olen == MC_AUTH_MAC)
        rc = 0;
    mc__free(msg);
    return rc;
}

void mc__auth_hex(const uint8_t *p, size_t n, char *out) {
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hex[p[i] >> 4];
        out[2 * i + 1] = hex[p[i] & 15];
    }
    out[2 * n] = '\0';
}

int mc__auth_unhex(const char *s, size_t n, uint8_t *out) {
    for (size_t i = 0; i < n; i++) {
        int h = mc__parse_hex_digit(s[2 * i]), l = h < 0 ? -1 : mc__parse_hex_digit(s[2 * i + 1]);
        if (h < 0 || l < 0)
            return -1;
        out[i] = (uint8_t)(h * 16 + l);
    }
    return 0;
}
