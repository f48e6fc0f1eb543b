/* mooncake_transfer_bench: Transfer Engine throughput and latency, printed beside the host's own
 * limits (single-thread memcpy, a plain single-stream TCP pump) measured in the same run, because
 * on a shared machine only ratios taken together are comparable between runs.
 *
 * Modes: target (serve a buffer until SIGINT/SIGTERM), initiator (drive a target named by
 * --segment_id), loopback (the default: fork a target on this host, then run as its initiator). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_stats.h"
#include "limits.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/config.h"
#include "mooncake/common/time.h"
#include "mooncake/common/version.h"
#include "mooncake/transfer_engine.h"

#define PROG "mooncake_transfer_bench"

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
    double duration;
    double limits_duration;
    int report_limits;
    int json;
} bench_opts_t;

typedef struct bench_worker {
    mc_engine_t *engine;
    mc_segment_id_t seg;
    int opcode;
    unsigned char *local;
    uint64_t remote;
    size_t slice_off, slice_len, block, batch;
    uint64_t stop_ns;
    uint64_t bytes, batches;
    uint64_t end_ns;
    int err;
    mc__samples_t lat;
    pthread_t tid;
} bench_worker_t;

typedef struct bench_result {
    char segment[512];
    const char *protocol_used;
    uint64_t bytes, blocks;
    double seconds, gbps;
    double lat_p50_us, lat_p99_us, lat_max_us;
    double memcpy_gbps, tcp_gbps; /* 0 when not measured */
} bench_result_t;

static int bench_engine_start(const bench_opts_t *o, mc_engine_t **out) {
    mc_engine_t *e = NULL;
    mc_engine_options_t eo = {
        .local_server_name = o->local_server_name,
        .metadata_conn = o->metadata_server,
        .protocol = o->protocol,
    };
    int rc = mc_engine_create(&e);
    if (rc == 0)
        rc = mc_engine_init(e, &eo);
    if (rc != 0) {
        fprintf(stderr, PROG ": engine start failed: %s (%d)\n", mc_strerror(rc), rc);
        mc_engine_destroy(e);
        return rc;
    }
    *out = e;
    return 0;
}

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
        fprintf(stderr, PROG ": target buffer of %llu B: %s\n",
                (unsigned long long)o->buffer_size, mc_strerror(rc));
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

/* ---- initiator ---- */

static void *bench_worker_run(void *arg) {
    bench_worker_t *w = arg;
    mc_request_t *reqs = mc__calloc(w->batch, sizeof(*reqs));
    size_t cursor = 0;
    if (!reqs) {
        w->err = MC_ERR_MEMORY;
        goto out;
    }
    while (mc__now_ns() < w->stop_ns) {
        mc_batch_id_t b = 0;
        uint64_t t0;
        int rc;
        for (size_t i = 0; i < w->batch; i++) {
            if (cursor + w->block > w->slice_len)
                cursor = 0;
            reqs[i].opcode = w->opcode;
            reqs[i].source = w->local + w->slice_off + cursor;
            reqs[i].target_id = w->seg;
            reqs[i].target_offset = w->remote + w->slice_off + cursor;
            reqs[i].length = w->block;
            cursor += w->block;
        }
        t0 = mc__now_ns();
        rc = mc_engine_batch_alloc(w->engine, w->batch, &b);
        if (rc == 0)
            rc = mc_engine_batch_submit(w->engine, b, reqs, w->batch);
        if (rc == 0)
            rc = mc_engine_batch_wait(w->engine, b, -1);
        if (b != 0)
            mc_engine_batch_free(w->engine, b);
        if (rc != 0) {
            w->err = rc;
            break;
        }
        if (mc__samples_add(&w->lat, mc__now_ns() - t0) != 0) {
            w->err = MC_ERR_MEMORY;
            break;
        }
        w->bytes += (uint64_t)w->batch * w->block;
        w->batches++;
    }
out:
    w->end_ns = mc__now_ns();
    mc__free(reqs);
    return NULL;
}

