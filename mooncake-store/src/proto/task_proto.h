/* Replica tasks on the master RPC (types MC_MP_TASK_* of master_proto.h): bodies after the
 * 16-byte client id, and their replies. No I/O, so that every decoder can be fuzzed.
 *
 *   TASK_CREATE   u8 task_type (MC_TASK_COPY, MC_TASK_MOVE), str key, str source (the move's
 *                 source segment; empty for a copy), u32 n (1..MC_MP_MAX_REPLICA_NUM),
 *                 n x str target segment
 *   TASK_QUERY    16-byte task id
 *   TASK_FETCH    u32 max_tasks (1..MC_TP_MAX_FETCH)
 *   TASK_REPORT   16-byte task id, i32 code (0: the bytes are in every target), str message
 *
 * Replies:
 *   TASK_CREATE   16-byte task id
 *   TASK_QUERY    u8 task_type, u8 status (MC_TASK_*), u64 created_ms, u64 updated_ms (Unix
 *                 epoch), 16-byte assigned client id, str message
 *   TASK_FETCH    u32 n, n x work: 16-byte task id, u8 task_type, str key, u64 size,
 *                 place source, u32 n_targets, n_targets x place
 *   place:        str segment_name, u64 addr, u64 epoch
 *   TASK_REPORT   (empty)
 */
#ifndef MC_STORE_PROTO_TASK_PROTO_H
#define MC_STORE_PROTO_TASK_PROTO_H
#include "proto/master_proto.h"

/* The reference's TaskType numbers, in one table: X(TYPE, name, value, ref_call), ref_call the
 * reference's RPC that creates one (its metrics are named after it: master_create_<name>_task_*;
 * one message type, TASK_CREATE, serves them all). */
#define MC_TASK_TYPE_MAP(X)                                                                        \
    X(COPY, copy, 0, "CreateCopyTask")                                                             \
    X(MOVE, move, 1, "CreateMoveTask")
enum {
#define MC__TASK_ENUM(T, name, value, ref) MC_TASK_##T = value,
    MC_TASK_TYPE_MAP(MC__TASK_ENUM)
#undef MC__TASK_ENUM
};
/* The reference's TaskStatus numbers. */
enum { MC_TASK_PENDING = 0, MC_TASK_PROCESSING = 1, MC_TASK_FAILED = 2, MC_TASK_SUCCESS = 3 };
#define MC_TP_MAX_FETCH 16u
#define MC_TP_MAX_MESSAGE 255u

typedef struct mc__task_info {
    uint8_t type, status;
    uint64_t created_ms, updated_ms;
    uint8_t assigned[MC_MP_CLIENT_ID_LEN];
    char message[MC_TP_MAX_MESSAGE + 1];
} mc__task_info_t;

/* One task handed to the client that runs it: read size bytes from src (a replica in the
 * client's own segment), write them to every target (placements the master reserved). */
typedef struct mc__task_work {
    uint8_t id[MC_MP_CLIENT_ID_LEN];
    uint8_t type;
    char key[MC_MP_MAX_KEY + 1];
    uint64_t size;
    mc__replica_desc_t src;
    uint32_t n_targets;
    mc__replica_desc_t targets[MC_MP_MAX_REPLICA_NUM];
} mc__task_work_t;

/* Replies (complete frames). */
int mc__tp_encode_create_reply(mc_buf_t *b, uint64_t request_id,
                               const uint8_t id[MC_MP_CLIENT_ID_LEN]);
int mc__tp_encode_query_reply(mc_buf_t *b, uint64_t request_id, const mc__task_info_t *info);
/* FETCH replies are written as begin (n), n x work, frame_end. */
int mc__tp_fetch_reply_begin(mc_buf_t *b, uint64_t request_id, uint32_t n, size_t *frame_start);
int mc__tp_fetch_reply_work(mc_buf_t *b, const mc__task_work_t *w);

/* Reply decoders: 0, the error reply's code, or MC_ERR_RPC_FAIL for a malformed reply. */
int mc__tp_decode_create_reply(const mc_frame_header_t *h, const uint8_t *body, size_t len,
                               uint8_t id[MC_MP_CLIENT_ID_LEN]);
int mc__tp_decode_query_reply(const mc_frame_header_t *h, const uint8_t *body, size_t len,
                              mc__task_info_t *out);
/* out has room for max entries; *n gets how many came. */
int mc__tp_decode_fetch_reply(const mc_frame_header_t *h, const uint8_t *body, size_t len,
                              uint32_t max, mc__task_work_t *out, uint32_t *n);
#endif
