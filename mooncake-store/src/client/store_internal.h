/* The client's private state, shared by the files of src/client (one job each: lifecycle,
 * data movement, puts, gets, metadata calls). */
#ifndef MC_STORE_CLIENT_STORE_INTERNAL_H
#define MC_STORE_CLIENT_STORE_INTERNAL_H
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "client/put_session.h"
#include "client/put_slots.h"
#include "client/replica_cache.h"
#include "client/segment_prefault.h"
#include "client/slot_forward.h"
#include "client/staging.h"
#include "mooncake/common/gate.h"
#include "mooncake/store.h"
#include "mooncake/store_dummy.h"
#include "proto/master_client.h"

enum { MC__STORE_NEW = 0, MC__STORE_READY = 1, MC__STORE_CLOSED = 2 };

/* An extra segment (store_segments.c): a file range mapped shared, or memory allocated for it. */
typedef struct mc__extra_seg {
    char id[37]; /* the UUID text callers name it by */
    void *addr;
    size_t size;
    uint64_t epoch;         /* 0 for a file segment (plain registered memory) */
    int file;               /* 1: mount_segment's file mapping; 0: allocated */
    uint64_t unmount_at_ms; /* an unmount with a grace period: when it happens (0: none) */
} mc__extra_seg_t;

struct mc_store {
    pthread_mutex_t mu; /* state transitions */
    /* Why the last setup failed, in words (mc_store_setup_error); written by store.c's setup. */
    char setup_error[256];
    _Atomic int state;
    /* Calls are inside it while they run (store_gate.c); close shuts it and waits for them, so it
     * never pulls the master connection or the segment away from a call in flight. Its owner is
     * the process that set the store up (0: none holds it now): a fork() child's copy shares the
     * master connection, the node's channels and their request counters, the engine and the
     * shared memory with it, so there every call fails at once (mc__store_refuse_inherited) and
     * destroy lets go of the child's own copies only. */
    mc__gate_t gate;
    mc_store_config_t cfg;
    mc_engine_t *engine;
    int own_engine;
    mc__master_client_t *master;
    char hostname[MC_MP_MAX_SEGMENT_NAME + 1];

    /* The contributed global segment (NULL for a pure client) in its current incarnation.
     * Copies into or out of it by this process hold seg_rw shared; a new incarnation (the master
     * forgot the old one) takes it exclusively, so no copy of ours straddles the switch. */
    pthread_rwlock_t seg_rw;
    uint8_t *segment;
    size_t segment_size;
    uint64_t segment_epoch;
    /* Its pages faulted in ahead of use (segment_prefault.h); stopped before the segment goes. */
    mc__prefault_t prefault;
    uint8_t *staging_mem;
    mc__staging_t staging;
    /* The engine's transports move caller memory as it is (tcp, shm: a socket's or a memcpy's
     * source or destination), so unregistered caller memory goes straight to the engine
     * (MC_SUBMIT_UNREGISTERED_LOCAL) instead of through the staging buffer: one copy fewer per
     * byte. Off for fabric, whose RDMA needs registered memory (staged, it keeps its speed). */
    int direct_mem;

    pthread_t hb_thread;
    int hb_started;
    pthread_t maint_thread; /* replica tasks and timed work (store.c), stopped by hb_stop too */
    int maint_started;
    pthread_t renew_thread; /* renews hot cached replica lists (replica_renew.c) */
    int renew_started;
    int master_known; /* the master answered us: a close must unregister */
    int hb_stop;
    pthread_mutex_t hb_mu;
    pthread_cond_t hb_cv;
    _Atomic int master_ok;

    /* peer segments whose transfers failed lately, and what the heartbeat thread last saw of
     * the master's view (store_suspects.c's alone) */
    struct mc__suspects *suspects;

    mc__put_sessions_t sessions; /* put sessions between start and end (put_session.c) */
    mc__put_slots_t slots;       /* placements reserved ahead for small puts (put_slots.c) */
    mc__forwarder_t fwd;         /* put commits sent with the bytes (slot_forward.c) */

    pthread_mutex_t extras_mu; /* extra segments (store_segments.c); never held around an RPC */
    mc__extra_seg_t *extras;
    size_t n_extras, cap_extras;

    /* The backend row chosen at setup (backend.h): direct, or dummy (its calls run by a local
     * storage node). The dummy row's own state: only store_dummy.c looks into it. */
    const struct mc__store_backend *be;
    struct mc__dummy *dummy;

    struct mc__disk_tier *disk_tier; /* this client's own disk tier (enable_ssd_offload) */
    _Atomic uint64_t disk_reads;     /* LOCAL_DISK copies read (mc_store_disk_read_count) */
    pthread_mutex_t disk_mu;         /* idle connections to disk read servers (store_disk_read.c) */
    struct mc__dconn *dconns; /* never held around I/O: a reader takes one out while it reads */
    size_t n_dconns;

