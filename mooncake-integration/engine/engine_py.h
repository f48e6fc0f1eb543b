/* Private declarations shared by the files of the mooncake._engine extension.
 *
 * The extension only marshals Python arguments into calls of the public C API
 * (mooncake/transfer_engine.h); anything a C user would also need belongs there, not here. */
#ifndef MC_ENGINE_PY_H
#define MC_ENGINE_PY_H

#include "mcpy_common.h"

#include "mooncake/transfer_engine.h"

/* The module state: its heap types, by name and as the array mcpy_visit_types walks. */
#define MCPY_ENGINE_NTYPES 3
typedef struct {
    union {
        struct {
            PyTypeObject *engine_type;
            PyTypeObject *notify_type;
            PyTypeObject *rpc_type;
        };
        PyTypeObject *types[MCPY_ENGINE_NTYPES];
    };
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

/* "O&" converter of a TransferOpcode (addresses and lengths: mcpy_common.h). */
int mcpy_conv_opcode(PyObject *obj, void *out);

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
        MCPY_NOGIL_RUN(stmt);                                                                      \
    } while (0)

/* rc = expr (an engine call naming the engine e) run without the GIL, or MC_ERR_INVALID_ARGUMENT
 * when self has no engine (before initialize(), or after close()). */
#define MCPY_ENGINE_CALL(self, rc, expr)                                                           \
    do {                                                                                           \
        mc_engine_t *e = mcpy_engine_get(self);                                                    \
        (rc) = MC_ERR_INVALID_ARGUMENT;                                                            \
        if (e)                                                                                     \
            MCPY_NOGIL(self, (rc) = (expr));                                                       \
    } while (0)

#endif
