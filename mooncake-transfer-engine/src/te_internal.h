/* Transfer Engine internals shared by the engine core, the RPC server and the transports.
 *
 * Lifetimes: peers live until the engine is destroyed (a restarted peer reuses its entry);
 * batches are reference counted through the handle table (batch.c); tasks live inside their
 * batch and the batch cannot be freed while any of its tasks is unfinished. */
#ifndef MC_TE_INTERNAL_H
#define MC_TE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "desc.h"
#include "mooncake/common/auth.h"
#include "mooncake/common/gate.h"
#include "mooncake/transfer_engine.h"
#include "registry.h"
#include "transports/transport.h"

#define MC__TE_NAME_MAX 256
#define MC__TE_POOL_MAX 16 /* idle pooled connections kept per peer */

/* RDMA: the fabric transport when a provider is up (else AUTO, with one warning); FABRIC: the
 * fabric transport, and initialize fails without it. Both use tcp for peers without fabric. */
enum mc__proto {
    MC__PROTO_AUTO = 0,
    MC__PROTO_TCP,
    MC__PROTO_SHM,
    MC__PROTO_RDMA,
    MC__PROTO_FABRIC
};

typedef struct mc__peer {
    pthread_mutex_t lock; /* desc, stale, pool */
    char name[MC__TE_NAME_MAX];
    mc__desc_t *desc;           /* immutable once published here; replaced as a whole */
    int stale;                  /* re-fetch before the next use */
    char host[MC__TE_NAME_MAX]; /* where its RPC port is reached */
    uint16_t port;
    int idle[MC__TE_POOL_MAX]; /* pooled connections to its RPC port (peer_conn.h) */
    int nidle;
    void *tp_peer[MC__TP_COUNT]; /* each transport's own state for this peer (transport.h) */
    /* mc_engine_abort_segment calls so far: a task submitted before the latest one is failed,
     * not started, and is not retried on a fresh connection (transport.h, peer_abort) */
    _Atomic uint32_t aborts;
    /* Tasks to it submitted and not yet ended, and when it last made progress (a task or tcp
     * slice ended, or the first of the tasks now in flight was submitted): how long its
     * transfers have waited without news (mc_engine_segment_stalled_ms). */
    _Atomic uint32_t inflight;
    _Atomic uint64_t progress_ms;
} mc__peer_t;

struct mc__batch;

typedef struct mc__task {
    struct mc__task *next; /* tcp work queue link */
    struct mc__batch *batch;
    mc__peer_t *peer; /* NULL for the local segment */
    int opcode;
    uint8_t *local;
    uint64_t remote;
    uint64_t len;
    uint64_t epoch; /* the target buffer's incarnation the request is valid for; 0: any */
    uint64_t deadline_ms;
    uint64_t submitted_ns;
    uint64_t latency_ns; /* set when it ends, under the batch lock */
    uint32_t nslices;
    uint32_t next_slice; /* guarded by the tcp queue lock */
    _Atomic uint32_t slices_done;
    _Atomic int error; /* first error of any slice */
    _Atomic int status;
    _Atomic uint64_t transferred;
    int transport;    /* enum mc__tp */
    int local_device; /* the GPU the local range is on (devmem.h); -1: host memory */
    uint32_t aborts;  /* peer->aborts when it was submitted */
} mc__task_t;

typedef struct mc__batch {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    size_t cap;
    size_t used;       /* tasks submitted */
    size_t unfinished; /* submitted tasks not yet ended */
    mc__task_t *tasks;
    int refs; /* handle-table references (under the table lock) */
    int freed;
} mc__batch_t;

typedef struct mc__batch_slot {
    mc__batch_t *b;
    uint32_t gen;
} mc__batch_slot_t;

typedef struct mc__server mc__server_t;

struct mc_engine {
    int initialized;
    /* Until then (mc__now_ms), a peer that has not yet published its segment or its first buffer
     * is waited for (segment.c): peers started together race their registrations. */
    uint64_t startup_until_ms;
    /* Calls in flight and the close (gate.c, on mooncake/common/gate.h): every public call but
     * destroy enters the gate and leaves it when it returns; close shuts the gate, wakes waiters
     * and waits for the calls inside before it releases anything they could touch. Its owner is
     * the process that initialized the engine (0: not yet): its threads, sockets and memory are
     * that process's, so a fork() child's copy refuses every call and, destroyed, lets go of its
     * own copies only (mc_engine_destroy). */
    mc__gate_t gate;
    char name[MC__TE_NAME_MAX];
    char host[MC__TE_NAME_MAX];
    uint16_t port;
    char *metadata_url; /* NULL for P2PHANDSHAKE: http://... or, with etcd set, etcd://... */
    struct mc__meta_etcd *etcd; /* etcd metadata (metadata/etcd_meta.h), else NULL */
    int proto;
    int timeout_ms;
    mc_auth_t auth; /* the cluster secret: every RPC connection, both ways, proves it */
    uint64_t instance_id;
    /* Where shm can reach: this host and network namespace (the shm hand-off uses an abstract
     * unix socket, which exists per network namespace). Peers with another value use tcp. */
    char host_id[384];

