/* Whether a receive that follows a send spins before it sleeps (sock_spin.c): only while the
 * host has a core free for the peer that makes the answer, and while this thread's spins keep
 * ending with it. MC_TCP_REPLY_SPIN_US set in the environment overrides the adaptation: that
 * spin, always (sock.c). */
#ifndef MC_COMMON_SOCK_SPIN_H
#define MC_COMMON_SOCK_SPIN_H
#include <stdint.h>

/* One thread's record of its spins. */
typedef struct mc__spin_gov {
    uint16_t score; /* share of recent spins that ended with the answer, in 1/1024ths */
    uint16_t skips; /* waits not spun since the last probe */
} mc__spin_gov_t;

/* The policy, on its inputs alone: how long to spin for a wait the caller would spin want_ns
 * for, with `runnable` threads runnable on the host now (this one included; <= 0: unknown) and
 * the host's ncpu cores (<= 0: no comparison). 0 when every core is taken and someone waits for
 * one; while fewer than half of g's recent spins ended with the answer, want_ns every 16th wait (a
 * probe), else 0. */
uint64_t mc__spin_budget(mc__spin_gov_t *g, uint64_t want_ns, int runnable, int ncpu);
/* Records how a spin ended: with the answer (answered != 0), or with nothing come. */
void mc__spin_note(mc__spin_gov_t *g, int answered);
/* The runnable count out of /proc/loadavg's text ("0.37 0.31 0.58 2/345 12345" -> 2); -1. */
int mc__spin_parse_loadavg(const char *text);

/* The policy for the calling thread on this host now (its own record, the host's runnable
 * threads read at most every 5 ms against the host's cores when its affinity mask has them all). */
uint64_t mc__spin_allow(uint64_t want_ns);
void mc__spin_result(int answered);

#endif
