/* The storage node's control channel (mooncake-store/src/proto/node_proto.h): the request decoder
 * the daemon runs on every frame from a dummy client, and the reply decoder the dummy runs.
 * Input: a 24-byte frame header followed by the body. */
#include <stddef.h>
#include <stdint.h>

#include "mooncake/common/frame.h"
#include "proto/node_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    mc_frame_header_t h;
    mc__np_request_t req;
    mc__np_reply_t reply;
    char err[128];
    const uint8_t *body;
    size_t len;
    if (size < MC_FRAME_HEADER_SIZE)
        return 0;
    (void)mc__frame_header_decode(data, size, MC_NP_MAX_BODY, &h);
    body = data + MC_FRAME_HEADER_SIZE;
    len = size - MC_FRAME_HEADER_SIZE;
    (void)mc__np_decode_request(h.type, body, len, &req, err, sizeof(err));
    /* Whatever decoded must be readable to its end: every key a NUL-terminated string. */
    for (uint32_t i = 0; req.arena && req.items && i < req.n; i++)
        for (const char *k = req.items[i].key; *k; k++)
            ;
    mc__np_request_free(&req);
    if (mc__np_decode_reply(h.flags, body, len, &reply) == 0)
        mc__np_reply_free(&reply);
    return 0;
}
