/* Leader election over etcd (see election.h for the key, the value and the fencing rule).
 *
 * Threads: the election thread campaigns, watches as a standby, and as leader waits for the
 * first sign of lost leadership (the fence deadline, the lease found gone, the key deleted or
 * taken); it alone calls the callbacks. While leader, a refresh thread sends the keep-alives and
 * restarts a broken watch, so the election thread never blocks on etcd while it guards the fence
 * deadline. The watch runs on the etcd client's watch thread and only records what it saw.
 *
 * Why not mc__etcd_keeper: it reports a lost lease a TTL after its last *successful* refresh
 * returned, which can be later than the servers' expiry (they restart the TTL when the request
 * arrives); fencing needs the send time of the last acknowledged refresh. */
#include "master/election.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/cond.h"
#include "mooncake/common/etcd.h"
#include "mooncake/common/log.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"

struct mc_election {
    mc_etcd_t *etcd;
    char key[MC_MASTER_VIEW_KEY_MAX];
    size_t key_len;
    char me[MC_ELECTION_MAX_ADDR];
    size_t me_len;
    int64_t ttl_s;
    uint64_t margin_ms; /* the fence fires this long before the earliest server-side expiry */
    mc_election_callbacks_t cbs;
    pthread_t thread, refresher;
    int refresher_started;
    _Atomic int paused; /* test hook */

    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC */
    /* guarded by mu */
    int stopping;
    char leader[MC_ELECTION_MAX_ADDR];
    int leader_known;
    int is_leader;
    int64_t term;
    int64_t lease;           /* held while leader; 0 otherwise */
    uint64_t valid_until_ms; /* earliest possible server-side expiry of the lease */
    /* What the leadership checks read without the lock (every master request asks one):
     * the term held (0: none) and the fence deadline, both written under mu by the election
     * and refresh threads. */
    _Atomic int64_t lead_term;
    _Atomic uint64_t fence_ms;
    int lease_gone, key_lost, key_deleted, watch_failed, refresh_stop;
    int resign_asked; /* mc__election_resign: step down at once, campaign again later */
    mc_etcd_watch_t *watch;
};

/* Waits on e->cv until deadline_ms (monotonic) or a signal; mu held. */
static void wait_until(mc_election_t *e, uint64_t deadline_ms) {
    struct timespec ts;
    uint64_t now = mc__now_ms(), wait = deadline_ms > now ? deadline_ms - now : 0;
    ts = mc__clock_after_ms(CLOCK_MONOTONIC, wait);
    pthread_cond_timedwait(&e->cv, &e->mu, &ts);
}

static void set_leader_locked(mc_election_t *e, const uint8_t *v, size_t n) {
    if (n >= sizeof(e->leader))
        n = sizeof(e->leader) - 1;
    memcpy(e->leader, v, n);
    e->leader[n] = '\0';
    e->leader_known = 1;
}

static void on_watch(void *ctx, const mc_etcd_event_t *ev, size_t n, int64_t revision, int err) {
    mc_election_t *e = ctx;
    (void)revision;
    pthread_mutex_lock(&e->mu);
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type == MC_ETCD_EVENT_DELETE) {
            e->leader_known = 0;
            if (e->is_leader)
                e->key_lost = 1;
            else
                e->key_deleted = 1;
        } else {
            set_leader_locked(e, ev[i].kv.value, ev[i].kv.value_len);
            if (e->is_leader && ev[i].kv.lease != e->lease)
                e->key_lost = 1;
        }
    }
    if (err)
        e->watch_failed = 1;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

static int start_watch(mc_election_t *e, int64_t from_rev) {
    mc_etcd_watch_t *w = NULL;
    int rc = mc__etcd_watch_start(e->etcd, e->key, e->key_len, NULL, 0, from_rev, on_watch, e, &w);
    pthread_mutex_lock(&e->mu);
    e->watch = w;
    e->watch_failed = rc != 0;
    pthread_mutex_unlock(&e->mu);
    return rc;
}

static void stop_watch(mc_election_t *e) {
    mc_etcd_watch_t *w;
    pthread_mutex_lock(&e->mu);
    w = e->watch;
    e->watch = NULL;
    pthread_mutex_unlock(&e->mu);
    mc__etcd_watch_stop(w);
}

