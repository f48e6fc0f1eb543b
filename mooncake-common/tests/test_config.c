#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "mooncake/common/config.h"
#include "mooncake/error.h"

static void test_sizes(void **state) {
    uint64_t v = 0;
    assert_int_equal(mc__parse_size("1024", &v), 0);
    assert_int_equal(v, 1024);
    assert_int_equal(mc__parse_size("4gb", &v), 0);
    assert_true(v == 4ull << 30);
    assert_int_equal(mc__parse_size("512MB", &v), 0);
    assert_true(v == 512ull << 20);
    assert_int_equal(mc__parse_size(" 3 KiB ", &v), 0);
    assert_int_equal(v, 3072);
    assert_int_equal(mc__parse_size("2t", &v), 0);
    assert_true(v == 2ull << 40);
    assert_int_equal(mc__parse_size("1.5g", &v), 0);
    assert_true(v == 3ull << 29);
    assert_int_equal(mc__parse_size("10b", &v), 0);
    assert_int_equal(v, 10);
    const char *bad[] = {
        "",           "gb",    "-1",  "-1gb", "12abc", "1 2",  "1pb", "99999999999999999999",
        "16777216tb", "1e400", "nan", "+5",   "0x10",  "1.5.5"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        v = 77;
        assert_int_equal(mc__parse_size(bad[i], &v), MC_ERR_INVALID_ARGUMENT);
        assert_int_equal(v, 77);
    }
    assert_int_equal(mc__parse_size(NULL, &v), MC_ERR_INVALID_ARGUMENT);
}

static void test_numbers_and_bools(void **state) {
    int64_t i = 0;
    double d = 0;
    int b = -1;
    assert_int_equal(mc__parse_i64("-42", &i), 0);
    assert_int_equal(i, -42);
    assert_int_equal(mc__parse_i64("42x", &i), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc__parse_i64("", &i), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc__parse_i64("9223372036854775808", &i), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc__parse_double("0.25", &d), 0);
    assert_true(d == 0.25);
    assert_int_equal(mc__parse_double("inf", &d), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc__parse_double("1.0.0", &d), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc__parse_bool("TRUE", &b), 0);
    assert_int_equal(b, 1);
    assert_int_equal(mc__parse_bool("off", &b), 0);
    assert_int_equal(b, 0);
    assert_int_equal(mc__parse_bool("maybe", &b), MC_ERR_INVALID_ARGUMENT);
}

typedef struct {
    int verbose;
    int64_t port;
    double ratio;
    const char *host;
    uint64_t size;
    mc_flag_t flags[5];
} opts_t;

static void opts_init(opts_t *o) {
    memset(o, 0, sizeof(*o));
    o->verbose = 1;
    o->port = 8080;
    o->ratio = 0.5;
    o->host = "0.0.0.0";
    o->size = 1024;
    o->flags[0] = (mc_flag_t){"verbose", MC_FLAG_BOOL, &o->verbose, "log more"};
    o->flags[1] = (mc_flag_t){"port", MC_FLAG_INT, &o->port, "port"};
    o->flags[2] = (mc_flag_t){"ratio", MC_FLAG_DOUBLE, &o->ratio, "ratio"};
    o->flags[3] = (mc_flag_t){"host", MC_FLAG_STRING, &o->host, "host"};
    o->flags[4] = (mc_flag_t){"size", MC_FLAG_SIZE, &o->size, "size"};
}

static int parse(opts_t *o, int argc, char **argv) {
    return mc__flags_parse(argc, argv, o->flags, 5, "prog", "1.2.3", "prog [flags]");
}

static void test_flags_forms(void **state) {
    opts_t o;
    char *argv[] = {"prog",      "--port=9000", "-ratio",     "0.75", "--host",
                    "127.0.0.1", "--noverbose", "--size=2mb", NULL};
    opts_init(&o);
    assert_int_equal(parse(&o, 8, argv), 0);
    assert_int_equal(o.port, 9000);
    assert_true(o.ratio == 0.75);
    assert_string_equal(o.host, "127.0.0.1");
    assert_int_equal(o.verbose, 0);
    assert_int_equal(o.size, 2 << 20);
    char *argv2[] = {"prog", "--verbose", "--verbose=false", "--verbose", NULL};
    assert_int_equal(parse(&o, 4, argv2), 0);
    assert_int_equal(o.verbose, 1);
}

