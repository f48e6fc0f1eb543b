/* Faulting a segment's pages in ahead of use (segment_prefault.h). */
#include "client/segment_prefault.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "mooncake/common/log.h"
#include "mooncake/common/mem_probe.h"
#include "mooncake/common/time.h"

/* Faulted in this much per call. The call holds the process's memory-map lock (for reading)
 * while it faults, and a thread that maps or unmaps memory waits for it, and then every fault of
 * the process waits behind that one: so a call must stay short (64 pages, well under 1 ms on the
 * slow guest), and a stop waits for at most one. */
#define MC__PREFAULT_CHUNK (256u << 10)
/* The memory left is checked before each this much (a multiple of the chunk). */
#define MC__PREFAULT_CHECK (64u << 20)

mc__prefault_mode_t mc__prefault_mode(void) {
    static _Atomic int warned;
    const char *v = getenv("MC_STORE_SEGMENT_PREFAULT");
    if (!v || !*v || strcasecmp(v, "off") == 0 || strcmp(v, "0") == 0 ||
        strcasecmp(v, "false") == 0)
        return MC__PREFAULT_OFF;
    if (strcasecmp(v, "background") == 0 || strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0)
        return MC__PREFAULT_BACKGROUND;
    if (strcasecmp(v, "sync") == 0)
        return MC__PREFAULT_SYNC;
    if (!atomic_exchange(&warned, 1))
        MC_WARN("store: MC_STORE_SEGMENT_PREFAULT=%s is not one of background, sync, off; "
                "using off",
                v);
    return MC__PREFAULT_OFF;
}

/* The first number in the file at path after key (or at its start with key NULL); 0 when
 * there is none. "max" (a cgroup without a limit) reads as UINT64_MAX. */
static uint64_t mc__read_number(const char *path, const char *key) {
    char buf[4096];
    FILE *f = fopen(path, "re");
    uint64_t v = 0;
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = buf;
    if (key) {
        p = strstr(buf, key);
        if (!p)
            return 0;
        p += strlen(key);
    }
    while (*p == ' ' || *p == '\t')
        p++;
    if (strncmp(p, "max", 3) == 0)
        return UINT64_MAX;
    if (sscanf(p, "%" SCNu64, &v) != 1)
        return 0;
    return v;
}

/* The memory available now and the total it is part of: MemAvailable and MemTotal, or in a
 * container with a lower limit (cgroup v2, this process's group mounted at the usual place)
 * that limit less its usage, and the limit. UINT64_MAX for what cannot be read. */
static void mc__mem_now(uint64_t *avail, uint64_t *total) {
    uint64_t a = mc__read_number("/proc/meminfo", "MemAvailable:");
    uint64_t t = mc__read_number("/proc/meminfo", "MemTotal:");
    *avail = a ? a * 1024 : UINT64_MAX; /* kB */
    *total = t ? t * 1024 : UINT64_MAX;
    uint64_t max = mc__read_number("/sys/fs/cgroup/memory.max", NULL);
    if (max && max != UINT64_MAX && max < *total) {
        uint64_t cur = mc__read_number("/sys/fs/cgroup/memory.current", NULL);
        uint64_t left = max > cur ? max - cur : 0;
        *total = max;
        if (left < *avail)
            *avail = left;
    }
}

uint64_t mc__prefault_mem_available(void) {
    uint64_t avail, total;
    mc__mem_now(&avail, &total);
    return avail;
}

int mc__prefault_leaves_reserve(uint64_t avail, uint64_t total, uint64_t n) {
    if (avail == UINT64_MAX || total == UINT64_MAX)
        return 1;
    uint64_t reserve = total / 8 < (4ull << 30) ? total / 8 : (4ull << 30);
    return avail >= reserve && avail - reserve >= n;
}

/* Asked again as a run goes: several stores starting at once each pass the check at start. */
static int mc__mem_allows(uint64_t n) {
    uint64_t avail, total;
    mc__mem_now(&avail, &total);
    return mc__prefault_leaves_reserve(avail, total, n);
}

/* Faults the range in, chunk by chunk, until done or asked to stop. */
static void mc__prefault_run(mc__prefault_t *pf) {
    size_t off = 0;
    uint64_t t0 = mc__now_ms();
    while (off < pf->len && !atomic_load_explicit(&pf->stop, memory_order_relaxed)) {
        size_t n = pf->len - off < MC__PREFAULT_CHUNK ? pf->len - off : MC__PREFAULT_CHUNK;
        if (off % MC__PREFAULT_CHECK == 0 && !mc__mem_allows(MC__PREFAULT_CHECK)) {
            MC_INFO("store: stopped faulting the segment in at %zu of %zu bytes: the host's "
                    "memory is running short; the rest comes on first use",
                    off, pf->len);
            break;
        }
        if (mc__mem_populate(pf->addr + off, n, 1) != 0) {
            if (errno == EINTR)
                continue;
            /* EINVAL: a kernel without the advice; ENOMEM, EFAULT: no memory for it. The pages
             * left are faulted on first use, as without this. */
            if (errno == EINVAL)
                MC_DEBUG("store: segment prefault unsupported here (%s)", strerror(errno));
            else
                MC_WARN("store: segment prefault stopped after %zu of %zu bytes: %s", off, pf->len,
                        strerror(errno));
            break;
        }
        off += n;
        atomic_store_explicit(&pf->done, off, memory_order_relaxed);
    }
    if (off == pf->len)
        MC_DEBUG("store: segment of %zu bytes faulted in (%" PRIu64 " ms)", pf->len,
                 mc__now_ms() - t0);
    atomic_store_explicit(&pf->ended, 1, memory_order_release);
}

/* At the process's own priority, on purpose. At SCHED_IDLE (tried first) the thread was
 * preempted inside a call, holding the memory-map lock, whenever other work kept the cores busy,
 * and stayed off the cores for seconds: every thread of the store that mapped memory, and then
 * every page fault, waited for it (store_client_ops failed with two busy loops beside it). */
static void *mc__prefault_main(void *arg) {
    mc__prefault_run(arg);
    return NULL;
}

void mc__prefault_start(mc__prefault_t *pf, void *addr, size_t len, mc__prefault_mode_t mode) {
    mc__prefault_stop(pf); /* a run of an earlier range */
    memset(pf, 0, sizeof(*pf));
    pf->addr = addr;
    pf->len = len;
    atomic_store(&pf->ended, 1);
    if (!addr || !len || mode == MC__PREFAULT_OFF)
        return;
    if (mode == MC__PREFAULT_SYNC) {
        atomic_store(&pf->ended, 0);
        mc__prefault_run(pf);
        return;
    }
    uint64_t avail = mc__prefault_mem_available();
    if (avail != UINT64_MAX && len > avail / 2) {
        MC_INFO("store: not faulting the %zu-byte segment in ahead: more than half of the %" PRIu64
                " bytes of memory available; its pages come on first use",
                len, avail);
        return;
    }
    atomic_store(&pf->ended, 0);
    if (pthread_create(&pf->thread, NULL, mc__prefault_main, pf) != 0) {
        atomic_store(&pf->ended, 1);
        return;
    }
    pf->started = 1;
}

void mc__prefault_stop(mc__prefault_t *pf) {
    if (!pf->started)
        return;
    atomic_store(&pf->stop, 1);
    pthread_join(pf->thread, NULL);
    pf->started = 0;
}
