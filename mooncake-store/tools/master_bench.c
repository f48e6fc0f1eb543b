/* mc_master_bench: master metadata throughput and memory.
 *
 * Forks a real master process (this binary's copy of the service, on 127.0.0.1:0), fills it with
 * --objects objects of --value_size bytes through batched put_start/put_end, reports the master's
 * RSS growth per object, then runs batched exist and get_replica_list for --seconds each, once for
 * every client count in --clients (each client a thread with its own connection, as separate
 * processes would have), and prints keys/s with per-RPC latency percentiles, and for each count
 * past the first its throughput as a ratio of the first's beside the CPUs this machine has (the
 * limit concurrency can scale to). Last, single puts as the store client makes small ones: each
 * client reserves slots 64 at a time (PUT_RESERVE) and commits one new key per request
 * (PUT_COMMIT), with the master's CPU per second beside it: the put path of a master that
 * already holds --objects objects. Then the store client's batched small puts the same way
 * (slot_batch_put): --slot_batch new keys per PUT_COMMIT. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "master/master.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/config.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"
#include "proto/master_client.h"

#define MC__MAX_CLIENTS 64
#define MC__MAX_COUNTS 8

typedef struct bench {
    int64_t objects, batch, value_size, seconds, threads;
    int64_t counts[MC__MAX_COUNTS]; /* client counts to run each op with (--clients) */
    int n_counts;
    int64_t kv_events;  /* the master publishes KV events (kv_events.h) */
    int64_t full;       /* the fill leaves the master just past its eviction watermark */
    int64_t slot_batch; /* keys per PUT_COMMIT of slot_batch_put */
    char addr[64];
    pid_t master; /* its CPU time is read around each op */
    int64_t run;  /* ops run so far: each slot_put run names keys of its own */
} bench_t;

typedef struct worker {
    bench_t *b;
    /* MC_MP_EXIST, MC_MP_GET_REPLICA_LIST, MC_MP_PUT_COMMIT (single slot puts) or
     * MC_MP_PUT_RESERVE (batched slot puts, committed b->slot_batch at a time) */
    int op;
    int id;
    uint64_t keys;
    uint64_t *lat_us;
    size_t n_lat, cap_lat;
    int rc;
} worker_t;

/* The resident set of pid in KiB: statm's second field, in pages. */
static long rss_kib(pid_t pid) {
    char path[64];
    long pages = -1;
    FILE *fp;
    snprintf(path, sizeof(path), "/proc/%d/statm", (int)pid);
    fp = fopen(path, "r");
    if (!fp)
        return -1;
    if (fscanf(fp, "%*s %ld", &pages) != 1)
        pages = -1;
    fclose(fp);
    return pages < 0 ? -1 : pages * (sysconf(_SC_PAGESIZE) / 1024);
}

static void key_name(char *out, int64_t i) {
    snprintf(out, 24, "key-%012lld", (long long)i);
}

