/* Replica copy and move tasks, the reference's create_copy_task / create_move_task /
 * query_task.
 *
 * Any client creates a task; the master checks it (the object exists, the segments are mounted)
 * and assigns it to the client that owns the source replica, which fetches its tasks with its
 * heartbeats. At fetch the master reserves the target replicas outside the object (a record
 * kept in the task, like an unfinished put), and hands out where to read and where to write.
 * The client moves the bytes and reports; at a successful report the reserved replicas join the
 * object and, for a move, the source replica leaves it (held in the graveyard until the
 * readers' leases on it pass).
 *
 * No lease or lock holds the object while its bytes move: the report checks that the object
 * still has the version and the source replica it had at fetch, so a copy that raced a remove,
 * an eviction, an upsert or a lost segment fails instead of publishing bytes read from space
 * that was reused. A client that never fetches or never reports fails its tasks after the
 * reference's task timeouts (--pending_task_timeout_sec, --processing_task_timeout_sec); reserved
 * space it may still be writing waits out the put release
 * timeout in the graveyard. */
#include <stdio.h>
#include <string.h>

#include "master/master_internal.h"
#include "master/persist.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/log.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"
#include "proto/master_client.h"
#include "proto/task_proto.h"

#define MC__TASK_CHECK_MS 1000u /* how often the monitor looks for tasks that timed out */

typedef struct mc__task {
    uint8_t id[MC_MP_CLIENT_ID_LEN];
    uint8_t type, status;
    uint64_t created_ms, updated_ms; /* Unix epoch, for query_task */
    uint64_t since;                  /* monotonic: when it entered its status */
    uint8_t assigned[MC_MP_CLIENT_ID_LEN];
    mc__mp_str_t source; /* move: points into names */
    uint32_t n_targets;
    mc__mp_str_t targets[MC_MP_MAX_REPLICA_NUM];
    /* PROCESSING: the object's version and the replica read at fetch, and the reserved target
     * replicas (an unlinked record; NULL when none). */
    uint64_t version;
    mc__replica_t src;
    mc__object_t *pending;
    char message[MC_TP_MAX_MESSAGE + 1];
    int listed; /* in m->tasks, counted in m->tasks_in */
    uint32_t hash;
    uint32_t key_len;
    uint8_t data[]; /* key, then the segment names */
} mc__task_t;

static int mc__finished(const mc__task_t *t) {
    return t->status == MC_TASK_SUCCESS || t->status == MC_TASK_FAILED;
}

static void mc__task_set(mc__master_t *m, mc__task_t *t, uint8_t status, const char *msg) {
    if (t->listed) {
        m->tasks_in[t->status]--;
        m->tasks_in[status]++;
    }
    t->status = status;
    t->updated_ms = mc__wall_ms();
    t->since = mc__now_ms();
    snprintf(t->message, sizeof(t->message), "%s", msg ? msg : "");
}

/* With tasks_mu held. */
static mc__task_t *mc__task_find(mc__master_t *m, const uint8_t *id) {
    for (size_t i = 0; i < m->n_tasks; i++)
        if (memcmp(m->tasks[i]->id, id, MC_MP_CLIENT_ID_LEN) == 0)
            return m->tasks[i];
    return NULL;
}

static void mc__task_free(mc__master_t *m, mc__task_t *t) {
    if (t->pending) /* only finished tasks are freed: none holds reserved space */
        mc__object_destroy(m, t->pending);
    mc__free(t);
}

/* With tasks_mu held: drops the oldest finished task while more than the limit are kept. */
static void mc__tasks_trim(mc__master_t *m) {
    size_t oldest = SIZE_MAX;
    if (m->tasks_in[MC_TASK_FAILED] + m->tasks_in[MC_TASK_SUCCESS] <=
        (size_t)m->cfg.max_finished_tasks)
        return;
    for (size_t i = 0; i < m->n_tasks; i++)
        if (mc__finished(m->tasks[i]) &&
            (oldest == SIZE_MAX || m->tasks[i]->since < m->tasks[oldest]->since))
            oldest = i;
    if (oldest == SIZE_MAX)
        return;
    m->tasks_in[m->tasks[oldest]->status]--;
    mc__task_free(m, m->tasks[oldest]);
    m->tasks[oldest] = m->tasks[--m->n_tasks];
}

