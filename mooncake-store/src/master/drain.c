/* Drain jobs (the reference's /api/v1/drain_jobs): every object with a replica on the drained
 * segments is moved to another segment, so the segments can be unmounted with nothing lost.
 *
 * A job marks its segments DRAINING (segments.c: readable, no new placements), then one thread
 * ticks every MC__DRAIN_TICK_MS: it collects what the job's move tasks (tasks.c) ended as, sweeps
 * the objects for replicas still on the segments, and makes move tasks for up to max_concurrency
 * of them, each to the allowed segment least used that has room. The segment's owner moves the
 * bytes (as for any move task); the source replica leaves the object only once the target holds
 * the bytes, and stays in the graveyard while readers hold leases on it, so a read during a
 * drain never loses its object. A segment with no replica left is DRAINED; the job SUCCEEDED
 * when all are. A unit (one object on one segment) that fails MC__DRAIN_MAX_RETRIES times (its
 * move task failed, or no segment had room) is given up; a job whose remaining units are all
 * given up FAILED, and its segments take placements again. Objects still being written, or
 * queued for the disk tier, wait (blocked) and are moved once that is over. */
#include <stdio.h>
#include <string.h>

#include "master/master_internal.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/cond.h"
#include "mooncake/common/log.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"
#include "proto/master_client.h"

#define MC__DRAIN_TICK_MS 100u
#define MC__DRAIN_MAX_RETRIES 3u     /* the reference's kMaxDrainUnitRetries */
#define MC__DRAIN_RETRY_MS 1000u     /* a failed unit is tried again no sooner */
#define MC__DRAIN_MAX_ACTIVE 64u     /* move tasks one job keeps in flight, at most */
#define MC__DRAIN_MAX_FINISHED 1024u /* finished jobs kept for queries */
#define MC__DRAIN_MAX_SEGMENTS 1024u /* segment names one job may name */

typedef struct mc__unit {
    uint8_t *key; /* NULL: an empty table slot */
    uint32_t key_len, hash;
    uint32_t src; /* index in the job's segments */
    uint32_t retries;
    uint64_t last_ms;
} mc__unit_t;

typedef struct mc__active {
    uint8_t task[MC_MP_CLIENT_ID_LEN];
    mc__unit_t unit; /* key owned */
    uint64_t bytes;
} mc__active_t;

typedef struct mc__job {
    uint8_t id[MC_MP_CLIENT_ID_LEN];
    uint8_t status;
    int64_t created_ms, updated_ms;
    char **segments, **targets;
    uint32_t n_segments, n_targets, max_concurrency;
    uint64_t succeeded, failed, blocked, migrated;
    char message[128];
    mc__active_t active[MC__DRAIN_MAX_ACTIVE];
    uint32_t n_active;
    mc__unit_t *failures; /* open addressing by hash: units that failed at least once */
    uint32_t fail_cap, n_failures;
    uint64_t finished_ms; /* monotonic, for trimming */
} mc__job_t;

struct mc__drain {
    pthread_mutex_t mu; /* the job list and every job */
    pthread_cond_t cv;
    mc__job_t **jobs;
    size_t n_jobs;
    pthread_t thread;
    int started, stopping;
};

static int mc__job_over(const mc__job_t *j) {
    return j->status == MC_DRAIN_JOB_SUCCEEDED || j->status == MC_DRAIN_JOB_FAILED ||
           j->status == MC_DRAIN_JOB_CANCELED;
}

static void mc__job_set(mc__job_t *j, uint8_t status, const char *msg) {
    j->status = status;
    j->updated_ms = (int64_t)mc__wall_ms();
    snprintf(j->message, sizeof(j->message), "%s", msg);
    if (mc__job_over(j))
        j->finished_ms = mc__now_ms();
}

static void mc__job_free(mc__job_t *j) {
    for (uint32_t i = 0; i < j->n_segments; i++)
        mc__free(j->segments[i]);
    for (uint32_t i = 0; i < j->n_targets; i++)
        mc__free(j->targets[i]);
    for (uint32_t i = 0; i < j->n_active; i++)
        mc__free(j->active[i].unit.key);
    for (uint32_t i = 0; i < j->fail_cap; i++)
        mc__free(j->failures[i].key);
    mc__free(j->failures);
    mc__free(j->segments);
    mc__free(j->targets);
    mc__free(j);
}

