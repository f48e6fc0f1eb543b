/* A put that waits once (docs/perf/issue26-put.md, "A put that waits once"): a client writes a
 * small value into a slot it reserved (put_slots.h) with the engine's write-ask, whose message
 * is the slot's commit; the holder whose memory the slot lies in forwards it to the master once
 * the bytes are in place, together with the commits other clients sent it meanwhile
 * (PUT_COMMIT_FOR), and answers with the master's code. The client waits for one answer
 * instead of two; the master answers one request for several puts.
 *
 * Both halves live here: the holder's (the ask handler and the combining of commits) and the
 * client's (the message and what each answer means). MC_STORE_PUT_FORWARD=0 turns both off. */
#ifndef MC_STORE_CLIENT_SLOT_FORWARD_H
#define MC_STORE_CLIENT_SLOT_FORWARD_H
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "client/put_slots.h"

struct mc_store;
struct mc__fwd_entry;

#define MC__FWD_IDS 256

/* The holder's half: the commits waiting to be forwarded, and whether one thread is forwarding
 * (it takes all that wait; the others wait for their codes or their turn). */
typedef struct mc__forwarder {
    pthread_mutex_t mu;
    struct mc__fwd_entry *head, *tail;
    int busy;
    size_t last_n;   /* commits the last forward carried */
    int serving;     /* the ask handler is registered with our engine */
    int enabled;     /* MC_STORE_PUT_FORWARD (default 1) */
    int get_enabled; /* MC_STORE_GET_FORWARD (default 1): get_forward.c, both halves */
    /* the client's half of get_forward.c: the segment (id) whose holder is asked for a value
     * first (get_forward.h, "Which holder"); -1: none yet, or the last one asked did not answer */
    _Atomic int64_t get_hint;
    _Atomic uint64_t gets_served; /* the holder's half: values it sent with an answer */
    _Atomic int buffer_big;       /* the reader's last get into a new buffer was over 16 KiB */
    /* the client's half: until when (ms) a segment's holder, by id (below MC__FWD_IDS), is not
     * asked again after it answered that it has no handler */
    _Atomic uint64_t no_until[MC__FWD_IDS];
} mc__forwarder_t;

void mc__forwarder_init(mc__forwarder_t *f);
void mc__forwarder_fini(mc__forwarder_t *f);
/* The holder's half starts serving commits (a store with its own engine and a segment);
 * stop removes the handler and waits for calls in flight (before the master connection goes). */
void mc__forwarder_start(struct mc_store *s);
void mc__forwarder_stop(struct mc_store *s);

/* The client's half: what became of a forwarded put. */
enum {
    MC__FWD_DONE = 0,    /* the master's code for the commit is in *code */
    MC__FWD_UNUSED = 1,  /* nothing was written and nothing committed: write and commit as usual */
    MC__FWD_UNKNOWN = 2, /* the bytes may have landed and the commit may have been recorded */
};
/* Writes value (len bytes, one piece of host memory) into slot, whose one replica lies in
 * another process's segment, with its commit under key. */
int mc__slot_forward_put(struct mc_store *s, const char *key, const void *value, uint64_t len,
                         const mc__put_slot_t *slot, int32_t *code);
/* Whether a put of one piece into slot may be forwarded at all (one replica, not ours). */
int mc__slot_forward_fits(struct mc_store *s, const char *key, const mc__put_slot_t *slot);

/* The holder's half, for get_forward.c: the replica list of key from the master, asked for
 * together with the commits and lookups that wait meanwhile. MC__FWD_ANSWERED with kr filled
 * (kr->code 0, or OBJECT_NOT_FOUND, or another code of that key), or MC__FWD_NOT_SENT when the
 * master did not answer. */
enum {
    MC__FWD_ANSWERED = 0, /* the master's code follows */
    MC__FWD_NOT_SENT = 1, /* the master did not answer the holder: the outcome is unknown */
    MC__FWD_DECLINED = 2, /* a commit to a holder that forwards gets only: nothing committed */
};
int mc__fwd_lookup(struct mc_store *s, const char *key, mc__key_replicas_t *kr);
/* Whether the holder of segment id answered lately that it has no ask handler, and recording
 * that it did (asked again after 30 s). */
int mc__fwd_known_without(mc__forwarder_t *f, int64_t id);
void mc__fwd_mark_without(mc__forwarder_t *f, int64_t id);
#endif
