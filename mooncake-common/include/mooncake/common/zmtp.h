/* ZMTP 3.x (rfc.zeromq.org/spec/23 and 37), the wire of ZeroMQ sockets, with the NULL mechanism:
 * what the KV-event publishers and subscribers (vLLM, SGLang, Dynamo, the reference's master and
 * conductor) speak through libzmq. We write it ourselves so that nothing we ship links libzmq.
 *
 * This file is the codec alone (no I/O, fuzzed by fuzz/zmtp_fuzz.c): the 64-byte greeting, frames
 * (flags MORE/LONG/COMMAND, a 1- or 8-byte big-endian size), commands (READY with its properties,
 * SUBSCRIBE/CANCEL, PING/PONG, ERROR). zmtp_server.c (PUB and ROUTER over a poll loop) and
 * zmtp_client.c (SUB, DEALER, REQ, blocking with deadlines) do the I/O. */
#ifndef MC_COMMON_ZMTP_H
#define MC_COMMON_ZMTP_H
#include <stddef.h>
#include <stdint.h>

#include "mooncake/common/frame.h"

#define MC_ZMTP_GREETING_SIZE 64
#define MC_ZMTP_F_MORE 0x01
#define MC_ZMTP_F_LONG 0x02
#define MC_ZMTP_F_COMMAND 0x04

typedef struct mc_zmtp_frame {
    uint8_t flags;
    const uint8_t *body;
    uint64_t len;
} mc_zmtp_frame_t;

/* Our greeting: version 3.1, mechanism NULL. */
void mc__zmtp_greeting(uint8_t out[MC_ZMTP_GREETING_SIZE], int as_server);
/* Checks a peer's greeting: the signature, major version 3 or later, mechanism NULL. Returns 0
 * (and the peer's minor version, 0 for a 3.0 peer) or MC_ERR_INVALID_ARGUMENT. */
int mc__zmtp_greeting_parse(const uint8_t in[MC_ZMTP_GREETING_SIZE], int *minor);

/* One frame at the head of in[0, n): returns the bytes it takes (> 0), 0 when more input is
 * needed, or MC_ERR_INVALID_ARGUMENT for reserved flag bits or a body over max_body. */
int64_t mc__zmtp_frame_parse(const uint8_t *in, size_t n, uint64_t max_body, mc_zmtp_frame_t *f);
/* Appends one frame. */
void mc__zmtp_frame_put(mc_buf_t *b, uint8_t flags, const void *body, size_t len);
/* Appends a command frame: a name, then data. */
void mc__zmtp_command_put(mc_buf_t *b, const char *name, const void *data, size_t len);
/* Appends READY with Socket-Type (and an empty Identity, which ROUTER peers expect of DEALER/REQ).
 */
void mc__zmtp_ready_put(mc_buf_t *b, const char *socket_type);

/* Splits a command frame's body into name and data. 0 or MC_ERR_INVALID_ARGUMENT. */
int mc__zmtp_command_parse(const mc_zmtp_frame_t *f, const uint8_t **name, size_t *name_len,
                           const uint8_t **data, size_t *data_len);
int mc__zmtp_command_is(const uint8_t *name, size_t name_len, const char *want);
/* Finds Socket-Type among READY's properties (copied NUL-terminated into out). 0, or
 * MC_ERR_INVALID_ARGUMENT when the properties are malformed or it is missing. */
int mc__zmtp_ready_socket_type(const uint8_t *data, size_t len, char *out, size_t cap);
/* Whether a socket of type mine may talk to one of type peer (the spec's table). */
int mc__zmtp_compatible(const char *mine, const char *peer);

/* A multipart message: parts point into the input it was parsed from. */
#define MC_ZMTP_MAX_PARTS 16
typedef struct mc_zmtp_msg {
    int nparts;
    const uint8_t *part[MC_ZMTP_MAX_PARTS];
    size_t len[MC_ZMTP_MAX_PARTS];
} mc_zmtp_msg_t;

/* One connection's incoming byte stream, parsed one event at a time: the greeting, the peer's
 * READY (its Socket-Type checked against ours), then whole messages and commands. A message
 * is returned only once all its frames are in, so the caller keeps unconsumed bytes as they are
 * and appends to them. */
enum { MC_ZMTP_EV_NONE, MC_ZMTP_EV_READY, MC_ZMTP_EV_MSG, MC_ZMTP_EV_CMD };
typedef struct mc_zmtp_stream {
    int state; /* 0: greeting, 1: waiting for READY, 2: open */
    int minor; /* the peer's ZMTP minor version */
    const char *mine;
    char peer_type[16];
    uint64_t max_msg; /* the most bytes one message may hold */
} mc_zmtp_stream_t;
void mc__zmtp_stream_init(mc_zmtp_stream_t *st, const char *mine, uint64_t max_msg);
/* Returns the bytes consumed (0 with *ev NONE: more input needed) or MC_ERR_INVALID_ARGUMENT for
 * a protocol error (bad greeting, incompatible socket type, a message over max_msg or with more
 * than MC_ZMTP_MAX_PARTS parts, a data frame before READY). EV_MSG fills *m; EV_CMD fills *cmd
 * (with its name and data split). */
int64_t mc__zmtp_stream_next(mc_zmtp_stream_t *st, const uint8_t *in, size_t n, int *ev,
                             mc_zmtp_msg_t *m, const uint8_t **cmd, size_t *cmd_len,
                             const uint8_t **data, size_t *data_len);

#endif
