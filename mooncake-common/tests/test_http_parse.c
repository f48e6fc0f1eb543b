#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <stdio.h>

#include "mooncake/common/http.h"

static int parse(const char *s, size_t max_body, mc_http_request_t *r) {
    return mc__http_parse_request((const uint8_t *)s, strlen(s), max_body, r);
}

static void test_complete_request(void **state) {
    mc_http_request_t r;
    const char *s = "PUT /meta%20data?key=a%2Fb&x=1 HTTP/1.1\r\nHost: h\r\n"
                    "Content-Length: 5\r\n\r\nhello";
    assert_int_equal(parse(s, 100, &r), 1);
    assert_string_equal(r.method, "PUT");
    assert_string_equal(r.path, "/meta data");
    assert_string_equal(r.query, "key=a%2Fb&x=1");
    assert_int_equal(r.content_length, 5);
    assert_int_equal(r.keep_alive, 1);
    assert_int_equal(r.head_len, strlen(s) - 5);
    assert_int_equal(parse("GET / HTTP/1.0\r\n\r\n", 0, &r), 1);
    assert_int_equal(r.keep_alive, 0);
    assert_int_equal(parse("GET / HTTP/1.1\r\nConnection: Close\r\n\r\n", 0, &r), 1);
    assert_int_equal(r.keep_alive, 0);
    assert_int_equal(parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", 0, &r), 1);
    assert_int_equal(r.keep_alive, 1);
}

static void test_incomplete(void **state) {
    mc_http_request_t r;
    const char *s = "GET /x HTTP/1.1\r\nHost: h\r\n\r\n";
    for (size_t n = 0; n < strlen(s); n++)
        assert_int_equal(mc__http_parse_request((const uint8_t *)s, n, 0, &r), 0);
}

static void test_rejects(void **state) {
    mc_http_request_t r;
    struct {
        const char *req;
        int want;
    } cases[] = {
        {"\x16\x03\x01garbage", -400},
        {"get / HTTP/1.1\r\n\r\n", -400},
        {"VERYLONGMETHOD / HTTP/1.1\r\n\r\n", -501},
        {"GET nopath HTTP/1.1\r\n\r\n", -400},
        {"GET / HTTP/2.0\r\n\r\n", -400},
        {"GET / HTTP/1.9\r\n\r\n", -505},
        {"GET /\r\n\r\n", -400},
        {"GET / HTTP/1.1\nHost: x\r\n\r\n", -400},
        {"GET / HTTP/1.1\r\nBad Header: x\r\n\r\n", -400},
        {"GET / HTTP/1.1\r\nNoColon\r\n\r\n", -400},
        {"GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n", -400},
        {"PUT / HTTP/1.1\r\nContent-Length: 101\r\n\r\n", -413},
        {"PUT / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n", -413},
        {"PUT / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", -400},
        {"PUT / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", -400},
        {"PUT / HTTP/1.1\r\nContent-Length: \r\n\r\n", -400},
        {"PUT / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", -501},
        {"GET /%zz HTTP/1.1\r\n\r\n", -400},
        {"GET /%00 HTTP/1.1\r\n\r\n", -400},
        {"GET /a\x01 HTTP/1.1\r\n\r\n", -400},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int rc = parse(cases[i].req, 100, &r);
        if (rc != cases[i].want)
            fprintf(stderr, "case %zu: got %d want %d\n", i, rc, cases[i].want);
        assert_int_equal(rc, cases[i].want);
    }
    /* embedded NUL in the head */
    const uint8_t nul[] = "GET / HTTP/1.1\r\nA: b\0c\r\n\r\n";
    assert_int_equal(mc__http_parse_request(nul, sizeof(nul) - 1, 0, &r), -400);
}

static void test_limits(void **state) {
    mc_http_request_t r;
    static char big[MC_HTTP_MAX_HEAD + 64];
    size_t n;
    /* head without an end: needs more until the limit, then 431 */
    n = (size_t)snprintf(big, sizeof(big), "GET / HTTP/1.1\r\nX: ");
    memset(big + n, 'a', sizeof(big) - n);
    assert_int_equal(mc__http_parse_request((uint8_t *)big, MC_HTTP_MAX_HEAD - 1, 0, &r), 0);
    assert_int_equal(mc__http_parse_request((uint8_t *)big, sizeof(big), 0, &r), -431);
    /* path longer than the request field */
    n = (size_t)snprintf(big, sizeof(big), "GET /");
    memset(big + n, 'p', 1500);
    n += 1500;
    n += (size_t)snprintf(big + n, sizeof(big) - n, " HTTP/1.1\r\n\r\n");
    assert_int_equal(mc__http_parse_request((uint8_t *)big, n, 0, &r), -414);
}

static void test_query(void **state) {
    char v[32];
    assert_int_equal(mc__http_query_get("key=a%2Fb+c&x=1", "key", v, sizeof(v)), 0);
    assert_string_equal(v, "a/b c");
    assert_int_equal(mc__http_query_get("keyx=1&key=2", "key", v, sizeof(v)), 0);
    assert_string_equal(v, "2");
    assert_int_equal(mc__http_query_get("a=1&key", "key", v, sizeof(v)), 0);
    assert_string_equal(v, "");
    assert_int_equal(mc__http_query_get("a=1", "key", v, sizeof(v)), -1);
    assert_int_equal(mc__http_query_get("", "key", v, sizeof(v)), -1);
    assert_int_equal(mc__http_query_get("key=%4", "key", v, sizeof(v)), -1);
    assert_int_equal(mc__http_query_get("key=%00", "key", v, sizeof(v)), -1);
    assert_int_equal(mc__http_query_get("key=0123456789", "key", v, 5), -1);
}

static void test_url_encode_roundtrip(void **state) {
    char enc[256], q[300], dec[128];
    const char *s = "mooncake/ram/node 1?&=%+\xc3\xa9";
    assert_int_equal(mc__http_url_encode(s, enc, sizeof(enc)), 0);
    assert_null(strpbrk(enc, "/ ?&=+"));
    snprintf(q, sizeof(q), "key=%s", enc);
    assert_int_equal(mc__http_query_get(q, "key", dec, sizeof(dec)), 0);
    assert_string_equal(dec, s);
    assert_int_equal(mc__http_url_encode("a/b", enc, 5), -1);
    assert_int_equal(mc__http_url_encode("ab", enc, 3), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_complete_request),
        cmocka_unit_test(test_incomplete),
        cmocka_unit_test(test_rejects),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_query),
        cmocka_unit_test(test_url_encode_roundtrip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
