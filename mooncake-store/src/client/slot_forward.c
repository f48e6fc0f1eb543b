/* A put that waits once: the client's write-ask carrying a slot's commit, and the holder that
 * forwards such commits to the master (slot_forward.h); the same combining carries the lookups
 * of gets that a holder answers (get_forward.c).
 *
 * What a put's success means does not change (docs/perf/issue26-put.md): the holder forwards a
 * commit only after the engine put its bytes in place, and answers only with the master's code,
 * which the master gives after it recorded the object. When the answer does not come (the
 * holder died, the master did not answer it), the client does not know whether the commit was
 * recorded; store_put.c finds out by giving the slot back (mc__put_by_slot). */
#include "client/slot_forward.h"

#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "client/get_forward.h"
#include "client/store_internal.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/config.h"
#include "mooncake/common/failpoint.h"
#include "mooncake/common/frame.h"
#include "mooncake/common/log.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"

/* The message: u8 version | client id | u64 slot | u64 value_len | u16 key_len | key. The
 * answer: u8 status | i32 code. */
#define MC__FWD_VERSION 1u
#define MC__FWD_HEAD (1u + MC_MP_CLIENT_ID_LEN + 8u + 8u + 2u)
/* The engine's bound on a write-ask's message (proto.h, MC__TE_MAX_ASK_MSG): longer keys take
 * the usual write and commit. */
#define MC__FWD_MAX_MSG 4096u
#define MC__FWD_MAX_KEY (MC__FWD_MAX_MSG - MC__FWD_HEAD)
#define MC__FWD_ANSWER 5u
/* Values up to this size are forwarded. Forwarding 64 KiB puts gained nothing with 8 clients
 * on 2 cores and cost one client a tenth of its puts (docs/perf/issue26-forward/ab.md). */
#define MC__FWD_MAX_VALUE (16u << 10)
/* Commits one forward takes at most (the master's batch bound is larger). */
#define MC__FWD_MAX_BATCH 64

/* One commit or lookup waiting at the holder, on the stack of the connection thread that
 * received it. */
typedef struct mc__fwd_entry {
    mc__key_replicas_t *kr; /* a lookup's result (NULL: a commit) */
    uint8_t client[MC_MP_CLIENT_ID_LEN];
    char key[MC__FWD_MAX_KEY + 1];
    uint64_t len, slot;
    int32_t code;
    int status; /* MC__FWD_ANSWERED / MC__FWD_NOT_SENT, once done */
    /* Set under the forwarder's lock; atomic so that a spinning follower can poll them without
     * taking that lock from the thread that is about to set them. */
    _Atomic int done;
    _Atomic int lead;  /* it is this entry's thread's turn to forward what is queued */
    pthread_cond_t cv; /* its thread waits on it for done or lead */
    struct mc__fwd_entry *next;
} mc__fwd_entry_t;

void mc__forwarder_init(mc__forwarder_t *f) {
    memset(f, 0, sizeof(*f));
    pthread_mutex_init(&f->mu, NULL);
    f->enabled = (int)mc__env_i64_in("MC_STORE_PUT_FORWARD", 1, 0, 1);
    f->get_enabled = (int)mc__env_i64_in("MC_STORE_GET_FORWARD", 1, 0, 1);
    atomic_store(&f->get_hint, -1);
}

void mc__forwarder_fini(mc__forwarder_t *f) {
    pthread_mutex_destroy(&f->mu);
}

/* ---- the holder's half ---- */

/* Sends the commits of batch (n entries, linked) to the master in one request and fills in
 * their codes. Without the lock. */
static void mc__fwd_send_commits(mc_store_t *s, mc__fwd_entry_t *batch, size_t n) {
    uint8_t clients[MC__FWD_MAX_BATCH][MC_MP_CLIENT_ID_LEN];
    const char *keys[MC__FWD_MAX_BATCH];
    uint64_t lens[MC__FWD_MAX_BATCH], slots[MC__FWD_MAX_BATCH];
    int32_t codes[MC__FWD_MAX_BATCH];
    mc__fwd_entry_t *e;
    size_t k = 0;
    int rc;
    for (e = batch; e && k < n; e = e->next) {
        if (e->kr)
            continue;
        memcpy(clients[k], e->client, MC_MP_CLIENT_ID_LEN);
        keys[k] = e->key;
        lens[k] = e->len;
        slots[k++] = e->slot;
    }
    if (k == 0)
        return;
    rc = mc__master_client_put_commit_for(
        s->master, k, (const uint8_t(*)[MC_MP_CLIENT_ID_LEN])clients, keys, lens, slots, codes);
    if (rc != 0)
        MC_DEBUG("store: forwarding %zu put commits failed: %s", k, mc_store_strerror(rc));
    /* the master recorded them (or not); a holder stopped here leaves its clients not knowing */
    mc__failpoint("store_forward_after_commit");
    k = 0;
    for (e = batch; e; e = e->next) {
        if (e->kr)
            continue;
        e->status = rc == 0 ? MC__FWD_ANSWERED : MC__FWD_NOT_SENT;
        e->code = rc == 0 ? codes[k] : rc;
        k++;
    }
}

