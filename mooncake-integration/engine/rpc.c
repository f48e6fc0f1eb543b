/* RpcInterface: the reference's message channel (mooncake/rpc_channel.h) for Python.
 *
 * Marshalling only: a client and an optional server of the C channel; received messages are
 * handed to the Python callbacks on the server's connection threads, with the GIL taken there.
 * The public class (mooncake.engine.RpcInterface) subclasses this one to add the tensor and
 * asyncio forms, which only reshape arguments. */
#include "engine_py.h"

#include "mooncake/rpc_channel.h"

/* Set on a server's connection thread while it runs a Python callback: stop_server() from
 * inside a callback would join the thread it runs on. */
static _Thread_local int in_callback;

typedef struct {
    PyObject_HEAD mc_rpc_client_t *client;
    mc_rpc_server_t *server;
    PyObject *data_cb;   /* callable(dict) or NULL */
    PyObject *tensor_cb; /* callable(source, data, shape, dtype) or NULL */
    int busy;            /* calls running without the GIL */
} mcpy_rpc_t;

/* Runs stmt without the GIL, with self marked busy: a setup() meanwhile would replace (and
 * destroy) the client or server the call uses. Unlike the engine, the channel's client and
 * server do not count their calls in flight themselves, and the binding swaps them on setup. */
#define RPC_NOGIL(self, stmt)                                                                      \
    do {                                                                                           \
        (self)->busy++;                                                                            \
        Py_BEGIN_ALLOW_THREADS stmt;                                                               \
        Py_END_ALLOW_THREADS(self)->busy--;                                                        \
    } while (0)

static PyObject *data_arg(const mc_rpc_message_t *m) {
    PyObject *d = PyDict_New();
    PyObject *src = PyUnicode_FromString(m->source);
    PyObject *data = PyBytes_FromStringAndSize(m->data, (Py_ssize_t)m->len);
    if (!d || !src || !data || PyDict_SetItemString(d, "source", src) < 0 ||
        PyDict_SetItemString(d, "data", data) < 0)
        Py_CLEAR(d);
    Py_XDECREF(src);
    Py_XDECREF(data);
    return d;
}

static PyObject *tensor_args(const mc_rpc_message_t *m) {
    PyObject *shape = PyList_New((Py_ssize_t)m->ndim);
    for (size_t i = 0; shape && i < m->ndim; i++) {
        PyObject *v = PyLong_FromUnsignedLongLong(m->shape[i]);
        if (!v) {
            Py_CLEAR(shape);
            break;
        }
        PyList_SetItem(shape, (Py_ssize_t)i, v);
    }
    if (!shape)
        return NULL;
    PyObject *args = Py_BuildValue("(sy#Ns)", m->source, (const char *)m->data, (Py_ssize_t)m->len,
                                   shape, m->dtype);
    return args;
}

/* Runs on a connection thread of the C server, without the GIL. */
static void on_message(void *ctx, const mc_rpc_message_t *m) {
    mcpy_rpc_t *self = ctx;
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *cb = m->kind == MC_RPC_TENSOR ? self->tensor_cb : self->data_cb;
    PyObject *args = NULL, *r = NULL;
    if (!cb)
        goto out;
    Py_INCREF(cb);
    args = m->kind == MC_RPC_TENSOR ? tensor_args(m) : Py_BuildValue("(N)", data_arg(m));
    in_callback = 1;
    if (args)
        r = PyObject_CallObject(cb, args);
    in_callback = 0;
    /* A failing callback is reported and the sender still gets its answer, as in the
     * reference; the server keeps serving. */
    if (!r)
        PyErr_WriteUnraisable(cb);
    Py_XDECREF(r);
    Py_XDECREF(args);
    Py_DECREF(cb);
out:
    PyGILState_Release(g);
}

static void rpc_release(mcpy_rpc_t *self) {
    mc_rpc_server_t *s = self->server;
    mc_rpc_client_t *c = self->client;
    self->server = NULL;
    self->client = NULL;
    /* stop joins the connection threads, which may be waiting for the GIL */
    Py_BEGIN_ALLOW_THREADS mc_rpc_server_destroy(s);
    mc_rpc_client_destroy(c);
    Py_END_ALLOW_THREADS
}

static int rpc_traverse(PyObject *obj, visitproc visit, void *arg) {
    mcpy_rpc_t *self = (mcpy_rpc_t *)obj;
    Py_VISIT(self->data_cb);
    Py_VISIT(self->tensor_cb);
    Py_VISIT(Py_TYPE(obj));
    return 0;
}

static int rpc_clear(PyObject *obj) {
    mcpy_rpc_t *self = (mcpy_rpc_t *)obj;
    Py_CLEAR(self->data_cb);
    Py_CLEAR(self->tensor_cb);
    return 0;
}

static void rpc_dealloc(PyObject *obj) {
    mcpy_rpc_t *self = (mcpy_rpc_t *)obj;
    PyTypeObject *tp = Py_TYPE(obj);
    PyObject_GC_UnTrack(obj);
    rpc_release(self); /* before the callbacks go: a last message may still use them */
    rpc_clear(obj);
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tp_free(obj);
    Py_DECREF(tp);
}

