#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "mooncake/error.h"

static void test_values_match_reference(void **state) {
    assert_int_equal(MC_ERR_ADDRESS_NOT_REGISTERED, -3);
    assert_int_equal(MC_ERR_OBJECT_NOT_FOUND, -704);
    assert_int_equal(MC_ERR_NO_AVAILABLE_HANDLE, -200);
    assert_int_equal(MC_ERR_FILE_NOT_FOUND, -1100);
}

static void test_names_by_domain(void **state) {
    assert_string_equal(mc_err_name(0), "OK");
    assert_string_equal(mc_err_name(-3), "ADDRESS_NOT_REGISTERED");
    /* -101 is DNS for the TE and SEGMENT_NOT_FOUND for the Store */
    assert_string_equal(mc_err_name(-101), "DNS");
    assert_string_equal(mc_store_err_name(-101), "SEGMENT_NOT_FOUND");
    assert_string_equal(mc_store_err_name(-1), "INTERNAL_ERROR");
    assert_string_equal(mc_err_name(-1), "INVALID_ARGUMENT");
    /* Store-only codes resolve through the TE accessor too (fallback). */
    assert_string_equal(mc_err_name(-704), "OBJECT_NOT_FOUND");
    assert_string_equal(mc_store_err_name(-3), "ADDRESS_NOT_REGISTERED");
}

static void test_messages(void **state) {
    assert_string_equal(mc_strerror(-704), "object not found");
    assert_string_equal(mc_store_strerror(-200), "no space available, even after eviction");
    assert_string_equal(mc_strerror(-200), "metadata error");
    assert_string_equal(mc_strerror(0), "success");
}

static void test_unknown_codes(void **state) {
    assert_string_equal(mc_err_name(-99999), "UNKNOWN");
    assert_string_equal(mc_store_err_name(12345), "UNKNOWN");
    assert_string_equal(mc_strerror(-5), "unknown error");
    assert_string_equal(mc_store_strerror(-5), "unknown error");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values_match_reference),
        cmocka_unit_test(test_names_by_domain),
        cmocka_unit_test(test_messages),
        cmocka_unit_test(test_unknown_codes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
