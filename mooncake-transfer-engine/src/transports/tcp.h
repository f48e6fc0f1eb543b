/* TCP transport internals shared with the notify path: pooled connections per peer and the
 * reply reader. */
#ifndef MC_TE_TCP_H
#define MC_TE_TCP_H

#include <stdint.h>

#include "mooncake/common/frame.h"
#include "te_internal.h"

/* A connection to the peer's RPC port: an idle pooled one (*reused = 1) or a new one. */
int mc__tcp_pool_get(mc_engine_t *e, mc__peer_t *p, uint64_t deadline_ms, int *reused);
void mc__tcp_pool_put(mc__peer_t *p, int fd);
/* Closes the idle connections (caller holds p->lock). */
void mc__tcp_pool_drop_locked(mc__peer_t *p);

/* Reads a reply header for (type, request_id). An error reply's body is consumed and its code
 * stored in *remote_err (the connection stays usable). Returns 0 or MC_ERR_SOCKET (the
 * connection must be closed). max_body bounds a success reply's body. */
int mc__tcp_read_reply(int fd, uint8_t type, uint64_t request_id, uint64_t max_body,
                       uint64_t deadline_ms, mc_frame_header_t *h, int *remote_err);

/* Runs task t on the calling thread when it fits in one slice and returns 1; returns 0 (and
 * does nothing) otherwise. Engine close cannot cut it short; the task's deadline bounds it. */
int mc__tcp_run_here(mc_engine_t *e, mc__task_t *t);
#endif
