/* The reply-wait spin policy (sock_spin.c) on fixed inputs: a thread's record of its spins. No
 * clock, no sockets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "mooncake/common/sock_spin.h"

#define WANT 20000u

static mc__spin_gov_t fresh(void) {
    return (mc__spin_gov_t){.score = 1024};
}

/* A fresh record spins the whole time asked; nothing asked is nothing spun. */
static void test_fresh(void **state) {
    mc__spin_gov_t g = fresh();
    (void)state;
    assert_int_equal(mc__spin_budget(&g, WANT), WANT);
    assert_int_equal(mc__spin_budget(&g, 0), 0);
    assert_int_equal(g.skips, 0); /* no probe was counted */
}

/* Spins that keep failing turn the spin off but for one probe in 16; answered probes turn it
 * back on. */
static void test_record(void **state) {
    mc__spin_gov_t g = fresh();
    int fails = 0;
    (void)state;
    while (mc__spin_budget(&g, WANT) == WANT) {
        mc__spin_note(&g, 0);
        fails++;
        assert_true(fails < 100);
    }
    /* ~8 failures halve an average over ~8 waits */
    assert_true(fails >= 4 && fails <= 8);
    /* off: one wait in 16 still spins */
    int spun = 0;
    for (int i = 0; i < 160; i++)
        if (mc__spin_budget(&g, WANT))
            spun++;
    assert_int_equal(spun, 10);
    /* probes that end with the answer: on again after a few */
    int probes = 0;
    while (g.score < 512) {
        mc__spin_note(&g, 1);
        probes++;
        assert_true(probes < 100);
    }
    assert_true(probes <= 8);
    assert_int_equal(mc__spin_budget(&g, WANT), WANT);
    /* success keeps it at the top, never past it */
    for (int i = 0; i < 1000; i++)
        mc__spin_note(&g, 1);
    assert_true(g.score <= 1024 && g.score >= 1000);
    for (int i = 0; i < 1000; i++)
        mc__spin_note(&g, 0);
    assert_int_equal(g.score, 7); /* x - x/8 stops at 7 */
}

/* Mixed results at 3 answered in 4 keep spinning; 1 in 4 does not. */
static void test_mixed(void **state) {
    mc__spin_gov_t g = fresh();
    (void)state;
    for (int i = 0; i < 400; i++)
        mc__spin_note(&g, i % 4 != 0);
    assert_int_equal(mc__spin_budget(&g, WANT), WANT);
    g = fresh();
    for (int i = 0; i < 400; i++)
        mc__spin_note(&g, i % 4 == 0);
    assert_int_equal(mc__spin_budget(&g, WANT), 0);
}

/* The live policy answers something sane on this host: nothing for nothing asked, at most what
 * was asked. */
static void test_live(void **state) {
    (void)state;
    assert_int_equal(mc__spin_allow(0), 0);
    for (int i = 0; i < 50; i++) {
        uint64_t b = mc__spin_allow(WANT);
        assert_true(b == 0 || b == WANT);
        mc__spin_result(1);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fresh),
        cmocka_unit_test(test_record),
        cmocka_unit_test(test_mixed),
        cmocka_unit_test(test_live),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
