/* mooncake_master's flags and config file (see master_flags.h). */
#include "master/master_flags.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <ifaddrs.h>
#include <math.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "master/disk.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/version.h"
#include "mooncake/common/yaml_flat.h"
#include "mooncake/error.h"

#define PROG "mooncake_master"

/* Flags of the reference's master that name features this one does not have. With feature set, a
 * true bool or a non-empty string would turn the feature on and is refused, naming it; the rest
 * are knobs of features that are off, accepted (and range-checked where the reference checks)
 * with no effect, as the reference itself ignores them while their feature is off. */
typedef struct mc__compat_flag {
    const char *name;
    enum mc_flag_type type;
    const char *def; /* the reference's default, as text */
    const char *feature;
} mc__compat_flag_t;

#define OFFLOAD "SSD offload (the disk tier)"
#define SNAP "snapshots of the master's metadata"
static const mc__compat_flag_t mc__compat[] = {
    /* HA replicates the metadata through its log in etcd (ha.h), not the reference's oplog:
     * its knobs have nothing to tune here. */
    {"enable_oplog", MC_FLAG_BOOL, "false", NULL},
    {"oplog_poll_interval_ms", MC_FLAG_INT, "1000", NULL},
    {"oplog_batch_max_entries", MC_FLAG_INT, "1024", NULL},
    {"batch_oplog_retry_timeout_sec", MC_FLAG_INT, "180", NULL},
    {"offload_force_evict", MC_FLAG_BOOL, "false", OFFLOAD},
    {"offloading_queue_limit", MC_FLAG_INT, "50000", NULL},
    {"offload_cap_ratio", MC_FLAG_DOUBLE, "0.5", NULL},
    {"promotion_queue_limit", MC_FLAG_INT, "50000", NULL},
    {"promotion_max_per_heartbeat", MC_FLAG_INT, "1", NULL},
    {"nof_eviction_ratio", MC_FLAG_DOUBLE, "0.05", NULL},
    {"nof_eviction_high_watermark_ratio", MC_FLAG_DOUBLE, "0.90", NULL},
    {"nof_heartbeat_interval_sec", MC_FLAG_INT, "10", NULL},
    {"nof_heartbeat_probe_timeout_ms", MC_FLAG_INT, "1000", NULL},
    {"nof_heartbeat_failures_threshold", MC_FLAG_INT, "3", NULL},
    {"enable_disk_eviction", MC_FLAG_BOOL, "true", NULL},
    {"quota_bytes", MC_FLAG_INT, "0", NULL},
    {"global_file_segment_size", MC_FLAG_INT, "9223372036854775807", NULL},
    {"dynamic_replication_mode", MC_FLAG_STRING, "off", NULL},
    {"dynamic_replication_heat_window_seconds", MC_FLAG_INT, "10", NULL},
    {"dynamic_replication_admission_qps_threshold", MC_FLAG_DOUBLE, "0.8", NULL},
    {"dynamic_replication_max_memory_replicas", MC_FLAG_INT, "2", NULL},
    {"enable_cxl", MC_FLAG_BOOL, "false", "CXL memory"},
    {"cxl_path", MC_FLAG_STRING, "/dev/dax0.0", NULL},
    {"cxl_size", MC_FLAG_INT, "8589934592", NULL},
    {"memory_allocator", MC_FLAG_STRING, "offset", NULL},
    {"allocation_strategy", MC_FLAG_STRING, "random", NULL},
    {"enable_metadata_cleanup_on_timeout", MC_FLAG_BOOL, "false",
     "HTTP metadata cleanup on client timeout"},
    {"pod_name", MC_FLAG_STRING, "", NULL},
    {"pod_namespace", MC_FLAG_STRING, "", NULL},
    {"enable_multi_tenants", MC_FLAG_BOOL, "false", "multi-tenant namespaces and quotas"},
    {"tenant_quota_connector_type", MC_FLAG_STRING, "file", NULL},
    {"tenant_quota_connector_uri", MC_FLAG_STRING, "", NULL},
    /* Supported through the metadata log (mc__master_opts_finish maps them onto it). */
    {"enable_snapshot", MC_FLAG_BOOL, "false", NULL},
    {"enable_snapshot_restore", MC_FLAG_BOOL, "false", NULL},
    {"snapshot_backup_dir", MC_FLAG_STRING, "", NULL},
    {"snapshot_interval_seconds", MC_FLAG_INT, "600", NULL},
    {"snapshot_child_timeout_seconds", MC_FLAG_INT, "300", NULL},
    {"snapshot_retention_count", MC_FLAG_INT, "2", NULL},
    {"snapshot_object_store_type", MC_FLAG_STRING, "", NULL},
    {"snapshot_payload_store_type", MC_FLAG_STRING, "", NULL},
    {"snapshot_payload_backend_type", MC_FLAG_STRING, "", NULL},
    {"snapshot_catalog_store_type", MC_FLAG_STRING, "", NULL},
    {"snapshot_catalog_backend_type", MC_FLAG_STRING, "", NULL},
    {"snapshot_catalog_store_connstring", MC_FLAG_STRING, "", NULL},
    {"snapshot_catalog_backend_connstring", MC_FLAG_STRING, "", NULL},
    /* The reference's task manager (master-driven copy / move tasks). */
    {"max_retry_attempts", MC_FLAG_INT, "10", NULL},
    /* The reference logs through glog; this master always logs to stderr. */
    {"log_dir", MC_FLAG_STRING, "", NULL},
    {"logtostderr", MC_FLAG_BOOL, "false", NULL},
    {"alsologtostderr", MC_FLAG_BOOL, "false", NULL},
    {"v", MC_FLAG_INT, "0", NULL},
    {"minloglevel", MC_FLAG_INT, "0", NULL},
    {"stderrthreshold", MC_FLAG_INT, "2", NULL},
    /* TCP_NODELAY is always set on RPC connections. */
    {"rpc_enable_tcp_no_delay", MC_FLAG_BOOL, "true", NULL},
};
#undef OFFLOAD
#undef SNAP
#define MC__N_COMPAT (sizeof(mc__compat) / sizeof(mc__compat[0]))

