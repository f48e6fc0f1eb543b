/* When a receive that follows a send may spin (sock_spin.h). A spin buys back a wake-up only when
 * the answer can come while we spin, i.e. when the peer that makes it has a core: with more
 * runnable threads than cores (8 client processes, their master and their holder on 2 cores),
 * every spinning thread holds a core that the peer needs, and the spins that were to save
 * microseconds cost whole scheduler slices (4 KiB gets fell from 30k op/s with one client to
 * 8.6k with eight, against 22.6k with the spin off; docs/perf/issue26-speed.md). Two signals
 * decide, both cheap: the host's runnable threads against its cores (read at most every
 * MC__SPIN_SAMPLE_NS; only where this process may run on every core), and each thread's record
 * of whether its own spins ended with the answer. */
#include "mooncake/common/sock_spin.h"

#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mooncake/common/time.h"

/* How often the host's runnable count is read again: /proc/loadavg costs ~3 system calls, once
 * per 5 ms is far below what any loop of round trips spends. */
#define MC__SPIN_SAMPLE_NS (5u * 1000u * 1000u)
/* The success record: a moving average over ~8 waits, in 1/1024ths. */
#define MC__SPIN_ONE 1024u
/* Below half successful, a thread spins only every MC__SPIN_PROBE_EVERY-th wait, to learn when
 * spinning pays again (a peer that got faster, load that went away). */
#define MC__SPIN_PROBE_EVERY 16u

int mc__spin_parse_loadavg(const char *text) {
    /* "0.37 0.31 0.58 2/345 12345": the fourth field's first number counts the runnable
     * scheduling entities of the whole host, the reader included */
    const char *p = text;
    char *end = NULL;
    long v;
    for (int field = 0; field < 3; field++) {
        p = strchr(p, ' ');
        if (!p)
            return -1;
        p++;
    }
    v = strtol(p, &end, 10);
    if (end == p || *end != '/' || v < 0 || v > 1000000)
        return -1;
    return (int)v;
}

uint64_t mc__spin_budget(mc__spin_gov_t *g, uint64_t want_ns, int runnable, int ncpu) {
    if (want_ns == 0)
        return 0;
    /* every core is taken (this thread among them) and someone waits for one: the answer we
     * would spin for needs a core that only our sleeping frees */
    if (runnable > 0 && ncpu > 0 && runnable > ncpu)
        return 0;
    if (g->score >= MC__SPIN_ONE / 2)
        return want_ns;
    if (++g->skips >= MC__SPIN_PROBE_EVERY) {
        g->skips = 0;
        return want_ns;
    }
    return 0;
}

void mc__spin_note(mc__spin_gov_t *g, int answered) {
    if (answered)
        g->score = (uint16_t)(g->score + ((MC__SPIN_ONE - g->score) >> 3));
    else
        g->score = (uint16_t)(g->score - (g->score >> 3));
}

/* The cores the host's runnable count is to be compared with: the host's, when this process may
 * run on all of them (its affinity mask); 0 (no comparison: the spins' record alone decides) when
 * it is pinned to fewer, since the count is the whole host's and says nothing of our cores. */
static int mc__spin_ncpu(void) {
    static _Atomic int cached = -1;
    int n = atomic_load_explicit(&cached, memory_order_relaxed);
    if (n < 0) {
        cpu_set_t set;
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        CPU_ZERO(&set);
        n = 0;
        if (online > 0 && sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) >= online)
            n = (int)online;
        atomic_store_explicit(&cached, n, memory_order_relaxed);
    }
    return n;
}

/* The host's runnable threads, read again when the last reading is older than
 * MC__SPIN_SAMPLE_NS (one thread reads; the others use the last value); -1: unknown. */
static int mc__spin_runnable(void) {
    static _Atomic uint64_t stamp = 0;
    static _Atomic int last = -1;
    uint64_t now = mc__now_ns();
    uint64_t seen = atomic_load_explicit(&stamp, memory_order_relaxed);
    if (now - seen >= MC__SPIN_SAMPLE_NS &&
        atomic_compare_exchange_strong_explicit(&stamp, &seen, now, memory_order_relaxed,
                                                memory_order_relaxed)) {
        char buf[128];
        int v = -1;
        int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            ssize_t r = read(fd, buf, sizeof(buf) - 1);
            close(fd);
            if (r > 0) {
                buf[r] = '\0';
                v = mc__spin_parse_loadavg(buf);
            }
        }
        atomic_store_explicit(&last, v, memory_order_relaxed);
        return v;
    }
    return atomic_load_explicit(&last, memory_order_relaxed);
}

static _Thread_local mc__spin_gov_t mc__spin_mine = {.score = MC__SPIN_ONE};

uint64_t mc__spin_allow(uint64_t want_ns) {
    if (want_ns == 0)
        return 0;
    return mc__spin_budget(&mc__spin_mine, want_ns, mc__spin_runnable(), mc__spin_ncpu());
}

void mc__spin_result(int answered) {
    mc__spin_note(&mc__spin_mine, answered);
}
