/* The logger's two layouts and its redirect: a text line carries the date with the year, the
 * pid and the thread id; a JSON line is one valid object with the message escaped; a redirect to
 * a full non-blocking pipe drops lines and counts them instead of blocking the caller. */
#include <fcntl.h>
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include "mooncake/common/log.h"

/* Logs one line through a pipe and returns it (NUL-terminated, without the newline). */
static void log_one(int json, const char *msg, char *out, size_t cap) {
    int p[2];
    ssize_t n;
    assert_int_equal(pipe(p), 0);
    mc_log_redirect(p[1], json);
    MC_ERROR("%s", msg);
    mc_log_redirect(-1, 0);
    close(p[1]);
    n = read(p[0], out, cap - 1);
    close(p[0]);
    assert_true(n > 0);
    out[n] = '\0';
    assert_int_equal(out[n - 1], '\n');
    out[n - 1] = '\0';
    assert_null(strchr(out, '\n')); /* one line, even for a message with newlines */
}

static int matches(const char *pattern, const char *s) {
    regex_t re;
    int rc;
    assert_int_equal(regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB), 0);
    rc = regexec(&re, s, 0, NULL, 0);
    regfree(&re);
    return rc == 0;
}

static void test_text_line_has_year_pid_and_thread(void **state) {
    char line[4096], want[256];
    log_one(0, "hello text", line, sizeof(line));
    snprintf(want, sizeof(want),
             "^E20[0-9]{6} [0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6} %ld %ld test_log\\.c:[0-9]+\\] "
             "hello text$",
             (long)getpid(), (long)syscall(SYS_gettid));
    assert_true(matches(want, line));
}

static void test_json_line_is_one_escaped_object(void **state) {
    char line[4096], want[512];
    log_one(1, "say \"hi\"\\\nnext\tline", line, sizeof(line));
    snprintf(want, sizeof(want),
             "^\\{\"ts\":\"20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6}"
             "[+-][0-9]{2}:[0-9]{2}\",\"level\":\"error\",\"pid\":%ld,\"tid\":%ld,"
             "\"file\":\"test_log\\.c\",\"line\":[0-9]+,"
             "\"msg\":\"say \\\\\"hi\\\\\"\\\\\\\\\\\\u000anext\\\\u0009line\"\\}$",
             (long)getpid(), (long)syscall(SYS_gettid));
    assert_true(matches(want, line));
}

static void test_full_pipe_drops_and_counts(void **state) {
    int p[2];
    unsigned long long before = mc_log_dropped();
    assert_int_equal(pipe(p), 0);
    assert_int_equal(fcntl(p[1], F_SETFL, O_NONBLOCK), 0);
    mc_log_redirect(p[1], 0);
    /* a pipe holds 64 KiB by default: 2000 lines of ~100 bytes overflow it; none may block */
    for (int i = 0; i < 2000; i++)
        MC_ERROR("line %d of a reader that never reads, padded to about a hundred bytes ......", i);
    mc_log_redirect(-1, 0);
    assert_true(mc_log_dropped() > before);
    close(p[0]);
    close(p[1]);
}

static void test_level_filters(void **state) {
    mc_log_set_level(MC_LOG_ERROR);
    assert_true(mc__log_enabled(MC_LOG_ERROR));
    assert_false(mc__log_enabled(MC_LOG_WARN));
    mc_log_set_level(MC_LOG_TRACE);
    assert_true(mc__log_enabled(MC_LOG_TRACE));
    mc_log_set_level(99); /* not a level: unchanged */
    assert_true(mc__log_enabled(MC_LOG_TRACE));
    mc_log_set_level(MC_LOG_WARN);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_line_has_year_pid_and_thread),
        cmocka_unit_test(test_json_line_is_one_escaped_object),
        cmocka_unit_test(test_full_pipe_drops_and_counts),
        cmocka_unit_test(test_level_filters),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
