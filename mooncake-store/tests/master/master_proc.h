/* Test helper: runs a real mooncake_master process on ephemeral ports and reads its ports from
 * the lines it prints. */
#ifndef MC_TEST_MASTER_PROC_H
#define MC_TEST_MASTER_PROC_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct mc_test_master {
    pid_t pid;
    uint16_t rpc_port, metrics_port, meta_port;
    char addr[64]; /* "127.0.0.1:<rpc_port>" */
    int out_fd;    /* the master's stdout */
} mc_test_master_t;

/* Starts `bin --port=P --metrics_port=0 --rpc_address=127.0.0.1 extra...` (extra is
 * NULL-terminated; P = port, 0 for ephemeral). Returns 0 once the listening lines were read. */
int mc_test_master_start(const char *bin, uint16_t port, const char *const *extra,
                         mc_test_master_t *m);
/* SIGTERM (or SIGKILL when hard), then waits; returns the exit status as from waitpid. */
int mc_test_master_stop(mc_test_master_t *m, int hard);
/* Runs bin with args to completion; returns its exit code and captures stderr into err. */
int mc_test_run_capture(const char *bin, const char *const *args, char *err, size_t cap);
/* A loopback TCP port nobody listened on a moment ago (the kernel's pick), or 0. Another process
 * may take it before the caller binds it: callers that can, try another. */
uint16_t mc_test_free_port(void);
/* Reads one line (without its newline) from fd before deadline (mc__now_ms); 0 or -1. */
int mc_test_read_line(int fd, char *line, size_t cap, uint64_t deadline);
/* GET http://127.0.0.1:port/path; returns the status, body into *body (mc__free it). */
int mc_test_http_get(uint16_t port, const char *path, char **body);
/* The value of the unlabelled metric name on the master's /metrics at port: 0, or -1. */
int mc_test_metric(uint16_t port, const char *name, double *v);
#endif
