/* A store handle attached to a local storage node (see mooncake/store_dummy.h): the calls the
 * public entry points hand over when s->dummy is set. Each holds the store open while it runs,
 * as the entry points do. */
#ifndef MC_STORE_CLIENT_DUMMY_H
#define MC_STORE_CLIENT_DUMMY_H
#include <stddef.h>
#include <stdint.h>

#include "mooncake/store.h"
#include "mooncake/store_dummy.h"
#include "proto/node_proto.h"

typedef struct mc__dummy mc__dummy_t;

/* mc__store_enter for the dummy's own calls: mc__store_enter itself refuses dummy handles, so a
 * call a dummy does not hand over never runs on the master, engine or segment it lacks. */
int mc__store_enter_dummy(mc_store_t *s);

/* Connects (s->mu held by the caller, the state NEW): 0 or a code; s->dummy is set on success. */
int mc__dummy_attach(mc_store_t *s, const mc_store_dummy_config_t *cfg);
/* Closes the channel (close, teardown); the daemon then drops what it held for us. */
void mc__dummy_disconnect(mc_store_t *s);
/* Frees the dummy and its local buffer (release, once no buffer from get_buffer is out). */
void mc__dummy_release(mc_store_t *s);
/* In a fork() child of the dummy's process: closes the child's copies of the channels (close(),
 * never shutdown(): the parent's connections are the same sockets) and frees the dummy, taking no
 * lock and sending nothing. Blocks of a pool the caller owns stay in it (the pool is the
 * caller's); a pool of the dummy's own is unmapped in the child. */
void mc__dummy_forget(mc_store_t *s);

int mc__dummy_put(mc_store_t *s, int upsert, const mc_store_item_t *items, size_t n,
                  const mc_replicate_config_t *rc, int *results);
int mc__dummy_get(mc_store_t *s, const mc_store_item_t *items, size_t n, int64_t *results);
int mc__dummy_get_buffer(mc_store_t *s, const char *key, mc_store_buffer_t **out);
int mc__dummy_batch_get_buffer(mc_store_t *s, const char *const *keys, size_t n,
                               mc_store_buffer_t **outs, int *results);
int mc__dummy_keys(mc_store_t *s, int type, const char *const *keys, size_t n, int force,
                   int *results);
int64_t mc__dummy_scalar(mc_store_t *s, int type, const char *text, int force);
int mc__dummy_register(mc_store_t *s, void *addr, size_t len);
int mc__dummy_unregister(mc_store_t *s, void *addr);
int mc__dummy_health(mc_store_t *s);
int mc__dummy_get_ranges(mc_store_t *s, mc_store_range_read_t *reads, size_t n);
/* Calls a dummy does not offer (replica descriptors, replica clear). */
int mc__dummy_unsupported(const char *what);

/* The single-key forms, on top of the batch ones. */
static inline int mc__dummy_put1(mc_store_t *s, int upsert, const char *key,
                                 const mc_store_iov_t *parts, size_t nparts,
                                 const mc_replicate_config_t *rc) {
    mc_store_item_t it = {key, parts, nparts};
    int r = 0;
    int rc2 = mc__dummy_put(s, upsert, &it, 1, rc, &r);
    return rc2 != 0 ? rc2 : r;
}
static inline int64_t mc__dummy_get1(mc_store_t *s, const char *key, const mc_store_iov_t *iov,
                                     size_t iovcnt) {
    mc_store_item_t it = {key, iov, iovcnt};
    int64_t r = 0;
    int rc = mc__dummy_get(s, &it, 1, &r);
    return rc != 0 && r >= 0 ? rc : r;
}
#endif