/* Asks the master for the replica lists (leases) of the lookups of batch in one request. */
static void mc__fwd_send_lookups(mc_store_t *s, mc__fwd_entry_t *batch, size_t n) {
    const char *keys[MC__FWD_MAX_BATCH];
    mc__key_replicas_t *out;
    mc__fwd_entry_t *e;
    size_t k = 0;
    int rc;
    for (e = batch; e && k < n; e = e->next)
        if (e->kr)
            keys[k++] = e->key;
    if (k == 0)
        return;
    /* One lookup (every one, with one reader) goes straight into its entry's list: the batch
     * call needs an array of lists allocated and copied out of. */
    if (k == 1) {
        for (e = batch; !e->kr; e = e->next)
            ;
        rc = mc__master_client_get_replica_list(s->master, e->key, e->kr);
        /* a key's own verdict (not found) is an answer, not a failed call */
        e->status = rc == 0 || rc == MC_ERR_OBJECT_NOT_FOUND ? MC__FWD_ANSWERED : MC__FWD_NOT_SENT;
        e->code = rc;
        e->kr->code = rc;
        return;
    }
    out = mc__calloc(k, sizeof(*out));
    rc = out ? mc__master_client_batch_get_replica_list(s->master, k, keys, out)
             : MC_ERR_INTERNAL_ERROR;
    if (rc != 0)
        MC_DEBUG("store: forwarding %zu lookups failed: %s", k, mc_store_strerror(rc));
    k = 0;
    for (e = batch; e; e = e->next) {
        if (!e->kr)
            continue;
        if (rc == 0)
            *e->kr = out[k];
        e->status = rc == 0 ? MC__FWD_ANSWERED : MC__FWD_NOT_SENT;
        e->code = rc == 0 ? out[k].code : rc;
        k++;
    }
    mc__free(out);
}

static void mc__fwd_send(mc_store_t *s, mc__fwd_entry_t *batch, size_t n) {
    mc__fwd_send_commits(s, batch, n);
    mc__fwd_send_lookups(s, batch, n);
}

/* Queues me and waits for its code. The thread that finds nobody forwarding leads: it takes
 * every queued commit (up to the bound) and sends them in one request; the others wait on their
 * own entries. When the answer comes the leader wakes those whose codes came, each once, and
 * makes the oldest still queued the next leader. No thread of its own: a lone put costs its own
 * thread one master round trip, as a client's own commit would. */
