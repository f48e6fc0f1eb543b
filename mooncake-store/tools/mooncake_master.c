/* mooncake_master: the Store's metadata service. Flags as the reference's (gflags style), or the
 * same keys in a JSON file given by --config_path (command-line flags win over the file). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "master/master.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/config.h"
#include "mooncake/common/version.h"
#include "mooncake/error.h"

#define PROG "mooncake_master"
#define EXIT_USAGE 2

typedef struct mc__master_flags {
    mc__master_config_t cfg;
    const char *config_path;
    int enable_ha;
    const char *etcd_endpoints;
} mc__master_flags_t;

static size_t mc__master_flag_table(mc__master_flags_t *f, mc_flag_t *t) {
    mc__master_config_t *c = &f->cfg;
    size_t n = 0;
#define F(name, type, ptr, help) t[n++] = (mc_flag_t){name, type, ptr, help}
    F("port", MC_FLAG_INT, &c->port, "RPC port (0 = ephemeral)");
    F("rpc_address", MC_FLAG_STRING, &c->rpc_address, "address to bind the RPC and admin ports");
    F("rpc_thread_num", MC_FLAG_INT, &c->rpc_thread_num,
      "accepted for compatibility; every connection has its own thread");
    F("default_kv_lease_ttl", MC_FLAG_INT, &c->default_kv_lease_ttl_ms,
      "lease granted by a get, in milliseconds");
    F("default_kv_soft_pin_ttl", MC_FLAG_INT, &c->default_kv_soft_pin_ttl_ms,
      "soft pin duration, in milliseconds");
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
    F("metrics_address", MC_FLAG_STRING, &c->metrics_address,
      "address to bind the admin HTTP port (default: --rpc_address), e.g. 127.0.0.1 or a "
      "private network's address");
    F("enable_metric_reporting", MC_FLAG_BOOL, &c->enable_metric_reporting,
      "log a one-line summary to stderr every 10 s");
    F("rpc_idle_timeout_sec", MC_FLAG_INT, &c->rpc_idle_timeout_s,
      "close RPC connections idle this long (0: never); the longest idle one also gives its "
      "slot to a new client when all are taken");
    F("cluster_secret_file", MC_FLAG_STRING, &c->cluster_secret_file,
      "file holding the cluster secret every client must prove (default: MC_CLUSTER_SECRET or "
      "MC_CLUSTER_SECRET_FILE from the environment; none: no authentication)");
    F("rpc_max_conns_per_peer", MC_FLAG_INT, &c->rpc_max_conns_per_peer,
      "RPC connections one address may hold (0: no limit below the 4096 in all)");
    F("config_path", MC_FLAG_STRING, &f->config_path, "JSON file with any of these keys");
    F("enable_ha", MC_FLAG_BOOL, &f->enable_ha, "high availability (not supported)");
    F("etcd_endpoints", MC_FLAG_STRING, &f->etcd_endpoints, "etcd endpoints for HA (unused)");
#undef F
    return n;
}

/* Applies one JSON value to a flag; 0 or -1 with a message in err. */
static int mc__apply_json(const mc_flag_t *fl, const cJSON *v, char *err, size_t cap) {
    switch (fl->type) {
    case MC_FLAG_BOOL:
        if (cJSON_IsBool(v)) {
            *(int *)fl->value = cJSON_IsTrue(v);
            return 0;
        }
        if (cJSON_IsString(v) && mc__parse_bool(v->valuestring, (int *)fl->value) == 0)
            return 0;
        break;
    case MC_FLAG_INT:
        if (cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble) &&
            fabs(v->valuedouble) < 9e15) {
            *(int64_t *)fl->value = (int64_t)v->valuedouble;
            return 0;
        }
        if (cJSON_IsString(v) && mc__parse_i64(v->valuestring, (int64_t *)fl->value) == 0)
            return 0;
        break;
    case MC_FLAG_DOUBLE:
        if (cJSON_IsNumber(v)) {
            *(double *)fl->value = v->valuedouble;
            return 0;
        }
        if (cJSON_IsString(v) && mc__parse_double(v->valuestring, (double *)fl->value) == 0)
            return 0;
        break;
    case MC_FLAG_STRING:
        if (cJSON_IsString(v)) {
            *(const char **)fl->value = v->valuestring;
            return 0;
        }
        break;
    case MC_FLAG_SIZE:
        break;
    }
    snprintf(err, cap, "invalid value for '%s' in the config file", fl->name);
    return -1;
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
out:
    fclose(fp);
    return text;
}

