/* etcd as the Transfer Engine's metadata service ("etcd://h1:2379,h2:2379"). The descriptor is
 * the value of the key the HTTP service uses too ("mooncake/ram/<segment>"), put on a lease
 * this engine keeps alive from its own thread: a clean shutdown deletes the key and revokes the
 * lease, a crashed engine's key goes when the lease's TTL runs out. When the lease is lost anyway
 * (etcd unreachable for a whole TTL), the thread takes a new one and puts the descriptor again. */
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "etcd_meta.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/config.h"
#include "mooncake/common/etcd.h"
#include "mooncake/common/log.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"

#define MC__ETCD_META_DEFAULT_TTL_S 10

struct mc__meta_etcd {
    mc_etcd_t *c;
    pthread_mutex_t lock; /* everything below */
    pthread_cond_t cond;
    int64_t lease; /* 0 until the first publish */
    int ttl_s;
    char *key, *json; /* what is published, for a re-put under a new lease */
    pthread_t thread;
    int running, stop;
};

/* The engine's code for an etcd failure: the reference's ERR_METADATA, MEMORY kept. */
static int mc__te_code(int rc) {
    return rc == 0 || rc == MC_ERR_MEMORY ? rc : MC_ERR_METADATA;
}

int mc__meta_etcd_parse(const char *conn, const char **endpoints) {
    if (!strncasecmp(conn, "etcd://", 7)) {
        *endpoints = conn + 7;
        return 1;
    }
    /* the reference reads a connection string without a scheme as etcd endpoints */
    if (!strstr(conn, "://")) {
        *endpoints = conn;
        return 1;
    }
    return 0;
}

int mc__meta_etcd_open(const char *endpoints, int timeout_ms, mc__meta_etcd_t **out) {
    mc__meta_etcd_t *m;
    const char *ttl = getenv("MC_METADATA_LEASE_TTL");
    int64_t v = MC__ETCD_META_DEFAULT_TTL_S;
    int rc;
    *out = NULL;
    if (ttl && *ttl && (mc__parse_i64(ttl, &v) || v < 1 || v > 3600)) {
        MC_ERROR("MC_METADATA_LEASE_TTL=\"%s\" is not a number of seconds in 1..3600", ttl);
        return MC_ERR_INVALID_ARGUMENT;
    }
    m = mc__calloc(1, sizeof(*m));
    if (!m)
        return MC_ERR_MEMORY;
    rc = mc__etcd_open(endpoints, timeout_ms, &m->c);
    if (rc) {
        mc__free(m);
        return rc;
    }
    m->ttl_s = (int)v;
    pthread_mutex_init(&m->lock, NULL);
    pthread_cond_init(&m->cond, NULL);
    *out = m;
    return 0;
}

/* Under m->lock: a lease if there is none, then the put; a lease found gone is replaced once. */
static int mc__etcd_meta_put_locked(mc__meta_etcd_t *m) {
    int rc = 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        if (!m->lease) {
            int64_t id = 0;
            rc = mc__etcd_lease_grant(m->c, m->ttl_s, &id, NULL);
            if (rc)
                return rc;
            m->lease = id;
        }
        rc = mc__etcd_put(m->c, m->key, strlen(m->key), m->json, strlen(m->json), m->lease, NULL);
        if (rc != MC_ERR_ETCD_KEY_NOT_EXIST)
            return rc;
        m->lease = 0;
    }
    return rc;
}

static void mc__wait_ms(mc__meta_etcd_t *m, uint64_t ms) {
    struct timespec ts;
    ts = mc__realtime_after_ms(ms);
    pthread_cond_timedwait(&m->cond, &m->lock, &ts);
}

