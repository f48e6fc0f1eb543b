/* Private declarations shared by the files of the mooncake._store extension.
 *
 * Marshalling only: every behaviour lives in the C client (mooncake/store.h) so C users get it
 * too. Calls that talk to the master or move bytes run without the GIL. */
#ifndef MC_STORE_PY_H
#define MC_STORE_PY_H

/* One binary serves CPython 3.11 and every newer version (abi3); a 3.10 interpreter (no
 * PyObject_GetBuffer in its limited API) gets a version-specific build of the same code. */
#include <patchlevel.h>
#if !defined(Py_LIMITED_API) && PY_VERSION_HEX >= 0x030B0000
#define Py_LIMITED_API 0x030B0000
#endif
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

#include "mooncake/store.h"

#define MCPY_ENGINE_CAPSULE "mooncake.engine_handle"

/* Runs stmt (a C client call that may block on the master or the network) without the GIL. */
#define NOGIL(stmt)                                                                                \
    do {                                                                                           \
        Py_BEGIN_ALLOW_THREADS stmt;                                                               \
        Py_END_ALLOW_THREADS                                                                       \
    } while (0)

struct mc_shm_pool;
typedef struct {
    PyTypeObject *store_type;
    PyTypeObject *buffer_type;
    PyTypeObject *host_alloc_type; /* MooncakeHostMemAllocator (dummy.c) */
    struct mc_shm_pool *shm_pool;  /* the process's shared memory for dummy clients */
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

/* Keys: str only (TypeError otherwise, ValueError on an embedded NUL). The pointer lives as long
 * as the str object. */
int mcpy_key(PyObject *obj, const char **out);
/* A list/tuple of keys. *hold keeps them alive (a tuple; DECREF it), *keys is PyMem_Malloc'ed. */
Py_ssize_t mcpy_keys(PyObject *seq, const char *what, PyObject **hold, const char ***keys);
/* Non-negative integers (addresses, sizes); "O&" converters. */
int mcpy_conv_u64(PyObject *obj, void *out);
int mcpy_conv_size(PyObject *obj, void *out);
/* A sequence of integers as a PyMem_Malloc'ed array; returns the count or -1. */
Py_ssize_t mcpy_u64_array(PyObject *seq, const char *what, uint64_t **out);
/* A Python list of ints from C ints / int64s. */
PyObject *mcpy_int_list(const int *v, Py_ssize_t n);
PyObject *mcpy_i64_list(const int64_t *v, Py_ssize_t n);

/* The flat shape of the ranged calls: keys, counts (key i owns the next counts[i] entries) and
 * three u64 lists as long as the counts' sum. */
typedef struct {
    PyObject *hold; /* keeps the keys alive */
    const char **keys;
    uint64_t *counts, *a, *b, *c;
    Py_ssize_t n, total;
} mcpy_flat_ranges_t;
/* Parses objs[0..4] (names[] for the messages, fn for the ValueError on lengths that disagree):
 * 0, or -1 with an exception set and nothing to free. */
int mcpy_flat_ranges(PyObject *const objs[5], const char *const names[5], const char *fn,
                     mcpy_flat_ranges_t *out);
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