/* Loads --config_path into the flag table; the cJSON tree stays alive for string values. */
static int mc__load_config(const char *path, const mc_flag_t *t, size_t n, cJSON **doc, char *err,
                           size_t cap) {
    char *text = mc__read_file(path, err, cap);
    const cJSON *it = NULL;
    if (!text)
        return -1;
    *doc = cJSON_Parse(text);
    mc__free(text);
    if (!*doc || !cJSON_IsObject(*doc)) {
        snprintf(err, cap, "config file '%s' is not a JSON object", path);
        return -1;
    }
    cJSON_ArrayForEach(it, *doc) {
        size_t i = 0;
        while (i < n && strcmp(t[i].name, it->string) != 0)
            i++;
        if (i == n || !strcmp(it->string, "config_path")) {
            snprintf(err, cap, "unknown key '%s' in config file '%s'", it->string, path);
            return -1;
        }
        if (mc__apply_json(&t[i], it, err, cap))
            return -1;
    }
    return 0;
}

static const char *mc__show_host(const char *h) {
    return h && *h ? h : "0.0.0.0";
}

int main(int argc, char **argv) {
    mc__master_flags_t f;
    mc_flag_t table[32];
    size_t n = 0;
    cJSON *doc = NULL;
    mc__master_t *m = NULL;
    char err[512];
    sigset_t sigs;
    int sig = 0;
    int rc = 0;
    int code = 0;
    memset(&f, 0, sizeof(f));
    mc__master_config_defaults(&f.cfg);
    n = mc__master_flag_table(&f, table);
    rc = mc__flags_parse(argc, argv, table, n, PROG, MC_VERSION_STRING,
                         "metadata service of the Mooncake Store");
    if (rc == 1 || rc == 2)
        return 0;
    if (rc < 0)
        return EXIT_USAGE;
    if (f.config_path && *f.config_path) {
        if (mc__load_config(f.config_path, table, n, &doc, err, sizeof(err))) {
            fprintf(stderr, "%s: %s\n", PROG, err);
            code = EXIT_USAGE;
            goto out;
        }
        /* Command-line flags override the file. */
        mc__flags_parse(argc, argv, table, n, PROG, MC_VERSION_STRING, NULL);
    }
    if (f.enable_ha) {
        fprintf(stderr, "%s: --enable_ha is not supported by this implementation\n", PROG);
        code = EXIT_USAGE;
        goto out;
    }
    if (mc__master_config_validate(&f.cfg, err, sizeof(err))) {
        fprintf(stderr, "%s: %s\n", PROG, err);
        code = EXIT_USAGE;
        goto out;
    }
    /* Signals are taken by sigwait below; every thread started after this inherits the mask. */
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    rc = mc__master_start(&f.cfg, &m);
    if (rc) {
        fprintf(stderr, "%s: cannot start (rpc port %lld, metrics port %lld%s): %s\n", PROG,
                (long long)f.cfg.port, (long long)f.cfg.metrics_port,
                f.cfg.enable_http_metadata_server ? ", http metadata port" : "",
                errno ? strerror(errno) : mc_store_strerror(rc));
        code = 1;
        goto out;
    }
    printf("%s listening on rpc %s:%u\n", PROG, mc__show_host(f.cfg.rpc_address),
           (unsigned)mc__master_rpc_port(m));
    printf("%s metrics on %s:%u\n", PROG,
           mc__show_host(f.cfg.metrics_address && *f.cfg.metrics_address ? f.cfg.metrics_address
                                                                         : f.cfg.rpc_address),
           (unsigned)mc__master_metrics_port(m));
    if (f.cfg.enable_http_metadata_server)
        printf("%s http metadata on %s:%u\n", PROG, mc__show_host(f.cfg.http_metadata_server_host),
               (unsigned)mc__master_http_metadata_port(m));
    fflush(stdout);
    while (sigwait(&sigs, &sig) != 0)
        ;
    fprintf(stderr, "%s: signal %d, shutting down\n", PROG, sig);
    mc__master_stop(m);
out:
    cJSON_Delete(doc);
    return code;
}
