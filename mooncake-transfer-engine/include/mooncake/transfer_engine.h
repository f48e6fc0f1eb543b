/* Mooncake Transfer Engine: the public C API.
 *
 * An engine owns the memory its process registered and serves remote READ/WRITE requests into it;
 * it moves bytes to and from peers' registered memory with batched asynchronous requests against
 * named segments (one segment per engine, named by its local server name; with P2PHANDSHAKE the
 * name is "host:rpc_port").
 *
 * Addressing follows the reference: a request's target_offset is the *peer's virtual address*
 * inside one of the peer's registered buffers, as published in its segment descriptor.
 *
 * All functions return 0 or a negative code from mooncake/error.h unless documented otherwise.
 * String arguments are not retained after a call returns. All functions are thread-safe.
 *
 * Lifetime and calls in flight: mc_engine_close may run while other threads are inside any call
 * on the same engine. It refuses calls that begin after it started (MC_ERR_CONTEXT), wakes
 * mc_engine_batch_wait callers (they return MC_ERR_CONTEXT), waits for every other call inside to
 * return (each is bounded by its own deadline: a transfer by the transfer timeout, an unregister
 * by its grace period; synchronous transfers finish their tasks, so they never return while the
 * engine may still touch the caller's memory), and only then stops the transports and frees the
 * engine's state. After close, every call on the handle fails with MC_ERR_CONTEXT until
 * mc_engine_destroy frees it (the accessors mc_engine_local_name, _rpc_port, _protocol and
 * _get_stats still answer). Destroy is close plus freeing the handle: no call may begin once
 * destroy was called (the handle's memory is gone when it returns); callers that cannot rule
 * that out call close first and destroy when their threads are done. */
#ifndef MOONCAKE_TRANSFER_ENGINE_H
#define MOONCAKE_TRANSFER_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "mooncake/error.h"
#include "mooncake/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mc_engine mc_engine_t;
typedef int64_t mc_segment_id_t; /* >= 0 when valid */
typedef uint64_t mc_batch_id_t;  /* 0 is never a valid batch */

#define MC_LOCAL_SEGMENT_ID 0 /* the engine's own segment (loopback transfers) */

enum mc_opcode { MC_OPCODE_READ = 0, MC_OPCODE_WRITE = 1 };

/* Same numbering as the reference's TransferStatusEnum. */
enum mc_task_status {
    MC_STATUS_WAITING = 0,
    MC_STATUS_PENDING = 1,
    MC_STATUS_INVALID = 2,
    MC_STATUS_CANCELED = 3,
    MC_STATUS_COMPLETED = 4,
    MC_STATUS_TIMEOUT = 5,
    MC_STATUS_FAILED = 6,
};

typedef struct mc_request {
    int opcode;   /* enum mc_opcode */
    void *source; /* local address, inside memory registered with this engine */
    mc_segment_id_t target_id;
    uint64_t target_offset; /* peer virtual address */
    uint64_t length;
    /* 0: whatever buffer the peer has registered there now. Non-zero: only the incarnation of
     * the target buffer with this epoch (mc_engine_alloc_managed_epoch); a request for an
     * incarnation that is gone fails with MC_ERR_ADDRESS_NOT_REGISTERED and touches nothing,
     * even when a newer incarnation sits at the same address. Checked by the serving side. */
    uint64_t target_epoch;
} mc_request_t;

typedef struct mc_task_state {
    int status; /* enum mc_task_status */
    int error;  /* 0, or the MC_ERR_* that made it FAILED/TIMEOUT */
    uint64_t transferred_bytes;
    /* Time from submit to the task's end, measured by the engine (0 while it runs), so callers
     * get per-request latency without polling each task. */
    uint64_t latency_ns;
} mc_task_state_t;

