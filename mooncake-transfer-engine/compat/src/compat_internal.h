/* State behind a transfer_engine_t: the mc engine plus what the reference interface needs and the
 * mc API does not keep (per-batch task counts and the deferred notify of
 * submitTransferWithNotify). Segment names are the engine's (mc_engine_segment_name). */
#ifndef MC_COMPAT_INTERNAL_H
#define MC_COMPAT_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "mooncake/transfer_engine.h"

typedef struct mc__compat_batch {
    mc_batch_id_t id;
    size_t submitted;   /* tasks handed to the engine so far */
    size_t notify_upto; /* a pending notify waits for tasks [0, notify_upto) to complete */
    size_t notify_seen; /* tasks [0, notify_seen) were already seen COMPLETED */
    char *notify_peer;  /* NULL when no notify is pending */
    char *notify_name;
    char *notify_msg;
} mc__compat_batch_t;

typedef struct mc__compat {
    mc_engine_t *engine;
    pthread_mutex_t mu; /* guards the table below */
    mc__compat_batch_t *batches;
    size_t nbatches, cap_batches;
    /* Batches with a notify waiting for completion; read without the lock so that status polls
     * of plain batches never take it. */
    _Atomic size_t pending_notifies;
} mc__compat_t;

/* Copy of the segment's name as the engine knows it (free with mc__free), NULL when the id was
 * never opened. */
char *mc__compat_segment_name(mc__compat_t *c, mc_segment_id_t id);

void mc__compat_batches_free(mc__compat_t *c);
/* Sends a notify and reports how it went; the strings stay the caller's. */
int mc__compat_send_notify(mc__compat_t *c, const char *peer, const char *name, const char *msg);

#endif
