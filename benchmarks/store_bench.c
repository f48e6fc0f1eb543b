/* mc_store_bench: Store puts and gets through the public C API (mooncake/store.h), from N client
 * processes at once, each with its own store client, against a running mooncake_master and the
 * storage client(s) holding the segments (`--role=holder` runs one). It is the C side of the
 * comparison with Redis's own C client (redis-benchmark) in benchmarks/compare: op/s and p50/p99
 * per call for each workload, one line each (or one JSON object each with --json).
 *
 * The parent forks the client processes before any store exists (a store refuses calls from a
 * fork child), starts each workload in all of them at once, and merges their reports: aggregate
 * op/s is the sum of each process's ops over its time inside calls, latency percentiles are over
 * every call of every process. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_stats.h"
#include "mooncake/common/config.h"
#include "mooncake/common/version.h"
#include "mooncake/error.h"
#include "store_bench.h"

#define SB_MAX_PROCS 64

typedef struct sb_child {
    pid_t pid;
    int cmd, res; /* parent's ends */
} sb_child_t;

/* "op:size[:batch[:kind]]", op put, get_cached (alias get) or get_first, kind heap or zc. */
static int sb_parse_one(char *spec, sb_workload_t *w) {
    char *parts[4] = {0};
    int n = 0;
    int64_t batch = 1;
    for (char *save = NULL, *t = strtok_r(spec, ":", &save); t && n < 4;
         t = strtok_r(NULL, ":", &save))
        parts[n++] = t;
    if (n < 2)
        return -1;
    if (strcmp(parts[0], "put") == 0)
        w->op = SB_PUT;
    else if (strcmp(parts[0], "get_cached") == 0 || strcmp(parts[0], "get") == 0)
        w->op = SB_GET_CACHED;
    else if (strcmp(parts[0], "get_first") == 0)
        w->op = SB_GET_FIRST;
    else
        return -1;
    if (mc__parse_size(parts[1], &w->size) != 0 || w->size == 0 || w->size > (1ull << 30))
        return -1;
    if (n > 2 && (mc__parse_i64(parts[2], &batch) != 0 || batch < 1 || batch > 1024))
        return -1;
    w->batch = (uint32_t)batch;
    w->zc = 0;
    if (n > 3 && strcmp(parts[3], "zc") == 0)
        w->zc = 1;
    else if (n > 3 && strcmp(parts[3], "heap") != 0)
        return -1;
    return 0;
}

static int sb_parse_workloads(sb_opts_t *o) {
    char *copy = strdup(o->workloads), *save = NULL;
    int rc = 0;
    o->nwl = 0;
    if (!copy)
        return -1;
    for (char *t = strtok_r(copy, ",", &save); t && rc == 0; t = strtok_r(NULL, ",", &save)) {
        char one[128];
        if (o->nwl == SB_MAX_WORKLOADS || strlen(t) >= sizeof(one)) {
            rc = -1;
            break;
        }
        snprintf(one, sizeof(one), "%s", t);
        if (sb_parse_one(one, &o->wl[o->nwl]) != 0) {
            fprintf(stderr,
                    SB_PROG ": bad workload '%s' (want op:size[:batch[:heap|zc]], op put, "
                            "get_cached or get_first)\n",
                    t);
            rc = -1;
        }
        o->nwl++;
    }
    free(copy);
    if (rc == 0 && o->nwl == 0) {
        fprintf(stderr, SB_PROG ": --workloads is empty\n");
        rc = -1;
    }
    return rc;
}

static int sb_spawn(const sb_opts_t *o, sb_child_t *ch, int n) {
    fflush(NULL);
    for (int i = 0; i < n; i++) {
        int cmd[2], res[2];
        if (pipe(cmd) != 0)
            return -1;
        if (pipe(res) != 0) {
            close(cmd[0]);
            close(cmd[1]);
            return -1;
        }
        pid_t pid = fork();
        if (pid < 0)
            return -1;
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the run */
            for (int j = 0; j < i; j++) {
                close(ch[j].cmd);
                close(ch[j].res);
            }
            close(cmd[1]);
            close(res[0]);
            _exit(sb_client_main(o, i, cmd[0], res[1]));
        }
        close(cmd[0]);
        close(res[1]);
        ch[i] = (sb_child_t){.pid = pid, .cmd = cmd[1], .res = res[0]};
    }
    return 0;
}