static void *mc__compat_ptr(mc__master_compat_val_t *v, enum mc_flag_type t) {
    switch (t) {
    case MC_FLAG_BOOL:
        return &v->b;
    case MC_FLAG_INT:
        return &v->i;
    case MC_FLAG_DOUBLE:
        return &v->d;
    default:
        return &v->s;
    }
}

static int mc__compat_parse(const mc__compat_flag_t *c, const char *text,
                            mc__master_compat_val_t *v) {
    mc_flag_t f = {c->name, c->type, mc__compat_ptr(v, c->type), NULL};
    return mc__flag_set(&f, text);
}

static int mc__compat_is_default(const mc__compat_flag_t *c, const mc__master_compat_val_t *v) {
    mc__master_compat_val_t d;
    memset(&d, 0, sizeof(d));
    mc__compat_parse(c, c->def, &d);
    switch (c->type) {
    case MC_FLAG_BOOL:
        return !v->b == !d.b;
    case MC_FLAG_INT:
        return v->i == d.i;
    case MC_FLAG_DOUBLE:
        return v->d == d.d;
    case MC_FLAG_STRING:
        return !strcmp(v->s ? v->s : "", d.s);
    default:
        return 1;
    }
}

/* The reference's snapshot flags that select the metadata log here (the rest are no-ops). */
static int mc__snapshot_flag(const char *name) {
    return !strcmp(name, "enable_snapshot") || !strcmp(name, "enable_snapshot_restore") ||
           !strcmp(name, "snapshot_backup_dir") || !strcmp(name, "snapshot_object_store_type");
}

