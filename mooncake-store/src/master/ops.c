/* The master's operations: one decoded request in, one reply frame out. */
#include <regex.h>
#include <string.h>
#include <time.h>

#include "master/disk.h"
#include "master/master_internal.h"
#include "master/persist.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"
#include "proto/disk_proto.h"
#include "proto/task_proto.h"

static int mc__leased(const mc__object_t *o, uint64_t now) {
    return o->lease_until > now;
}

/* A forced removal holds a leased object's space only as long as a client may still read it
 * through a cached replica list (MC_MP_CACHED_LEASE_MS from its request, plus slack), not for
 * the whole lease: force is for cleaning up, and the space should come back soon. */
static void mc__lease_cap_for_force(mc__object_t *o, uint64_t now) {
    uint64_t cap = now + MC_MP_CACHED_LEASE_MS + MC_MP_CACHED_LEASE_SLACK_MS;
    if (o->lease_until > cap)
        o->lease_until = cap;
}

/* The replicas of one key, and its LOCAL_DISK copy (dh, may be NULL) last. */
static void mc__put_replicas_disk(mc__master_t *m, mc_buf_t *out, int32_t code, uint64_t size,
                                  uint64_t lease_ms, const mc__replica_t *reps, uint8_t n,
                                  uint8_t status, const mc__disk_hit_t *dh) {
    char names[MC_MP_MAX_REPLICA_NUM][MC_MP_MAX_SEGMENT_NAME + 1];
    uint64_t bases[MC_MP_MAX_REPLICA_NUM];
    uint64_t epochs[MC_MP_MAX_REPLICA_NUM];
    uint32_t lens[MC_MP_MAX_REPLICA_NUM];
    uint8_t shown = 0;
    /* Names first: a replica whose segment vanished meanwhile is left out of the count. */
    for (uint8_t i = 0; i < n; i++) {
        lens[i] = mc__segment_name(m, reps[i].seg, names[i], &bases[i], &epochs[i]);
        shown = (uint8_t)(shown + (lens[i] != 0));
    }
    if (code == 0 && n > 0 && shown == 0 && !dh)
        code = MC_ERR_OBJECT_NOT_FOUND;
    mc__mp_replicas_reply_item(out, code, code ? 0 : size, code ? 0 : lease_ms,
                               code ? 0 : shown + (dh != NULL));
    if (code)
        return;
    for (uint8_t i = 0; i < n; i++)
        if (lens[i])
            mc__mp_replicas_reply_replica(out, names[i], lens[i], bases[i] + reps[i].off, size,
                                          epochs[i], status);
    if (dh)
        mc__mp_replicas_reply_replica(out, dh->endpoint, dh->endpoint_len, 0, dh->size, dh->version,
                                      MC_MP_REPLICA_DISK);
}

void mc__put_replicas(mc__master_t *m, mc_buf_t *out, int32_t code, uint64_t size,
                      uint64_t lease_ms, const mc__replica_t *reps, uint8_t n, uint8_t status) {
    mc__put_replicas_disk(m, out, code, size, lease_ms, reps, n, status, NULL);
}

/* PUT_START, UPSERT_START and PUT_RESERVE (put slots: placements with no key yet): the same
 * reply (each item carries the version of its placement, which the end, revoke or commit
 * names), the same eviction wake-up. */
