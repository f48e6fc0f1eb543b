/* Batches of the reference C interface: request conversion and the notify that
 * submitTransferWithNotify defers until the batch's tasks have completed. */
#include <stdatomic.h>
#include <string.h>

#include "compat_internal.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/log.h"
#include "transfer_engine_c.h"

/* Notify payloads are bounded by the engine; refuse a bigger one at submit time, because the
 * deferred send can no longer report an error to the caller. */
#define MC__COMPAT_NOTIFY_MAX (64u * 1024u)

static mc__compat_batch_t *mc__compat_batch_find(mc__compat_t *c, mc_batch_id_t id) {
    for (size_t i = 0; i < c->nbatches; i++)
        if (c->batches[i].id == id)
            return &c->batches[i];
    return NULL;
}

static void mc__compat_notify_clear(mc__compat_t *c, mc__compat_batch_t *b) {
    if (b->notify_peer)
        atomic_fetch_sub(&c->pending_notifies, 1);
    mc__free(b->notify_peer);
    mc__free(b->notify_name);
    mc__free(b->notify_msg);
    b->notify_peer = b->notify_name = b->notify_msg = NULL;
}

void mc__compat_batches_free(mc__compat_t *c) {
    for (size_t i = 0; i < c->nbatches; i++)
        mc__compat_notify_clear(c, &c->batches[i]);
    mc__free(c->batches);
    c->batches = NULL;
    c->nbatches = c->cap_batches = 0;
}

batch_id_t allocateBatchID(transfer_engine_t engine, size_t batch_size) {
    mc__compat_t *c = engine;
    mc_batch_id_t id = 0;
    batch_id_t ret = INVALID_BATCH;
    if (!c || batch_size == 0)
        goto out;
    if (mc_engine_batch_alloc(c->engine, batch_size, &id) != 0)
        goto out;
    pthread_mutex_lock(&c->mu);
    if (c->nbatches == c->cap_batches) {
        size_t cap = c->cap_batches ? c->cap_batches * 2 : 16;
        mc__compat_batch_t *grown = mc__realloc(c->batches, cap * sizeof(*grown));
        if (grown) {
            c->batches = grown;
            c->cap_batches = cap;
        }
    }
    if (c->nbatches < c->cap_batches) {
        memset(&c->batches[c->nbatches], 0, sizeof(c->batches[0]));
        c->batches[c->nbatches++].id = id;
        ret = id;
    }
    pthread_mutex_unlock(&c->mu);
    if (ret == INVALID_BATCH)
        mc_engine_batch_free(c->engine, id);
out:
    return ret;
}

/* Looks at the tasks a pending notify waits for; sends it once all of them COMPLETED, drops it
 * when one of them failed. Returns without waiting while any is still running. */
static void mc__compat_try_notify(mc__compat_t *c, mc_batch_id_t id) {
    char *peer = NULL, *name = NULL, *msg = NULL;
    mc__compat_batch_t *b = NULL;
    pthread_mutex_lock(&c->mu);
    b = mc__compat_batch_find(c, id);
    if (!b || !b->notify_peer)
        goto unlock;
    while (b->notify_seen < b->notify_upto) {
        mc_task_state_t st;
        if (mc_engine_task_status(c->engine, id, b->notify_seen, &st) != 0 ||
            (st.status != MC_STATUS_COMPLETED && st.status != MC_STATUS_WAITING &&
             st.status != MC_STATUS_PENDING)) {
            MC_WARN("batch %llu: task %zu did not complete; its notify is dropped",
                    (unsigned long long)id, b->notify_seen);
            mc__compat_notify_clear(c, b);
            goto unlock;
        }
        if (st.status != MC_STATUS_COMPLETED)
            goto unlock;
        b->notify_seen++;
    }
    /* Sent outside the lock: it is network I/O. */
    peer = b->notify_peer, name = b->notify_name, msg = b->notify_msg;
    b->notify_peer = b->notify_name = b->notify_msg = NULL;
    atomic_fetch_sub(&c->pending_notifies, 1);
unlock:
    pthread_mutex_unlock(&c->mu);
    if (peer) {
        int rc = mc__compat_send_notify(c, peer, name, msg);
        if (rc != 0)
            MC_WARN("notify to %s failed: %s", peer, mc_strerror(rc));
    }
    mc__free(peer);
    mc__free(name);
    mc__free(msg);
}

