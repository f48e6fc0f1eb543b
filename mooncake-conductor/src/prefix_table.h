/* The conductor's prefix table: which block hashes each source holds, per cache context (tenant,
 * model, LoRA, block size, salt: the same hash means the same block only inside one), per source
 * (an engine instance's DP rank, or a Mooncake master as the shared tier) and per medium (GPU,
 * CPU, disk). A query walks a request's block hashes from the first and answers, for every
 * source, how many leading blocks it holds. Bounded: past max_blocks entries the least recently
 * touched block is forgotten (a cold prefix; counted), so memory never follows the publishers.
 * Not thread-safe: the caller serialises (one lock around it). */
#ifndef MC_CONDUCTOR_PREFIX_TABLE_H
#define MC_CONDUCTOR_PREFIX_TABLE_H
#include <stddef.h>
#include <stdint.h>

#define MC_PT_MEDIA 4 /* indexed by MC_KV_MEDIUM_* (0: unknown, counted as GPU for engines) */

typedef struct mc_prefix_table mc_prefix_table_t;

typedef struct mc_pt_match {
    uint32_t source;
    uint32_t any;                 /* leading blocks held in some medium */
    uint32_t medium[MC_PT_MEDIA]; /* leading blocks held in that medium */
} mc_pt_match_t;

typedef struct mc_pt_stats {
    uint64_t blocks, evicted, contexts, sources;
} mc_pt_stats_t;

int mc__pt_new(size_t max_blocks, mc_prefix_table_t **out);
void mc__pt_free(mc_prefix_table_t *t);
/* A context's id for its fields (created on first use; at most 4096): >= 0 or MC_ERR_*. */
int mc__pt_context(mc_prefix_table_t *t, const char *tenant, const char *model, const char *lora,
                   uint32_t block_size, const char *salt);
/* A source's id for its name (instance, DP rank; created on first use; at most 4096). */
int mc__pt_source(mc_prefix_table_t *t, const char *instance, uint32_t dp_rank);
void mc__pt_stored(mc_prefix_table_t *t, int ctx, int src, int medium, const uint64_t *h,
                   uint32_t n);
void mc__pt_removed(mc_prefix_table_t *t, int ctx, int src, int medium, const uint64_t *h,
                    uint32_t n);
/* Everything src holds is gone (AllBlocksCleared, a restart, an unregister). */
void mc__pt_clear_source(mc_prefix_table_t *t, int src);
/* Fills out (cap entries) with every source that holds the first block, longest first;
 * returns how many. */
size_t mc__pt_query(mc_prefix_table_t *t, int ctx, const uint64_t *h, uint32_t n,
                    mc_pt_match_t *out, size_t cap);
void mc__pt_stats(mc_prefix_table_t *t, mc_pt_stats_t *out);
#endif
