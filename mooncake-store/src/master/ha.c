/* The HA supervisor (ha.h): one thread that starts and stops a master per term of leadership. */
#include "master/ha.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "master/election.h"
#include "master/standby_http.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/cond.h"
#include "mooncake/common/log.h"
#include "mooncake/error.h"

struct mc__ha {
    mc__master_config_t cfg;
    mc__ha_change_fn on_change;
    void *ctx;
    mc_election_t *election;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stopping;                /* guarded by mu */
    int64_t elected_term;        /* the term the election says we hold; 0 when none */
    mc__standby_http_t *standby; /* the admin port between terms; owned by ha_main */
};

static void ha_elected(void *ctx, int64_t term) {
    mc__ha_t *h = ctx;
    pthread_mutex_lock(&h->mu);
    h->elected_term = term;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

static void ha_deposed(void *ctx) {
    mc__ha_t *h = ctx;
    pthread_mutex_lock(&h->mu);
    h->elected_term = 0;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

/* The master's view of its leadership: checked on every request. */
static int ha_is_leader(void *ctx, int64_t term) {
    mc__ha_t *h = ctx;
    return mc__election_leads(h->election, term);
}

/* The master's log can no longer record: give the term up now (on_deposed follows). */
static void ha_lost(void *ctx, int64_t term) {
    mc__ha_t *h = ctx;
    mc__election_resign(h->election, term);
}

/* Between terms the admin port answers as a standby (standby_http.c); a term's master takes the
 * port over. A port that cannot be had now (the previous holder not gone yet) is retried at the
 * next change; the master runs without it meanwhile, as before. */
static void ha_standby_serve(mc__ha_t *h) {
    int rc;
    if (h->standby)
        return;
    rc = mc__standby_http_start(&h->cfg, h->election, &h->standby);
    if (rc)
        MC_WARN("master: the standby's admin port %lld is not served (%s)",
                (long long)h->cfg.metrics_port, mc_store_strerror(rc));
}

static void ha_standby_end(mc__ha_t *h) {
    mc__standby_http_stop(h->standby);
    h->standby = NULL;
}

static void *ha_main(void *arg) {
    mc__ha_t *h = arg;
    pthread_mutex_lock(&h->mu);
    for (;;) {
        mc__master_config_t cfg = h->cfg;
        mc__master_t *m = NULL;
        int64_t term;
        int rc;
        while (!h->stopping && h->elected_term == 0)
            pthread_cond_wait(&h->cv, &h->mu);
        if (h->stopping)
            break;
        term = h->elected_term;
        pthread_mutex_unlock(&h->mu);
        cfg.ha_term = term;
        cfg.ha_is_leader = ha_is_leader;
        cfg.ha_lost = ha_lost;
        cfg.ha_ctx = h;
        ha_standby_end(h);
        MC_INFO("master: elected for term %lld; restoring the metadata from etcd", (long long)term);
        rc = mc__master_start(&cfg, &m);
        if (rc) {
            MC_ERROR("master: cannot serve term %lld (%s); giving it up", (long long)term,
                     mc_store_strerror(rc));
            mc__election_resign(h->election, term);
            pthread_mutex_lock(&h->mu);
            ha_standby_serve(h);
            /* the election calls on_deposed; do not start this term again meanwhile */
            while (!h->stopping && h->elected_term == term)
                pthread_cond_wait(&h->cv, &h->mu);
            continue;
        }
        if (h->on_change)
            h->on_change(h->ctx, m, term);
        pthread_mutex_lock(&h->mu);
        while (!h->stopping && h->elected_term == term)
            pthread_cond_wait(&h->cv, &h->mu);
        pthread_mutex_unlock(&h->mu);
        MC_WARN("master: term %lld is over; stopping its master", (long long)term);
        mc__master_stop(m);
        if (h->on_change)
            h->on_change(h->ctx, NULL, term);
        pthread_mutex_lock(&h->mu);
        ha_standby_serve(h);
    }
    pthread_mutex_unlock(&h->mu);
    ha_standby_end(h);
    return NULL;
}

int mc__ha_start(const mc__master_config_t *cfg, mc__ha_change_fn on_change, void *ctx,
                 mc__ha_t **out) {
    mc_election_callbacks_t cbs;
    char addr[MC_ELECTION_MAX_ADDR];
    mc__ha_t *h;
    int rc, n;
    *out = NULL;
    if (!cfg->enable_ha || !cfg->ha_etcd_endpoints || !cfg->rpc_address)
        return MC_ERR_INVALID_PARAMS;
    /* the address clients are sent to: an IPv6 host in brackets */
    n = snprintf(addr, sizeof(addr), strchr(cfg->rpc_address, ':') ? "[%s]:%lld" : "%s:%lld",
                 cfg->rpc_address, (long long)cfg->port);
    if (n < 0 || (size_t)n >= sizeof(addr))
        return MC_ERR_INVALID_PARAMS;
    h = mc__calloc(1, sizeof(*h));
    if (!h)
        return MC_ERR_MEMORY;
    h->cfg = *cfg;
    h->on_change = on_change;
    h->ctx = ctx;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    if (pthread_create(&h->thread, NULL, ha_main, h) != 0) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto fail;
    }
    cbs = (mc_election_callbacks_t){.on_elected = ha_elected, .on_deposed = ha_deposed, .ctx = h};
    /* Held across the start: a campaign won at once calls ha_elected, which waits for mu, so
     * no master (whose checks read h->election) starts before h->election is set. */
    pthread_mutex_lock(&h->mu);
    rc = mc__election_start(cfg->ha_etcd_endpoints, cfg->cluster_id, addr, (int)cfg->ha_lease_ttl_s,
                            &cbs, &h->election);
    if (!rc)
        ha_standby_serve(h); /* under mu: ha_main takes the port over only once this is done */
    pthread_mutex_unlock(&h->mu);
    if (rc) {
        mc__cond_raise(&h->mu, &h->cv, &h->stopping);
        pthread_join(h->thread, NULL);
        goto fail;
    }
    *out = h;
    return 0;
fail:
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    mc__free(h);
    return rc;
}

void mc__ha_stop(mc__ha_t *h) {
    if (!h)
        return;
    mc__cond_raise(&h->mu, &h->cv, &h->stopping);
    pthread_join(h->thread, NULL); /* stops the master it ran */
    mc__election_stop(h->election);
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    mc__free(h);
}