typedef struct mc_engine_options {
    /* Name of this engine's segment. For P2PHANDSHAKE: "host" or "host:port"; the port is
     * picked from MC_MIN_RPC_PORT..MC_MAX_RPC_PORT (15000..17000) when absent. */
    const char *local_server_name;
    /* "P2PHANDSHAKE" (default when NULL/empty) or "http://host:port/metadata". */
    const char *metadata_conn;
    /* "tcp", "shm", "auto" (default: shm to same-host peers for shareable memory, else tcp),
     * "rdma" (auto plus the fabric transport when a libfabric provider is up, else auto with one
     * warning), "fabric" (the fabric transport, even on one host; initialize fails with
     * MC_ERR_DEVICE_NOT_FOUND without it), or another protocol, which falls back to auto with one
     * warning. MC_FORCE_TCP=1 in the environment forces tcp. */
    const char *protocol;
    const char *device_name; /* accepted for compatibility; unused by tcp/shm */
    int transfer_timeout_ms; /* per-task deadline; 0 = default (MC_TRANSFER_TIMEOUT env, s; 30 s) */
    /* The opt-in cluster secret (or a file holding it); NULL: MC_CLUSTER_SECRET or
     * MC_CLUSTER_SECRET_FILE from the environment, else none. With one, this engine serves
     * only peers that prove they know it, and proves it to the peers it connects to
     * (challenge-response; the secret never crosses the wire). */
    const char *cluster_secret;
    const char *cluster_secret_file;
    /* A local_server_name without a port gets a port picked from [rpc_port_lo, rpc_port_hi]
     * (0, 0: MC_MIN_RPC_PORT..MC_MAX_RPC_PORT). With name_with_port the picked port is part of
     * the segment name with a metadata service too (always with P2PHANDSHAKE), so processes on
     * one host that pass the same bare host stay apart (the store asks for this). */
    int rpc_port_lo, rpc_port_hi;
    int name_with_port;
} mc_engine_options_t;

MC_API int mc_engine_create(mc_engine_t **out);
/* Starts the RPC listener and publishes the segment descriptor. Call once. */
MC_API int mc_engine_init(mc_engine_t *e, const mc_engine_options_t *opts);
/* Stops the engine (see "Lifetime" above): waits for the calls in flight, closes connections,
 * unpublishes the segment, stops serving peers. The handle stays valid, and so does the memory
 * of managed buffers (mc_engine_alloc_managed) until destroy, so code still pointing into it
 * fails its calls instead of faulting; every later call fails with MC_ERR_CONTEXT. Idempotent;
 * NULL is accepted. Not in the reference (its engine goes with its last shared_ptr). */
MC_API void mc_engine_close(mc_engine_t *e);
/* mc_engine_close, then frees the handle and the managed buffers' memory. NULL is accepted. */
MC_API void mc_engine_destroy(mc_engine_t *e);

/* The segment name peers use to open this engine ("host:port" for P2PHANDSHAKE). */
MC_API const char *mc_engine_local_name(const mc_engine_t *e);
MC_API int mc_engine_rpc_port(const mc_engine_t *e);
/* The protocol in force: "tcp", "shm", "auto", "rdma" (with the fabric transport up) or
 * "fabric". */
MC_API const char *mc_engine_protocol(const mc_engine_t *e);

/* Registers [addr, addr+len) for remote access. location is a tag such as "cpu:0" or "*".
 * Overlap with an existing registration: MC_ERR_ADDRESS_OVERLAPPED. Host memory that is not
 * mapped readable (see mc_engine_check_memory): MC_ERR_INVALID_ARGUMENT. The memory must stay
 * valid until unregistered. */
MC_API int mc_engine_register_memory(mc_engine_t *e, void *addr, size_t len, const char *location);
/* Unregisters the buffer registered at addr. New remote requests into it fail with
 * MC_ERR_ADDRESS_NOT_REGISTERED at once; the call then waits for the requests already moving
 * bytes into or out of this buffer (only this one), at most about a second (the transfer
 * timeout if shorter) before it shuts down the connections of peers that stalled inside it.
 * When it returns, the engine no longer touches the memory. */
MC_API int mc_engine_unregister_memory(mc_engine_t *e, void *addr);
/* n registrations with one location tag, all or none: on any error (overlap with the table or
 * with each other, a NULL address or zero length) nothing of the batch stays registered. */
MC_API int mc_engine_register_memory_batch(mc_engine_t *e, void *const *addrs, const size_t *lens,
                                           size_t n, const char *location);
