/* The etcd gateway codec without an etcd: base64, answers as etcd 3.4/3.5 write them, request
 * bodies, and the watch stream's framing split at every byte. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/etcd.h"
#include "mooncake/error.h"

static void test_b64_roundtrip(void **state) {
    static const char *const vec[][2] = {{"", ""},
                                         {"f", "Zg=="},
                                         {"fo", "Zm8="},
                                         {"foo", "Zm9v"},
                                         {"foob", "Zm9vYg=="},
                                         {"fooba", "Zm9vYmE="},
                                         {"foobar", "Zm9vYmFy"}};
    uint8_t bin[256], back[256];
    char enc[400];
    size_t n;
    (void)state;
    for (size_t i = 0; i < sizeof(vec) / sizeof(vec[0]); i++) {
        mc__etcd_b64_encode(vec[i][0], strlen(vec[i][0]), enc);
        assert_string_equal(enc, vec[i][1]);
        assert_int_equal(mc__etcd_b64_len(strlen(vec[i][0])), strlen(vec[i][1]));
        assert_int_equal(mc__etcd_b64_decode(enc, strlen(enc), back, &n), 0);
        assert_int_equal(n, strlen(vec[i][0]));
        assert_memory_equal(back, vec[i][0], n);
    }
    for (size_t i = 0; i < sizeof(bin); i++)
        bin[i] = (uint8_t)(i * 7 + 3);
    for (size_t len = 0; len <= sizeof(bin); len++) {
        mc__etcd_b64_encode(bin, len, enc);
        assert_int_equal(mc__etcd_b64_decode(enc, strlen(enc), back, &n), 0);
        assert_int_equal(n, len);
        assert_memory_equal(back, bin, len);
    }
}

static void test_b64_rejects(void **state) {
    static const char *const bad[] = {"Zg=",   "Zg",   "Z===",     "Zh==", "Zm9=",   "Zm-v",
                                      "Zm9v=", "====", "Zg==Zg==", "Zm 9", "Zm9\x80"};
    uint8_t out[16];
    size_t n;
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(mc__etcd_b64_decode(bad[i], strlen(bad[i]), out, &n),
                         MC_ERR_MALFORMED_JSON);
}

static void test_parse_range(void **state) {
    static const char ok[] =
        "{\"header\":{\"cluster_id\":\"1\",\"member_id\":\"2\",\"revision\":\"42\",\"raft_term\":"
        "\"2\"},\"kvs\":[{\"key\":\"Zm9v\",\"create_revision\":\"2\",\"mod_revision\":\"40\","
        "\"version\":\"3\",\"value\":\"YmFy\",\"lease\":\"7587\"},{\"key\":\"Zm9vMg==\","
        "\"create_revision\":41,\"mod_revision\":41,\"version\":1}],\"more\":true,"
        "\"count\":\"5\"}";
    mc_etcd_kvs_t r;
    (void)state;
    assert_int_equal(mc__etcd_parse_range(ok, strlen(ok), &r), 0);
    assert_int_equal(r.revision, 42);
    assert_int_equal(r.n, 2);
    assert_int_equal(r.count, 5);
    assert_true(r.more);
    assert_string_equal((char *)r.kvs[0].key, "foo");
    assert_string_equal((char *)r.kvs[0].value, "bar");
    assert_int_equal(r.kvs[0].lease, 7587);
    assert_int_equal(r.kvs[0].mod_revision, 40);
    assert_string_equal((char *)r.kvs[1].key, "foo2");
    assert_int_equal(r.kvs[1].value_len, 0); /* an empty value is left out by the gateway */
    assert_int_equal(r.kvs[1].create_revision, 41);
    mc__etcd_kvs_free(&r);
    /* an empty range */
    assert_int_equal(mc__etcd_parse_range("{\"header\":{\"revision\":\"3\"}}", 27, &r), 0);
    assert_int_equal(r.n, 0);
    assert_int_equal(r.revision, 3);
    mc__etcd_kvs_free(&r);
}

