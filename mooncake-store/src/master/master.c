/* Master lifecycle and configuration checks. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "master/disk.h"
#include "master/master_internal.h"
#include "master/persist.h"
#include "master/restore.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/cond.h"
#include "mooncake/common/http.h"
#include "mooncake/common/log.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"

void mc__master_config_defaults(mc__master_config_t *c) {
    memset(c, 0, sizeof(*c));
    c->rpc_address = "0.0.0.0";
    c->port = 50051;
    c->rpc_thread_num = 0; /* the reference's: min(max_threads, CPUs) */
    c->default_kv_lease_ttl_ms = 10000;
    c->default_kv_soft_pin_ttl_ms = 30 * 60 * 1000;
    c->max_kv_soft_pin_ttl_ms = 24 * 60 * 60 * 1000;
    c->allow_evict_soft_pinned_objects = 1;
    c->eviction_ratio = 0.05;
    c->eviction_high_watermark_ratio = 0.90;
    c->client_ttl_s = 10;
    c->put_start_discard_timeout_s = 30;
    c->put_start_release_timeout_s = 600;
    c->http_metadata_server_port = 8080;
    c->http_metadata_server_host = "0.0.0.0";
    c->metrics_port = 9003;
    /* Clients heartbeat every second, so only abandoned connections ever sit idle this long. */
    c->rpc_idle_timeout_s = 300;
    c->rpc_max_conns_per_peer = 1024;
    c->restore_metadata = 1;
    c->metadata_compact_bytes = 64ll << 20;
    c->max_finished_tasks = c->max_pending_tasks = c->max_processing_tasks = 10000;
    c->pending_task_timeout_s = c->processing_task_timeout_s = 300;
    c->enable_metric_reporting = 1;
    c->cluster_id = "mooncake_cluster";
    c->ha_lease_ttl_s = 5;
    c->promotion_admission_threshold = 2;
    mc__kv_events_config_defaults(&c->kv_events);
}

static int mc__bad(char *err, size_t cap, const char *what) {
    snprintf(err, cap, "%s", what);
    return MC_ERR_INVALID_PARAMS;
}