static int mc__unit_is(const mc__unit_t *u, const uint8_t *key, uint32_t len, uint32_t src) {
    return u->key && u->src == src && u->key_len == len && memcmp(u->key, key, len) == 0;
}

/* The failure record of (key, src), or NULL. */
static mc__unit_t *mc__fail_find(mc__job_t *j, const uint8_t *key, uint32_t len, uint32_t hash,
                                 uint32_t src) {
    if (!j->fail_cap)
        return NULL;
    for (uint32_t i = (hash + src) & (j->fail_cap - 1);; i = (i + 1) & (j->fail_cap - 1)) {
        mc__unit_t *u = &j->failures[i];
        if (!u->key)
            return NULL;
        if (mc__unit_is(u, key, len, src))
            return u;
    }
}

/* The failure record of u's unit, added when missing; NULL when memory runs out (the failure is
 * then counted but not remembered: the unit is tried again). */
static mc__unit_t *mc__fail_get(mc__job_t *j, const mc__unit_t *u) {
    mc__unit_t *f = mc__fail_find(j, u->key, u->key_len, u->hash, u->src);
    if (f)
        return f;
    if ((j->n_failures + 1) * 2 > j->fail_cap) {
        uint32_t cap = j->fail_cap ? j->fail_cap * 2 : 64;
        mc__unit_t *t = mc__calloc(cap, sizeof(*t));
        if (!t)
            return NULL;
        for (uint32_t i = 0; i < j->fail_cap; i++) {
            uint32_t k;
            if (!j->failures[i].key)
                continue;
            for (k = (j->failures[i].hash + j->failures[i].src) & (cap - 1); t[k].key;
                 k = (k + 1) & (cap - 1))
                ;
            t[k] = j->failures[i];
        }
        mc__free(j->failures);
        j->failures = t;
        j->fail_cap = cap;
    }
    for (uint32_t i = (u->hash + u->src) & (j->fail_cap - 1);; i = (i + 1) & (j->fail_cap - 1)) {
        if (j->failures[i].key)
            continue;
        f = &j->failures[i];
        f->key = mc__malloc(u->key_len ? u->key_len : 1);
        if (!f->key)
            return NULL;
        memcpy(f->key, u->key, u->key_len);
        f->key_len = u->key_len;
        f->hash = u->hash;
        f->src = u->src;
        j->n_failures++;
        return f;
    }
}

static void mc__unit_failed(mc__job_t *j, const mc__unit_t *u, uint64_t now) {
    mc__unit_t *f = mc__fail_get(j, u);
    j->failed++;
    if (f) {
        f->retries++;
        f->last_ms = now;
    }
}

/* --- one tick of one job --- */

/* What the job's move tasks ended as: how many ended. */
static uint32_t mc__job_refresh(mc__master_t *m, mc__job_t *j, uint64_t now) {
    uint32_t ended = 0;
    for (uint32_t i = 0; i < j->n_active;) {
        mc__active_t *a = &j->active[i];
        int st = mc__move_task_status(m, a->task);
        if (st == MC_TASK_PENDING || st == MC_TASK_PROCESSING) {
            i++;
            continue;
        }
        if (st == MC_TASK_SUCCESS) {
            j->succeeded++;
            j->migrated += a->bytes;
        } else {
            mc__unit_failed(j, &a->unit, now);
        }
        mc__free(a->unit.key);
        j->active[i] = j->active[--j->n_active];
        ended++;
    }
    return ended;
}

typedef struct mc__plan {
    mc__unit_t unit; /* key owned */
    uint64_t size;
    uint32_t n_have;
    uint32_t have[MC_MP_MAX_REPLICA_NUM]; /* the object's replica slots */
} mc__plan_t;

typedef struct mc__sweep {
    mc__job_t *j;
    const int32_t *src_of; /* slot -> source index, -1: not drained */
    uint32_t n_slots;
    uint64_t now;
    uint64_t *remaining; /* per source */
    uint64_t remaining_all, given_up, blocked;
    mc__plan_t *plans;
    uint32_t n_plans, max_plans;
} mc__sweep_t;

static int mc__is_active(const mc__job_t *j, const uint8_t *key, uint32_t len, uint32_t src) {
    for (uint32_t i = 0; i < j->n_active; i++)
        if (mc__unit_is(&j->active[i].unit, key, len, src))
            return 1;
    return 0;
}