static void test_flags_errors(void **state) {
    opts_t o;
    char *unknown[] = {"prog", "--bogus=1", NULL};
    char *badval[] = {"prog", "--port=eighty", NULL};
    char *missing[] = {"prog", "--port", NULL};
    char *positional[] = {"prog", "extra", NULL};
    char *nobool[] = {"prog", "--noport", NULL};
    char *badsize[] = {"prog", "--size=-3", NULL};
    char *empty[] = {"prog", "--=3", NULL};
    opts_init(&o);
    assert_int_equal(parse(&o, 2, unknown), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(parse(&o, 2, badval), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(o.port, 8080);
    assert_int_equal(parse(&o, 2, missing), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(parse(&o, 2, positional), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(parse(&o, 2, nobool), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(parse(&o, 2, badsize), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(parse(&o, 2, empty), MC_ERR_INVALID_ARGUMENT);
}

static void test_flags_help_version(void **state) {
    opts_t o;
    char *help[] = {"prog", "--port=1", "--help", NULL};
    char *version[] = {"prog", "-version", NULL};
    opts_init(&o);
    assert_int_equal(parse(&o, 3, help), 1);
    assert_int_equal(parse(&o, 2, version), 2);
}

/* gflags' built-ins: --flagfile (comments, nested files, a bad line), --fromenv/--tryfromenv,
 * --undefok (before or after the flags it excuses), --helpshort. */
static void test_flags_gflags_builtins(void **state) {
    opts_t o;
    char dir[] = "/tmp/mc_flagfile_XXXXXX";
    char inner[64], outer[64], bad[64], loop[64];
    assert_non_null(mkdtemp(dir));
    snprintf(inner, sizeof(inner), "%s/inner", dir);
    snprintf(outer, sizeof(outer), "%s/outer", dir);
    snprintf(bad, sizeof(bad), "%s/bad", dir);
    snprintf(loop, sizeof(loop), "%s/loop", dir);
    FILE *f = fopen(inner, "w");
    fprintf(f, "--size=4kb\n");
    fclose(f);
    f = fopen(outer, "w");
    fprintf(f, "# a comment\n\n  --port=7000\n--host=10.0.0.1 \n--flagfile=%s\n", inner);
    fclose(f);
    f = fopen(bad, "w");
    fprintf(f, "--port=7000\nport=1\n");
    fclose(f);
    f = fopen(loop, "w");
    fprintf(f, "--flagfile=%s\n", loop);
    fclose(f);
    char ff[128];
    snprintf(ff, sizeof(ff), "--flagfile=%s", outer);
    char *a1[] = {"prog", ff, "--port=7001", NULL};
    opts_init(&o);
    assert_int_equal(parse(&o, 3, a1), 0);
    assert_int_equal(o.port, 7001); /* later on the line wins, as in gflags */
    assert_string_equal(o.host, "10.0.0.1");
    assert_int_equal(o.size, 4096);
    char *a2[] = {"prog", "--flagfile", bad, NULL};
    assert_int_equal(parse(&o, 3, a2), MC_ERR_INVALID_ARGUMENT);
    char *a3[] = {"prog", "--flagfile", loop, NULL};
    assert_int_equal(parse(&o, 3, a3), MC_ERR_INVALID_ARGUMENT);
    char *a4[] = {"prog", "--flagfile=/nonexistent/flags", NULL};
    assert_int_equal(parse(&o, 2, a4), MC_ERR_INVALID_ARGUMENT);

    setenv("FLAGS_port", "6500", 1);
    unsetenv("FLAGS_ratio");
    char *e1[] = {"prog", "--fromenv=port", "--tryfromenv=ratio", NULL};
    opts_init(&o);
    assert_int_equal(parse(&o, 3, e1), 0);
    assert_int_equal(o.port, 6500);
    assert_true(o.ratio == 0.5);
    char *e2[] = {"prog", "--fromenv=ratio", NULL};
    assert_int_equal(parse(&o, 2, e2), MC_ERR_INVALID_ARGUMENT);
    char *e3[] = {"prog", "--fromenv=bogus", NULL};
    assert_int_equal(parse(&o, 2, e3), MC_ERR_INVALID_ARGUMENT);
    setenv("FLAGS_port", "eighty", 1);
    char *e4[] = {"prog", "--fromenv=port", NULL};
    assert_int_equal(parse(&o, 2, e4), MC_ERR_INVALID_ARGUMENT);
    unsetenv("FLAGS_port");

    char *u1[] = {"prog", "--bogus=1", "--nofoo", "--port=1", "--undefok=bogus,foo", NULL};
    opts_init(&o);
    assert_int_equal(parse(&o, 5, u1), 0);
    assert_int_equal(o.port, 1);
    char *u2[] = {"prog", "--undefok=foo", "--bogus=1", NULL};
    assert_int_equal(parse(&o, 3, u2), MC_ERR_INVALID_ARGUMENT);
    char *u3[] = {"prog", "--undefok=port", "--port=eighty", NULL}; /* known flags stay checked */
    assert_int_equal(parse(&o, 3, u3), MC_ERR_INVALID_ARGUMENT);

    char *h[] = {"prog", "--helpshort", NULL};
    assert_int_equal(parse(&o, 2, h), 1);
    unlink(inner);
    unlink(outer);
    unlink(bad);
    unlink(loop);
    rmdir(dir);
}

static void test_env(void **state) {
    uint64_t sz = 0;
    int64_t i = 0;
    int b = 0;
    unsetenv("MC_TEST_ENV");
    assert_string_equal(mc__env_str("MC_TEST_ENV", "dflt"), "dflt");
    assert_int_equal(mc__env_size("MC_TEST_ENV", 7, &sz), 0);
    assert_int_equal(sz, 7);
    setenv("MC_TEST_ENV", "", 1);
    assert_string_equal(mc__env_str("MC_TEST_ENV", "dflt"), "dflt");
    setenv("MC_TEST_ENV", "2gb", 1);
    assert_int_equal(mc__env_size("MC_TEST_ENV", 7, &sz), 0);
    assert_true(sz == 2ull << 30);
    assert_int_equal(mc__env_i64("MC_TEST_ENV", 5, &i), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(i, 5);
    assert_int_equal(mc__env_bool("MC_TEST_ENV", 1, &b), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(b, 1);
    setenv("MC_TEST_ENV", "off", 1);
    assert_int_equal(mc__env_bool("MC_TEST_ENV", 1, &b), 0);
    assert_int_equal(b, 0);
    setenv("MC_TEST_ENV", "-12", 1);
    assert_int_equal(mc__env_i64("MC_TEST_ENV", 5, &i), 0);
    assert_int_equal(i, -12);
    assert_int_equal(mc__env_size("MC_TEST_ENV", 9, &sz), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(sz, 9);
    unsetenv("MC_TEST_ENV");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_numbers_and_bools),
        cmocka_unit_test(test_flags_forms),
        cmocka_unit_test(test_flags_errors),
        cmocka_unit_test(test_flags_help_version),
        cmocka_unit_test(test_flags_gflags_builtins),
        cmocka_unit_test(test_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