static void mc__fwd_commit(mc_store_t *s, mc__fwd_entry_t *me) {
    mc__forwarder_t *f = &s->fwd;
    mc__fwd_entry_t *batch, *e;
    size_t n = 1;
    pthread_cond_init(&me->cv, NULL);
    pthread_mutex_lock(&f->mu);
    if (f->tail)
        f->tail->next = me;
    else
        f->head = me;
    f->tail = me;
    if (!f->busy) { /* nobody leads, so nothing else is queued */
        f->busy = 1;
        me->lead = 1;
    }
    /* A follower's code comes within one master round trip: it waits as a reply wait does,
     * yielding its core until then, and sleeps only past the reply spin. A sleep here cost a
     * wake-up per commit: 8 clients' single 4 KiB puts on 2 cores went from 52k-65k to 62k-72k
     * op/s with this spin (docs/perf/issue26-spin-paid/ab.md). Like a reply wait, it spins only
     * while this thread's spins pay (mc__wait_spin_for): behind a master that answers slowly
     * (--metadata_dir) the followers stop yielding through every commit: the holder spent a
     * fifth less CPU for the same puts (docs/perf/issue26-follower-gov/ab.md). */
    uint64_t spin = !me->done && !me->lead ? mc__wait_spin_for(0) : 0;
    if (spin) {
        uint64_t until = mc__now_ns() + spin;
        pthread_mutex_unlock(&f->mu);
        while (!atomic_load_explicit(&me->done, memory_order_relaxed) &&
               !atomic_load_explicit(&me->lead, memory_order_relaxed) && mc__now_ns() < until)
            sched_yield();
        pthread_mutex_lock(&f->mu); /* what the leader wrote before setting them is seen now */
        mc__wait_spin_ended(me->done || me->lead);
    }
    while (!me->done && !me->lead)
        pthread_cond_wait(&me->cv, &f->mu);
    if (me->done)
        goto out;
    /* Leading: me is the oldest queued. While puts come from several clients at once (the
     * last forward carried more than one), the holder's other connection threads that are
     * ready get the core first, so that their commits travel in this request rather than wait
     * for the next. A lone client's puts never wait for that yield. */
    if (f->head == f->tail && f->last_n > 1) {
        pthread_mutex_unlock(&f->mu);
        sched_yield();
        pthread_mutex_lock(&f->mu);
    }
    batch = e = f->head;
    while (n < MC__FWD_MAX_BATCH && e->next) {
        e = e->next;
        n++;
    }
    f->head = e->next;
    if (!f->head)
        f->tail = NULL;
    e->next = NULL;
    pthread_mutex_unlock(&f->mu);
    mc__fwd_send(s, batch, n);
    pthread_mutex_lock(&f->mu);
    f->last_n = n;
    for (e = batch; e; e = e->next) {
        e->done = 1;
        if (e != me)
            pthread_cond_signal(&e->cv);
    }
    if (f->head) {
        f->head->lead = 1;
        pthread_cond_signal(&f->head->cv);
    } else {
        f->busy = 0;
    }
out:
    pthread_mutex_unlock(&f->mu);
    pthread_cond_destroy(&me->cv);
}

static int mc__fwd_decode(const uint8_t *msg, size_t n, mc__fwd_entry_t *e) {
    uint32_t klen;
    if (n < MC__FWD_HEAD || msg[0] != MC__FWD_VERSION)
        return MC_ERR_INVALID_PARAMS;
    memcpy(e->client, msg + 1, MC_MP_CLIENT_ID_LEN);
    msg += 1 + MC_MP_CLIENT_ID_LEN;
    e->slot = mc__le_get(msg, 8);
    e->len = mc__le_get(msg + 8, 8);
    klen = (uint32_t)mc__le_get(msg + 16, 2);
    if (klen == 0 || klen > MC__FWD_MAX_KEY || n != MC__FWD_HEAD + klen || e->len == 0 ||
        memchr(msg + 18, 0, klen))
        return MC_ERR_INVALID_PARAMS;
    memcpy(e->key, msg + 18, klen);
    e->key[klen] = 0;
    return 0;
}

int mc__fwd_lookup(mc_store_t *s, const char *key, mc__key_replicas_t *kr) {
    mc__fwd_entry_t e;
    size_t klen = strlen(key);
    if (klen == 0 || klen > MC__FWD_MAX_KEY)
        return MC__FWD_NOT_SENT;
    memset(&e, 0, sizeof(e));
    memcpy(e.key, key, klen);
    memset(kr, 0, sizeof(*kr));
    e.kr = kr;
    mc__fwd_commit(s, &e);
    return e.status;
}

/* The engine's ask handler: a put's bytes are in place in our segment (the message is its
 * commit), or a reader asks for a value by key (get_forward.c). */
static int mc__fwd_handler(void *ctx, const void *msg, size_t msg_len, void *answer, size_t cap,
                           size_t *answer_len) {
    mc_store_t *s = ctx;
    mc__fwd_entry_t e;
    uint8_t *a = answer;
    if (msg_len > 0 && ((const uint8_t *)msg)[0] == MC__GET_FWD_KIND)
        return mc__get_forward_serve(s, msg, msg_len, answer, cap, answer_len);
    memset(&e, 0, sizeof(e));
    if (cap < MC__FWD_ANSWER)
        return MC_ERR_INVALID_PARAMS;
    if (mc__fwd_decode(msg, msg_len, &e) != 0)
        return MC_ERR_INVALID_PARAMS; /* a peer of another version, or a forged message */
    if (!s->fwd.enabled) {            /* serving gets only: the client commits this put itself */
        a[0] = MC__FWD_DECLINED;
        mc__le_put(a + 1, 0, 4);
        *answer_len = MC__FWD_ANSWER;
        return 0;
    }
    /* the bytes are in place and the commit not yet sent (tests stop a holder here) */
    mc__failpoint("store_forward_before_commit");
    mc__fwd_commit(s, &e);
    a[0] = (uint8_t)e.status;
    mc__le_put(a + 1, (uint32_t)e.code, 4);
    *answer_len = MC__FWD_ANSWER;
    return 0;
}