void mc__master_opts_init(mc__master_opts_t *o) {
    mc__master_config_t *c = &o->cfg;
    size_t n = 0;
    memset(o, 0, sizeof(*o));
    mc__master_config_defaults(c);
    o->warn = stderr;
    o->max_threads = 16;
    o->default_kv_lease_ttl_ms = (uint64_t)c->default_kv_lease_ttl_ms;
    o->default_kv_soft_pin_ttl_ms = (uint64_t)c->default_kv_soft_pin_ttl_ms;
    o->max_kv_soft_pin_ttl_ms = (uint64_t)c->max_kv_soft_pin_ttl_ms;
    o->rpc_interface = "";
    o->ha_backend_type = "etcd";
    o->ha_backend_connstring = o->etcd_endpoints = "";
#define F(name, type, ptr, help) o->table[n++] = (mc_flag_t){name, type, ptr, help}
    F("rpc_port", MC_FLAG_INT, &o->rpc_port, "RPC port; 0 = use --port");
    F("port", MC_FLAG_INT, &c->port, "RPC port when --rpc_port is 0 (0 = ephemeral)");
    F("rpc_address", MC_FLAG_STRING, &c->rpc_address, "address to bind the RPC port");
    F("rpc_interface", MC_FLAG_STRING, &o->rpc_interface,
      "network interface whose IPv4 address replaces --rpc_address");
    F("rpc_thread_num", MC_FLAG_INT, &c->rpc_thread_num,
      "RPC threads (0 = --max_threads); accepted: every connection has its own thread");
    F("max_threads", MC_FLAG_INT, &o->max_threads,
      "RPC threads when --rpc_thread_num is 0 (capped at the CPU count)");
    F("rpc_conn_timeout_seconds", MC_FLAG_INT, &o->rpc_conn_timeout_seconds,
      "close RPC connections idle this long (0: --rpc_idle_timeout_sec)");
    F("rpc_idle_timeout_sec", MC_FLAG_INT, &c->rpc_idle_timeout_s,
      "close RPC connections idle this long (0: never); the longest idle one also gives its "
      "slot to a new client when all are taken");
    F("rpc_max_conns_per_peer", MC_FLAG_INT, &c->rpc_max_conns_per_peer,
      "RPC connections one address may hold (0: no limit below the 4096 in all)");
    F("default_kv_lease_ttl", MC_FLAG_DURATION_MS, &o->default_kv_lease_ttl_ms,
      "lease granted by a get (milliseconds, or with a unit: 10s, 500ms, 1m, 1h)");
    F("default_kv_soft_pin_ttl", MC_FLAG_DURATION_MS, &o->default_kv_soft_pin_ttl_ms,
      "soft pin duration (milliseconds, or with a unit)");
    F("max_kv_soft_pin_ttl", MC_FLAG_DURATION_MS, &o->max_kv_soft_pin_ttl_ms,
      "longest soft pin a put may ask for (milliseconds, or with a unit)");
    F("allow_evict_soft_pinned_objects", MC_FLAG_BOOL, &c->allow_evict_soft_pinned_objects,
      "evict soft-pinned objects (last) when nothing else is left");
    F("eviction_ratio", MC_FLAG_DOUBLE, &c->eviction_ratio,
      "fraction of capacity one eviction frees");
    F("eviction_high_watermark_ratio", MC_FLAG_DOUBLE, &c->eviction_high_watermark_ratio,
      "used/capacity ratio that starts background eviction");
    F("client_ttl", MC_FLAG_INT, &c->client_ttl_s,
      "seconds without heartbeat after which a client's segments are unmounted");
    F("put_start_discard_timeout_sec", MC_FLAG_INT, &c->put_start_discard_timeout_s,
      "seconds after which an unfinished put is discarded");
    F("put_start_release_timeout_sec", MC_FLAG_INT, &c->put_start_release_timeout_s,
      "seconds after put start at which a discarded put's space is reused");
    F("enable_http_metadata_server", MC_FLAG_BOOL, &c->enable_http_metadata_server,
      "serve the Transfer Engine's HTTP metadata (/metadata?key=) from this process");
    F("http_metadata_server_port", MC_FLAG_INT, &c->http_metadata_server_port,
      "port of the HTTP metadata server (0 = ephemeral)");
    F("http_metadata_server_host", MC_FLAG_STRING, &c->http_metadata_server_host,
      "address of the HTTP metadata server");
    F("metrics_port", MC_FLAG_INT, &c->metrics_port,
      "admin HTTP port: /metrics, /health, /query_key, ... (0 = ephemeral)");
    F("metrics_host", MC_FLAG_STRING, &c->metrics_address,
      "address to bind the admin HTTP port (default: --rpc_address)");
    F("metrics_address", MC_FLAG_STRING, &c->metrics_address, "the same as --metrics_host");
    F("enable_metric_reporting", MC_FLAG_BOOL, &c->enable_metric_reporting,
      "log a one-line summary to stderr every 10 s");
    F("cluster_id", MC_FLAG_STRING, &c->cluster_id,
      "name of this cluster: with --enable_ha, its keys in etcd (mooncake-store/<id>/...); with "
      "--root_fs_dir, its subdirectory there");
    F("enable_ha", MC_FLAG_BOOL, &c->enable_ha,
      "high availability: campaign for leadership in etcd, keep the metadata log there");
    F("ha_backend_type", MC_FLAG_STRING, &o->ha_backend_type, "HA backend: etcd (the only one)");
    F("ha_backend_connstring", MC_FLAG_STRING, &o->ha_backend_connstring,
      "HA backend endpoints (etcd: h1:2379,h2:2379); unset: --etcd_endpoints");
    F("etcd_endpoints", MC_FLAG_STRING, &o->etcd_endpoints,
      "etcd endpoints for HA, separated by ';' or ','");
    F("ha_lease_ttl_sec", MC_FLAG_INT, &c->ha_lease_ttl_s,
      "the leader's lease in etcd (seconds): a failover takes about this long");
    F("cluster_secret_file", MC_FLAG_STRING, &c->cluster_secret_file,
      "file holding the cluster secret every client must prove (default: MC_CLUSTER_SECRET or "
      "MC_CLUSTER_SECRET_FILE from the environment; none: no authentication)");
    F("max_total_finished_tasks", MC_FLAG_INT, &c->max_finished_tasks,
      "finished replica tasks kept for query_task");
    F("max_total_pending_tasks", MC_FLAG_INT, &c->max_pending_tasks,
      "replica tasks waiting for their client at most (more: TASK_PENDING_LIMIT_EXCEEDED)");
    F("max_total_processing_tasks", MC_FLAG_INT, &c->max_processing_tasks,
      "replica tasks running at once at most (the rest wait)");
    F("pending_task_timeout_sec", MC_FLAG_INT, &c->pending_task_timeout_s,
      "a replica task its client has not taken by then fails (0: never)");
    F("processing_task_timeout_sec", MC_FLAG_INT, &c->processing_task_timeout_s,
      "a replica task its client has not reported by then fails (0: never)");
    F("metadata_dir", MC_FLAG_STRING, &c->metadata_dir,
      "directory of the metadata log: every acknowledged change is on disk before its reply, so "
      "a restart (even after kill -9) restores every object (default: memory only; the "
      "reference's --enable_snapshot --snapshot_backup_dir=DIR selects it too)");
    F("metadata_log_compact_bytes", MC_FLAG_SIZE, &c->metadata_compact_bytes,
      "the metadata log is rewritten from the state when it grows past this (and 4x its size "
      "after the last rewrite); sizes as 64mb");
    F("enable_offload", MC_FLAG_BOOL, &c->enable_offload,
      "the disk tier: objects whose replicas lie on a storage node with a disk directory "
      "(mooncake_client --root_fs_dir) are copied to that disk, and stay readable from it once "
      "evicted from memory");
    F("offload_on_evict", MC_FLAG_BOOL, &c->offload_on_evict,
      "with --enable_offload, copy an object to disk only when eviction picks it (it leaves "
      "memory once the copy is durable) instead of as its put finishes");
    F("promotion_on_hit", MC_FLAG_BOOL, &c->promotion_on_hit,
      "put an object read from the disk tier back into memory");
    F("promotion_admission_threshold", MC_FLAG_INT, &c->promotion_admission_threshold,
      "reads from disk before a promotion (--promotion_on_hit)");
    F("root_fs_dir", MC_FLAG_STRING, &c->root_fs_dir,
      "the shared-filesystem tier: an existing directory every node mounts; each object is "
      "copied to a file under DIR/<cluster_id> that any client reads, and stays readable from "
      "it once evicted from memory");
    F("restore_metadata", MC_FLAG_BOOL, &c->restore_metadata,
      "with --metadata_dir, restore the log's objects at start (false: start empty)");
    F("enable_kv_events", MC_FLAG_BOOL, &c->kv_events.enabled,
      "publish KV cache events (stored, removed, evicted, offloaded) over ZeroMQ PUB for "
      "cache-aware routers (docs/kv-events.md)");
    F("kv_events_bind_endpoint", MC_FLAG_STRING, &c->kv_events.bind_endpoint,
      "PUB endpoint of the KV events, e.g. tcp://0.0.0.0:5557");
    F("kv_events_replay_endpoint", MC_FLAG_STRING, &c->kv_events.replay_endpoint,
      "ROUTER endpoint serving missed batches by sequence number (vLLM's replay protocol; "
      "empty: none)");
    F("kv_events_replay_buffer_steps", MC_FLAG_INT, &c->kv_events.replay_buffer_steps,
      "batches kept for replay");
    F("kv_events_model_name", MC_FLAG_STRING, &c->kv_events.model_name,
      "deprecated, as in the reference: not sent (the indexer's /register supplies it)");
    F("kv_events_backend_id", MC_FLAG_STRING, &c->kv_events.backend_id,
      "backend_id on every event (the cache owner's identity); required with the events");
    F("kv_events_tenant_id", MC_FLAG_STRING, &c->kv_events.tenant_id,
      "tenant_id on every event (this master has one tenant)");
    F("kv_events_additional_salt", MC_FLAG_STRING, &c->kv_events.additional_salt,
      "deprecated, as in the reference: not sent");
    F("kv_events_lora_name", MC_FLAG_STRING, &c->kv_events.lora_name,
      "deprecated, as in the reference: not sent");
    F("kv_events_block_size", MC_FLAG_INT, &c->kv_events.block_size,
      "deprecated, as in the reference: not sent");
    F("kv_events_dp_rank", MC_FLAG_INT, &c->kv_events.dp_rank,
      "deprecated, as in the reference: not sent");
    F("kv_events_emit_legacy_compat", MC_FLAG_BOOL, &c->kv_events.emit_legacy_compat,
      "also send vLLM's and SGLang's field names (type, block_hashes, parent_block_hash)");
    F("kv_events_emit_object_key", MC_FLAG_BOOL, &c->kv_events.emit_object_key,
      "send the object key on every event");
    F("kv_events_queue_capacity", MC_FLAG_INT, &c->kv_events.queue_capacity,
      "pending events at most; the oldest are dropped (counted) when full (0: unbounded)");
    F("config_path", MC_FLAG_STRING, &o->config_path,
      "config file (JSON, or YAML when it ends in .yaml / .yml) with any of these keys");
#undef F
    for (size_t k = 0; k < MC__N_COMPAT; k++) {
        const mc__compat_flag_t *cf = &mc__compat[k];
        mc__compat_parse(cf, cf->def, &o->compat[k]);
        if (cf->feature)
            snprintf(o->help_[k], sizeof(o->help_[k]), "not supported: %s; refused when on",
                     cf->feature);
        else if (mc__snapshot_flag(cf->name))
            snprintf(o->help_[k], sizeof(o->help_[k]),
                     "the reference's snapshots: here the metadata log (see --metadata_dir)");
        else
            snprintf(o->help_[k], sizeof(o->help_[k]), "accepted, no effect here");
        o->table[n++] =
            (mc_flag_t){cf->name, cf->type, mc__compat_ptr(&o->compat[k], cf->type), o->help_[k]};
    }
    o->n = n;
}