static int bench_initiator(const bench_opts_t *o, const char *segment, bench_result_t *res) {
    mc_engine_t *e = NULL;
    void *local = NULL;
    bench_worker_t *w = NULL;
    mc_segment_id_t seg = -1;
    uint64_t raddr = 0, rlen = 0, t0, t_end = 0;
    size_t nthreads = (size_t)o->threads, started = 0, usable, slice;
    mc__samples_t all = {0};
    int rc;

    rc = bench_engine_start(o, &e);
    if (rc != 0)
        goto out;
    rc = mc_engine_open_segment(e, segment, &seg);
    if (rc == 0)
        rc = mc_engine_segment_first_buffer(e, seg, &raddr, &rlen);
    if (rc != 0 || rlen == 0) {
        fprintf(stderr, PROG ": segment %s: %s\n", segment,
                rc ? mc_strerror(rc) : "it registered no memory");
        rc = rc ? rc : MC_ERR_INVALID_ARGUMENT;
        goto out;
    }
    usable = o->buffer_size < rlen ? o->buffer_size : rlen;
    slice = usable / nthreads / o->block_size * o->block_size;
    if (slice < o->block_size) {
        fprintf(stderr, PROG ": %zu B of buffer cannot give %zu threads a %llu B block each\n",
                usable, nthreads, (unsigned long long)o->block_size);
        rc = MC_ERR_INVALID_ARGUMENT;
        goto out;
    }
    rc = mc_engine_alloc_managed(e, usable, &local);
    if (rc != 0) {
        fprintf(stderr, PROG ": local buffer of %zu B: %s\n", usable, mc_strerror(rc));
        goto out;
    }
    memset(local, 0xc3, usable);
    w = mc__calloc(nthreads, sizeof(*w));
    if (!w) {
        rc = MC_ERR_MEMORY;
        goto out;
    }
    t0 = mc__now_ns();
    for (started = 0; started < nthreads; started++) {
        bench_worker_t *x = &w[started];
        x->engine = e;
        x->seg = seg;
        x->opcode = strcmp(o->operation, "read") == 0 ? MC_OPCODE_READ : MC_OPCODE_WRITE;
        x->local = local;
        x->remote = raddr;
        x->slice_off = started * slice;
        x->slice_len = slice;
        x->block = o->block_size;
        x->batch = (size_t)o->batch_size;
        x->stop_ns = t0 + (uint64_t)(o->duration * 1e9);
        if (pthread_create(&x->tid, NULL, bench_worker_run, x) != 0) {
            rc = MC_ERR_INTERNAL_ERROR;
            break;
        }
    }
    for (size_t i = 0; i < started; i++) {
        pthread_join(w[i].tid, NULL);
        if (w[i].err && rc == 0)
            rc = w[i].err;
        if (w[i].end_ns > t_end)
            t_end = w[i].end_ns;
        res->bytes += w[i].bytes;
        res->blocks += w[i].batches * w[i].batch;
        if (mc__samples_merge(&all, &w[i].lat) != 0 && rc == 0)
            rc = MC_ERR_MEMORY;
    }
    if (rc != 0) {
        fprintf(stderr, PROG ": transfers failed: %s (%d)\n", mc_strerror(rc), rc);
        goto out;
    }
    res->protocol_used = mc_engine_protocol(e);
    res->seconds = (double)(t_end - t0) / 1e9;
    res->gbps = res->seconds > 0 ? (double)res->bytes / 1e9 / res->seconds : 0;
    res->lat_p50_us = (double)mc__samples_percentile(&all, 50) / 1e3;
    res->lat_p99_us = (double)mc__samples_percentile(&all, 99) / 1e3;
    res->lat_max_us = (double)mc__samples_percentile(&all, 100) / 1e3;
out:
    for (size_t i = 0; w && i < nthreads; i++)
        mc__samples_free(&w[i].lat);
    mc__free(w);
    mc__samples_free(&all);
    if (local)
        mc_engine_free_managed(e, local);
    if (seg >= 0)
        mc_engine_close_segment(e, seg);
    mc_engine_destroy(e);
    return rc;
}

/* ---- reporting ---- */

/* tcp results are held against the TCP pump, everything else (shm, auto on one host) against
 * memcpy: that is the copy a same-host transfer cannot beat. */
