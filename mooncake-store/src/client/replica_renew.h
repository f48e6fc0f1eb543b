/* The renewer: one thread per client that keeps the replica-location cache's entries of keys
 * read over and over from running out. Without it, a key read through its cached entry goes to
 * the master once its entry's window (MC_MP_CACHED_LEASE_MS, less margins) ends, however often it
 * is read: a client that reads a set of keys in turn, each every 25-60 ms, asked the master for
 * one read in 3 to 7 (docs/perf/issue26-renew/ab.md). With it, such keys are asked for together,
 * in one batch per MC__RC_RENEW_EVERY_MS, off the readers' path.
 *
 * What is renewed: an entry that a get read through since the master granted it (with a lease of
 * MC__RC_RENEW_MIN_LEASE_MS or more), once it is past half its life (replica_cache.h). A renewal is
 * a BATCH_GET_REPLICA_LIST, a get at the master like any other: it grants the same lease, and a key
 * no longer read is renewed at most once more. So the master sees about one lookup per hot key per
 * 100 ms, off the readers' path, instead of one per window on it. MC_STORE_CACHE_RENEW=0 turns it
 * off (the cache then works as before: entries run out). */
#ifndef MC_STORE_CLIENT_REPLICA_RENEW_H
#define MC_STORE_CLIENT_REPLICA_RENEW_H

struct mc_store;

/* Starts the thread when the store has a cache and renewal is on: 0, or MC_ERR_INTERNAL_ERROR
 * when the thread cannot start. */
int mc__replica_renew_start(struct mc_store *s);
/* Stops and joins it (before the master connection and the cache go); a no-op when not started. */
void mc__replica_renew_stop(struct mc_store *s);
#endif
