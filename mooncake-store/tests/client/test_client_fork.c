/* A store across fork() (issue 32), against a real mooncake_master: the child's copy of a set-up
 * store names the parent's master connection, engine and segment. Every call in the child fails
 * at once with MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS, and the child's close and destroy leave the
 * parent as it was: its segment stays mounted at the master (its objects stay readable by other
 * clients), its engine keeps serving, its heartbeats go on. Children leave with _exit and report
 * failures in their exit status. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#define XXH_INLINE_ALL /* header-only: the test needs no libxxhash */
#include <xxhash.h>

#include "master_proc.h"
#include "mooncake/store.h"

#define MIB (1u << 20)
#define CHILD_DEADLINE_MS 30000

static const char *g_bin;

typedef struct fixture {
    mc_test_master_t m;
    mc_store_t *node; /* contributes a segment; the one that forks */
    mc_store_t *pure; /* another client (global_segment_size = 0): reads what node holds */
} fixture_t;

static void store_config(mc_store_config_t *c, const char *addr, uint64_t seg) {
    mc_store_config_init(c);
    snprintf(c->local_hostname, sizeof(c->local_hostname), "127.0.0.1");
    snprintf(c->master_server_addr, sizeof(c->master_server_addr), "%s", addr);
    c->global_segment_size = seg;
    c->local_buffer_size = 4 * MIB;
}

static mc_store_t *make_store(const char *addr, uint64_t seg) {
    mc_store_config_t c;
    mc_store_t *s = NULL;
    store_config(&c, addr, seg);
    assert_int_equal(mc_store_create(&s), 0);
    assert_int_equal(mc_store_setup(s, &c), 0);
    return s;
}

static int setup(void **state) {
    /* a short client_ttl: a parent whose heartbeats stopped would be dropped within the test */
    static const char *const extra[] = {"--client_ttl=2", NULL};
    fixture_t *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(mc_test_master_start(g_bin, 0, extra, &f->m), 0);
    f->node = make_store(f->m.addr, 32 * MIB);
    f->pure = make_store(f->m.addr, 0);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture_t *f = *state;
    mc_store_destroy(f->pure);
    mc_store_destroy(f->node);
    assert_int_equal(mc_test_master_stop(&f->m, 0), 0);
    free(f);
    return 0;
}

static uint8_t *pattern(size_t n, unsigned seed) {
    uint8_t *p = malloc(n ? n : 1);
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    assert_non_null(p);
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (uint8_t)x;
    }
    return p;
}

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The child's exit status, or -1 when it did not exit within the deadline (it is killed). */
static int reap(pid_t pid) {
    uint64_t end = now_ms() + CHILD_DEADLINE_MS;
    int status = 0;
    while (now_ms() < end) {
        if (waitpid(pid, &status, WNOHANG) == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        usleep(20000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

/* key holds n bytes of seed's pattern, read through reader. */
static void assert_object(mc_store_t *reader, const char *key, size_t n, unsigned seed) {
    uint8_t *want = pattern(n, seed), *got = malloc(n);
    assert_int_equal(mc_store_get_into(reader, key, got, n), (int64_t)n);
    assert_true(XXH64(got, n, 0) == XXH64(want, n, 0));
    free(want);
    free(got);
}

static void put_pattern(mc_store_t *s, const char *key, size_t n, unsigned seed) {
    uint8_t *v = pattern(n, seed);
    assert_int_equal(mc_store_put(s, key, v, n, NULL), 0);
    free(v);
}

/* Every call of the child on the inherited store; each failure is a bit of the result. */
static int child_calls(fixture_t *f) {
    const char *keys[2] = {"fork-pre", "fork-child"};
    int res[2] = {0, 0};
    uint8_t small[64] = {0}, *big = pattern(MIB, 5);
    mc_store_config_t c;
    uint64_t t0 = now_ms();
    int bad = 0;
    if (mc_store_put(f->node, "fork-child", big, MIB, NULL) != MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS)
        bad |= 1;
    if (mc_store_get_into(f->node, "fork-pre", big, MIB) != MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS ||
        mc_store_get_size(f->node, "fork-pre") != MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS ||
        mc_store_is_exist(f->node, "fork-pre") != MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS)
        bad |= 2;
    if (mc_store_batch_is_exist(f->node, keys, 2, res) != MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS ||
        res[0] != MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS ||
        res[1] != MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS)
        bad |= 4;
    if (mc_store_remove(f->node, "fork-pre", 1) != MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS ||
        mc_store_register_buffer(f->node, small, sizeof(small)) !=
            MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS)
        bad |= 8;
    /* nor can the child close it or set it up anew: both are the parent's to do */
    store_config(&c, f->m.addr, 0);
    if (mc_store_close(f->node) != MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS ||
        mc_store_setup(f->node, &c) != MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS ||
        mc_store_health_check(f->node) != 1)
        bad |= 16;
    if (now_ms() - t0 > 2000) /* refused at once */
        bad |= 32;
    free(big);
    return bad;
}

static void test_child_calls_refused(void **state) {
    fixture_t *f = *state;
    pid_t pid;
    put_pattern(f->node, "fork-pre", MIB, 1);
    fflush(NULL); /* nothing buffered is written twice */
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(child_calls(f));
    /* the parent works while the child tries */
    for (int i = 0; i < 20; i++) {
        char key[32];
        snprintf(key, sizeof(key), "fork-p-%d", i);
        put_pattern(f->node, key, 256 * 1024, 100u + (unsigned)i);
        assert_object(f->node, key, 256 * 1024, 100u + (unsigned)i);
    }
    assert_int_equal(reap(pid), 0);
    assert_object(f->pure, "fork-pre", MIB, 1);
    assert_int_equal(mc_store_is_exist(f->pure, "fork-child"), 0);
}

static void test_child_destroy_leaves_parent(void **state) {
    fixture_t *f = *state;
    pid_t pid;
    put_pattern(f->node, "fork-pre", MIB, 2);
    fflush(NULL); /* nothing buffered is written twice */
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* the child lets both copies go at once, as a binding's dealloc would */
        mc_store_destroy(f->node);
        mc_store_destroy(f->pure);
        _exit(0);
    }
    assert_int_equal(reap(pid), 0);
    /* the parent's segment is still mounted and served: another client reads from it, and keeps
     * reading past client_ttl (the parent's heartbeats go on) */
    assert_object(f->pure, "fork-pre", MIB, 2);
    put_pattern(f->node, "fork-after", MIB, 3);
    assert_object(f->pure, "fork-after", MIB, 3);
    sleep(3);
    assert_object(f->pure, "fork-pre", MIB, 2);
    assert_int_equal(mc_store_health_check(f->node), 0);
    /* and the parent's own close still leaves the master cleanly (teardown) */
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_child_calls_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_child_destroy_leaves_parent, setup, teardown),
    };
    if (argc < 2) {
        fprintf(stderr, "usage: %s path/to/mooncake_master\n", argv[0]);
        return 2;
    }
    g_bin = argv[1];
    return cmocka_run_group_tests(tests, NULL, NULL);
}
