/* mc_store_bench internals: the options, one workload, and what one client process reports for
 * it. store_bench.c is the command line and the parent (it forks the client processes and merges
 * their reports); store_bench_client.c is one client process (its own store, the timed loop). */
#ifndef MC_STORE_BENCH_H
#define MC_STORE_BENCH_H
#include <stddef.h>
#include <stdint.h>

#define SB_PROG "mc_store_bench"
#define SB_MAX_WORKLOADS 128
/* A key counts as read "first" when this client last read it longer ago than this: the replica
 * location cache serves an entry for at most 200 ms (MC_MP_CACHED_LEASE_MS, docs/store.md), so
 * past it the get asks the master again. */
#define SB_FIRST_READ_GAP_MS 250

typedef enum { SB_PUT, SB_GET_CACHED, SB_GET_FIRST } sb_op_t;

typedef struct sb_workload {
    sb_op_t op;
    uint64_t size;  /* value bytes */
    uint32_t batch; /* 1: mc_store_put / mc_store_get_into; n: the batch calls */
    int zc;         /* 1: from and into a registered buffer; 0: heap memory, not registered */
} sb_workload_t;

typedef struct sb_opts {
    const char *role; /* driver or holder */
    const char *master;
    const char *protocol;
    const char *hostname;
    const char *workloads; /* op:size:batch:kind,... (see the usage text in store_bench.c) */
    uint64_t segment_size; /* holder: bytes contributed */
    uint64_t pool_bytes;   /* driver: bytes of live objects, all processes together */
    int64_t procs;
    double duration;
    int json;
    sb_workload_t wl[SB_MAX_WORKLOADS];
    size_t nwl;
} sb_opts_t;

/* One client process's report for one workload; latency samples (ns) follow it on the pipe. */
typedef struct sb_report {
    int32_t err;      /* 0 or the first negative code */
    uint32_t waits;   /* first reads that waited (untimed) for a key's gap to pass */
    uint64_t ops;     /* values moved (calls x batch) */
    uint64_t calls;   /* timed calls */
    uint64_t busy_ns; /* inside the timed calls */
    uint64_t wall_ns; /* from go to the last call's end, untimed clean-up included */
    uint64_t nsamples;
} sb_report_t;

const char *sb_op_name(sb_op_t op);
/* Whole writes and reads over a pipe; 0, or -1 when the other end is gone. */
int sb_write_all(int fd, const void *p, size_t n);
int sb_read_all(int fd, void *p, size_t n);
/* One client process: set up a store, then per workload: prepare, write 'R' on res_fd, wait
 * for a byte on cmd_fd, run, write an sb_report_t and its samples on res_fd. Returns the exit
 * status. */
int sb_client_main(const sb_opts_t *o, int index, int cmd_fd, int res_fd);
/* A storage client contributing o->segment_size: prints one JSON line, serves until stdin
 * closes. */
int sb_holder_main(const sb_opts_t *o);
#endif