static int mc__sweep_visit(mc__master_t *m, mc__object_t *o, void *arg) {
    mc__sweep_t *w = arg;
    const mc__replica_t *reps = mc__obj_reps(o);
    (void)m;
    for (uint8_t r = 0; r < o->n_replicas; r++) {
        int32_t src = reps[r].seg < w->n_slots ? w->src_of[reps[r].seg] : -1;
        const mc__unit_t *f;
        mc__plan_t *p;
        if (src < 0)
            continue;
        w->remaining[src]++;
        w->remaining_all++;
        if (mc__is_active(w->j, o->data, o->key_len, (uint32_t)src))
            continue;
        f = mc__fail_find(w->j, o->data, o->key_len, o->hash, (uint32_t)src);
        if (f && f->retries >= MC__DRAIN_MAX_RETRIES) {
            w->given_up++;
            continue;
        }
        /* a put still writing it, or its copy to the disk tier in flight, reads the source */
        if (!(o->flags & MC__OBJ_COMPLETE) || (o->flags & MC__OBJ_OFFLOAD_PENDING)) {
            w->blocked++;
            continue;
        }
        if ((f && w->now - f->last_ms < MC__DRAIN_RETRY_MS) || w->n_plans == w->max_plans)
            continue;
        p = &w->plans[w->n_plans];
        p->unit.key = mc__malloc(o->key_len ? o->key_len : 1);
        if (!p->unit.key)
            continue;
        memcpy(p->unit.key, o->data, o->key_len);
        p->unit.key_len = o->key_len;
        p->unit.hash = o->hash;
        p->unit.src = (uint32_t)src;
        p->size = o->size;
        p->n_have = o->n_replicas;
        for (uint8_t k = 0; k < o->n_replicas; k++)
            p->have[k] = reps[k].seg;
        w->n_plans++;
    }
    return MC__SWEEP_KEEP;
}

static int mc__name_in(char *const *names, uint32_t n, const char *name) {
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return 1;
    return 0;
}

/* The allowed segment (a named target, or with none named any other placeable one) least used
 * that could take size bytes and holds no replica of the object yet: 1 with its name, or 0. */
static int mc__pick_target(mc__master_t *m, const mc__job_t *j, const mc__plan_t *p, char *out) {
    double best = 2.0;
    pthread_rwlock_rdlock(&m->registry);
    for (uint32_t i = 0; i < m->n_slots; i++) {
        mc__segment_t *s = m->slots[i];
        int holds = 0;
        uint64_t used, total, free_run;
        double util;
        if (!mc__seg_placeable(s) || mc__name_in(j->segments, j->n_segments, s->name) ||
            (j->n_targets && !mc__name_in(j->targets, j->n_targets, s->name)))
            continue;
        for (uint32_t k = 0; k < p->n_have && !holds; k++)
            holds = p->have[k] < m->n_slots && m->slots[p->have[k]] &&
                    strcmp(m->slots[p->have[k]]->name, s->name) == 0;
        if (holds)
            continue;
        pthread_mutex_lock(&s->mu);
        used = s->alloc.used_bytes;
        total = s->alloc.total_bytes;
        free_run = mc__seg_alloc_largest_free(&s->alloc);
        pthread_mutex_unlock(&s->mu);
        if (total == 0 || free_run < p->size)
            continue;
        util = (double)used / (double)total;
        if (util < best) {
            best = util;
            snprintf(out, MC_MP_MAX_SEGMENT_NAME + 1, "%s", s->name);
        }
    }
    pthread_rwlock_unlock(&m->registry);
    return best <= 1.0;
}

/* Slot -> index of the job's segment of that name (-1: none), read now. */
static int32_t *mc__sources_map(mc__master_t *m, const mc__job_t *j, uint32_t *n) {
    int32_t *map;
    pthread_rwlock_rdlock(&m->registry);
    *n = m->n_slots;
    map = mc__malloc(((size_t)m->n_slots + 1) * sizeof(*map));
    for (uint32_t i = 0; map && i < m->n_slots; i++) {
        map[i] = -1;
        for (uint32_t k = 0; m->slots[i] && k < j->n_segments; k++)
            if (strcmp(m->slots[i]->name, j->segments[k]) == 0)
                map[i] = (int32_t)k;
    }
    pthread_rwlock_unlock(&m->registry);
    return map;
}