void mc__master_opts_free(mc__master_opts_t *o) {
    cJSON_Delete(o->doc_);
    o->doc_ = NULL;
    mc__free(o->text_);
    o->text_ = NULL;
}

/* --- config files --- */

/* The file names the reference's config files use where they differ from the flag's. */
static const char *mc__file_alias(const char *key) {
    if (!strcmp(key, "client_live_ttl_sec"))
        return "client_ttl";
    return key;
}

static const mc_flag_t *mc__find(const mc__master_opts_t *o, const char *key) {
    key = mc__file_alias(key);
    for (size_t i = 0; i < o->n; i++)
        if (!strcmp(o->table[i].name, key))
            return &o->table[i];
    return NULL;
}

static void mc__note_unknown(const mc__master_opts_t *o, const char *path, const char *key,
                             int line) {
    if (!o->warn)
        return;
    if (line > 0)
        fprintf(o->warn, "%s: warning: %s:%d: unknown key '%s' ignored\n", PROG, path, line, key);
    else
        fprintf(o->warn, "%s: warning: %s: unknown key '%s' ignored\n", PROG, path, key);
}

/* Applies one JSON value to a flag; 0 or -1 with a message in err. A string is read as the
 * command line reads the flag's value (docs/master.md: "10s", "yes", "50051"). */
