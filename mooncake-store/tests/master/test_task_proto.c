/* Replica-task codec without I/O: round trips of every request and reply, the limits the
 * encoder enforces, and every way a body can be cut short or padded. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mooncake/error.h"
#include "proto/task_proto.h"

static mc__mp_str_t S(const char *s) {
    mc__mp_str_t v = {(const uint8_t *)s, (uint32_t)strlen(s)};
    return v;
}

static void decode_frame(const mc_buf_t *b, mc_frame_header_t *h) {
    assert_int_equal(mc__frame_header_decode(b->data, b->len, MC_MP_MAX_BODY, h), 0);
}

/* Every strict prefix and one byte more of an encoded request are refused. */
static void check_cuts(const mc_buf_t *b) {
    mc_frame_header_t h;
    mc__mp_request_t d;
    size_t body = b->len - MC_FRAME_HEADER_SIZE;
    uint8_t *copy = malloc(body + 1);
    decode_frame(b, &h);
    memcpy(copy, b->data + MC_FRAME_HEADER_SIZE, body);
    for (size_t cut = 0; cut < body; cut++)
        assert_int_not_equal(mc__mp_decode_request(&h, copy, cut, &d), 0);
    copy[body] = 0;
    assert_int_equal(mc__mp_decode_request(&h, copy, body + 1, &d), MC_ERR_INVALID_PARAMS);
    free(copy);
}

static void test_create_roundtrip(void **state) {
    mc__mp_request_t r, d;
    mc_frame_header_t h;
    mc_buf_t b;
    (void)state;
    memset(&r, 0, sizeof(r));
    mc__buf_init(&b);
    r.type = MC_MP_TASK_CREATE;
    r.request_id = 9;
    r.task_type = MC_TASK_MOVE;
    r.object_key = S("obj");
    r.segment_name = S("host:1");
    r.n_targets = 1;
    r.targets[0] = S("host:2");
    assert_int_equal(mc__mp_encode_request(&b, &r), 0);
    decode_frame(&b, &h);
    assert_int_equal(mc__mp_decode_request(&h, b.data + MC_FRAME_HEADER_SIZE, h.body_len, &d), 0);
    assert_int_equal(d.task_type, MC_TASK_MOVE);
    assert_memory_equal(d.object_key.p, "obj", 3);
    assert_memory_equal(d.segment_name.p, "host:1", 6);
    assert_int_equal(d.n_targets, 1);
    assert_memory_equal(d.targets[0].p, "host:2", 6);
    mc__mp_request_free(&d);
    check_cuts(&b);
    mc__buf_free(&b);
}

static void test_other_roundtrips(void **state) {
    mc__mp_request_t r, d;
    mc_frame_header_t h;
    mc_buf_t b;
    (void)state;
    mc__buf_init(&b);
    for (uint8_t type = MC_MP_TASK_QUERY; type <= MC_MP_TASK_REPORT; type++) {
        memset(&r, 0, sizeof(r));
        r.type = type;
        memset(r.task_id, 0x5a, sizeof(r.task_id));
        r.max_tasks = 3;
        r.task_code = MC_ERR_TRANSFER_FAIL;
        r.message = S("why");
        mc__buf_reset(&b);
        assert_int_equal(mc__mp_encode_request(&b, &r), 0);
        decode_frame(&b, &h);
        assert_int_equal(mc__mp_decode_request(&h, b.data + MC_FRAME_HEADER_SIZE, h.body_len, &d),
                         0);
        if (type != MC_MP_TASK_FETCH)
            assert_memory_equal(d.task_id, r.task_id, sizeof(r.task_id));
        if (type == MC_MP_TASK_FETCH)
            assert_int_equal(d.max_tasks, 3);
        if (type == MC_MP_TASK_REPORT) {
            assert_int_equal(d.task_code, MC_ERR_TRANSFER_FAIL);
            assert_memory_equal(d.message.p, "why", 3);
        }
        mc__mp_request_free(&d);
        check_cuts(&b);
    }
    mc__buf_free(&b);
}

