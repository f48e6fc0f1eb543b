/* Fuzzes the etcd client's decoders (mooncake/common/etcd.h): the watch stream's HTTP head and
 * chunked framing, the JSON answers of range, txn, lease, put/delete calls and watch messages,
 * etcd's error bodies, and base64.
 *
 * Input: one byte choosing the decoder (low 3 bits), for the stream a second byte giving where
 * the bytes are split in two feeds, then the bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/etcd.h"
#include "mooncake/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MC__FUZZ_MAX_MSG 4096

static int mc__fuzz_msg(void *ctx, const char *msg, size_t len) {
    mc_etcd_watch_msg_t m;
    size_t *count = ctx;
    if (len == 0 || len > MC__FUZZ_MAX_MSG)
        abort(); /* empty messages are skipped, long ones refused */
    (*count)++;
    if (mc__etcd_parse_watch_msg(msg, len, &m) == 0)
        mc__etcd_watch_msg_free(&m);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *p;
    size_t n;
    if (size < 1)
        return 0;
    p = (const char *)data + 1;
    n = size - 1;
    switch (data[0] & 7) {
    case 0: {
        mc_etcd_stream_t st;
        size_t count = 0, cut;
        if (!n)
            return 0;
        cut = data[1] % n;
        mc__etcd_stream_init(&st, MC__FUZZ_MAX_MSG);
        if (mc__etcd_stream_feed(&st, data + 2, cut ? cut - 1 : 0, mc__fuzz_msg, &count) == 0 &&
            mc__etcd_stream_feed(&st, data + 1 + (cut ? cut : 1), n - (cut ? cut : 1), mc__fuzz_msg,
                                 &count) == 0)
            mc__etcd_stream_end(&st, mc__fuzz_msg, &count);
        mc__etcd_stream_free(&st);
        break;
    }
    case 1: {
        mc_etcd_kvs_t r;
        if (mc__etcd_parse_range(p, n, &r) == 0) {
            for (size_t i = 0; i < r.n; i++) {
                if (r.kvs[i].key[r.kvs[i].key_len] != 0 || r.kvs[i].value[r.kvs[i].value_len])
                    abort();
            }
            mc__etcd_kvs_free(&r);
        } else if (r.kvs || r.n) {
            abort();
        }
        break;
    }
    case 2: {
        mc_etcd_txn_result_t t;
        if (mc__etcd_parse_txn(p, n, &t) == 0)
            mc__etcd_txn_result_free(&t);
        else if (t.ranges || t.n)
            abort();
        break;
    }
    case 3: {
        int64_t id, ttl;
        mc__etcd_parse_lease(p, n, &id, &ttl);
        break;
    }
    case 4: {
        int64_t rev, del;
        mc__etcd_parse_write(p, n, &rev, &del);
        break;
    }
    case 5: {
        char msg[64];
        int code = mc__etcd_parse_error(p, n, msg, sizeof(msg));
        if (code < -1 || code > 1000 || strlen(msg) >= sizeof(msg))
            abort();
        break;
    }
    case 6: {
        mc_etcd_watch_msg_t m;
        if (mc__etcd_parse_watch_msg(p, n, &m) == 0)
            mc__etcd_watch_msg_free(&m);
        else if (m.events || m.n)
            abort();
        break;
    }
    default: {
        uint8_t *out = malloc(n / 4 * 3 + 1);
        size_t ol = 0;
        if (!out)
            return 0;
        if (mc__etcd_b64_decode(p, n, out, &ol) == 0) {
            /* what decodes, encodes back to the same text: the decoder is canonical */
            char *enc = malloc(mc__etcd_b64_len(ol) + 1);
            if (!enc)
                abort();
            mc__etcd_b64_encode(out, ol, enc);
            if (strlen(enc) != n || memcmp(enc, p, n))
                abort();
            free(enc);
        }
        free(out);
        break;
    }
    }
    return 0;
}