static int bench_uses_tcp(const bench_opts_t *o, const bench_result_t *r) {
    return strcmp(o->protocol, "tcp") == 0 ||
           (r->protocol_used && strcmp(r->protocol_used, "tcp") == 0);
}

static int bench_report(const bench_opts_t *o, const char *segment, const bench_result_t *r) {
    int tcp = bench_uses_tcp(o, r);
    double limit = tcp ? r->tcp_gbps : r->memcpy_gbps;
    double ratio = limit > 0 ? r->gbps / limit : 0;
    if (o->json) {
        cJSON *j = cJSON_CreateObject();
        char *s = NULL;
        if (!j)
            return MC_ERR_MEMORY;
        cJSON_AddStringToObject(j, "tool", PROG);
        cJSON_AddStringToObject(j, "version", MC_VERSION_STRING);
        cJSON_AddStringToObject(j, "mode", o->mode);
        cJSON_AddStringToObject(j, "segment_id", segment);
        cJSON_AddStringToObject(j, "protocol", o->protocol);
        cJSON_AddStringToObject(j, "protocol_used", r->protocol_used ? r->protocol_used : "");
        cJSON_AddStringToObject(j, "operation", o->operation);
        cJSON_AddNumberToObject(j, "block_size", (double)o->block_size);
        cJSON_AddNumberToObject(j, "batch_size", (double)o->batch_size);
        cJSON_AddNumberToObject(j, "threads", (double)o->threads);
        cJSON_AddNumberToObject(j, "buffer_size", (double)o->buffer_size);
        cJSON_AddNumberToObject(j, "duration_s", r->seconds);
        cJSON_AddNumberToObject(j, "blocks", (double)r->blocks);
        cJSON_AddNumberToObject(j, "bytes", (double)r->bytes);
        cJSON_AddNumberToObject(j, "gbps", r->gbps);
        cJSON_AddStringToObject(j, "latency_unit", "batch");
        cJSON_AddNumberToObject(j, "lat_p50_us", r->lat_p50_us);
        cJSON_AddNumberToObject(j, "lat_p99_us", r->lat_p99_us);
        cJSON_AddNumberToObject(j, "lat_max_us", r->lat_max_us);
        if (o->report_limits) {
            cJSON_AddNumberToObject(j, "memcpy_gbps", r->memcpy_gbps);
            cJSON_AddNumberToObject(j, "tcp_pump_gbps", r->tcp_gbps);
            cJSON_AddNumberToObject(j, "ratio_vs_memcpy",
                                    r->memcpy_gbps > 0 ? r->gbps / r->memcpy_gbps : 0);
            cJSON_AddNumberToObject(j, "ratio_vs_tcp_pump",
                                    r->tcp_gbps > 0 ? r->gbps / r->tcp_gbps : 0);
            cJSON_AddStringToObject(j, "limit", tcp ? "tcp_pump" : "memcpy");
            cJSON_AddNumberToObject(j, "ratio", ratio);
        }
        s = cJSON_PrintUnformatted(j);
        if (s)
            printf("%s\n", s);
        cJSON_free(s);
        cJSON_Delete(j);
        return s ? 0 : MC_ERR_MEMORY;
    }
    printf(PROG " %s: %s %s over %s (asked %s), block %llu B x batch %lld, %lld thread(s)\n",
           MC_VERSION_STRING, o->mode, o->operation, r->protocol_used ? r->protocol_used : "?",
           o->protocol, (unsigned long long)o->block_size, (long long)o->batch_size,
           (long long)o->threads);
    printf("  throughput : %.3f GB/s (%llu blocks, %.3f GB in %.2f s)\n", r->gbps,
           (unsigned long long)r->blocks, (double)r->bytes / 1e9, r->seconds);
    printf("  latency    : p50 %.1f us, p99 %.1f us, max %.1f us per batch of %lld block(s)\n",
           r->lat_p50_us, r->lat_p99_us, r->lat_max_us, (long long)o->batch_size);
    if (o->report_limits) {
        printf("  limits     : memcpy %.3f GB/s, tcp pump %.3f GB/s (1 thread/stream, same block "
               "and buffer, best of before/after)\n",
               r->memcpy_gbps, r->tcp_gbps);
        printf("  ratio      : %.3f of %s (also %.3f of %s)\n", ratio, tcp ? "tcp pump" : "memcpy",
               tcp ? (r->memcpy_gbps > 0 ? r->gbps / r->memcpy_gbps : 0)
                   : (r->tcp_gbps > 0 ? r->gbps / r->tcp_gbps : 0),
               tcp ? "memcpy" : "tcp pump");
    }
    return 0;
}