static int mc__str_eq(const mc__mp_str_t *a, const mc__mp_str_t *b) {
    return a->len == b->len && memcmp(a->p, b->p, a->len) == 0;
}

/* The replica index of o on a segment named name, or -1. */
static int mc__replica_on(mc__master_t *m, mc__object_t *o, const mc__mp_str_t *name) {
    mc__replica_t *reps = mc__obj_reps(o);
    for (uint8_t i = 0; i < o->n_replicas; i++)
        if (mc__slot_named(m, reps[i].seg, name))
            return i;
    return -1;
}

/* Detaches replica i of o (shard locked) into the graveyard, where it stays while readers may
 * hold a lease on it. */
static void mc__detach_replica(mc__master_t *m, mc__object_t *o, uint8_t i) {
    mc__replica_t *reps = mc__obj_reps(o);
    mc__object_t *g = mc__object_new(o->data, o->key_len, o->hash, 1);
    if (g) {
        mc__obj_reps(g)[0] = reps[i];
        g->lease_until = o->lease_until;
        mc__grave_add(m, g, 0); /* no writer: only the lease holds it */
    } else {
        mc__free_replica(m, &reps[i]); /* no memory: free now rather than leak the space */
    }
    memmove(&reps[i], &reps[i + 1], (size_t)(o->n_replicas - i - 1) * sizeof(*reps));
    o->n_replicas--;
}

/* --- create --- */

static int32_t mc__task_check_new(mc__master_t *m, const mc__mp_request_t *r, mc__task_t *t) {
    mc__shard_t *s = mc__shard_of(m, t->hash);
    mc__object_t *o = NULL;
    int32_t rc = 0;
    int src = -1, need = 0;
    for (uint32_t i = 0; i < t->n_targets; i++)
        if (!mc__segment_named(m, &t->targets[i], NULL))
            return MC_ERR_INVALID_PARAMS;
    pthread_mutex_lock(&s->mu);
    o = mc__shard_find(s, t->hash, r->object_key.p, r->object_key.len);
    if (!o || !(o->flags & MC__OBJ_COMPLETE) || o->n_replicas == 0) {
        rc = MC_ERR_OBJECT_NOT_FOUND;
        goto out;
    }
    if (t->type == MC_TASK_MOVE) {
        src = mc__replica_on(m, o, &t->source);
        if (src < 0 || !mc__segment_named(m, &t->source, NULL)) {
            rc = MC_ERR_INVALID_PARAMS; /* the source holds no replica of it */
            goto out;
        }
    } else {
        src = 0;
    }
    for (uint32_t i = 0; i < t->n_targets; i++)
        need += mc__replica_on(m, o, &t->targets[i]) < 0;
    if (o->n_replicas + need > (int)MC_MP_MAX_REPLICA_NUM) {
        rc = MC_ERR_INVALID_PARAMS;
        goto out;
    }
    /* The task runs where its source replica is: on that segment's owner. */
    pthread_rwlock_rdlock(&m->registry);
    if (mc__obj_reps(o)[src].seg < m->n_slots && m->slots[mc__obj_reps(o)[src].seg])
        memcpy(t->assigned, m->slots[mc__obj_reps(o)[src].seg]->owner, MC_MP_CLIENT_ID_LEN);
    pthread_rwlock_unlock(&m->registry);
    if (need == 0) {
        /* Every target holds a replica already: a copy is done, a move only drops its source. */
        if (t->type == MC_TASK_MOVE) {
            mc__detach_replica(m, o, (uint8_t)src);
            mc__persist_obj_set(m, o);
        }
        mc__task_set(m, t, MC_TASK_SUCCESS, "every target already held a replica");
    }
out:
    pthread_mutex_unlock(&s->mu);
    return rc;
}