/* The key as it is now: 0 and *held (1: it is ours, on lease), the leader recorded, *rev the
 * revision read at. */
static int read_key(mc_election_t *e, int64_t lease, int *held, int64_t *term, int64_t *rev) {
    mc_etcd_kvs_t r;
    int rc = mc__etcd_range(e->etcd, e->key, e->key_len, NULL, 0, 0, 0, &r);
    *held = 0;
    if (rc)
        return rc;
    *rev = r.revision;
    pthread_mutex_lock(&e->mu);
    if (r.n == 1) {
        set_leader_locked(e, r.kvs[0].value, r.kvs[0].value_len);
        *held = lease != 0 && r.kvs[0].lease == lease;
        *term = r.kvs[0].create_revision;
    } else {
        e->leader_known = 0;
    }
    pthread_mutex_unlock(&e->mu);
    mc__etcd_kvs_free(&r);
    return 0;
}

/* One campaign: a fresh lease, then "create the key on it if absent, else read it". 0 with *won
 * (and *term, *lease, *valid_until on a win) and *rev, the revision to watch after. */
static int campaign(mc_election_t *e, int *won, int64_t *term, int64_t *lease,
                    uint64_t *valid_until, int64_t *rev) {
    mc_etcd_cmp_t cmp = {.target = MC_ETCD_CMP_CREATE,
                         .result = MC_ETCD_EQUAL,
                         .key = e->key,
                         .key_len = e->key_len,
                         .number = 0};
    mc_etcd_op_t put = {.type = MC_ETCD_OP_PUT,
                        .key = e->key,
                        .key_len = e->key_len,
                        .value = e->me,
                        .value_len = e->me_len};
    mc_etcd_op_t get = {.type = MC_ETCD_OP_RANGE, .key = e->key, .key_len = e->key_len};
    mc_etcd_txn_result_t res;
    int64_t id = 0, granted = 0;
    uint64_t sent = mc__now_ms();
    int rc;
    *won = 0;
    rc = mc__etcd_lease_grant(e->etcd, e->ttl_s, &id, &granted);
    if (rc)
        return rc;
    if (granted <= 0)
        granted = e->ttl_s;
    put.lease = id;
    memset(&res, 0, sizeof(res));
    rc = mc__etcd_txn(e->etcd, &cmp, 1, &put, 1, &get, 1, &res);
    if (rc == MC_ERR_ETCD_TRANSACTION_FAIL) {
        /* sent, no answer: whether it was applied shows in the key's lease */
        rc = read_key(e, id, won, term, rev);
    } else if (rc == 0 && res.succeeded) {
        *won = 1;
        *term = res.revision;
        *rev = res.revision;
    } else if (rc == 0) {
        *rev = res.revision;
        pthread_mutex_lock(&e->mu);
        if (res.n == 1 && res.ranges[0].n == 1)
            set_leader_locked(e, res.ranges[0].kvs[0].value, res.ranges[0].kvs[0].value_len);
        pthread_mutex_unlock(&e->mu);
    }
    mc__etcd_txn_result_free(&res);
    if (rc == 0 && *won) {
        *lease = id;
        *valid_until = sent + (uint64_t)granted * 1000;
        return 0;
    }
    (void)mc__etcd_lease_revoke(e->etcd, id);
    return rc;
}

/* Leader only: keep-alives every TTL/3 from the send time of the last one; a broken watch is
 * restarted here after checking the key is still ours. */