static void *mc__etcd_meta_keeper(void *arg) {
    mc__meta_etcd_t *m = arg;
    uint64_t every = (uint64_t)m->ttl_s * 1000 / 3;
    int warned = 0;
    pthread_mutex_lock(&m->lock);
    while (!m->stop) {
        uint64_t until = mc__now_ms() + (every < 200 ? 200 : every);
        int64_t lease;
        int rc;
        while (!m->stop && mc__now_ms() < until)
            mc__wait_ms(m, until - mc__now_ms());
        if (m->stop)
            break;
        lease = m->lease;
        pthread_mutex_unlock(&m->lock);
        /* the refresh runs unlocked so a publish never waits behind a slow etcd */
        rc = lease ? mc__etcd_lease_keepalive(m->c, lease, NULL) : MC_ERR_ETCD_KEY_NOT_EXIST;
        pthread_mutex_lock(&m->lock);
        if (rc == MC_ERR_ETCD_KEY_NOT_EXIST && !m->stop && m->key) {
            if (lease == m->lease)
                m->lease = 0;
            MC_WARN("etcd lease of segment key %s was lost; publishing it again", m->key);
            rc = mc__etcd_meta_put_locked(m);
        }
        if (rc && !warned) {
            MC_WARN("keeping segment key %s alive in etcd failed: %s (retrying)",
                    m->key ? m->key : "?", mc_strerror(rc));
            warned = 1;
        } else if (!rc) {
            warned = 0;
        }
    }
    pthread_mutex_unlock(&m->lock);
    return NULL;
}

int mc__meta_etcd_publish(mc__meta_etcd_t *m, const char *key, const char *json) {
    char *k = mc__strdup(key), *j = mc__strdup(json);
    int rc = MC_ERR_MEMORY;
    if (!k || !j) {
        mc__free(k);
        mc__free(j);
        return rc;
    }
    pthread_mutex_lock(&m->lock);
    mc__free(m->key);
    mc__free(m->json);
    m->key = k;
    m->json = j;
    rc = mc__etcd_meta_put_locked(m);
    if (!rc && !m->running) {
        m->stop = 0;
        if (pthread_create(&m->thread, NULL, mc__etcd_meta_keeper, m) == 0)
            m->running = 1;
        else
            rc = MC_ERR_MEMORY;
    }
    pthread_mutex_unlock(&m->lock);
    return mc__te_code(rc);
}

int mc__meta_etcd_fetch(mc__meta_etcd_t *m, const char *key, char **json, size_t *len) {
    mc_etcd_kv_t kv;
    int rc = mc__etcd_get(m->c, key, strlen(key), &kv);
    *json = NULL;
    *len = 0;
    if (rc) {
        if (rc != MC_ERR_ETCD_KEY_NOT_EXIST)
            MC_DEBUG("etcd get %s: %s", key, mc_strerror(rc));
        return mc__te_code(rc);
    }
    *json = (char *)kv.value; /* NUL-terminated */
    *len = kv.value_len;
    kv.value = NULL;
    mc__etcd_kv_free(&kv);
    return 0;
}

static void mc__etcd_meta_stop_thread(mc__meta_etcd_t *m) {
    int running;
    pthread_mutex_lock(&m->lock);
    m->stop = 1;
    running = m->running;
    m->running = 0;
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->lock);
    if (running)
        pthread_join(m->thread, NULL);
}

void mc__meta_etcd_unpublish(mc__meta_etcd_t *m, const char *key) {
    int rc;
    mc__etcd_meta_stop_thread(m);
    rc = mc__etcd_delete(m->c, key, strlen(key), NULL, 0, NULL);
    if (rc)
        MC_WARN("could not remove %s from etcd: %s", key, mc_strerror(rc));
    if (m->lease) {
        rc = mc__etcd_lease_revoke(m->c, m->lease);
        if (rc && rc != MC_ERR_ETCD_KEY_NOT_EXIST)
            MC_WARN("could not revoke etcd lease %" PRId64 ": %s", m->lease, mc_strerror(rc));
        m->lease = 0;
    }
}

void mc__meta_etcd_close(mc__meta_etcd_t *m) {
    if (!m)
        return;
    mc__etcd_meta_stop_thread(m);
    mc__etcd_close(m->c);
    pthread_mutex_destroy(&m->lock);
    pthread_cond_destroy(&m->cond);
    mc__free(m->key);
    mc__free(m->json);
    mc__free(m);
}
