/* The replica-location cache's renewer (replica_renew.h). */
#include "client/replica_renew.h"

#include <pthread.h>
#include <time.h>

#include "client/store_internal.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/config.h"
#include "mooncake/common/log.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"

/* Keys in one renewal RPC: a pass takes as many RPCs as it needs. The renewal shares the
 * client's master connection, so a user's call that needs the master waits for the RPC in
 * flight: 64 keys keep that wait short (with 256, and 3000 keys read in a loop by one thread,
 * another thread's first gets had a p99.9 of 2.1-2.5 ms against 0.9-1.8 ms with renewal off;
 * docs/perf/issue26-renew/ab.md). Each answer holds a replica list of MC_MP_MAX_REPLICA_NUM
 * descriptors, so this bounds the thread's buffers too. */
#define MC__RENEW_BATCH 64u
/* Before each RPC the renewer lets callers that wait for the connection go first, for at most
 * this long: a client whose threads call the master without a pause still renews. */
#define MC__RENEW_YIELD_US 2000u

/* Waits while a user's call waits for the master connection, within MC__RENEW_YIELD_US. It
 * naps rather than spins: the caller it waits for needs the core more than this thread does. */
static void mc__renew_step_aside(mc_store_t *s) {
    const struct timespec nap = {0, 50 * 1000};
    uint64_t until = 0;
    while (mc__master_client_wanted(s->master)) {
        uint64_t now = mc__now_ns();
        if (!until)
            until = now + MC__RENEW_YIELD_US * 1000u;
        else if (now >= until)
            return;
        nanosleep(&nap, NULL);
    }
}

static void mc__renew_pass(mc_store_t *s, mc__rc_due_t *due, const char **keys,
                           mc__key_replicas_t *kr) {
    for (;;) {
        uint64_t sent;
        size_t n;
        int rc = 0;
        /* before the keys are picked and the clock read: the nap neither holds copies of keys
         * nor shortens the leases granted, which count from sent */
        mc__renew_step_aside(s);
        sent = mc__now_ms(); /* the leases count from before the request left */
        n = mc__replica_cache_due(s->rcache, sent, due, MC__RENEW_BATCH);
        if (n == 0)
            return;
        for (size_t i = 0; i < n; i++)
            keys[i] = due[i].key;
        if (atomic_load(&s->master_ok))
            rc = mc__master_client_batch_get_replica_list(s->master, n, keys, kr);
        else
            rc = MC_ERR_RPC_FAIL; /* the heartbeat says the master is away: reads will find out */
        for (size_t i = 0; i < n; i++) {
            if (rc == 0)
                mc__replica_cache_renew(s->rcache, keys[i], due[i].seq, sent, &kr[i]);
            mc__free(due[i].key);
        }
        if (rc != 0) {
            MC_DEBUG("store: renewing %zu cached replica lists failed: %s", n,
                     mc_store_strerror(rc));
            return; /* the entries run out as without renewal */
        }
        if (n < MC__RENEW_BATCH)
            return;
    }
}

static void *mc__renew_main(void *arg) {
    mc_store_t *s = arg;
    mc__rc_due_t *due = NULL;
    const char **keys = NULL;
    mc__key_replicas_t *kr = NULL; /* ~2.4 KiB a key: taken once a key is hot, not before */
    while (mc__replica_cache_nap(s->rcache, MC__RC_RENEW_EVERY_MS)) {
        if (!kr) {
            due = mc__calloc(MC__RENEW_BATCH, sizeof(*due));
            keys = mc__calloc(MC__RENEW_BATCH, sizeof(*keys));
            kr = mc__calloc(MC__RENEW_BATCH, sizeof(*kr));
            if (!due || !keys || !kr) {
                MC_WARN("store: no memory for the replica cache's renewer; cached entries run "
                        "out");
                break;
            }
        }
        mc__renew_pass(s, due, keys, kr);
    }
    mc__free(kr);
    mc__free(keys);
    mc__free(due);
    return NULL;
}

int mc__replica_renew_start(mc_store_t *s) {
    if (!s->rcache || !mc__env_i64_in("MC_STORE_CACHE_RENEW", 1, 0, 1))
        return 0;
    if (pthread_create(&s->renew_thread, NULL, mc__renew_main, s) != 0)
        return MC_ERR_INTERNAL_ERROR;
    s->renew_started = 1;
    return 0;
}

void mc__replica_renew_stop(mc_store_t *s) {
    if (!s->renew_started)
        return;
    mc__replica_cache_wake_renewer(s->rcache);
    pthread_join(s->renew_thread, NULL);
    s->renew_started = 0;
}
