/* The master's KV-event publisher (--enable_kv_events), a sink the model reports to: every object
 * stored, removed (also by eviction) and copied to or dropped from the disk tier is announced to
 * cache-aware routers (Dynamo's KV router, the conductor, llm-d) over a ZeroMQ PUB socket, framed
 * as the reference's master frames it:
 *
 *   part 0: topic (empty)   part 1: u64 sequence, big-endian (1, 2, ...)
 *   part 2: msgpack [timestamp_ms, [event map, ...], dp_rank]
 *
 * with the reference's event maps (event_id, timestamp, event_type "stored"/"removed", type
 * "BlockStored"/"BlockRemoved", model_name, block_size, additional_salt, lora_name, tenant_id,
 * backend_id, group_id, medium "cpu"/"disk", dp_rank, object_key, seq_hashes, block_hashes,
 * base_block_idx, parent_hash, token_ids, parent_block_hash), the key read as a decimal or 0x-hex
 * u64 block hash (mc__kv_key_hash). docs/kv-events.md has the format.
 *
 * An emitter only appends to a bounded queue (the oldest is dropped when it is full, counted, and
 * its sequence number skipped so subscribers see the loss); a publisher thread encodes and sends,
 * so no put waits for a subscriber. A replay endpoint (ROUTER, as vLLM's publisher serves it)
 * sends the batches kept since a given sequence number. */
#ifndef MC_STORE_MASTER_KV_EVENTS_H
#define MC_STORE_MASTER_KV_EVENTS_H
#include <stddef.h>
#include <stdint.h>

#include "mooncake/common/frame.h"

typedef struct mc__kv_events_config {
    int enabled;
    const char *bind_endpoint;   /* PUB, e.g. tcp://0.0.0.0:5557 */
    const char *replay_endpoint; /* ROUTER for replays ("" or NULL: none); ours, vLLM's name */
    int64_t replay_buffer_steps; /* batches kept for replay (vLLM's buffer_steps) */
    const char *backend_id;      /* the cache owner's identity on every event */
    /* The reference keeps these deprecated (the indexer's /register supplies them): accepted,
     * not stamped on events. tenant_id is: this master has one tenant. */
    const char *model_name, *tenant_id, *additional_salt, *lora_name;
    int64_t block_size, dp_rank;
    int emit_legacy_compat; /* also vLLM's and SGLang's field names (type, block_hashes, ...) */
    int emit_object_key;
    int64_t queue_capacity; /* pending events; 0: unbounded */
} mc__kv_events_config_t;

typedef struct mc__kv_events_stats {
    int enabled;
    uint64_t published_batches, published_events;
    uint64_t dropped_events;        /* the queue was full, or a send failed */
    uint64_t skipped_unparsed_keys; /* keys that are no u64 block hash */
    uint64_t queued;                /* waiting for the publisher thread now */
    uint64_t subscribers;
    uint64_t replay_requests, replay_malformed, last_sequence;
} mc__kv_events_stats_t;

typedef struct mc__master mc__master_t;
enum { MC__KV_STORED = 1, MC__KV_REMOVED = 2 };

void mc__kv_events_config_defaults(mc__kv_events_config_t *c);
/* A one-line reason in err and MC_ERR_INVALID_PARAMS when the settings cannot work. */
int mc__kv_events_config_validate(const mc__kv_events_config_t *c, char *err, size_t cap);
/* Binds the sockets and starts the publisher thread (m->kv); nothing when not enabled. */
int mc__kv_events_start(mc__master_t *m, const mc__kv_events_config_t *cfg);
/* Publishes what is queued, then stops; the state's teardown after it announces nothing. */
void mc__kv_events_stop(mc__master_t *m);

/* The emitter (a no-op when the publisher is off): key of len bytes was stored on, or removed
 * from, medium ("cpu", "disk"). Safe under any of the model's locks (the queue's lock is a leaf).
 */
void mc__kv_event(mc__master_t *m, int kind, const uint8_t *key, uint32_t len, const char *medium);

void mc__kv_events_stats(mc__master_t *m, mc__kv_events_stats_t *out);
/* GET /kv_events/status's body, the reference's fields first: {"enabled":..,
 * "published_batches":.., "published_events":.., "dropped_events":..,
 * "skipped_unparsed_keys":.., then, when the publisher runs, ours}. */
void mc__kv_events_status_json(mc__master_t *m, mc_buf_t *b);
/* The PUB and replay ports bound (0 when off): for tests that bind port 0. */
uint16_t mc__kv_events_port(mc__master_t *m, int replay);

/* A key as the reference reads a block hash from it: decimal, or 0x/0X then hex, the whole key,
 * within u64 (strtoull's rules: leading blanks and a sign accepted). 1 with *hash, or 0. */
int mc__kv_key_hash(const uint8_t *key, uint32_t len, uint64_t *hash);
#endif
