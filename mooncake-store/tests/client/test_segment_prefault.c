/* Faulting a segment in ahead of use (client/segment_prefault.h): every page resident after a
 * run, contents kept, a background run that ends on its own or promptly when stopped, the guard
 * against committing more than the host can spare, and what a user may set. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "client/segment_prefault.h"
#include "mooncake/common/mem_probe.h"
#include "mooncake/common/time.h"

/* A shared memfd mapping, as the engine allocates a segment. */
static uint8_t *map_segment(size_t len, int *fd) {
    *fd = memfd_create("prefault-test", MFD_CLOEXEC);
    assert_true(*fd >= 0);
    assert_int_equal(ftruncate(*fd, (off_t)len), 0);
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
    assert_true(p != MAP_FAILED);
    return p;
}

static void unmap_segment(uint8_t *p, size_t len, int fd) {
    munmap(p, len);
    close(fd);
}

/* Pages of [p, p + len) resident now. */
static size_t resident_pages(const uint8_t *p, size_t len) {
    size_t pg = (size_t)sysconf(_SC_PAGESIZE), n = (len + pg - 1) / pg, k = 0;
    unsigned char *v = malloc(n);
    assert_non_null(v);
    assert_int_equal(mincore((void *)p, len, v), 0);
    for (size_t i = 0; i < n; i++)
        k += v[i] & 1;
    free(v);
    return k;
}

static int populate_supported(void) {
    static char page[1 << 16] __attribute__((aligned(1 << 16)));
    return mc__mem_populate(page, sizeof(page), 1) == 0;
}

static void test_mode_from_environment(void **state) {
    (void)state;
    static const struct {
        const char *v;
        mc__prefault_mode_t m;
    } cases[] = {{"background", MC__PREFAULT_BACKGROUND},
                 {"BACKGROUND", MC__PREFAULT_BACKGROUND},
                 {"1", MC__PREFAULT_BACKGROUND},
                 {"true", MC__PREFAULT_BACKGROUND},
                 {"sync", MC__PREFAULT_SYNC},
                 {"Sync", MC__PREFAULT_SYNC},
                 {"off", MC__PREFAULT_OFF},
                 {"0", MC__PREFAULT_OFF},
                 {"false", MC__PREFAULT_OFF},
                 {"", MC__PREFAULT_OFF},
                 {"eager", MC__PREFAULT_OFF},
                 {"2", MC__PREFAULT_OFF}};
    unsetenv("MC_STORE_SEGMENT_PREFAULT");
    assert_int_equal(mc__prefault_mode(), MC__PREFAULT_OFF);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        setenv("MC_STORE_SEGMENT_PREFAULT", cases[i].v, 1);
        assert_int_equal(mc__prefault_mode(), cases[i].m);
    }
    unsetenv("MC_STORE_SEGMENT_PREFAULT");
}

/* sync: every page resident when it returns, and what was written before is still there (the
 * advice faults pages in without writing them, so it may overlap transfers into them). */
static void test_sync_faults_every_page_in_and_keeps_contents(void **state) {
    (void)state;
    if (!populate_supported())
        skip();
    const size_t len = 6u << 20; /* three chunks */
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    int fd;
    uint8_t *p = map_segment(len, &fd);
    memset(p, 0xa5, pg);
    memset(p + len / 2, 0x5a, 3 * pg);
    assert_int_equal(resident_pages(p, len), 4);
    mc__prefault_t pf = {0};
    mc__prefault_start(&pf, p, len, MC__PREFAULT_SYNC);
    assert_int_equal(resident_pages(p, len), len / pg);
    assert_int_equal(atomic_load(&pf.done), len);
    assert_int_equal(atomic_load(&pf.ended), 1);
    assert_int_equal(pf.started, 0);
    for (size_t i = 0; i < pg; i++)
        assert_int_equal(p[i], 0xa5);
    for (size_t i = 0; i < 3 * pg; i++)
        assert_int_equal(p[len / 2 + i], 0x5a);
    assert_int_equal(p[pg], 0); /* a page faulted in by the run reads as zeros */
    mc__prefault_stop(&pf);     /* nothing to join: harmless */
    unmap_segment(p, len, fd);
}

/* background: ends on its own with every page resident (a generous deadline for a busy host),
 * and the stop after it is a join of a finished thread. */
static void test_background_ends_with_every_page_in(void **state) {
    (void)state;
    if (!populate_supported())
        skip();
    const size_t len = 4u << 20;
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    int fd;
    uint8_t *p = map_segment(len, &fd);
    mc__prefault_t pf = {0};
    mc__prefault_start(&pf, p, len, MC__PREFAULT_BACKGROUND);
    assert_int_equal(pf.started, 1);
    uint64_t deadline = mc__now_ms() + 100000;
    while (!atomic_load(&pf.ended) && mc__now_ms() < deadline)
        usleep(2000);
    assert_int_equal(atomic_load(&pf.ended), 1);
    assert_int_equal(atomic_load(&pf.done), len);
    assert_int_equal(resident_pages(p, len), len / pg);
    mc__prefault_stop(&pf);
    assert_int_equal(pf.started, 0);
    unmap_segment(p, len, fd);
}

/* A stop (before the segment is freed) returns promptly and the thread touches nothing after:
 * under ASan or TSan a late touch of the unmapped range would be reported, here it would
 * fault. A second stop is harmless. */