static int mc__compat_submit(mc__compat_t *c, batch_id_t batch_id,
                             const struct transfer_request *entries, size_t count,
                             const notify_msg_t *notify) {
    mc_request_t *reqs = NULL;
    mc__compat_batch_t *b = NULL;
    char *peer = NULL, *name = NULL, *msg = NULL;
    int locked = 0;
    int rc = 0;
    if (!c || (!entries && count > 0)) {
        rc = MC_ERR_INVALID_ARGUMENT;
        goto out;
    }
    if (count > 0) {
        reqs = mc__malloc(count * sizeof(*reqs));
        if (!reqs) {
            rc = MC_ERR_MEMORY;
            goto out;
        }
    }
    for (size_t i = 0; i < count; i++) {
        reqs[i].opcode = entries[i].opcode;
        reqs[i].source = entries[i].source;
        reqs[i].target_id = entries[i].target_id;
        reqs[i].target_offset = entries[i].target_offset;
        reqs[i].length = entries[i].length;
        reqs[i].target_epoch = 0; /* the reference's requests name no incarnation */
    }
    if (notify) {
        const char *m = notify->msg ? notify->msg : "";
        if (count == 0 || strlen(m) > MC__COMPAT_NOTIFY_MAX) {
            rc = MC_ERR_INVALID_ARGUMENT;
            goto out;
        }
        if (entries[0].target_id == LOCAL_SEGMENT)
            peer = mc__strdup(mc_engine_local_name(c->engine));
        else
            peer = mc__compat_segment_name(c, entries[0].target_id);
        if (!peer) {
            rc = MC_ERR_INVALID_ARGUMENT; /* a segment this engine never opened */
            goto out;
        }
        name = mc__strdup(notify->name ? notify->name : "");
        msg = mc__strdup(m);
        if (!name || !msg) {
            rc = MC_ERR_MEMORY;
            goto out;
        }
    }
    /* Held across the submit so task indices and our count agree when threads share a batch. */
    pthread_mutex_lock(&c->mu);
    locked = 1;
    b = mc__compat_batch_find(c, batch_id);
    if (notify && b && b->notify_peer) {
        rc = MC_ERR_BATCH_BUSY; /* one deferred notify per batch at a time */
        goto out;
    }
    rc = mc_engine_batch_submit(c->engine, batch_id, reqs, count);
    if (rc != 0 || !b)
        goto out;
    b->submitted += count;
    if (notify) {
        b->notify_peer = peer, b->notify_name = name, b->notify_msg = msg;
        peer = name = msg = NULL;
        b->notify_upto = b->submitted;
        b->notify_seen = 0;
        atomic_fetch_add(&c->pending_notifies, 1);
    }
out:
    if (locked)
        pthread_mutex_unlock(&c->mu);
    mc__free(reqs);
    mc__free(peer);
    mc__free(name);
    mc__free(msg);
    return rc;
}

int submitTransfer(transfer_engine_t engine, batch_id_t batch_id, struct transfer_request *entries,
                   size_t count) {
    return mc__compat_submit(engine, batch_id, entries, count, NULL);
}

int submitTransferWithNotify(transfer_engine_t engine, batch_id_t batch_id,
                             struct transfer_request *entries, size_t count,
                             notify_msg_t notify_msg) {
    return mc__compat_submit(engine, batch_id, entries, count, &notify_msg);
}

int getTransferStatus(transfer_engine_t engine, batch_id_t batch_id, size_t task_id,
                      struct transfer_status *status) {
    mc__compat_t *c = engine;
    mc_task_state_t st;
    int rc;
    if (!c || !status)
        return MC_ERR_INVALID_ARGUMENT;
    rc = mc_engine_task_status(c->engine, batch_id, task_id, &st);
    if (rc != 0)
        return rc;
    status->status = st.status;
    status->transferred_bytes = st.transferred_bytes;
    if (st.status != MC_STATUS_WAITING && st.status != MC_STATUS_PENDING &&
        atomic_load(&c->pending_notifies) > 0)
        mc__compat_try_notify(c, batch_id);
    return 0;
}

int freeBatchID(transfer_engine_t engine, batch_id_t batch_id) {
    mc__compat_t *c = engine;
    mc__compat_batch_t *b = NULL;
    int rc;
    if (!c)
        return MC_ERR_INVALID_ARGUMENT;
    if (atomic_load(&c->pending_notifies) > 0)
        mc__compat_try_notify(c, batch_id);
    rc = mc_engine_batch_free(c->engine, batch_id);
    if (rc != 0)
        return rc;
    pthread_mutex_lock(&c->mu);
    b = mc__compat_batch_find(c, batch_id);
    if (b) {
        mc__compat_notify_clear(c, b);
        *b = c->batches[--c->nbatches];
    }
    pthread_mutex_unlock(&c->mu);
    return 0;
}