static void mc__op_put_start(mc__master_t *m, const mc__mp_request_t *r, mc_buf_t *out,
                             uint32_t *errors) {
    const mc__replicate_config_t *cfg = &r->config;
    /* A soft pin longer than max_kv_soft_pin_ttl is refused, as the reference refuses it. */
    int bad_cfg = cfg->replica_num == 0 || cfg->replica_num > MC_MP_MAX_REPLICA_NUM ||
                  ((cfg->flags & MC_MP_CFG_PROMOTE) && r->type != MC_MP_PUT_START) ||
                  ((cfg->flags & MC_MP_CFG_SOFT_PIN) &&
                   cfg->soft_pin_ttl_ms > (uint64_t)m->cfg.max_kv_soft_pin_ttl_ms);
    uint64_t now = mc__now_ms();
    size_t start = 0;
    int reserve = r->type == MC_MP_PUT_RESERVE;
    uint32_t count = reserve ? r->n_slots : r->n_keys;
    mc__mp_replicas_reply_begin(out, r->type, r->request_id, count, &start);
    for (uint32_t i = 0; i < count; i++) {
        mc__replica_t reps[MC_MP_MAX_REPLICA_NUM];
        uint8_t n = 0;
        uint64_t version = 0, len = reserve ? r->size : r->value_lens[i];
        int32_t code = MC_ERR_INVALID_PARAMS;
        /* a put start looks its key up as a get does (slots have no key yet) */
        if (!reserve)
            mc__shard_prefetch_keys(m, r->keys, r->n_keys, i);
        /* Held until the reply names the replicas' segments, so an unmount cannot free (and a
         * mount reuse) a slot in between. */
        pthread_rwlock_rdlock(&m->placement);
        if (!bad_cfg && reserve)
            code = mc__put_reserve_one(m, r->client_id, len, cfg, now, reps, &n, &version);
        else if (!bad_cfg && r->type == MC_MP_UPSERT_START)
            code = mc__upsert_start_one(m, &r->keys[i], len, cfg, now, reps, &n, &version);
        else if (!bad_cfg)
            code = mc__put_start_one(m, &r->keys[i], len, cfg, now, reps, &n, &version);
        *errors += code != 0;
        if (code == MC_ERR_NO_AVAILABLE_HANDLE)
            atomic_fetch_add_explicit(&m->put_alloc_failures, 1, memory_order_relaxed);
        else if (code == 0 && n < cfg->replica_num)
            atomic_fetch_add_explicit(&m->put_partial_allocs, 1, memory_order_relaxed);
        mc__put_replicas(m, out, code, len, version, reps, n, MC_MP_REPLICA_PROCESSING);
        pthread_rwlock_unlock(&m->placement);
    }
    mc__buf_frame_end(out, start);
    /* Above the high watermark: let the monitor evict in the background. */
    if ((double)atomic_load(&m->used_bytes) >
        m->cfg.eviction_high_watermark_ratio * (double)atomic_load(&m->capacity_bytes)) {
        pthread_mutex_lock(&m->mon_mu);
        m->evict_wanted = 1;
        pthread_cond_signal(&m->mon_cv);
        pthread_mutex_unlock(&m->mon_mu);
    }
}

static void mc__op_get(mc__master_t *m, const mc__mp_request_t *r, mc_buf_t *out,
                       uint32_t *errors) {
    uint64_t now = mc__now_ms();
    uint64_t ttl = (uint64_t)m->cfg.default_kv_lease_ttl_ms;
    size_t start = 0;
    atomic_fetch_add_explicit(&m->gets, r->n_keys, memory_order_relaxed);
    mc__mp_replicas_reply_begin(out, r->type, r->request_id, r->n_keys, &start);
    for (uint32_t i = 0; i < r->n_keys; i++) {
        const mc__mp_str_t *k = &r->keys[i];
        uint32_t hash = mc__key_hash(k->p, k->len);
        mc__shard_t *s = mc__shard_of(m, hash);
        mc__replica_t reps[MC_MP_MAX_REPLICA_NUM];
        uint8_t n = 0;
        uint64_t size = 0;
        int32_t code = 0;
        mc__object_t *o = NULL;
        mc__disk_hit_t dh;
        int on_disk = 0;
        mc__shard_prefetch_keys(m, r->keys, r->n_keys, i);
        pthread_mutex_lock(&s->mu);
        o = mc__shard_find(s, hash, k->p, k->len);
        if (o && !(o->flags & MC__OBJ_COMPLETE))
            o = NULL;
        on_disk = mc__disk_find(m, k->p, k->len, hash, 1, o != NULL, &dh);
        if (!o && on_disk) {
            size = dh.size; /* LOCAL_DISK only: no lease (the node serves a verified copy) */
        } else if (!o) {
            code = MC_ERR_OBJECT_NOT_FOUND;
        } else {
            if (o->lease_until < now + ttl)
                o->lease_until = now + ttl;
            o->access_ms = now;
            if (o->flags & MC__OBJ_SOFT_PIN)
                o->soft_pin_until = now + (uint64_t)m->cfg.default_kv_soft_pin_ttl_ms;
            n = o->n_replicas;
            size = o->size;
            memcpy(reps, mc__obj_reps(o), (size_t)n * sizeof(*reps));
        }
        *errors += code != 0;
        if (!code) {
            atomic_fetch_add_explicit(&m->get_hits, 1, memory_order_relaxed);
            atomic_fetch_add_explicit(&m->get_hit_bytes, size, memory_order_relaxed);
        }
        /* Under the shard lock: a segment drop must sweep this object before its slot goes. */
        mc__put_replicas_disk(m, out, code, size, ttl, reps, n, MC_MP_REPLICA_COMPLETE,
                              on_disk ? &dh : NULL);
        pthread_mutex_unlock(&s->mu);
    }
    mc__buf_frame_end(out, start);
}