static void *refresh_main(void *arg) {
    mc_election_t *e = arg;
    uint64_t period = (uint64_t)e->ttl_s * 1000 / 3, next;
    int64_t lease;
    if (period < 100)
        period = 100;
    next = mc__now_ms() + period;
    pthread_mutex_lock(&e->mu);
    lease = e->lease;
    while (!e->refresh_stop) {
        int rc, restart;
        uint64_t sent;
        int64_t ttl = 0;
        if (!e->watch_failed && mc__now_ms() < next) {
            wait_until(e, next);
            continue;
        }
        restart = e->watch_failed;
        pthread_mutex_unlock(&e->mu);
        if (restart) {
            int held = 0;
            int64_t term = 0, rev = 0;
            stop_watch(e);
            rc = read_key(e, lease, &held, &term, &rev);
            if (rc == 0 && !held) {
                pthread_mutex_lock(&e->mu);
                e->key_lost = 1;
                pthread_cond_broadcast(&e->cv);
                break;
            }
            if (rc == 0)
                rc = start_watch(e, rev + 1);
            if (rc) {
                MC_WARN("election %s: watch restart failed (%s)", e->key, mc_strerror(rc));
                pthread_mutex_lock(&e->mu);
                e->watch_failed = 1;
                wait_until(e, mc__now_ms() + 200);
                pthread_mutex_unlock(&e->mu);
            }
        }
        if (mc__now_ms() < next || atomic_load(&e->paused)) {
            if (mc__now_ms() >= next)
                next = mc__now_ms() + period;
            pthread_mutex_lock(&e->mu);
            continue;
        }
        sent = mc__now_ms();
        rc = mc__etcd_lease_keepalive(e->etcd, lease, &ttl);
        pthread_mutex_lock(&e->mu);
        if (rc == 0 && ttl > 0) {
            if (sent + (uint64_t)ttl * 1000 > e->valid_until_ms) {
                e->valid_until_ms = sent + (uint64_t)ttl * 1000;
                atomic_store(&e->fence_ms, e->valid_until_ms - e->margin_ms);
            }
            next = sent + period;
        } else if (rc == MC_ERR_ETCD_KEY_NOT_EXIST || (rc == 0 && ttl <= 0)) {
            e->lease_gone = 1;
            pthread_cond_broadcast(&e->cv);
            break;
        } else {
            MC_WARN("election %s: lease refresh failed (%s); retrying", e->key, mc_strerror(rc));
            next = mc__now_ms() + 100;
        }
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

/* Resigning: delete the key only while it is still on our lease, then end the lease. */
static void resign(mc_election_t *e, int64_t lease) {
    mc_etcd_cmp_t cmp = {.target = MC_ETCD_CMP_LEASE,
                         .result = MC_ETCD_EQUAL,
                         .key = e->key,
                         .key_len = e->key_len,
                         .number = lease};
    mc_etcd_op_t del = {.type = MC_ETCD_OP_DELETE, .key = e->key, .key_len = e->key_len};
    (void)mc__etcd_txn(e->etcd, &cmp, 1, &del, 1, NULL, 0, NULL);
    (void)mc__etcd_lease_revoke(e->etcd, lease);
}

/* Holds leadership until it is lost or stop is asked; returns with on_deposed called. */
static void lead(mc_election_t *e, int64_t term, int64_t lease, uint64_t valid_until, int64_t rev) {
    const char *why = NULL;
    pthread_mutex_lock(&e->mu);
    e->is_leader = 1;
    e->term = term;
    e->lease = lease;
    e->valid_until_ms = valid_until;
    atomic_store(&e->fence_ms, valid_until - e->margin_ms);
    atomic_store(&e->lead_term, term);
    e->lease_gone = e->key_lost = e->refresh_stop = 0;
    set_leader_locked(e, (const uint8_t *)e->me, e->me_len);
    pthread_mutex_unlock(&e->mu);
    if (start_watch(e, rev + 1))
        MC_WARN("election %s: watch failed to start; the refresher retries", e->key);
    e->refresher_started = pthread_create(&e->refresher, NULL, refresh_main, e) == 0;
    MC_INFO("election %s: %s elected, term %" PRId64, e->key, e->me, term);
    if (e->cbs.on_elected)
        e->cbs.on_elected(e->cbs.ctx, term);
    pthread_mutex_lock(&e->mu);
    while (!why) {
        uint64_t fence = e->valid_until_ms - e->margin_ms;
        if (e->stopping)
            why = "stopping";
        else if (e->resign_asked)
            why = "resigned";
        else if (e->lease_gone)
            why = "lease gone";
        else if (e->key_lost)
            why = "key deleted or taken";
        else if (!e->refresher_started)
            why = "no refresh thread";
        else if (mc__now_ms() >= fence)
            why = "lease not refreshed in time";
        else
            wait_until(e, fence);
    }
    e->is_leader = 0;
    e->term = 0;
    atomic_store(&e->lead_term, 0);
    e->refresh_stop = 1;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    MC_WARN("election %s: %s deposed (%s)", e->key, e->me, why);
    if (e->cbs.on_deposed)
        e->cbs.on_deposed(e->cbs.ctx);
    if (e->refresher_started)
        pthread_join(e->refresher, NULL);
    e->refresher_started = 0;
    stop_watch(e);
    /* whatever the reason, the lease is no longer trusted: end it so the key cannot outlive us
     * (unless the test hook has us cut off from etcd) */
    if (!atomic_load(&e->paused))
        resign(e, lease);
    pthread_mutex_lock(&e->mu);
    e->lease = 0;
    e->leader_known = 0;
    pthread_mutex_unlock(&e->mu);
}

/* Waits as a standby until the key is deleted, the watch breaks or stop is asked. */
static void stand_by(mc_election_t *e, int64_t rev) {
    pthread_mutex_lock(&e->mu);
    e->key_deleted = 0;
    pthread_mutex_unlock(&e->mu);
    if (start_watch(e, rev + 1) == 0) {
        pthread_mutex_lock(&e->mu);
        while (!e->stopping && !e->key_deleted && !e->watch_failed)
            wait_until(e, mc__now_ms() + 1000);
        pthread_mutex_unlock(&e->mu);
    }
    stop_watch(e);
}

static void *election_main(void *arg) {
    mc_election_t *e = arg;
    uint64_t backoff = 0;
    for (;;) {
        int won = 0, rc;
        int64_t term = 0, lease = 0, rev = 0;
        uint64_t valid_until = 0;
        pthread_mutex_lock(&e->mu);
        if (backoff && !e->stopping)
            wait_until(e, mc__now_ms() + backoff);
        if (e->stopping) {
            pthread_mutex_unlock(&e->mu);
            break;
        }
        if (atomic_load(&e->paused)) {
            backoff = 50;
            pthread_mutex_unlock(&e->mu);
            continue;
        }
        e->watch_failed = 0;
        pthread_mutex_unlock(&e->mu);
        rc = campaign(e, &won, &term, &lease, &valid_until, &rev);
        if (rc) {
            MC_WARN("election %s: campaign failed (%s); retrying", e->key, mc_strerror(rc));
            backoff = backoff ? (backoff * 2 > 1000 ? 1000 : backoff * 2) : 100;
            continue;
        }
        backoff = 0;
        if (won) {
            lead(e, term, lease, valid_until, rev);
            pthread_mutex_lock(&e->mu);
            /* after a resignation the standbys (watching the key) get the first chance */
            backoff = e->resign_asked ? 500 : 0;
            e->resign_asked = 0;
            pthread_mutex_unlock(&e->mu);
        } else {
            stand_by(e, rev);
            pthread_mutex_lock(&e->mu);
            if (e->watch_failed)
                backoff = 200;
            pthread_mutex_unlock(&e->mu);
        }
    }
    return NULL;
}

int mc__election_start(const char *endpoints, const char *cluster_id, const char *my_address,
                       int lease_ttl_s, const mc_election_callbacks_t *cbs, mc_election_t **out) {
    mc_election_t *e = NULL;
    pthread_condattr_t ca;
    mc_etcd_kv_t kv;
    int rc, kl, timeout_ms;
    if (!out)
        return MC_ERR_INVALID_ARGUMENT;
    *out = NULL;
    if (!endpoints || !my_address || !*my_address || strlen(my_address) >= MC_ELECTION_MAX_ADDR)
        return MC_ERR_INVALID_ARGUMENT;
    if (lease_ttl_s <= 0)
        lease_ttl_s = MC_ELECTION_DEFAULT_TTL_S;
    if (lease_ttl_s > MC_ELECTION_MAX_TTL_S)
        return MC_ERR_INVALID_ARGUMENT;
    e = mc__calloc(1, sizeof(*e));
    if (!e)
        return MC_ERR_MEMORY;
    kl = mc__master_view_key(cluster_id, e->key, sizeof(e->key));
    if (kl < 0) {
        mc__free(e);
        return kl;
    }
    e->key_len = (size_t)kl;
    e->me_len = strlen(my_address);
    memcpy(e->me, my_address, e->me_len + 1);
    e->ttl_s = lease_ttl_s;
    e->margin_ms = (uint64_t)lease_ttl_s * 100; /* a tenth of the TTL */
    if (cbs)
        e->cbs = *cbs;
    atomic_init(&e->paused, 0);
    atomic_init(&e->lead_term, 0);
    atomic_init(&e->fence_ms, 0);
    /* a call never blocks longer than a third of the TTL, so a refresh can be retried */
    timeout_ms = lease_ttl_s * 1000 / 3;
    if (timeout_ms < 300)
        timeout_ms = 300;
    if (timeout_ms > MC_ETCD_DEFAULT_TIMEOUT_MS)
        timeout_ms = MC_ETCD_DEFAULT_TIMEOUT_MS;
    rc = mc__etcd_open(endpoints, timeout_ms, &e->etcd);
    if (rc) {
        mc__free(e);
        return rc;
    }
    rc = mc__etcd_get(e->etcd, e->key, e->key_len, &kv);
    if (rc == 0) {
        set_leader_locked(e, kv.value, kv.value_len);
        mc__etcd_kv_free(&kv);
    } else if (rc != MC_ERR_ETCD_KEY_NOT_EXIST) {
        MC_ERROR("election %s: etcd at %s unreachable (%s)", e->key, endpoints, mc_strerror(rc));
        mc__etcd_close(e->etcd);
        mc__free(e);
        return rc;
    }
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&e->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&e->mu, NULL);
    if (pthread_create(&e->thread, NULL, election_main, e)) {
        pthread_cond_destroy(&e->cv);
        pthread_mutex_destroy(&e->mu);
        mc__etcd_close(e->etcd);
        mc__free(e);
        return MC_ERR_MEMORY;
    }
    *out = e;
    return 0;
}

int mc__election_leader(mc_election_t *e, char *buf, size_t cap) {
    int rc = 0;
    if (!e || !buf)
        return MC_ERR_INVALID_ARGUMENT;
    pthread_mutex_lock(&e->mu);
    if (!e->leader_known)
        rc = MC_ERR_ETCD_KEY_NOT_EXIST;
    else if (strlen(e->leader) >= cap)
        rc = MC_ERR_INVALID_ARGUMENT;
    else
        memcpy(buf, e->leader, strlen(e->leader) + 1);
    pthread_mutex_unlock(&e->mu);
    return rc;
}

/* The term held now, with its fence not passed (0: none). The fence is checked here too: after
 * a stall (SIGSTOP, a long callback) a caller must not see leadership the election thread has
 * not yet had the chance to give up. The term is read again after the fence, so a fence of a
 * later term is never taken for this one's. */
static int64_t mc__held_term(mc_election_t *e) {
    int64_t t = atomic_load(&e->lead_term);
    uint64_t fence = atomic_load(&e->fence_ms);
    if (t == 0 || mc__now_ms() >= fence || atomic_load(&e->lead_term) != t)
        return 0;
    return t;
}

int mc__election_is_leader(mc_election_t *e) {
    return e && mc__held_term(e) != 0;
}

int mc__election_leads(mc_election_t *e, int64_t term) {
    return e && term != 0 && mc__held_term(e) == term;
}

int64_t mc__election_term(mc_election_t *e) {
    int64_t v;
    if (!e)
        return 0;
    pthread_mutex_lock(&e->mu);
    v = e->term;
    pthread_mutex_unlock(&e->mu);
    return v;
}

void mc__election_resign(mc_election_t *e, int64_t term) {
    if (!e)
        return;
    pthread_mutex_lock(&e->mu);
    if (e->is_leader && e->term == term) {
        e->resign_asked = 1;
        pthread_cond_broadcast(&e->cv);
    }
    pthread_mutex_unlock(&e->mu);
}

void mc__election_test_pause_refresh(mc_election_t *e, int paused) {
    if (e)
        atomic_store(&e->paused, paused);
}

void mc__election_stop(mc_election_t *e) {
    if (!e)
        return;
    mc__cond_raise(&e->mu, &e->cv, &e->stopping);
    pthread_join(e->thread, NULL);
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    mc__etcd_close(e->etcd);
    mc__free(e);
}