static void test_parse_bad_answers(void **state) {
    static const char *const bad[] = {
        "",
        "{",
        "[1,2]",
        "null",
        "{\"header\":{},\"kvs\":[{\"key\":\"Zm9v\",\"value\":\"!!!!\"}]}", /* bad base64 */
        "{\"header\":{},\"kvs\":[{\"key\":\"Zm9\"}]}",                     /* truncated base64 */
        "{\"header\":{},\"kvs\":{\"key\":\"Zm9v\"}}",                      /* not an array */
        "{\"header\":{},\"kvs\":[7]}",
        "{\"header\":{},\"kvs\":[{\"key\":5}]}",
        "{\"header\":{\"revision\":\"x1\"}}",
        "{\"header\":{\"revision\":1.5}}",
        "{\"header\":\"r\"}",
        "{\"header\":{},\"count\":\"99999999999999999999999\"}",
        "{\"header\":{\"revision\":\"2\"},\"kvs\":[{\"key\":\"Zm9v\",\"mod_revision\":\"1",
    };
    mc_etcd_kvs_t r;
    mc_etcd_txn_result_t t;
    int64_t a, b;
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(mc__etcd_parse_range(bad[i], strlen(bad[i]), &r), MC_ERR_MALFORMED_JSON);
        assert_null(r.kvs);
    }
    assert_int_equal(mc__etcd_parse_txn("{\"responses\":[{\"response_range\":{\"kvs\":[{\"key\":"
                                        "\"@@@@\"}]}}]}",
                                        52, &t),
                     MC_ERR_MALFORMED_JSON);
    assert_int_equal(mc__etcd_parse_txn("{\"responses\":3}", 15, &t), MC_ERR_MALFORMED_JSON);
    assert_int_equal(mc__etcd_parse_txn("{\"responses\":[]}", 16, &t), MC_ERR_MALFORMED_JSON);
    assert_int_equal(mc__etcd_parse_range("{\"kvs\":[]}", 10, &r), MC_ERR_MALFORMED_JSON);
    assert_int_equal(mc__etcd_parse_write("{}", 2, &a, &b), MC_ERR_MALFORMED_JSON);
    assert_int_equal(mc__etcd_parse_lease("{\"ID\":[]}", 9, &a, &b), MC_ERR_MALFORMED_JSON);
    assert_int_equal(mc__etcd_parse_write("{\"header\":{},\"deleted\":true}", 28, &a, &b),
                     MC_ERR_MALFORMED_JSON);
}

static void test_parse_txn_and_leases(void **state) {
    static const char txn[] =
        "{\"header\":{\"revision\":\"9\"},\"succeeded\":true,\"responses\":[{\"response_put\":"
        "{\"header\":{\"revision\":\"9\"}}},{\"response_range\":{\"header\":{\"revision\":\"9\"},"
        "\"kvs\":[{\"key\":\"YQ==\",\"value\":\"Yg==\"}],\"count\":\"1\"}},"
        "{\"response_delete_range\":{\"deleted\":\"2\"}}]}";
    static const char failed[] = "{\"header\":{\"revision\":\"9\"},\"responses\":[]}";
    mc_etcd_txn_result_t t;
    int64_t id, ttl, g;
    char msg[128];
    (void)state;
    assert_int_equal(mc__etcd_parse_txn(txn, strlen(txn), &t), 0);
    assert_true(t.succeeded);
    assert_int_equal(t.revision, 9);
    assert_int_equal(t.n, 3);
    assert_int_equal(t.ranges[0].n, 0);
    assert_int_equal(t.ranges[1].n, 1);
    assert_string_equal((char *)t.ranges[1].kvs[0].value, "b");
    assert_int_equal(t.deleted[2], 2);
    mc__etcd_txn_result_free(&t);
    assert_int_equal(mc__etcd_parse_txn(failed, strlen(failed), &t), 0);
    assert_false(t.succeeded); /* left out by the gateway when false */
    mc__etcd_txn_result_free(&t);

    assert_int_equal(
        mc__etcd_parse_lease("{\"header\":{},\"ID\":\"77\",\"TTL\":\"5\"}", 33, &id, &ttl), 0);
    assert_int_equal(id, 77);
    assert_int_equal(ttl, 5);
    /* keep-alive answers are wrapped in "result"; a gone lease has no TTL */
    assert_int_equal(mc__etcd_parse_lease("{\"result\":{\"ID\":\"77\"}}", 22, &id, &ttl), 0);
    assert_int_equal(id, 77);
    assert_int_equal(ttl, 0);
    (void)g;

    assert_int_equal(
        mc__etcd_parse_error("{\"error\":\"etcdserver: requested lease not found\","
                             "\"message\":\"etcdserver: requested lease not found\","
                             "\"code\":5}",
                             strlen("{\"error\":\"etcdserver: requested lease not "
                                    "found\",\"message\":\"etcdserver: requested lease "
                                    "not found\",\"code\":5}"),
                             msg, sizeof(msg)),
        5);
    assert_string_equal(msg, "etcdserver: requested lease not found");
    assert_int_equal(
        mc__etcd_parse_error("{\"error\":{\"grpc_code\":14,\"message\":\"no leader\"}}", 48, msg,
                             sizeof(msg)),
        14);
    assert_string_equal(msg, "no leader");
    assert_int_equal(mc__etcd_parse_error("{\"kvs\":[]}", 10, msg, sizeof(msg)), -1);
    assert_int_equal(mc__etcd_parse_error("<html>", 6, msg, sizeof(msg)), -1);
}