static void mc__job_restore_segments(mc__master_t *m, const mc__job_t *j) {
    for (uint32_t i = 0; i < j->n_segments; i++)
        mc__segment_set_drain(m, j->segments[i], -1, 0);
}

static void mc__job_tick(mc__master_t *m, mc__job_t *j, uint64_t now) {
    mc__sweep_t w;
    uint32_t slots;
    uint32_t ended;
    memset(&w, 0, sizeof(w));
    ended = mc__job_refresh(m, j, now);
    slots = j->max_concurrency < MC__DRAIN_MAX_ACTIVE ? j->max_concurrency : MC__DRAIN_MAX_ACTIVE;
    /* Every task slot busy and none ended: the sweep (every object) would change nothing. */
    if (j->n_active >= slots && ended == 0 && j->status == MC_DRAIN_JOB_RUNNING)
        return;
    w.j = j;
    w.now = now;
    w.max_plans = slots > j->n_active ? slots - j->n_active : 0;
    w.remaining = mc__calloc(j->n_segments, sizeof(*w.remaining));
    w.plans = mc__calloc(w.max_plans ? w.max_plans : 1, sizeof(*w.plans));
    w.src_of = mc__sources_map(m, j, &w.n_slots);
    if (!w.remaining || !w.plans || !w.src_of)
        goto out; /* out of memory: try again next tick */
    mc__objects_sweep(m, mc__sweep_visit, &w);
    j->blocked = w.blocked;
    for (uint32_t i = 0; i < j->n_segments; i++) /* (the status read spares the write locks) */
        if (w.remaining[i] == 0 && mc__segment_status(m, j->segments[i]) == MC__SEG_DRAINING)
            mc__segment_set_drain(m, j->segments[i], MC__SEG_DRAINING, MC__SEG_DRAINED);
    if (j->n_active == 0 && w.remaining_all == 0) {
        mc__job_set(j, MC_DRAIN_JOB_SUCCEEDED, "Drain job finished successfully");
        MC_INFO("drain job: succeeded (%llu objects moved)", (unsigned long long)j->succeeded);
        goto out;
    }
    if (j->n_active == 0 && w.n_plans == 0 && w.remaining_all == w.given_up) {
        mc__job_restore_segments(m, j);
        mc__job_set(j, MC_DRAIN_JOB_FAILED, "Drain job failed: unrecoverable units remain");
        MC_WARN("drain job: failed, %llu objects could not be moved (no segment with room, or "
                "their moves failed %u times)",
                (unsigned long long)w.given_up, MC__DRAIN_MAX_RETRIES);
        goto out;
    }
    for (uint32_t i = 0; i < w.n_plans; i++) {
        mc__plan_t *p = &w.plans[i];
        char target[MC_MP_MAX_SEGMENT_NAME + 1];
        mc__active_t *a = &j->active[j->n_active];
        int32_t rc = MC_ERR_NO_AVAILABLE_HANDLE;
        if (mc__pick_target(m, j, p, target))
            rc = mc__task_move(m, p->unit.key, p->unit.key_len, j->segments[p->unit.src], target,
                               a->task);
        if (rc == 0) {
            a->unit = p->unit;
            a->bytes = p->size;
            p->unit.key = NULL; /* the active task owns it */
            j->n_active++;
        } else if (rc == MC_ERR_OBJECT_HAS_REPLICATION_TASK ||
                   rc == MC_ERR_TASK_PENDING_LIMIT_EXCEEDED) {
            j->blocked++; /* another task has it, or too many wait: later */
        } else if (rc != MC_ERR_OBJECT_NOT_FOUND) {
            mc__unit_failed(j, &p->unit, now); /* no room anywhere, or the move was refused */
        }
    }
    if (j->status != MC_DRAIN_JOB_RUNNING)
        mc__job_set(j, MC_DRAIN_JOB_RUNNING, "Drain job running");
out:
    for (uint32_t i = 0; w.plans && i < w.n_plans; i++)
        mc__free(w.plans[i].unit.key);
    mc__free(w.plans);
    mc__free(w.remaining);
    mc__free((void *)w.src_of);
}

