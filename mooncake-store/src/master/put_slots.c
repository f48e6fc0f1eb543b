/* Put slots: placements a client reserves ahead of its puts (PUT_RESERVE), and the commit that
 * turns one into a finished object under a key (PUT_COMMIT, or PUT_COMMIT_FOR when the slot's
 * holder forwards the commits of several clients in one request), so that a small put costs its
 * write and one round trip instead of three.
 *
 * A slot is an unfinished put like any other, under a key no client can send (MC__SLOT_PREFIX,
 * then the client id and the slot's version): it is placed, logged (its allocation is on disk
 * before the reply), swept when its segment goes, discarded after put_start_discard_timeout and
 * restored as an orphan after a restart exactly as an unfinished put is. A commit does what a
 * PUT_END does, recording the object before the reply, so a put that a commit acknowledged
 * survives a restart or failover as one that a put end acknowledged does. */
#include <string.h>

#include "master/disk.h"
#include "master/master_internal.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"

/* No client key holds a NUL (the upsert shadow's suffix uses one too). */
#define MC__SLOT_PREFIX "\0s"
#define MC__SLOT_PREFIX_LEN 2u
#define MC__SLOT_KEY_LEN (MC__SLOT_PREFIX_LEN + MC_MP_CLIENT_ID_LEN + 8u)

/* The key of client's slot of version v. */
static void mc__slot_key(const uint8_t *client, uint64_t v, uint8_t out[MC__SLOT_KEY_LEN]) {
    memcpy(out, MC__SLOT_PREFIX, MC__SLOT_PREFIX_LEN);
    memcpy(out + MC__SLOT_PREFIX_LEN, client, MC_MP_CLIENT_ID_LEN);
    for (int i = 0; i < 8; i++)
        out[MC__SLOT_PREFIX_LEN + MC_MP_CLIENT_ID_LEN + i] = (uint8_t)(v >> (56 - 8 * i));
}

int32_t mc__put_reserve_one(mc__master_t *m, const uint8_t *client, uint64_t len,
                            const mc__replicate_config_t *cfg, uint64_t now, mc__replica_t *reps,
                            uint8_t *n_out, uint64_t *version) {
    uint8_t key[MC__SLOT_KEY_LEN] = {0};
    mc__object_t *o = NULL;
    int32_t code;
    *n_out = 0;
    if (len == 0 || len > MC_MP_MAX_SEGMENT_SIZE)
        return MC_ERR_INVALID_PARAMS;
    /* The key names the version, which placing assigns: placed under a blank key, named after.
     * Versions are unique, so no other slot has that key. */
    code = mc__place_object(m, key, MC__SLOT_KEY_LEN, 0, len, cfg, now, &o);
    if (code)
        return code;
    mc__slot_key(client, o->version, o->data);
    o->hash = mc__key_hash(o->data, MC__SLOT_KEY_LEN);
    return mc__insert_placed(m, mc__shard_of(m, o->hash), o, reps, n_out, version);
}

/* With sk locked: the live object of key (a stale unfinished put is discarded first), or 1 when
 * only the disk tier holds it. */
static int mc__key_taken(mc__master_t *m, mc__shard_t *sk, uint32_t hash, const mc__mp_str_t *key,
                         uint64_t now) {
    mc__object_t *cur = mc__shard_find(sk, hash, key->p, key->len);
    if (cur && !mc__maybe_discard(m, sk, cur, now))
        return 1;
    return mc__disk_find(m, key->p, key->len, hash, 0, 0, NULL) != 0;
}

/* One commit entry. The caller holds placement (read), so no segment drop runs while the slot
 * is out of its shard between the two shard locks (never both held). */