static int32_t mc__task_create(mc__master_t *m, const mc__mp_request_t *r, uint8_t *id_out) {
    size_t names = r->segment_name.len;
    mc__task_t *t = NULL;
    uint8_t *p = NULL;
    int32_t rc = 0;
    if (r->task_type == MC_TASK_MOVE && (r->n_targets != 1 || r->segment_name.len == 0 ||
                                         mc__str_eq(&r->segment_name, &r->targets[0])))
        return MC_ERR_INVALID_PARAMS;
    for (uint32_t i = 0; i < r->n_targets; i++)
        names += r->targets[i].len;
    t = mc__calloc(1, sizeof(*t) + r->object_key.len + names);
    if (!t)
        return MC_ERR_INTERNAL_ERROR;
    t->type = r->task_type;
    t->key_len = r->object_key.len;
    t->hash = mc__key_hash(r->object_key.p, r->object_key.len);
    memcpy(t->data, r->object_key.p, r->object_key.len);
    p = t->data + r->object_key.len;
    memcpy(p, r->segment_name.p, r->segment_name.len);
    t->source = (mc__mp_str_t){p, r->segment_name.len};
    p += r->segment_name.len;
    for (uint32_t i = 0; i < r->n_targets; i++) {
        int dup = 0;
        for (uint32_t j = 0; j < t->n_targets; j++)
            dup |= mc__str_eq(&t->targets[j], &r->targets[i]);
        if (dup)
            continue;
        memcpy(p, r->targets[i].p, r->targets[i].len);
        t->targets[t->n_targets++] = (mc__mp_str_t){p, r->targets[i].len};
        p += r->targets[i].len;
    }
    mc__uuid_generate(t->id);
    t->created_ms = t->updated_ms = mc__wall_ms();
    t->since = mc__now_ms();
    t->status = MC_TASK_PENDING;

    pthread_mutex_lock(&m->tasks_mu);
    for (size_t i = 0; i < m->n_tasks; i++) {
        const mc__task_t *o = m->tasks[i];
        if (mc__finished(o))
            continue;
        if (o->key_len == t->key_len && memcmp(o->data, t->data, t->key_len) == 0)
            rc = MC_ERR_OBJECT_HAS_REPLICATION_TASK;
    }
    if (rc == 0 && m->tasks_in[MC_TASK_PENDING] >= (size_t)m->cfg.max_pending_tasks)
        rc = MC_ERR_TASK_PENDING_LIMIT_EXCEEDED;
    if (rc == 0)
        rc = mc__task_check_new(m, r, t);
    if (rc == 0 && m->n_tasks == m->cap_tasks) {
        size_t cap = m->cap_tasks ? m->cap_tasks * 2 : 64;
        mc__task_t **v = mc__realloc(m->tasks, cap * sizeof(*v));
        if (!v) {
            rc = MC_ERR_INTERNAL_ERROR;
        } else {
            m->tasks = v;
            m->cap_tasks = cap;
        }
    }
    if (rc == 0) {
        t->listed = 1;
        m->tasks_in[t->status]++;
        m->tasks[m->n_tasks++] = t;
        memcpy(id_out, t->id, MC_MP_CLIENT_ID_LEN);
        mc__tasks_trim(m);
        t = NULL;
    }
    pthread_mutex_unlock(&m->tasks_mu);
    mc__free(t);
    return rc;
}

int32_t mc__task_move(mc__master_t *m, const uint8_t *key, uint32_t key_len, const char *source,
                      const char *target, uint8_t *id_out) {
    mc__mp_request_t r;
    memset(&r, 0, sizeof(r));
    r.type = MC_MP_TASK_CREATE;
    r.task_type = MC_TASK_MOVE;
    r.object_key = (mc__mp_str_t){key, key_len};
    r.segment_name = (mc__mp_str_t){(const uint8_t *)source, (uint32_t)strlen(source)};
    r.n_targets = 1;
    r.targets[0] = (mc__mp_str_t){(const uint8_t *)target, (uint32_t)strlen(target)};
    return mc__task_create(m, &r, id_out);
}

int mc__move_task_status(mc__master_t *m, const uint8_t *id) {
    int st = -1;
    pthread_mutex_lock(&m->tasks_mu);
    const mc__task_t *t = mc__task_find(m, id);
    if (t)
        st = t->status;
    pthread_mutex_unlock(&m->tasks_mu);
    return st;
}

/* --- fetch: reserve the targets, hand out the work --- */

static void mc__desc_of(mc__master_t *m, const mc__replica_t *r, mc__replica_desc_t *d) {
    uint64_t base = 0;
    mc__segment_name(m, r->seg, d->segment_name, &base, &d->epoch);
    d->addr = base + r->off;
}

/* Starts one pending task of the fetching client (tasks_mu held): 1 when w was filled (the task
 * is PROCESSING), 0 when the task ended here (FAILED, or SUCCESS with nothing to move). */
