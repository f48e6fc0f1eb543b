/* A first get in one round trip: the reader's ask by key, and the holder's answer with the
 * replica list the master granted and, where it holds a replica, the value (get_forward.h).
 *
 * What a get returns does not change: the holder reads its replica right after the master
 * granted the lease, as a reader does after its own lookup, and the engine copies only the
 * incarnation the replica names. The reader caches the list from the moment it sent its ask,
 * so the time the holder spent only shortens the entry's life (replica_cache.c). Every answer
 * the reader cannot use, and every failure, sends the read through the master as before: a get
 * changes nothing, so asking twice is harmless. */
#include "client/get_forward.h"

#include <stdatomic.h>
#include <string.h>

#include "client/slot_forward.h"
#include "client/store_internal.h"
#include "mooncake/common/failpoint.h"
#include "mooncake/common/frame.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"

/* The message: u8 kind | u64 the reader's room for the value | u16 key_len | key. The answer:
 * u8 status (MC__FWD_*) | i32 the master's code for the key | u8 served | u32 list_len | the
 * replica list (a GET_REPLICA_LIST reply frame of one key) | served: the value's bytes. */
#define MC__GFWD_HEAD (1u + 8u + 2u)
#define MC__GFWD_MAX_KEY 4000u
#define MC__GFWD_ANSWER_HEAD (1u + 4u + 1u + 4u)
/* A reader asks a holder only when its buffers hold at most this much: the value comes in the
 * answer, copied once more on each side, which costs a 64 KiB value more than the round trip
 * saved (one reader's 64 KiB first gets fell from 28k-31k to 24k-28k op/s). */
#define MC__GFWD_MAX_VALUE (16u << 10)
/* The most a one-key list takes: a frame header, the item, 8 replicas of 255-byte names. */
#define MC__GFWD_MAX_LIST 3072u
_Static_assert(MC__GFWD_ANSWER_HEAD + MC__GFWD_MAX_LIST + MC__GFWD_MAX_VALUE <= MC_ASK_MAX_ANSWER,
               "an answer with a value does not fit the engine's bound");
_Static_assert(MC__GFWD_HEAD + MC__GFWD_MAX_KEY <= MC_ASK_MAX_MSG, "a key does not fit");

/* ---- the holder's half ---- */

static void mc__gfwd_head(uint8_t *a, int status, int32_t code, int served, uint32_t list_len) {
    a[0] = (uint8_t)status;
    mc__le_put(a + 1, (uint32_t)code, 4);
    a[5] = (uint8_t)served;
    mc__le_put(a + 6, list_len, 4);
}

/* The value of kr into out, from a replica in our own segment: 1 when copied. */
static int mc__gfwd_copy_ours(struct mc_store *s, const mc__key_replicas_t *kr, uint8_t *out) {
    uint32_t n = kr->n_replicas < MC_MP_MAX_REPLICA_NUM ? kr->n_replicas : MC_MP_MAX_REPLICA_NUM;
    for (uint32_t r = 0; r < n; r++) {
        const mc__replica_desc_t *d = &kr->replicas[r];
        if (d->status != MC_MP_REPLICA_COMPLETE || strcmp(d->segment_name, s->hostname) != 0)
            continue;
        if (kr->size == 0 || mc__store_local_copy(s, MC_OPCODE_READ, d, 0, out, kr->size) == 0)
            return 1;
    }
    return 0;
}

