/* mooncake_master service: configuration, lifecycle, and the operations that the RPC server and
 * the admin HTTP endpoints call. The binary (tools/mooncake_master.c) only parses flags and
 * calls mc__master_start / mc__master_stop. */
#ifndef MC_STORE_MASTER_MASTER_H
#define MC_STORE_MASTER_MASTER_H
#include <stddef.h>
#include <stdint.h>

#include "master/kv_events.h"
#include "mooncake/common/frame.h"
#include "proto/master_proto.h"

typedef struct mc__master_config {
    const char *rpc_address; /* host to bind; "" or NULL = 0.0.0.0 */
    int64_t port;            /* 0 = ephemeral */
    int64_t rpc_thread_num; /* accepted for compatibility (0: default); one thread per connection */
    int64_t default_kv_lease_ttl_ms;
    int64_t default_kv_soft_pin_ttl_ms;
    int64_t max_kv_soft_pin_ttl_ms; /* a put asking for a longer soft pin is INVALID_PARAMS */
    int allow_evict_soft_pinned_objects;
    double eviction_ratio;
    double eviction_high_watermark_ratio;
    int64_t client_ttl_s;
    int64_t put_start_discard_timeout_s;
    int64_t put_start_release_timeout_s;
    int enable_http_metadata_server;
    int64_t http_metadata_server_port;
    const char *http_metadata_server_host;
    int64_t metrics_port;            /* admin HTTP; 0 = ephemeral */
    const char *metrics_address;     /* admin HTTP bind address; NULL/"" = rpc_address */
    int64_t rpc_idle_timeout_s;      /* an RPC connection idle this long is closed (0: never) */
    int64_t rpc_max_conns_per_peer;  /* RPC connections from one address (0: no limit) */
    const char *cluster_secret_file; /* NULL: MC_CLUSTER_SECRET(_FILE) from the environment */
    int enable_metric_reporting;     /* log a one-line summary periodically */
    const char *cluster_id;          /* the deployment's name for this cluster */
    /* Replica tasks (tasks.c), the reference's limits and timeouts (0 s: no timeout). */
    int64_t max_finished_tasks, max_pending_tasks, max_processing_tasks;
    int64_t pending_task_timeout_s, processing_task_timeout_s;
    /* A directory for the metadata log (persist.h): NULL or "" keeps metadata in memory only. */
    const char *metadata_dir;
    int restore_metadata;           /* replay metadata_dir's log at start (else start empty) */
    int64_t metadata_compact_bytes; /* the log is rewritten past max(this, 4x its last size) */
    /* High availability (ha.h): several masters, one leader elected in etcd, the metadata log
     * kept in etcd instead of metadata_dir. */
    int enable_ha;
    const char *ha_etcd_endpoints; /* "h1:2379,h2:2379" (or ';' between them) */
    int64_t ha_lease_ttl_s;        /* the leader's lease; a failover takes about this long */
    /* Set by the HA supervisor for the master it starts in one term of leadership: */
    int64_t ha_term;
    int (*ha_is_leader)(void *ctx, int64_t term); /* still the leader of term */
    void (*ha_lost)(void *ctx, int64_t term);     /* the log cannot record: give up leadership */
    void *ha_ctx;
    /* The disk tier (disk.h): enable_offload copies objects whose replicas lie on a node with a
     * disk to that disk as their puts finish (offload_on_evict: only when eviction picks them);
     * promotion_on_hit puts a disk object back into memory on its threshold-th read. */
    int enable_offload, offload_on_evict, promotion_on_hit;
    int64_t promotion_admission_threshold;
    /* The shared-filesystem tier (disk.h): objects are copied to files under
     * root_fs_dir/cluster_id, which every node reads itself; NULL or "": none. */
    const char *root_fs_dir;
    mc__kv_events_config_t kv_events; /* the KV-event publisher (kv_events.h) */
} mc__master_config_t;

void mc__master_config_defaults(mc__master_config_t *c);
/* Checks ranges; on error writes a one-line reason into err and returns MC_ERR_INVALID_PARAMS. */
int mc__master_config_validate(const mc__master_config_t *c, char *err, size_t cap);

typedef struct mc__master mc__master_t;

/* Creates the state and starts the RPC listener, the admin HTTP server, the optional HTTP
 * metadata server and the monitor thread. Prints nothing; see the *_port getters. */
int mc__master_start(const mc__master_config_t *cfg, mc__master_t **out);
void mc__master_stop(mc__master_t *m);
/* The state alone, with no thread, listener or log (tests and fuzzers drive it directly); freed
 * with mc__master_stop. */
int mc__master_new_offline(const mc__master_config_t *cfg, mc__master_t **out);
uint16_t mc__master_rpc_port(const mc__master_t *m);
uint16_t mc__master_metrics_port(const mc__master_t *m);
uint16_t mc__master_http_metadata_port(const mc__master_t *m); /* 0 when disabled */

/* Handles one decoded request, appending the reply frame to out. Returns 0, or a code when no
 * reply may be sent and the connection is to be closed: MC_ERR_MEMORY when the reply could not
 * be built, MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS when this master does not lead (HA) or its
 * changes could not be recorded. */
int mc__master_handle(mc__master_t *m, const mc__mp_request_t *req, mc_buf_t *out);
#endif
