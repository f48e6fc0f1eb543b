/* The initiator side of mooncake_transfer_bench: rounds of timed transfers from worker threads,
 * each round bracketed by measurements of the host limits so that its ratio compares numbers
 * taken seconds apart, which is what keeps ratios meaningful on a shared machine. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_stats.h"
#include "limits.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/time.h"
#include "transfer_bench.h"

typedef struct bench_worker {
    mc_engine_t *engine;
    mc_segment_id_t seg;
    int opcode;
    unsigned char *local;
    uint64_t remote;
    size_t slice_off, slice_len, block, batch;
    size_t cursor; /* kept across rounds so each round continues through the buffer */
    uint64_t stop_ns;
    uint64_t bytes, batches;
    uint64_t end_ns;
    int err;
    mc__samples_t lat;
    pthread_t tid;
} bench_worker_t;

int bench_engine_start(const bench_opts_t *o, mc_engine_t **out) {
    mc_engine_t *e = NULL;
    mc_engine_options_t eo = {
        .local_server_name = o->local_server_name,
        .metadata_conn = o->metadata_server,
        .protocol = o->protocol,
        .device_name = o->device_name,
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

int bench_uses_tcp(const bench_opts_t *o, const char *protocol_used) {
    /* fabric: its providers here (tcp) run over the same sockets as the pump */
    return strcmp(o->protocol, "tcp") == 0 || strcmp(protocol_used, "tcp") == 0 ||
           strcmp(protocol_used, "fabric") == 0;
}

static void *bench_worker_run(void *arg) {
    bench_worker_t *w = arg;
    mc_request_t *reqs = mc__calloc(w->batch, sizeof(*reqs));
    if (!reqs) {
        w->err = MC_ERR_MEMORY;
        goto out;
    }
    while (mc__now_ns() < w->stop_ns) {
        mc_batch_id_t b = 0;
        int rc;
        for (size_t i = 0; i < w->batch; i++) {
            if (w->cursor + w->block > w->slice_len)
                w->cursor = 0;
            reqs[i].opcode = w->opcode;
            reqs[i].source = w->local + w->slice_off + w->cursor;
            reqs[i].target_id = w->seg;
            reqs[i].target_offset = w->remote + w->slice_off + w->cursor;
            reqs[i].length = w->block;
            w->cursor += w->block;
        }
        rc = mc_engine_batch_alloc(w->engine, w->batch, &b);
        if (rc == 0)
            rc = mc_engine_batch_submit(w->engine, b, reqs, w->batch);
        if (rc == 0)
            rc = mc_engine_batch_wait(w->engine, b, -1);
        /* Latency per block: the engine stamps each task from submit to its end. */
        for (size_t i = 0; rc == 0 && i < w->batch; i++) {
            mc_task_state_t st;
            rc = mc_engine_task_status(w->engine, b, i, &st);
            if (rc == 0 && mc__samples_add(&w->lat, st.latency_ns) != 0)
                rc = MC_ERR_MEMORY;
        }
        if (b != 0)
            mc_engine_batch_free(w->engine, b);
        if (rc != 0) {
            w->err = rc;
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

static int bench_measure_limits(const bench_opts_t *o, double *mem, double *tcp) {
    double secs = o->limits_duration > 0 ? o->limits_duration : (o->duration < 1 ? o->duration : 1);
    int rc = mc__bench_memcpy_gbps(o->block_size, o->buffer_size, secs, mem);
    if (rc == 0)
        rc = mc__bench_tcp_pump_gbps(o->block_size, o->buffer_size, secs, tcp);
    if (rc != 0)
        fprintf(stderr, PROG ": measuring the host limits failed: %s\n", mc_strerror(rc));
    return rc;
}

/* Runs one round on all workers; adds its bytes and samples to the totals. */
static int bench_round(bench_worker_t *w, size_t n, double duration, bench_round_t *round,
                       mc__samples_t *all, bench_result_t *res) {
    uint64_t t0 = mc__now_ns(), t_end = t0;
    size_t started = 0;
    int rc = 0;
    for (started = 0; started < n; started++) {
        w[started].stop_ns = t0 + (uint64_t)(duration * 1e9);
        w[started].bytes = w[started].batches = 0;
        w[started].lat.n = 0;
        if (pthread_create(&w[started].tid, NULL, bench_worker_run, &w[started]) != 0) {
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
        round->bytes += w[i].bytes;
        res->blocks += w[i].batches * w[i].batch;
        if (mc__samples_merge(all, &w[i].lat) != 0 && rc == 0)
            rc = MC_ERR_MEMORY;
    }
    round->seconds = (double)(t_end - t0) / 1e9;
    round->gbps = round->seconds > 0 ? (double)round->bytes / 1e9 / round->seconds : 0;
    res->bytes += round->bytes;
    res->seconds += round->seconds;
    return rc;
}

static int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void bench_summarize(const bench_opts_t *o, bench_result_t *r, const double *mem,
                            const double *tcp) {
    double ratios[BENCH_MAX_ROUNDS];
    int use_tcp = bench_uses_tcp(o, r->protocol_used);
    r->gbps = r->seconds > 0 ? (double)r->bytes / 1e9 / r->seconds : 0;
    if (!o->report_limits)
        return;
    for (int i = 0; i <= r->nrounds; i++) {
        if (mem[i] > r->memcpy_gbps)
            r->memcpy_gbps = mem[i];
        if (tcp[i] > r->tcp_gbps)
            r->tcp_gbps = tcp[i];
    }
    for (int i = 0; i < r->nrounds; i++) {
        bench_round_t *x = &r->rounds[i];
        double limit;
        x->memcpy_gbps = mem[i] > mem[i + 1] ? mem[i] : mem[i + 1];
        x->tcp_gbps = tcp[i] > tcp[i + 1] ? tcp[i] : tcp[i + 1];
        limit = use_tcp ? x->tcp_gbps : x->memcpy_gbps;
        x->ratio = limit > 0 ? x->gbps / limit : 0;
        ratios[i] = x->ratio;
    }
    qsort(ratios, (size_t)r->nrounds, sizeof(ratios[0]), bench_cmp_double);
    r->ratio_median = r->nrounds % 2 ? ratios[r->nrounds / 2]
                                     : (ratios[r->nrounds / 2 - 1] + ratios[r->nrounds / 2]) / 2;
}

/* The transport that carried most of the bytes (the engine's statistics), so the report names what
 * ran rather than what was asked for (rdma may fall back to tcp, auto picks shm or tcp). */
static void bench_carrier(mc_engine_t *e, bench_result_t *res) {
    static const char *const names[] = {"fabric", "shm", "tcp", "local"};
    uint64_t best = 0;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        uint64_t bytes = 0;
        if (mc_engine_get_stats(e, names[i], NULL, &bytes) == 0 && bytes > best) {
            best = bytes;
            snprintf(res->protocol_used, sizeof(res->protocol_used), "%s", names[i]);
        }
    }
}

int bench_initiator(const bench_opts_t *o, const char *segment, bench_result_t *res) {
    mc_engine_t *e = NULL;
    void *local = NULL;
    bench_worker_t *w = NULL;
    mc_segment_id_t seg = -1;
    uint64_t raddr = 0, rlen = 0;
    size_t nthreads = (size_t)o->threads, usable, slice;
    double mem[BENCH_MAX_ROUNDS + 1] = {0}, tcp[BENCH_MAX_ROUNDS + 1] = {0};
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
    for (size_t i = 0; i < nthreads; i++) {
        w[i].engine = e;
        w[i].seg = seg;
        w[i].opcode = strcmp(o->operation, "read") == 0 ? MC_OPCODE_READ : MC_OPCODE_WRITE;
        w[i].local = local;
        w[i].remote = raddr;
        w[i].slice_off = i * slice;
        w[i].slice_len = slice;
        w[i].block = o->block_size;
        w[i].batch = (size_t)o->batch_size;
    }
    snprintf(res->protocol_used, sizeof(res->protocol_used), "%s", mc_engine_protocol(e));
    if (o->report_limits && (rc = bench_measure_limits(o, &mem[0], &tcp[0])) != 0)
        goto out;
    for (int r = 0; r < (int)o->rounds; r++) {
        rc = bench_round(w, nthreads, o->duration, &res->rounds[r], &all, res);
        if (rc != 0) {
            fprintf(stderr, PROG ": transfers failed: %s (%d)\n", mc_strerror(rc), rc);
            goto out;
        }
        res->nrounds = r + 1;
        if (o->report_limits && (rc = bench_measure_limits(o, &mem[r + 1], &tcp[r + 1])) != 0)
            goto out;
    }
    bench_carrier(e, res);
    bench_summarize(o, res, mem, tcp);
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
