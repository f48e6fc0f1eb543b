/* The put path: placing a new object's replicas (evicting, or waiting for offloads, to make
 * room), PUT_START of one key, and the moment a put is finished. upsert.c builds on it; ops.c
 * runs the batches and writes the replies. */
#include <string.h>

#include "master/disk.h"
#include "master/master_internal.h"
#include "master/persist.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"

/* How long a put waits for offloads to make room before it gives up (NO_AVAILABLE_HANDLE). */
#define MC__OFFLOAD_WAIT_MS 2000u

int32_t mc__place_object(mc__master_t *m, const uint8_t *key, uint32_t key_len, uint32_t hash,
                         uint64_t len, const mc__replicate_config_t *cfg, uint64_t now,
                         mc__object_t **out) {
    mc__replica_t reps[MC_MP_MAX_REPLICA_NUM];
    mc__object_t *o = NULL;
    int placed = mc__place(m, len, cfg, reps);
    *out = NULL;
    /* Recovering (a restored segment awaits its owner, who may be back within a heartbeat):
     * evicting now would destroy objects to make room the owners may be about to bring. The
     * client retries this code until its recovery wait is over (MC_STORE_RECOVERY_WAIT_MS); a
     * restored owner is back or expired within client_ttl. */
    if (placed < 0 && mc__master_recovering(m)) {
        atomic_fetch_add_explicit(&m->placements_deferred, 1, memory_order_relaxed);
        return MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS;
    }
    /* Nowhere to put even one replica: make room (LRU eviction) and try once more. Fewer
     * replicas than asked is accepted (best effort) and visible in the reply. */
    if (placed < 0 &&
        mc__evict(m, mc__seg_round(len) * cfg->replica_num, mc__seg_round(len), 1) > 0)
        placed = mc__place(m, len, cfg, reps);
    /* With offloads running, what eviction could not take yet (queued for the disk, or being
     * copied there) leaves memory once its copy is durable: wait for that (bounded) and evict
     * again rather than fail the put. Bounded well inside a client's RPC timeout (5 s). */
    for (uint64_t until = mc__now_ms() + MC__OFFLOAD_WAIT_MS;
         placed < 0 && mc__disk_offloading(m) && mc__now_ms() < until;) {
        int waiting = mc__disk_pending(m) > 0;
        if (waiting)
            mc__disk_wait(m, 100);
        if (mc__evict(m, mc__seg_round(len) * cfg->replica_num, mc__seg_round(len), 1) > 0 ||
            waiting)
            placed = mc__place(m, len, cfg, reps);
        if (!waiting)
            break;
    }
    if (placed < 0)
        return placed;
    o = mc__object_new(key, key_len, hash, (uint8_t)placed);
    if (!o) {
        for (int i = 0; i < placed; i++)
            mc__free_replica(m, &reps[i]);
        return MC_ERR_INTERNAL_ERROR;
    }
    o->size = len;
    o->access_ms = now;
    o->version = atomic_fetch_add(&m->next_version, 1) + 1; /* never 0 */
    o->flags = (uint8_t)(((cfg->flags & MC_MP_CFG_HARD_PIN) ? MC__OBJ_HARD_PIN : 0) |
                         ((cfg->flags & MC_MP_CFG_PROMOTE) ? MC__OBJ_PROMOTED : 0) |
                         ((cfg->flags & MC_MP_CFG_SOFT_PIN) ? MC__OBJ_SOFT_PIN : 0) |
                         ((cfg->flags & (MC_MP_CFG_SOFT_PIN | MC_MP_CFG_SOFT_UNPIN)) == 0
                              ? MC__OBJ_PIN_KEEP
                              : 0));
    o->soft_pin_until =
        cfg->soft_pin_ttl_ms ? cfg->soft_pin_ttl_ms : (uint64_t)m->cfg.default_kv_soft_pin_ttl_ms;
    memcpy(mc__obj_reps(o), reps, (size_t)placed * sizeof(*reps));
    *out = o;
    return 0;
}