/* Per-key operations that answer with a code each. */
static int32_t mc__code_one(mc__master_t *m, uint8_t type, const mc__mp_str_t *k, int force,
                            uint64_t now) {
    uint32_t hash = mc__key_hash(k->p, k->len);
    mc__shard_t *s = mc__shard_of(m, hash);
    mc__object_t *o = NULL;
    mc__object_t *dead = NULL;
    int32_t code = 0;
    pthread_mutex_lock(&s->mu);
    o = mc__shard_find(s, hash, k->p, k->len);
    switch (type) {
    case MC_MP_EXIST:
        /* No lease, unlike the reference's: a probe is not a read, and it must not keep an
         * object from eviction or removal (get_replica_desc takes one). */
        code =
            (o && (o->flags & MC__OBJ_COMPLETE)) || mc__disk_find(m, k->p, k->len, hash, 0, 0, NULL)
                ? 1
                : 0;
        break;
    case MC_MP_REMOVE:
        if (!o)
            code = mc__disk_forget(m, k->p, k->len, hash) ? 0 : MC_ERR_OBJECT_NOT_FOUND;
        else if (!force && !(o->flags & MC__OBJ_COMPLETE))
            code = MC_ERR_REPLICA_IS_NOT_READY;
        else if (!force && mc__leased(o, now))
            code = MC_ERR_OBJECT_HAS_LEASE;
        else
            dead = o;
        break;
    default:
        code = MC_ERR_INVALID_PARAMS;
        break;
    }
    if (dead) {
        /* Forced past a lease: the key goes now, its bytes stay until the lease has passed
         * (readers may be reading them, or reuse a cached location). An unfinished put forced
         * out is freed at once, as before. */
        if (dead->flags & MC__OBJ_COMPLETE) {
            mc__lease_cap_for_force(dead, now);
            mc__object_retire(m, s, dead, now);
        } else {
            mc__shard_unlink(s, dead);
            mc__object_destroy(m, dead);
        }
        mc__disk_forget(m, k->p, k->len, hash);
    }
    pthread_mutex_unlock(&s->mu);
    return code;
}

