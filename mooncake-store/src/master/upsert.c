/* Upserts (insert or replace) and replica clearing, one key each; ops.c runs the batches.
 *
 * An upsert never writes into bytes a reader may be reading. When the key exists, the new value
 * goes to new space held by a shadow object (the key plus MC__SHADOW_SUFFIX, in the same shard)
 * while readers keep getting the old value; UPSERT_END swaps the shadow in and retires the old
 * object, holding its space until its lease (a reader's) has passed. When the key does not exist
 * the upsert is a put. Each upsert start hands out the version of the object it placed, and its
 * end or revoke must name it: a writer that was preempted by a later upsert, or whose placement
 * was discarded as stale, is told OBJECT_NOT_FOUND instead of publishing someone else's
 * unfinished bytes. The reference updates an object of the same size in place (the key is then
 * unreadable until the end, and an upsert is refused while a reader holds it); see
 * docs/compatibility.md. */
#include <string.h>

#include "master/master_internal.h"
#include "master/persist.h"
#include "mooncake/common/alloc.h"
#include "mooncake/error.h"

/* The shadow key of key (which is at most MC_MP_MAX_KEY bytes). */
static uint32_t mc__shadow_key(const mc__mp_str_t *key, uint8_t *out) {
    memcpy(out, key->p, key->len);
    memcpy(out + key->len, MC__SHADOW_SUFFIX, MC__SHADOW_SUFFIX_LEN);
    return key->len + MC__SHADOW_SUFFIX_LEN;
}

/* With the shard locked: the key's object (stale unfinished puts discarded first). */
static mc__object_t *mc__find_live(mc__master_t *m, mc__shard_t *s, uint32_t hash,
                                   const uint8_t *key, uint32_t len, uint64_t now) {
    mc__object_t *o = mc__shard_find(s, hash, key, len);
    if (o && mc__maybe_discard(m, s, o, now))
        o = NULL;
    return o;
}

#define MC__UPSERT_TRIES 4

int32_t mc__upsert_start_one(mc__master_t *m, const mc__mp_str_t *key, uint64_t len,
                             const mc__replicate_config_t *cfg, uint64_t now, mc__replica_t *reps,
                             uint8_t *n_out, uint64_t *version) {
    uint8_t shadow[MC_MP_MAX_KEY + MC__SHADOW_SUFFIX_LEN];
    uint32_t shadow_len = mc__shadow_key(key, shadow);
    uint32_t hash = mc__key_hash(key->p, key->len);
    mc__shard_t *s = mc__shard_of(m, hash);
    *n_out = 0;
    if (len == 0 || len > MC_MP_MAX_SEGMENT_SIZE)
        return MC_ERR_INVALID_PARAMS;
    /* Where the new value goes depends on whether the key exists; placing happens without the
     * shard lock, so the answer is checked again before inserting (and placed again if it
     * changed in between, which only a concurrent writer of the same key can cause). */
    for (int attempt = 0; attempt < MC__UPSERT_TRIES; attempt++) {
        mc__object_t *o = NULL, *old = NULL;
        int exists;
        int32_t code;
        pthread_mutex_lock(&s->mu);
        exists = mc__find_live(m, s, hash, key->p, key->len, now) != NULL;
        pthread_mutex_unlock(&s->mu);
        code = exists ? mc__place_object(m, shadow, shadow_len, hash, len, cfg, now, &o)
                      : mc__place_object(m, key->p, key->len, hash, len, cfg, now, &o);
        if (code)
            return code;
        pthread_mutex_lock(&s->mu);
        if ((mc__find_live(m, s, hash, key->p, key->len, now) != NULL) == exists) {
            /* A later upsert preempts an unfinished earlier one at once (as the reference's
             * does); the earlier writer's end then finds no object of its version. */
            old = exists ? mc__shard_find(s, hash, shadow, shadow_len) : NULL;
            if (old)
                mc__object_retire(m, s, old, now);
            *n_out = o->n_replicas;
            *version = o->version;
            memcpy(reps, mc__obj_reps(o), (size_t)o->n_replicas * sizeof(*reps));
            mc__shard_insert(s, o);
            o = NULL;
        }
        pthread_mutex_unlock(&s->mu);
        if (!o)
            return 0;
        mc__object_destroy(m, o);
    }
    return MC_ERR_OBJECT_ALREADY_EXISTS; /* the key kept changing under us */
}

/* With the shard locked: the shadow sh becomes the key's object; the one it replaces (finished,
 * or an unfinished plain put) is retired. */