static void sb_print(const sb_opts_t *o, const sb_workload_t *w, const char *err,
                     const sb_report_t *sum, double ops_per_s, double busy_s, double wall_s,
                     mc__samples_t *lat) {
    const char *kind = w->zc ? "zc" : "heap";
    double p50 = (double)mc__samples_percentile(lat, 50) / 1e3;
    double p99 = (double)mc__samples_percentile(lat, 99) / 1e3;
    double mn = lat->n ? (double)lat->v[0] / 1e3 : 0,
           mx = lat->n ? (double)lat->v[lat->n - 1] / 1e3 : 0;
    double gbps = ops_per_s * (double)w->size / 1e9;
    if (o->json) {
        printf("{\"workload\": {\"op\": \"%s\", \"size\": %llu, \"batch\": %u, \"zc\": %s, "
               "\"procs\": %lld, \"duration\": %g}, \"result\": {",
               sb_op_name(w->op), (unsigned long long)w->size, w->batch, w->zc ? "true" : "false",
               (long long)o->procs, o->duration);
        if (err)
            printf("\"error\": \"%s\"}}\n", err);
        else
            printf("\"ops\": %llu, \"calls\": %llu, \"bytes\": %llu, \"busy_s\": %.6f, "
                   "\"wall_s\": %.6f, \"ops_per_s\": %.3f, \"gbps\": %.6f, \"p50_us\": %.3f, "
                   "\"p99_us\": %.3f, \"min_us\": %.3f, \"max_us\": %.3f, \"waits\": %u}}\n",
                   (unsigned long long)sum->ops, (unsigned long long)sum->calls,
                   (unsigned long long)(sum->ops * w->size), busy_s, wall_s, ops_per_s, gbps, p50,
                   p99, mn, mx, sum->waits);
    } else if (err) {
        printf("%-10s %9llu B x%-3u %-4s %2lld proc(s): ERROR %s\n", sb_op_name(w->op),
               (unsigned long long)w->size, w->batch, kind, (long long)o->procs, err);
    } else {
        printf("%-10s %9llu B x%-3u %-4s %2lld proc(s): %10.0f op/s %8.3f GB/s  p50 %8.1f us  "
               "p99 %8.1f us  (%llu calls%s)\n",
               sb_op_name(w->op), (unsigned long long)w->size, w->batch, kind, (long long)o->procs,
               ops_per_s, gbps, p50, p99, (unsigned long long)sum->calls,
               !sum->waits    ? ""
               : o->procs > 1 ? ", some first reads waited for their key's gap: op/s over wall time"
                              : ", some first reads waited for their key's gap");
    }
    fflush(stdout);
}

/* Starts workload wi in every child at once and merges their reports. Returns -1 when a child
 * is gone (the run cannot go on), else 0 (a workload error is printed, the run goes on). */
static int sb_drive(const sb_opts_t *o, sb_child_t *ch, int n, size_t wi) {
    const sb_workload_t *w = &o->wl[wi];
    mc__samples_t lat = {0};
    sb_report_t sum = {0};
    double ops_per_s = 0, busy_s = 0, wall_s = 0;
    char err[160] = "";
    char c;
    for (int i = 0; i < n; i++)
        if (sb_read_all(ch[i].res, &c, 1) != 0 || c != 'R')
            return -1;
    for (int i = 0; i < n; i++)
        if (write(ch[i].cmd, "G", 1) != 1)
            return -1;
    for (int i = 0; i < n; i++) {
        sb_report_t r;
        mc__samples_t one = {0};
        if (sb_read_all(ch[i].res, &r, sizeof(r)) != 0)
            return -1;
        if (r.nsamples) {
            one.v = malloc(r.nsamples * sizeof(*one.v));
            one.n = one.cap = r.nsamples;
            if (!one.v || sb_read_all(ch[i].res, one.v, r.nsamples * sizeof(*one.v)) != 0) {
                free(one.v);
                return -1;
            }
            (void)mc__samples_merge(&lat, &one);
            free(one.v);
        }
        if (r.err && !*err)
            snprintf(err, sizeof(err), "process %d: %s (%d)", i, mc_strerror(r.err), r.err);
        sum.ops += r.ops;
        sum.calls += r.calls;
        sum.waits += r.waits;
        if (r.busy_ns)
            ops_per_s += (double)r.ops * 1e9 / (double)r.busy_ns;
        busy_s = (double)r.busy_ns / 1e9 > busy_s ? (double)r.busy_ns / 1e9 : busy_s;
        wall_s = (double)r.wall_ns / 1e9 > wall_s ? (double)r.wall_ns / 1e9 : wall_s;
    }
    /* Each process's rate counts its busy time only. While some wait for a key's gap the others
     * run with fewer beside them, so the sum of their rates would overstate what all of them do at
     * once: then the aggregate is every call over the longest wall time (waits included). */
    if (n > 1 && sum.waits && wall_s > 0)
        ops_per_s = (double)sum.ops / wall_s;
    if (!*err && lat.n == 0)
        snprintf(err, sizeof(err), "no call completed");
    if (lat.n)
        (void)mc__samples_percentile(&lat, 50); /* sorts: min and max are the ends */
    sb_print(o, w, *err ? err : NULL, &sum, ops_per_s, busy_s, wall_s, &lat);
    mc__samples_free(&lat);
    return 0;
}

