/* Put sessions: the client's table of reserved placements between a session's start and its end
 * or revoke (see mc_store_put_session_start in mooncake/store.h). */
#ifndef MC_STORE_CLIENT_PUT_SESSION_H
#define MC_STORE_CLIENT_PUT_SESSION_H
#include <pthread.h>
#include <stddef.h>

#include "proto/master_proto.h"

typedef struct mc__put_session {
    struct mc__put_session *next;
    uint64_t hash;
    int writable;          /* 0 once an end or revoke sealed it: no new range writes start */
    unsigned inflight;     /* range writes moving bytes into it now */
    mc__key_replicas_t kr; /* the placement put start gave (its version, size, replicas) */
    char key[];
} mc__put_session_t;

typedef struct mc__put_sessions {
    pthread_mutex_t mu;
    pthread_cond_t idle; /* broadcast whenever a session's inflight count drops */
    mc__put_session_t **buckets;
    size_t nbuckets, count;
} mc__put_sessions_t;

void mc__put_sessions_init(mc__put_sessions_t *t);
/* Frees every entry (nothing is told to the master). */
void mc__put_sessions_fini(mc__put_sessions_t *t);

struct mc_store;
/* Revokes every open session at the master and forgets them: a closing client leaves no
 * reservation behind (the master would otherwise hold the space until its discard timeout).
 * The caller holds the store closed to calls. */
void mc__put_sessions_revoke_all(struct mc_store *s);
#endif
