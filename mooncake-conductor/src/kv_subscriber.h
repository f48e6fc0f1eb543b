/* One subscription of the conductor: a thread that keeps a SUB connection to a publisher (a vLLM
 * or SGLang engine, a Mooncake master), tracks its sequence numbers, fills a gap from the
 * publisher's replay endpoint (vLLM's protocol: DEALER ["", first missing seq], answers
 * ["", seq, payload] until seq -1), decodes each batch (kv_event_decode.h) and hands the events
 * on in sequence order. A sequence number lower than the last one is a publisher restart: the
 * tracking starts over (the callback is told, so the index can drop what that source held). A
 * publisher that goes away is reconnected to, with a back-off, until stop. */
#ifndef MC_CONDUCTOR_KV_SUBSCRIBER_H
#define MC_CONDUCTOR_KV_SUBSCRIBER_H
#include <stdint.h>

#include "kv_event_decode.h"

typedef struct mc_kv_sub mc_kv_sub_t;

typedef struct mc_kv_sub_ops {
    void (*event)(void *arg, const mc_kv_event_t *ev, const mc_kv_batch_t *batch);
    void (*restarted)(void *arg); /* the publisher's sequence went back: it restarted */
} mc_kv_sub_ops_t;

typedef struct mc_kv_sub_stats {
    uint64_t batches, events;
    uint64_t malformed_batches, malformed_events;
    uint64_t gaps, replayed, lost; /* lost: sequence numbers neither received nor replayed */
    uint64_t restarts, connects;
    uint64_t last_seq;
} mc_kv_sub_stats_t;

/* endpoint: tcp://host:port of the PUB; replay: of the ROUTER, or NULL / "" for none. */
int mc__kv_sub_start(const char *endpoint, const char *replay, const mc_kv_sub_ops_t *ops,
                     void *arg, mc_kv_sub_t **out);
void mc__kv_sub_stats(mc_kv_sub_t *s, mc_kv_sub_stats_t *out);
/* Stops the thread; no callback runs after it returns. */
void mc__kv_sub_stop(mc_kv_sub_t *s);
#endif