    mc__registry_t reg;
    mc__server_t *server;
    /* The transport table (transports/list.c), taken at create: the core reaches transports only
     * through it (transports/table.c). */
    const mc__transport_t *const *tps;
    size_t ntp;
    /* Each transport's engine-wide state, indexed by its id (enum mc__tp), opaque to the core:
     * set by the transport's init, NULL when it is not up. */
    void *tp_state[MC__TP_COUNT];
    int conn_sockbuf; /* socket buffers of pooled peer connections (0: the kernel's) */
    /* How device memory is reached (devmem.h), chosen at create: transports copy device memory
     * through it and never touch it directly. */
    const struct mc__devmem_ops *devmem;

    pthread_mutex_t peers_lock;
    mc__peer_t **peers; /* segment id = index + 1 */
    size_t npeers;
    size_t peers_cap;

    pthread_mutex_t batches_lock;
    mc__batch_slot_t *slots;
    size_t nslots;
    size_t slots_cap;

    pthread_mutex_t notify_lock;
    mc_notify_t *notifies;
    size_t nnotifies;
    size_t notifies_cap;
    uint64_t notify_bytes; /* names and payloads queued, against the queue's byte bound */

    /* The write-ask handler (ask.c): fn and ctx under ask_lock. A serving write-ask holds a
     * reference from before its payload lands until its handler returned, counted in
     * ask_inflight[the generation it took it in & 1], so a set waits only for the calls of the
     * handler it replaced (sets are serialized by ask_set_lock). */
    pthread_mutex_t ask_lock;
    pthread_cond_t ask_cond;
    pthread_mutex_t ask_set_lock;
    mc_engine_ask_handler_t ask_fn;
    void *ask_ctx;
    unsigned ask_gen;
    unsigned ask_inflight[2];

    _Atomic uint64_t stat_tasks[MC__TP_COUNT];
    _Atomic uint64_t stat_bytes[MC__TP_COUNT];
};

/* gate.c. enter: 0, MC_ERR_INVALID_ARGUMENT for a NULL engine, MC_ERR_CONTEXT once a close
 * began or in a fork() child of the process that initialized it (nothing entered then; do not
 * leave). */
int mc__te_gate_init(mc_engine_t *e);
void mc__te_gate_destroy(mc_engine_t *e);
int mc__engine_enter(mc_engine_t *e);
void mc__engine_leave(mc_engine_t *e);
/* 1 once a close began: waits that callers could repeat give up (batch_wait). */
int mc__engine_closing(const mc_engine_t *e);
/* 1 in a process other than the one that initialized e (a fork() child's inherited copy). */
int mc__engine_inherited(const mc_engine_t *e);
/* Shuts the gate: 1 for the one caller that must now wait and release (mc__te_gate_wait_calls,
 * then mc__te_gate_mark_closed), 0 for the others, which return once it is released. */
int mc__te_gate_shut(mc_engine_t *e);
void mc__te_gate_wait_calls(mc_engine_t *e);
void mc__te_gate_mark_closed(mc_engine_t *e);
/* rc = call, inside the gate (rc = the gate's code when it is shut). */
#define MC__GATED(e, rc, call)                                                                     \
    do {                                                                                           \
        (rc) = mc__engine_enter(e);                                                                \
        if ((rc) == 0) {                                                                           \
            (rc) = (call);                                                                         \
            mc__engine_leave(e);                                                                   \
        }                                                                                          \
    } while (0)

/* metadata.c: publishing our descriptor and fetching peers'. */
int mc__meta_publish(mc_engine_t *e);
/* Before the first publish with a metadata service: MC_ERR_METADATA when another live engine
 * already serves our segment name (two processes given one name would overwrite each other's
 * descriptor, and every transfer would go to the wrong one). A dead one's entry is taken over. */
int mc__meta_claim(mc_engine_t *e);
void mc__meta_unpublish(mc_engine_t *e);
/* Our descriptor (registered buffers, each transport's part) as JSON, mc__malloc'ed. */
int mc__meta_desc_json(mc_engine_t *e, char **json);
int mc__meta_fetch(mc_engine_t *e, const char *name, mc__desc_t **out);
/* As mc__meta_fetch; *absent is 1 when the metadata service answered that no segment has that
 * name yet (HTTP 404), as opposed to one that could not be asked. */