static int mc__apply_json(const mc_flag_t *fl, const cJSON *v, const char *key, char *err,
                          size_t cap) {
    double d = v->valuedouble;
    int whole = cJSON_IsNumber(v) && d == floor(d) && fabs(d) < 9e15;
    if (cJSON_IsString(v)) {
        if (mc__flag_set(fl, v->valuestring) == 0)
            return 0;
    } else if (fl->type == MC_FLAG_BOOL && cJSON_IsBool(v)) {
        *(int *)fl->value = cJSON_IsTrue(v);
        return 0;
    } else if (fl->type == MC_FLAG_INT && whole) {
        *(int64_t *)fl->value = (int64_t)d;
        return 0;
    } else if (fl->type == MC_FLAG_DOUBLE && cJSON_IsNumber(v)) {
        *(double *)fl->value = d;
        return 0;
    } else if (fl->type == MC_FLAG_DURATION_MS && whole && d >= 0) {
        /* A number is milliseconds, a string may carry a unit (as the reference reads them). */
        *(uint64_t *)fl->value = (uint64_t)d;
        return 0;
    }
    snprintf(err, cap, "invalid value for '%s' in the config file (expected %s)", key,
             fl->type == MC_FLAG_BOOL     ? "true or false"
             : fl->type == MC_FLAG_STRING ? "a string"
             : fl->type == MC_FLAG_DURATION_MS
                 ? "milliseconds, or a string with a unit: \"10s\", \"500ms\""
                 : "a number");
    return -1;
}

static int mc__load_json(mc__master_opts_t *o, const char *path, char *text, char *err,
                         size_t cap) {
    cJSON *doc = cJSON_Parse(text);
    const cJSON *it = NULL;
    if (!doc || !cJSON_IsObject(doc)) {
        cJSON_Delete(doc);
        snprintf(err, cap, "config file '%s' is not a JSON object", path);
        return -1;
    }
    o->doc_ = doc;
    cJSON_ArrayForEach(it, doc) {
        const mc_flag_t *fl = NULL;
        fl = mc__find(o, it->string);
        if (!fl || !strcmp(it->string, "config_path")) {
            mc__note_unknown(o, path, it->string, 0);
            continue;
        }
        if (cJSON_IsObject(it) || cJSON_IsArray(it)) {
            snprintf(err, cap, "'%s' in the config file must be a single value", it->string);
            return -1;
        }
        if (mc__apply_json(fl, it, it->string, err, cap))
            return -1;
    }
    return 0;
}

typedef struct mc__yaml_ctx {
    mc__master_opts_t *o;
    const char *path;
    char *err;
    size_t cap;
} mc__yaml_ctx_t;

