/* One client process of mc_store_bench: its own store client (no segment of its own, so every
 * byte crosses to the holder's), driven through the public store.h API in a timed loop.
 *
 * Puts write fresh keys and remove them, untimed, when the process's share of --pool_bytes is
 * used up. Gets read keys written (untimed) before the timed loop: "cached" cycles through at
 * most 256 keys, so each is read again well inside the replica-location cache window and the get
 * skips the master; "first" must ask the master on every get, as a key read once does. The client
 * keeps only SB_CACHED_POOL_MAX locations (the oldest goes first), so a "first" pool of more keys
 * than that, read in order, finds each key's location gone before it comes round again. A smaller
 * pool (large values) instead waits, untimed, until SB_FIRST_READ_GAP_MS have passed since a
 * key's last read. Waiting would overstate an aggregate of several processes (the others run
 * faster meanwhile), so store_bench.c reports one that waited against its wall time. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_stats.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/time.h"
#include "mooncake/store.h"
#include "store_bench.h"

#define SB_KEY_MAX 64
#define SB_CACHED_POOL_MAX 256
/* A cached pool small enough that a pass over it takes well under the 200 ms window even for
 * 16 MiB values on a slow link (4 keys x ~10 ms). */
#define SB_CACHED_POOL_BYTES (64ull << 20)
#define SB_POOL_MAX 4096

typedef struct sb_client {
    const sb_opts_t *o;
    mc_store_t *s;
    mc_replicate_config_t rcfg;
    unsigned char *heap, *reg; /* batch x size of the largest workload each */
    size_t cap;
    int index;
    /* per call */
    char (*names)[SB_KEY_MAX];
    const char **keys;
    mc_store_iov_t *iov;
    mc_store_item_t *items;
    int *put_res;
    int64_t *get_res;
} sb_client_t;

const char *sb_op_name(sb_op_t op) {
    return op == SB_PUT ? "put" : op == SB_GET_CACHED ? "get_cached" : "get_first";
}

/* Whole transfers over the pipes between the parent and a client process (-1: the other end is
 * gone). */