static int sb_driver(const sb_opts_t *o) {
    sb_child_t ch[SB_MAX_PROCS];
    int n = (int)o->procs, rc = 0;
    memset(ch, 0, sizeof(ch));
    for (int i = 0; i < n; i++)
        ch[i].cmd = ch[i].res = -1;
    if (sb_spawn(o, ch, n) != 0) {
        fprintf(stderr, SB_PROG ": cannot start the client processes: %s\n", strerror(errno));
        rc = 1;
    }
    for (int i = 0; rc == 0 && i < n; i++) {
        char c = 0;
        int32_t code = 0;
        if (sb_read_all(ch[i].res, &c, 1) != 0 || c != 'S') {
            if (c == 'E')
                (void)sb_read_all(ch[i].res, &code, sizeof(code));
            fprintf(stderr, SB_PROG ": client process %d did not start: %s\n", i,
                    code ? mc_strerror(code) : "it exited");
            if (o->json)
                printf("{\"fatal\": \"client process %d did not start: %s (%d)\"}\n", i,
                       code ? mc_strerror(code) : "it exited", code);
            rc = 1;
        }
    }
    if (rc == 0 && o->json)
        printf("{\"ready\": true, \"procs\": %d}\n", n);
    for (size_t wi = 0; rc == 0 && wi < o->nwl; wi++) {
        if (sb_drive(o, ch, n, wi) != 0) {
            fprintf(stderr, SB_PROG ": a client process died during workload %zu\n", wi);
            if (o->json)
                printf("{\"fatal\": \"a client process died during workload %zu\"}\n", wi);
            rc = 1;
        }
    }
    for (int i = 0; i < n; i++) {
        if (ch[i].cmd >= 0)
            close(ch[i].cmd); /* EOF: a child waiting for its next start leaves */
        if (ch[i].res >= 0)
            close(ch[i].res);
    }
    for (int i = 0; i < n; i++) {
        int st = 0;
        if (ch[i].pid > 0 && waitpid(ch[i].pid, &st, 0) == ch[i].pid && rc == 0 &&
            !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
            fprintf(stderr, SB_PROG ": client process %d exited abnormally\n", i);
            rc = 1;
        }
    }
    return rc;
}

int main(int argc, char **argv) {
    sb_opts_t o = {
        .role = "driver",
        .master = "127.0.0.1:50051",
        .protocol = "tcp",
        .hostname = "127.0.0.1",
        .workloads = "put:4096,get_cached:4096,get_first:4096",
        .segment_size = 256u << 20,
        .pool_bytes = 96u << 20,
        .procs = 1,
        .duration = 1.0,
    };
    const mc_flag_t flags[] = {
        {"role", MC_FLAG_STRING, &o.role,
         "driver (client processes run the workloads) or holder (contributes a segment, serves "
         "until stdin closes)"},
        {"master", MC_FLAG_STRING, &o.master, "mooncake_master address host:port"},
        {"protocol", MC_FLAG_STRING, &o.protocol, "tcp or shm"},
        {"local_hostname", MC_FLAG_STRING, &o.hostname, "this host's address for the engine"},
        {"workloads", MC_FLAG_STRING, &o.workloads,
         "comma list of op:size[:batch[:heap|zc]]; op put, get_cached (keys re-read within the "
         "replica-location cache window) or get_first (each get asks the master); zc: a "
         "registered buffer, heap: memory not registered"},
        {"procs", MC_FLAG_INT, &o.procs, "client processes, each with its own store client"},
        {"duration", MC_FLAG_DOUBLE, &o.duration, "seconds per workload"},
        {"pool_bytes", MC_FLAG_SIZE, &o.pool_bytes,
         "bytes of live objects a workload keeps, all processes together"},
        {"segment_size", MC_FLAG_SIZE, &o.segment_size, "holder: bytes contributed"},
        {"json", MC_FLAG_BOOL, &o.json, "one JSON object per workload instead of text"},
    };
    int rc = mc__flags_parse(argc, argv, flags, sizeof(flags) / sizeof(flags[0]), SB_PROG,
                             MC_VERSION_STRING, "Store benchmark over the public C API");
    if (rc != 0)
        return rc > 0 ? 0 : 2;
    signal(SIGPIPE, SIG_IGN);
    if (strcmp(o.role, "holder") == 0) {
        if (o.segment_size == 0) {
            fprintf(stderr, SB_PROG ": --segment_size must be > 0\n");
            return 2;
        }
        return sb_holder_main(&o);
    }
    if (strcmp(o.role, "driver") != 0) {
        fprintf(stderr, SB_PROG ": --role must be driver or holder, not '%s'\n", o.role);
        return 2;
    }
    if (o.procs < 1 || o.procs > SB_MAX_PROCS || !(o.duration > 0) || o.duration > 3600 ||
        o.pool_bytes == 0) {
        fprintf(stderr, SB_PROG ": need 1 <= procs <= %d, 0 < duration <= 3600, pool_bytes > 0\n",
                SB_MAX_PROCS);
        return 2;
    }
    if (sb_parse_workloads(&o) != 0)
        return 2;
    return sb_driver(&o);
}