static int mc__yaml_pair(void *arg, const mc__yaml_pair_t *p) {
    mc__yaml_ctx_t *y = arg;
    const mc_flag_t *fl = mc__find(y->o, p->key);
    if (!fl || !strcmp(p->key, "config_path")) {
        mc__note_unknown(y->o, y->path, p->key, p->line);
        return 0;
    }
    if (!p->quoted && p->value[0] == '\0' && fl->type != MC_FLAG_STRING) {
        snprintf(y->err, y->cap, "%s:%d: '%s' has no value", y->path, p->line, p->key);
        return MC_ERR_INVALID_ARGUMENT;
    }
    if (mc__flag_set(fl, p->value) != 0) {
        snprintf(y->err, y->cap, "%s:%d: invalid value '%s' for '%s'", y->path, p->line, p->value,
                 p->key);
        return MC_ERR_INVALID_ARGUMENT;
    }
    return 0;
}

static char *mc__read_file(const char *path, char *err, size_t cap) {
    FILE *fp = fopen(path, "rb");
    char *text = NULL;
    long len = 0;
    if (!fp) {
        snprintf(err, cap, "cannot read config file '%s': %s", path, strerror(errno));
        return NULL;
    }
    if (fseek(fp, 0, SEEK_END) != 0 || (len = ftell(fp)) < 0 || len > (16l << 20) ||
        fseek(fp, 0, SEEK_SET) != 0) {
        snprintf(err, cap, "cannot read config file '%s' (not a regular file below 16 MiB)", path);
        goto out;
    }
    text = mc__malloc((size_t)len + 1);
    if (!text || fread(text, 1, (size_t)len, fp) != (size_t)len) {
        snprintf(err, cap, "cannot read config file '%s'", path);
        mc__free(text);
        text = NULL;
        goto out;
    }
    text[len] = '\0';
    if (strlen(text) != (size_t)len) {
        snprintf(err, cap, "config file '%s' holds a NUL byte", path);
        mc__free(text);
        text = NULL;
    }
out:
    fclose(fp);
    return text;
}

static int mc__ends_with(const char *s, const char *tail) {
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && !strcmp(s + a - b, tail);
}

int mc__master_opts_load_file(mc__master_opts_t *o, const char *path, char *err, size_t cap) {
    char *text = NULL;
    int rc = 0;
    mc__master_opts_free(o);
    text = mc__read_file(path, err, cap);
    if (!text)
        return MC_ERR_INVALID_ARGUMENT;
    if (mc__ends_with(path, ".yaml") || mc__ends_with(path, ".yml")) {
        mc__yaml_ctx_t y = {o, path, err, cap};
        char why[200];
        o->text_ = text; /* string values point into it */
        err[0] = '\0';
        rc = mc__yaml_flat_parse(text, mc__yaml_pair, &y, why, sizeof(why));
        if (rc && !err[0])
            snprintf(err, cap, "config file '%s' is not YAML this master reads: %s", path, why);
        return rc ? MC_ERR_INVALID_ARGUMENT : 0;
    }
    rc = mc__load_json(o, path, text, err, cap);
    mc__free(text);
    return rc ? MC_ERR_INVALID_ARGUMENT : 0;
}

/* --- resolving and checking --- */

static mc__master_compat_val_t *mc__cv(mc__master_opts_t *o, const char *name) {
    for (size_t k = 0; k < MC__N_COMPAT; k++)
        if (!strcmp(mc__compat[k].name, name))
            return &o->compat[k];
    abort(); /* a name missing from the table is a bug here, not input */
}

