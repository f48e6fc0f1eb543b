/* mc_store_loop: put and get loops on the public store API (store.h), one or more client
 * processes, against a master the caller runs, with the bytes held by a separate holder
 * process (forked here: a store client that contributes a segment and does nothing else), so
 * that every put and get crosses three processes as in a deployment.
 *
 *   mc_store_loop --master HOST:PORT [--clients N] [--size BYTES] [--ops N] [--batch N]
 *                 [--segment BYTES]
 *
 * Each client puts --ops keys of its own (in batches of --batch when > 1), then gets each of
 * them once. A key is read once, right after others were written, so every get asks the master
 * (no location cache hit): the "first get" of docs/perf/issue26-put.md. Prints one line per
 * phase: aggregate op/s over all clients (from the first start to the last finish) and the
 * median and p99 latency of one call. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mooncake/store.h"

typedef struct result {
    double start_s, end_s;
    double p50_us, p99_us;
    int errors;
} result_t;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int store_open(const char *master, uint64_t segment, mc_store_t **out) {
    mc_store_config_t cfg;
    char seg[32];
    mc_store_config_init(&cfg);
    snprintf(seg, sizeof(seg), "%llu", (unsigned long long)segment);
    if (mc_store_config_set(&cfg, "master_server_address", master) ||
        mc_store_config_set(&cfg, "local_hostname", "127.0.0.1") ||
        mc_store_config_set(&cfg, "metadata_server", "P2PHANDSHAKE") ||
        mc_store_config_set(&cfg, "protocol", "tcp") ||
        mc_store_config_set(&cfg, "global_segment_size", seg) ||
        mc_store_config_set(&cfg, "local_buffer_size", "16777216"))
        return -1;
    if (mc_store_create(out) != 0)
        return -1;
    if (mc_store_setup(*out, &cfg) != 0) {
        mc_store_destroy(*out);
        return -1;
    }
    return 0;
}

static void summarize(double *lat, size_t n, result_t *r) {
    qsort(lat, n, sizeof(*lat), cmp_double);
    r->p50_us = n ? lat[n / 2] * 1e6 : 0;
    r->p99_us = n ? lat[(size_t)((double)n * 0.99)] * 1e6 : 0;
}

/* One client: puts, then gets, of ops keys named after its id. */
static void client_run(const char *master, int id, size_t size, size_t ops, size_t batch,
                       result_t *put, result_t *get) {
    mc_store_t *s = NULL;
    char *buf = NULL, *in = NULL;
    double *lat = calloc(ops, sizeof(*lat));
    char(*keys)[48] = calloc(ops, sizeof(*keys));
    mc_store_item_t *items = calloc(batch, sizeof(*items));
    mc_store_iov_t *iov = calloc(batch, sizeof(*iov));
    int *res = calloc(batch, sizeof(*res));
    int64_t *got = calloc(batch, sizeof(*got));
    size_t calls = 0;
    if (!lat || !keys || !items || !iov || !res || !got || store_open(master, 0, &s) != 0) {
        put->errors = get->errors = -1;
        goto out;
    }
    buf = malloc(size * batch);
    in = malloc(size * batch);
    memset(buf, 'a' + id % 26, size * batch);
    mc_store_register_buffer(s, buf, size * batch);
    mc_store_register_buffer(s, in, size * batch);
    for (size_t i = 0; i < ops; i++)
        snprintf(keys[i], sizeof(keys[i]), "loop-%d-%d-%zu", (int)getpid(), id, i);
    put->start_s = now_s();
    for (size_t i = 0; i < ops; i += batch) {
        size_t k = ops - i < batch ? ops - i : batch;
        double t0 = now_s();
        if (batch == 1) {
            put->errors += mc_store_put(s, keys[i], buf, size, NULL) != 0;
        } else {
            for (size_t j = 0; j < k; j++) {
                iov[j] = (mc_store_iov_t){buf + j * size, size};
                items[j] = (mc_store_item_t){.key = keys[i + j], .iov = &iov[j], .iovcnt = 1};
            }
            mc_store_batch_put(s, items, k, NULL, res);
            for (size_t j = 0; j < k; j++)
                put->errors += res[j] != 0;
        }
        lat[calls++] = now_s() - t0;
    }
    put->end_s = now_s();
    summarize(lat, calls, put);
    calls = 0;
    get->start_s = now_s();
    for (size_t i = 0; i < ops; i += batch) {
        size_t k = ops - i < batch ? ops - i : batch;
        double t0 = now_s();
        if (batch == 1) {
            get->errors += mc_store_get_into(s, keys[i], in, size) != (int64_t)size;
        } else {
            for (size_t j = 0; j < k; j++) {
                iov[j] = (mc_store_iov_t){in + j * size, size};
                items[j] = (mc_store_item_t){.key = keys[i + j], .iov = &iov[j], .iovcnt = 1};
            }
            mc_store_batch_get_into(s, items, k, got);
            for (size_t j = 0; j < k; j++)
                get->errors += got[j] != (int64_t)size;
        }
        lat[calls++] = now_s() - t0;
    }
    get->end_s = now_s();
    summarize(lat, calls, get);
    if (memcmp(in, buf, size) != 0)
        get->errors++;
out:
    if (s) {
        mc_store_close(s);
        mc_store_destroy(s);
    }
    free(in);
    free(buf);
    free(got);
    free(res);
    free(iov);
    free(items);
    free(keys);
    free(lat);
}

