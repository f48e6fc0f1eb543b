/* mooncake_transfer_bench: Transfer Engine throughput and latency, printed beside the host's own
 * limits (single-thread memcpy, a plain single-stream TCP pump) measured in the same run, because
 * on a shared machine only ratios taken together are comparable between runs.
 *
 * Modes: target (serve a buffer until SIGINT/SIGTERM), initiator (drive a target named by
 * --segment_id), loopback (the default: fork a target on this host, then run as its initiator). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mooncake/common/config.h"
#include "mooncake/common/version.h"
#include "transfer_bench.h"

/* ---- target ---- */

/* ready_fd/ctl_fd are the pipes of loopback mode (-1 standalone): the segment name goes out on
 * ready_fd and the target lives until ctl_fd reaches EOF, i.e. until the initiator is done or
 * dies. Standalone, it prints the name and lives until SIGINT/SIGTERM. */
static int bench_target(const bench_opts_t *o, int ready_fd, int ctl_fd) {
    mc_engine_t *e = NULL;
    void *buf = NULL;
    sigset_t stop;
    int sig = 0;
    int rc;
    char c;

    /* Blocked before the engine starts its threads so that only sigwait() sees them. */
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    if (ctl_fd < 0)
        pthread_sigmask(SIG_BLOCK, &stop, NULL);
    rc = bench_engine_start(o, &e);
    if (rc != 0)
        goto out;
    rc = mc_engine_alloc_managed(e, o->buffer_size, &buf);
    if (rc != 0) {
        fprintf(stderr, PROG ": target buffer of %llu B: %s\n", (unsigned long long)o->buffer_size,
                mc_strerror(rc));
        goto out;
    }
    memset(buf, 0x3c, o->buffer_size); /* fault pages in now, not during the measurement */
    if (ready_fd >= 0) {
        dprintf(ready_fd, "%s\n", mc_engine_local_name(e));
        close(ready_fd);
        ready_fd = -1;
        for (;;) {
            ssize_t n = read(ctl_fd, &c, 1);
            if (n == 0 || (n < 0 && errno != EINTR))
                break;
        }
    } else {
        printf(PROG ": target serving %llu B as segment %s (protocol %s); Ctrl-C stops\n",
               (unsigned long long)o->buffer_size, mc_engine_local_name(e), mc_engine_protocol(e));
        fflush(stdout);
        sigwait(&stop, &sig);
    }
out:
    if (ready_fd >= 0)
        close(ready_fd);
    if (buf)
        mc_engine_free_managed(e, buf);
    mc_engine_destroy(e);
    return rc == 0 ? 0 : 1;
}

/* ---- main ---- */

double bench_unit_bytes(const char *unit) {
    static const struct {
        const char *name;
        double bytes;
    } units[] = {{"GB", 1e9}, {"GiB", 1073741824.0}, {"Gb", 1e9 / 8},
                 {"MB", 1e6}, {"MiB", 1048576.0},    {"Mb", 1e6 / 8},
                 {"KB", 1e3}, {"KiB", 1024.0},       {"Kb", 1e3 / 8}};
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
        if (strcmp(unit, units[i].name) == 0)
            return units[i].bytes;
    return 0;
}

static int bench_check(bench_opts_t *o) {
    if (strcmp(o->mode, "") == 0)
        o->mode = "loopback";
    if (strcmp(o->mode, "loopback") != 0 && strcmp(o->mode, "initiator") != 0 &&
        strcmp(o->mode, "target") != 0) {
        fprintf(stderr, PROG ": --mode must be initiator, target or loopback, not '%s'\n", o->mode);
        return -1;
    }
    if (strcmp(o->operation, "read") != 0 && strcmp(o->operation, "write") != 0) {
        fprintf(stderr, PROG ": --operation must be read or write, not '%s'\n", o->operation);
        return -1;
    }
    if (strcmp(o->mode, "initiator") == 0 && !*o->segment_id) {
        fprintf(stderr, PROG ": --mode=initiator needs --segment_id (the target's segment name)\n");
        return -1;
    }
    if (bench_unit_bytes(o->report_unit) == 0 || o->report_precision < 0 ||
        o->report_precision > 9) {
        fprintf(stderr, PROG ": --report_unit must be GB|GiB|Gb|MB|MiB|Mb|KB|KiB|Kb and "
                             "--report_precision 0..9\n");
        return -1;
    }
    if (strcmp(o->backend, "classic") != 0) {
        fprintf(stderr,
                PROG ": --backend=%s: only the classic Transfer Engine is in this build%s\n",
                o->backend, strcmp(o->backend, "tent") == 0 ? " (TENT is not)" : "");
        return -1;
    }
    if (o->block_size == 0 || o->buffer_size < o->block_size || o->batch_size < 1 ||
        o->batch_size > 65536 || o->threads < 1 || o->threads > 1024 || o->rounds < 1 ||
        o->rounds > BENCH_MAX_ROUNDS || !(o->duration > 0) || o->duration > 86400 ||
        o->limits_duration < 0) {
        fprintf(stderr, PROG ": need 0 < block_size <= buffer_size, 1 <= batch_size <= 65536, "
                             "1 <= threads <= 1024, 1 <= rounds <= 64, 0 < duration <= 86400\n");
        return -1;
    }
    return 0;
}

