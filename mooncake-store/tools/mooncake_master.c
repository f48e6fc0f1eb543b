/* mooncake_master: the Store's metadata service. Takes the reference's flags (gflags style) and
 * its config files (--config_path, JSON or YAML); see master/master_flags.h and docs/master.md. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "master/ha.h"
#include "master/master.h"
#include "master/master_flags.h"
#include "mooncake/error.h"

#define PROG "mooncake_master"
#define EXIT_USAGE 2

static const char *mc__show_host(const char *h) {
    return h && *h ? h : "0.0.0.0";
}

static void mc__print_ports(const mc__master_config_t *c, mc__master_t *m) {
    printf("%s listening on rpc %s:%u\n", PROG, mc__show_host(c->rpc_address),
           (unsigned)mc__master_rpc_port(m));
    /* before the metrics line, which ends what launchers wait for */
    if (c->kv_events.enabled)
        printf("%s kv events on port %u, replay on port %u\n", PROG,
               (unsigned)mc__kv_events_port(m, 0), (unsigned)mc__kv_events_port(m, 1));
    printf("%s metrics on %s:%u\n", PROG,
           mc__show_host(c->metrics_address && *c->metrics_address ? c->metrics_address
                                                                   : c->rpc_address),
           (unsigned)mc__master_metrics_port(m));
    if (c->enable_http_metadata_server)
        printf("%s http metadata on %s:%u\n", PROG, mc__show_host(c->http_metadata_server_host),
               (unsigned)mc__master_http_metadata_port(m));
    fflush(stdout);
}

/* HA: a line per change of role, so operators (and tests) see who leads. */
static void mc__on_ha_change(void *ctx, mc__master_t *m, int64_t term) {
    const mc__master_config_t *c = ctx;
    if (m) {
        printf("%s leader for term %lld\n", PROG, (long long)term);
        mc__print_ports(c, m);
    } else {
        printf("%s standby (term %lld ended)\n", PROG, (long long)term);
        fflush(stdout);
    }
}

int main(int argc, char **argv) {
    static mc__master_opts_t o; /* large (the flag table): not on the stack */
    mc__master_t *m = NULL;
    const mc__master_config_t *c = &o.cfg;
    sigset_t sigs;
    int sig = 0;
    int rc = 0;
    int code = 0;
    mc__master_opts_init(&o);
    rc = mc__master_opts_load(&o, argc, argv);
    if (rc == 1)
        goto out;
    if (rc != 0) {
        code = EXIT_USAGE;
        goto out;
    }
    /* Signals are taken by sigwait below; every thread started after this inherits the mask. */
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    errno = 0;
    if (c->enable_ha) {
        mc__ha_t *ha = NULL;
        rc = mc__ha_start(c, mc__on_ha_change, (void *)c, &ha);
        if (rc) {
            fprintf(stderr, "%s: cannot join the HA cluster %s at etcd %s: %s\n", PROG,
                    c->cluster_id, c->ha_etcd_endpoints, mc_store_strerror(rc));
            code = 1;
            goto out;
        }
        printf("%s standby in cluster %s (etcd %s), rpc %s:%lld when leading\n", PROG,
               c->cluster_id, c->ha_etcd_endpoints, c->rpc_address, (long long)c->port);
        fflush(stdout);
        while (sigwait(&sigs, &sig) != 0)
            ;
        fprintf(stderr, "%s: signal %d, shutting down\n", PROG, sig);
        mc__ha_stop(ha);
        goto out;
    }
    rc = mc__master_start(c, &m);
    if (rc) {
        fprintf(stderr, "%s: cannot start (rpc %s:%lld, metrics port %lld%s): %s\n", PROG,
                mc__show_host(c->rpc_address), (long long)c->port, (long long)c->metrics_port,
                c->enable_http_metadata_server ? ", http metadata port" : "",
                errno ? strerror(errno) : mc_store_strerror(rc));
        code = 1;
        goto out;
    }
    fprintf(stderr, "%s: cluster_id=%s rpc_thread_num=%lld client_ttl=%llds lease_ttl=%lldms\n",
            PROG, c->cluster_id ? c->cluster_id : "", (long long)c->rpc_thread_num,
            (long long)c->client_ttl_s, (long long)c->default_kv_lease_ttl_ms);
    mc__print_ports(c, m);
    while (sigwait(&sigs, &sig) != 0)
        ;
    fprintf(stderr, "%s: signal %d, shutting down\n", PROG, sig);
    mc__master_stop(m);
out:
    mc__master_opts_free(&o);
    return code;
}
