/* Put slots: placements this client reserved ahead at the master (PUT_RESERVE), kept in small
 * pools by size class and config, so that a small put writes its bytes at once and then sends
 * one PUT_COMMIT (master_proto.h, "Put slots"). */
#ifndef MC_STORE_CLIENT_PUT_SLOTS_H
#define MC_STORE_CLIENT_PUT_SLOTS_H
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/master_proto.h"

/* One reserved slot: kr.version names it, kr.size and each replica's size are its length until
 * mc__put_slot_take narrows them to the value's. */
typedef struct mc__put_slot {
    uint64_t got_ms;       /* when its reserve was sent */
    uint32_t pool;         /* the pool it came from */
    mc__key_replicas_t kr; /* last: copies take what its replicas use (mc__put_slot_copy) */
} mc__put_slot_t;

/* Copies the header and the used replicas of src (a full mc__key_replicas_t is kilobytes,
 * almost all of it unused replica slots); dst->key is NULL. */
void mc__kr_copy(mc__key_replicas_t *dst, const mc__key_replicas_t *src);

#define MC__SLOT_POOLS 8

typedef struct mc__slot_pool {
    uint64_t len; /* the size class; 0: unused pool */
    uint32_t replica_num;
    uint8_t flags;
    uint64_t soft_pin_ttl_ms;
    uint32_t want; /* slots the next reserve asks for: grows while puts keep coming */
    uint32_t n;
    mc__put_slot_t *slots; /* n of them, newest last */
} mc__slot_pool_t;

typedef struct mc__put_slots {
    pthread_mutex_t mu;
    int enabled; /* MC_STORE_PUT_SLOTS (default 1) */
    mc__slot_pool_t pools[MC__SLOT_POOLS];
} mc__put_slots_t;

struct mc_store;
void mc__put_slots_init(mc__put_slots_t *t);
/* Frees the pools (nothing is told to the master: mc__put_slots_release first). */
void mc__put_slots_fini(mc__put_slots_t *t);
/* mc__put_slots_fini without the lock, for a fork() child's copy (a parent's thread may have
 * held it at the fork); the slots stay the parent's. */
void mc__put_slots_forget(mc__put_slots_t *t);
/* A slot for a value of len bytes with config wc, reserving more at the master when the pool
 * is empty: 0 with *out, or nonzero when this put should take the start / write / end path (slots
 * off, a value too large or a config with preferred segments, or the master placed nothing). */
int mc__put_slot_take(struct mc_store *s, uint64_t len, const mc__replicate_config_t *wc,
                      mc__put_slot_t *out);
/* mc__put_slot_take for n values at once (has[i] 1 where slots[i] holds one): a pool that
 * lacks slots asks the master for all it lacks in one round trip. */
void mc__put_slots_take_many(struct mc_store *s, size_t n, const uint64_t *lens,
                             const mc__replicate_config_t *wc, mc__put_slot_t *slots, uint8_t *has);
/* A slot that is still reserved (its commit found the key taken) goes back to its pool. */
void mc__put_slot_keep(struct mc_store *s, const mc__put_slot_t *slot);
/* Commits n slots: keys[i] with lens[i] bytes into the slot of version slots[i] (lens[i] 0: gives
 * it back). Codes
 * per key in codes; returns 0 or the code of a failed call. A code of OBJECT_NOT_FOUND means the
 * master lost its slots (restart, expiry, a dropped segment): the pools are emptied too. */
int mc__put_slots_commit(struct mc_store *s, size_t n, const char *const *keys,
                         const uint64_t *lens, const uint64_t *slots, int32_t *codes);
/* Gives back every pooled slot older than the age a slot is used for (all = 1: every one); the
 * maintenance thread calls it, and close with all = 1. */
void mc__put_slots_release(struct mc_store *s, int all);
#endif
