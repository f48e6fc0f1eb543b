/* Segments: the reference addresses peers by a small integer id; our notify call takes the
 * peer's name, which the engine gives for an id (mc_engine_segment_name). */
#include <string.h>

#include "compat_internal.h"
#include "mooncake/common/alloc.h"
#include "transfer_engine_c.h"

char *mc__compat_segment_name(mc__compat_t *c, mc_segment_id_t id) {
    char name[256];
    return mc_engine_segment_name(c->engine, id, name, sizeof(name)) == 0 ? mc__strdup(name) : NULL;
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
    if (id < 0 || id > INT32_MAX)
        return MC_ERR_INVALID_ARGUMENT;
    return (segment_id_t)id;
}

/* Our descriptor cache already refreshes when a peer restarts, so there is nothing to bypass. */
segment_id_t openSegmentNoCache(transfer_engine_t engine, const char *segment_name) {
    return openSegment(engine, segment_name);
}

int closeSegment(transfer_engine_t engine, segment_id_t segment_id) {
    mc__compat_t *c = engine;
    if (!c || segment_id < 0)
        return MC_ERR_INVALID_ARGUMENT;
    return mc_engine_close_segment(c->engine, segment_id);
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
