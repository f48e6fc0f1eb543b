/* The master's Prometheus metrics: the text exposition of what gauges.c and the state hold.
 *
 * Three families share the page. The reference's names (master_*, segment_*, mem_cache_*, ...)
 * so that dashboards written for it work unchanged; our own mooncake_master_* names, which
 * existing tests and tools read; and the standard process_* set read from /proc. Latencies are
 * in seconds. See docs/operations.md for the list and for the reference's metrics left out. */
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "master/disk.h"
#include "master/master_internal.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/time.h"
#include "mooncake/common/version.h"
#include "mooncake/error.h"
#include "proto/task_proto.h"

/* ---- writing the exposition ---- */

static void mc__put(mc_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void mc__put(mc_buf_t *b, const char *fmt, ...) {
    char line[1024];
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (n > 0)
        mc__buf_put(b, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

static void mc__head(mc_buf_t *b, const char *name, const char *type, const char *help) {
    mc__put(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void mc__one(mc_buf_t *b, const char *name, const char *type, const char *help, double v) {
    mc__head(b, name, type, help);
    if (v == (double)(long long)v) /* counts: every digit */
        mc__put(b, "%s %lld\n", name, (long long)v);
    else
        mc__put(b, "%s %.6f\n", name, v);
}

#define MC__U(x) ((double)atomic_load(&(x)))

/* A label value: the name as text (bytes that are not UTF-8 as \xNN), then the exposition's
 * escapes for backslash and quote. out holds 8 * n + 1 bytes. */
static void mc__label(const char *s, char *out) {
    size_t n = strlen(s), o = 0;
    char *text = mc__malloc(4 * n + 1);
    if (!text) {
        out[0] = '\0';
        return;
    }
    mc__key_text((const uint8_t *)s, n, text, 1);
    for (const char *p = text; *p; p++) {
        if (*p == '\\' || *p == '"')
            out[o++] = '\\';
        out[o++] = *p;
    }
    out[o] = '\0';
    mc__free(text);
}

/* ---- the reference's master metrics ---- */

/* The reference's family names for each message type, from the map (MC_MP_TYPE_MAP): a
 * single-key call and, where it has one, its batch call. NULL: it has no such metric (our
 * upserts, replica clears of one key, ...). */
typedef struct mc__op_names {
    const char *single;
    const char *batch;
} mc__op_names_t;

static mc__op_names_t mc__ref_names(int type) {
    const mc__mp_type_info_t *t = mc__mp_type_info((uint8_t)type);
    mc__op_names_t r = {t ? t->ref_single : NULL, t ? t->ref_batch : NULL};
    return r;
}

/* One counter of a reference family: master_<op>_<suffix>, its help the op between pre and
 * post. The single and batch families differ only in these rows, so they share the writer. */
typedef struct mc__op_counter {
    const char *suffix;
    const char *pre;
    const char *post;
    double value;
} mc__op_counter_t;

static void mc__op_counters(mc_buf_t *b, const char *op, const mc__op_counter_t *c, size_t n) {
    char name[128], help[192];
    for (size_t i = 0; i < n; i++) {
        snprintf(name, sizeof(name), "master_%s_%s", op, c[i].suffix);
        snprintf(help, sizeof(help), "%s%s%s", c[i].pre, op, c[i].post);
        mc__one(b, name, "counter", help, c[i].value);
    }
}

static void mc__ref_requests(mc__master_t *m, mc_buf_t *b) {
    for (int t = 1; t < MC_MP_TYPE_MAX_; t++) {
        mc__op_names_t r = mc__ref_names(t);
        mc__op_stats_t *st = &m->op[t];
        double single = MC__U(st->single), single_failed = MC__U(st->single_failed);
        if (t == MC_MP_REMOVE_ALL) {
            /* one message type, two reference calls: with a pattern it is remove_by_regex */
            double rx = MC__U(m->remove_all_regex), rxf = MC__U(m->remove_all_regex_failed);
            mc__one(b, "master_remove_all_requests_total", "counter", "RemoveAll requests received",
                    single - rx);
            mc__one(b, "master_remove_all_failures_total", "counter", "RemoveAll requests failed",
                    single_failed - rxf);
            mc__one(b, "master_remove_by_regex_requests_total", "counter",
                    "RemoveByRegex requests received", rx);
            mc__one(b, "master_remove_by_regex_failures_total", "counter",
                    "RemoveByRegex requests failed", rxf);
            continue;
        }
        if (!r.batch && r.single) {
            /* no batch form: every request is one call (failed when a key failed) */
            single = MC__U(st->rpcs);
            single_failed += MC__U(st->batch_failed) + MC__U(st->batch_partial);
        }
        if (r.single) {
            const mc__op_counter_t c[] = {
                {"requests_total", "", " requests received (one key each)", single},
                {"failures_total", "", " requests that failed", single_failed},
            };
            mc__op_counters(b, r.single, c, sizeof(c) / sizeof(c[0]));
        }
        if (r.batch) {
            double reqs = MC__U(st->batch), items = MC__U(st->batch_items);
            double failed = MC__U(st->batch_failed), partial = MC__U(st->batch_partial);
            double failed_items = MC__U(st->batch_failed_items);
            if (!r.single) { /* every request is a batch, even of one key */
                reqs = MC__U(st->rpcs);
                items = MC__U(st->ops);
                failed_items = MC__U(st->errors);
                failed += single_failed;
            }
            const mc__op_counter_t c[] = {
                {"requests_total", "", " requests received (more than one key)", reqs},
                {"failures_total", "", " requests where every key failed", failed},
                {"partial_successes_total", "", " requests where some keys failed", partial},
                {"items_total", "keys named in ", " requests", items},
                {"failed_items_total", "keys that failed in ", " requests", failed_items},
            };
            mc__op_counters(b, r.batch, c, sizeof(c) / sizeof(c[0]));
        }
    }
    /* one message type, a reference call per task type (MC_TASK_TYPE_MAP) */
#define MC__TASK_METRICS(T, tname, value, ref)                                                     \
    mc__one(b, "master_create_" #tname "_task_requests_total", "counter",                          \
            #tname " tasks asked for (" ref ")", MC__U(m->task_creates[value]));                   \
    mc__one(b, "master_create_" #tname "_task_failures_total", "counter", #tname " tasks refused", \
            MC__U(m->task_create_failures[value]));
    MC_TASK_TYPE_MAP(MC__TASK_METRICS)
#undef MC__TASK_METRICS
    mc__one(b, "master_put_start_alloc_failures_total", "counter",
            "keys a put found no space for (NO_AVAILABLE_HANDLE)", MC__U(m->put_alloc_failures));
    mc__one(b, "master_put_start_partial_allocations_total", "counter",
            "keys placed with fewer replicas than asked (best effort)",
            MC__U(m->put_partial_allocs));
}

typedef struct mc__sweep_count {
    uint64_t now;
    uint64_t soft_pinned;
} mc__sweep_count_t;

static int mc__count_visit(mc__master_t *m, mc__object_t *o, void *arg) {
    mc__sweep_count_t *c = arg;
    (void)m;
    if ((o->flags & MC__OBJ_COMPLETE) && (o->flags & MC__OBJ_SOFT_PIN) &&
        o->soft_pin_until > c->now)
        c->soft_pinned++;
    return 0;
}

static void mc__ref_segments(mc__master_t *m, mc_buf_t *b) {
    /* Several mounts may share one name (one client's buffers): the series is per name. */
    mc__head(b, "segment_allocated_bytes", "gauge", "bytes allocated in the segment");
    for (int pass = 0; pass < 2; pass++) {
        if (pass)
            mc__head(b, "segment_total_capacity_bytes", "gauge", "capacity of the segment");
        pthread_rwlock_rdlock(&m->registry);
        for (uint32_t i = 0; i < m->n_slots; i++) {
            mc__segment_t *s = m->slots[i];
            char label[8 * MC_MP_MAX_SEGMENT_NAME + 1];
            uint64_t sum = 0;
            int seen = 0;
            if (!s)
                continue;
            for (uint32_t j = 0; j < i && !seen; j++)
                seen = m->slots[j] && strcmp(m->slots[j]->name, s->name) == 0;
            if (seen)
                continue;
            for (uint32_t j = i; j < m->n_slots; j++) {
                mc__segment_t *t = m->slots[j];
                if (!t || strcmp(t->name, s->name) != 0)
                    continue;
                pthread_mutex_lock(&t->mu);
                sum += pass ? t->alloc.total_bytes : t->alloc.used_bytes;
                pthread_mutex_unlock(&t->mu);
            }
            mc__label(s->name, label); /* may exceed mc__put's line: written apart */
            mc__put(b, "%s{segment=\"",
                    pass ? "segment_total_capacity_bytes" : "segment_allocated_bytes");
            mc__buf_put(b, label, strlen(label));
            mc__put(b, "\"} %llu\n", (unsigned long long)sum);
        }
        pthread_rwlock_unlock(&m->registry);
    }
}

static void mc__ref_metrics(mc__master_t *m, mc_buf_t *b) {
    mc__sweep_count_t c = {mc__now_ms(), 0};
    uint64_t staging = 0, cum = 0, n_values = 0;
    size_t clients;
    mc__objects_sweep(m, mc__count_visit, &c);
    pthread_mutex_lock(&m->clients_mu);
    clients = m->n_clients;
    pthread_mutex_unlock(&m->clients_mu);
    staging = mc__grave_discarded_bytes(m);

    mc__one(b, "master_allocated_bytes", "gauge", "bytes allocated across all segments",
            MC__U(m->used_bytes));
    mc__one(b, "master_total_capacity_bytes", "gauge", "capacity of all mounted segments",
            MC__U(m->capacity_bytes));
    mc__ref_segments(m, b);
    /* The reference names these gauges *_count, which the exposition linter reserves for
     * histograms and summaries: untyped keeps the names and a clean lint. */
    mc__one(b, "master_key_count", "untyped", "(gauge) complete objects (keys) stored",
            MC__U(m->n_objects));
    mc__one(b, "master_soft_pin_key_count", "untyped",
            "(gauge) complete objects whose soft pin has not expired", (double)c.soft_pinned);
    mc__one(b, "master_active_clients", "gauge", "clients alive (heartbeating)", (double)clients);

    mc__head(b, "master_value_size_bytes", "histogram", "sizes of the objects put");
    for (int k = 0; k <= MC__SIZE_BUCKETS; k++) {
        cum += atomic_load(&m->value_size_bucket[k]);
        if (k < MC__SIZE_BUCKETS)
            mc__put(b, "master_value_size_bytes_bucket{le=\"%llu\"} %llu\n",
                    (unsigned long long)mc__size_le[k], (unsigned long long)cum);
    }
    n_values = cum;
    mc__put(b, "master_value_size_bytes_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)n_values);
    mc__put(b, "master_value_size_bytes_sum %llu\nmaster_value_size_bytes_count %llu\n",
            (unsigned long long)atomic_load(&m->value_size_sum), (unsigned long long)n_values);

    mc__ref_requests(m, b);

    /* Reads: every key asked for, and those found (served from memory, the only tier the
     * master places in). The reference types these counters without the _total suffix. */
    mc__one(b, "mem_cache_hit_nums_", "untyped", "(counter) replica lookups served from memory",
            MC__U(m->get_hits));
    mc__one(b, "mem_cache_hit_bytes_total", "counter",
            "bytes of the objects whose lookups were served from memory", MC__U(m->get_hit_bytes));
    mc__one(b, "mem_cache_nums_", "gauge", "objects held in memory", MC__U(m->n_objects));
    mc__one(b, "valid_get_nums_", "untyped",
            "(counter) replica lookups that found a complete object", MC__U(m->get_hits));
    mc__one(b, "total_get_nums_", "untyped", "(counter) replica lookups", MC__U(m->gets));

    /* Eviction: memory is the only tier, so the _mem series equal the totals. */
    mc__one(b, "master_successful_evictions_total", "counter",
            "eviction passes that evicted at least one object", MC__U(m->eviction_successes));
    mc__one(b, "master_attempted_evictions_total", "counter", "eviction passes",
            MC__U(m->eviction_runs));
    mc__one(b, "master_evicted_key_count", "untyped", "(counter) objects evicted",
            MC__U(m->evictions));
    mc__one(b, "master_evicted_size_bytes", "untyped", "(counter) bytes freed by eviction",
            MC__U(m->evicted_bytes));
    mc__one(b, "master_successful_evictions_mem", "untyped",
            "(counter) eviction passes in memory that evicted at least one object",
            MC__U(m->eviction_successes));
    mc__one(b, "master_attempted_evictions_mem", "untyped", "(counter) eviction passes in memory",
            MC__U(m->eviction_runs));
    mc__one(b, "master_evicted_key_count_mem", "untyped", "(counter) objects evicted from memory",
            MC__U(m->evictions));
    mc__one(b, "master_evicted_size_bytes_mem", "untyped",
            "(counter) bytes freed by eviction in memory", MC__U(m->evicted_bytes));

    mc__one(b, "master_put_start_discard_cnt", "untyped",
            "(counter) unfinished puts discarded after put_start_discard_timeout_sec",
            MC__U(m->discarded_puts));
    mc__one(b, "master_put_start_release_cnt", "untyped",
            "(counter) discarded puts whose space was released", MC__U(m->released_puts));
    mc__one(b, "master_put_start_discarded_staging_size", "gauge",
            "replica bytes of discarded puts not yet released", (double)staging);
}

/* ---- ours ---- */

/* A message type number in use (the enum has gaps): one series each, never two "unknown". */
static int mc__named(int t) {
    return mc__mp_type_info((uint8_t)t) != NULL;
}

/* The KV-event publisher's counters (kv_events.h), present when it runs. */
static void mc__kv_event_metrics(mc__master_t *m, mc_buf_t *b) {
    mc__kv_events_stats_t k;
    mc__kv_events_stats(m, &k);
    if (!k.enabled)
        return;
    const struct {
        const char *name, *type, *help;
        uint64_t v;
    } rows[] = {
        {"published_batches_total", "counter", "KV-event messages published", k.published_batches},
        {"published_events_total", "counter", "KV events published", k.published_events},
        {"dropped_events_total", "counter", "KV events dropped: the queue was full (oldest first)",
         k.dropped_events},
        {"skipped_unparsed_keys_total", "counter", "keys that are no u64 block hash",
         k.skipped_unparsed_keys},
        {"queued_events", "gauge", "KV events waiting for the publisher thread", k.queued},
        {"subscribers", "gauge", "connected subscribers", k.subscribers},
        {"replay_requests_total", "counter", "replay requests served", k.replay_requests},
        {"malformed_replay_requests_total", "counter",
         "replay requests that were not a sequence number", k.replay_malformed},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        char name[128];
        snprintf(name, sizeof(name), "mooncake_master_kv_events_%s", rows[i].name);
        mc__one(b, name, rows[i].type, rows[i].help, (double)rows[i].v);
    }
}

static void mc__own_metrics(mc__master_t *m, mc_buf_t *b) {
    size_t clients;
    mc__kv_event_metrics(m, b);
    pthread_mutex_lock(&m->clients_mu);
    clients = m->n_clients;
    pthread_mutex_unlock(&m->clients_mu);
    mc__one(b, "mooncake_master_objects", "gauge", "complete objects stored", MC__U(m->n_objects));
    mc__one(b, "mooncake_master_object_bytes", "gauge",
            "bytes of complete objects (one replica each)", MC__U(m->object_bytes));
    mc__one(b, "mooncake_master_segments", "gauge", "mounted segments", MC__U(m->n_segments));
    mc__one(b, "mooncake_master_capacity_bytes", "gauge", "total bytes of mounted segments",
            MC__U(m->capacity_bytes));
    mc__one(b, "mooncake_master_used_bytes", "gauge", "allocated bytes in segments (all replicas)",
            MC__U(m->used_bytes));
    mc__one(b, "mooncake_master_clients", "gauge", "clients seen alive", (double)clients);
    mc__one(b, "mooncake_master_evictions_total", "counter", "objects evicted",
            MC__U(m->evictions));
    mc__one(b, "mooncake_master_evicted_bytes_total", "counter", "replica bytes freed by eviction",
            MC__U(m->evicted_bytes));
    mc__one(b, "mooncake_master_eviction_runs_total", "counter", "eviction passes",
            MC__U(m->eviction_runs));
    mc__one(b, "mooncake_master_discarded_puts_total", "counter",
            "unfinished puts discarded after the discard timeout", MC__U(m->discarded_puts));
    mc__one(b, "mooncake_master_stale_put_sweep_objects_total", "counter",
            "objects walked by the sweep for unfinished puts past the discard timeout",
            MC__U(m->stale_put_sweep_objects));
    mc__one(b, "mooncake_master_expired_clients_total", "counter",
            "clients expired after client_ttl without heartbeat", MC__U(m->expired_clients));
    mc__one(b, "mooncake_master_left_clients_total", "counter",
            "clients that unregistered on a clean close", MC__U(m->left_clients));
    mc__one(b, "mooncake_master_recovering", "gauge",
            "1 while a segment restored from the metadata log awaits its owner",
            (double)mc__master_recovering(m));
    mc__one(b, "mooncake_master_segments_awaiting_owner", "gauge",
            "restored segments whose owner has not been heard from (nothing on them is evicted)",
            MC__U(m->n_awaiting));
    mc__one(b, "mooncake_master_segments_unreachable", "gauge",
            "segments taking no placements until their owner heartbeats (reported unreachable, "
            "or superseded by a new owner of their name)",
            MC__U(m->n_unreachable));
    mc__one(b, "mooncake_master_placements_deferred_total", "counter",
            "put keys answered UNAVAILABLE_IN_CURRENT_STATUS while recovering (clients retry)",
            MC__U(m->placements_deferred));

    mc__head(b, "mooncake_master_ops_total", "counter", "keys processed per operation");
    for (int t = 1; t < MC_MP_TYPE_MAX_; t++)
        if (mc__named(t))
            mc__put(b, "mooncake_master_ops_total{op=\"%s\"} %llu\n", mc__mp_type_name((uint8_t)t),
                    (unsigned long long)atomic_load(&m->op[t].ops));
    mc__head(b, "mooncake_master_errors_total", "counter", "keys that failed per operation");
    for (int t = 1; t < MC_MP_TYPE_MAX_; t++)
        if (mc__named(t))
            mc__put(b, "mooncake_master_errors_total{op=\"%s\"} %llu\n",
                    mc__mp_type_name((uint8_t)t),
                    (unsigned long long)atomic_load(&m->op[t].errors));
    mc__head(b, "mooncake_master_requests_total", "counter", "requests served per operation");
    for (int t = 1; t < MC_MP_TYPE_MAX_; t++)
        if (mc__named(t))
            mc__put(b, "mooncake_master_requests_total{op=\"%s\"} %llu\n",
                    mc__mp_type_name((uint8_t)t), (unsigned long long)atomic_load(&m->op[t].rpcs));

    mc__head(b, "mooncake_master_rpc_duration_seconds", "histogram",
             "time to serve one request, per operation");
    for (int t = 1; t < MC_MP_TYPE_MAX_; t++) {
        const char *op = mc__mp_type_name((uint8_t)t);
        uint64_t cum = 0;
        if (!mc__named(t))
            continue;
        for (int k = 0; k < MC__LAT_BUCKETS; k++) {
            cum += atomic_load(&m->op[t].lat_bucket[k]);
            mc__put(b, "mooncake_master_rpc_duration_seconds_bucket{op=\"%s\",le=\"%g\"} %llu\n",
                    op, (double)mc__lat_le_us[k] / 1e6, (unsigned long long)cum);
        }
        cum += atomic_load(&m->op[t].lat_bucket[MC__LAT_BUCKETS]);
        mc__put(b, "mooncake_master_rpc_duration_seconds_bucket{op=\"%s\",le=\"+Inf\"} %llu\n", op,
                (unsigned long long)cum);
        mc__put(b, "mooncake_master_rpc_duration_seconds_sum{op=\"%s\"} %.6f\n", op,
                (double)atomic_load(&m->op[t].lat_sum_us) / 1e6);
        mc__put(b, "mooncake_master_rpc_duration_seconds_count{op=\"%s\"} %llu\n", op,
                (unsigned long long)cum);
    }

    mc__head(b, "mooncake_master_build_info", "gauge", "always 1; the labels name the build");
    mc__put(b, "mooncake_master_build_info{version=\"%s\",implementation=\"c\"} 1\n",
            MC_VERSION_STRING);
    mc__one(b, "mooncake_master_uptime_seconds", "gauge", "seconds since the master started",
            (double)(mc__now_ms() - m->start_ms) / 1000.0);
}

/* ---- process_*, as every Prometheus client library names them ---- */

static int mc__proc_stat(double *cpu_s, double *vsize, double *rss, double *start_s) {
    char buf[2048];
    FILE *f = fopen("/proc/self/stat", "r");
    size_t n;
    const char *p;
    unsigned long long utime = 0, stime = 0, start = 0, vs = 0;
    long long rs = 0, btime = 0;
    long tck = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    if (!f)
        return -1;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* the command name may hold spaces and parentheses: fields restart after the last ')' */
    p = strrchr(buf, ')');
    if (!p || tck <= 0 || page <= 0)
        return -1;
    if (sscanf(p + 2,
               "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d "
               "%llu %llu %lld",
               &utime, &stime, &start, &vs, &rs) != 5)
        return -1;
    f = fopen("/proc/stat", "r");
    if (!f)
        return -1;
    while (fgets(buf, sizeof(buf), f))
        if (sscanf(buf, "btime %lld", &btime) == 1)
            break;
    fclose(f);
    *cpu_s = (double)(utime + stime) / (double)tck;
    *vsize = (double)vs;
    *rss = (double)rs * (double)page;
    *start_s = (double)btime + (double)start / (double)tck;
    return 0;
}

static void mc__process_metrics(mc_buf_t *b) {
    double cpu = 0, vsize = 0, rss = 0, start = 0;
    struct rlimit rl;
    DIR *d = opendir("/proc/self/fd");
    long fds = 0;
    if (d) {
        for (struct dirent *e = readdir(d); e; e = readdir(d))
            fds += e->d_name[0] != '.';
        closedir(d);
        fds--; /* the directory's own descriptor */
    }
    if (mc__proc_stat(&cpu, &vsize, &rss, &start) == 0) {
        mc__one(b, "process_cpu_seconds_total", "counter", "user and system CPU time spent", cpu);
        mc__one(b, "process_virtual_memory_bytes", "gauge", "virtual memory size", vsize);
        mc__one(b, "process_resident_memory_bytes", "gauge", "resident memory size", rss);
        mc__one(b, "process_start_time_seconds", "gauge",
                "start time of the process since the Unix epoch", start);
    }
    if (d)
        mc__one(b, "process_open_fds", "gauge", "open file descriptors", (double)fds);
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        mc__one(b, "process_max_fds", "gauge", "the limit of open file descriptors",
                (double)rl.rlim_cur);
}

/* The disk tier (disk.h). */
static void mc__disk_metrics(mc__master_t *m, mc_buf_t *b) {
    mc__disk_stats_t d;
    mc__disk_stats(m, &d);
    mc__one(b, "mooncake_disk_nodes", "gauge", "storage nodes with a disk tier", (double)d.nodes);
    mc__one(b, "mooncake_disk_capacity_bytes", "gauge", "their disk capacity", (double)d.capacity);
    mc__one(b, "mooncake_disk_objects", "gauge", "objects with a LOCAL_DISK copy",
            (double)d.objects);
    mc__one(b, "mooncake_disk_object_bytes", "gauge", "their sizes", (double)d.bytes);
    mc__one(b, "mooncake_disk_detached_objects", "gauge",
            "disk copies recorded for a disk that is not connected (not served until it announces)",
            (double)d.detached);
    mc__one(b, "mooncake_disk_offloads_pending", "gauge", "offloads queued or running",
            (double)d.pending);
    mc__one(b, "mooncake_disk_offloads_total", "counter", "objects copied to a disk",
            (double)d.offloads);
    mc__one(b, "mooncake_disk_offload_failures_total", "counter",
            "offloads a node could not do (disk full, memory gone)", (double)d.offload_failures);
    mc__one(b, "mooncake_disk_hits_total", "counter", "reads served from the disk tier",
            (double)d.disk_hits);
    mc__one(b, "mooncake_disk_promotions_total", "counter", "disk objects put back into memory",
            (double)d.promotions);
    mc__one(b, "mooncake_disk_deletes_total", "counter", "disk copies let go (removed, replaced)",
            (double)d.deletes);
}

void mc__metrics_render(mc__master_t *m, mc_buf_t *b) {
    mc__ref_metrics(m, b);
    mc__own_metrics(m, b);
    mc__disk_metrics(m, b);
    mc__process_metrics(b);
}
