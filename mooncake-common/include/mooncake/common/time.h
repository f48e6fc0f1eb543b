#ifndef MC_COMMON_TIME_H
#define MC_COMMON_TIME_H
#include <stdint.h>
#include <time.h>
/* Monotonic clock. */
uint64_t mc__now_ns(void);
uint64_t mc__now_ms(void);
/* Wall clock, milliseconds since the epoch (for TTLs shown to users only). */
uint64_t mc__wall_ms(void);
/* The absolute time ms from now on clock, as pthread_cond_timedwait takes it: CLOCK_REALTIME for
 * condition variables that keep the default clock, CLOCK_MONOTONIC for those made with
 * pthread_condattr_setclock (which a wall-clock step cannot cut short or stretch). */
struct timespec mc__clock_after_ms(clockid_t clock, uint64_t ms);
static inline struct timespec mc__realtime_after_ms(uint64_t ms) {
    return mc__clock_after_ms(CLOCK_REALTIME, ms);
}
#endif