int mc__meta_fetch_absent(mc_engine_t *e, const char *name, mc__desc_t **out, int *absent);

/* segment.c */
mc__peer_t *mc__peer_get(mc_engine_t *e, mc_segment_id_t id);
/* Re-fetches the peer's descriptor (also drops pooled connections and shm mappings when the
 * peer restarted). */
int mc__peer_refresh(mc_engine_t *e, mc__peer_t *p);
/* Ensures a current descriptor and checks [addr, addr+len) lies in one of its buffers (of that
 * epoch, when epoch is non-zero), re-fetching once when not; on success *shm_id receives that
 * buffer's shm id (-1: not shareable), *same_host whether the peer runs on this host and *reach
 * which transports can reach it (the descriptor's reach). */
int mc__peer_check_range(mc_engine_t *e, mc__peer_t *p, uint64_t addr, uint64_t len, uint64_t epoch,
                         int64_t *shm_id, int *same_host, uint32_t *reach);
void mc__peer_mark_broken(mc__peer_t *p);
/* mc_engine_open_segment inside the gate. */
int mc__segment_open(mc_engine_t *e, const char *name, mc_segment_id_t *out);
void mc__peer_destroy(mc_engine_t *e, mc__peer_t *p);

/* batch.c */
mc__batch_t *mc__batch_acquire(mc_engine_t *e, mc_batch_id_t id);
void mc__batch_release(mc_engine_t *e, mc__batch_t *b);
/* Ends a task (status COMPLETED/FAILED/TIMEOUT) and wakes waiters. */
void mc__task_finish(mc__task_t *t, int status, int error);
/* The batch calls without the gate, for calls that are already inside it. wait: with
 * until_done it waits for the tasks even when a close begins (a synchronous call must not
 * return while its tasks may still touch the caller's memory); without, a close ends it with
 * MC_ERR_CONTEXT. */
int mc__batch_alloc(mc_engine_t *e, size_t batch_size, mc_batch_id_t *out);
int mc__batch_wait(mc_engine_t *e, mc_batch_id_t id, int timeout_ms, int until_done);
int mc__batch_free(mc_engine_t *e, mc_batch_id_t id);
int mc__task_status(mc_engine_t *e, mc_batch_id_t id, size_t task, mc_task_state_t *out);
/* Wakes every batch waiter (a close began). */
void mc__batches_wake(mc_engine_t *e);
/* sync.c: the synchronous calls (a batch from alloc to free), inside the gate. */
int mc__transfer_sync_each(mc_engine_t *e, const mc_request_t *reqs, size_t n, int *errors,
                           unsigned flags);
/* submit.c: mc_engine_batch_submit(_ex); flags are the public MC_SUBMIT_* and, for callers
 * that wait right after, MC__SUBMIT_RUN_HERE: tcp requests to one peer that fit one pipelined
 * group (or a lone one that fits one slice) run on the calling thread before this returns. */
#define MC__SUBMIT_RUN_HERE (1u << 16)
int mc__batch_submit(mc_engine_t *e, mc_batch_id_t id, const mc_request_t *reqs, size_t n,
                     unsigned flags);

/* server.c: the RPC/data listener. */
int mc__server_start(mc_engine_t *e, int lfd, mc__server_t **out);
void mc__server_stop(mc__server_t *s);
/* A fork() child's copy: closes its copies of the server's sockets, stops nothing of the
 * parent's (mc__conn_server_forget). */
void mc__server_forget(mc__server_t *s);

/* notify.c */
int mc__notify_push(mc_engine_t *e, const char *from, size_t from_len, const char *name,
                    size_t name_len, const uint8_t *msg, size_t msg_len);
void mc__notify_clear(mc_engine_t *e);

/* ask.c: the write-ask handler, for the server. acquire: 1 with a reference to the handler in
 * *ref (release it once the handler ran, or once the request was refused), 0 when none is set. */
typedef struct mc__ask_ref {
    mc_engine_ask_handler_t fn;
    void *ctx;
    unsigned gen;
} mc__ask_ref_t;
int mc__ask_init(mc_engine_t *e);
void mc__ask_destroy(mc_engine_t *e);
int mc__ask_acquire(mc_engine_t *e, mc__ask_ref_t *ref);
/* Calls the referenced handler; its code, mapped so that it never reads as "nothing written". */
int mc__ask_call(mc_engine_t *e, const mc__ask_ref_t *ref, const void *msg, size_t msg_len,
                 void *answer, size_t cap, size_t *answer_len);
void mc__ask_release(mc_engine_t *e, const mc__ask_ref_t *ref);

#endif