static void test_stop_ends_a_run_promptly(void **state) {
    (void)state;
    const size_t len = 256u << 20;
    int fd;
    uint8_t *p = map_segment(len, &fd);
    mc__prefault_t pf = {0};
    mc__prefault_start(&pf, p, len, MC__PREFAULT_BACKGROUND);
    usleep(1000);
    uint64_t t0 = mc__now_ms();
    mc__prefault_stop(&pf);
    assert_true(mc__now_ms() - t0 < 10000);
    assert_int_equal(atomic_load(&pf.ended), 1);
    uint64_t done = atomic_load(&pf.done);
    assert_true(done <= len);
    unmap_segment(p, len, fd);
    usleep(10000);
    assert_int_equal(atomic_load(&pf.done), done);
    mc__prefault_stop(&pf);
    /* a new start on a run never stopped stops it first (no thread left behind) */
    p = map_segment(len, &fd);
    mc__prefault_start(&pf, p, len, MC__PREFAULT_BACKGROUND);
    mc__prefault_start(&pf, p, 1u << 20, MC__PREFAULT_BACKGROUND);
    mc__prefault_stop(&pf);
    unmap_segment(p, len, fd);
}

/* The guard: a background run of more than half the available memory does not start (a
 * reserved, never-committed range of that size stands for a segment too large to commit). */
static void test_background_skips_a_range_the_host_cannot_spare(void **state) {
    (void)state;
    uint64_t avail = mc__prefault_mem_available();
    assert_true(avail > 0);
    if (avail == UINT64_MAX || avail > (64ull << 30))
        skip(); /* unknown, or larger than this test wants to reserve */
    size_t len = (size_t)(avail / 2 + (64u << 20));
    void *p =
        mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    assert_true(p != MAP_FAILED);
    mc__prefault_t pf = {0};
    mc__prefault_start(&pf, p, len, MC__PREFAULT_BACKGROUND);
    assert_int_equal(pf.started, 0);
    assert_int_equal(atomic_load(&pf.ended), 1);
    assert_int_equal(atomic_load(&pf.done), 0);
    assert_int_equal(resident_pages(p, 1u << 20), 0);
    mc__prefault_stop(&pf);
    munmap(p, len);
}

/* The reserve a run leaves the host: an eighth of its memory, at most 4 GiB. */
static void test_reserve_left_to_the_host(void **state) {
    (void)state;
    const uint64_t G = 1ull << 30;
    /* 24 GiB host: 3 GiB reserve */
    assert_true(mc__prefault_leaves_reserve(20 * G, 24 * G, 16 * G));
    assert_true(mc__prefault_leaves_reserve(20 * G, 24 * G, 17 * G));
    assert_false(mc__prefault_leaves_reserve(20 * G, 24 * G, 17 * G + 1));
    assert_false(mc__prefault_leaves_reserve(2 * G, 24 * G, 1)); /* below the reserve already */
    /* 1 TiB host: the reserve stops at 4 GiB */
    assert_true(mc__prefault_leaves_reserve(900 * G, 1024 * G, 896 * G));
    assert_false(mc__prefault_leaves_reserve(900 * G, 1024 * G, 896 * G + 1));
    /* a 2 GiB container: 256 MiB reserve */
    assert_true(mc__prefault_leaves_reserve(G, 2 * G, 768ull << 20));
    assert_false(mc__prefault_leaves_reserve(G, 2 * G, (768ull << 20) + 1));
    /* figures that could not be read do not stop a run */
    assert_true(mc__prefault_leaves_reserve(UINT64_MAX, 24 * G, 100 * G));
    assert_true(mc__prefault_leaves_reserve(G, UINT64_MAX, 100 * G));
}

/* off, an empty range, and a range the advice refuses (read-only): nothing happens, nothing
 * fails, the run is over at once. */
static void test_off_empty_and_refused_ranges(void **state) {
    (void)state;
    const size_t len = 1u << 20;
    int fd;
    uint8_t *p = map_segment(len, &fd);
    mc__prefault_t pf = {0};
    mc__prefault_start(&pf, p, len, MC__PREFAULT_OFF);
    assert_int_equal(pf.started, 0);
    assert_int_equal(atomic_load(&pf.ended), 1);
    assert_int_equal(resident_pages(p, len), 0);
    mc__prefault_start(&pf, NULL, len, MC__PREFAULT_SYNC);
    assert_int_equal(atomic_load(&pf.done), 0);
    mc__prefault_start(&pf, p, 0, MC__PREFAULT_BACKGROUND);
    assert_int_equal(pf.started, 0);
    unmap_segment(p, len, fd);
    void *ro = mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(ro != MAP_FAILED);
    mc__prefault_start(&pf, ro, len, MC__PREFAULT_SYNC);
    assert_int_equal(atomic_load(&pf.ended), 1);
    assert_int_equal(atomic_load(&pf.done), 0);
    munmap(ro, len);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mode_from_environment),
        cmocka_unit_test(test_sync_faults_every_page_in_and_keeps_contents),
        cmocka_unit_test(test_background_ends_with_every_page_in),
        cmocka_unit_test(test_stop_ends_a_run_promptly),
        cmocka_unit_test(test_background_skips_a_range_the_host_cannot_spare),
        cmocka_unit_test(test_reserve_left_to_the_host),
        cmocka_unit_test(test_off_empty_and_refused_ranges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