/* n unregistrations, all or none: MC_ERR_INVALID_ARGUMENT (and nothing removed) when one
 * address is not the start of a plain registration or appears twice. */
MC_API int mc_engine_unregister_memory_batch(mc_engine_t *e, void *const *addrs, size_t n);
/* 0 when [addr, addr+len) lies inside one buffer registered with this engine (plain or managed),
 * MC_ERR_ADDRESS_NOT_REGISTERED when not, MC_ERR_INVALID_ARGUMENT for a NULL address or zero
 * length. The answer can change as soon as it is given (another thread may unregister); callers
 * use it to choose a path, and the transfer itself checks again. */
MC_API int mc_engine_is_registered(mc_engine_t *e, const void *addr, size_t len);
/* 0 when [addr, addr+len) is host memory the CPU may copy to with memcpy (registered as host
 * memory, or not registered and not a device's as the device-memory hook tells), 1 when it is a
 * device's; MC_ERR_INVALID_ARGUMENT for a NULL address or zero length. Whether the range is
 * mapped is not checked (mc_engine_check_memory). */
MC_API int mc_engine_is_host_memory(mc_engine_t *e, const void *addr, size_t len);
/* For addresses the caller cannot vouch for (an integer from Python): 0 when [addr, addr+len)
 * may be read (writable = 0) or written (writable = 1) by this process. Inside one registered
 * buffer: 0 after one O(log n) lookup. Starting inside one and running past its end:
 * MC_ERR_ADDRESS_NOT_REGISTERED. Elsewhere the range must be mapped and its first and last pages
 * allow the access (populate probes of those pages, plus an msync past two pages, nothing
 * written), else MC_ERR_INVALID_ARGUMENT. Freed memory that is still mapped passes. len 0: 0.
 * e may be NULL (then only the probe answers). A closed engine: MC_ERR_CONTEXT. Registration
 * (mc_engine_register_memory) applies the same probe to host memory. */
MC_API int mc_engine_check_memory(mc_engine_t *e, const void *addr, size_t len, int writable);
/* Copies len bytes between local (any memory of this process) and [addr, addr+len) of this
 * engine's own registered memory: READ copies from addr into local, WRITE from local to addr.
 * The buffer is held for the copy as a remote request holds it (an unregister or
 * mc_engine_free_managed of it waits for the copy), and with a non-zero epoch only that
 * incarnation is copied (mc_request_t.target_epoch): MC_ERR_ADDRESS_NOT_REGISTERED when the range
 * is not registered or is of another epoch; MC_ERR_INVALID_ARGUMENT for a bad opcode, NULL
 * pointers or zero length. */
MC_API int mc_engine_local_copy(mc_engine_t *e, int opcode, void *local, uint64_t addr, size_t len,
                                uint64_t epoch);

/* Allocates and registers engine-managed memory that same-host peers can map (shm transport).
 * Freed with mc_engine_free_managed (which unregisters it). */
MC_API int mc_engine_alloc_managed(mc_engine_t *e, size_t len, void **out);
/* Like mc_engine_alloc_managed, for one incarnation of a buffer whose contents are placed by
 * someone else (the store's segments): the buffer carries epoch (non-zero; 0 is the same as
 * mc_engine_alloc_managed) and requests naming another epoch are refused. Each call gets fresh
 * memory of its own (a new memfd), so when an incarnation is freed and the next one allocated,
 * a same-host peer still copying into the old one cannot reach the new one. */
MC_API int mc_engine_alloc_managed_epoch(mc_engine_t *e, size_t len, uint64_t epoch, void **out);
/* Unregisters (waiting out the requests inside it, as mc_engine_unregister_memory does) and
 * releases the memory at once, also the pages same-host peers still map. */
MC_API int mc_engine_free_managed(mc_engine_t *e, void *addr);

/* Open-or-get: the id of the segment called name, fetching its descriptor the first time only
 * (later calls find it in the engine's table, without I/O). One id per name for the engine's
 * life, shared by every caller of the engine: callers need no cache of their own. Our own name
 * gives MC_LOCAL_SEGMENT_ID. */