static int32_t mc__commit_one(mc__master_t *m, const uint8_t *client, const mc__mp_str_t *key,
                              uint64_t len, uint64_t slot, uint64_t now) {
    uint8_t skey[MC__SLOT_KEY_LEN];
    uint32_t shash, hash = mc__key_hash(key->p, key->len);
    mc__shard_t *ss, *sk = mc__shard_of(m, hash);
    mc__object_t *sl, *o = NULL;
    int32_t code = 0;
    mc__slot_key(client, slot, skey);
    shash = mc__key_hash(skey, MC__SLOT_KEY_LEN);
    ss = mc__shard_of(m, shash);
    pthread_mutex_lock(&ss->mu);
    sl = mc__shard_find(ss, shash, skey, MC__SLOT_KEY_LEN);
    /* Gone: discarded as stale, swept with its segment, or lost with a restart. */
    if (!sl || (sl->flags & MC__OBJ_COMPLETE) || sl->version != slot ||
        mc__maybe_discard(m, ss, sl, now))
        code = MC_ERR_OBJECT_NOT_FOUND;
    else if (len > sl->size)
        code = MC_ERR_INVALID_PARAMS;
    else
        mc__shard_unlink(ss, sl);
    pthread_mutex_unlock(&ss->mu);
    if (code)
        return code;
    if (len == 0) { /* given back unused: its writer is done with it, as a revoke says */
        mc__object_destroy(m, sl);
        return 0;
    }
    pthread_mutex_lock(&sk->mu);
    if (mc__key_taken(m, sk, hash, key, now))
        code = MC_ERR_OBJECT_ALREADY_EXISTS; /* the first value stays; the slot stays reserved */
    else if (!(o = mc__object_new(key->p, key->len, hash, sl->n_replicas)))
        code = MC_ERR_INTERNAL_ERROR;
    if (o) {
        o->size = len;
        o->flags = sl->flags;
        o->soft_pin_until = sl->soft_pin_until; /* a TTL until the object completes */
        o->version = sl->version;
        memcpy(mc__obj_reps(o), mc__obj_reps(sl), (size_t)sl->n_replicas * sizeof(mc__replica_t));
        mc__object_publish(m, sk, o, now); /* recorded before the reply, as a put end is */
    }
    pthread_mutex_unlock(&sk->mu);
    if (o) {
        mc__free(sl); /* its replicas are o's now */
        return 0;
    }
    pthread_mutex_lock(&ss->mu);
    mc__shard_insert(ss, sl);
    pthread_mutex_unlock(&ss->mu);
    return code;
}

/* A commit entry looks up two records, each a cache miss or two in a big table: its slot and its
 * key (mc__prefetch_ahead's fn for a PUT_COMMIT request). */
static void mc__commit_entry_prefetch(mc__master_t *m, const void *request, uint32_t j,
                                      int object) {
    const mc__mp_request_t *r = request;
    uint8_t skey[MC__SLOT_KEY_LEN];
    uint32_t shash;
    mc__slot_key(r->key_clients ? r->key_clients[j] : r->client_id, r->slots[j], skey);
    shash = mc__key_hash(skey, MC__SLOT_KEY_LEN);
    if (object)
        mc__shard_prefetch_object(mc__shard_of(m, shash), shash);
    else
        mc__shard_prefetch(mc__shard_of(m, shash), shash);
    mc__prefetch_key(m, &r->keys[j], object);
}

int mc__op_put_commit(mc__master_t *m, const mc__mp_request_t *r, mc_buf_t *out, uint32_t *errors,
                      uint32_t *puts, uint32_t *ended) {
    int32_t small[64];
    int32_t *codes = r->n_keys <= 64 ? small : mc__malloc((size_t)r->n_keys * sizeof(int32_t));
    uint64_t now = mc__now_ms();
    int rc;
    if (!codes)
        return MC_ERR_MEMORY;
    for (uint32_t i = 0; i < r->n_keys; i++) {
        /* PUT_COMMIT_FOR: a forwarder's entry commits the slot of the client it names, exactly
         * as that client's own PUT_COMMIT would */
        const uint8_t *client = r->key_clients ? r->key_clients[i] : r->client_id;
        mc__prefetch_ahead(m, r->n_keys, i, mc__commit_entry_prefetch, r);
        pthread_rwlock_rdlock(&m->placement);
        codes[i] = mc__commit_one(m, client, &r->keys[i], r->value_lens[i], r->slots[i], now);
        pthread_rwlock_unlock(&m->placement);
        *errors += codes[i] != 0; /* as a put start counts an existing key */
        *puts += r->value_lens[i] != 0;
        *ended += r->value_lens[i] != 0 && codes[i] == 0;
    }
    rc = mc__mp_encode_codes_reply(out, r->type, r->request_id, r->n_keys, codes);
    if (codes != small)
        mc__free(codes);
    return rc;
}