static int to_ms(unsigned long long seconds, int *out) {
    if (seconds > INT32_MAX / 1000) {
        PyErr_SetString(PyExc_ValueError, "timeout_seconds is too large");
        return -1;
    }
    *out = (int)(seconds * 1000);
    return 0;
}

/* Replaces the client (and the server when listen is non-empty). False when a server is
 * running or the C side refused the options (it logs why). */
static PyObject *setup(mcpy_rpc_t *self, const char *listen, unsigned long long timeout_s,
                       unsigned long long pool) {
    mc_rpc_client_t *c = NULL;
    mc_rpc_server_t *s = NULL;
    int ms, rc;
    if (to_ms(timeout_s, &ms) < 0)
        return NULL;
    /* a callback replacing its own server would join the thread it runs on */
    if (in_callback || self->busy || (self->server && mc_rpc_server_port(self->server) > 0))
        Py_RETURN_FALSE;
    mc_rpc_client_options_t co = {.pool_size = (size_t)pool, .timeout_ms = ms};
    mc_rpc_server_options_t so = {
        .listen_address = listen, .timeout_ms = ms, .handler = on_message, .ctx = self};
    rc = mc_rpc_client_create(&co, &c);
    if (rc == 0 && listen[0])
        rc = mc_rpc_server_create(&so, &s);
    if (rc) {
        mc_rpc_client_destroy(c);
        Py_RETURN_FALSE;
    }
    rpc_release(self);
    self->client = c;
    self->server = s;
    Py_RETURN_TRUE;
}

static PyObject *rpc_initialize(PyObject *obj, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"listen_address", "thread_count", "timeout_seconds", "pool_size",
                             NULL};
    const char *listen = "";
    unsigned long long threads = 0, timeout = 30, pool = 100;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|sO&O&O&:initialize", kwlist, &listen,
                                     mcpy_conv_index_u64, &threads, mcpy_conv_index_u64, &timeout,
                                     mcpy_conv_index_u64, &pool))
        return NULL;
    return setup((mcpy_rpc_t *)obj, listen, timeout, pool);
}

static PyObject *rpc_initialize_client(PyObject *obj, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"pool_size", "timeout_seconds", NULL};
    unsigned long long timeout = 30, pool = 100;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O&O&:initialize_client", kwlist,
                                     mcpy_conv_index_u64, &pool, mcpy_conv_index_u64, &timeout))
        return NULL;
    return setup((mcpy_rpc_t *)obj, "", timeout, pool);
}

static PyObject *rpc_initialize_server(PyObject *obj, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"listen_address", "thread_count", "timeout_seconds", NULL};
    const char *listen;
    unsigned long long threads = 8, timeout = 30;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|O&O&:initialize_server", kwlist, &listen,
                                     mcpy_conv_index_u64, &threads, mcpy_conv_index_u64, &timeout))
        return NULL;
    return setup((mcpy_rpc_t *)obj, listen, timeout, 100);
}

/* Starts the server; wait: then serves on until stop_server() (from another thread), as the
 * reference's start_server() does. True when it started. */
static int start_server(mc_rpc_server_t *s, int wait) {
    int rc = mc_rpc_server_start(s);
    if (rc == 0 && wait)
        mc_rpc_server_wait(s);
    return rc;
}

static PyObject *start(PyObject *obj, int wait) {
    mcpy_rpc_t *self = (mcpy_rpc_t *)obj;
    int rc = MC_ERR_INVALID_ARGUMENT;
    if (self->server)
        RPC_NOGIL(self, rc = start_server(self->server, wait));
    return PyBool_FromLong(rc == 0);
}

static PyObject *rpc_start_server_async(PyObject *obj, PyObject *unused) {
    return start(obj, 0);
}

static PyObject *rpc_start_server(PyObject *obj, PyObject *unused) {
    return start(obj, 1);
}

static PyObject *rpc_stop_server(PyObject *obj, PyObject *unused) {
    mcpy_rpc_t *self = (mcpy_rpc_t *)obj;
    if (in_callback) {
        PyErr_SetString(PyExc_RuntimeError,
                        "stop_server() cannot be called from a receive callback");
        return NULL;
    }
    if (self->server)
        RPC_NOGIL(self, mc_rpc_server_stop(self->server));
    Py_RETURN_NONE;
}

static PyObject *rpc_get_server_port(PyObject *obj, PyObject *unused) {
    mcpy_rpc_t *self = (mcpy_rpc_t *)obj;
    return PyLong_FromLong(self->server ? mc_rpc_server_port(self->server) : -1);
}

static PyObject *rpc_send_data(PyObject *obj, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"target_address", "data", NULL};
    mcpy_rpc_t *self = (mcpy_rpc_t *)obj;
    const char *target;
    PyObject *data;
    Py_buffer view = {0};
    int rc = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sO:send_data", kwlist, &target, &data))
        return NULL;
    if (PyUnicode_Check(data) || PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "data must be bytes-like, not %R", (PyObject *)Py_TYPE(data));
        return NULL;
    }
    if (self->client)
        RPC_NOGIL(self, rc = mc_rpc_client_send(self->client, target, view.buf, (size_t)view.len));
    PyBuffer_Release(&view);
    return PyLong_FromLong(rc);
}

