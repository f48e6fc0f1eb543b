/* Master RPC decoders: the request decoder the master runs on every frame, and the reply
 * decoders the client runs; also the disk tier's (a node's fetch reply, its read server's
 * request, a reader's read reply). Input: a 24-byte frame header followed by the body. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mooncake/common/frame.h"
#include "proto/disk_proto.h"
#include "proto/master_proto.h"
#include "proto/task_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static mc__key_replicas_t reps[64];
    static mc__task_work_t work[MC_TP_MAX_FETCH];
    static mc__disk_job_t jobs[MC_DP_MAX_FETCH];
    static char key[MC_MP_MAX_KEY + 1];
    static char fsdir[MC_MP_MAX_SEGMENT_NAME + 1];
    uint64_t version, cap, vlen;
    int32_t code;
    mc__task_info_t info;
    uint8_t task_id[MC_MP_CLIENT_ID_LEN];
    uint32_t n_work;
    int32_t codes[64];
    mc_frame_header_t h;
    mc__mp_request_t req;
    const uint8_t *body;
    size_t len;
    int64_t removed;
    uint8_t st;
    uint64_t view;
    char err[64];
    /* The read reply's trailer is read on its own, from the bytes after a value. */
    (void)mc__dp_decode_read_trailer(data, size < MC_DP_TRAILER_SIZE ? size : MC_DP_TRAILER_SIZE,
                                     &code);
    if (size < MC_FRAME_HEADER_SIZE)
        return 0;
    /* Header errors are checked first in the server; keep going with what was read so the body
     * decoders see every type byte. */
    (void)mc__frame_header_decode(data, size, MC_MP_MAX_BODY, &h);
    body = data + MC_FRAME_HEADER_SIZE;
    len = size - MC_FRAME_HEADER_SIZE;
    if (mc__mp_decode_request(&h, body, len, &req) == 0)
        mc__mp_request_free(&req);
    h.flags |= MC_FRAME_F_REPLY;
    for (uint32_t n = 0; n <= 2; n++) {
        (void)mc__mp_decode_codes_reply(&h, body, len, n, codes);
        (void)mc__mp_decode_replicas_reply(&h, body, len, n, reps);
    }
    (void)mc__mp_decode_replicas_reply(&h, body, len, 64, reps);
    (void)mc__mp_decode_remove_all_reply(&h, body, len, &removed);
    (void)mc__mp_decode_heartbeat_reply(&h, body, len, &st, &view);
    (void)mc__mp_decode_empty_reply(&h, body, len);
    (void)mc__tp_decode_create_reply(&h, body, len, task_id);
    (void)mc__tp_decode_query_reply(&h, body, len, &info);
    (void)mc__tp_decode_fetch_reply(&h, body, len, MC_TP_MAX_FETCH, work, &n_work);
    (void)mc__tp_decode_fetch_reply(&h, body, len, 1, work, &n_work);
    (void)mc__mp_decode_error(&h, body, len, err, sizeof(err));
    (void)mc__dp_decode_fetch_reply(&h, body, len, MC_DP_MAX_FETCH, jobs, &n_work);
    (void)mc__dp_decode_fetch_reply(&h, body, len, 1, jobs, &n_work);
    (void)mc__dp_decode_read(body, len, key, &version, &cap);
    (void)mc__dp_decode_read_reply(&h, body, len, &code, &vlen);
    (void)mc__dp_decode_storage_config(&h, body, len, fsdir, &st, &vlen);
    return 0;
}
