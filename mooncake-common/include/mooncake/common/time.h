#ifndef MC_COMMON_TIME_H
#define MC_COMMON_TIME_H
#include <stdint.h>
/* Monotonic clock. */
uint64_t mc__now_ns(void);
uint64_t mc__now_ms(void);
/* Wall clock, milliseconds since the epoch (for TTLs shown to users only). */
uint64_t mc__wall_ms(void);
#endif
