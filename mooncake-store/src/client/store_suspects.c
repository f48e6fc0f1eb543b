/* Peer segments as the mover sees them: the engine's ids for them, the ones whose transfers
 * failed lately (suspects: readers try them last, their failures are logged once in a while), and
 * the transfers to segments the master dropped. */
#include <stdio.h>
#include <string.h>

#include "client/store_internal.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/log.h"
#include "mooncake/common/time.h"

/* Long enough that a burst of reads after a peer died pays for one failed attempt, short enough
 * that a peer that failed only briefly is soon read from again; the warning interval keeps a
 * dead peer that is the last replica of many objects to one line every few seconds. */
#define MC__SUSPECT_MS 3000
#define MC__SUSPECT_WARN_MS 5000

/* A peer segment whose transfer failed lately: readers try it last until `until_ms`, and its
 * failures are logged once per MC__SUSPECT_WARN_MS (the master needs client_ttl to notice a dead
 * owner; until then every replica list still names it). */
#define MC__SUSPECTS 32
typedef struct mc__suspect {
    char name[MC_MP_MAX_SEGMENT_NAME + 1];
    uint64_t until_ms;  /* 0: free slot */
    uint64_t warned_ms; /* last warning about it */
    uint64_t quiet;     /* failures since that warning */
} mc__suspect_t;

struct mc__suspects {
    pthread_mutex_t mu;
    mc__suspect_t slot[MC__SUSPECTS];
    /* the master's view version when the heartbeat thread last looked for stalled transfers to
     * segments the master dropped (mc__store_abort_dropped; that thread's alone) */
    uint64_t stall_view;
};

struct mc__suspects *mc__suspects_create(void) {
    struct mc__suspects *t = mc__calloc(1, sizeof(*t));
    if (t)
        pthread_mutex_init(&t->mu, NULL);
    return t;
}

void mc__suspects_destroy(struct mc__suspects *t, int inherited) {
    /* a fork() child's copy may be locked by a parent's thread: it is only freed */
    if (t && !inherited)
        pthread_mutex_destroy(&t->mu);
    mc__free(t);
}

/* ---- segment ids: the engine's (open-or-get), no copy here ---- */

int mc__store_segment_id(mc_store_t *s, const char *name, mc_segment_id_t *out) {
    int rc = mc_engine_open_segment(s->engine, name, out);
    /* The caller reports it, once per segment and interval (see mc__store_suspect_failed). */
    if (rc != 0)
        MC_DEBUG("store: cannot open segment %s: %s", name, mc_strerror(rc));
    return rc == 0 ? 0 : mc__store_engine_code_for(rc, MC__ENG_TRANSFER);
}

/* After a failed transfer the peer may have restarted: the engine re-fetches it next time. */
void mc__store_forget_segment(mc_store_t *s, const char *name) {
    mc_segment_id_t id = -1;
    if (mc_engine_segment_id(s->engine, name, &id) == 0)
        (void)mc_engine_close_segment(s->engine, id);
}

/* ---- suspect segments ---- */

static mc__suspect_t *mc__suspect_find(mc_store_t *s, const char *name) {
    for (size_t i = 0; i < MC__SUSPECTS; i++)
        if (s->suspects->slot[i].until_ms && strcmp(s->suspects->slot[i].name, name) == 0)
            return &s->suspects->slot[i];
    return NULL;
}

int mc__store_is_suspect(mc_store_t *s, const char *name) {
    mc__suspect_t *e;
    int yes = 0;
    pthread_mutex_lock(&s->suspects->mu);
    e = mc__suspect_find(s, name);
    yes = e && e->until_ms > mc__now_ms();
    pthread_mutex_unlock(&s->suspects->mu);
    return yes;
}

