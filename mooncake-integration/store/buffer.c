/* Buffer: a read result in client-owned memory, exported through the buffer protocol so
 * memoryview / numpy / torch.frombuffer see the bytes without a copy. */
#include "store_py.h"

PyObject *mcpy_buffer_new(PyTypeObject *type, PyObject *owner, mc_store_buffer_t *b) {
    mcpy_buffer_t *self = (mcpy_buffer_t *)PyType_GenericAlloc(type, 0);
    if (!self) {
        mc_store_buffer_free(b);
        return NULL;
    }
    self->buf = b;
    Py_INCREF(owner);
    self->owner = owner;
    return (PyObject *)self;
}

static void buffer_dealloc(PyObject *obj) {
    mcpy_buffer_t *self = (mcpy_buffer_t *)obj;
    PyTypeObject *tp = Py_TYPE(obj);
    PyObject_GC_UnTrack(obj);
    mc_store_buffer_free(self->buf);
    self->buf = NULL;
    Py_CLEAR(self->owner);
    ((freefunc)PyType_GetSlot(tp, Py_tp_free))(obj);
    Py_DECREF(tp);
}

static int buffer_traverse(PyObject *obj, visitproc visit, void *arg) {
    Py_VISIT(Py_TYPE(obj));
    Py_VISIT(((mcpy_buffer_t *)obj)->owner);
    return 0;
}

static int buffer_getbuffer(PyObject *obj, Py_buffer *view, int flags) {
    mcpy_buffer_t *self = (mcpy_buffer_t *)obj;
    return PyBuffer_FillInfo(view, obj, mc_store_buffer_data(self->buf),
                             (Py_ssize_t)mc_store_buffer_size(self->buf), 0, flags);
}

static Py_ssize_t buffer_len(PyObject *obj) {
    return (Py_ssize_t)mc_store_buffer_size(((mcpy_buffer_t *)obj)->buf);
}

static PyObject *buffer_ptr(PyObject *obj, PyObject *unused) {
    return PyLong_FromVoidPtr(mc_store_buffer_data(((mcpy_buffer_t *)obj)->buf));
}

static PyObject *buffer_size(PyObject *obj, PyObject *unused) {
    return PyLong_FromSize_t(mc_store_buffer_size(((mcpy_buffer_t *)obj)->buf));
}

static PyMethodDef buffer_methods[] = {
    {"ptr", buffer_ptr, METH_NOARGS, "ptr() -> address of the first byte"},
    {"size", buffer_size, METH_NOARGS, "size() -> length in bytes"},
    {NULL, NULL, 0, NULL},
};

/* Made only by get_buffer / batch_get_buffer. */
MCPY_TYPE_SPEC(mcpy_buffer_spec, "mooncake._store.Buffer", mcpy_buffer_t,
               Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_DISALLOW_INSTANTIATION,
               {Py_tp_dealloc, buffer_dealloc}, {Py_tp_traverse, buffer_traverse},
               {Py_tp_methods, buffer_methods}, {Py_bf_getbuffer, buffer_getbuffer},
               {Py_mp_length, buffer_len},
               {Py_tp_doc, "An object read from the store, in client memory (buffer protocol)."});
