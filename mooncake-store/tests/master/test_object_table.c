/* The master's object table (objects.c) as a unit: records are found through its growths, and a
 * bucket array that a growth replaced stays readable, because batched look-ups prefetch through
 * the table without its shard's lock and may still be reading the old array. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "master/master_internal.h"
#include "mooncake/common/alloc.h"

static mc__object_t *insert_key(mc__shard_t *s, long i) {
    char key[32];
    int len = snprintf(key, sizeof(key), "key-%ld", i);
    mc__object_t *o = mc__object_new((const uint8_t *)key, (uint32_t)len,
                                     mc__key_hash((const uint8_t *)key, (uint32_t)len), 0);
    assert_non_null(o);
    mc__shard_insert(s, o);
    return o;
}

static void test_found_through_growths(void **state) {
    mc__shard_t s;
    enum { N = 20000 };
    (void)state;
    assert_int_equal(mc__shard_init(&s), 0);
    for (long i = 0; i < N; i++)
        insert_key(&s, i);
    assert_true(s.mask + 1 >= N); /* it grew: at most one record per bucket on average */
    for (long i = 0; i < N; i++) {
        char key[32];
        int len = snprintf(key, sizeof(key), "key-%ld", i);
        uint32_t h = mc__key_hash((const uint8_t *)key, (uint32_t)len);
        mc__object_t *o = mc__shard_find(&s, h, (const uint8_t *)key, (uint32_t)len);
        assert_non_null(o);
        assert_memory_equal(o->data, key, (size_t)len);
    }
    mc__shard_destroy(NULL, &s);
}

/* A prefetch that loaded the bucket array just before a growth goes on to read that array, so a
 * growth keeps the array it replaces (counted live by the allocator) until the shard goes; freed
 * at once, a large array can be unmapped and the read would fault (under AddressSanitizer, the
 * reads below are a use after free). */
static void test_replaced_array_stays_readable(void **state) {
    mc__shard_t s;
    mc__object_t **old;
    uint32_t old_n;
    int64_t base = mc__alloc_live_bytes(), before;
    long i = 0;
    volatile uintptr_t sink = 0;
    (void)state;
    assert_int_equal(mc__shard_init(&s), 0);
    while (s.mask + 1 < 1024)
        insert_key(&s, i++);
    while (s.count < s.mask + 1) /* the next insert grows the table */
        insert_key(&s, i++);
    old = s.buckets;
    old_n = s.mask + 1;
    before = mc__alloc_live_bytes();
    insert_key(&s, i++);
    assert_int_equal(s.mask + 1, 2 * old_n);
    /* the new array and the record came; the old array did not go */
    assert_true(mc__alloc_live_bytes() - before >= (int64_t)(2 * old_n * sizeof(*old)));
    for (uint32_t b = 0; b < old_n; b++)
        sink += (uintptr_t)__atomic_load_n(&old[b], __ATOMIC_RELAXED);
    for (long k = 0; k < i; k++) {
        char key[32];
        int len = snprintf(key, sizeof(key), "key-%ld", k);
        mc__shard_prefetch_object(&s, mc__key_hash((const uint8_t *)key, (uint32_t)len));
    }
    (void)sink;
    mc__shard_destroy(NULL, &s);
    assert_int_equal(mc__alloc_live_bytes(), base); /* the replaced arrays went with the shard */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_found_through_growths),
        cmocka_unit_test(test_replaced_array_stays_readable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
