/* The transport contract: each transport is one table of functions (its own file(s) and an entry
 * in transports/table.c), and the engine core never names one. A transport owns its engine-wide
 * state (init/close/release, in e->tp_state[id]) and its per-peer state (the peer_* hooks, in
 * p->tp_peer[id]); it is chosen per request by carries(), in the table's order; it starts validated
 * tasks and may finish them inline (memcpy transports) or hand them to its own threads (tcp). The
 * request/reply connections to a peer's RPC port that several transports and the core share are the
 * core's (peer_conn.h), not a transport's. docs/transfer-engine.md lists the contract. */
#ifndef MC_TE_TRANSPORT_H
#define MC_TE_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

struct mc_engine;
struct mc__task;
struct mc__peer;
struct mc__desc;
struct mc__region;

/* Ids name transports in statistics (mc_engine_get_stats) and index p->tp_peer. */
enum mc__tp { MC__TP_LOCAL = 0, MC__TP_TCP, MC__TP_SHM, MC__TP_FABRIC, MC__TP_COUNT };

/* submit's answer when this transport cannot carry the task (the caller falls back to the next
 * transport in the table that carries every request) */
#define MC__TP_DECLINED 1

/* What the core knows about a request's target when it chooses a transport. */
typedef struct mc__route {
    const struct mc__peer *peer; /* NULL: our own segment */
    int64_t shm_id;              /* the target buffer's shared-memory id; -1: not shareable */
    int same_host;               /* the peer runs where our shared memory reaches */
    uint32_t reach;              /* the peer's descriptor's reach (desc.h): bit (1 << id) set for
                                  * each transport whose part it published */
    int proto;                   /* the engine's protocol setting (enum mc__proto) */
} mc__route_t;

typedef struct mc__transport {
    const char *name;
    int id; /* enum mc__tp */
    /* Engine-wide state, started in table order at initialize: 0, or a code that fails the
     * initialize. A transport the engine can do without logs and returns 0 when it cannot start
     * (its carries() then says no). */
    int (*init)(struct mc_engine *e);
    /* May be NULL. A close began (no new call enters; calls inside may still submit): end the
     * transfers that wait on peers now, failing them with MC_ERR_CONTEXT, rather than at their
     * deadlines. The transport keeps running: a task submitted after this still ends (failed). */
    void (*interrupt)(struct mc_engine *e);
    /* Stops what carries transfers (threads, queues), in reverse order, before peers go. */
    void (*close)(struct mc_engine *e);
    /* Stops serving what peers may still map of ours, after peers and batches are gone and before
     * registered memory is released. May be NULL. */
    void (*release)(struct mc_engine *e);
    /* 1 when it carries this request. NULL: it carries every request to a peer (the fallback). */
    int (*carries)(const struct mc_engine *e, const mc__route_t *r);
    /* Returns 0 once the task is started (it will end through mc__task_finish),
     * MC__TP_DECLINED to let the fallback carry it. */
    int (*submit)(struct mc_engine *e, struct mc__task *t);
    /* May be NULL. Runs tasks t[0..n) on the calling thread when that is cheaper than a hand-off
     * (the caller waits right after): 1 when it ran them all, 0 (none touched) to submit them as
     * usual. */
    int (*run_inline)(struct mc_engine *e, struct mc__task **t, size_t n);
    /* May be NULL. submit for n tasks at once, so that the transport sees the whole call before
     * any of it starts (a worker woken by the first task would otherwise carry it alone). */
    void (*submit_many)(struct mc_engine *e, struct mc__task **t, size_t n);
    /* Per-peer state, each hook may be NULL. init at the peer's creation (0 or MC_ERR_MEMORY),
     * destroy at the engine's destroy. Around a descriptor re-fetch: fetch_token before it (what
     * the transport must know the new descriptor is at least as new as), swapped with p->lock
     * held once the new descriptor is in place (restarted: another instance of the peer), and
     * refreshed after, with no lock held. */
    int (*peer_init)(struct mc__peer *p);
    void (*peer_destroy)(struct mc__peer *p);
    uint64_t (*peer_fetch_token)(struct mc__peer *p);
    void (*peer_swapped)(struct mc__peer *p, uint64_t token, int restarted);
    void (*peer_refreshed)(struct mc__peer *p, int restarted);
    /* May be NULL. The peer is known gone (mc_engine_abort_segment; p->aborts was just raised):
     * end its tasks that are queued or waiting on it now, failing them with MC_ERR_SOCKET,
     * rather than at their deadlines. Tasks submitted after this run as usual. */
    void (*peer_abort)(struct mc_engine *e, struct mc__peer *p);
    /* Adds what peers need to reach this transport to our descriptor, once its buffers are
     * filled in: its own part (mc__desc_add_part under its name: a socket name, an endpoint
     * address, each buffer's remote key). May be NULL. */
    void (*describe)(const struct mc_engine *e, struct mc__desc *d);
    /* Reads its part of a peer's descriptor (json: one object) into what its submit needs, kept
     * with the descriptor: 0 and *priv (freed with it by *priv_free), or a code when the part is
     * malformed; the peer is then not reachable over this transport. May be NULL. */
    int (*desc_parse)(const char *json, void **priv, void (**priv_free)(void *priv));
    /* Memory the engine registered (n regions, now in e->reg) and, before the unregister returns
     * and the caller may free it, memory it unregistered (the regions starting at addrs, already
     * out of e->reg and no longer pinned by our own server). A transport that registers memory
     * with a device (fabric) does it here; a failure only keeps that memory off this transport.
     * Called before the descriptor is re-published. May be NULL. */
    void (*mem_registered)(struct mc_engine *e, const struct mc__region *regs, size_t n);
    void (*mem_unregistered)(struct mc_engine *e, const uint64_t *addrs, size_t n);
} mc__transport_t;