static int mc__fail(char *err, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int mc__fail(char *err, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return MC_ERR_INVALID_ARGUMENT;
}

static int mc__one_of(const char *v, const char *const *set) {
    for (; *set; set++)
        if (!strcmp(v, *set))
            return 1;
    return 0;
}

/* The reference's own checks of the knobs it reads even while their feature is off, and the
 * values of string settings that name a feature. */
static int mc__check_compat(mc__master_opts_t *o, char *err, size_t cap) {
    static const char *const ratios[] = {"nof_eviction_ratio", "nof_eviction_high_watermark_ratio",
                                         "offload_cap_ratio"};
    static const char *const strategies[] = {"random", "free_ratio_first", "local_first", NULL};
    const char *mode = mc__cv(o, "dynamic_replication_mode")->s;
    const char *alloc = mc__cv(o, "memory_allocator")->s;
    const char *strategy = mc__cv(o, "allocation_strategy")->s;
    int64_t queue = mc__cv(o, "offloading_queue_limit")->i;
    for (size_t k = 0; k < MC__N_COMPAT; k++) {
        const mc__compat_flag_t *c = &mc__compat[k];
        const mc__master_compat_val_t *v = &o->compat[k];
        if (c->feature &&
            ((c->type == MC_FLAG_BOOL && v->b) || (c->type == MC_FLAG_STRING && v->s && v->s[0])))
            return mc__fail(err, cap, "--%s: %s: not supported by this master", c->name,
                            c->feature);
        if (c->type == MC_FLAG_INT && v->i < 0)
            return mc__fail(err, cap, "--%s must be >= 0", c->name);
    }
    for (size_t i = 0; i < sizeof(ratios) / sizeof(ratios[0]); i++) {
        double r = mc__cv(o, ratios[i])->d;
        if (!(r >= 0.0 && r <= 1.0))
            return mc__fail(err, cap, "--%s must be in [0, 1]", ratios[i]);
    }
    if (queue < 1 || queue > 100000000)
        return mc__fail(err, cap, "--offloading_queue_limit must be in 1..100000000");
    if (!(mc__cv(o, "dynamic_replication_admission_qps_threshold")->d > 0.0))
        return mc__fail(err, cap, "--dynamic_replication_admission_qps_threshold must be > 0");
    if (!strcmp(mode, "observe") || !strcmp(mode, "enforce"))
        return mc__fail(err, cap,
                        "--dynamic_replication_mode=%s: dynamic replication is not supported by "
                        "this master",
                        mode);
    if (strcmp(mode, "off") != 0)
        return mc__fail(err, cap,
                        "--dynamic_replication_mode must be one of off, observe, "
                        "enforce (got '%s')",
                        mode);
    if (!strcmp(alloc, "cachelib"))
        return mc__fail(err, cap,
                        "--memory_allocator=cachelib: the cachelib allocator is not supported by "
                        "this master (it has the offset allocator)");
    if (strcmp(alloc, "offset") != 0)
        return mc__fail(err, cap, "--memory_allocator must be cachelib or offset (got '%s')",
                        alloc);
    if (!strcmp(strategy, "cxl"))
        return mc__fail(err, cap,
                        "--allocation_strategy=cxl: CXL memory is not supported by this "
                        "master");
    if (!strcmp(strategy, "ssd_free_ratio_first"))
        return mc__fail(err, cap,
                        "--allocation_strategy=ssd_free_ratio_first: SSD segments (the disk "
                        "tier) are not supported by this master");
    if (!mc__one_of(strategy, strategies))
        return mc__fail(err, cap,
                        "--allocation_strategy must be one of random, free_ratio_first, cxl, "
                        "ssd_free_ratio_first, local_first (got '%s')",
                        strategy);
    return 0;
}

/* Notes every no-effect flag set away from its default, so that nobody believes it works. */
static void mc__note_no_effect(const mc__master_opts_t *o) {
    if (!o->warn)
        return;
    for (size_t k = 0; k < MC__N_COMPAT; k++)
        if (!mc__compat[k].feature && !mc__compat_is_default(&mc__compat[k], &o->compat[k]) &&
            !mc__snapshot_flag(mc__compat[k].name))
            fprintf(o->warn, "%s: note: --%s has no effect here (docs/master.md)\n", PROG,
                    mc__compat[k].name);
}

/* The first IPv4 address of interface name into out. */
static int mc__iface_ipv4(const char *name, char *out, size_t cap) {
    struct ifaddrs *all = NULL;
    int rc = -1;
    if (getifaddrs(&all) != 0)
        return -1;
    for (struct ifaddrs *a = all; a; a = a->ifa_next) {
        if (a->ifa_addr && a->ifa_addr->sa_family == AF_INET && !strcmp(a->ifa_name, name)) {
            const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)a->ifa_addr;
            if (inet_ntop(AF_INET, &in->sin_addr, out, (socklen_t)cap))
                rc = 0;
            break;
        }
    }
    freeifaddrs(all);
    return rc;
}

