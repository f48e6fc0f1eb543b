/* Durations as the reference's master flags take them ("10s", "500ms", plain milliseconds). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "mooncake/common/config.h"
#include "mooncake/error.h"

static void test_units(void **state) {
    uint64_t v = 0;
    (void)state;
    assert_int_equal(mc__parse_duration_ms("10000", &v), 0);
    assert_int_equal(v, 10000);
    assert_int_equal(mc__parse_duration_ms("500ms", &v), 0);
    assert_int_equal(v, 500);
    assert_int_equal(mc__parse_duration_ms("10s", &v), 0);
    assert_int_equal(v, 10000);
    assert_int_equal(mc__parse_duration_ms("2m", &v), 0);
    assert_int_equal(v, 120000);
    assert_int_equal(mc__parse_duration_ms("1h", &v), 0);
    assert_int_equal(v, 3600000);
    assert_int_equal(mc__parse_duration_ms(" 3 S ", &v), 0);
    assert_int_equal(v, 3000);
    assert_int_equal(mc__parse_duration_ms("0", &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(mc__parse_duration_ms("18446744073709551615", &v), 0);
    assert_true(v == UINT64_MAX);
}

static void test_bad(void **state) {
    static const char *const bad[] = {"",
                                      " ",
                                      "s",
                                      "-1",
                                      "+1",
                                      "1.5s",
                                      "10x",
                                      "10 s s",
                                      "10sec",
                                      "1d",
                                      "0x10",
                                      "10ms5",
                                      "18446744073709551616",
                                      "18446744073709551615s",
                                      "5124095576030432h"};
    uint64_t v = 77;
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(mc__parse_duration_ms(bad[i], &v), MC_ERR_INVALID_ARGUMENT);
        assert_int_equal(v, 77); /* untouched */
    }
    assert_int_equal(mc__parse_duration_ms(NULL, &v), MC_ERR_INVALID_ARGUMENT);
}

static void test_flag(void **state) {
    uint64_t ttl = 1;
    mc_flag_t f[] = {{"ttl", MC_FLAG_DURATION_MS, &ttl, "a duration"}};
    char *ok[] = {"prog", "--ttl=10s", NULL};
    char *bad[] = {"prog", "--ttl=ten", NULL};
    (void)state;
    assert_int_equal(mc__flags_parse(2, ok, f, 1, "prog", "1", NULL), 0);
    assert_int_equal(ttl, 10000);
    assert_int_equal(mc__flags_parse(2, bad, f, 1, "prog", "1", NULL), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(ttl, 10000);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_units),
        cmocka_unit_test(test_bad),
        cmocka_unit_test(test_flag),
    };
    return cmocka_run_group_tests_name("common_duration", tests, NULL, NULL);
}
