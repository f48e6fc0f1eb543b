/* The flat YAML reader: what the reference's sample configs use, and clear errors for the rest. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "mooncake/common/yaml_flat.h"
#include "mooncake/error.h"

typedef struct seen {
    int n;
    char key[16][64];
    char value[16][128];
    int quoted[16];
    int line[16];
} seen_t;

static int collect(void *ctx, const mc__yaml_pair_t *p) {
    seen_t *s = ctx;
    if (s->n == 16)
        return -99;
    snprintf(s->key[s->n], sizeof(s->key[0]), "%s", p->key);
    snprintf(s->value[s->n], sizeof(s->value[0]), "%s", p->value);
    s->quoted[s->n] = p->quoted;
    s->line[s->n] = p->line;
    s->n++;
    return 0;
}

static int parse(const char *text, seen_t *s, char *err, size_t cap) {
    char buf[2048];
    snprintf(buf, sizeof(buf), "%s", text);
    memset(s, 0, sizeof(*s));
    return mc__yaml_flat_parse(buf, collect, s, err, cap);
}

static void test_sample_subset(void **state) {
    static const char text[] = "\xEF\xBB\xBF# a master config\n"
                               "---\n"
                               "enable_metric_reporting: true\r\n"
                               "rpc_port: 50051   # the RPC port\n"
                               "rpc_address: \"0.0.0.0\"\n"
                               "rpc_interface: \"\"\n"
                               "\n"
                               "   # an indented comment\n"
                               "eviction_ratio: 0.1\n"
                               "mode: 'it''s off'\n"
                               "url: http://localhost:2379#frag\n"
                               "esc: \"a\\tb\\\"c\\u00e9\\x41\"\n"
                               "empty:\n"
                               "nothing: ~\n"
                               "\"quoted key\": 1\n"
                               "...\n";
    seen_t s;
    char err[128];
    (void)state;
    assert_int_equal(parse(text, &s, err, sizeof(err)), 0);
    assert_int_equal(s.n, 11);
    assert_string_equal(s.key[0], "enable_metric_reporting");
    assert_string_equal(s.value[0], "true");
    assert_int_equal(s.line[0], 3);
    assert_string_equal(s.value[1], "50051");
    assert_string_equal(s.value[2], "0.0.0.0");
    assert_int_equal(s.quoted[2], 1);
    assert_string_equal(s.value[3], "");
    assert_int_equal(s.quoted[3], 1);
    assert_string_equal(s.value[4], "0.1");
    assert_string_equal(s.value[5], "it's off");
    assert_string_equal(s.value[6], "http://localhost:2379#frag");
    assert_string_equal(s.value[7], "a\tb\"c\xc3\xa9"
                                    "A");
    assert_string_equal(s.value[8], "");
    assert_int_equal(s.quoted[8], 0);
    assert_string_equal(s.value[9], "");
    assert_string_equal(s.key[10], "quoted key");
    assert_int_equal(s.line[10], 15);
}

static void expect_error(const char *text, int line, const char *why) {
    seen_t s;
    char err[160];
    char want[32];
    assert_int_equal(parse(text, &s, err, sizeof(err)), MC_ERR_INVALID_ARGUMENT);
    snprintf(want, sizeof(want), "line %d: ", line);
    if (strncmp(err, want, strlen(want)) != 0 || !strstr(err, why)) {
        print_error("for %s got '%s', wanted '%s...%s'\n", text, err, want, why);
        fail();
    }
}

static void test_refused(void **state) {
    (void)state;
    expect_error("a: 1\nnested:\n  b: 2\n", 3, "nested");
    expect_error("a: 1\n\tb: 2\n", 2, "tabs");
    expect_error("- item\n", 1, "sequences");
    expect_error("a: [1, 2]\n", 1, "flow");
    expect_error("a: {b: 1}\n", 1, "flow");
    expect_error("a: |\n  text\n", 1, "block scalars");
    expect_error("a: &x 1\n", 1, "anchors");
    expect_error("a: *x\n", 1, "anchors");
    expect_error("a: !!int 1\n", 1, "tags");
    expect_error("just text\n", 1, "key: value");
    expect_error("a: 1\nb: \"open\n", 2, "unterminated");
    expect_error("a: 'open\n", 1, "unterminated");
    expect_error("a: \"x\" y\n", 1, "after the closing quote");
    expect_error("a: \"\\q\"\n", 1, "unknown escape");
    expect_error("a: \"\\u00zz\"\n", 1, "hex");
    expect_error("a: \"\\ud800\"\n", 1, "surrogate");
    expect_error("a: \"\\0\"\n", 1, "NUL");
    expect_error("a: b: c\n", 1, "quote the value");
    expect_error(": 1\n", 1, "empty key");
    expect_error("a: 1\n---\nb: 2\n", 2, "second document");
    expect_error("a: 1\n...\nb: 2\n", 3, "document end");
    expect_error("%YAML 1.2\n", 1, "directives");
}

static int stop_at_second(void *ctx, const mc__yaml_pair_t *p) {
    int *n = ctx;
    (void)p;
    return ++*n == 2 ? -42 : 0;
}

static void test_callback_stops(void **state) {
    char text[] = "a: 1\nb: 2\nc: 3\n";
    char err[64];
    int n = 0;
    (void)state;
    assert_int_equal(mc__yaml_flat_parse(text, stop_at_second, &n, err, sizeof(err)), -42);
    assert_int_equal(n, 2);
    n = 0;
    char empty[] = "";
    assert_int_equal(mc__yaml_flat_parse(empty, stop_at_second, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sample_subset),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_callback_stops),
    };
    return cmocka_run_group_tests_name("common_yaml_flat", tests, NULL, NULL);
}