    mc__replica_cache_t *rcache; /* replica locations under lease (NULL: off; replica_cache.c) */

    /* The user buffers this client registered (mc_store_register_buffer), kept only so that a
     * close unregisters them from a shared engine and an unregister refuses what it did not
     * register; whether memory is registered the engine answers (mc_engine_is_registered). A
     * dummy client has no engine: for it this is the table of pool ranges it mapped. */
    pthread_rwlock_t reg_lock;
    mc_store_iov_t *regs;
    size_t nregs, regs_cap;
};

struct mc_store_buffer {
    mc_store_t *store;
    uint8_t *data;
    size_t size;
    int staged; /* data lives in the staging buffer (else mc__malloc) */
};

struct mc__store_backend;
/* store.c's halves of mc_store_create, mc_store_setup and mc_store_setup_dummy (store_api.c
 * passes the backend row each setup chooses; it becomes s->be once the state allows a setup). */
int mc__store_create(mc_store_t **out);
int mc__store_setup(mc_store_t *s, const mc_store_config_t *cfg,
                    const struct mc__store_backend *be);
int mc__store_setup_dummy(mc_store_t *s, const mc_store_dummy_config_t *cfg,
                          const struct mc__store_backend *be);

/* READY, or MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS (also in a fork() child of the process that
 * set the store up). */
int mc__store_ready(mc_store_t *s);
/* 1 in a process other than the one that set s up (a fork() child's inherited copy). */
int mc__store_inherited(const mc_store_t *s);
/* MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS, logged once per handle: a call in a fork() child. */
int mc__store_refuse_inherited(mc_store_t *s);
/* Like ready, and keeps the call inside the gate until mc__store_leave. */
int mc__store_enter(mc_store_t *s);
/* mc__store_enter for the calls every backend row offers (the dummy row's entries, the memory
 * check): it never refuses a row whose table_only is set. */
int mc__store_enter_any(mc_store_t *s);
void mc__store_leave(mc_store_t *s);
/* Runs call while the store is held open (public entry points): rc gets enter's code when the
 * store cannot be entered, else call's result. One place for the enter/leave pairing. */
#define MC__STORE_HELD(s, rc, call)                                                                \
    do {                                                                                           \
        (rc) = mc__store_enter(s);                                                                 \
        if ((rc) == 0) {                                                                           \
            (rc) = (call);                                                                         \
            mc__store_leave(s);                                                                    \
        }                                                                                          \
    } while (0)
/* The same for batch calls with a per-item result array: an item the call never reached (the
 * store is not set up or closed, or the call failed before its items) gets the call's code, so
 * no caller reads an untouched 0 as success. */
#define MC__UNREACHED INT32_MIN
#define MC__STORE_HELD_BATCH(s, rc, call, results, n)                                              \
    do {                                                                                           \
        for (size_t i_ = 0; (results) != NULL && i_ < (n); i_++)                                   \
            (results)[i_] = MC__UNREACHED;                                                         \
        MC__STORE_HELD(s, rc, call);                                                               \
        for (size_t i_ = 0; (results) != NULL && i_ < (n); i_++)                                   \
            if ((results)[i_] == MC__UNREACHED)                                                    \
                (results)[i_] = (rc) != 0 ? (rc) : MC_ERR_INTERNAL_ERROR;                          \
    } while (0)
/* The checks a batch call starts with, in this order: the store is ready, then its arrays are
 * there when n > 0 (have_arrays). Non-zero is the code to return; the caller also returns 0 at
 * once when n == 0. */
static inline int mc__store_batch_check(mc_store_t *s, size_t n, int have_arrays) {
    int rc = mc__store_ready(s);
    if (rc != 0)
        return rc;
    return n && !have_arrays ? MC_ERR_INVALID_PARAMS : 0;
}
/* engine_code.c: the store's code for a Transfer Engine code, by what the store asked the engine
 * for. Store calls never return an engine code raw, since the two tables give some numbers other
 * meanings (-102 is SOCKET to the engine and SEGMENT_ALREADY_EXISTS to the store); every engine
 * code a store call surfaces goes through here. MC_ERR_CONTEXT (the engine was closed under us)
 * is MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS for every op. */