MC_API int mc_engine_open_segment(mc_engine_t *e, const char *name, mc_segment_id_t *out);
/* As mc_engine_open_segment, but within this engine's start-up window (MC_TE_STARTUP_WAIT_MS
 * after initialize, default 10 s) a name the metadata service does not know yet is asked for
 * again until it appears or the window ends: processes started together race their
 * registrations. Past the window it is mc_engine_open_segment. Ours (the reference's
 * get_first_buffer_address loses that race less often only by being slower to start). */
MC_API int mc_engine_open_segment_wait(mc_engine_t *e, const char *name, mc_segment_id_t *out);
/* The id of a segment already open by that name, without I/O: MC_ERR_INVALID_ARGUMENT when
 * none is. */
MC_API int mc_engine_segment_id(mc_engine_t *e, const char *name, mc_segment_id_t *out);
/* The name segment id was opened by (our own name for MC_LOCAL_SEGMENT_ID), NUL-terminated into
 * buf; names are shorter than 256 bytes. MC_ERR_INVALID_ARGUMENT for an id never opened or a
 * buf too small. */
MC_API int mc_engine_segment_name(mc_engine_t *e, mc_segment_id_t id, char *buf, size_t cap);
/* Forgets what the engine cached about the segment (its descriptor, idle connections), so the
 * next request to it fetches the descriptor again: for callers that suspect the peer restarted.
 * The id stays valid (it never comes to name another segment); transfers in flight to the
 * segment are not failed or waited for: they end on the connections they hold. The reference's
 * closeSegment does nothing. MC_ERR_INVALID_ARGUMENT for an id never opened. */
MC_API int mc_engine_close_segment(mc_engine_t *e, mc_segment_id_t id);
/* For callers that know the peer is gone (the store's master dropped its segment): a close, and
 * every transfer to the segment that is queued or waiting on the peer now ends at once, FAILED
 * with MC_ERR_SOCKET (the tcp transport; a same-host copy finishes on its own), instead of at
 * its deadline (MC_TRANSFER_TIMEOUT, 30 s). Transfers submitted afterwards run as usual (a peer
 * that comes back is reached again). Ours: the reference has no such call. MC_ERR_INVALID_ARGUMENT
 * for an id never opened; MC_LOCAL_SEGMENT_ID is a no-op. */
MC_API int mc_engine_abort_segment(mc_engine_t *e, mc_segment_id_t id);
/* *ms = how long the transfers to the segment now in flight have gone without news: since the
 * last one ended (or, over tcp, the last 4 MiB slice of one), or since the first of them was
 * submitted; 0 when none is in flight. A live peer makes news at its link's speed; a silent one
 * none. No I/O. Ours. MC_ERR_INVALID_ARGUMENT for an id never opened or ms NULL. */
MC_API int mc_engine_segment_stalled_ms(mc_engine_t *e, mc_segment_id_t id, uint64_t *ms);
/* Address and length of the first buffer the peer registered (0 if none; within the start-up
 * window a peer with no buffer yet is asked again until it has one or the window ends). */
MC_API int mc_engine_segment_first_buffer(mc_engine_t *e, mc_segment_id_t id, uint64_t *addr,
                                          uint64_t *len);

/* Asks whether the engine serving peer_segment is alive: one PING on its RPC port, answered
 * within the metadata timeout (5 s, or the transfer timeout if shorter). 0 when it answered;
 * MC_ERR_INVALID_ARGUMENT for an empty name or (P2PHANDSHAKE) one without "host:port";
 * MC_ERR_METADATA when the metadata service does not know the segment; MC_ERR_DNS when the host
 * does not resolve; MC_ERR_SOCKET when nothing answers there (the reference's codes);
 * MC_ERR_REJECT_HANDSHAKE when it refused our cluster secret. Opens no segment. */
MC_API int mc_engine_probe(mc_engine_t *e, const char *peer_segment);

/* This host's topology as the reference's getLocalTopology() JSON, {"cpu:N": [[preferred
 * NICs], [other NICs]], ...}, one key per NUMA node (the NIC lists are empty: this build drives
 * no RDMA NICs). Writes it NUL-terminated into buf and *needed = its size with the NUL;
 * MC_ERR_INVALID_ARGUMENT when cap is smaller (call again with *needed). Needs no engine. */