int mc__get_forward_serve(struct mc_store *s, const void *msg, size_t msg_len, void *answer,
                          size_t cap, size_t *answer_len) {
    const uint8_t *m = msg;
    uint8_t *a = answer;
    char key[MC__GFWD_MAX_KEY + 1];
    mc__key_replicas_t kr;
    uint64_t room;
    uint32_t klen;
    size_t at;
    mc_buf_t b;
    int st;
    if (cap < MC__GFWD_ANSWER_HEAD + MC__GFWD_MAX_LIST || msg_len < MC__GFWD_HEAD)
        return MC_ERR_INVALID_PARAMS;
    room = mc__le_get(m + 1, 8);
    klen = (uint32_t)mc__le_get(m + 9, 2);
    if (klen == 0 || klen > MC__GFWD_MAX_KEY || msg_len != MC__GFWD_HEAD + klen ||
        memchr(m + MC__GFWD_HEAD, 0, klen))
        return MC_ERR_INVALID_PARAMS; /* a peer of another version, or a forged message */
    *answer_len = MC__GFWD_ANSWER_HEAD;
    if (!s->fwd.get_enabled) { /* serving put commits only: the reader asks the master */
        mc__gfwd_head(a, MC__FWD_DECLINED, 0, 0, 0);
        return 0;
    }
    memcpy(key, m + MC__GFWD_HEAD, klen);
    key[klen] = 0;
    st = mc__fwd_lookup(s, key, &kr);
    /* the lease is granted and the value not yet copied (tests stop a holder here) */
    mc__failpoint("store_get_forward_after_lookup");
    if (st != MC__FWD_ANSWERED || kr.code != 0) {
        mc__gfwd_head(a, st, st == MC__FWD_ANSWERED ? kr.code : 0, 0, 0);
        return 0;
    }
    mc__buf_init(&b);
    (void)mc__buf_reserve(&b, MC__GFWD_MAX_LIST); /* one allocation (a failed one fails below) */
    if (mc__mp_encode_replicas_reply(&b, MC_MP_GET_REPLICA_LIST, 0, 1, &kr) != 0 ||
        b.len > MC__GFWD_MAX_LIST) {
        mc__buf_free(&b);
        mc__gfwd_head(a, MC__FWD_NOT_SENT, 0, 0, 0); /* cannot happen: the reader asks itself */
        return 0;
    }
    memcpy(a + MC__GFWD_ANSWER_HEAD, b.data, b.len);
    at = MC__GFWD_ANSWER_HEAD + b.len;
    mc__gfwd_head(a, MC__FWD_ANSWERED, 0, 0, (uint32_t)b.len);
    mc__buf_free(&b);
    if (kr.size <= room && kr.size <= MC__GFWD_MAX_VALUE && kr.size <= cap - at &&
        mc__gfwd_copy_ours(s, &kr, a + at)) {
        a[5] = 1;
        at += (size_t)kr.size;
        atomic_fetch_add_explicit(&s->fwd.gets_served, 1, memory_order_relaxed);
    }
    *answer_len = at;
    return 0;
}

/* ---- the reader's half ---- */

/* Points the hint at the holder of kr's first complete replica that is neither ours nor
 * suspect. */
static void mc__gfwd_point_at(struct mc_store *s, const mc__key_replicas_t *kr) {
    uint32_t n = kr->n_replicas < MC_MP_MAX_REPLICA_NUM ? kr->n_replicas : MC_MP_MAX_REPLICA_NUM;
    mc_segment_id_t id;
    for (uint32_t r = 0; r < n; r++) {
        const mc__replica_desc_t *d = &kr->replicas[r];
        if (d->status != MC_MP_REPLICA_COMPLETE || strcmp(d->segment_name, s->hostname) == 0 ||
            mc__store_is_suspect(s, d->segment_name))
            continue;
        if (mc__store_segment_id(s, d->segment_name, &id) == 0)
            atomic_store(&s->fwd.get_hint, (int64_t)id);
        return;
    }
}

/* Only while no holder is hinted: a read through the master with a holder hinted is one the
 * holder was not asked for (a larger value, one it refused lately), and looking its replicas up
 * on every such read would cost each a lock and a segment lookup for nothing. The hint moves
 * when a holder's answer says the value lies elsewhere (mc__get_forward). */
void mc__get_forward_learn(struct mc_store *s, const mc__key_replicas_t *kr) {
    if (s->fwd.get_enabled && atomic_load_explicit(&s->fwd.get_hint, memory_order_relaxed) < 0)
        mc__gfwd_point_at(s, kr);
}

