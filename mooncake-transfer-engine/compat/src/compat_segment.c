/* Segments: the reference addresses peers by a small integer id, but our notify call takes the
 * peer's name, so the names of opened segments are remembered here. */
#include <string.h>

#include "compat_internal.h"
#include "mooncake/common/alloc.h"
#include "transfer_engine_c.h"

int mc__compat_segment_put(mc__compat_t *c, mc_segment_id_t id, const char *name) {
    char *copy = mc__strdup(name);
    int rc = 0;
    if (!copy) {
        rc = MC_ERR_MEMORY;
        goto out;
    }
    for (size_t i = 0; i < c->nsegs; i++) {
        if (c->segs[i].id == id) {
            mc__free(c->segs[i].name);
            c->segs[i].name = copy;
            copy = NULL;
            goto out;
        }
    }
    if (c->nsegs == c->cap_segs) {
        size_t cap = c->cap_segs ? c->cap_segs * 2 : 8;
        mc__compat_segment_t *grown = mc__realloc(c->segs, cap * sizeof(*grown));
        if (!grown) {
            rc = MC_ERR_MEMORY;
            goto out;
        }
        c->segs = grown;
        c->cap_segs = cap;
    }
    c->segs[c->nsegs].id = id;
    c->segs[c->nsegs].name = copy;
    c->nsegs++;
    copy = NULL;
out:
    mc__free(copy);
    return rc;
}

char *mc__compat_segment_name(mc__compat_t *c, mc_segment_id_t id) {
    char *name = NULL;
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->nsegs; i++) {
        if (c->segs[i].id == id) {
            name = mc__strdup(c->segs[i].name);
            break;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return name;
}

void mc__compat_segment_drop(mc__compat_t *c, mc_segment_id_t id) {
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->nsegs; i++) {
        if (c->segs[i].id == id) {
            mc__free(c->segs[i].name);
            c->segs[i] = c->segs[--c->nsegs];
            break;
        }
    }
    pthread_mutex_unlock(&c->mu);
}

void mc__compat_segments_free(mc__compat_t *c) {
    for (size_t i = 0; i < c->nsegs; i++)
        mc__free(c->segs[i].name);
    mc__free(c->segs);
    c->segs = NULL;
    c->nsegs = c->cap_segs = 0;
}

segment_id_t openSegment(transfer_engine_t engine, const char *segment_name) {
    mc__compat_t *c = engine;
    mc_segment_id_t id = -1;
    int rc;
    if (!c || !segment_name || !*segment_name)
        return MC_ERR_INVALID_ARGUMENT;
    rc = mc_engine_open_segment(c->engine, segment_name, &id);
    if (rc != 0)
        return rc;
    /* The reference's id type is 32-bit; an id that does not fit cannot be handed out. */
    if (id < 0 || id > INT32_MAX) {
        mc_engine_close_segment(c->engine, id);
        return MC_ERR_INVALID_ARGUMENT;
    }
    pthread_mutex_lock(&c->mu);
    rc = mc__compat_segment_put(c, id, segment_name);
    pthread_mutex_unlock(&c->mu);
    if (rc != 0) {
        mc_engine_close_segment(c->engine, id);
        return rc;
    }
    return (segment_id_t)id;
}

/* Our descriptor cache already refreshes when a peer restarts, so there is nothing to bypass. */
segment_id_t openSegmentNoCache(transfer_engine_t engine, const char *segment_name) {
    return openSegment(engine, segment_name);
}

int closeSegment(transfer_engine_t engine, segment_id_t segment_id) {
    mc__compat_t *c = engine;
    int rc;
    if (!c || segment_id < 0)
        return MC_ERR_INVALID_ARGUMENT;
    rc = mc_engine_close_segment(c->engine, segment_id);
    if (rc == 0)
        mc__compat_segment_drop(c, segment_id);
    return rc;
}

/* Unpublishing our own segment while the engine runs has no counterpart in the mc API: the
 * segment lives exactly as long as the engine. */
int removeLocalSegment(transfer_engine_t engine, const char *segment_name) {
    (void)segment_name;
    return engine ? MC_ERR_NOT_IMPLEMENTED : MC_ERR_INVALID_ARGUMENT;
}

int syncSegmentCache(transfer_engine_t engine) {
    return engine ? 0 : MC_ERR_INVALID_ARGUMENT;
}
