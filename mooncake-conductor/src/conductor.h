/* The conductor service: registrations (one subscription each, kv_subscriber.h) feeding one prefix
 * table (prefix_table.h) behind a lock, and the HTTP API over it (msgpack bodies, as the
 * reference's conductor speaks):
 *
 *   POST /register       {endpoint, type: "vLLM"|"Mooncake", modelname, instance_id, block_size,
 *                         dp_rank, replay_endpoint?, lora_name?, tenant_id?, ...}
 *   POST /unregister     {instance_id, dp_rank, tenant_id?}
 *   POST /query_by_hash  {model, block_size, block_hashes: [u64], tenant_id?, lora_name?,
 *                         cache_salt?} -> {instances: {id: {longest_matched, gpu, cpu, disk,
 *                         dp: {rank: n}}}, shared: {id: {cpu, disk}}}
 *   GET  /services, /metrics (Prometheus text), /health
 *
 * Unknown paths are 404, bad bodies 400 with {error, reason, field?}. */
#ifndef MC_CONDUCTOR_CONDUCTOR_H
#define MC_CONDUCTOR_CONDUCTOR_H
#include <stddef.h>
#include <stdint.h>

typedef struct mc_conductor mc_conductor_t;

typedef struct mc_conductor_config {
    const char *host;   /* HTTP bind address */
    int64_t port;       /* 0: ephemeral */
    int64_t max_blocks; /* the prefix table's bound */
} mc_conductor_config_t;

int mc__conductor_start(const mc_conductor_config_t *cfg, mc_conductor_t **out);
uint16_t mc__conductor_port(const mc_conductor_t *c);
void mc__conductor_stop(mc_conductor_t *c);
#endif
