/* mooncake_transfer_bench internals: options, results, and the three parts of a run (the
 * initiator's measured rounds, the report, the command line and process roles in main). */
#ifndef MC_TRANSFER_BENCH_H
#define MC_TRANSFER_BENCH_H
#include <stdint.h>

#include "mooncake/transfer_engine.h"

#define PROG "mooncake_transfer_bench"
#define BENCH_MAX_ROUNDS 64

typedef struct bench_opts {
    const char *mode;
    const char *metadata_server;
    const char *local_server_name;
    const char *segment_id;
    const char *protocol;
    const char *operation;
    uint64_t buffer_size;
    uint64_t block_size;
    int64_t batch_size;
    int64_t threads;
    int64_t rounds;
    double duration;
    double limits_duration;
    int report_limits;
    int json;
    /* the reference's flags: NICs for rdma (this build drives none, so they select nothing),
     * how throughput is printed, and the engine backend (only classic is built) */
    const char *device_name;
    const char *nic_priority_matrix;
    const char *report_unit; /* GB|GiB|Gb|MB|MiB|Mb|KB|KiB|Kb */
    int64_t report_precision;
    const char *backend; /* classic | tent */
    int auto_discovery;
} bench_opts_t;

/* Bytes per report_unit (bits for the *b units: the value is divided by 8), 0 if unknown. */
double bench_unit_bytes(const char *unit);

/* One round of transfers and the limits measured right before and after it (best of the two). */
typedef struct bench_round {
    uint64_t bytes;
    double seconds, gbps;
    double memcpy_gbps, tcp_gbps;
    double ratio; /* against the limit that applies (see bench_uses_tcp) */
} bench_round_t;

typedef struct bench_result {
    char segment[512];
    char protocol_used[16];
    uint64_t bytes, blocks;
    double seconds, gbps; /* all rounds together */
    double lat_p50_us, lat_p99_us, lat_max_us;
    double memcpy_gbps, tcp_gbps; /* best window of the run; 0 when not measured */
    double ratio_median;          /* median of the rounds' ratios */
    bench_round_t rounds[BENCH_MAX_ROUNDS];
    int nrounds;
} bench_result_t;

int bench_engine_start(const bench_opts_t *o, mc_engine_t **out);
int bench_initiator(const bench_opts_t *o, const char *segment, bench_result_t *res);
/* tcp results are held against the TCP pump, the rest against memcpy. */
int bench_uses_tcp(const bench_opts_t *o, const char *protocol_used);
int bench_report(const bench_opts_t *o, const char *segment, const bench_result_t *r);
#endif