/* Drops the oldest finished job while more than the limit are kept (mu held). */
static void mc__jobs_trim(struct mc__drain *d) {
    size_t finished = 0, oldest = SIZE_MAX;
    for (size_t i = 0; i < d->n_jobs; i++) {
        if (!mc__job_over(d->jobs[i]))
            continue;
        finished++;
        if (oldest == SIZE_MAX || d->jobs[i]->finished_ms < d->jobs[oldest]->finished_ms)
            oldest = i;
    }
    if (finished <= MC__DRAIN_MAX_FINISHED)
        return;
    mc__job_free(d->jobs[oldest]);
    d->jobs[oldest] = d->jobs[--d->n_jobs];
}

static void *mc__drain_main(void *arg) {
    mc__master_t *m = arg;
    struct mc__drain *d = m->drain;
    pthread_mutex_lock(&d->mu);
    while (!d->stopping) {
        struct timespec ts = mc__realtime_after_ms(MC__DRAIN_TICK_MS);
        uint64_t now = mc__now_ms();
        for (size_t i = 0; i < d->n_jobs; i++)
            if (!mc__job_over(d->jobs[i]))
                mc__job_tick(m, d->jobs[i], now);
        mc__jobs_trim(d);
        pthread_cond_timedwait(&d->cv, &d->mu, &ts);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

/* --- entry points --- */

int mc__drain_init(mc__master_t *m) {
    struct mc__drain *d = mc__calloc(1, sizeof(*d));
    if (!d)
        return MC_ERR_MEMORY;
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    m->drain = d;
    return 0;
}

void mc__drain_destroy(mc__master_t *m) {
    struct mc__drain *d = m->drain;
    if (!d)
        return;
    if (d->started) {
        mc__cond_raise(&d->mu, &d->cv, &d->stopping);
        pthread_join(d->thread, NULL);
    }
    for (size_t i = 0; i < d->n_jobs; i++)
        mc__job_free(d->jobs[i]);
    mc__free(d->jobs);
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
    mc__free(d);
    m->drain = NULL;
}

static char **mc__copy_names(const char **names, uint32_t n) {
    char **out = mc__calloc(n ? n : 1, sizeof(*out));
    for (uint32_t i = 0; out && i < n; i++) {
        out[i] = mc__strdup(names[i]);
        if (!out[i]) {
            while (i--)
                mc__free(out[i]);
            mc__free(out);
            return NULL;
        }
    }
    return out;
}

/* The reference's checks, in its order: INVALID_PARAMS for an empty or repeated list, a zero
 * concurrency or a target that is also drained; SEGMENT_NOT_FOUND for a name nothing mounts;
 * UNAVAILABLE_IN_CURRENT_STATUS for a segment already draining (or drained) or a target that
 * takes no placements. */
static int32_t mc__drain_check(mc__master_t *m, const mc__drain_request_t *r) {
    if (r->n_segments == 0 || r->max_concurrency == 0 || r->n_segments > MC__DRAIN_MAX_SEGMENTS ||
        r->n_targets > MC__DRAIN_MAX_SEGMENTS)
        return MC_ERR_INVALID_PARAMS;
    for (uint32_t i = 0; i < r->n_segments; i++) {
        if (!r->segments[i][0] || strlen(r->segments[i]) > MC_MP_MAX_SEGMENT_NAME)
            return MC_ERR_INVALID_PARAMS;
        for (uint32_t k = 0; k < i; k++)
            if (strcmp(r->segments[i], r->segments[k]) == 0)
                return MC_ERR_INVALID_PARAMS;
    }
    for (uint32_t i = 0; i < r->n_segments; i++) {
        int st = mc__segment_status(m, r->segments[i]);
        if (st < 0)
            return MC_ERR_SEGMENT_NOT_FOUND;
        if (st != MC__SEG_OK)
            return MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS;
    }
    for (uint32_t i = 0; i < r->n_targets; i++) {
        int st;
        if (mc__name_in((char *const *)r->segments, r->n_segments, r->targets[i]))
            return MC_ERR_INVALID_PARAMS;
        st = strlen(r->targets[i]) > MC_MP_MAX_SEGMENT_NAME ? -1
                                                            : mc__segment_status(m, r->targets[i]);
        if (st < 0)
            return MC_ERR_SEGMENT_NOT_FOUND;
        if (st != MC__SEG_OK)
            return MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS;
    }
    return 0;
}

int32_t mc__drain_create(mc__master_t *m, const mc__drain_request_t *r, uint8_t id[16]) {
    struct mc__drain *d = m->drain;
    mc__job_t *j = NULL;
    mc__job_t **jobs;
    uint32_t marked = 0;
    int32_t rc;
    pthread_mutex_lock(&d->mu);
    rc = mc__drain_check(m, r);
    if (rc)
        goto out;
    rc = MC_ERR_INTERNAL_ERROR;
    j = mc__calloc(1, sizeof(*j));
    if (!j)
        goto out;
    j->segments = mc__copy_names(r->segments, r->n_segments);
    j->targets = mc__copy_names(r->targets, r->n_targets);
    if (!j->segments || !j->targets)
        goto out;
    j->n_segments = r->n_segments;
    j->n_targets = r->n_targets;
    j->max_concurrency = r->max_concurrency;
    jobs = mc__realloc(d->jobs, (d->n_jobs + 1) * sizeof(*jobs));
    if (!jobs)
        goto out;
    d->jobs = jobs;
    if (!d->started) {
        if (pthread_create(&d->thread, NULL, mc__drain_main, m) != 0)
            goto out;
        d->started = 1;
    }
    /* Checked and marked under d->mu: a concurrent job cannot take the same segment. */
    for (; marked < r->n_segments; marked++)
        if (mc__segment_set_drain(m, r->segments[marked], 0, MC__SEG_DRAINING) == 0)
            break; /* unmounted meanwhile */
    if (marked < r->n_segments) {
        rc = MC_ERR_SEGMENT_NOT_FOUND;
        while (marked--)
            mc__segment_set_drain(m, r->segments[marked], MC__SEG_DRAINING, 0);
        goto out;
    }
    mc__uuid_generate(j->id);
    j->created_ms = (int64_t)mc__wall_ms();
    mc__job_set(j, MC_DRAIN_JOB_CREATED, "Drain job created");
    memcpy(id, j->id, sizeof(j->id));
    d->jobs[d->n_jobs++] = j;
    j = NULL;
    rc = 0;
    pthread_cond_signal(&d->cv);
out:
    pthread_mutex_unlock(&d->mu);
    if (j) {
        j->n_segments = j->segments ? r->n_segments : 0;
        j->n_targets = j->targets ? r->n_targets : 0;
        mc__job_free(j);
    }
    return rc;
}

static mc__job_t *mc__job_find(struct mc__drain *d, const uint8_t id[16]) {
    for (size_t i = 0; i < d->n_jobs; i++)
        if (memcmp(d->jobs[i]->id, id, MC_MP_CLIENT_ID_LEN) == 0)
            return d->jobs[i];
    return NULL;
}

int32_t mc__drain_query(mc__master_t *m, const uint8_t id[16], mc__drain_info_t *info,
                        void (*seg_fn)(void *ctx, const char *name), void *ctx) {
    struct mc__drain *d = m->drain;
    mc__job_t *j;
    pthread_mutex_lock(&d->mu);
    j = mc__job_find(d, id);
    if (j) {
        info->status = j->status;
        info->created_ms = j->created_ms;
        info->updated_ms = j->updated_ms;
        info->succeeded_units = j->succeeded;
        info->failed_units = j->failed;
        info->blocked_units = j->blocked;
        info->active_units = j->n_active;
        info->migrated_bytes = j->migrated;
        snprintf(info->message, sizeof(info->message), "%s", j->message);
        for (uint32_t i = 0; seg_fn && i < j->n_segments; i++)
            seg_fn(ctx, j->segments[i]);
    }
    pthread_mutex_unlock(&d->mu);
    return j ? 0 : MC_ERR_JOB_NOT_FOUND;
}

/* Unlike the reference, which refuses a cancel while move tasks run, a job is canceled at once:
 * it makes no more tasks, the ones running finish on their own (each leaves its object whole on
 * one side), and the segments take placements again. */
int32_t mc__drain_cancel(mc__master_t *m, const uint8_t id[16]) {
    struct mc__drain *d = m->drain;
    mc__job_t *j;
    int32_t rc = 0;
    pthread_mutex_lock(&d->mu);
    j = mc__job_find(d, id);
    if (!j) {
        rc = MC_ERR_JOB_NOT_FOUND;
    } else if (mc__job_over(j)) {
        rc = MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS;
    } else {
        mc__job_restore_segments(m, j);
        mc__job_set(j, MC_DRAIN_JOB_CANCELED, "Drain job canceled");
    }
    pthread_mutex_unlock(&d->mu);
    return rc;
}