void mc__get_forward_sized(struct mc_store *s, uint64_t size) {
    atomic_store_explicit(&s->fwd.buffer_big, size > MC__GFWD_MAX_VALUE, memory_order_relaxed);
}

/* The answer's list into kr: 0, or -1 when it is not one well-formed list of one key. */
static int mc__gfwd_list(const uint8_t *p, size_t len, mc__key_replicas_t *kr) {
    mc_frame_header_t h;
    if (len < MC_FRAME_HEADER_SIZE ||
        mc__frame_header_decode(p, len, len - MC_FRAME_HEADER_SIZE, &h) != 0 ||
        MC_FRAME_HEADER_SIZE + h.body_len != len)
        return -1;
    if (mc__mp_decode_replicas_reply(&h, p + MC_FRAME_HEADER_SIZE, (size_t)h.body_len, 1, kr) !=
            0 ||
        kr->code != 0)
        return -1;
    return 0;
}

/* A holder's answer as the reader takes it. */
typedef struct mc__gfwd_answer {
    uint8_t a[MC_ASK_MAX_ANSWER];
    mc__key_replicas_t kr;
    const uint8_t *value; /* in a: the value's bytes, when the holder sent them */
    int32_t code;
} mc__gfwd_answer_t;

/* The value (size bytes at v) into the caller's buffers, which the holder found large enough. */
static void mc__gfwd_scatter(const uint8_t *v, uint64_t size, const mc_store_iov_t *iov,
                             size_t iovcnt) {
    for (size_t i = 0; i < iovcnt && size > 0; i++) {
        size_t k = iov[i].len < size ? iov[i].len : (size_t)size;
        memcpy(iov[i].base, v, k);
        v += k;
        size -= k;
    }
}

/* Asks the hinted holder for key with room for a value of up to room bytes: 1 when it answered
 * with what the reader takes as the get's answer: ans->code OBJECT_NOT_FOUND, or 0 with ans->kr
 * (leased, cached) and ans->value (the bytes, or NULL when they are to be read through kr); 0
 * when the read must go through the master. */
static int mc__gfwd_ask(struct mc_store *s, const char *key, uint64_t room,
                        mc__gfwd_answer_t *ans) {
    mc__forwarder_t *f = &s->fwd;
    int64_t id = atomic_load(&f->get_hint);
    size_t klen = strlen(key), alen = 0;
    uint64_t sent, list_len;
    uint8_t msg[MC__GFWD_HEAD + MC__GFWD_MAX_KEY], *a = ans->a;
    int r;
    if (id < 0 || klen > MC__GFWD_MAX_KEY || mc__fwd_known_without(f, id))
        return 0;
    msg[0] = MC__GET_FWD_KIND;
    mc__le_put(msg + 1, room, 8);
    mc__le_put(msg + 9, klen, 2);
    memcpy(msg + MC__GFWD_HEAD, key, klen);
    sent = mc__now_ms(); /* the lease counts from before the ask left (replica_cache.c) */
    r = mc_engine_write_ask(s->engine, id, NULL, 0, 0, 0, msg, MC__GFWD_HEAD + klen, a,
                            MC__GFWD_ANSWER_HEAD + MC__GFWD_MAX_LIST + (size_t)room, &alen);
    /* a holder without the handler, one with forwarded gets off, or one of an older build,
     * whose handler refuses the message as a malformed commit: not asked for a while */
    if (r == MC_ERR_NOT_IMPLEMENTED || r == MC_ERR_INVALID_PARAMS ||
        (r == 0 && alen >= 1 && a[0] == MC__FWD_DECLINED)) {
        mc__fwd_mark_without(f, id);
        return 0;
    }
    if (r != 0) {
        /* the holder did not answer (gone, stalled): ask the master, and learn anew from it
         * which holder to ask (one whose reads fail is passed over) */
        atomic_compare_exchange_strong(&f->get_hint, &id, (int64_t)-1);
        return 0;
    }
    if (alen < MC__GFWD_ANSWER_HEAD || a[0] != MC__FWD_ANSWERED)
        return 0; /* its master did not answer it, or a malformed answer: ask the master */
    ans->code = (int32_t)(uint32_t)mc__le_get(a + 1, 4);
    ans->value = NULL;
    if (ans->code == MC_ERR_OBJECT_NOT_FOUND) {
        mc__replica_cache_drop(s->rcache, key);
        return 1;
    }
    list_len = mc__le_get(a + 6, 4);
    if (ans->code != 0 || list_len > alen - MC__GFWD_ANSWER_HEAD ||
        mc__gfwd_list(a + MC__GFWD_ANSWER_HEAD, (size_t)list_len, &ans->kr) != 0)
        return 0; /* a code the master path handles (it may wait), or a malformed answer */
    if (a[5] ? alen != MC__GFWD_ANSWER_HEAD + list_len + ans->kr.size || ans->kr.size > room
             : alen != MC__GFWD_ANSWER_HEAD + list_len)
        return 0;
    mc__replica_cache_put(s->rcache, key, sent, &ans->kr);
    ans->kr.key = key;
    if (a[5])
        ans->value = a + MC__GFWD_ANSWER_HEAD + list_len;
    /* a reader that stalls holding a lease (tests stop it here), as in mc__store_get_replicas */
    mc__failpoint("store_get_after_lease");
    return 1;
}