enum {
    MC__ENG_MEMORY = 0, /* registering or unregistering caller memory; other calls */
    MC__ENG_SETUP,      /* starting our own engine: INVALID_PARAMS (INTERNAL_ERROR for memory) */
    MC__ENG_ALLOC,      /* memory for a segment: NO_AVAILABLE_HANDLE */
    MC__ENG_TRANSFER,   /* moving bytes: TRANSFER_FAIL */
};
int mc__store_engine_code_for(int rc, int op);
/* mc__store_engine_code_for(rc, MC__ENG_MEMORY) */
int mc__store_engine_code(int rc);
/* 0, or MC_ERR_INVALID_KEY for a NULL, empty or over-long key. */
int mc__store_check_key(const char *key);
/* Converts the public replicate config (NULL = defaults); strings are borrowed. */
int mc__store_wire_config(const mc_replicate_config_t *rc, mc__replicate_config_t *out);

/* Moves the bytes of iov (total = the object size) to every replica (WRITE) or from rep[0]
 * (READ). Registered memory moves directly, and so does any memory when s->direct_mem; other
 * memory goes through the staging buffer, or is registered for the call when there is no
 * staging buffer. */
int mc__store_move(mc_store_t *s, int opcode, const mc_store_iov_t *iov, size_t iovcnt,
                   const mc__replica_desc_t *reps, size_t nreps);
/* The same; on failure failed[r] (nreps entries, zeroed by the caller) is set for each replica
 * whose transfer failed: MC__REP_UNREACHABLE (its segment could not be opened or reached) or
 * MC__REP_REFUSED (its owner answered, but not for that placement: another incarnation). */
enum { MC__REP_OK = 0, MC__REP_UNREACHABLE = 1, MC__REP_REFUSED = 2 };
int mc__store_move_each(mc_store_t *s, int opcode, const mc_store_iov_t *iov, size_t iovcnt,
                        const mc__replica_desc_t *reps, size_t nreps, uint8_t *failed);
/* 1 when the replica lies inside our own contributed segment, in its current incarnation (a
 * plain memcpy reaches it). A replica of a gone incarnation is not local: it fails on the engine
 * path like any other stale placement. */
int mc__store_replica_is_local(mc_store_t *s, const mc__replica_desc_t *d);
/* Copies len bytes between local and [d->addr + off, ...) in our own segment, after checking
 * (under seg_rw) that d is still of the current incarnation: 0 or MC_ERR_TRANSFER_FAIL. */
int mc__store_local_copy(mc_store_t *s, int opcode, const mc__replica_desc_t *d, uint64_t off,
                         void *local, size_t len);
/* Copies n bytes between a staging block and the caller's memory (to_block: into the block),
 * which may be a GPU's: the engine copies it as it copies its own registered memory (its
 * device-memory hook), so a device buffer is never touched by the CPU. 0, or INVALID_PARAMS when
 * the caller's memory could not be copied (a failed device copy). */
int mc__store_stage_copy(mc_store_t *s, int to_block, uint8_t *blk, void *user, size_t n);
/* 1 for the engine's codes of a failed copy of our own memory (its device-memory hook): the
 * caller's buffer failed, not the peer, so no segment is suspected for it. */
int mc__store_local_fault(int err);
/* The engine's id for a peer segment (the engine opens it once and keeps it). */
int mc__store_segment_id(mc_store_t *s, const char *name, mc_segment_id_t *out);
/* Batch calls: the bytes of many keys in as few engine batches as possible (see store_batch.c).
 * Read: results[i] gets kr[i]'s size or a negative code, as mc__store_read_replicas returns it.
 * Write: results[j] gets 0 or a negative code for kr[j] (the put started for items[idx[j]]):
 * its start code, MC_ERR_NO_AVAILABLE_HANDLE without replicas, else what mc__store_move gives. */
/* The arrays of a batch of puts that start together (store_put.c, put_session.c): the keys that
 * passed the caller's checks, their sizes, their indices in the call, and the master's answer. */
typedef struct mc__put_batch {
    const char **keys;
    uint64_t *lens;
    size_t *idx;
    mc__key_replicas_t *kr;
    mc__replicate_config_t wc; /* the call's replicate config, converted */
} mc__put_batch_t;
/* What both begin with: the store is ready and the caller's arrays are there (have_arrays), the
 * config converts, and there is room for n keys (none taken when n == 0). 0 or the code to
 * return; mc__put_batch_free frees b either way. */
int mc__put_batch_init(mc_store_t *s, size_t n, int have_arrays, const mc_replicate_config_t *rc,
                       mc__put_batch_t *b);
void mc__put_batch_free(mc__put_batch_t *b);
void mc__store_batch_read(mc_store_t *s, const mc__key_replicas_t *kr, const mc_store_item_t *items,
                          size_t n, int64_t *results);
void mc__store_batch_write(mc_store_t *s, const mc_store_item_t *items, const size_t *idx, size_t m,
                           const mc__key_replicas_t *kr, int *results);
/* The replica list (a lease) of one valid key, in a heap copy that the caller mc__free's; *kr is
 * NULL (MC_ERR_INTERNAL_ERROR) when that cannot be allocated. */
