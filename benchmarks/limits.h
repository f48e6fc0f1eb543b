/* The host's own limits, measured with the same block and buffer sizes as a benchmark so its
 * results can be printed as ratios: single-thread memcpy and a plain single-stream TCP pump over
 * loopback. */
#ifndef MC_BENCH_LIMITS_H
#define MC_BENCH_LIMITS_H
#include <stddef.h>

/* Copies block-sized chunks between two buffer-sized regions for `seconds`; GB/s (1e9 B/s). */
int mc__bench_memcpy_gbps(size_t block, size_t buffer, double seconds, double *gbps);
/* One sender thread writes block-sized chunks over a loopback TCP connection, one receiver thread
 * reads them into a buffer-sized region, for `seconds`; GB/s as seen by the receiver. */
int mc__bench_tcp_pump_gbps(size_t block, size_t buffer, double seconds, double *gbps);
#endif
