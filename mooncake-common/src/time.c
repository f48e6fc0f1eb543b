#include "mooncake/common/time.h"

#include <time.h>

uint64_t mc__now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t mc__now_ms(void) {
    return mc__now_ns() / 1000000ull;
}

uint64_t mc__wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000ull + (uint64_t)ts.tv_nsec / 1000000ull;
}

struct timespec mc__clock_after_ms(clockid_t clock, uint64_t ms) {
    struct timespec ts;
    uint64_t ns;
    clock_gettime(clock, &ts);
    ns = (uint64_t)ts.tv_nsec + ms % 1000 * 1000000u; /* below 2 s: one carry at most */
    ts.tv_sec += (time_t)(ms / 1000 + ns / 1000000000u);
    ts.tv_nsec = (long)(ns % 1000000000u);
    return ts;
}