static int mc__op_codes(mc__master_t *m, const mc__mp_request_t *r, mc_buf_t *out,
                        uint32_t *errors) {
    int32_t small[64];
    int32_t *codes = r->n_keys <= 64 ? small : mc__malloc((size_t)r->n_keys * sizeof(int32_t));
    uint64_t now = mc__now_ms();
    int rc = 0;
    /* keys of objects, except a segment-unreachable report's, which names segments */
    int objects = r->type != MC_MP_SEGMENT_UNREACHABLE;
    if (!codes)
        return MC_ERR_MEMORY;
    for (uint32_t i = 0; i < r->n_keys; i++) {
        if (objects)
            mc__shard_prefetch_keys(m, r->keys, r->n_keys, i);
        switch (r->type) {
        case MC_MP_SEGMENT_UNREACHABLE:
            codes[i] = mc__segment_unreachable(m, &r->keys[i]);
            break;
        case MC_MP_PUT_END:
        case MC_MP_PUT_REVOKE:
        case MC_MP_UPSERT_END:
        case MC_MP_UPSERT_REVOKE:
            codes[i] = mc__put_finish_one(m, r->type, &r->keys[i], r->value_lens[i], now);
            break;
        case MC_MP_REPLICA_CLEAR:
            codes[i] = mc__replica_clear_one(m, &r->keys[i], &r->segment_name, now);
            break;
        case MC_MP_DISK_ANNOUNCE:
        case MC_MP_DISK_DONE:
            codes[i] = 0; /* filled below, all at once */
            break;
        default:
            codes[i] = mc__code_one(m, r->type, &r->keys[i], r->force, now);
            break;
        }
        *errors += codes[i] < 0;
    }
    if (r->type == MC_MP_DISK_ANNOUNCE || r->type == MC_MP_DISK_DONE) {
        rc = r->type == MC_MP_DISK_ANNOUNCE ? mc__disk_announce(m, r, codes)
                                            : mc__disk_done(m, r, codes);
        if (rc) {
            if (codes != small)
                mc__free(codes);
            *errors = r->n_keys;
            return mc__mp_encode_error_reply(out, r->type, r->request_id, rc,
                                             mc_store_strerror(rc));
        }
        for (uint32_t i = 0; i < r->n_keys; i++)
            *errors += codes[i] < 0;
    }
    rc = mc__mp_encode_codes_reply(out, r->type, r->request_id, r->n_keys, codes);
    if (codes != small)
        mc__free(codes);
    return rc;
}

typedef struct mc__remove_all_arg {
    uint64_t now;
    int force;
    int64_t removed;
    const regex_t *re; /* NULL: every object */
    char key[MC_MP_MAX_KEY + 1];
} mc__remove_all_arg_t;

static int mc__remove_all_visit(mc__master_t *m, mc__object_t *o, void *arg) {
    mc__remove_all_arg_t *a = arg;
    (void)m;
    if (!(o->flags & MC__OBJ_COMPLETE) || (!a->force && mc__leased(o, a->now)))
        return 0;
    if (a->re) {
        memcpy(a->key, o->data, o->key_len);
        a->key[o->key_len] = '\0';
        if (regexec(a->re, a->key, 0, NULL, 0) != 0)
            return 0;
    }
    a->removed++;
    /* forced past a lease: the bytes stay while cached reads may still start (see
     * mc__lease_cap_for_force), then go (mc__object_release) */
    mc__lease_cap_for_force(o, a->now);
    return mc__leased(o, a->now) ? MC__SWEEP_RETIRE : MC__SWEEP_DESTROY;
}

/* REMOVE_ALL, or with a pattern remove_by_regex: the pattern is compiled once (POSIX extended;
 * a bad one is INVALID_PARAMS) and matched against every complete key. */
static int mc__op_remove_all(mc__master_t *m, const mc__mp_request_t *r, mc_buf_t *out,
                             uint32_t *errors) {
    mc__remove_all_arg_t *a = mc__calloc(1, sizeof(*a));
    regex_t re;
    char *pat = NULL;
    int rc;
    if (!a)
        return MC_ERR_MEMORY;
    a->now = mc__now_ms();
    a->force = r->force;
    if (r->pattern.len) {
        pat = mc__strndup((const char *)r->pattern.p, r->pattern.len);
        if (!pat || strlen(pat) != r->pattern.len ||
            regcomp(&re, pat, REG_EXTENDED | REG_NOSUB) != 0) {
            mc__free(pat);
            mc__free(a);
            *errors = 1;
            return mc__mp_encode_error_reply(out, r->type, r->request_id, MC_ERR_INVALID_PARAMS,
                                             "not a valid (POSIX extended) regular expression");
        }
        a->re = &re;
    }
    a->removed = mc__disk_remove_all(m, a->re); /* before the sweep: it looks at memory */
    mc__objects_sweep(m, mc__remove_all_visit, a);
    rc = mc__mp_encode_remove_all_reply(out, r->request_id, a->removed);
    if (a->re)
        regfree(&re);
    mc__free(pat);
    mc__free(a);
    return rc;
}

/* Sleeps until `until` (monotonic ms) on this connection's thread, holding no lock: an upsert
 * or a forced remove of a value clients may still read through cached replica lists answers
 * when none can start such a read any more (mc__object_release). Bounded by
 * MC_MP_CACHED_LEASE_MS + MC_MP_CACHED_LEASE_SLACK_MS. */