static int bench_loopback(const bench_opts_t *o, bench_result_t *r) {
    int ready[2] = {-1, -1}, ctl[2] = {-1, -1};
    char name[512];
    size_t got = 0;
    pid_t pid = -1;
    int status = 0, rc = 0;

    if (pipe(ready) != 0 || pipe(ctl) != 0) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    fflush(NULL); /* nothing buffered may be printed twice */
    pid = fork();
    if (pid < 0) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    if (pid == 0) {
        close(ready[0]);
        close(ctl[1]);
        _exit(bench_target(o, ready[1], ctl[0]));
    }
    close(ready[1]), ready[1] = -1;
    close(ctl[0]), ctl[0] = -1;
    while (got < sizeof(name) - 1) {
        ssize_t n = read(ready[0], name + got, sizeof(name) - 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
        if (memchr(name, '\n', got))
            break;
    }
    name[got] = '\0';
    if (got == 0 || !strchr(name, '\n')) {
        fprintf(stderr, PROG ": the loopback target did not start\n");
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    *strchr(name, '\n') = '\0';
    snprintf(r->segment, sizeof(r->segment), "%s", name);
    rc = bench_initiator(o, name, r);
out:
    if (ctl[1] >= 0)
        close(ctl[1]); /* EOF tells the target to exit */
    if (ctl[0] >= 0)
        close(ctl[0]);
    if (ready[0] >= 0)
        close(ready[0]);
    if (ready[1] >= 0)
        close(ready[1]);
    if (pid > 0 && waitpid(pid, &status, 0) == pid && rc == 0 &&
        !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        fprintf(stderr, PROG ": the loopback target exited abnormally\n");
        rc = MC_ERR_INTERNAL_ERROR;
    }
    return rc;
}

int main(int argc, char **argv) {
    bench_opts_t o = {
        .mode = "loopback",
        .metadata_server = "P2PHANDSHAKE",
        .local_server_name = "127.0.0.1",
        .segment_id = "",
        .protocol = "tcp",
        .operation = "write",
        .buffer_size = 256u << 20,
        .block_size = 1u << 20,
        .batch_size = 4,
        .threads = 1,
        .rounds = 1,
        .duration = 5,
        .report_limits = 1,
        .device_name = "",
        .nic_priority_matrix = "",
        .report_unit = "GB",
        .report_precision =
            3, /* the reference: 2; ours keeps the digits docs/benchmarks.md records */
        .backend = "classic",
    };
    const mc_flag_t flags[] = {
        {"mode", MC_FLAG_STRING, &o.mode,
         "initiator, target, or loopback (forks a target on this host)"},
        {"metadata_server", MC_FLAG_STRING, &o.metadata_server,
         "P2PHANDSHAKE or http://host:port/metadata"},
        {"local_server_name", MC_FLAG_STRING, &o.local_server_name,
         "this engine's segment name: host or host:port"},
        {"segment_id", MC_FLAG_STRING, &o.segment_id, "initiator: the target's segment name"},
        {"protocol", MC_FLAG_STRING, &o.protocol,
         "tcp, shm, auto, rdma or fabric (MC_FABRIC_PROVIDER picks the provider)"},
        {"operation", MC_FLAG_STRING, &o.operation, "read or write"},
        {"buffer_size", MC_FLAG_SIZE, &o.buffer_size, "registered bytes on each side"},
        {"block_size", MC_FLAG_SIZE, &o.block_size, "bytes per request"},
        {"batch_size", MC_FLAG_INT, &o.batch_size, "requests per batch"},
        {"threads", MC_FLAG_INT, &o.threads, "initiator threads, one batch in flight each"},
        {"duration", MC_FLAG_DOUBLE, &o.duration, "seconds of transfers per round"},
        {"rounds", MC_FLAG_INT, &o.rounds,
         "rounds of transfers, each between two limit measurements; ratio = median"},
        {"report_limits", MC_FLAG_BOOL, &o.report_limits,
         "also measure memcpy and a TCP pump and print ratios"},
        {"limits_duration", MC_FLAG_DOUBLE, &o.limits_duration,
         "seconds per limit measurement, taken before and after each round (0: min(duration, 1))"},
        {"json", MC_FLAG_BOOL, &o.json, "print one JSON object instead of text"},
        {"device_name", MC_FLAG_STRING, &o.device_name,
         "RDMA NICs to use (this build drives none: tcp/shm ignore it)"},
        {"nic_priority_matrix", MC_FLAG_STRING, &o.nic_priority_matrix,
         "JSON NIC priority matrix for rdma (selects nothing without RDMA NICs)"},
        {"auto_discovery", MC_FLAG_BOOL, &o.auto_discovery,
         "discover NICs (this build always discovers what it can drive)"},
        {"report_unit", MC_FLAG_STRING, &o.report_unit,
         "throughput unit: GB|GiB|Gb|MB|MiB|Mb|KB|KiB|Kb"},
        {"report_precision", MC_FLAG_INT, &o.report_precision,
         "digits after the point in the throughput"},
        {"backend", MC_FLAG_STRING, &o.backend,
         "classic (this engine) or tent (the reference's TENT: not in this build)"},
    };
    bench_result_t r = {0};
    int rc = mc__flags_parse(argc, argv, flags, sizeof(flags) / sizeof(flags[0]), PROG,
                             MC_VERSION_STRING, "Transfer Engine benchmark");
    if (rc != 0)
        return rc > 0 ? 0 : 2;
    if (bench_check(&o) != 0)
        return 2;
    signal(SIGPIPE, SIG_IGN);
    if (strcmp(o.mode, "target") == 0)
        return bench_target(&o, -1, -1);
    if (strcmp(o.mode, "loopback") == 0)
        rc = bench_loopback(&o, &r);
    else
        rc = bench_initiator(&o, o.segment_id, &r);
    if (rc != 0)
        return 1;
    return bench_report(&o, strcmp(o.mode, "loopback") == 0 ? r.segment : o.segment_id, &r) ? 1 : 0;
}
