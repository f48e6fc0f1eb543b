/* The conductor's decoder of KV-event batches (no I/O, fuzzed by fuzz/kv_event_decode_fuzz.c):
 * the msgpack payload of one publisher message, in any of the layouts engines send,
 *
 *   vLLM    [ts, [event, ...], dp_rank] or {"ts", "events", "data_parallel_rank"}; an event is
 *           a tagged struct: ["BlockStored", block_hashes, parent_block_hash, token_ids,
 *           block_size, lora_id, medium, lora_name, ...] or {"type": "BlockStored", ...};
 *           BlockRemoved [tag, block_hashes, medium, ...]; AllBlocksCleared [tag]
 *   SGLang  the same array layout, dp_rank being attn_dp_rank, media GPU / CPU_PINNED / DISK
 *   Mooncake master  [ts_ms, [{"event_type": "stored"/"removed", "seq_hashes", "medium",
 *           "tenant_id", "backend_id", ...}], dp_rank] (mooncake-store/src/master/kv_events.h)
 *
 * and hands each event to a callback as one normalised record. A block hash is an integer (its
 * u64 bits) or bytes (their last eight, big-endian: vLLM's SHA-256 digests, as the reference
 * conductor projects them). An event that cannot be read is counted and skipped; a batch that
 * cannot be read at all is refused. */
#ifndef MC_CONDUCTOR_KV_EVENT_DECODE_H
#define MC_CONDUCTOR_KV_EVENT_DECODE_H
#include <stddef.h>
#include <stdint.h>

#define MC_KV_MAX_HASHES 4096 /* block hashes one event may carry */

enum { MC_KV_EV_STORED = 1, MC_KV_EV_REMOVED = 2, MC_KV_EV_CLEARED = 3 };
enum {
    MC_KV_MEDIUM_UNKNOWN = 0,
    MC_KV_MEDIUM_GPU = 1,
    MC_KV_MEDIUM_CPU = 2,
    MC_KV_MEDIUM_DISK = 3
};

typedef struct mc_kv_str {
    const uint8_t *p; /* into the payload; NULL when absent or nil */
    uint32_t len;
} mc_kv_str_t;

typedef struct mc_kv_event {
    int kind;
    int medium;
    uint32_t n_hashes;
    const uint64_t *hashes; /* n_hashes, in the order sent (a chain's parent first) */
    int has_parent;
    uint64_t parent;
    int64_t block_size;                                        /* -1 when not sent */
    uint32_t n_tokens;                                         /* token ids sent (not kept) */
    mc_kv_str_t lora_name;                                     /* vLLM, when sent */
    mc_kv_str_t tenant_id, model_name, backend_id, object_key; /* Mooncake master */
} mc_kv_event_t;

typedef struct mc_kv_batch {
    double ts;       /* as sent: seconds (engines) or milliseconds (the master) */
    int64_t dp_rank; /* -1 when not sent */
    uint32_t events, malformed;
} mc_kv_batch_t;

typedef void (*mc_kv_event_fn)(const mc_kv_event_t *ev, void *arg);

/* Decodes one payload. 0 (with info filled; malformed events counted there), or
 * MC_ERR_INVALID_ARGUMENT when it is no batch at all. */
int mc__kv_batch_decode(const uint8_t *p, size_t n, mc_kv_event_fn fn, void *arg,
                        mc_kv_batch_t *info);
/* A medium's name as vLLM, SGLang and the master spell it. */
int mc__kv_medium(const uint8_t *p, uint32_t len);
#endif