static int sb_pipe_io(int fd, void *p, size_t n, int out) {
    char *c = p;
    while (n > 0) {
        ssize_t k = out ? write(fd, c, n) : read(fd, c, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

int sb_write_all(int fd, const void *p, size_t n) {
    return sb_pipe_io(fd, (void *)p, n, 1);
}

int sb_read_all(int fd, void *p, size_t n) {
    return sb_pipe_io(fd, p, n, 0);
}

static int sb_wait_byte(int fd) {
    char c;
    for (;;) {
        ssize_t k = read(fd, &c, 1);
        if (k == 1)
            return 0;
        if (k < 0 && errno == EINTR)
            continue;
        return -1; /* EOF: the parent is gone or stops the run */
    }
}

static int sb_store_open(const sb_opts_t *o, uint64_t segment, mc_store_t **out) {
    mc_store_config_t cfg;
    mc_store_t *s = NULL;
    int rc;
    mc_store_config_init(&cfg);
    snprintf(cfg.local_hostname, sizeof(cfg.local_hostname), "%s", o->hostname);
    snprintf(cfg.metadata_server, sizeof(cfg.metadata_server), "P2PHANDSHAKE");
    snprintf(cfg.protocol, sizeof(cfg.protocol), "%s", o->protocol);
    snprintf(cfg.master_server_addr, sizeof(cfg.master_server_addr), "%s", o->master);
    cfg.global_segment_size = segment;
    cfg.replica_cache_entries = SB_CACHED_POOL_MAX; /* see the top of this file */
    rc = mc_store_create(&s);
    if (rc == 0)
        rc = mc_store_setup(s, &cfg);
    if (rc != 0) {
        fprintf(stderr, SB_PROG ": store setup against %s: %s (%d)\n", o->master, mc_strerror(rc),
                rc);
        mc_store_destroy(s);
        return rc;
    }
    *out = s;
    return 0;
}

/* The names of keys [first, first + n) of one pool, and the items of one call over them. */
static void sb_name_keys(sb_client_t *c, size_t wi, const char *pool, unsigned long round,
                         size_t first, size_t n, const sb_workload_t *w, unsigned char *buf) {
    for (size_t j = 0; j < n; j++) {
        snprintf(c->names[j], SB_KEY_MAX, "sb%d-%d-w%zu-%s%lu-%zu", (int)getpid(), c->index, wi,
                 pool, round, first + j);
        c->keys[j] = c->names[j];
        c->iov[j].base = buf + j * w->size;
        c->iov[j].len = w->size;
        c->items[j].key = c->names[j];
        c->items[j].iov = &c->iov[j];
        c->items[j].iovcnt = 1;
    }
}

static int sb_put_call(sb_client_t *c, const sb_workload_t *w, size_t n) {
    int rc;
    if (n == 1)
        return mc_store_put(c->s, c->keys[0], c->iov[0].base, w->size, &c->rcfg);
    rc = mc_store_batch_put(c->s, c->items, n, &c->rcfg, c->put_res);
    return rc;
}

static int sb_get_call(sb_client_t *c, const sb_workload_t *w, size_t n) {
    if (n == 1) {
        int64_t got = mc_store_get_into(c->s, c->keys[0], c->iov[0].base, w->size);
        return got < 0 ? (int)got : got == (int64_t)w->size ? 0 : MC_ERR_INTERNAL_ERROR;
    }
    int rc = mc_store_batch_get_into(c->s, c->items, n, c->get_res);
    for (size_t j = 0; rc == 0 && j < n; j++)
        if (c->get_res[j] != (int64_t)w->size)
            rc = MC_ERR_INTERNAL_ERROR;
    return rc;
}

/* Removes keys [0, count) of one pool, untimed, in chunks of the call arrays' size. */
static void sb_remove_pool(sb_client_t *c, size_t wi, const char *pool, unsigned long round,
                           size_t count, const sb_workload_t *w, unsigned char *buf) {
    for (size_t i = 0; i < count; i += w->batch) {
        size_t n = count - i < w->batch ? count - i : w->batch;
        sb_name_keys(c, wi, pool, round, i, n, w, buf);
        (void)mc_store_batch_remove(c->s, c->keys, n, 1, c->put_res);
    }
}

static size_t sb_pool_keys(const sb_opts_t *o, const sb_workload_t *w) {
    uint64_t budget = o->pool_bytes / (uint64_t)o->procs;
    if (w->op == SB_GET_CACHED && budget > SB_CACHED_POOL_BYTES)
        budget = SB_CACHED_POOL_BYTES;
    size_t cap = w->op == SB_GET_CACHED ? SB_CACHED_POOL_MAX : SB_POOL_MAX;
    size_t n = (size_t)(budget / w->size);
    if (n > cap)
        n = cap;
    n -= n % w->batch;
    return n < w->batch ? w->batch : n;
}

static void sb_fill(unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 31u + seed * 17u + i / 4096u);
}

static void sb_sleep_ms(uint64_t ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Writes the get pool and checks one value by content. */
static int sb_prepare_gets(sb_client_t *c, size_t wi, const sb_workload_t *w, size_t npool,
                           unsigned char *buf) {
    int rc = 0;
    sb_fill(buf, w->size * w->batch, (unsigned)wi);
    for (size_t i = 0; rc == 0 && i < npool; i += w->batch) {
        sb_name_keys(c, wi, "g", 0, i, w->batch, w, buf);
        rc = sb_put_call(c, w, w->batch);
    }
    if (rc != 0)
        return rc;
    unsigned char *want = mc__malloc(w->size);
    if (!want)
        return MC_ERR_MEMORY;
    memcpy(want, buf, w->size);
    memset(buf, 0, w->size);
    /* The first key of the last group (its value is the batch's first): a "first" loop reaches
     * it after npool - batch other keys, by when its cached location is gone. */
    sb_name_keys(c, wi, "g", 0, npool - w->batch, 1, w, buf);
    int64_t got = mc_store_get_into(c->s, c->keys[0], buf, w->size);
    if (got != (int64_t)w->size)
        rc = got < 0 ? (int)got : MC_ERR_INTERNAL_ERROR;
    else if (memcmp(buf, want, w->size) != 0)
        rc = MC_ERR_INTERNAL_ERROR;
    mc__free(want);
    if (rc != 0)
        fprintf(stderr, SB_PROG ": verify of a %llu-byte value read back failed (%d)\n",
                (unsigned long long)w->size, rc);
    return rc;
}

static int sb_run_workload(sb_client_t *c, size_t wi, int cmd_fd, int res_fd) {
    const sb_workload_t *w = &c->o->wl[wi];
    unsigned char *buf = w->zc ? c->reg : c->heap;
    size_t npool = sb_pool_keys(c->o, w), next = 0;
    size_t ngroups = npool / w->batch;
    uint64_t *last = NULL;
    unsigned long round = 0;
    mc__samples_t lat = {0};
    sb_report_t r = {0};
    uint64_t t_go, t_stop, gap_ns = (uint64_t)SB_FIRST_READ_GAP_MS * 1000000u;

    if (w->op != SB_PUT)
        r.err = sb_prepare_gets(c, wi, w, npool, buf);
    else
        sb_fill(buf, w->size * w->batch, (unsigned)wi);
    /* Only a pool the cache could hold whole needs the gap; a larger one is read in order, so
     * npool - 1 >= capacity other locations enter the cache between two reads of a key. */
    int need_gap = w->op == SB_GET_FIRST && npool <= mc_store_replica_cache_capacity(c->s);
    if (r.err == 0 && need_gap && !(last = mc__calloc(ngroups, sizeof(*last))))
        r.err = MC_ERR_MEMORY;
    if (sb_write_all(res_fd, "R", 1) != 0 || sb_wait_byte(cmd_fd) != 0) {
        mc__free(last);
        return -1;
    }
    t_go = mc__now_ns();
    t_stop = t_go + (uint64_t)(c->o->duration * 1e9);
    while (r.err == 0) {
        uint64_t now = mc__now_ns(), t0, t1;
        int rc;
        if (now >= t_stop && r.calls >= 3)
            break;
        if (next == npool) { /* the pool is used up (puts) or read through (gets) */
            if (w->op == SB_PUT)
                sb_remove_pool(c, wi, "p", round, npool, w, buf);
            round += w->op == SB_PUT;
            next = 0;
        }
        if (need_gap) {
            uint64_t seen = last[next / w->batch];
            if (seen && now - seen < gap_ns) {
                r.waits++;
                sb_sleep_ms((gap_ns - (now - seen)) / 1000000u + 1);
            }
        }
        sb_name_keys(c, wi, w->op == SB_PUT ? "p" : "g", w->op == SB_PUT ? round : 0, next,
                     w->batch, w, buf);
        t0 = mc__now_ns();
        rc = w->op == SB_PUT ? sb_put_call(c, w, w->batch) : sb_get_call(c, w, w->batch);
        t1 = mc__now_ns();
        if (rc != 0) {
            r.err = rc;
            break;
        }
        if (need_gap)
            last[next / w->batch] = t1;
        next += w->batch;
        r.calls++;
        r.busy_ns += t1 - t0;
        if (mc__samples_add(&lat, t1 - t0) != 0)
            r.err = MC_ERR_MEMORY;
    }
    r.wall_ns = mc__now_ns() - t_go;
    r.ops = r.calls * w->batch;
    /* Clean-up, untimed: this workload's keys leave the segment for the next one. */
    if (w->op == SB_PUT)
        sb_remove_pool(c, wi, "p", round, next, w, buf);
    else
        sb_remove_pool(c, wi, "g", 0, npool, w, buf);
    r.nsamples = lat.n;
    int io = sb_write_all(res_fd, &r, sizeof(r));
    if (io == 0 && lat.n)
        io = sb_write_all(res_fd, lat.v, lat.n * sizeof(*lat.v));
    mc__samples_free(&lat);
    mc__free(last);
    return io;
}

static int sb_client_alloc(sb_client_t *c) {
    size_t maxb = 1;
    c->cap = 0;
    for (size_t i = 0; i < c->o->nwl; i++) {
        size_t need = (size_t)(c->o->wl[i].size * c->o->wl[i].batch);
        c->cap = need > c->cap ? need : c->cap;
        maxb = c->o->wl[i].batch > maxb ? c->o->wl[i].batch : maxb;
    }
    c->heap = mc__malloc(c->cap);
    c->reg = mc__malloc(c->cap);
    c->names = mc__calloc(maxb, sizeof(*c->names));
    c->keys = mc__calloc(maxb, sizeof(*c->keys));
    c->iov = mc__calloc(maxb, sizeof(*c->iov));
    c->items = mc__calloc(maxb, sizeof(*c->items));
    c->put_res = mc__calloc(maxb, sizeof(*c->put_res));
    c->get_res = mc__calloc(maxb, sizeof(*c->get_res));
    if (!c->heap || !c->reg || !c->names || !c->keys || !c->iov || !c->items || !c->put_res ||
        !c->get_res)
        return MC_ERR_MEMORY;
    memset(c->heap, 1, c->cap); /* fault the pages in before any timing */
    memset(c->reg, 1, c->cap);
    return mc_store_register_buffer(c->s, c->reg, c->cap);
}

static void sb_client_free(sb_client_t *c) {
    if (c->s && c->reg)
        (void)mc_store_unregister_buffer(c->s, c->reg);
    if (c->s)
        mc_store_close(c->s);
    mc_store_destroy(c->s);
    mc__free(c->heap);
    mc__free(c->reg);
    mc__free(c->names);
    mc__free(c->keys);
    mc__free(c->iov);
    mc__free(c->items);
    mc__free(c->put_res);
    mc__free(c->get_res);
}

int sb_client_main(const sb_opts_t *o, int index, int cmd_fd, int res_fd) {
    sb_client_t c = {.o = o, .index = index};
    int rc = sb_store_open(o, 0, &c.s);
    mc_replicate_config_init(&c.rcfg);
    if (rc == 0)
        rc = sb_client_alloc(&c);
    if (rc != 0) {
        int32_t code = rc;
        (void)sb_write_all(res_fd, "E", 1);
        (void)sb_write_all(res_fd, &code, sizeof(code));
        sb_client_free(&c);
        return 1;
    }
    if (sb_write_all(res_fd, "S", 1) != 0) {
        sb_client_free(&c);
        return 1;
    }
    for (size_t i = 0; i < o->nwl && rc == 0; i++)
        rc = sb_run_workload(&c, i, cmd_fd, res_fd);
    sb_client_free(&c);
    return rc == 0 ? 0 : 1;
}

int sb_holder_main(const sb_opts_t *o) {
    mc_store_t *s = NULL;
    char buf[256];
    int rc = sb_store_open(o, o->segment_size, &s);
    if (rc != 0) {
        printf("{\"fatal\": \"store setup: %s (%d)\"}\n", mc_strerror(rc), rc);
        return 1;
    }
    printf("{\"ready\": true, \"pid\": %d, \"segment\": \"%s\"}\n", (int)getpid(),
           mc_store_hostname(s));
    fflush(stdout);
    while (read(0, buf, sizeof(buf)) > 0) {
    }
    mc_store_close(s);
    mc_store_destroy(s);
    return 0;
}
