/* The client's replica-location cache: reads that skip the master while a lease they were
 * granted lasts. Why this is sound, and where it does not apply, is written at the top of
 * replica_cache.c and in docs/store.md ("Replica-location cache"). */
#ifndef MC_STORE_CLIENT_REPLICA_CACHE_H
#define MC_STORE_CLIENT_REPLICA_CACHE_H
#include <stddef.h>
#include <stdint.h>

#include "proto/master_proto.h"

/* A client keeps MC_STORE_DEFAULT_REPLICA_CACHE_ENTRIES unless configured (replica_cache_entries,
 * or the environment's MOONCAKE_REPLICA_CACHE_ENTRIES); 0 turns the cache off. The most it may
 * be configured to keep (each entry is a heap record of its key and
 * replica list, a few hundred bytes). */
#define MC__REPLICA_CACHE_MAX_ENTRIES (1u << 22)

typedef struct mc__replica_cache mc__replica_cache_t;

/* A cache of at most capacity entries (1..MC__REPLICA_CACHE_MAX_ENTRIES), or *out = NULL and 0
 * for capacity 0 (every call below accepts a NULL cache and then does nothing). */
int mc__replica_cache_create(size_t capacity, mc__replica_cache_t **out);
void mc__replica_cache_destroy(mc__replica_cache_t *c);

/* Records the replica list kr of key, granted by a GET_REPLICA_LIST whose request this client
 * sent at sent_ms (its monotonic clock, mc__now_ms): the lease counts from then, so the time the
 * request and its reply spent on the network only shortens the entry's life, which is the lease
 * or MC_MP_CACHED_LEASE_MS, whichever is shorter, less safety margins. Lists the cache
 * cannot vouch for are not recorded (see replica_cache.c). When full, the oldest entry goes. */
void mc__replica_cache_put(mc__replica_cache_t *c, const char *key, uint64_t sent_ms,
                           const mc__key_replicas_t *kr);
/* 1 and kr filled (code 0, size, the replicas; key left alone) when key has an entry that may
 * still start a read at now_ms; *read_by_ms is when that read must have finished (a read that
 * ends later is not trusted: redo it through the master). 0 otherwise (an expired entry goes). */
int mc__replica_cache_get(mc__replica_cache_t *c, const char *key, uint64_t now_ms,
                          mc__key_replicas_t *kr, uint64_t *read_by_ms);
/* Forgets key (this client changed or removed it, or a read of the entry failed). */
void mc__replica_cache_drop(mc__replica_cache_t *c, const char *key);
/* Forgets everything (remove_all, remove_by_regex). */
void mc__replica_cache_clear(mc__replica_cache_t *c);
/* Entries held now, and the lookups that hit and missed since creation. */
size_t mc__replica_cache_count(mc__replica_cache_t *c);
void mc__replica_cache_stats(mc__replica_cache_t *c, uint64_t *hits, uint64_t *misses);

/* Renewal: a key read through its entry since the entry's grant is asked again before the entry
 * runs out, so that a key read over and over never waits for the master (replica_renew.c).
 * The new grant is a GET_REPLICA_LIST like any get's, so the argument above holds for it. */
typedef struct mc__rc_due {
    char *key;    /* the caller frees it (mc__free) */
    uint64_t seq; /* the grant seen */
} mc__rc_due_t;
/* Only entries granted a lease this long or longer are renewed. The renewal after a key's last
 * read keeps the object leased at the master up to about 130 ms (under 3/4 of the window) longer
 * than that read alone would: at most about 1/15 of such a lease. A shorter lease, which a
 * deployment picks so that removes and evictions follow reads closely, keeps the old behaviour:
 * its entries run out. */
#define MC__RC_RENEW_MIN_LEASE_MS (10u * MC_MP_CACHED_LEASE_MS)
/* How often the renewer looks for due entries: a fifth of MC_MP_CACHED_LEASE_MS, so an entry due
 * at half its life is asked for with more than a quarter of its life left. */
#define MC__RC_RENEW_EVERY_MS (MC_MP_CACHED_LEASE_MS / 5u)
/* Up to max keys whose renewable entries a get hit since their grant and which are past half
 * their life, oldest first (expired entries met on the way go). */
size_t mc__replica_cache_due(mc__replica_cache_t *c, uint64_t now_ms, mc__rc_due_t *out,
                             size_t max);
/* The answer to a renewal sent at sent_ms: replaces key's entry only while it is still the grant
 * seq (else this client's own change or a newer grant came meanwhile and stays); a list the cache
 * cannot vouch for (the key gone, moved to disk) drops that entry. */
void mc__replica_cache_renew(mc__replica_cache_t *c, const char *key, uint64_t seq,
                             uint64_t sent_ms, const mc__key_replicas_t *kr);
/* The renewer's wait: until some entry was hit (no timer runs while none is), then ms more.
 * 0 once mc__replica_cache_wake_renewer was called. */
int mc__replica_cache_nap(mc__replica_cache_t *c, uint64_t ms);
void mc__replica_cache_wake_renewer(mc__replica_cache_t *c);

/* The two instants an entry granted at sent_ms with a lease of ttl_ms gets: reads may start
 * until *use_until and must end by *read_by. 0 when the lease is too short to cache. */
int mc__replica_cache_window(uint64_t sent_ms, uint64_t ttl_ms, uint64_t *use_until,
                             uint64_t *read_by);
#endif