void mc__object_complete(mc__master_t *m, mc__shard_t *s, mc__object_t *o, uint64_t now) {
    o->flags |= MC__OBJ_COMPLETE;
    s->incomplete--;
    o->access_ms = now;
    /* A promotion serves the reads that admitted it: it starts as just read (leased), or the
     * eviction its own bytes may set off could take it first, the objects those reads leased
     * being the only others left to take. */
    if ((o->flags & MC__OBJ_PROMOTED) &&
        o->lease_until < now + (uint64_t)m->cfg.default_kv_lease_ttl_ms)
        o->lease_until = now + (uint64_t)m->cfg.default_kv_lease_ttl_ms;
    if (o->flags & MC__OBJ_SOFT_PIN)
        o->soft_pin_until += now; /* put_start stored the TTL there */
    mc__gauge_objects(m, 1, (int64_t)o->size);
    mc__value_size_record(m, o->size);
    mc__persist_obj_set(m, o);
    mc__kv_event(m, MC__KV_STORED, o->data, o->key_len, "cpu");
    mc__disk_on_complete(m, o);
}

void mc__object_publish(mc__master_t *m, mc__shard_t *s, mc__object_t *o, uint64_t now) {
    /* Its put start for the moment it is unfinished in the shard: left 0, the insert would mark
     * the shard as holding a put due for discarding, and the next sweep would walk all of it. */
    o->access_ms = now;
    mc__shard_insert(s, o);
    mc__object_complete(m, s, o, now);
}

int32_t mc__put_start_one(mc__master_t *m, const mc__mp_str_t *key, uint64_t len,
                          const mc__replicate_config_t *cfg, uint64_t now, mc__replica_t *reps,
                          uint8_t *n_out, uint64_t *version) {
    uint32_t hash = mc__key_hash(key->p, key->len);
    mc__shard_t *s = mc__shard_of(m, hash);
    mc__object_t *o = NULL;
    int32_t code = 0;
    *n_out = 0;
    if (len == 0 || len > MC_MP_MAX_SEGMENT_SIZE) /* no segment could hold it */
        return MC_ERR_INVALID_PARAMS;
    pthread_mutex_lock(&s->mu);
    o = mc__shard_find(s, hash, key->p, key->len);
    if (o && !mc__maybe_discard(m, s, o, now))
        code = MC_ERR_OBJECT_ALREADY_EXISTS;
    else if (mc__disk_find(m, key->p, key->len, hash, 0, 0, NULL) != 0)
        code = (cfg->flags & MC_MP_CFG_PROMOTE) ? 0 : MC_ERR_OBJECT_ALREADY_EXISTS; /* on disk */
    else if (cfg->flags & MC_MP_CFG_PROMOTE)
        code = MC_ERR_OBJECT_NOT_FOUND; /* nothing left on disk to promote */
    pthread_mutex_unlock(&s->mu);
    if (code)
        return code;

    code = mc__place_object(m, key->p, key->len, hash, len, cfg, now, &o);
    return code ? code : mc__insert_placed(m, s, o, reps, n_out, version);
}

int32_t mc__insert_placed(mc__master_t *m, mc__shard_t *s, mc__object_t *o, mc__replica_t *reps,
                          uint8_t *n_out, uint64_t *version) {
    int32_t code = 0;
    pthread_mutex_lock(&s->mu);
    if (mc__shard_find(s, o->hash, o->data, o->key_len)) {
        code = MC_ERR_OBJECT_ALREADY_EXISTS; /* a concurrent put_start won the key */
    } else {
        *n_out = o->n_replicas;
        *version = o->version;
        memcpy(reps, mc__obj_reps(o), (size_t)o->n_replicas * sizeof(*reps));
        mc__shard_insert(s, o);
        o = NULL;
    }
    pthread_mutex_unlock(&s->mu);
    if (o)
        mc__object_destroy(m, o);
    return code;
}
