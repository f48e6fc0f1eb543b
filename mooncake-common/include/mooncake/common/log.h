/* Leveled logging to stderr (or a redirect). Level from MC_LOG_LEVEL (error|warn|info|debug|
 * trace, default warn), format from MC_LOG_FORMAT (text | json); log.c shows both layouts. */
#ifndef MC_COMMON_LOG_H
#define MC_COMMON_LOG_H

enum mc_log_level { MC_LOG_ERROR = 0, MC_LOG_WARN, MC_LOG_INFO, MC_LOG_DEBUG, MC_LOG_TRACE };

int mc__log_enabled(int level);
/* For a host program (the Python bridge): set the level; send lines to fd (in JSON when json,
 * as text otherwise; fd < 0: back to stderr, the format as it was). An fd that would block drops
 * the line and counts it (mc_log_dropped): logging never stalls a thread. */
void mc_log_set_level(int level);
int mc_log_redirect(int fd, int json);
unsigned long long mc_log_dropped(void);
void mc__log(int level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define MC_LOG(level, ...)                                                                         \
    do {                                                                                           \
        if (mc__log_enabled(level))                                                                \
            mc__log((level), __FILE__, __LINE__, __VA_ARGS__);                                     \
    } while (0)
#define MC_ERROR(...) MC_LOG(MC_LOG_ERROR, __VA_ARGS__)
#define MC_WARN(...) MC_LOG(MC_LOG_WARN, __VA_ARGS__)
#define MC_INFO(...) MC_LOG(MC_LOG_INFO, __VA_ARGS__)
#define MC_DEBUG(...) MC_LOG(MC_LOG_DEBUG, __VA_ARGS__)
#endif
