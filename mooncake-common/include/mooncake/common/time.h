#ifndef MC_COMMON_TIME_H
#define MC_COMMON_TIME_H
#include <stdint.h>
#include <time.h>
/* Monotonic clock. */
uint64_t mc__now_ns(void);
uint64_t mc__now_ms(void);
/* Wall clock, milliseconds since the epoch (for TTLs shown to users only). */
uint64_t mc__wall_ms(void);
/* CLOCK_REALTIME ms from now, the absolute time pthread_cond_timedwait takes (its condition
 * variables keep the default clock). */
struct timespec mc__realtime_after_ms(uint64_t ms);
#endif