static void test_encoder_limits(void **state) {
    mc__mp_request_t r;
    mc_buf_t b;
    char long_name[MC_MP_MAX_SEGMENT_NAME + 2];
    (void)state;
    mc__buf_init(&b);
    memset(long_name, 'n', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    memset(&r, 0, sizeof(r));
    r.type = MC_MP_TASK_CREATE;
    r.object_key = S("k");
    r.n_targets = 0; /* none */
    assert_int_equal(mc__mp_encode_request(&b, &r), MC_ERR_INVALID_PARAMS);
    r.n_targets = MC_MP_MAX_REPLICA_NUM + 1;
    assert_int_equal(mc__mp_encode_request(&b, &r), MC_ERR_INVALID_PARAMS);
    r.n_targets = 1;
    r.targets[0] = S(long_name);
    assert_int_equal(mc__mp_encode_request(&b, &r), MC_ERR_INVALID_PARAMS);
    r.targets[0] = S("ok:1");
    r.task_type = 2; /* no such type */
    assert_int_equal(mc__mp_encode_request(&b, &r), MC_ERR_INVALID_PARAMS);
    r.task_type = MC_TASK_COPY;
    r.object_key = S("");
    assert_int_equal(mc__mp_encode_request(&b, &r), MC_ERR_INVALID_KEY);
    memset(&r, 0, sizeof(r));
    r.type = MC_MP_TASK_FETCH;
    assert_int_equal(mc__mp_encode_request(&b, &r), MC_ERR_INVALID_PARAMS); /* max 0 */
    r.max_tasks = MC_TP_MAX_FETCH + 1;
    assert_int_equal(mc__mp_encode_request(&b, &r), MC_ERR_INVALID_PARAMS);
    assert_int_equal(b.len, 0); /* nothing written for a refused request */
    mc__buf_free(&b);
}

static void test_replies(void **state) {
    uint8_t id[MC_MP_CLIENT_ID_LEN], got[MC_MP_CLIENT_ID_LEN];
    mc__task_info_t info, info2;
    mc__task_work_t w, out[2];
    mc_frame_header_t h;
    mc_buf_t b;
    size_t start = 0;
    uint32_t n = 0;
    (void)state;
    mc__buf_init(&b);
    memset(id, 7, sizeof(id));
    assert_int_equal(mc__tp_encode_create_reply(&b, 1, id), 0);
    decode_frame(&b, &h);
    assert_int_equal(mc__tp_decode_create_reply(&h, b.data + 24, h.body_len, got), 0);
    assert_memory_equal(got, id, sizeof(id));
    assert_int_equal(mc__tp_decode_create_reply(&h, b.data + 24, h.body_len - 1, got),
                     MC_ERR_RPC_FAIL);

    mc__buf_reset(&b);
    memset(&info, 0, sizeof(info));
    info.type = MC_TASK_COPY;
    info.status = MC_TASK_FAILED;
    info.created_ms = 1000;
    info.updated_ms = 2000;
    memset(info.assigned, 3, sizeof(info.assigned));
    strcpy(info.message, "no space");
    assert_int_equal(mc__tp_encode_query_reply(&b, 2, &info), 0);
    decode_frame(&b, &h);
    assert_int_equal(mc__tp_decode_query_reply(&h, b.data + 24, h.body_len, &info2), 0);
    assert_int_equal(info2.status, MC_TASK_FAILED);
    assert_int_equal(info2.updated_ms, 2000);
    assert_string_equal(info2.message, "no space");
    for (size_t cut = 0; cut < h.body_len; cut++)
        assert_int_equal(mc__tp_decode_query_reply(&h, b.data + 24, cut, &info2), MC_ERR_RPC_FAIL);
    b.data[24 + 1] = 9; /* a status that does not exist */
    assert_int_equal(mc__tp_decode_query_reply(&h, b.data + 24, h.body_len, &info2),
                     MC_ERR_RPC_FAIL);

    mc__buf_reset(&b);
    memset(&w, 0, sizeof(w));
    memcpy(w.id, id, sizeof(id));
    w.type = MC_TASK_MOVE;
    strcpy(w.key, "obj");
    w.size = 4096;
    strcpy(w.src.segment_name, "a:1");
    w.src.addr = 0x1000;
    w.src.epoch = 4;
    w.n_targets = 1;
    strcpy(w.targets[0].segment_name, "b:2");
    w.targets[0].addr = 0x9000;
    assert_int_equal(mc__tp_fetch_reply_begin(&b, 3, 1, &start), 0);
    assert_int_equal(mc__tp_fetch_reply_work(&b, &w), 0);
    mc__buf_frame_end(&b, start);
    decode_frame(&b, &h);
    assert_int_equal(mc__tp_decode_fetch_reply(&h, b.data + 24, h.body_len, 2, out, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(out[0].key, "obj");
    assert_int_equal(out[0].size, 4096);
    assert_int_equal(out[0].src.size, 4096);
    assert_string_equal(out[0].targets[0].segment_name, "b:2");
    assert_int_equal(out[0].targets[0].addr, 0x9000);
    /* More works than the caller has room for, cut bodies: refused. */
    assert_int_equal(mc__tp_decode_fetch_reply(&h, b.data + 24, h.body_len, 0, out, &n),
                     MC_ERR_RPC_FAIL);
    for (size_t cut = 0; cut < h.body_len; cut++)
        assert_int_equal(mc__tp_decode_fetch_reply(&h, b.data + 24, cut, 2, out, &n),
                         MC_ERR_RPC_FAIL);

    /* An error reply yields its code. */
    mc__buf_reset(&b);
    assert_int_equal(
        mc__mp_encode_error_reply(&b, MC_MP_TASK_QUERY, 4, MC_ERR_TASK_NOT_FOUND, "no task"), 0);
    decode_frame(&b, &h);
    assert_int_equal(mc__tp_decode_query_reply(&h, b.data + 24, h.body_len, &info2),
                     MC_ERR_TASK_NOT_FOUND);
    mc__buf_free(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_roundtrip),
        cmocka_unit_test(test_other_roundtrips),
        cmocka_unit_test(test_encoder_limits),
        cmocka_unit_test(test_replies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
