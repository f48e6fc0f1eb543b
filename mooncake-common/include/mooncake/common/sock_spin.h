/* Whether a receive that follows a send spins before it sleeps (sock_spin.c): while this thread's
 * spins keep ending with the answer. A spin yields the core between its polls (sock.c), so it
 * never holds a core that another runnable thread wants. MC_TCP_REPLY_SPIN_US set in the
 * environment overrides the adaptation: that spin, always (sock.c). */
#ifndef MC_COMMON_SOCK_SPIN_H
#define MC_COMMON_SOCK_SPIN_H
#include <stdint.h>

/* One thread's record of its spins. */
typedef struct mc__spin_gov {
    uint16_t score; /* share of recent spins that ended with the answer, in 1/1024ths */
    uint16_t skips; /* waits not spun since the last probe */
} mc__spin_gov_t;

/* The policy, on its inputs alone: how long to spin for a wait the caller would spin want_ns
 * for. want_ns while at least half of g's recent spins ended with the answer; else want_ns every
 * 16th wait (a probe, to learn when spinning pays again), 0 otherwise. */
uint64_t mc__spin_budget(mc__spin_gov_t *g, uint64_t want_ns);
/* Records how a spin ended: with the answer (answered != 0), or with nothing come. */
void mc__spin_note(mc__spin_gov_t *g, int answered);

/* The policy for the calling thread (its own record). */
uint64_t mc__spin_allow(uint64_t want_ns);
void mc__spin_result(int answered);

#endif