int mc__get_forward(struct mc_store *s, const char *key, const mc_store_iov_t *iov, size_t iovcnt,
                    int64_t *rc) {
    mc__gfwd_answer_t ans;
    uint64_t room = 0;
    if (!s->fwd.get_enabled || atomic_load(&s->fwd.get_hint) < 0)
        return 0;
    for (size_t i = 0; i < iovcnt; i++) {
        room += iov[i].len;
        if (room > MC__GFWD_MAX_VALUE)
            return 0;
        /* the answer is copied with memcpy: a device's buffer takes the engine's read */
        if (iov[i].len && mc_engine_is_host_memory(s->engine, iov[i].base, iov[i].len) != 0)
            return 0;
    }
    if (!mc__gfwd_ask(s, key, room, &ans))
        return 0;
    if (ans.code != 0) {
        *rc = ans.code;
    } else if (ans.value) {
        mc__gfwd_scatter(ans.value, ans.kr.size, iov, iovcnt);
        *rc = (int64_t)ans.kr.size;
    } else {
        /* the value lies elsewhere: read it through the list, and ask its holder next time */
        *rc = mc__store_read_replicas(s, &ans.kr, iov, iovcnt);
        if (*rc < 0)
            mc__replica_cache_drop(s->rcache, key);
        else
            mc__gfwd_point_at(s, &ans.kr);
    }
    return 1;
}

int mc__get_forward_buffer(struct mc_store *s, const char *key, mc__gfwd_fill_fn fill,
                           mc_store_buffer_t **out, int *rc) {
    mc__gfwd_answer_t ans;
    /* a reader whose last such value was larger than an answer holds would get a list, read
     * through it, and have paid the holder's relay for nothing: it asks the master */
    if (!s->fwd.get_enabled || atomic_load(&s->fwd.get_hint) < 0 ||
        atomic_load_explicit(&s->fwd.buffer_big, memory_order_relaxed))
        return 0;
    if (!mc__gfwd_ask(s, key, MC__GFWD_MAX_VALUE, &ans))
        return 0;
    if (ans.code != 0) {
        *rc = ans.code;
        return 1;
    }
    mc__get_forward_sized(s, ans.kr.size);
    *rc = fill(s, &ans.kr, ans.value, out);
    if (*rc < 0)
        mc__replica_cache_drop(s->rcache, key);
    else if (!ans.value)
        mc__gfwd_point_at(s, &ans.kr);
    return 1;
}