void mc__forwarder_start(mc_store_t *s) {
    /* a new engine numbers its segments anew */
    for (int i = 0; i < MC__FWD_IDS; i++)
        atomic_store(&s->fwd.no_until[i], 0);
    if ((!s->fwd.enabled && !s->fwd.get_enabled) || !s->own_engine || !s->segment)
        return;
    if (mc_engine_set_ask_handler(s->engine, mc__fwd_handler, s) == 0)
        s->fwd.serving = 1;
}

void mc__forwarder_stop(mc_store_t *s) {
    if (!s->fwd.serving)
        return;
    (void)mc_engine_set_ask_handler(s->engine, NULL, NULL);
    s->fwd.serving = 0;
}

/* ---- the client's half ---- */

/* A holder without the handler is asked again after this long: it may have been closing (its
 * handler goes first), or been replaced by a build that has one. */
#define MC__FWD_RETRY_MS 30000

int mc__fwd_known_without(mc__forwarder_t *f, mc_segment_id_t id) {
    if (id < 0 || id >= MC__FWD_IDS)
        return 0;
    return mc__now_ms() < atomic_load(&f->no_until[id]);
}

void mc__fwd_mark_without(mc__forwarder_t *f, mc_segment_id_t id) {
    if (id >= 0 && id < MC__FWD_IDS)
        atomic_store(&f->no_until[id], mc__now_ms() + MC__FWD_RETRY_MS);
}

int mc__slot_forward_fits(mc_store_t *s, const char *key, const mc__put_slot_t *slot) {
    return s->fwd.enabled && slot->kr.n_replicas == 1 && slot->kr.size <= MC__FWD_MAX_VALUE &&
           strlen(key) <= MC__FWD_MAX_KEY && !mc__store_replica_is_local(s, &slot->kr.replicas[0]);
}

int mc__slot_forward_put(mc_store_t *s, const char *key, const void *value, uint64_t len,
                         const mc__put_slot_t *slot, int32_t *code) {
    const mc__replica_desc_t *d = &slot->kr.replicas[0];
    uint8_t msg[MC__FWD_MAX_MSG], answer[MC__FWD_ANSWER];
    size_t klen = strlen(key), alen = 0;
    mc_segment_id_t id;
    int rc;
    if (mc__store_segment_id(s, d->segment_name, &id) != 0 || mc__fwd_known_without(&s->fwd, id))
        return MC__FWD_UNUSED;
    msg[0] = MC__FWD_VERSION;
    memcpy(msg + 1, mc__master_client_id(s->master), MC_MP_CLIENT_ID_LEN);
    mc__le_put(msg + 1 + MC_MP_CLIENT_ID_LEN, slot->kr.version, 8);
    mc__le_put(msg + 9 + MC_MP_CLIENT_ID_LEN, len, 8);
    mc__le_put(msg + 17 + MC_MP_CLIENT_ID_LEN, klen, 2);
    memcpy(msg + MC__FWD_HEAD, key, klen);
    rc = mc_engine_write_ask(s->engine, id, value, d->addr, (size_t)len, d->epoch, msg,
                             MC__FWD_HEAD + klen, answer, sizeof(answer), &alen);
    if (rc == MC_ERR_NOT_IMPLEMENTED) {
        /* an older holder, one with forwarding off or one closing: nothing was written; not
         * asked again for a while (unless the value lay in registered memory, which may be a
         * device's, refused here) */
        if (!mc__store_is_registered(s, value, (size_t)len))
            mc__fwd_mark_without(&s->fwd, id);
        return MC__FWD_UNUSED;
    }
    if (rc == MC_ERR_ADDRESS_NOT_REGISTERED)
        return MC__FWD_UNUSED; /* nothing written: the usual write meets and reports it */
    if (rc == 0 && alen == MC__FWD_ANSWER && answer[0] == MC__FWD_DECLINED) {
        mc__fwd_mark_without(&s->fwd, id); /* a holder that forwards gets only */
        return MC__FWD_UNUSED; /* the bytes landed in our slot; the usual write and commit */
    }
    if (rc != 0 || alen != MC__FWD_ANSWER || answer[0] != MC__FWD_ANSWERED)
        return MC__FWD_UNKNOWN;
    *code = (int32_t)(uint32_t)mc__le_get(answer + 1, 4);
    return MC__FWD_DONE;
}
