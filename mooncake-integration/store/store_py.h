/* Private declarations shared by the files of the mooncake._store extension.
 *
 * Marshalling only: every behaviour lives in the C client (mooncake/store.h) so C users get it
 * too. Calls that talk to the master or move bytes run without the GIL. */
#ifndef MC_STORE_PY_H
#define MC_STORE_PY_H

#include "mcpy_common.h"

#include "mooncake/store.h"

/* Runs stmt (a C client call that may block on the master or the network) without the GIL. */
#define NOGIL(stmt) MCPY_NOGIL_RUN(stmt)

struct mc_shm_pool;
/* The module state: its heap types first (by name, and as the array mcpy_visit_types walks). */
#define MCPY_STORE_NTYPES 3
typedef struct {
    union {
        struct {
            PyTypeObject *store_type;
            PyTypeObject *buffer_type;
            PyTypeObject *host_alloc_type; /* MooncakeHostMemAllocator (dummy.c) */
        };
        PyTypeObject *types[MCPY_STORE_NTYPES];
    };
    struct mc_shm_pool *shm_pool; /* the process's shared memory for dummy clients */
} mcpy_store_state_t;

typedef struct {
    PyObject_HEAD mc_store_t *store;
    PyObject *engine; /* the shared engine's capsule: keeps that engine alive while we use it */
    /* Objects registered with register_buffer(obj): address -> a memoryview of the object, which
     * holds its buffer export, so the object can be neither freed nor resized while the store may
     * move bytes in or out of it. Released by unregister_buffer and close. */
    PyObject *held;
} mcpy_store_t;

/* A read result in client-owned memory, exported through the buffer protocol without a copy. */
typedef struct {
    PyObject_HEAD mc_store_buffer_t *buf;
    PyObject *owner; /* the store object: its staging memory must outlive this buffer */
} mcpy_buffer_t;

extern PyType_Spec mcpy_store_spec;
extern PyType_Spec mcpy_buffer_spec;
extern PyType_Spec mcpy_host_alloc_spec; /* dummy.c */

/* Keys, addresses, sizes and lists of them: mcpy_common.h. */

/* The shape of most batch calls: a list of keys in, a code per key out. */
typedef struct {
    PyObject *hold; /* keeps the keys alive (the tuple they were read from) */
    const char **keys;
    int *codes; /* zeroed, one per key */
    Py_ssize_t n;
} mcpy_keyed_t;
/* Parses keys_o (the argument "keys") and allocates the codes: 0, or -1 with an exception set and
 * nothing to free. */
int mcpy_keyed(PyObject *keys_o, mcpy_keyed_t *k);
void mcpy_keyed_free(mcpy_keyed_t *k);

/* The flat shape of the ranged calls: keys, counts (key i owns the next counts[i] entries) and
 * three u64 lists as long as the counts' sum; and the zeroed arrays the C call takes: recs (one
 * record of rec_size bytes per key), ranges (one of range_size per range) and bad (an int per key
 * or range, whichever is more). */
typedef struct {
    PyObject *hold; /* keeps the keys alive */
    const char **keys;
    uint64_t *counts, *a, *b, *c;
    Py_ssize_t n, total;
    void *recs, *ranges;
    int *bad;
} mcpy_flat_ranges_t;
/* Parses the five arguments of the ranged method fn (kwl: their keyword names, NULL-ended; the
 * messages name them too) and allocates the arrays: 0, or -1 with an exception set and nothing to
 * free. */
int mcpy_flat_ranges(PyObject *args, PyObject *kw, const char *fn, char *kwl[6], size_t rec_size,
                     size_t range_size, mcpy_flat_ranges_t *out);
/* Points each record of recs (a C type with key, ranges and n) at its key and its ranges. */
#define MCPY_FLAT_RANGES_LINK(f, recs, ranges)                                                     \
    for (Py_ssize_t i_ = 0, at_ = 0; i_ < (f).n; at_ += (Py_ssize_t)(f).counts[i_], i_++) {        \
        (recs)[i_].key = (f).keys[i_];                                                             \
        (recs)[i_].ranges = &(ranges)[at_];                                                        \
        (recs)[i_].n = (size_t)(f).counts[i_];                                                     \
    }
void mcpy_flat_ranges_free(mcpy_flat_ranges_t *r);

/* A ReplicateConfig (or None) read into the C struct; strings borrowed from held objects. */
typedef struct {
    mc_replicate_config_t rc;
    const char *pref[8];
    PyObject *hold;
} mcpy_rconfig_t;
int mcpy_rconfig(PyObject *cfg, mcpy_rconfig_t *out);
void mcpy_rconfig_release(mcpy_rconfig_t *c);