/* transports/list.c: every transport, in table order (*n of them). The engine's lifecycle takes
 * it once into e->tps; nothing else reads it. */
const mc__transport_t *const *mc__transport_list(size_t *n);

/* transports/table.c: what the core does through the engine's table (e->tps). */
const mc__transport_t *mc__transport_get(const struct mc_engine *e, int id);
int mc__transports_init(struct mc_engine *e); /* stops what it started on failure */
void mc__transports_interrupt(struct mc_engine *e);
void mc__transports_close(struct mc_engine *e);   /* reverse order */
void mc__transports_release(struct mc_engine *e); /* reverse order */
/* The transport for a request to a peer (never NULL: the fallback carries everything). */
const mc__transport_t *mc__transport_route(const struct mc_engine *e, const mc__route_t *r);
/* The fallback: the first transport that carries every request. */
const mc__transport_t *mc__transport_fallback(const struct mc_engine *e);
int mc__transports_peer_init(const struct mc_engine *e, struct mc__peer *p);
void mc__transports_peer_destroy(const struct mc_engine *e, struct mc__peer *p);
/* A descriptor re-fetch, as the peer_* hooks see it (tok: one per transport id). */
void mc__transports_peer_tokens(const struct mc_engine *e, struct mc__peer *p,
                                uint64_t tok[MC__TP_COUNT]);
void mc__transports_peer_swapped(const struct mc_engine *e, struct mc__peer *p,
                                 const uint64_t tok[MC__TP_COUNT], int restarted);
void mc__transports_peer_refreshed(const struct mc_engine *e, struct mc__peer *p, int restarted);
void mc__transports_peer_abort(struct mc_engine *e, struct mc__peer *p);
void mc__transports_describe(const struct mc_engine *e, struct mc__desc *d);
/* After a peer's descriptor is decoded: each transport reads its part (desc_parse) and d->reach
 * says which can reach the peer. */
void mc__transports_desc_parsed(const struct mc_engine *e, struct mc__desc *d);
void mc__transports_mem_registered(struct mc_engine *e, const struct mc__region *regs, size_t n);
void mc__transports_mem_unregistered(struct mc_engine *e, const uint64_t *addrs, size_t n);
/* batch.c, beside mc__task_finish: counts a finished task's bytes for its transport's stats. */
void mc__transport_account(struct mc_engine *e, int id, unsigned long long bytes);

extern const mc__transport_t mc__tp_local;
extern const mc__transport_t mc__tp_tcp;
extern const mc__transport_t mc__tp_shm;
extern const mc__transport_t mc__tp_fabric;
#endif