MC_API int mc_engine_local_topology(char *buf, size_t cap, size_t *needed);

/* Batches. A batch holds up to batch_size tasks; submit may be called several times until full
 * (MC_ERR_TOO_MANY_REQUESTS beyond). free fails with MC_ERR_BATCH_BUSY while tasks run. */
MC_API int mc_engine_batch_alloc(mc_engine_t *e, size_t batch_size, mc_batch_id_t *out);
MC_API int mc_engine_batch_submit(mc_engine_t *e, mc_batch_id_t b, const mc_request_t *reqs,
                                  size_t n);
MC_API int mc_engine_task_status(mc_engine_t *e, mc_batch_id_t b, size_t task,
                                 mc_task_state_t *out);
/* Waits until every task submitted to the batch ended or timeout_ms passed (-1 = the engine's
 * transfer timeout). Returns 0 if all COMPLETED, else the first task's error code
 * (MC_ERR_... ) — per-task states stay readable. */
MC_API int mc_engine_batch_wait(mc_engine_t *e, mc_batch_id_t b, int timeout_ms);
MC_API int mc_engine_batch_free(mc_engine_t *e, mc_batch_id_t b);

/* Synchronous helper: allocate, submit n requests, wait, free. */
MC_API int mc_engine_transfer_sync(mc_engine_t *e, const mc_request_t *reqs, size_t n);
/* The same, and errors[i] (n entries) receives request i's own result: 0, or the code that
 * failed it (every request gets the submit's code when the batch never started), so a caller
 * moving one object to several peers learns which of them failed. */
MC_API int mc_engine_transfer_sync_each(mc_engine_t *e, const mc_request_t *reqs, size_t n,
                                        int *errors);

/* Flags of the _ex calls below (others: MC_ERR_INVALID_ARGUMENT). */
enum mc_submit_flags {
    /* The requests' sources need not lie in memory registered with this engine: host memory
     * that the caller holds only for this call (a language runtime's bytes, say), which
     * registering and unregistering every time would cost more than the copy it saves. The
     * caller keeps it valid until every task of the batch has ended. A transport that needs a
     * registration of its own (fabric) leaves such a request to tcp; tcp, shm and copies within
     * this engine move it as they move registered memory. */
    MC_SUBMIT_UNREGISTERED_LOCAL = 1,
    /* The caller waits for the batch right after the submit (what the synchronous calls
     * always do, so there it changes nothing): the engine may move small tcp requests on the
     * calling thread before the submit returns: a hand-off to a worker and back costs more than
     * they do. */
    MC_SUBMIT_CALLER_WAITS = 2
};
MC_API int mc_engine_batch_submit_ex(mc_engine_t *e, mc_batch_id_t b, const mc_request_t *reqs,
                                     size_t n, unsigned flags);
MC_API int mc_engine_transfer_sync_each_ex(mc_engine_t *e, const mc_request_t *reqs, size_t n,
                                           int *errors, unsigned flags);

/* Per-transport counters of completed tasks and their bytes, since the engine started.
 * transport: "tcp", "shm", "fabric" or "local" (own segment). MC_ERR_INVALID_ARGUMENT for other
 * names. */
MC_API int mc_engine_get_stats(mc_engine_t *e, const char *transport, uint64_t *tasks,
                               uint64_t *bytes);

/* Notifies: small messages (name + payload, payload at most 64 KiB) delivered to a peer's queue. */
typedef struct mc_notify {
    char *from; /* sender's segment name */
    char *name;
    uint8_t *msg;
    size_t msg_len;
} mc_notify_t;
MC_API int mc_engine_notify_send(mc_engine_t *e, const char *peer_segment, const char *name,
                                 const void *msg, size_t len);
/* mc_engine_transfer_sync, then (only when every request completed) the notify to the segment
 * the requests target, as the reference's transfer with a notify does: the receiver may act on
 * the bytes as soon as it sees the notify. All requests must target one segment
 * (MC_ERR_INVALID_ARGUMENT otherwise, nothing moved). Returns the transfer's code, else the
 * notify's. */
MC_API int mc_engine_transfer_sync_notify(mc_engine_t *e, const mc_request_t *reqs, size_t n,
                                          const char *name, const void *msg, size_t len);