int mc__master_opts_finish(mc__master_opts_t *o, char *err, size_t cap) {
    mc__master_config_t *c = &o->cfg;
    int rc = mc__check_compat(o, err, cap);
    if (rc)
        return rc;
    if (o->rpc_port < 0 || o->rpc_port > 65535)
        return mc__fail(err, cap, "--rpc_port must be in 0..65535 (0: use --port)");
    if (o->rpc_port > 0)
        c->port = o->rpc_port;
    if (c->rpc_thread_num < 0 || c->rpc_thread_num > 1024)
        return mc__fail(err, cap, "--rpc_thread_num must be in 0..1024 (0: use --max_threads)");
    if (o->max_threads < 1 || o->max_threads > 1024)
        return mc__fail(err, cap, "--max_threads must be in 1..1024");
    if (c->rpc_thread_num == 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        c->rpc_thread_num = cpus > 0 && cpus < o->max_threads ? cpus : o->max_threads;
    }
    if (o->rpc_conn_timeout_seconds < 0 || o->rpc_conn_timeout_seconds > 86400)
        return mc__fail(err, cap, "--rpc_conn_timeout_seconds must be in 0..86400");
    if (o->rpc_conn_timeout_seconds > 0)
        c->rpc_idle_timeout_s = o->rpc_conn_timeout_seconds;
    if (o->rpc_interface && o->rpc_interface[0]) {
        if (mc__iface_ipv4(o->rpc_interface, o->rpc_interface_addr,
                           sizeof(o->rpc_interface_addr)) != 0)
            return mc__fail(err, cap,
                            "--rpc_interface=%s: no such interface with an IPv4 "
                            "address",
                            o->rpc_interface);
        c->rpc_address = o->rpc_interface_addr;
    }
    /* Durations are unsigned; the config keeps them signed, so the largest ones are refused. */
    if (o->default_kv_lease_ttl_ms > INT64_MAX / 2 ||
        o->default_kv_soft_pin_ttl_ms > INT64_MAX / 2 || o->max_kv_soft_pin_ttl_ms > INT64_MAX / 2)
        return mc__fail(err, cap, "a TTL is too large");
    c->default_kv_lease_ttl_ms = (int64_t)o->default_kv_lease_ttl_ms;
    c->default_kv_soft_pin_ttl_ms = (int64_t)o->default_kv_soft_pin_ttl_ms;
    c->max_kv_soft_pin_ttl_ms = (int64_t)o->max_kv_soft_pin_ttl_ms;
    /* The reference's snapshots: ours is a log that is never behind (docs/master.md). */
    /* With HA the log is in etcd, and a new leader always restores from it: the snapshot flags
     * of a reference HA deployment have nothing left to select. */
    if (c->enable_ha && o->warn &&
        (mc__cv(o, "enable_snapshot")->b || mc__cv(o, "enable_snapshot_restore")->b))
        fprintf(o->warn,
                "%s: note: --enable_snapshot has no effect with --enable_ha (the metadata log "
                "is in etcd)\n",
                PROG);
    else if (mc__cv(o, "enable_snapshot")->b || mc__cv(o, "enable_snapshot_restore")->b) {
        const char *dir = mc__cv(o, "snapshot_backup_dir")->s;
        const char *store = mc__cv(o, "snapshot_object_store_type")->s;
        if (store && store[0] && strcmp(store, "local") != 0)
            return mc__fail(err, cap,
                            "--snapshot_object_store_type=%s: only local snapshots (the metadata "
                            "log in --snapshot_backup_dir) are supported by this master",
                            store);
        if (!(c->metadata_dir && c->metadata_dir[0])) {
            if (!dir || !dir[0])
                return mc__fail(err, cap,
                                "--enable_snapshot%s needs --snapshot_backup_dir (or "
                                "--metadata_dir): this master keeps its metadata log on local disk",
                                mc__cv(o, "enable_snapshot")->b ? "" : "_restore");
            c->metadata_dir = dir;
            c->restore_metadata = mc__cv(o, "enable_snapshot_restore")->b;
        }
    }
    if (c->enable_ha) {
        if (strcmp(o->ha_backend_type, "etcd") != 0)
            return mc__fail(err, cap, "--ha_backend_type=%s: only etcd is supported by this master",
                            o->ha_backend_type);
        c->ha_etcd_endpoints =
            o->ha_backend_connstring[0] ? o->ha_backend_connstring : o->etcd_endpoints;
        if (c->metadata_dir && c->metadata_dir[0])
            return mc__fail(err, cap,
                            "--enable_ha keeps the metadata log in etcd: leave out "
                            "--metadata_dir / --snapshot_backup_dir");
    } else if (o->warn && (o->etcd_endpoints[0] || o->ha_backend_connstring[0])) {
        fprintf(o->warn, "%s: note: --%s has no effect while HA is off\n", PROG,
                o->etcd_endpoints[0] ? "etcd_endpoints" : "ha_backend_connstring");
    }
    rc = mc__master_config_validate(c, err, cap);
    if (rc == 0)
        rc = mc__disk_root_check(c->root_fs_dir, c->cluster_id, err, cap);
    if (rc)
        return MC_ERR_INVALID_ARGUMENT;
    mc__note_no_effect(o);
    return 0;
}

int mc__master_opts_load(mc__master_opts_t *o, int argc, char **argv) {
    char err[512];
    int rc = mc__flags_parse(argc, argv, o->table, o->n, PROG, MC_VERSION_STRING,
                             "metadata service of the Mooncake Store");
    if (rc == 1 || rc == 2)
        return 1;
    if (rc < 0)
        return 2;
    err[0] = '\0';
    if (o->config_path && *o->config_path) {
        const char *path = o->config_path;
        if (mc__master_opts_load_file(o, path, err, sizeof(err)) != 0) {
            fprintf(stderr, "%s: %s\n", PROG, err);
            return 2;
        }
        /* Command-line flags win over the file. */
        mc__flags_parse(argc, argv, o->table, o->n, PROG, MC_VERSION_STRING, NULL);
    }
    if (mc__master_opts_finish(o, err, sizeof(err)) != 0) {
        fprintf(stderr, "%s: %s\n", PROG, err);
        return 2;
    }
    return 0;
}
