/* A first get in one round trip (docs/perf/issue26-put.md, "A get that waits once"): a reader
 * whose replica list of a key is not cached asks a holder for the value by key; the holder asks
 * the master for the key's replica list (a lease), together with the lookups and put commits
 * other clients sent it meanwhile (slot_forward.c), and answers with that list and, when one of
 * the replicas lies in its own segment, the value's bytes. The reader waits for one answer
 * instead of two, and the master answers one request for several reads.
 *
 * Which holder: the one a read through the master found a value on while none was hinted, and
 * after that the one a holder's answer names when the value lies elsewhere. An answer without the
 * bytes (the value lies elsewhere, is larger than the reader's room, or on disk) still carries
 * the list, and the reader reads through it as a read through the master does.
 * MC_STORE_GET_FORWARD=0 turns both halves off. */
#ifndef MC_STORE_CLIENT_GET_FORWARD_H
#define MC_STORE_CLIENT_GET_FORWARD_H
#include <stddef.h>
#include <stdint.h>

#include "mooncake/store.h"
#include "proto/master_proto.h"

struct mc_store;

/* The first byte of a get's message (a put commit's is 1, slot_forward.c). */
#define MC__GET_FWD_KIND 2u

/* The holder's half: the engine's ask handler hands it a message whose first byte is
 * MC__GET_FWD_KIND. */
int mc__get_forward_serve(struct mc_store *s, const void *msg, size_t msg_len, void *answer,
                          size_t cap, size_t *answer_len);

/* The reader's half: 1 with *rc the get's result (the value's size, or a code) when a holder
 * answered; 0 when the read must go through the master as before (no holder to ask, the holder
 * cannot answer, the master did not answer it, or its code is one the master path handles). */
int mc__get_forward(struct mc_store *s, const char *key, const mc_store_iov_t *iov, size_t iovcnt,
                    int64_t *rc);
/* The same for a get into a new buffer: fill makes *out from the list and, when the holder sent
 * them, the value's bytes (value; NULL: read them through kr), returning 0 or a code. */
typedef int (*mc__gfwd_fill_fn)(struct mc_store *s, const mc__key_replicas_t *kr,
                                const uint8_t *value, mc_store_buffer_t **out);
int mc__get_forward_buffer(struct mc_store *s, const char *key, mc__gfwd_fill_fn fill,
                           mc_store_buffer_t **out, int *rc);
/* Records the size of a value a get into a new buffer found, which tells whether the next one
 * is worth asking a holder for. */
void mc__get_forward_sized(struct mc_store *s, uint64_t size);
/* Records where a read through the master found key's value (kr), for the next first get. */
void mc__get_forward_learn(struct mc_store *s, const mc__key_replicas_t *kr);
#endif