int mc__store_get_replicas(mc_store_t *s, const char *key, mc__key_replicas_t **kr);
/* Replica lists (leases) for n keys in one RPC; NULL or bad keys get their code in kr[i].code.
 * Returns 0, or the code that failed the whole call (then in every kr[i].code too). */
int mc__store_batch_replicas(mc_store_t *s, const char *const *keys, size_t n,
                             mc__key_replicas_t *kr);
/* Replica lists for n keys: this client's cached ones where live (read_by[i] set: a read through
 * one must end by then, see mc__store_cached_read_ok), the rest from the master in one RPC
 * (read_by[i] = 0). Returns what mc__store_batch_replicas returns for the keys it asked about. */
int mc__store_batch_lookup(mc_store_t *s, const char *const *keys, size_t n, mc__key_replicas_t *kr,
                           uint64_t *read_by);
/* The arrays of a batch lookup of n keys (reads of whole objects, store_get.c, and of ranges,
 * store_ranges.c): the replica lists, the keys (the caller fills them) and their read_by. 0 or
 * MC_ERR_INTERNAL_ERROR; the caller frees all three either way. */
int mc__store_lookup_arrays(size_t n, mc__key_replicas_t **kr, const char ***keys,
                            uint64_t **read_by);
/* A read through a cached replica list counts only when it worked (rc >= 0) and finished before
 * read_by: 1. Otherwise 0, and key's entry goes; the caller reads again through the master. */
int mc__store_cached_read_ok(mc_store_t *s, const char *key, int64_t rc, uint64_t read_by);
/* Reads a whole object described by kr into iov, trying each complete replica (ours first);
 * returns the size or a negative code. */
int64_t mc__store_read_replicas(mc_store_t *s, const mc__key_replicas_t *kr,
                                const mc_store_iov_t *iov, size_t iovcnt);
/* The engine flags for moving caller memory (MC_SUBMIT_UNREGISTERED_LOCAL when direct_mem). */
unsigned mc__store_submit_flags(const mc_store_t *s);
/* 1 when [p, p+len) lies inside one buffer registered with the engine (the staging buffer, user
 * buffers, memory registered by other users of a shared engine); for a dummy client, inside one
 * range it registered. */
int mc__store_is_registered(mc_store_t *s, const void *p, size_t len);
/* 1 when p lies inside a registered buffer (as mc__store_is_registered) and [p, p+len) runs
 * past its end. */
int mc__store_registered_overrun(mc_store_t *s, const void *p, size_t len);
/* 1 when one of the n iovs starts in a registered buffer and runs past its end (a caller's
 * error that every call taking caller memory refuses with MC_ERR_INVALID_PARAMS). */
int mc__store_iovs_overrun(mc_store_t *s, const mc_store_iov_t *iov, size_t n);
/* After a failed transfer with segment name: the engine forgets what it cached about it
 * (mc_engine_close_segment), so the next transfer fetches its descriptor again. */
void mc__store_forget_segment(mc_store_t *s, const char *name);
/* The suspects' table of a new store (NULL: no memory), and its end (inherited: a fork() child's
 * destroy, which takes no lock and destroys none). */
struct mc__suspects *mc__suspects_create(void);
void mc__suspects_destroy(struct mc__suspects *t, int inherited);
/* 1 while a transfer with segment `name` failed within the last MC__SUSPECT_MS. */
int mc__store_is_suspect(mc_store_t *s, const char *name);
/* Records a failed transfer with segment name; logs it unless it was logged lately. */
void mc__store_suspect_failed(mc_store_t *s, const char *name, int rc);
/* A transfer with name worked: it is healthy again. */
void mc__store_suspect_clear(mc_store_t *s, const char *name);
/* After a heartbeat (its thread only): when the master's segment view changed while transfers
 * to some peer segments have gone MC__STALL_ASK_MS without news, asks the master about those
 * segments (reported unreachable, as a failed transfer's are) and aborts in the engine the ones
 * it no longer has, so the puts and gets waiting on them fail now and go elsewhere instead of
 * sitting out the transfer timeout. */
void mc__store_abort_dropped(mc_store_t *s);
/* Extra segments: unmounts those whose grace period passed (maintenance thread); unmounts and
 * releases all (teardown); the remount hook's part for them (see store_segments.c). */
void mc__store_extras_tick(mc_store_t *s);
void mc__store_extras_teardown(mc_store_t *s);
int mc__store_extras_remount(mc_store_t *s, uint64_t *base, uint64_t *epoch);
/* Runs the replica tasks the master assigned to this client (the maintenance thread). */
void mc__store_run_tasks(mc_store_t *s);
#endif