/* Moves all received notifies out; free the array with mc_engine_notifies_free. */
MC_API int mc_engine_notifies_fetch(mc_engine_t *e, mc_notify_t **out, size_t *count);
MC_API void mc_engine_notifies_free(mc_notify_t *arr, size_t count);

/* Write-ask: one round trip that writes bytes into a peer's registered memory and hands a small
 * message to the peer owner's code, which runs only once the bytes are in place and whose answer
 * is the reply (a store's small put and its commit; with no bytes, a store's get answered with
 * the value). The engine reads neither the message nor the answer. */
#define MC_ASK_MAX_MSG 4096                   /* a write-ask's message, at most */
#define MC_ASK_MAX_ANSWER ((16 << 10) + 4096) /* a handler's answer, at most (its cap) */
/* Called on a connection thread of the engine's server after a write-ask's bytes are in place in
 * registered memory. Writes its answer (at most cap bytes) to answer and its length to
 * *answer_len and returns 0; a nonzero return is sent to the initiator as an error frame with
 * that code (a positive one as MC_ERR_INVALID_ARGUMENT; MC_ERR_NOT_IMPLEMENTED and
 * MC_ERR_ADDRESS_NOT_REGISTERED, which tell the initiator that nothing was written, as
 * MC_ERR_CONTEXT). May block (it may ask a third process), holding that connection: keep it
 * within the initiator's transfer timeout. It must not call mc_engine_set_ask_handler on its own
 * engine. */
typedef int (*mc_engine_ask_handler_t)(void *ctx, const void *msg, size_t msg_len, void *answer,
                                       size_t cap, size_t *answer_len);
/* Sets (fn NULL: removes) the engine's ask handler; any time after mc_engine_create, from any
 * thread. Returns once no call of the handler it replaced (nor a write-ask that will call it) is
 * in progress, so the old ctx may be freed then; write-asks arriving afterwards get the new one
 * (none: MC_ERR_NOT_IMPLEMENTED, nothing written). MC_ERR_INVALID_ARGUMENT from inside a
 * handler of this engine (it would wait for itself). */
MC_API int mc_engine_set_ask_handler(mc_engine_t *e, mc_engine_ask_handler_t fn, void *ctx);
/* Writes len bytes from source (host memory; need not be registered) to address target_offset
 * of segment target (target_epoch as in mc_request_t) and hands msg (msg_len <= MC_ASK_MAX_MSG)
 * to the target's ask handler, which runs after the bytes are in place; its answer is copied to
 * answer (cap bytes) with its length in *answer_len. len 0 sends the message alone (the target
 * address and epoch are then not checked). Uses one pooled connection to the peer and the
 * engine's transfer timeout. Returns:
 *   0: answered;
 *   MC_ERR_NOT_IMPLEMENTED: nothing was written and no handler ran: the target has no handler,
 *     is too old to know the request, is this engine itself, or source or target is device
 *     memory;
 *   MC_ERR_ADDRESS_NOT_REGISTERED: nothing was written and no handler ran (the range is not
 *     registered there, or carries another epoch);
 *   MC_ERR_INVALID_ARGUMENT before anything is sent for bad arguments (NULL engine, NULL source
 *     with len > 0, NULL msg with msg_len > 0, msg_len > MC_ASK_MAX_MSG, NULL answer with
 *     cap > 0, NULL answer_len, len over 64 MiB, an unknown segment);
 *   any other code (and MC_ERR_INVALID_ARGUMENT for an answer longer than cap, with *answer_len
 *     set to its length): the handler's own error, or an unknown outcome (socket, timeout,
 *     peer gone): the bytes may or may not have landed and the handler may or may not have run.
 * A caller that must know treats every code but 0, NOT_IMPLEMENTED and ADDRESS_NOT_REGISTERED as
 * "may have happened". */
MC_API int mc_engine_write_ask(mc_engine_t *e, mc_segment_id_t target, const void *source,
                               uint64_t target_offset, size_t len, uint64_t target_epoch,
                               const void *msg, size_t msg_len, void *answer, size_t cap,
                               size_t *answer_len);

#ifdef __cplusplus
}
#endif
#endif
