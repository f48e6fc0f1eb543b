/* Private declarations shared by the files of the mooncake._engine extension.
 *
 * The extension only marshals Python arguments into calls of the public C API
 * (mooncake/transfer_engine.h); anything a C user would also need belongs there, not here. */
#ifndef MC_ENGINE_PY_H
#define MC_ENGINE_PY_H

/* One binary serves CPython 3.11 and every newer version (abi3). The build passes
 * Py_LIMITED_API itself for abi3 builds; a 3.10 interpreter (no PyObject_GetBuffer in its limited
 * API) gets a version-specific build of the same code. */
#include <patchlevel.h>
#if !defined(Py_LIMITED_API) && PY_VERSION_HEX >= 0x030B0000
#define Py_LIMITED_API 0x030B0000
#endif
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

#include "mooncake/transfer_engine.h"

/* The name get_engine() gives its capsule; the store's setup(engine=...) checks it. */
#define MCPY_ENGINE_CAPSULE "mooncake.engine_handle"

typedef struct {
    PyTypeObject *engine_type;
    PyTypeObject *notify_type;
    PyTypeObject *rpc_type;
} mcpy_state_t;

/* The C engine owns its calls in flight: close() stops it with mc_engine_close, which waits for
 * the calls other threads run without the GIL (later ones fail), and the handle itself goes only
 * in dealloc, when no method of this object can be running. So nothing here counts calls, and
 * segments are the engine's to look up (mc_engine_open_segment is open-or-get). */
typedef struct {
    PyObject_HEAD mc_engine_t *engine; /* NULL until initialize() succeeds; freed in dealloc */
    int starting;                      /* an initialize() runs (one engine per object) */
    int handles; /* live get_engine() capsules; they keep the C engine running */
    int closed;
} mcpy_engine_t;

typedef struct {
    PyObject_HEAD PyObject *name; /* str */
    PyObject *msg;                /* str, or bytes when the payload is not UTF-8 */
} mcpy_notify_t;

extern PyType_Spec mcpy_engine_spec;
extern PyType_Spec mcpy_notify_spec;
extern PyType_Spec mcpy_rpc_spec;

/* "O&" converters. Addresses and lengths are non-negative integers (TypeError for anything
 * that is not an integer, ValueError when out of range). */
int mcpy_conv_u64(PyObject *obj, void *out);
int mcpy_conv_size(PyObject *obj, void *out);
int mcpy_conv_opcode(PyObject *obj, void *out);

/* Converts a sequence of integers into a PyMem_Malloc'ed array (free with PyMem_Free).
 * what names the argument in error messages. Returns the count, or -1 with an exception set. */
Py_ssize_t mcpy_u64_array(PyObject *seq, const char *what, uint64_t **out);

/* Encodes a TransferNotify-like object's name and msg (str or bytes-like) into new bytes objects.
 */
int mcpy_notify_parts(PyObject *notify, PyObject **name_bytes, PyObject **msg_bytes);
/* Builds the Python list of TransferNotify objects from the C ones. */
PyObject *mcpy_notify_list(PyTypeObject *notify_type, const mc_notify_t *arr, size_t count);

/* The engine behind self, or NULL when not initialized or closed. */
mc_engine_t *mcpy_engine_get(mcpy_engine_t *self);
/* The engine's id for the segment called name (opened the first time). 0 or a negative MC_ERR_*. */
int mcpy_segment(mcpy_engine_t *self, const char *name, mc_segment_id_t *out);

/* Transfer methods (transfer.c). */
PyObject *mcpy_transfer_sync_write(PyObject *self, PyObject *args, PyObject *kw);
PyObject *mcpy_transfer_sync_read(PyObject *self, PyObject *args, PyObject *kw);
PyObject *mcpy_transfer_sync(PyObject *self, PyObject *args, PyObject *kw);
PyObject *mcpy_batch_transfer_sync_write(PyObject *self, PyObject *args, PyObject *kw);
PyObject *mcpy_batch_transfer_sync_read(PyObject *self, PyObject *args, PyObject *kw);
PyObject *mcpy_batch_transfer_sync(PyObject *self, PyObject *args, PyObject *kw);
PyObject *mcpy_batch_transfer_async_write(PyObject *self, PyObject *args, PyObject *kw);
PyObject *mcpy_batch_transfer_async_read(PyObject *self, PyObject *args, PyObject *kw);
PyObject *mcpy_batch_transfer_async(PyObject *self, PyObject *args, PyObject *kw);
PyObject *mcpy_get_batch_transfer_status(PyObject *self, PyObject *args, PyObject *kw);
PyObject *mcpy_transfer_submit_write(PyObject *self, PyObject *args, PyObject *kw);
PyObject *mcpy_transfer_check_status(PyObject *self, PyObject *args, PyObject *kw);

/* Notify methods (notify.c). */
PyObject *mcpy_send_notify(PyObject *self, PyObject *args, PyObject *kw);
PyObject *mcpy_get_notifies(PyObject *self, PyTypeObject *defining_class, PyObject *const *args,
                            Py_ssize_t nargs, PyObject *kwnames);

/* Runs stmt without the GIL. A close() from another thread meanwhile is safe: the engine waits
 * for the call (or fails it with MC_ERR_CONTEXT) and its memory lives until dealloc. */
#define MCPY_NOGIL(self, stmt)                                                                     \
    do {                                                                                           \
        (void)(self);                                                                              \
        Py_BEGIN_ALLOW_THREADS stmt;                                                               \
        Py_END_ALLOW_THREADS                                                                       \
    } while (0)

#endif