/* The CPU time (user + system) pid has used, in ms. */
static double cpu_ms(pid_t pid) {
    char path[64];
    unsigned long long ut = 0, st = 0;
    FILE *fp;
    int n;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    fp = fopen(path, "r");
    if (!fp)
        return -1;
    /* fields 14 and 15; the name (field 2) holds no space here: "(mc_master_bench)" */
    n = fscanf(fp, "%*d %*s %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st);
    fclose(fp);
    return n == 2 ? (double)(ut + st) * 1000.0 / (double)sysconf(_SC_CLK_TCK) : -1;
}

/* Child: the master, until SIGTERM. */
static void run_master(int wfd, int kv_events, int full) {
    mc__master_config_t cfg;
    mc__master_t *m = NULL;
    sigset_t sigs;
    int sig = 0;
    uint16_t port = 0;
    mc__master_config_defaults(&cfg);
    cfg.rpc_address = "127.0.0.1";
    cfg.port = 0;
    cfg.metrics_port = 0;
    if (!full) /* else the default watermark: slot_put's new keys evict the oldest */
        cfg.eviction_high_watermark_ratio = 1.0;
    cfg.client_ttl_s = 3600;
    if (kv_events) {
        cfg.kv_events.enabled = 1;
        cfg.kv_events.bind_endpoint = "tcp://127.0.0.1:0";
        cfg.kv_events.backend_id = "bench";
    }
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    if (mc__master_start(&cfg, &m) == 0)
        port = mc__master_rpc_port(m);
    (void)!write(wfd, &port, sizeof(port));
    close(wfd);
    if (!m)
        _exit(1);
    sigwait(&sigs, &sig);
    _exit(0); /* teardown of 1M objects is not what is measured */
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Records one call's latency (it started at t0, in ns) and the keys it served; 0, or
 * MC_ERR_MEMORY. */
static int record_call(worker_t *w, uint64_t t0, uint64_t keys) {
    uint64_t *p = mc__array_grow(w->lat_us, w->n_lat, &w->cap_lat, sizeof(*p), 1024);
    if (!p)
        return MC_ERR_MEMORY;
    w->lat_us = p;
    w->lat_us[w->n_lat++] = (mc__now_ns() - t0) / 1000u;
    w->keys += keys;
    return 0;
}

enum { SLOT_REFILL = 64 };

/* One client's puts until end: per (1, or up to SLOT_REFILL) new keys per PUT_COMMIT, into slots
 * reserved SLOT_REFILL at a time; each commit's latency recorded (a reserve's is not). */
static int slot_puts(worker_t *w, mc__master_client_t *c, uint64_t end, int per) {
    mc__key_replicas_t sl[SLOT_REFILL];
    mc__replicate_config_t cfg;
    char names[SLOT_REFILL][24];
    const char *keys[SLOT_REFILL];
    uint64_t lens[SLOT_REFILL], slots[SLOT_REFILL];
    int32_t codes[SLOT_REFILL];
    int left = 0, rc = 0; /* slots not used yet: sl[SLOT_REFILL - left ...] */
    uint64_t n = 0;
    memset(&cfg, 0, sizeof(cfg));
    cfg.replica_num = 1;
    while (mc__now_ms() < end) {
        uint64_t t0;
        int k;
        if (left == 0) {
            rc =
                mc__master_client_put_reserve(c, SLOT_REFILL, (uint64_t)w->b->value_size, &cfg, sl);
            for (int i = 0; rc == 0 && i < SLOT_REFILL; i++)
                rc = sl[i].code;
            if (rc)
                return rc;
            left = SLOT_REFILL;
        }
        k = per < left ? per : left;
        for (int i = 0; i < k; i++) {
            slots[i] = sl[SLOT_REFILL - left--].version;
            lens[i] = (uint64_t)w->b->value_size;
            /* keys past the filled ones, distinct per client */
            key_name(names[i], w->b->objects + w->b->run * 100000000000ll +
                                   (int64_t)w->id * 1000000000ll + (int64_t)n++);
            keys[i] = names[i];
        }
        t0 = mc__now_ns();
        rc = mc__master_client_put_commit(c, (size_t)k, keys, lens, slots, codes);
        for (int i = 0; rc == 0 && i < k; i++)
            rc = codes[i];
        if (rc == 0)
            rc = record_call(w, t0, (uint64_t)k);
        if (rc)
            return rc;
    }
    return 0;
}

static void *worker_main(void *arg) {
    worker_t *w = arg;
    bench_t *b = w->b;
    mc__master_client_t *c = NULL;
    char(*names)[24] = mc__malloc((size_t)b->batch * 24);
    const char **keys = mc__malloc((size_t)b->batch * sizeof(*keys));
    int32_t *codes = mc__malloc((size_t)b->batch * sizeof(*codes));
    mc__key_replicas_t *reps =
        w->op == MC_MP_GET_REPLICA_LIST ? mc__malloc((size_t)b->batch * sizeof(*reps)) : NULL;
    uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(w->id + 1);
    uint64_t end;
    w->rc = mc__master_client_connect(b->addr, 10000, NULL, &c);
    if (w->rc)
        goto out;
    end = mc__now_ms() + (uint64_t)b->seconds * 1000u;
    if (w->op == MC_MP_PUT_COMMIT || w->op == MC_MP_PUT_RESERVE) {
        w->rc = slot_puts(w, c, end, w->op == MC_MP_PUT_COMMIT ? 1 : (int)b->slot_batch);
        goto out;
    }
    while (mc__now_ms() < end) {
        uint64_t t0;
        for (int64_t i = 0; i < b->batch; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            key_name(names[i], (int64_t)((seed >> 17) % (uint64_t)b->objects));
            keys[i] = names[i];
        }
        t0 = mc__now_ns();
        w->rc = w->op == MC_MP_EXIST
                    ? mc__master_client_batch_exist(c, (size_t)b->batch, keys, codes)
                    : mc__master_client_batch_get_replica_list(c, (size_t)b->batch, keys, reps);
        if (w->rc || (w->rc = record_call(w, t0, (uint64_t)b->batch)) != 0)
            goto out;
    }
out:
    mc__master_client_close(c);
    mc__free(names);
    mc__free(keys);
    mc__free(codes);
    mc__free(reps);
    return NULL;
}

/* One op with `threads` clients at once: 0 and *keys_per_s, or the first client's code. */
static int run_op(bench_t *b, int op, const char *label, double *keys_per_s) {
    worker_t *w = calloc((size_t)b->threads, sizeof(*w));
    pthread_t *t = calloc((size_t)b->threads, sizeof(*t));
    uint64_t keys = 0, t0, *all = NULL;
    size_t n = 0;
    int rc = 0;
    double cpu0 = cpu_ms(b->master), secs;
    b->run++;
    t0 = mc__now_ns();
    for (int i = 0; i < b->threads; i++) {
        w[i].b = b;
        w[i].op = op;
        w[i].id = i;
        pthread_create(&t[i], NULL, worker_main, &w[i]);
    }
    for (int i = 0; i < b->threads; i++) {
        pthread_join(t[i], NULL);
        keys += w[i].keys;
        n += w[i].n_lat;
        rc = rc ? rc : w[i].rc;
    }
    all = malloc((n ? n : 1) * sizeof(*all));
    n = 0;
    for (int i = 0; i < b->threads; i++) {
        memcpy(all + n, w[i].lat_us, w[i].n_lat * sizeof(*all));
        n += w[i].n_lat;
        mc__free(w[i].lat_us);
    }
    qsort(all, n, sizeof(*all), cmp_u64);
    secs = (double)(mc__now_ns() - t0) / 1e9;
    *keys_per_s = (double)keys / secs;
    if (rc == 0 && n)
        printf("%-22s %10.0f keys/s  batch=%lld clients=%lld  rpc p50=%lluus p99=%lluus "
               "p99.9=%lluus max=%lluus  master CPU %.0f ms/s\n",
               label, *keys_per_s,
               op == MC_MP_PUT_COMMIT    ? 1ll
               : op == MC_MP_PUT_RESERVE ? (long long)b->slot_batch
                                         : (long long)b->batch,
               (long long)b->threads, (unsigned long long)all[n / 2],
               (unsigned long long)all[n * 99 / 100], (unsigned long long)all[n * 999 / 1000],
               (unsigned long long)all[n - 1], (cpu_ms(b->master) - cpu0) / secs);
    else
        printf("%-22s failed: %s\n", label, mc_store_strerror(rc));
    free(all);
    free(w);
    free(t);
    return rc;
}

static int fill(bench_t *b, mc__master_client_t *c) {
    char(*names)[24] = mc__malloc((size_t)b->batch * 24);
    const char **keys = mc__malloc((size_t)b->batch * sizeof(*keys));
    uint64_t *lens = mc__malloc((size_t)b->batch * sizeof(*lens));
    int32_t *codes = mc__malloc((size_t)b->batch * sizeof(*codes));
    mc__key_replicas_t *reps = mc__malloc((size_t)b->batch * sizeof(*reps));
    uint64_t *vers = mc__malloc((size_t)b->batch * sizeof(*vers));
    int rc = 0;
    for (int64_t done = 0; done < b->objects && rc == 0;) {
        int64_t k = b->objects - done < b->batch ? b->objects - done : b->batch;
        for (int64_t i = 0; i < k; i++) {
            key_name(names[i], done + i);
            keys[i] = names[i];
            lens[i] = (uint64_t)b->value_size;
        }
        rc = mc__master_client_batch_put_start(c, (size_t)k, keys, lens, NULL, reps);
        for (int64_t i = 0; rc == 0 && i < k; i++)
            rc = reps[i].code;
        for (int64_t i = 0; rc == 0 && i < k; i++)
            vers[i] = reps[i].version;
        if (rc == 0)
            rc = mc__master_client_batch_finish(c, 0, 1, (size_t)k, keys, vers, codes);
        done += k;
    }
    mc__free(names);
    mc__free(keys);
    mc__free(lens);
    mc__free(codes);
    mc__free(vers);
    mc__free(reps);
    return rc;
}

/* "1,8" -> counts; 0, or -1 for a bad list. */
static int parse_counts(bench_t *b, const char *list) {
    const char *p = list;
    b->n_counts = 0;
    while (*p) {
        char *end = NULL;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > MC__MAX_CLIENTS || b->n_counts == MC__MAX_COUNTS ||
            (*end && *end != ','))
            return -1;
        b->counts[b->n_counts++] = v;
        p = *end ? end + 1 : end;
    }
    return b->n_counts ? 0 : -1;
}

/* Each op once per client count, then how the later counts compare with the first. */
static int run_all(bench_t *b) {
    static const struct {
        int op;
        const char *label;
    } ops[] = {{MC_MP_EXIST, "batch_exist"},
               {MC_MP_GET_REPLICA_LIST, "batch_get_replica_list"},
               {MC_MP_PUT_COMMIT, "slot_put"},
               {MC_MP_PUT_RESERVE, "slot_batch_put"}};
    enum { N_OPS = sizeof(ops) / sizeof(ops[0]) };
    double kps[N_OPS][MC__MAX_COUNTS] = {{0}};
    int rc = 0;
    for (int o = 0; o < N_OPS && rc == 0; o++)
        for (int i = 0; i < b->n_counts && rc == 0; i++) {
            b->threads = b->counts[i];
            rc = run_op(b, ops[o].op, ops[o].label, &kps[o][i]);
        }
    for (int o = 0; o < N_OPS && rc == 0; o++)
        for (int i = 1; i < b->n_counts; i++)
            printf("%-22s %lld clients: %.2fx the throughput of %lld (this machine: %ld CPUs)\n",
                   ops[o].label, (long long)b->counts[i], kps[o][i] / kps[o][0],
                   (long long)b->counts[0], sysconf(_SC_NPROCESSORS_ONLN));
    return rc;
}

int main(int argc, char **argv) {
    bench_t b = {
        .objects = 1000000, .batch = 1000, .value_size = 4096, .seconds = 3, .slot_batch = 32};
    const char *clients = NULL;
    mc_flag_t flags[] = {
        {"objects", MC_FLAG_INT, &b.objects, "objects to store"},
        {"batch", MC_FLAG_INT, &b.batch, "keys per RPC"},
        {"value_size", MC_FLAG_INT, &b.value_size, "object size in bytes"},
        {"seconds", MC_FLAG_INT, &b.seconds, "duration of each measured operation"},
        {"clients", MC_FLAG_STRING, &clients,
         "client counts to run each operation with, comma-separated (default 1,8; each client "
         "a thread with its own connection)"},
        {"threads", MC_FLAG_INT, &b.threads, "one client count (the older flag; --clients wins)"},
        {"kv_events", MC_FLAG_INT, &b.kv_events,
         "1: the master publishes KV events (no subscriber: the put path's cost and the "
         "publisher thread's CPU; run with 0 and 1 alternately to compare)"},
        {"slot_batch", MC_FLAG_INT, &b.slot_batch,
         "keys per PUT_COMMIT of slot_batch_put (1..64; the store client commits a batch of "
         "small puts in one)"},
        {"full", MC_FLAG_INT, &b.full,
         "1: the fill takes 92% of the segments and the master keeps its default eviction "
         "watermark (90%): background eviction takes it under the watermark, and slot_put's new "
         "keys keep it evicting"},
    };
    mc__master_client_t *c = NULL;
    int pfd[2];
    pid_t pid;
    uint16_t port = 0;
    long rss0, rss1;
    uint64_t t0;
    int rc = mc__flags_parse(argc, argv, flags, sizeof(flags) / sizeof(flags[0]), "mc_master_bench",
                             "", "master metadata benchmark");
    if (rc)
        return rc > 0 ? 0 : 2;
    if (clients ? parse_counts(&b, clients) != 0 : b.threads ? 0 : parse_counts(&b, "1,8") != 0) {
        fprintf(stderr,
                "mc_master_bench: --clients wants counts 1..%d, comma-separated (at most "
                "%d)\n",
                MC__MAX_CLIENTS, MC__MAX_COUNTS);
        return 2;
    }
    if (!clients && b.threads) {
        b.counts[0] = b.threads;
        b.n_counts = 1;
    }
    if (b.objects < 1 || b.batch < 1 || b.batch > (int64_t)MC_MP_MAX_BATCH || b.value_size < 1 ||
        b.seconds < 1 || b.slot_batch < 1 || b.slot_batch > SLOT_REFILL || b.counts[0] < 1 ||
        b.counts[0] > MC__MAX_CLIENTS) {
        fprintf(stderr, "mc_master_bench: flag out of range\n");
        return 2;
    }
    if (pipe(pfd) != 0)
        return 1;
    pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        run_master(pfd[1], (int)b.kv_events, (int)b.full);
    }
    close(pfd[1]);
    if (read(pfd[0], &port, sizeof(port)) != sizeof(port) || port == 0) {
        fprintf(stderr, "mc_master_bench: master did not start\n");
        return 1;
    }
    close(pfd[0]);
    b.master = pid;
    snprintf(b.addr, sizeof(b.addr), "127.0.0.1:%u", (unsigned)port);
    rc = mc__master_client_connect(b.addr, 30000, NULL, &c);
    if (rc)
        goto out;
    /* Fake address ranges: the master never touches segment memory. */
    for (int i = 0; i < 8 && rc == 0; i++) {
        char name[32];
        /* room for the fill and for the single puts' new keys (slot_put); with --full, the fill
         * takes 92% of the room, past the default eviction watermark (90%) */
        uint64_t fill = ((uint64_t)b.objects * (uint64_t)((b.value_size + 63) / 64 * 64)) / 8;
        uint64_t seg = b.full ? fill / 92 * 100 : fill + (4ull << 30);
        snprintf(name, sizeof(name), "bench-node-%d:1", i);
        rc = mc__master_client_mount_segment(c, name, (uint64_t)(i + 1) << 44, seg);
    }
    if (rc)
        goto out;
    rss0 = rss_kib(pid);
    t0 = mc__now_ns();
    rc = fill(&b, c);
    if (rc)
        goto out;
    rss1 = rss_kib(pid);
    printf("fill: %lld objects of %lld B in %.2f s (%.0f objects/s, put_start+put_end%s)\n",
           (long long)b.objects, (long long)b.value_size, (double)(mc__now_ns() - t0) / 1e9,
           (double)b.objects * 1e9 / (double)(mc__now_ns() - t0),
           b.kv_events ? ", KV events on" : ", KV events off");
    printf("master RSS: %ld KiB before, %ld KiB after -> %.1f bytes/object (keys are 16 B)\n", rss0,
           rss1, (double)(rss1 - rss0) * 1024.0 / (double)b.objects);
    rc = run_all(&b);
out:
    if (rc)
        fprintf(stderr, "mc_master_bench: %s\n", mc_store_strerror(rc));
    mc__master_client_close(c);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    return rc ? 1 : 0;
}
