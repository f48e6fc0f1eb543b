/* When a receive that follows a send may spin (sock_spin.h). A spin buys back a sleep and a
 * wake-up, which cost far more than they seem on a virtual machine: a core with nothing to run
 * halts, and waking it again goes through the host (a single 4 KiB put took 105 us at p50 on the
 * idle 2-core VM with every wait asleep, against about 30 us with 50 us spins;
 * docs/performance.md). The spin yields the core between its polls (sock.c), so a spinning thread
 * never keeps a runnable one from its core: the peer that makes our answer, or the other process
 * our caller talks to next, runs at once on it. What remains is the CPU time a spin spends when
 * no answer comes, bounded by each thread's record of whether its own spins ended with it. */
#include "mooncake/common/sock_spin.h"

/* The success record: a moving average over ~8 waits, in 1/1024ths. */
#define MC__SPIN_ONE 1024u
/* Below half successful, a thread spins only every MC__SPIN_PROBE_EVERY-th wait, to learn when
 * spinning pays again (a peer that got faster, load that went away). */
#define MC__SPIN_PROBE_EVERY 16u

uint64_t mc__spin_budget(mc__spin_gov_t *g, uint64_t want_ns) {
    if (want_ns == 0)
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

static _Thread_local mc__spin_gov_t mc__spin_mine = {.score = MC__SPIN_ONE};

uint64_t mc__spin_allow(uint64_t want_ns) {
    return mc__spin_budget(&mc__spin_mine, want_ns);
}

void mc__spin_result(int answered) {
    mc__spin_note(&mc__spin_mine, answered);
}