/* _send_tensor(target_address, data_ptr, nbytes, dtype, shape): the facade's send_tensor has
 * taken these from the tensor; data_ptr must be host memory of nbytes. */
static PyObject *rpc_send_tensor_raw(PyObject *obj, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"target_address", "data_ptr", "nbytes", "dtype", "shape", NULL};
    mcpy_rpc_t *self = (mcpy_rpc_t *)obj;
    const char *target, *dtype;
    uint64_t ptr;
    size_t len;
    PyObject *shape_seq;
    uint64_t *shape = NULL;
    int rc = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sO&O&sO:_send_tensor", kwlist, &target,
                                     mcpy_conv_index_u64, &ptr, mcpy_conv_index_size, &len, &dtype,
                                     &shape_seq))
        return NULL;
    Py_ssize_t ndim = mcpy_index_u64_array(shape_seq, "shape", &shape);
    if (ndim < 0)
        return NULL;
    if (ptr == 0 && len > 0) {
        PyMem_Free(shape);
        PyErr_SetString(PyExc_ValueError, "the tensor's data pointer is NULL");
        return NULL;
    }
    if (self->client)
        RPC_NOGIL(self,
                  rc = mc_rpc_client_send_tensor(self->client, target, dtype, shape, (size_t)ndim,
                                                 (const void *)(uintptr_t)ptr, len));
    PyMem_Free(shape);
    return PyLong_FromLong(rc);
}

static int set_cb(PyObject **slot, PyObject *cb) {
    if (cb != Py_None && !PyCallable_Check(cb)) {
        PyErr_Format(PyExc_TypeError, "callback must be callable, not %R", (PyObject *)Py_TYPE(cb));
        return -1;
    }
    PyObject *old = *slot;
    *slot = cb == Py_None ? NULL : Py_NewRef(cb);
    Py_XDECREF(old);
    return 0;
}

static PyObject *rpc_set_data_cb(PyObject *obj, PyObject *cb) {
    if (set_cb(&((mcpy_rpc_t *)obj)->data_cb, cb) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *rpc_set_tensor_cb(PyObject *obj, PyObject *cb) {
    if (set_cb(&((mcpy_rpc_t *)obj)->tensor_cb, cb) < 0)
        return NULL;
    Py_RETURN_NONE;
}

#define KW(f) (PyCFunction)(void (*)(void))(f), METH_VARARGS | METH_KEYWORDS
static PyMethodDef rpc_methods[] = {
    {"initialize", KW(rpc_initialize),
     "initialize(listen_address='', thread_count=0, timeout_seconds=30, pool_size=100) -> bool."
     " A client always; a server too when listen_address ('host:port') is given (not started)."
     " thread_count is accepted for compatibility (one thread serves each connection)."},
    {"initialize_client", KW(rpc_initialize_client),
     "initialize_client(pool_size=100, timeout_seconds=30) -> bool"},
    {"initialize_server", KW(rpc_initialize_server),
     "initialize_server(listen_address, thread_count=8, timeout_seconds=30) -> bool"},
    {"start_server", rpc_start_server, METH_NOARGS,
     "start_server() -> bool: listens and serves until stop_server() is called from another"
     " thread (then True); False at once when it cannot listen"},
    {"start_server_async", rpc_start_server_async, METH_NOARGS,
     "start_server_async() -> bool: listens and serves in the background"},
    {"stop_server", rpc_stop_server, METH_NOARGS,
     "stop_server(): stops listening and closes connections; no callback runs after it returns"},
    {"get_server_port", rpc_get_server_port, METH_NOARGS,
     "get_server_port() -> the port listened on (useful with port 0), -1 when not serving."
     " Not in the reference."},
    {"send_data", KW(rpc_send_data),
     "send_data(target_address, data) -> 0 once the server's callback returned, else a negative"
     " code (-1 not initialized or bad address, -101 DNS, -102 no server or lost, -104 refused)"},
    {"_send_tensor", KW(rpc_send_tensor_raw), NULL},
    {"set_data_receive_callback", rpc_set_data_cb, METH_O,
     "set_data_receive_callback(callback): callback({'source': 'ip:port', 'data': bytes}) runs"
     " on a server thread for each message; None removes it"},
    {"_set_tensor_callback", rpc_set_tensor_cb, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};
#undef KW

MCPY_TYPE_SPEC(mcpy_rpc_spec, "mooncake._engine.RpcInterface", mcpy_rpc_t,
               Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
               {Py_tp_dealloc, rpc_dealloc}, {Py_tp_traverse, rpc_traverse},
               {Py_tp_clear, rpc_clear}, {Py_tp_methods, rpc_methods},
               {Py_tp_doc, "The native part of mooncake.engine.RpcInterface; use that class."});