/* Called before and after the transfers; each limit keeps the best value seen. On a shared
 * machine a limit measured in a noisy second would flatter the ratio; the best of two windows
 * around the run errs the other way. */
static int bench_limits(const bench_opts_t *o, bench_result_t *r) {
    double secs = o->limits_duration > 0 ? o->limits_duration : (o->duration < 1 ? o->duration : 1);
    double mem = 0, tcp = 0;
    int rc = mc__bench_memcpy_gbps(o->block_size, o->buffer_size, secs, &mem);
    if (rc == 0)
        rc = mc__bench_tcp_pump_gbps(o->block_size, o->buffer_size, secs, &tcp);
    if (rc != 0) {
        fprintf(stderr, PROG ": measuring the host limits failed: %s\n", mc_strerror(rc));
        return rc;
    }
    if (mem > r->memcpy_gbps)
        r->memcpy_gbps = mem;
    if (tcp > r->tcp_gbps)
        r->tcp_gbps = tcp;
    return 0;
}

/* ---- main ---- */

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
    if (o->block_size == 0 || o->buffer_size < o->block_size || o->batch_size < 1 ||
        o->batch_size > 65536 || o->threads < 1 || o->threads > 1024 || !(o->duration > 0) ||
        o->duration > 86400 || o->limits_duration < 0) {
        fprintf(stderr, PROG ": need 0 < block_size <= buffer_size, 1 <= batch_size <= 65536, "
                        "1 <= threads <= 1024, 0 < duration <= 86400\n");
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
        .duration = 5,
        .report_limits = 1,
    };
    const mc_flag_t flags[] = {
        {"mode", MC_FLAG_STRING, &o.mode,
         "initiator, target, or loopback (forks a target on this host)"},
        {"metadata_server", MC_FLAG_STRING, &o.metadata_server,
         "P2PHANDSHAKE or http://host:port/metadata"},
        {"local_server_name", MC_FLAG_STRING, &o.local_server_name,
         "this engine's segment name: host or host:port"},
        {"segment_id", MC_FLAG_STRING, &o.segment_id, "initiator: the target's segment name"},
        {"protocol", MC_FLAG_STRING, &o.protocol, "tcp, shm or auto"},
        {"operation", MC_FLAG_STRING, &o.operation, "read or write"},
        {"buffer_size", MC_FLAG_SIZE, &o.buffer_size, "registered bytes on each side"},
        {"block_size", MC_FLAG_SIZE, &o.block_size, "bytes per request"},
        {"batch_size", MC_FLAG_INT, &o.batch_size, "requests per batch"},
        {"threads", MC_FLAG_INT, &o.threads, "initiator threads, one batch in flight each"},
        {"duration", MC_FLAG_DOUBLE, &o.duration, "seconds of transfers"},
        {"report_limits", MC_FLAG_BOOL, &o.report_limits,
         "also measure memcpy and a TCP pump and print ratios"},
        {"limits_duration", MC_FLAG_DOUBLE, &o.limits_duration,
         "seconds per limit measurement, taken before and after the run (0: min(duration, 1))"},
        {"json", MC_FLAG_BOOL, &o.json, "print one JSON object instead of text"},
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
    /* Limits around the run, while nothing else of ours runs (the loopback target is not up yet,
     * and has exited by the second measurement). */
    if (o.report_limits && bench_limits(&o, &r) != 0)
        return 1;
    if (strcmp(o.mode, "loopback") == 0)
        rc = bench_loopback(&o, &r);
    else
        rc = bench_initiator(&o, o.segment_id, &r);
    if (rc != 0)
        return 1;
    if (o.report_limits && bench_limits(&o, &r) != 0)
        return 1;
    return bench_report(&o, strcmp(o.mode, "loopback") == 0 ? r.segment : o.segment_id, &r) ? 1 : 0;
}