static void mc__reply_wait(uint64_t until) {
    uint64_t now = mc__now_ms();
    while (until > now) {
        struct timespec ts = {.tv_sec = (time_t)((until - now) / 1000),
                              .tv_nsec = (long)((until - now) % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        now = mc__now_ms();
    }
}

/* --- dispatch: one row per message kind, generated from the op column of MC_MP_TYPE_MAP ---
 *
 * A row calls the operation and writes the reply (the request came decoded). *keys starts as the
 * request's key count, what the per-op metrics count; a row that serves one thing sets it to 1.
 * *errors gets the keys (or the one thing) that failed. */
typedef int (*mc__row_fn)(mc__master_t *m, const mc__mp_request_t *r, mc_buf_t *out, uint32_t *keys,
                          uint32_t *errors);

static int mc__row_unregister(mc__master_t *m, const mc__mp_request_t *r, mc_buf_t *out,
                              uint32_t *keys, uint32_t *errors) {
    *keys = 1;
    mc__client_unregister(m, r->client_id);
    return mc__mp_encode_empty_reply(out, r->type, r->request_id);
}

static int mc__row_mount(mc__master_t *m, const mc__mp_request_t *r, mc_buf_t *out, uint32_t *keys,
                         uint32_t *errors) {
    int rc = r->type == MC_MP_MOUNT_SEGMENT
                 ? mc__segment_mount(m, r->client_id, &r->segment_name, r->base, r->size, r->epoch,
                                     r->mount_flags)
                 : mc__segment_unmount(m, r->client_id, &r->segment_name, r->base);
    *keys = 1;
    *errors = rc != 0;
    return rc ? mc__mp_encode_error_reply(out, r->type, r->request_id, rc, mc_store_strerror(rc))
              : mc__mp_encode_empty_reply(out, r->type, r->request_id);
}

static int mc__row_put_start(mc__master_t *m, const mc__mp_request_t *r, mc_buf_t *out,
                             uint32_t *keys, uint32_t *errors) {
    if (r->type == MC_MP_PUT_RESERVE)
        *keys = r->n_slots;
    mc__op_put_start(m, r, out, errors);
    return 0;
}

/* A commit stands for the put start and the put end a put of the start path sends: the
 * reference's put_start / put_end families (and our op rows of them) count it so, so that
 * dashboards see every put whichever path it took; op="put_commit" and op="put_commit_for" (the
 * commits a holder forwards for several clients) count the messages. A forwarded entry stands for
 * a single put of its client, so it counts as one, not as an item of a batch. */
static int mc__row_put_commit(mc__master_t *m, const mc__mp_request_t *r, mc_buf_t *out,
                              uint32_t *keys, uint32_t *errors) {
    uint64_t t0 = mc__now_ns();
    uint32_t puts = 0, ended = 0;
    int rc = mc__op_put_commit(m, r, out, errors, &puts, &ended);
    uint64_t took = mc__now_ns() - t0;
    if (r->type == MC_MP_PUT_COMMIT_FOR) {
        /* each entry is one client's single put, whichever others it travelled with */
        for (uint32_t i = 0; i < puts; i++) {
            mc__op_record(m, MC_MP_PUT_START, 1, i >= ended, took / puts);
            if (i < ended)
                mc__op_record(m, MC_MP_PUT_END, 1, 0, took / puts);
        }
        return rc;
    }
    if (puts)
        mc__op_record(m, MC_MP_PUT_START, puts, puts - ended, took);
    if (ended)
        mc__op_record(m, MC_MP_PUT_END, ended, 0, took);
    return rc;
}

static int mc__row_get(mc__master_t *m, const mc__mp_request_t *r, mc_buf_t *out, uint32_t *keys,
                       uint32_t *errors) {
    mc__op_get(m, r, out, errors);
    return 0;
}

static int mc__row_codes(mc__master_t *m, const mc__mp_request_t *r, mc_buf_t *out, uint32_t *keys,
                         uint32_t *errors) {
    return mc__op_codes(m, r, out, errors);
}

static int mc__row_disk_fetch(mc__master_t *m, const mc__mp_request_t *r, mc_buf_t *out,
                              uint32_t *keys, uint32_t *errors) {
    *keys = 1;
    return mc__disk_fetch(m, r, out);
}

static int mc__row_storage_config(mc__master_t *m, const mc__mp_request_t *r, mc_buf_t *out,
                                  uint32_t *keys, uint32_t *errors) {
    (void)errors;
    *keys = 1;
    return mc__disk_storage_config(m, r, out);
}

static int mc__row_remove_all(mc__master_t *m, const mc__mp_request_t *r, mc_buf_t *out,
                              uint32_t *keys, uint32_t *errors) {
    int rc = mc__op_remove_all(m, r, out, errors);
    *keys = 1;
    if (r->pattern.len) { /* the reference's remove_by_regex (metrics.c) */
        atomic_fetch_add_explicit(&m->remove_all_regex, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&m->remove_all_regex_failed, *errors, memory_order_relaxed);
    }
    return rc;
}

static int mc__row_task(mc__master_t *m, const mc__mp_request_t *r, mc_buf_t *out, uint32_t *keys,
                        uint32_t *errors) {
    *keys = 1;
    mc__op_task(m, r, out, errors);
    if (r->type == MC_MP_TASK_CREATE && r->task_type <= MC_TASK_MOVE) {
        atomic_fetch_add_explicit(&m->task_creates[r->task_type], 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&m->task_create_failures[r->task_type], *errors,
                                  memory_order_relaxed);
    }
    return 0;
}

static int mc__row_heartbeat(mc__master_t *m, const mc__mp_request_t *r, mc_buf_t *out,
                             uint32_t *keys, uint32_t *errors) {
    int unknown = mc__client_touch(m, r->client_id);
    mc__segments_reachable(m, r->client_id);
    /* Remounting is needed exactly when segments the client holds are missing here; a pure
     * client (none) is simply alive. Without the count, unknown is all we know. */
    int lost = r->n_mounted == MC_MP_MOUNTS_UNKNOWN
                   ? unknown
                   : mc__segments_of(m, r->client_id) < r->n_mounted;
    *keys = 1;
    return mc__mp_encode_heartbeat_reply(out, r->request_id,
                                         lost ? MC_MP_CLIENT_NEED_REMOUNT : MC_MP_CLIENT_OK,
                                         atomic_load(&m->view_version));
}

static const mc__row_fn mc__rows[MC_MP_TYPE_MAX_] = {
#define MC__ROW(T, name, value, body, op, single, batch) [value] = mc__row_##op,
    MC_MP_TYPE_MAP(MC__ROW)
#undef MC__ROW
};

int mc__master_handle(mc__master_t *m, const mc__mp_request_t *r, mc_buf_t *out) {
    uint64_t t0 = mc__now_ns();
    uint32_t errors = 0;
    uint32_t keys = r->n_keys;
    mc__row_fn row = r->type < MC_MP_TYPE_MAX_ ? mc__rows[r->type] : NULL;
    int rc = 0;
    /* A master that is not (or no longer) the leader answers nothing: the connection closes,
     * and the client finds the leader in the master view and asks it. */
    if (atomic_load(&m->fenced) ||
        (m->cfg.ha_is_leader && !m->cfg.ha_is_leader(m->cfg.ha_ctx, m->cfg.ha_term)))
        return MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS;
    (void)mc__reply_hold_take();
    if (!row)
        return mc__mp_encode_error_reply(out, r->type, r->request_id, MC_ERR_NOT_IMPLEMENTED,
                                         "unknown message type");
    rc = row(m, r, out, &keys, &errors);
    if (out->failed)
        rc = MC_ERR_MEMORY;
    /* Nothing is acknowledged before what it changed is recorded (when a log is kept); what
     * could not be recorded is not acknowledged at all (HA: the connection closes). */
    if (mc__persist_commit(m) != 0)
        rc = MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS;
    mc__reply_wait(mc__reply_hold_take());
    mc__op_record(m, r->type, keys, errors, mc__now_ns() - t0);
    return rc;
}
