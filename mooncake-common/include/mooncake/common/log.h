/* Leveled logging to stderr. Level from MC_LOG_LEVEL (error|warn|info|debug|trace, default warn).
 */
#ifndef MC_COMMON_LOG_H
#define MC_COMMON_LOG_H

enum mc_log_level { MC_LOG_ERROR = 0, MC_LOG_WARN, MC_LOG_INFO, MC_LOG_DEBUG, MC_LOG_TRACE };

int mc__log_enabled(int level);
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