static int mc__task_start(mc__master_t *m, mc__task_t *t, mc__task_work_t *w) {
    mc__shard_t *s = mc__shard_of(m, t->hash);
    mc__replica_t placed[MC_MP_MAX_REPLICA_NUM + MC_MP_MAX_REPLICA_NUM];
    mc__replica_t *reps = NULL;
    mc__object_t *o = NULL, *pend = NULL;
    int n_have = 0, n_new = 0, src = -1, started = 0;
    const char *why = NULL;
    pthread_rwlock_rdlock(&m->placement);
    pthread_mutex_lock(&s->mu);
    o = mc__shard_find(s, t->hash, t->data, t->key_len);
    if (!o || !(o->flags & MC__OBJ_COMPLETE)) {
        why = "the object is gone";
        goto out;
    }
    reps = mc__obj_reps(o);
    for (uint8_t i = 0; i < o->n_replicas && src < 0; i++)
        if ((t->type == MC_TASK_COPY || mc__slot_named(m, reps[i].seg, &t->source)) &&
            mc__segment_owned_by(m, reps[i].seg, t->assigned))
            src = i;
    if (src < 0) {
        why = "the source replica is gone";
        goto out;
    }
    n_have = o->n_replicas;
    memcpy(placed, reps, (size_t)n_have * sizeof(*reps));
    for (uint32_t i = 0; i < t->n_targets; i++) {
        if (mc__replica_on(m, o, &t->targets[i]) >= 0)
            continue;
        if (n_have + n_new >= (int)MC_MP_MAX_REPLICA_NUM ||
            mc__place_on(m, o->size, &t->targets[i], placed, n_have + n_new,
                         &placed[n_have + n_new]) != 0) {
            why = "no space for a replica on a target segment";
            goto out;
        }
        n_new++;
    }
    if (n_new == 0) {
        if (t->type == MC_TASK_MOVE) {
            mc__detach_replica(m, o, (uint8_t)src);
            mc__persist_obj_set(m, o);
        }
        mc__task_set(m, t, MC_TASK_SUCCESS, "every target already held a replica");
        goto out;
    }
    pend = mc__object_new(t->data, t->key_len, t->hash, (uint8_t)n_new);
    if (!pend) {
        why = "out of memory";
        goto out;
    }
    memcpy(mc__obj_reps(pend), &placed[n_have], (size_t)n_new * sizeof(*placed));
    pend->size = o->size;
    pend->access_ms = mc__now_ms(); /* when its writer started (mc__put_release_at) */
    t->pending = pend;
    t->version = o->version;
    t->src = reps[src];
    memcpy(w->id, t->id, MC_MP_CLIENT_ID_LEN);
    w->type = t->type;
    memcpy(w->key, t->data, t->key_len);
    w->key[t->key_len] = '\0';
    w->size = o->size;
    mc__desc_of(m, &t->src, &w->src);
    w->n_targets = (uint32_t)n_new;
    for (int i = 0; i < n_new; i++)
        mc__desc_of(m, &placed[n_have + i], &w->targets[i]);
    mc__task_set(m, t, MC_TASK_PROCESSING, "");
    started = 1;
    n_new = 0; /* owned by the task now */
out:
    for (int i = 0; i < n_new; i++)
        mc__free_replica(m, &placed[n_have + i]);
    if (why)
        mc__task_set(m, t, MC_TASK_FAILED, why);
    pthread_mutex_unlock(&s->mu);
    pthread_rwlock_unlock(&m->placement);
    return started;
}

static int mc__task_fetch(mc__master_t *m, const mc__mp_request_t *r, mc_buf_t *out) {
    mc__task_work_t *w = NULL;
    uint32_t n = 0;
    size_t start = 0;
    int rc;
    pthread_mutex_lock(&m->tasks_mu);
    /* Every storage client asks every heartbeat; nearly always nothing waits. */
    if (m->tasks_in[MC_TASK_PENDING] > 0 &&
        m->tasks_in[MC_TASK_PROCESSING] < (size_t)m->cfg.max_processing_tasks)
        w = mc__calloc(r->max_tasks, sizeof(*w));
    for (size_t i = 0; w && i < m->n_tasks && n < r->max_tasks &&
                       m->tasks_in[MC_TASK_PROCESSING] < (size_t)m->cfg.max_processing_tasks;
         i++) {
        mc__task_t *t = m->tasks[i];
        if (t->status != MC_TASK_PENDING ||
            memcmp(t->assigned, r->client_id, MC_MP_CLIENT_ID_LEN) != 0)
            continue;
        n += (uint32_t)mc__task_start(m, t, &w[n]);
    }
    pthread_mutex_unlock(&m->tasks_mu);
    rc = mc__tp_fetch_reply_begin(out, r->request_id, n, &start);
    for (uint32_t i = 0; rc == 0 && i < n; i++)
        rc = mc__tp_fetch_reply_work(out, &w[i]);
    if (rc == 0)
        mc__buf_frame_end(out, start);
    mc__free(w);
    return rc;
}