int mc__master_config_validate(const mc__master_config_t *c, char *err, size_t cap) {
    if (c->port < 0 || c->port > 65535)
        return mc__bad(err, cap, "--port must be in 0..65535");
    if (c->metrics_port < 0 || c->metrics_port > 65535)
        return mc__bad(err, cap, "--metrics_port must be in 0..65535");
    if (c->http_metadata_server_port < 0 || c->http_metadata_server_port > 65535)
        return mc__bad(err, cap, "--http_metadata_server_port must be in 0..65535");
    if (c->rpc_thread_num < 0 || c->rpc_thread_num > 1024)
        return mc__bad(err, cap, "--rpc_thread_num must be in 0..1024 (0: the default)");
    if (c->default_kv_lease_ttl_ms < 0)
        return mc__bad(err, cap, "--default_kv_lease_ttl must be >= 0 (milliseconds)");
    if (c->default_kv_soft_pin_ttl_ms < 0)
        return mc__bad(err, cap, "--default_kv_soft_pin_ttl must be >= 0 (milliseconds)");
    if (c->max_kv_soft_pin_ttl_ms < c->default_kv_soft_pin_ttl_ms)
        return mc__bad(err, cap, "--max_kv_soft_pin_ttl must be >= --default_kv_soft_pin_ttl");
    if (c->promotion_admission_threshold < 1 || c->promotion_admission_threshold > 1000000)
        return mc__bad(err, cap, "--promotion_admission_threshold must be in 1..1000000");
    if (!(c->eviction_ratio >= 0.0 && c->eviction_ratio <= 1.0))
        return mc__bad(err, cap, "--eviction_ratio must be in [0, 1]");
    if (!(c->eviction_high_watermark_ratio >= 0.0 && c->eviction_high_watermark_ratio <= 1.0))
        return mc__bad(err, cap, "--eviction_high_watermark_ratio must be in [0, 1]");
    if (c->client_ttl_s < 1)
        return mc__bad(err, cap, "--client_ttl must be >= 1 (seconds)");
    if (c->max_finished_tasks < 0 || c->max_finished_tasks > 10000000 || c->max_pending_tasks < 1 ||
        c->max_pending_tasks > 10000000 || c->max_processing_tasks < 1 ||
        c->max_processing_tasks > 10000000)
        return mc__bad(err, cap,
                       "--max_total_finished_tasks must be in 0..10000000 and "
                       "--max_total_pending_tasks, --max_total_processing_tasks in 1..10000000");
    if (c->metadata_compact_bytes < (1ll << 20))
        return mc__bad(err, cap, "--metadata_log_compact_bytes must be >= 1 MiB");
    if (c->pending_task_timeout_s < 0 || c->processing_task_timeout_s < 0)
        return mc__bad(err, cap, "task timeouts must be >= 0 (seconds; 0: none)");
    if (c->put_start_discard_timeout_s < 1)
        return mc__bad(err, cap, "--put_start_discard_timeout_sec must be >= 1");
    if (c->put_start_release_timeout_s < 1)
        return mc__bad(err, cap, "--put_start_release_timeout_sec must be >= 1");
    if (c->rpc_idle_timeout_s < 0 || c->rpc_idle_timeout_s > 86400)
        return mc__bad(err, cap, "--rpc_idle_timeout_sec must be in 0..86400 (0: never)");
    if (c->rpc_max_conns_per_peer < 0)
        return mc__bad(err, cap, "--rpc_max_conns_per_peer must be >= 0 (0: no limit)");
    if (c->enable_ha) {
        const char *a = c->rpc_address;
        if (!c->ha_etcd_endpoints || !*c->ha_etcd_endpoints)
            return mc__bad(err, cap,
                           "--enable_ha needs --etcd_endpoints (or --ha_backend_connstring)");
        if (!a || !*a || !strcmp(a, "0.0.0.0") || !strcmp(a, "::") || !strcmp(a, "[::]"))
            return mc__bad(err, cap,
                           "--enable_ha needs --rpc_address set to the address clients reach this "
                           "master at (it is published in the master view)");
        if (c->port == 0)
            return mc__bad(err, cap, "--enable_ha needs a fixed --port (it is published)");
        if (c->ha_lease_ttl_s < 1 || c->ha_lease_ttl_s > 3600)
            return mc__bad(err, cap, "--ha_lease_ttl_sec must be in 1..3600");
        if (!c->cluster_id || !*c->cluster_id || strlen(c->cluster_id) > 256)
            return mc__bad(err, cap, "--enable_ha needs a --cluster_id of 1..256 bytes");
    }
    return mc__kv_events_config_validate(&c->kv_events, err, cap);
}

uint16_t mc__master_rpc_port(const mc__master_t *m) {
    return mc__rpc_server_port(m->rpc);
}

uint16_t mc__master_metrics_port(const mc__master_t *m) {
    return mc__http_server_port(m->admin);
}

uint16_t mc__master_http_metadata_port(const mc__master_t *m) {
    return mc__meta_port(m);
}

int mc__master_new_offline(const mc__master_config_t *cfg, mc__master_t **out) {
    mc__master_t *m = NULL;
    int rc = 0;
    *out = NULL;
    m = mc__calloc(1, sizeof(*m));
    if (!m)
        return MC_ERR_MEMORY;
    m->cfg = *cfg;
    m->start_ms = mc__now_ms();
    pthread_rwlock_init(&m->placement, NULL);
    pthread_rwlock_init(&m->registry, NULL);
    pthread_mutex_init(&m->clients_mu, NULL);
    pthread_mutex_init(&m->grave_mu, NULL);
    pthread_mutex_init(&m->evict_mu, NULL);
    pthread_mutex_init(&m->mon_mu, NULL);
    pthread_cond_init(&m->mon_cv, NULL);
    pthread_mutex_init(&m->tasks_mu, NULL);
    for (int i = 0; i < MC__SHARDS && rc == 0; i++)
        rc = mc__shard_init(&m->shards[i]);
    if (rc == 0)
        rc = mc__disk_init(m);
    if (rc == 0)
        rc = mc__drain_init(m);
    atomic_store(&m->next_serial, 1);      /* 0 names no segment in the log */
    m->slot_dropped = mc__tasks_drop_slot; /* segments.c drops a slot; tasks forget it */
    if (rc) {
        mc__master_stop(m);
        return rc;
    }
    *out = m;
    return 0;
}

