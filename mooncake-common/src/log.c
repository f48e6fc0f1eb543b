/* stderr logger. The level is read from MC_LOG_LEVEL once per process; each line is written with
 * one fprintf under the stream lock so lines from threads never interleave. */
#include "mooncake/common/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static pthread_once_t mc__log_once = PTHREAD_ONCE_INIT;
static int mc__log_level = MC_LOG_WARN;

static const char *const mc__log_names[] = {"error", "warn", "info", "debug", "trace"};

static void mc__log_init(void) {
    const char *s = getenv("MC_LOG_LEVEL");
    if (!s || !*s)
        return;
    for (int i = 0; i <= MC_LOG_TRACE; i++) {
        if (strcasecmp(s, mc__log_names[i]) == 0) {
            mc__log_level = i;
            return;
        }
    }
    if (strcasecmp(s, "warning") == 0) {
        mc__log_level = MC_LOG_WARN;
        return;
    }
    /* said directly: the logger is what is being set up */
    fprintf(stderr,
            "W mooncake: ignoring MC_LOG_LEVEL=%s (not one of error, warn, info, debug, "
            "trace); logging at warn\n",
            s);
}

int mc__log_enabled(int level) {
    pthread_once(&mc__log_once, mc__log_init);
    return level <= mc__log_level;
}

void mc__log(int level, const char *file, int line, const char *fmt, ...) {
    char msg[1024];
    char stamp[32];
    struct timespec ts;
    struct tm tm;
    const char *base = strrchr(file, '/');
    va_list ap;
    if (level < MC_LOG_ERROR)
        level = MC_LOG_ERROR;
    if (level > MC_LOG_TRACE)
        level = MC_LOG_TRACE;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    clock_gettime(CLOCK_REALTIME, &ts);
    localtime_r(&ts.tv_sec, &tm);
    strftime(stamp, sizeof(stamp), "%m%d %H:%M:%S", &tm);
    fprintf(stderr, "%c%s.%06ld %s:%d] %s\n", "EWIDT"[level], stamp, ts.tv_nsec / 1000,
            base ? base + 1 : file, line, msg);
}
