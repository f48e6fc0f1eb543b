/* The request/reply connections to a peer's RPC port that the tcp transport, notifications and
 * the metadata handshake share: pooled per peer (idle ones kept in mc__peer.idle, under its
 * lock), and the reader of one reply. */
#ifndef MC_TE_PEER_CONN_H
#define MC_TE_PEER_CONN_H

#include <stdint.h>

#include "mooncake/common/frame.h"
#include "te_internal.h"

/* A new connection to a peer's RPC port, authenticated when a cluster secret is set: the fd,
 * or MC_ERR_SOCKET / MC_ERR_DNS / MC_ERR_REJECT_HANDSHAKE. */
int mc__peer_connect(mc_engine_t *e, const char *host, uint16_t port, uint64_t deadline_ms);
/* A connection to the peer's RPC port: an idle pooled one (*reused = 1) or a new one (with the
 * engine's socket buffer size, when one is set). The fd, or a negative MC_ERR_ code. A pooled
 * one is not checked (that cost a syscall per request): one that fails its exchange with
 * *reused set may have died idle, so the caller drops the pool and retries once. */
int mc__peer_conn_get(mc_engine_t *e, mc__peer_t *p, uint64_t deadline_ms, int *reused);
/* Every connection mc__peer_conn_get makes has SO_RCVTIMEO set to this: a blocking receive on it
 * returns at least this often, so a reader may wait in the receive and still keep a deadline
 * (to within this much). Receives with MSG_DONTWAIT (mc__recv_all's) are unaffected. */
#define MC__PEER_RECV_SLICE_MS 50
/* Gives a connection that finished its request back to the pool (or closes it when full). */
void mc__peer_conn_put(mc__peer_t *p, int fd);
/* Closes the idle connections (caller holds p->lock). */
void mc__peer_conn_drop_locked(mc__peer_t *p);

/* Reads a reply header for (type, request_id). An error reply's body is consumed and its code
 * stored in *remote_err (the connection stays usable). Returns 0 or MC_ERR_SOCKET (the
 * connection must be closed). max_body bounds a success reply's body. */
int mc__peer_read_reply(int fd, uint8_t type, uint64_t request_id, uint64_t max_body,
                        uint64_t deadline_ms, mc_frame_header_t *h, int *remote_err);
#endif