static void report(const char *what, const result_t *r, int n, size_t ops, size_t size,
                   size_t batch) {
    double start = r[0].start_s, end = r[0].end_s, p50 = 0, p99 = 0;
    int errors = 0;
    for (int i = 0; i < n; i++) {
        start = r[i].start_s < start ? r[i].start_s : start;
        end = r[i].end_s > end ? r[i].end_s : end;
        p50 += r[i].p50_us / n;
        p99 = r[i].p99_us > p99 ? r[i].p99_us : p99;
        errors += r[i].errors;
    }
    printf("%-4s clients=%d size=%zu batch=%zu ops=%zu  %.0f op/s  p50 %.1f us  p99 %.1f us  "
           "errors %d\n",
           what, n, size, batch, ops * (size_t)n, (double)ops * n / (end - start), p50, p99,
           errors);
}

int main(int argc, char **argv) {
    const char *master = NULL;
    int clients = 1;
    size_t size = 4096, ops = 2000, batch = 1;
    uint64_t segment = 512ull << 20;
    result_t *res;
    pid_t holder;
    int pipefd[2];
    char ok = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--master"))
            master = argv[i + 1];
        else if (!strcmp(argv[i], "--clients"))
            clients = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--size"))
            size = (size_t)strtoull(argv[i + 1], NULL, 0);
        else if (!strcmp(argv[i], "--ops"))
            ops = (size_t)strtoull(argv[i + 1], NULL, 0);
        else if (!strcmp(argv[i], "--batch"))
            batch = (size_t)strtoull(argv[i + 1], NULL, 0);
        else if (!strcmp(argv[i], "--segment"))
            segment = strtoull(argv[i + 1], NULL, 0);
    }
    if (!master || clients < 1 || size == 0 || ops == 0 || batch == 0) {
        fprintf(stderr,
                "usage: %s --master HOST:PORT [--clients N] [--size B] [--ops N] "
                "[--batch N] [--segment B]\n",
                argv[0]);
        return 2;
    }
    if (pipe(pipefd) != 0)
        return 1;
    holder = fork();
    if (holder == 0) { /* the holder: contributes the segment until killed */
        mc_store_t *s = NULL;
        char c = store_open(master, segment, &s) == 0 ? 1 : 0;
        if (write(pipefd[1], &c, 1) != 1 || !c)
            _exit(1);
        for (;;)
            pause();
    }
    if (read(pipefd[0], &ok, 1) != 1 || !ok) {
        fprintf(stderr, "holder failed to start\n");
        return 1;
    }
    res = mmap(NULL, sizeof(*res) * 2 * (size_t)clients, PROT_READ | PROT_WRITE,
               MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (res == MAP_FAILED)
        return 1;
    memset(res, 0, sizeof(*res) * 2 * (size_t)clients);
    for (int c = 0; c < clients; c++)
        if (fork() == 0) {
            client_run(master, c, size, ops, batch, &res[2 * c], &res[2 * c + 1]);
            _exit(0);
        }
    for (int c = 0; c < clients; c++)
        wait(NULL);
    {
        result_t *puts = calloc((size_t)clients, sizeof(*puts));
        result_t *gets = calloc((size_t)clients, sizeof(*gets));
        for (int c = 0; c < clients; c++) {
            puts[c] = res[2 * c];
            gets[c] = res[2 * c + 1];
        }
        report("put", puts, clients, ops, size, batch);
        report("get", gets, clients, ops, size, batch);
        free(puts);
        free(gets);
    }
    kill(holder, SIGTERM);
    waitpid(holder, NULL, 0);
    return 0;
}