/* Raw addresses (Python ints) checked by mc_store_check_memory before a call may touch them:
 * 0, or the code (each iov of n; writable for reads into them). */
int mcpy_check_iovs(mc_store_t *s, const mc_store_iov_t *iov, size_t n, int writable);
/* Releases every object register_buffer(obj) holds (after the C store unregistered them). */
void mcpy_release_held(PyObject *self);

/* The C store behind self; NULL with RuntimeError never happens: calls before setup return the
 * client's own error code (MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS). */
#define MCPY_STORE(self) (((mcpy_store_t *)(self))->store)

/* Store methods implemented in store_ops.c. */
#define MCPY_DECL(name) PyObject *mcpy_##name(PyObject *self, PyObject *args, PyObject *kw)
MCPY_DECL(put);
MCPY_DECL(upsert);
MCPY_DECL(upsert_parts);
MCPY_DECL(upsert_batch);
MCPY_DECL(upsert_from);
MCPY_DECL(batch_upsert_from);
MCPY_DECL(batch_replica_clear);
MCPY_DECL(get_ranges_raw);
/* Put sessions, in store_session.c. */
MCPY_DECL(batch_put_session_start);
MCPY_DECL(put_ranges_raw);
MCPY_DECL(batch_put_session_end);
MCPY_DECL(batch_put_session_revoke);
/* Replica tasks, in store_task.c. */
MCPY_DECL(create_task_raw);
MCPY_DECL(query_task_raw);
/* Extra segments, in store_segment.c. */
MCPY_DECL(mount_segment);
MCPY_DECL(allocate_and_mount_segment);
MCPY_DECL(unmount_segment);
MCPY_DECL(unmount_and_free_segment);
MCPY_DECL(unmount_local_disk_segment);
MCPY_DECL(put_parts);
MCPY_DECL(put_batch);
MCPY_DECL(put_from);
MCPY_DECL(batch_put_from);
MCPY_DECL(batch_put_from_multi_buffers);
MCPY_DECL(batch_upsert_from_multi_buffers);
MCPY_DECL(get);
MCPY_DECL(get_batch);
MCPY_DECL(get_into);
MCPY_DECL(batch_get_into);
MCPY_DECL(batch_get_into_multi_buffers);
MCPY_DECL(is_exist);
MCPY_DECL(batch_is_exist);
MCPY_DECL(batch_replica_desc_raw);
MCPY_DECL(get_size);
MCPY_DECL(remove);
MCPY_DECL(batch_remove);
MCPY_DECL(remove_all);
MCPY_DECL(remove_by_regex);
MCPY_DECL(register_buffer);
MCPY_DECL(check_memory);
MCPY_DECL(unregister_buffer);
PyObject *mcpy_get_buffer(PyObject *self, PyTypeObject *cls, PyObject *const *args,
                          Py_ssize_t nargs, PyObject *kwnames);
PyObject *mcpy_batch_get_buffer(PyObject *self, PyTypeObject *cls, PyObject *const *args,
                                Py_ssize_t nargs, PyObject *kwnames);
/* Dummy clients (dummy.c): the methods, and the module's allocator type and pool. */
PyObject *mcpy_setup_dummy(PyObject *self, PyTypeObject *cls, PyObject *const *args,
                           Py_ssize_t nargs, PyObject *kwnames);
PyObject *mcpy_alloc_from_mem_pool(PyObject *self, PyTypeObject *cls, PyObject *const *args,
                                   Py_ssize_t nargs, PyObject *kwnames);
#define MCPY_DUMMY_METHODS                                                                         \
    {"setup_dummy", (PyCFunction)(void (*)(void))mcpy_setup_dummy,                                 \
     METH_METHOD | METH_FASTCALL | METH_KEYWORDS,                                                  \
     "setup_dummy(mem_pool_size, local_buffer_size, server_address) -> 0 or a negative code: "     \
     "attach to the mooncake_client storage node at server_address ('host:port') of this host, "   \
     "which then runs this store's calls"},                                                        \
        {"alloc_from_mem_pool", (PyCFunction)(void (*)(void))mcpy_alloc_from_mem_pool,             \
         METH_METHOD | METH_FASTCALL | METH_KEYWORDS,                                              \
         "alloc_from_mem_pool(size) -> address of a shared-memory block a storage node moves "     \
         "without a copy (0 when none can be had)"},
int mcpy_dummy_exec(PyObject *mod, mcpy_store_state_t *st);
void mcpy_dummy_free(mcpy_store_state_t *st);

/* A buffer object owning b (which must be non-NULL). */
PyObject *mcpy_buffer_new(PyTypeObject *type, PyObject *owner, mc_store_buffer_t *b);
#endif
