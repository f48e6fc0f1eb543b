/* Messages on the TE RPC/data port, on top of the common framing. No I/O here (fuzzed).
 *
 *   PING      body empty                       reply empty
 *   GET_DESC  body empty                       reply descriptor JSON
 *   WRITE     u64 addr, u64 len, u64 epoch,    reply empty
 *             len bytes
 *   READ      u64 addr, u64 len, u64 epoch     reply len bytes
 *   NOTIFY    str from, str name, bytes msg    reply empty
 *   WRITE_ASK u64 addr, u64 len, u64 epoch,    reply the answer's bytes (raw body)
 *             u32 msg_len, msg_len bytes of
 *             message, len bytes of payload
 * WRITE_ASK (the write-ask, mc_engine_write_ask) lands its payload like a WRITE and then hands
 * the message to the target owner's ask handler; the reply is the handler's answer. len may be
 * 0 (a message alone: no address or epoch is checked then).
 * Any request may be answered with an error frame (MC_FRAME_F_ERROR: i32 code, str message).
 * epoch: 0 for any incarnation of the target buffer, else the one incarnation the initiator's
 * placement was made in; the server refuses the request when the buffer carries another. */
#ifndef MC_TE_PROTO_H
#define MC_TE_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "mooncake/common/frame.h"

enum mc__te_msg {
    MC__TE_PING = 1,
    MC__TE_GET_DESC = 2,
    MC__TE_WRITE = 3,
    MC__TE_READ = 4,
    MC__TE_NOTIFY = 5,
    MC__TE_WRITE_ASK = 6,
};

/* Request flag (the framing's flags, ignored by peers that do not know it): the initiator is
 * moving a batch or a large block, so its next request comes only after that work; the target
 * does not spin for it (server.c). */
#define MC__TE_F_BULK 0x0100u

#define MC__TE_RW_BODY 24u
#define MC__TE_RW_HEAD (MC_FRAME_HEADER_SIZE + MC__TE_RW_BODY)
#define MC__TE_MAX_SLICE (64ull << 20)
#define MC__TE_MAX_NOTIFY_MSG (64u << 10)
#define MC__TE_MAX_NOTIFY_NAME 1024u
#define MC__TE_MAX_NOTIFY_BODY (MC__TE_MAX_NOTIFY_MSG + 2 * MC__TE_MAX_NOTIFY_NAME + 12)
#define MC__TE_MAX_ERROR_BODY 4096u
/* WRITE_ASK: the 24 bytes of a WRITE, then u32 msg_len; the message is small (a commit request,
 * a key) and the answer at most a verdict with a 16 KiB value (a store's forwarded get), so the
 * server reads the message and writes the answer into its connection's scratch. */
#define MC__TE_ASK_BODY (MC__TE_RW_BODY + 4u)
#define MC__TE_ASK_HEAD (MC_FRAME_HEADER_SIZE + MC__TE_ASK_BODY)
#define MC__TE_MAX_ASK_MSG 4096u
#define MC__TE_MAX_ASK_ANSWER ((16u << 10) + 4096u)
/* The largest body a request frame may announce (checked before anything is buffered): a
 * write-ask of a full slice. */
#define MC__TE_MAX_REQUEST_BODY (MC__TE_MAX_SLICE + MC__TE_ASK_BODY + MC__TE_MAX_ASK_MSG)

/* Checks that a request header's type and body length agree. Returns 0,
 * MC_ERR_NOT_IMPLEMENTED (unknown type: the body may be skipped and an error returned) or
 * MC_ERR_INVALID_ARGUMENT (inconsistent: the connection must be closed). */
int mc__te_check_request(const mc_frame_header_t *h);

/* Header + addr/len/epoch of a WRITE or READ request (48 bytes). For WRITE the payload follows. */
void mc__te_encode_rw(uint8_t out[MC__TE_RW_HEAD], uint8_t type, uint64_t request_id, uint64_t addr,
                      uint64_t len, uint64_t epoch, uint16_t flags);
/* Decodes the 24-byte addr/len/epoch part. For WRITE, body_len must be 24 + len. */
int mc__te_decode_rw(const mc_frame_header_t *h, const uint8_t *body, size_t n, uint64_t *addr,
                     uint64_t *len, uint64_t *epoch);

/* A reply header with an empty or raw body of body_len bytes. */
void mc__te_encode_reply(uint8_t out[MC_FRAME_HEADER_SIZE], uint8_t type, uint64_t request_id,
                         uint64_t body_len);
int mc__te_encode_error(mc_buf_t *b, uint8_t type, uint64_t request_id, int code, const char *msg);
/* code is forced negative (a peer cannot make a failure look like success). */
int mc__te_decode_error(const uint8_t *body, size_t n, int *code, char *msg, size_t cap);

typedef struct mc__te_notify_view {
    const char *from;
    uint32_t from_len;
    const char *name;
    uint32_t name_len;
    const uint8_t *msg;
    uint32_t msg_len;
} mc__te_notify_view_t;

int mc__te_encode_notify(mc_buf_t *b, uint64_t request_id, const char *from, const char *name,
                         const void *msg, size_t len);
int mc__te_decode_notify(const uint8_t *body, size_t n, mc__te_notify_view_t *out);

/* Header + addr/len/epoch/msg_len of a WRITE_ASK (52 bytes); the message and then the payload
 * follow. No limits are checked here (the caller did). */
void mc__te_encode_ask(uint8_t out[MC__TE_ASK_HEAD], uint64_t request_id, uint64_t addr,
                       uint64_t len, uint64_t epoch, uint32_t msg_len);
/* Decodes the 28-byte head of a WRITE_ASK (n must cover it): MC_ERR_INVALID_ARGUMENT unless
 * msg_len <= MC__TE_MAX_ASK_MSG, len <= MC__TE_MAX_SLICE and body_len == 28 + msg_len + len. */
int mc__te_decode_ask(const mc_frame_header_t *h, const uint8_t *body, size_t n, uint64_t *addr,
                      uint64_t *len, uint64_t *epoch, uint32_t *msg_len);
#endif