static void test_build_txn(void **state) {
    mc_etcd_cmp_t cmp[2] = {
        {.target = MC_ETCD_CMP_VERSION, .result = MC_ETCD_EQUAL, .key = "k", .key_len = 1},
        {.target = MC_ETCD_CMP_VALUE,
         .result = MC_ETCD_NOT_EQUAL,
         .key = "k",
         .key_len = 1,
         .value = "v",
         .value_len = 1}};
    mc_etcd_op_t ok[2] = {{.type = MC_ETCD_OP_PUT,
                           .key = "k",
                           .key_len = 1,
                           .value = "v",
                           .value_len = 1,
                           .lease = 12},
                          {.type = MC_ETCD_OP_DELETE,
                           .key = "a",
                           .key_len = 1,
                           .range_end = "b",
                           .range_end_len = 1}};
    mc_etcd_op_t ko = {.type = MC_ETCD_OP_RANGE, .key = "k", .key_len = 1};
    mc_etcd_op_t bad = {.type = 9, .key = "k", .key_len = 1};
    char *j = NULL;
    (void)state;
    assert_int_equal(mc__etcd_build_txn(cmp, 2, ok, 2, &ko, 1, &j), 0);
    assert_string_equal(
        j, "{\"compare\":[{\"target\":\"VERSION\",\"result\":\"EQUAL\",\"key\":\"aw==\","
           "\"version\":\"0\"},{\"target\":\"VALUE\",\"result\":\"NOT_EQUAL\",\"key\":\"aw==\","
           "\"value\":\"dg==\"}],\"success\":[{\"request_put\":{\"key\":\"aw==\",\"value\":"
           "\"dg==\",\"lease\":\"12\"}},{\"request_delete_range\":{\"key\":\"YQ==\","
           "\"range_end\":\"Yg==\"}}],\"failure\":[{\"request_range\":{\"key\":\"aw==\"}}]}");
    mc__free(j);
    assert_int_equal(mc__etcd_build_txn(NULL, 0, NULL, 0, NULL, 0, &j), 0);
    assert_string_equal(j, "{\"compare\":[],\"success\":[],\"failure\":[]}");
    mc__free(j);
    assert_int_equal(mc__etcd_build_txn(cmp, 1, &bad, 1, NULL, 0, &j), MC_ERR_INVALID_ARGUMENT);
    assert_null(j);
    assert_int_equal(mc__etcd_build_txn(NULL, 1, NULL, 0, NULL, 0, &j), MC_ERR_INVALID_ARGUMENT);
}

static void test_prefix_end(void **state) {
    uint8_t out[8];
    (void)state;
    assert_int_equal(mc__etcd_prefix_end("abc", 3, out), 3);
    assert_memory_equal(out, "abd", 3);
    assert_int_equal(mc__etcd_prefix_end("a\xff", 2, out), 1);
    assert_memory_equal(out, "b", 1);
    assert_int_equal(mc__etcd_prefix_end("\xff\xff", 2, out), 1);
    assert_int_equal(out[0], 0);
}

