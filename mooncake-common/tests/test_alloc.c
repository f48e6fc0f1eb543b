#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "mooncake/common/alloc.h"

static void test_counts_live_bytes(void **state) {
    int64_t base = mc__alloc_live_bytes();
    char *a = mc__malloc(100);
    char *b = mc__calloc(10, 30);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(mc__alloc_live_bytes() - base, 400);
    for (int i = 0; i < 300; i++)
        assert_int_equal(b[i], 0);
    a = mc__realloc(a, 1000);
    assert_non_null(a);
    assert_int_equal(mc__alloc_live_bytes() - base, 1300);
    a = mc__realloc(a, 10);
    assert_int_equal(mc__alloc_live_bytes() - base, 310);
    mc__free(a);
    mc__free(b);
    mc__free(NULL);
    assert_int_equal(mc__alloc_live_bytes(), base);
}

static void test_alignment(void **state) {
    for (size_t n = 1; n < 200; n += 7) {
        void *p = mc__malloc(n);
        assert_int_equal((uintptr_t)p % _Alignof(max_align_t), 0);
        mc__free(p);
    }
}

static void test_fail_injection(void **state) {
    void *a, *b, *c;
    mc__alloc_fail_after(3);
    a = mc__malloc(8);
    b = mc__strdup("xyz");
    c = mc__malloc(8);
    assert_non_null(a);
    assert_non_null(b);
    assert_null(c);
    assert_null(mc__malloc(1));      /* stays failing */
    assert_null(mc__realloc(a, 64)); /* a is untouched on failure */
    mc__alloc_fail_after(0);
    c = mc__malloc(8);
    assert_non_null(c);
    assert_string_equal(b, "xyz");
    mc__free(a);
    mc__free(b);
    mc__free(c);
}

static void test_overflow_and_strings(void **state) {
    char *s;
    assert_null(mc__calloc(SIZE_MAX / 2, 4));
    assert_null(mc__malloc(SIZE_MAX));
    s = mc__strndup("abcdef", 3);
    assert_string_equal(s, "abc");
    mc__free(s);
    s = mc__strndup("ab", 10);
    assert_string_equal(s, "ab");
    mc__free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_live_bytes),
        cmocka_unit_test(test_alignment),
        cmocka_unit_test(test_fail_injection),
        cmocka_unit_test(test_overflow_and_strings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