static int32_t mc__shadow_publish(mc__master_t *m, mc__shard_t *s, mc__object_t *sh,
                                  const mc__mp_str_t *key, uint32_t hash, mc__object_t *cur,
                                  uint64_t now) {
    mc__object_t *o = mc__object_new(key->p, key->len, hash, sh->n_replicas);
    if (!o)
        return MC_ERR_INTERNAL_ERROR; /* the shadow stays; the master discards it later */
    o->size = sh->size;
    o->flags = sh->flags;
    o->soft_pin_until = sh->soft_pin_until; /* a TTL until the object completes */
    if ((o->flags & MC__OBJ_PIN_KEEP) && cur && (cur->flags & MC__OBJ_SOFT_PIN)) {
        o->flags |= MC__OBJ_SOFT_PIN; /* PRESERVE: the pin goes on as long as it had left */
        o->soft_pin_until = cur->soft_pin_until > now ? cur->soft_pin_until - now : 0;
    }
    o->version = sh->version;
    memcpy(mc__obj_reps(o), mc__obj_reps(sh), (size_t)sh->n_replicas * sizeof(mc__replica_t));
    /* The replicas now belong to o: drop the shadow's record only. */
    mc__shard_unlink(s, sh);
    mc__free(sh);
    if (cur)
        mc__object_retire(m, s, cur, now);
    mc__object_publish(m, s, o, now);
    return 0;
}

int32_t mc__put_finish_one(mc__master_t *m, uint8_t type, const mc__mp_str_t *key, uint64_t version,
                           uint64_t now) {
    uint8_t shadow[MC_MP_MAX_KEY + MC__SHADOW_SUFFIX_LEN];
    int end = type == MC_MP_PUT_END || type == MC_MP_UPSERT_END;
    int upsert = type == MC_MP_UPSERT_END || type == MC_MP_UPSERT_REVOKE;
    uint32_t hash = mc__key_hash(key->p, key->len);
    mc__shard_t *s = mc__shard_of(m, hash);
    mc__object_t *o = NULL, *sh = NULL;
    int32_t code = MC_ERR_OBJECT_NOT_FOUND;
    pthread_mutex_lock(&s->mu);
    o = mc__shard_find(s, hash, key->p, key->len);
    if (upsert)
        sh = mc__shard_find(s, hash, shadow, mc__shadow_key(key, shadow));
    if (o && o->version == version) {
        /* This writer's object under the key: a put, or an upsert that created the key. */
        if (!(o->flags & MC__OBJ_COMPLETE)) {
            if (end) {
                mc__object_complete(m, s, o, now);
            } else {
                mc__shard_unlink(s, o);
                mc__object_destroy(m, o);
            }
            code = 0;
        } else {
            code = end ? 0 : MC_ERR_INVALID_PARAMS; /* a retried end; a finished one is removed */
        }
    } else if (sh && sh->version == version) {
        if (end) {
            code = mc__shadow_publish(m, s, sh, key, hash, o, now);
        } else {
            mc__shard_unlink(s, sh);
            mc__object_destroy(m, sh);
            code = 0;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return code;
}

int32_t mc__replica_clear_one(mc__master_t *m, const mc__mp_str_t *key, const mc__mp_str_t *segment,
                              uint64_t now) {
    uint32_t hash = mc__key_hash(key->p, key->len);
    mc__shard_t *s = mc__shard_of(m, hash);
    mc__object_t *o = NULL;
    int32_t code = 0;
    pthread_mutex_lock(&s->mu);
    o = mc__shard_find(s, hash, key->p, key->len);
    if (!o || !(o->flags & MC__OBJ_COMPLETE)) {
        code = MC_ERR_OBJECT_NOT_FOUND;
    } else if (o->lease_until > now) {
        code = MC_ERR_OBJECT_HAS_LEASE;
    } else if (segment->len == 0) {
        mc__shard_unlink(s, o);
        mc__object_destroy(m, o);
    } else {
        mc__replica_t *reps = mc__obj_reps(o);
        uint8_t kept = 0;
        for (uint8_t i = 0; i < o->n_replicas; i++) {
            char name[MC_MP_MAX_SEGMENT_NAME + 1];
            uint32_t n = mc__segment_name(m, reps[i].seg, name, NULL, NULL);
            if (n == segment->len && memcmp(name, segment->p, n) == 0)
                mc__free_replica(m, &reps[i]);
            else
                reps[kept++] = reps[i];
        }
        if (kept == o->n_replicas) {
            code = MC_ERR_OBJECT_NOT_FOUND;
        } else {
            o->n_replicas = kept;
            if (kept == 0) {
                mc__shard_unlink(s, o);
                mc__object_destroy(m, o);
            } else {
                mc__persist_obj_set(m, o);
            }
        }
    }
    pthread_mutex_unlock(&s->mu);
    return code;
}