/* --- the watch stream --- */
typedef struct msgs {
    char got[8][512];
    size_t n;
} msgs_t;

static int collect(void *ctx, const char *m, size_t len) {
    msgs_t *s = ctx;
    if (s->n == 8 || len >= 512)
        return MC_ERR_INVALID_ARGUMENT;
    memcpy(s->got[s->n], m, len);
    s->got[s->n][len] = '\0';
    s->n++;
    return 0;
}

static const char stream_bytes[] =
    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    "1c\r\n{\"result\":{\"created\":true}}\n\r\n"
    /* one message split over two chunks, then two messages in one chunk */
    "a\r\n{\"result\":\r\n"
    "15\r\n{\"events\":[{}]}}\n{\"a\"\r\n"
    "5;ext=1\r\n:1}\n\n\r\n"
    "0\r\n\r\n";

static void test_stream_split_everywhere(void **state) {
    size_t total = strlen(stream_bytes);
    (void)state;
    for (size_t cut = 0; cut <= total; cut++) {
        mc_etcd_stream_t st;
        msgs_t m = {.n = 0};
        mc__etcd_stream_init(&st, 0);
        assert_int_equal(mc__etcd_stream_feed(&st, (const uint8_t *)stream_bytes, cut, collect, &m),
                         0);
        assert_int_equal(mc__etcd_stream_feed(&st, (const uint8_t *)stream_bytes + cut, total - cut,
                                              collect, &m),
                         0);
        assert_int_equal(mc__etcd_stream_end(&st, collect, &m), 0);
        assert_int_equal(st.status, 200);
        assert_int_equal(m.n, 3);
        assert_string_equal(m.got[0], "{\"result\":{\"created\":true}}");
        assert_string_equal(m.got[1], "{\"result\":{\"events\":[{}]}}");
        assert_string_equal(m.got[2], "{\"a\":1}");
        mc__etcd_stream_free(&st);
    }
    /* byte by byte */
    {
        mc_etcd_stream_t st;
        msgs_t m = {.n = 0};
        mc__etcd_stream_init(&st, 0);
        for (size_t i = 0; i < total; i++)
            assert_int_equal(
                mc__etcd_stream_feed(&st, (const uint8_t *)stream_bytes + i, 1, collect, &m), 0);
        assert_int_equal(m.n, 3);
        mc__etcd_stream_free(&st);
    }
}

static int feed_all(const char *bytes, size_t max_msg, msgs_t *m) {
    mc_etcd_stream_t st;
    int rc;
    mc__etcd_stream_init(&st, max_msg);
    rc = mc__etcd_stream_feed(&st, (const uint8_t *)bytes, strlen(bytes), collect, m);
    if (!rc)
        rc = mc__etcd_stream_end(&st, collect, m);
    mc__etcd_stream_free(&st);
    return rc;
}