void mc__store_suspect_failed(mc_store_t *s, const char *name, int rc) {
    uint64_t now = mc__now_ms();
    uint64_t quiet = 0;
    int warn = 0;
    mc__suspect_t *e;
    pthread_mutex_lock(&s->suspects->mu);
    e = mc__suspect_find(s, name);
    if (!e) {
        /* A free slot, else the one whose suspicion ends first: the table stays bounded. */
        e = &s->suspects->slot[0];
        for (size_t i = 0; i < MC__SUSPECTS && e->until_ms; i++)
            if (!s->suspects->slot[i].until_ms || s->suspects->slot[i].until_ms < e->until_ms)
                e = &s->suspects->slot[i];
        memset(e, 0, sizeof(*e));
        snprintf(e->name, sizeof(e->name), "%s", name);
    }
    e->until_ms = now + MC__SUSPECT_MS;
    if (e->warned_ms == 0 || now - e->warned_ms >= MC__SUSPECT_WARN_MS) {
        warn = 1;
        quiet = e->quiet;
        e->warned_ms = now;
        e->quiet = 0;
    } else {
        e->quiet++;
    }
    pthread_mutex_unlock(&s->suspects->mu);
    if (warn && quiet)
        MC_WARN("store: transfers with segment %s fail (%s; %llu more since the last report); "
                "reading other replicas first for %d s",
                name, mc_store_strerror(rc), (unsigned long long)quiet, MC__SUSPECT_MS / 1000);
    else if (warn)
        MC_WARN("store: transfers with segment %s fail (%s); reading other replicas first for "
                "%d s",
                name, mc_store_strerror(rc), MC__SUSPECT_MS / 1000);
}

void mc__store_suspect_clear(mc_store_t *s, const char *name) {
    mc__suspect_t *e;
    pthread_mutex_lock(&s->suspects->mu);
    e = mc__suspect_find(s, name);
    if (e)
        memset(e, 0, sizeof(*e));
    pthread_mutex_unlock(&s->suspects->mu);
}

/* ---- transfers to segments the master dropped ---- */

/* Transfers that have gone this long without news are worth a question to the master once its
 * view changed: no live peer leaves a transfer without a finished 4 MiB slice for 2 s unless its
 * link runs below 2 MB/s, and a wrong guess only keeps placements off it until its owner's next
 * heartbeat. */
#define MC__STALL_ASK_MS 2000
#define MC__STALL_MAX 16 /* segments asked about per heartbeat */
/* Segment ids are small integers from 1 (the engine's table); a scan looks at this many. */
#define MC__STALL_SCAN 4096

void mc__store_abort_dropped(mc_store_t *s) {
    char names[MC__STALL_MAX][MC_MP_MAX_SEGMENT_NAME + 1];
    const char *np[MC__STALL_MAX];
    mc_segment_id_t ids[MC__STALL_MAX];
    int32_t codes[MC__STALL_MAX];
    uint64_t view;
    size_t n = 0;
    if (!s->engine || !s->master)
        return;
    view = mc__master_client_view_version(s->master);
    for (mc_segment_id_t id = 1; id <= MC__STALL_SCAN && n < MC__STALL_MAX; id++) {
        uint64_t ms = 0;
        if (mc_engine_segment_stalled_ms(s->engine, id, &ms) != 0)
            break; /* past the last segment opened */
        if (ms < MC__STALL_ASK_MS ||
            mc_engine_segment_name(s->engine, id, names[n], sizeof(names[n])) != 0)
            continue;
        np[n] = names[n];
        ids[n++] = id;
    }
    /* Nothing stalled: what changed in the view so far concerns no transfer of ours. */
    if (n == 0 || view == s->suspects->stall_view) {
        if (n == 0)
            s->suspects->stall_view = view;
        return;
    }
    if (mc__master_client_segment_unreachable(s->master, n, np, codes) != 0)
        return; /* asked again after the next heartbeat */
    s->suspects->stall_view = view;
    for (size_t i = 0; i < n; i++) {
        if (codes[i] != MC_ERR_SEGMENT_NOT_FOUND)
            continue;
        MC_WARN("store: the master dropped segment %s while transfers to it waited; ending them "
                "now",
                names[i]);
        (void)mc_engine_abort_segment(s->engine, ids[i]);
    }
}