/* --- report --- */

/* The bytes are in the reserved replicas: publish them (tasks_mu held). */
static void mc__task_publish(mc__master_t *m, mc__task_t *t) {
    mc__shard_t *s = mc__shard_of(m, t->hash);
    mc__object_t *o = NULL;
    mc__replica_t *pr = mc__obj_reps(t->pending);
    const char *why = NULL;
    int src = -1;
    pthread_rwlock_rdlock(&m->placement);
    pthread_mutex_lock(&s->mu);
    o = mc__shard_find(s, t->hash, t->data, t->key_len);
    if (o && (o->flags & MC__OBJ_COMPLETE) && o->version == t->version) {
        const mc__replica_t *reps = mc__obj_reps(o);
        for (uint8_t i = 0; i < o->n_replicas; i++)
            if (reps[i].seg == t->src.seg && reps[i].block == t->src.block &&
                reps[i].off == t->src.off)
                src = i;
    }
    /* A target that is going away meanwhile keeps nothing (its drop already passed us by). */
    for (uint8_t i = 0; src >= 0 && i < t->pending->n_replicas; i++)
        if (!mc__segment_live(m, pr[i].seg))
            src = -1;
    if (src < 0) {
        why = "the object changed while the task ran (removed, replaced or lost a replica)";
    } else if (t->pending->n_replicas == 0) {
        why = "the target segments went away while the task ran";
    } else if (o->n_replicas + t->pending->n_replicas > MC_MP_MAX_REPLICA_NUM) {
        why = "the object has too many replicas";
    } else if ((o = mc__object_grow(s, o, pr, t->pending->n_replicas)) == NULL) {
        why = "out of memory";
    } else {
        mc__free(t->pending); /* its replicas are the object's now */
        t->pending = NULL;
        if (t->type == MC_TASK_MOVE)
            mc__detach_replica(m, o, (uint8_t)src);
        mc__persist_obj_set(m, o);
        mc__task_set(m, t, MC_TASK_SUCCESS, "");
    }
    pthread_mutex_unlock(&s->mu);
    pthread_rwlock_unlock(&m->placement);
    if (why) {
        mc__object_destroy(m, t->pending); /* the executor is done writing: free at once */
        t->pending = NULL;
        mc__task_set(m, t, MC_TASK_FAILED, why);
    }
}

static int32_t mc__task_report(mc__master_t *m, const mc__mp_request_t *r) {
    mc__task_t *t = NULL;
    int32_t rc = 0;
    pthread_mutex_lock(&m->tasks_mu);
    t = mc__task_find(m, r->task_id);
    if (!t) {
        rc = MC_ERR_TASK_NOT_FOUND;
    } else if (t->status != MC_TASK_PROCESSING ||
               memcmp(t->assigned, r->client_id, MC_MP_CLIENT_ID_LEN) != 0) {
        rc = MC_ERR_INVALID_PARAMS; /* not this client's, or no longer running */
    } else if (r->task_code != 0 || !t->pending) {
        char msg[MC_TP_MAX_MESSAGE + 1];
        snprintf(msg, sizeof(msg), "%.*s", (int)r->message.len, (const char *)r->message.p);
        if (t->pending)
            mc__object_destroy(m, t->pending); /* the client is done with it */
        t->pending = NULL;
        mc__task_set(m, t, MC_TASK_FAILED, msg[0] ? msg : mc_store_strerror(r->task_code));
    } else {
        mc__task_publish(m, t);
    }
    pthread_mutex_unlock(&m->tasks_mu);
    return rc;
}

/* --- entry points --- */

