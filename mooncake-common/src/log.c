/* The logger. Lines go to stderr, or to a file descriptor a host program gave (the Python
 * package's bridge to `logging`, mooncake/log.py). Settings come from the environment once per
 * process: MC_LOG_LEVEL (error|warn|info|debug|trace, default warn) and MC_LOG_FORMAT (text, the
 * default, or json: one JSON object per line). Each line is written with one write(2), so lines
 * from threads and processes sharing the stream never interleave.
 *
 * text: E20261203 09:39:58.791398 1234 1240 store.c:363] message
 *       (level letter, date with year, local time, pid, thread id, source, message: glog's
 *       layout with the year and the pid added, so a line read alone says when and where)
 * json: {"ts":"2026-12-03T09:39:58.791398+00:00","level":"error","pid":1234,"tid":1240,
 *        "file":"store.c","line":363,"msg":"message"} */
#include "mooncake/common/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static pthread_once_t mc__log_once = PTHREAD_ONCE_INIT;
static _Atomic int mc__log_level = MC_LOG_WARN;
static _Atomic int mc__log_json;
static int mc__log_env_json; /* MC_LOG_FORMAT's choice, which a redirect's end restores */
static _Atomic int mc__log_fd = STDERR_FILENO;
static atomic_ullong mc__log_dropped; /* lines a full redirect pipe could not take */

static const char *const mc__log_names[] = {"error", "warn", "info", "debug", "trace"};

static int mc__log_level_parse(const char *s) {
    if (!s)
        return -1;
    for (int i = 0; i <= MC_LOG_TRACE; i++)
        if (strcasecmp(s, mc__log_names[i]) == 0)
            return i;
    return strcasecmp(s, "warning") == 0 ? MC_LOG_WARN : -1;
}

static void mc__log_init(void) {
    const char *s = getenv("MC_LOG_LEVEL");
    const char *f = getenv("MC_LOG_FORMAT");
    int level = mc__log_level_parse(s);
    if (level >= 0)
        atomic_store(&mc__log_level, level);
    else if (s && *s) /* said directly: the logger is what is being set up */
        fprintf(stderr,
                "W mooncake: ignoring MC_LOG_LEVEL=%s (not one of error, warn, info, debug, "
                "trace); logging at warn\n",
                s);
    if (f && strcasecmp(f, "json") == 0)
        atomic_store(&mc__log_json, mc__log_env_json = 1);
    else if (f && *f && strcasecmp(f, "text") != 0)
        fprintf(stderr, "W mooncake: ignoring MC_LOG_FORMAT=%s (not text or json)\n", f);
}

int mc__log_enabled(int level) {
    pthread_once(&mc__log_once, mc__log_init);
    return level <= atomic_load_explicit(&mc__log_level, memory_order_relaxed);
}

void mc_log_set_level(int level) {
    pthread_once(&mc__log_once, mc__log_init);
    if (level >= MC_LOG_ERROR && level <= MC_LOG_TRACE)
        atomic_store(&mc__log_level, level);
}

int mc_log_redirect(int fd, int json) {
    pthread_once(&mc__log_once, mc__log_init);
    if (fd < 0) {
        atomic_store(&mc__log_fd, STDERR_FILENO);
        atomic_store(&mc__log_json, mc__log_env_json);
        return 0;
    }
    atomic_store(&mc__log_json, json ? 1 : 0);
    atomic_store(&mc__log_fd, fd);
    return 0;
}

unsigned long long mc_log_dropped(void) {
    return atomic_load(&mc__log_dropped);
}

/* s as the inside of a JSON string: quotes, backslashes and control bytes escaped. */
static size_t mc__json_escape(const char *s, char *out, size_t cap) {
    size_t n = 0;
    for (; *s && n + 7 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            out[n++] = '\\';
            out[n++] = (char)c;
        } else if (c < 0x20) {
            n += (size_t)snprintf(out + n, cap - n, "\\u%04x", c);
        } else {
            out[n++] = (char)c;
        }
    }
    out[n] = '\0';
    return n;
}

void mc__log(int level, const char *file, int line, const char *fmt, ...) {
    char msg[1024];
    char esc[sizeof(msg) * 2];
    char out[sizeof(esc) + 256];
    char day[16], clock[16], zone[8];
    struct timespec ts;
    struct tm tm;
    const char *base = strrchr(file, '/');
    long tid = (long)syscall(SYS_gettid);
    int fd = atomic_load(&mc__log_fd);
    ssize_t w;
    int n;
    va_list ap;
    if (level < MC_LOG_ERROR)
        level = MC_LOG_ERROR;
    if (level > MC_LOG_TRACE)
        level = MC_LOG_TRACE;
    base = base ? base + 1 : file;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    clock_gettime(CLOCK_REALTIME, &ts);
    localtime_r(&ts.tv_sec, &tm);
    strftime(clock, sizeof(clock), "%H:%M:%S", &tm);
    if (atomic_load(&mc__log_json)) {
        strftime(day, sizeof(day), "%Y-%m-%d", &tm);
        strftime(zone, sizeof(zone), "%z", &tm); /* +0000 -> +00:00 below (RFC 3339) */
        mc__json_escape(msg, esc, sizeof(esc));
        n = snprintf(out, sizeof(out),
                     "{\"ts\":\"%sT%s.%06ld%.3s:%.2s\",\"level\":\"%s\",\"pid\":%ld,\"tid\":%ld,"
                     "\"file\":\"%s\",\"line\":%d,\"msg\":\"%s\"}\n",
                     day, clock, ts.tv_nsec / 1000, zone, zone + 3, mc__log_names[level],
                     (long)getpid(), tid, base, line, esc);
    } else {
        strftime(day, sizeof(day), "%Y%m%d", &tm);
        n = snprintf(out, sizeof(out), "%c%s %s.%06ld %ld %ld %s:%d] %s\n", "EWIDT"[level], day,
                     clock, ts.tv_nsec / 1000, (long)getpid(), tid, base, line, msg);
    }
    if (n < 0)
        return;
    if ((size_t)n >= sizeof(out)) { /* cut: keep the line a line */
        n = (int)sizeof(out) - 1;
        out[n - 1] = '\n';
    }
    do
        w = write(fd, out, (size_t)n);
    while (w < 0 && errno == EINTR);
    /* a redirect pipe is non-blocking: a reader that fell behind costs lines, never a stall */
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        atomic_fetch_add(&mc__log_dropped, 1);
}
