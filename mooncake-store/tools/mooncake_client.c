/* mooncake_client: a storage node. A store client that contributes its global segment to the
 * pool and stays up, serving the dummy clients of this host (mc_store_setup_dummy,
 * MooncakeDistributedStore.setup_dummy) over its control socket, with an optional HTTP server
 * for /health and /metrics. Flags as the reference's (gflags style); SIGTERM or SIGINT unmounts
 * the segment and exits 0. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/store_disk.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/config.h"
#include "mooncake/common/frame.h"
#include "mooncake/common/http.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/version.h"
#include "mooncake/error.h"
#include "mooncake/store.h"
#include "node/node_server.h"
#include "proto/node_proto.h"

#define PROG "mooncake_client"
#define EXIT_USAGE 2

typedef struct mc__client_flags {
    const char *host;
    const char *metadata_server;
    const char *device_names;
    const char *device_name;
    const char *master_server_address;
    const char *protocol;
    int64_t port;
    uint64_t global_segment_size;
    uint64_t local_buffer_size;
    int64_t threads;
    const char *tenant_id;
    int enable_offload;
    int start_offload_rpc_server;
    int enable_http_server;
    int64_t http_port;
    const char *http_host;
    const char *cluster_secret_file;
    int64_t max_dummy_clients;
    const char *root_fs_dir;
    uint64_t disk_capacity;
    int64_t disk_port;
    const char *disk_host;
    int disk_sync;
} mc__client_flags_t;

static size_t mc__client_flag_table(mc__client_flags_t *f, mc_flag_t *t) {
    size_t n = 0;
#define F(name, type, ptr, help) t[n++] = (mc_flag_t){name, type, ptr, help}
    F("host", MC_FLAG_STRING, &f->host,
      "local hostname or IP the segment is served under (0.0.0.0: this host's IP)");
    F("metadata_server", MC_FLAG_STRING, &f->metadata_server,
      "Transfer Engine metadata: P2PHANDSHAKE or http://host:port/metadata");
    F("device_names", MC_FLAG_STRING, &f->device_names, "RDMA devices (unused by tcp)");
    F("device_name", MC_FLAG_STRING, &f->device_name, "alias of --device_names");
    F("master_server_address", MC_FLAG_STRING, &f->master_server_address,
      "mooncake_master's host:port");
    F("protocol", MC_FLAG_STRING, &f->protocol, "transfer protocol: tcp, shm, auto, rdma");
    F("port", MC_FLAG_INT, &f->port,
      "service port: dummy clients name it in setup_dummy(..., \"host:port\"); the node listens "
      "on the unix socket @mooncake_client_<port>.sock and on TCP --host:port");
    F("global_segment_size", MC_FLAG_SIZE, &f->global_segment_size,
      "memory contributed to the pool, e.g. 4gb, \"4 GB\", 512MB");
    F("local_buffer_size", MC_FLAG_SIZE, &f->local_buffer_size,
      "the node's own staging buffer (dummy clients bring theirs), e.g. 0, 16MB");
    F("threads", MC_FLAG_INT, &f->threads,
      "accepted for compatibility; every dummy client is served by a thread of its own");
    F("tenant_id", MC_FLAG_STRING, &f->tenant_id, "tenant identifier (only 'default')");
    F("enable_offload", MC_FLAG_BOOL, &f->enable_offload,
      "the disk tier in --root_fs_dir, or else in MOONCAKE_OFFLOAD_FILE_STORAGE_PATH (where the "
      "reference's node reads it); --root_fs_dir turns it on by itself");
    F("start_offload_rpc_server", MC_FLAG_BOOL, &f->start_offload_rpc_server,
      "accepted for compatibility (the disk tier always serves its reads)");
    F("root_fs_dir", MC_FLAG_STRING, &f->root_fs_dir,
      "directory of this node's disk tier: objects evicted from memory (with the master's "
      "--enable_offload) stay readable from here, and survive a restart of the node");
    F("disk_capacity", MC_FLAG_SIZE, &f->disk_capacity,
      "disk bytes the tier may take, e.g. 64gb (default: MOONCAKE_OFFLOAD_BUCKET_MAX_TOTAL_SIZE, "
      "else 4gb); the least recently used objects make room");
    F("disk_port", MC_FLAG_INT, &f->disk_port,
      "port of the disk tier's read server, which readers reach (0 = ephemeral)");
    F("disk_host", MC_FLAG_STRING, &f->disk_host,
      "address readers reach the disk tier at (default: the segment's host)");
    F("disk_sync", MC_FLAG_BOOL, &f->disk_sync,
      "fdatasync every disk write before it counts (false only for scratch disks)");
    F("enable_http_server", MC_FLAG_BOOL, &f->enable_http_server,
      "serve /health and /metrics over HTTP");
    F("http_port", MC_FLAG_INT, &f->http_port, "HTTP port (0 = ephemeral)");
    F("http_host", MC_FLAG_STRING, &f->http_host, "address the HTTP server binds (default: all)");
    F("cluster_secret_file", MC_FLAG_STRING, &f->cluster_secret_file,
      "file holding the cluster secret (default: MC_CLUSTER_SECRET or MC_CLUSTER_SECRET_FILE)");
    F("max_dummy_clients", MC_FLAG_INT, &f->max_dummy_clients,
      "control connections held at once (a dummy opens up to 4); when all are taken a new one "
      "replaces the longest idle");
#undef F
    return n;
}

typedef struct mc__daemon {
    mc_store_t *store;
    mc__node_t *node;
    mc__disk_tier_t *disk;
    uint64_t segment_size;
} mc__daemon_t;

static void mc__http_handle(void *ctx, const mc_http_request_t *req, mc_http_response_t *resp) {
    mc__daemon_t *d = ctx;
    if (strcmp(req->path, "/health") == 0) {
        static const char *const names[] = {"healthy", "not_initialized", "master_unreachable"};
        char body[128];
        int code = mc_store_health_check(d->store);
        int n = snprintf(body, sizeof(body), "{\"status\":\"%s\",\"code\":%d}",
                         code >= 0 && code <= 2 ? names[code] : "unknown", code);
        mc__http_respond(resp, code == 0 ? 200 : 503, "application/json", body, (size_t)n);
        return;
    }
    if (strcmp(req->path, "/metrics") == 0) {
        mc_buf_t b;
        char line[640];
        int n;
        mc__buf_init(&b);
        n = snprintf(line, sizeof(line),
                     "# HELP mooncake_client_global_segment_bytes memory this node contributes\n"
                     "# TYPE mooncake_client_global_segment_bytes gauge\n"
                     "mooncake_client_global_segment_bytes %llu\n"
                     "# HELP mooncake_client_master_healthy 1 while the master answers\n"
                     "# TYPE mooncake_client_master_healthy gauge\n"
                     "mooncake_client_master_healthy %d\n",
                     (unsigned long long)d->segment_size,
                     mc_store_health_check(d->store) == 0 ? 1 : 0);
        mc__buf_put(&b, line, (size_t)n);
        if (mc__node_metrics(d->node, &b) != 0 ||
            (d->disk && mc__disk_tier_metrics(d->disk, &b) != 0) || b.failed)
            mc__http_respond(resp, 500, NULL, "metrics unavailable\n", 20);
        else
            mc__http_respond(resp, 200, "text/plain; version=0.0.4", b.data, b.len);
        mc__buf_free(&b);
        return;
    }
    mc__http_respond(resp, 404, NULL, "not found (try /health or /metrics)\n", 36);
}

/* Flag values into a store config; 0 or -1 after saying which flag is wrong. */
static int mc__client_config(const mc__client_flags_t *f, mc_store_config_t *c) {
    const char *dev = f->device_name && *f->device_name ? f->device_name : f->device_names;
    const char *host = f->host && strcmp(f->host, "0.0.0.0") != 0 ? f->host : "";
    mc_store_config_init(c);
    if (mc_store_config_load_env(c) != 0) {
        fprintf(stderr, "%s: a MOONCAKE_* environment setting is invalid\n", PROG);
        return -1;
    }
    snprintf(c->local_hostname, sizeof(c->local_hostname), "%s", host);
    snprintf(c->metadata_server, sizeof(c->metadata_server), "%s", f->metadata_server);
    snprintf(c->protocol, sizeof(c->protocol), "%s", f->protocol);
    snprintf(c->device_name, sizeof(c->device_name), "%s", dev ? dev : "");
    snprintf(c->master_server_addr, sizeof(c->master_server_addr), "%s", f->master_server_address);
    if (f->cluster_secret_file && *f->cluster_secret_file)
        snprintf(c->cluster_secret_file, sizeof(c->cluster_secret_file), "%s",
                 f->cluster_secret_file);
    c->global_segment_size = f->global_segment_size;
    /* --root_fs_dir is this daemon's own tier (started below with its flags); one from the
     * environment's store settings would be a second one. */
    if (f->root_fs_dir && *f->root_fs_dir)
        c->enable_ssd_offload = 0;
    c->local_buffer_size = f->local_buffer_size;
    if (f->global_segment_size == 0) {
        fprintf(stderr,
                "%s: --global_segment_size must be more than 0 (a node contributes "
                "memory; a process that contributes none is a dummy client)\n",
                PROG);
        return -1;
    }
    if (f->port < 1 || f->port > 65535) {
        fprintf(stderr, "%s: --port must be in 1..65535, got %lld\n", PROG, (long long)f->port);
        return -1;
    }
    if (f->enable_http_server && (f->http_port < 0 || f->http_port > 65535)) {
        fprintf(stderr, "%s: --http_port must be in 0..65535, got %lld\n", PROG,
                (long long)f->http_port);
        return -1;
    }
    if (f->threads < 1) {
        fprintf(stderr, "%s: --threads must be at least 1\n", PROG);
        return -1;
    }
    if (f->max_dummy_clients < 1 || f->max_dummy_clients > 65536) {
        fprintf(stderr, "%s: --max_dummy_clients must be in 1..65536\n", PROG);
        return -1;
    }
    if (f->enable_offload && !(f->root_fs_dir && *f->root_fs_dir)) {
        fprintf(stderr,
                "%s: --enable_offload needs --root_fs_dir (the disk tier's directory) or "
                "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH in the environment\n",
                PROG);
        return -1;
    }
    if (f->root_fs_dir && *f->root_fs_dir && f->disk_capacity < (1ull << 20)) {
        fprintf(stderr, "%s: --disk_capacity must be at least 1mb, got %llu\n", PROG,
                (unsigned long long)f->disk_capacity);
        return -1;
    }
    if (f->disk_port < 0 || f->disk_port > 65535) {
        fprintf(stderr, "%s: --disk_port must be in 0..65535, got %lld\n", PROG,
                (long long)f->disk_port);
        return -1;
    }
    if (f->tenant_id && strcmp(f->tenant_id, "default") != 0) {
        fprintf(stderr, "%s: --tenant_id: only 'default' is supported\n", PROG);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    mc__client_flags_t f;
    mc_flag_t table[40];
    mc_store_config_t cfg;
    mc__daemon_t d;
    mc__node_opts_t no;
    mc_auth_t auth;
    mc_http_server_t *http = NULL;
    char sock[108];
    sigset_t sigs;
    int sig = 0, rc, code = 0;
    size_t n;
    memset(&f, 0, sizeof(f));
    memset(&d, 0, sizeof(d));
    f.host = "0.0.0.0";
    f.metadata_server = "http://127.0.0.1:8080/metadata";
    f.device_names = "";
    f.master_server_address = MC_STORE_DEFAULT_MASTER;
    f.protocol = "tcp";
    f.port = 50052;
    f.global_segment_size = 4ull << 30;
    f.local_buffer_size = 0;
    f.threads = 1;
    f.tenant_id = "default";
    f.start_offload_rpc_server = 1;
    f.http_port = 9300;
    f.max_dummy_clients = 1024;
    f.root_fs_dir = "";
    f.disk_capacity = 4ull << 30;
    f.disk_sync = 1;
    {
        const char *env = getenv("MOONCAKE_OFFLOAD_BUCKET_MAX_TOTAL_SIZE");
        uint64_t v = 0;
        if (env && *env && mc__parse_size(env, &v) == 0 && v > 0)
            f.disk_capacity = v;
    }
    n = mc__client_flag_table(&f, table);
    rc = mc__flags_parse(argc, argv, table, n, PROG, MC_VERSION_STRING,
                         "storage node of the Mooncake Store: contributes memory to the pool and "
                         "serves this host's dummy clients");
    if (rc == 1 || rc == 2)
        return 0;
    if (rc == 0 && f.enable_offload && !(f.root_fs_dir && *f.root_fs_dir)) {
        /* The reference's node takes its offload directory from the environment. */
        const char *env = getenv("MOONCAKE_OFFLOAD_FILE_STORAGE_PATH");
        if (env && *env)
            f.root_fs_dir = env;
    }
    if (rc < 0 || mc__client_config(&f, &cfg) != 0)
        return EXIT_USAGE;
    mc__np_socket_path((uint16_t)f.port, sock, sizeof(sock));

    /* Signals are taken by sigwait below; every thread started after this inherits the mask. */
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    d.segment_size = cfg.global_segment_size;
    if (mc_store_create(&d.store) != 0 || (rc = mc_store_setup(d.store, &cfg)) != 0) {
        const char *why = d.store ? mc_store_setup_error(d.store) : "";
        /* the cause when the store knows it; the code alone is often just INVALID_PARAMS */
        fprintf(stderr, "%s: cannot join the pool at master %s: %s (%s)\n", PROG,
                cfg.master_server_addr, *why ? why : mc_store_strerror(rc), mc_store_err_name(rc));
        code = 1;
        goto out;
    }
    memset(&no, 0, sizeof(no));
    no.socket_path = sock;
    char tcp_host[256];
    uint16_t engine_port;
    no.max_dummies = (int)f.max_dummy_clients;
    /* the reference's real-client service port, beside the unix socket (node_server.h); a
     * --host given as "host:port" (the engine's port) names the host only here */
    if (!f.host || mc__split_host_port(f.host, tcp_host, sizeof(tcp_host), &engine_port) != 0)
        snprintf(tcp_host, sizeof(tcp_host), "%s", f.host ? f.host : "");
    no.tcp_host = tcp_host;
    no.tcp_port = (uint16_t)f.port;
    if (mc__auth_init(&auth, NULL, f.cluster_secret_file) != 0) {
        fprintf(stderr, "%s: the cluster secret cannot be used\n", PROG);
        code = EXIT_USAGE;
        goto out;
    }
    no.auth = &auth;
    rc = mc__node_start(d.store, &no, &d.node);
    if (rc != 0) {
        fprintf(stderr,
                "%s: cannot listen on %s or TCP %s:%lld (is another mooncake_client using "
                "--port=%lld?)\n",
                PROG, sock, f.host, (long long)f.port, (long long)f.port);
        code = 1;
        goto out;
    }
    if (f.root_fs_dir && *f.root_fs_dir) {
        mc__disk_tier_opts_t dopts;
        memset(&dopts, 0, sizeof(dopts));
        dopts.dir = f.root_fs_dir;
        dopts.capacity = f.disk_capacity;
        dopts.host = f.disk_host;
        dopts.port = (uint16_t)f.disk_port;
        dopts.no_sync = !f.disk_sync;
        rc = mc__disk_tier_start(d.store, &dopts, &d.disk);
        if (rc != 0) {
            fprintf(stderr, "%s: cannot open the disk tier in %s: %s (%s)\n", PROG, f.root_fs_dir,
                    mc_store_strerror(rc), mc_store_err_name(rc));
            code = 1;
            goto out;
        }
        char mode[320];
        mc__disk_tier_io_mode(d.disk, mode, sizeof(mode));
        printf("%s disk tier %s (%llu bytes) served at %s\n", PROG, f.root_fs_dir,
               (unsigned long long)f.disk_capacity, mc__disk_tier_endpoint(d.disk));
        printf("%s disk tier I/O: %s\n", PROG, mode);
    }
    if (f.enable_http_server) {
        rc = mc__http_server_start(f.http_host && *f.http_host ? f.http_host : NULL,
                                   (uint16_t)f.http_port, 0, mc__http_handle, &d, &http);
        if (rc != 0) {
            fprintf(stderr, "%s: cannot serve HTTP on port %lld\n", PROG, (long long)f.http_port);
            code = 1;
            goto out;
        }
    }
    printf("%s segment %s (%llu bytes) mounted at master %s\n", PROG, mc_store_hostname(d.store),
           (unsigned long long)cfg.global_segment_size, cfg.master_server_addr);
    printf("%s serving dummy clients on %s\n", PROG, sock);
    printf("%s service port %s:%lld (tcp)\n", PROG, f.host, (long long)f.port);
    if (http)
        printf("%s http on port %u\n", PROG, (unsigned)mc__http_server_port(http));
    fflush(stdout);
    while (sigwait(&sigs, &sig) != 0)
        ;
    fprintf(stderr, "%s: signal %d, unmounting and shutting down\n", PROG, sig);
out:
    mc__http_server_stop(http);
    mc__node_stop(d.node);
    mc__disk_tier_stop(d.disk);
    mc_store_destroy(d.store); /* unmounts the segment at the master */
    return code;
}