void mc__op_task(mc__master_t *m, const mc__mp_request_t *r, mc_buf_t *out, uint32_t *errors) {
    uint8_t id[MC_MP_CLIENT_ID_LEN];
    int32_t rc = 0;
    int enc = 0;
    switch (r->type) {
    case MC_MP_TASK_CREATE:
        rc = mc__task_create(m, r, id);
        if (rc == 0)
            enc = mc__tp_encode_create_reply(out, r->request_id, id);
        break;
    case MC_MP_TASK_QUERY: {
        mc__task_info_t info;
        mc__task_t *t = NULL;
        memset(&info, 0, sizeof(info));
        pthread_mutex_lock(&m->tasks_mu);
        t = mc__task_find(m, r->task_id);
        if (t) {
            info.type = t->type;
            info.status = t->status;
            info.created_ms = t->created_ms;
            info.updated_ms = t->updated_ms;
            memcpy(info.assigned, t->assigned, MC_MP_CLIENT_ID_LEN);
            memcpy(info.message, t->message, sizeof(info.message));
        }
        pthread_mutex_unlock(&m->tasks_mu);
        rc = t ? 0 : MC_ERR_TASK_NOT_FOUND;
        if (rc == 0)
            enc = mc__tp_encode_query_reply(out, r->request_id, &info);
        break;
    }
    case MC_MP_TASK_FETCH:
        rc = mc__task_fetch(m, r, out);
        break;
    case MC_MP_TASK_REPORT:
        rc = mc__task_report(m, r);
        if (rc == 0)
            enc = mc__mp_encode_empty_reply(out, r->type, r->request_id);
        break;
    default:
        rc = MC_ERR_NOT_IMPLEMENTED;
        break;
    }
    if (rc == 0 && enc != 0)
        rc = MC_ERR_INTERNAL_ERROR;
    if (rc != 0) {
        *errors = 1;
        mc__mp_encode_error_reply(out, r->type, r->request_id, rc, mc_store_strerror(rc));
    }
}

void mc__tasks_expire(mc__master_t *m, uint64_t now) {
    uint64_t pending_ms = (uint64_t)m->cfg.pending_task_timeout_s * 1000u;
    uint64_t processing_ms = (uint64_t)m->cfg.processing_task_timeout_s * 1000u;
    if (now - m->tasks_checked_ms < MC__TASK_CHECK_MS)
        return;
    m->tasks_checked_ms = now;
    pthread_mutex_lock(&m->tasks_mu);
    for (size_t i = 0; i < m->n_tasks; i++) {
        mc__task_t *t = m->tasks[i];
        if (t->status == MC_TASK_PENDING && pending_ms && now - t->since >= pending_ms) {
            mc__task_set(m, t, MC_TASK_FAILED, "its client did not take it in time");
        } else if (t->status == MC_TASK_PENDING && mc__segments_of(m, t->assigned) == 0) {
            mc__task_set(m, t, MC_TASK_FAILED, "its client is gone");
        } else if (t->status == MC_TASK_PROCESSING && processing_ms &&
                   now - t->since >= processing_ms) {
            /* The client may still be writing: its reserved space waits out the release
             * timeout in the graveyard. */
            if (t->pending)
                mc__grave_add(m, t->pending, mc__put_release_at(m, t->pending->access_ms));
            t->pending = NULL;
            mc__task_set(m, t, MC_TASK_FAILED, "its client did not report in time");
        }
    }
    pthread_mutex_unlock(&m->tasks_mu);
}

void mc__tasks_drop_slot(mc__master_t *m, uint32_t slot) {
    pthread_mutex_lock(&m->tasks_mu);
    for (size_t i = 0; i < m->n_tasks; i++) {
        mc__object_t *p = m->tasks[i]->pending;
        mc__replica_t *reps = p ? mc__obj_reps(p) : NULL;
        uint8_t kept = 0;
        for (uint8_t r = 0; p && r < p->n_replicas; r++)
            if (reps[r].seg != slot)
                reps[kept++] = reps[r];
        if (p)
            p->n_replicas = kept;
    }
    pthread_mutex_unlock(&m->tasks_mu);
}

void mc__tasks_destroy(mc__master_t *m) {
    /* At stop every segment goes too: only the records are freed. */
    for (size_t i = 0; i < m->n_tasks; i++) {
        mc__free(m->tasks[i]->pending);
        mc__free(m->tasks[i]);
    }
    mc__free(m->tasks);
    m->tasks = NULL;
    m->n_tasks = m->cap_tasks = 0;
}