/* The metadata log reaches the state only through these: restore.c replays and dumps it. */
static const mc__persist_state_t mc__log_state = {
    .replay = mc__persist_replay, .replay_buf = mc__persist_replay_buf, .dump = mc__persist_dump};

static void mc__log_bind_failure(const char *what, const char *host, int64_t port) {
    MC_ERROR("master: cannot serve the %s port %s:%lld: %s", what, host && *host ? host : "0.0.0.0",
             (long long)port, errno ? strerror(errno) : "not available");
}

int mc__master_start(const mc__master_config_t *cfg, mc__master_t **out) {
    mc__master_t *m = NULL;
    int rc = mc__master_new_offline(cfg, &m);
    *out = NULL;
    if (rc)
        return rc;
    if (cfg->enable_ha && cfg->ha_term > 0) {
        char err[512];
        rc = mc__persist_open_ha(m, &mc__log_state, err, sizeof(err));
        if (rc) {
            MC_ERROR("master: HA metadata log (term %lld): %s", (long long)cfg->ha_term, err);
            goto out;
        }
    } else if (cfg->metadata_dir && *cfg->metadata_dir) {
        char err[512];
        rc = mc__persist_open(m, cfg->metadata_dir, cfg->restore_metadata, &mc__log_state, err,
                              sizeof(err));
        if (rc) {
            MC_ERROR("master: metadata log in %s: %s", cfg->metadata_dir, err);
            goto out;
        }
    }
    if (pthread_create(&m->monitor, NULL, mc__monitor_main, m) != 0) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    m->monitor_started = 1;
    /* after the log's replay: restored objects were announced by the master that stored them */
    rc = mc__kv_events_start(m, &cfg->kv_events);
    if (rc)
        goto out;
    rc = mc__auth_init(&m->auth, NULL, cfg->cluster_secret_file);
    if (rc)
        goto out;
    /* each bind failure names its port: "address in use" alone leaves an operator guessing */
    rc = mc__rpc_server_start(m, cfg->rpc_address, (uint16_t)cfg->port, &m->rpc);
    if (rc) {
        mc__log_bind_failure("rpc", cfg->rpc_address, cfg->port);
        goto out;
    }
    rc = mc__admin_http_start(m, (uint16_t)cfg->metrics_port);
    if (rc) {
        mc__log_bind_failure("admin/metrics (--metrics_port)",
                             cfg->metrics_address && *cfg->metrics_address ? cfg->metrics_address
                                                                           : cfg->rpc_address,
                             cfg->metrics_port);
        goto out;
    }
    if (cfg->enable_http_metadata_server) {
        rc = mc__meta_start(m);
        if (rc) {
            mc__log_bind_failure("HTTP metadata (--http_metadata_server_port)",
                                 cfg->http_metadata_server_host, cfg->http_metadata_server_port);
            goto out;
        }
    }
out:
    if (rc && m) {
        mc__master_stop(m);
        m = NULL;
    }
    *out = m;
    return rc;
}

void mc__master_stop(mc__master_t *m) {
    if (!m)
        return;
    /* Stop the doors first so no request runs while the state is torn down. */
    mc__rpc_server_stop(m->rpc);
    mc__http_server_stop(m->admin);
    mc__meta_stop(m);
    if (m->monitor_started) {
        mc__cond_raise(&m->mon_mu, &m->mon_cv, &m->stopping);
        pthread_join(m->monitor, NULL);
    }
    mc__drain_destroy(m); /* its thread makes tasks: joined before they go */
    /* The log is closed before the state is torn down: a stop is not a removal of everything. */
    mc__persist_close(m);
    /* nor is it for the routers */
    mc__kv_events_stop(m);
    mc__tasks_destroy(m);
    mc__disk_destroy(m);
    for (int i = 0; i < MC__SHARDS; i++)
        mc__shard_destroy(m, &m->shards[i]);
    mc__grave_destroy(m);
    mc__segments_destroy(m);
    pthread_rwlock_destroy(&m->placement);
    pthread_rwlock_destroy(&m->registry);
    pthread_mutex_destroy(&m->clients_mu);
    pthread_mutex_destroy(&m->grave_mu);
    pthread_mutex_destroy(&m->evict_mu);
    pthread_mutex_destroy(&m->tasks_mu);
    pthread_mutex_destroy(&m->mon_mu);
    pthread_cond_destroy(&m->mon_cv);
    mc__free(m);
}
