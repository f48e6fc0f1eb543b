/* The opt-in cluster secret: every connection to the master, an engine or the metadata service
 * proves that both ends know it, by challenge-response with HMAC-SHA256 over fresh nonces; the
 * secret itself never crosses the wire.
 *
 * Where it comes from, first found: the caller's secret, the caller's secret file (a flag or
 * config key), MC_CLUSTER_SECRET, MC_CLUSTER_SECRET_FILE in the environment (a file's trailing
 * whitespace is ignored). Without one, nothing is authenticated (the reference's behaviour).
 *
 * HMAC-SHA256 comes from the system's libcrypto (OpenSSL 3 or 1.1), loaded at run time when a
 * secret is configured, so the default wheel links no crypto library.
 *
 * Binary handshake (master RPC and engine RPC ports), right after connect, frames of type
 * MC_AUTH_FRAME_TYPE in the common framing:
 *   client -> HELLO      16-byte client nonce
 *   server -> CHALLENGE  16-byte server nonce, 32-byte proof = HMAC(k, "mc-server" cn sn)
 *   client -> RESPONSE   32-byte proof = HMAC(k, "mc-client" sn cn)
 *   server -> ACCEPT     empty, or an error frame (MC_ERR_REJECT_HANDSHAKE) and close
 * The client checks the server's proof too, so neither end talks to an impostor. */
#ifndef MC_COMMON_AUTH_H
#define MC_COMMON_AUTH_H
#include <stddef.h>
#include <stdint.h>

#define MC_AUTH_FRAME_TYPE 0xF0u
#define MC_AUTH_NONCE 16u
#define MC_AUTH_MAC 32u
#define MC_AUTH_MAX_SECRET 1024u

typedef struct mc_auth {
    int enabled;
    size_t len;
    uint8_t key[MC_AUTH_MAX_SECRET];
} mc_auth_t;

/* Fills a (secret and file may be NULL or ""; see above for the order). 0, or
 * MC_ERR_INVALID_ARGUMENT (unreadable file, secret over MC_AUTH_MAX_SECRET bytes), or
 * MC_ERR_NOT_IMPLEMENTED when a secret is set but no libcrypto can be loaded. */
int mc__auth_init(mc_auth_t *a, const char *secret, const char *secret_file);
/* HMAC-SHA256(key, label || p1 || p2) into out. 0 or MC_ERR_NOT_IMPLEMENTED. */
int mc__auth_mac(const mc_auth_t *a, const char *label, const uint8_t *p1, size_t n1,
                 const uint8_t *p2, size_t n2, uint8_t out[MC_AUTH_MAC]);
/* Constant-time comparison of two MACs: 1 when equal. */
int mc__auth_equal(const uint8_t *x, const uint8_t *y);
/* Random nonce (getrandom). */
void mc__auth_nonce(uint8_t out[MC_AUTH_NONCE]);

/* The binary handshake on a connected socket, each side within deadline (mc__now_ms based).
 * Client: 0, or MC_ERR_REJECT_HANDSHAKE (the server refused us, has no secret, or failed to
 * prove it knows ours), MC_ERR_SOCKET. Server: 0 when the peer proved it knows the secret;
 * any other return means close the connection (the peer was told why when it could be). */
int mc__auth_client(const mc_auth_t *a, int fd, uint64_t deadline);
int mc__auth_server(const mc_auth_t *a, int fd, uint64_t deadline);

/* The HTTP form (see mc__http_server_require_auth): the MAC of one request. 0, MC_ERR_MEMORY or
 * MC_ERR_NOT_IMPLEMENTED. */
int mc__auth_http_mac(const mc_auth_t *a, const uint8_t nonce[MC_AUTH_NONCE], const char *method,
                      const char *target, size_t target_len, const void *body, size_t body_len,
                      uint8_t out[MC_AUTH_MAC]);
void mc__auth_hex(const uint8_t *p, size_t n, char *out); /* 2n hex digits + NUL */
/* Parses exactly 2n hex digits at s into out: 0, or -1. */
int mc__auth_unhex(const char *s, size_t n, uint8_t *out);
#endif