static void test_stream_bad(void **state) {
    msgs_t m = {.n = 0};
    static const char big[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                              "40\r\n0123456789012345678901234567890123456789012345678901234567"
                              "890123\r\n0\r\n\r\n";
    (void)state;
    assert_int_equal(feed_all("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 0, &m),
                     MC_ERR_MALFORMED_JSON);
    assert_int_equal(feed_all("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                              "ffffffffffffffff\r\n",
                              0, &m),
                     MC_ERR_MALFORMED_JSON);
    assert_int_equal(
        feed_all("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX", 0, &m),
        MC_ERR_MALFORMED_JSON);
    assert_int_equal(feed_all("SMTP ready\r\n\r\n", 0, &m), MC_ERR_MALFORMED_JSON);
    /* a message past the bound */
    assert_int_equal(feed_all(big, 16, &m), MC_ERR_MALFORMED_JSON);
    /* a stream cut before its last chunk */
    assert_int_equal(
        feed_all("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nab", 0, &m),
        MC_ERR_MALFORMED_JSON);
    /* an error answer read to the end is one message */
    m.n = 0;
    assert_int_equal(feed_all("HTTP/1.1 400 Bad Request\r\nContent-Length: 20\r\n\r\n"
                              "{\"error\":\"x\",\n\"code\":3}",
                              0, &m),
                     0);
    assert_int_equal(m.n, 1);
    assert_string_equal(m.got[0], "{\"error\":\"x\",\n\"code\":3}");
}

static void test_watch_msg(void **state) {
    static const char ev[] =
        "{\"result\":{\"header\":{\"revision\":\"5\"},\"events\":[{\"kv\":{\"key\":\"Zm9v\","
        "\"create_revision\":\"4\",\"mod_revision\":\"4\",\"version\":\"1\",\"value\":\"YmFy\"}},"
        "{\"type\":\"DELETE\",\"kv\":{\"key\":\"Zm9v\",\"mod_revision\":\"5\"}}]}}";
    static const char cancel[] = "{\"result\":{\"header\":{\"revision\":\"9\"},\"canceled\":true,"
                                 "\"compact_revision\":\"7\",\"cancel_reason\":\"compacted\"}}";
    mc_etcd_watch_msg_t m;
    (void)state;
    assert_int_equal(mc__etcd_parse_watch_msg(ev, strlen(ev), &m), 0);
    assert_int_equal(m.revision, 5);
    assert_int_equal(m.n, 2);
    assert_int_equal(m.events[0].type, MC_ETCD_EVENT_PUT);
    assert_string_equal((char *)m.events[0].kv.value, "bar");
    assert_int_equal(m.events[1].type, MC_ETCD_EVENT_DELETE);
    assert_int_equal(m.events[1].kv.mod_revision, 5);
    mc__etcd_watch_msg_free(&m);
    assert_int_equal(mc__etcd_parse_watch_msg(cancel, strlen(cancel), &m), 0);
    assert_true(m.canceled);
    assert_int_equal(m.compact_revision, 7);
    assert_string_equal(m.cancel_reason, "compacted");
    mc__etcd_watch_msg_free(&m);
    assert_int_equal(mc__etcd_parse_watch_msg("{\"result\":{\"events\":[{\"type\":\"MOVE\",\"kv\":"
                                              "{}}]}}",
                                              41, &m),
                     MC_ERR_MALFORMED_JSON);
    assert_int_equal(mc__etcd_parse_watch_msg("{\"result\":{\"events\":[{\"kv\":3}]}}", 32, &m),
                     MC_ERR_MALFORMED_JSON);
    assert_int_equal(mc__etcd_parse_watch_msg("{\"error\":{\"message\":\"x\"}}", 25, &m),
                     MC_ERR_MALFORMED_JSON);
}

/* Every allocation failing in turn: an error comes back and nothing leaks. */
static void test_alloc_failures(void **state) {
    static const char ev[] =
        "{\"result\":{\"events\":[{\"kv\":{\"key\":\"Zm9v\",\"value\":\"YmFy\"}},"
        "{\"kv\":{\"key\":\"Zm9v\"}}]}}";
    int64_t live = mc__alloc_live_bytes();
    (void)state;
    for (uint64_t k = 1; k < 40; k++) {
        mc_etcd_watch_msg_t m;
        mc__alloc_fail_after(k);
        int rc = mc__etcd_parse_watch_msg(ev, strlen(ev), &m);
        mc__alloc_fail_after(0);
        if (rc == 0)
            mc__etcd_watch_msg_free(&m);
        else
            assert_true(rc == MC_ERR_MEMORY || rc == MC_ERR_MALFORMED_JSON);
        assert_int_equal(mc__alloc_live_bytes(), live);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_b64_roundtrip),        cmocka_unit_test(test_b64_rejects),
        cmocka_unit_test(test_parse_range),          cmocka_unit_test(test_parse_bad_answers),
        cmocka_unit_test(test_parse_txn_and_leases), cmocka_unit_test(test_build_txn),
        cmocka_unit_test(test_prefix_end),           cmocka_unit_test(test_stream_split_everywhere),
        cmocka_unit_test(test_stream_bad),           cmocka_unit_test(test_watch_msg),
        cmocka_unit_test(test_alloc_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
