/* TransferEngine: lifetime (initialize, close, context manager, get_engine) and the method table.
 */
#include <string.h>

#include "engine_py.h"

PyObject *mcpy_get_rpc_port(PyObject *self, PyObject *unused);
PyObject *mcpy_get_local_segment_name(PyObject *self, PyObject *unused);
PyObject *mcpy_get_transport_stats(PyObject *self, PyObject *unused);
PyObject *mcpy_allocate_managed_buffer(PyObject *self, PyObject *args, PyObject *kw);
PyObject *mcpy_free_managed_buffer(PyObject *self, PyObject *args, PyObject *kw);
PyObject *mcpy_register_memory(PyObject *self, PyObject *args, PyObject *kw);
PyObject *mcpy_unregister_memory(PyObject *self, PyObject *args, PyObject *kw);
PyObject *mcpy_batch_register_memory(PyObject *self, PyObject *args, PyObject *kw);
PyObject *mcpy_batch_unregister_memory(PyObject *self, PyObject *args, PyObject *kw);
PyObject *mcpy_write_bytes_to_buffer(PyObject *self, PyObject *args, PyObject *kw);
PyObject *mcpy_read_bytes_from_buffer(PyObject *self, PyObject *args, PyObject *kw);
PyObject *mcpy_get_first_buffer_address(PyObject *self, PyObject *args, PyObject *kw);

mc_engine_t *mcpy_engine_get(mcpy_engine_t *self) {
    return self->closed ? NULL : self->engine;
}

int mcpy_segment(mcpy_engine_t *self, const char *name, mc_segment_id_t *out) {
    int rc;
    MCPY_ENGINE_CALL(self, rc, mc_engine_open_segment(e, name, out));
    return rc;
}

static PyObject *engine_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    allocfunc alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
    return alloc(type, 0);
}

/* Stops the engine; calls other threads still run in it end first (mc_engine_close waits). */
static void engine_release(mcpy_engine_t *self) {
    mc_engine_t *e = self->engine;
    if (!e)
        return;
    /* close joins the engine's threads and closes its connections: never under the GIL. */
    Py_BEGIN_ALLOW_THREADS mc_engine_close(e);
    Py_END_ALLOW_THREADS
}

static void engine_dealloc(PyObject *obj) {
    mcpy_engine_t *self = (mcpy_engine_t *)obj;
    PyTypeObject *tp = Py_TYPE(obj);
    mc_engine_t *e = self->engine;
    /* No capsule and no method call can be alive here: each holds a reference to self. */
    self->engine = NULL;
    if (e) {
        Py_BEGIN_ALLOW_THREADS mc_engine_destroy(e);
        Py_END_ALLOW_THREADS
    }
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tp_free(obj);
    Py_DECREF(tp);
}

/* Creates and starts the C engine for self. Returns 0 or a negative code. */
static int engine_start(mcpy_engine_t *self, const char *host, const char *meta, const char *proto,
                        const char *dev) {
    mc_engine_t *e = NULL;
    int rc;
    /* One engine per object: a second initialize (or one racing the first) is refused. */
    if (self->engine || self->closed || self->starting)
        return MC_ERR_INVALID_ARGUMENT;
    rc = mc_engine_create(&e);
    if (rc < 0)
        return rc;
    self->starting = 1;
    mc_engine_options_t opts = {
        .local_server_name = host,
        .metadata_conn = meta,
        .protocol = proto,
        .device_name = dev,
    };
    MCPY_NOGIL(self, rc = mc_engine_init(e, &opts));
    if (rc < 0)
        goto out;
    self->engine = e;
    e = NULL;
    if (self->closed && self->handles == 0) /* close() came while we started */
        engine_release(self);
out:
    self->starting = 0;
    if (e) {
        Py_BEGIN_ALLOW_THREADS mc_engine_destroy(e);
        Py_END_ALLOW_THREADS
    }
    return rc;
}

static PyObject *engine_initialize(PyObject *obj, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"local_hostname", "metadata_server", "protocol", "device_name", NULL};
    const char *host = NULL, *meta = "P2PHANDSHAKE", *proto = "tcp", *dev = "";
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|sss:initialize", kwlist, &host, &meta, &proto,
                                     &dev))
        return NULL;
    return PyLong_FromLong(engine_start((mcpy_engine_t *)obj, host, meta, proto, dev));
}

/* The reference's initialize_ext: metadata_server without a scheme gets metadata_type's
 * ("http" + "host:port/metadata" -> "http://host:port/metadata"); P2PHANDSHAKE stays itself. */
static PyObject *engine_initialize_ext(PyObject *obj, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"local_hostname", "metadata_server", "protocol",
                             "device_name",    "metadata_type",   NULL};
    const char *host, *meta, *proto, *dev, *type;
    PyObject *conn = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sssss:initialize_ext", kwlist, &host, &meta, &proto,
                                     &dev, &type))
        return NULL;
    if (strcmp(meta, "P2PHANDSHAKE") != 0 && !strstr(meta, "://")) {
        conn = PyUnicode_FromFormat("%s://%s", type, meta);
        if (!conn)
            return NULL;
        meta = PyUnicode_AsUTF8AndSize(conn, NULL);
        if (!meta) {
            Py_DECREF(conn);
            return NULL;
        }
    }
    int rc = engine_start((mcpy_engine_t *)obj, host, meta, proto, dev);
    Py_XDECREF(conn);
    return PyLong_FromLong(rc);
}

static PyObject *engine_close(PyObject *obj, PyObject *unused) {
    mcpy_engine_t *self = (mcpy_engine_t *)obj;
    self->closed = 1;
    /* A handle from get_engine() shares the engine (as the reference's shared_ptr does): the
     * last capsule to go destroys it. */
    if (self->handles == 0)
        engine_release(self);
    Py_RETURN_NONE;
}

static PyObject *engine_enter(PyObject *self, PyObject *unused) {
    return Py_NewRef(self);
}

static PyObject *engine_exit(PyObject *self, PyObject *args) {
    PyObject *r = engine_close(self, NULL);
    if (!r)
        return NULL;
    Py_DECREF(r);
    Py_RETURN_FALSE;
}

static void handle_destructor(PyObject *capsule) {
    mcpy_engine_t *self = (mcpy_engine_t *)PyCapsule_GetContext(capsule);
    if (!self)
        return;
    self->handles--;
    if (self->closed && self->handles == 0)
        engine_release(self);
    Py_DECREF(self);
}

static PyObject *engine_get_engine(PyObject *obj, PyObject *unused) {
    mcpy_engine_t *self = (mcpy_engine_t *)obj;
    mc_engine_t *e = mcpy_engine_get(self);
    if (!e)
        Py_RETURN_NONE;
    PyObject *cap = PyCapsule_New(e, MCPY_ENGINE_CAPSULE, handle_destructor);
    if (!cap)
        return NULL;
    if (PyCapsule_SetContext(cap, obj) < 0) {
        Py_DECREF(cap);
        return NULL;
    }
    Py_INCREF(obj);
    self->handles++;
    return cap;
}

/* The address of the C mc_engine_t, as the reference's get_engine_ptr() gives its engine's;
 * 0 before initialize and after close. Unlike get_engine() it keeps nothing alive. */
static PyObject *engine_get_engine_ptr(PyObject *obj, PyObject *unused) {
    return PyLong_FromVoidPtr(mcpy_engine_get((mcpy_engine_t *)obj));
}

static PyObject *engine_send_probe(PyObject *obj, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"peer_server_name", NULL};
    mcpy_engine_t *self = (mcpy_engine_t *)obj;
    const char *peer;
    int rc = MC_ERR_INVALID_ARGUMENT;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s:send_probe", kwlist, &peer))
        return NULL;
    mc_engine_t *e = mcpy_engine_get(self);
    if (e)
        MCPY_NOGIL(self, rc = mc_engine_probe(e, peer));
    return PyLong_FromLong(rc);
}

static PyObject *engine_get_local_topology(PyObject *obj, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"device_name", NULL};
    const char *dev = NULL;
    char small[4096];
    char *buf = small;
    size_t need = 0;
    PyObject *ret = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|z:get_local_topology", kwlist, &dev))
        return NULL;
    int rc = mc_engine_local_topology(buf, sizeof(small), &need);
    if (rc == MC_ERR_INVALID_ARGUMENT && need > sizeof(small)) {
        buf = PyMem_Malloc(need);
        if (!buf)
            return PyErr_NoMemory();
        rc = mc_engine_local_topology(buf, need, &need);
    }
    if (rc == 0)
        ret = PyUnicode_FromString(buf);
    else
        PyErr_Format(PyExc_RuntimeError, "get_local_topology: %s", mc_strerror(rc));
    if (buf != small)
        PyMem_Free(buf);
    return ret;
}

/* EFA is not in this build: nothing to warm up, 0 as the reference's non-EFA builds answer. */
static PyObject *engine_warmup_efa_segment(PyObject *obj, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"segment_name", NULL};
    const char *name;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s:warmup_efa_segment", kwlist, &name))
        return NULL;
    return PyLong_FromLong(0);
}

static PyMethodDef engine_methods[] = {
    {"initialize", (PyCFunction)(void (*)(void))engine_initialize, METH_VARARGS | METH_KEYWORDS,
     "initialize(local_hostname, metadata_server='P2PHANDSHAKE', protocol='tcp', device_name='')"
     " -> 0 or a negative error code"},
    {"initialize_ext", (PyCFunction)(void (*)(void))engine_initialize_ext,
     METH_VARARGS | METH_KEYWORDS,
     "initialize_ext(local_hostname, metadata_server, protocol, device_name, metadata_type)"
     " -> 0 or a negative error code; a metadata_server without '://' gets metadata_type's"},
    {"send_probe", (PyCFunction)(void (*)(void))engine_send_probe, METH_VARARGS | METH_KEYWORDS,
     "send_probe(peer_server_name) -> 0 when the peer's engine answers; -101 (DNS), -102 (no"
     " answer), -200 (unknown to the metadata service), -1 (bad name or not initialized)"},
    {"get_engine_ptr", engine_get_engine_ptr, METH_NOARGS,
     "get_engine_ptr() -> int address of the C mc_engine_t (0 before initialize/after close)."
     " Keeps nothing alive: use get_engine() to hold the engine."},
    {"get_local_topology", (PyCFunction)(void (*)(void))engine_get_local_topology,
     METH_VARARGS | METH_KEYWORDS,
     "get_local_topology(device_name=None) -> JSON str {\"cpu:N\": [[preferred NICs], [other"
     " NICs]]}; the NIC lists are empty (no RDMA in this build)"},
    {"warmup_efa_segment", (PyCFunction)(void (*)(void))engine_warmup_efa_segment,
     METH_VARARGS | METH_KEYWORDS, "warmup_efa_segment(segment_name) -> 0 (no EFA in this build)"},
    {"close", engine_close, METH_NOARGS,
     "Stops the engine, also while other threads are inside calls on it (they finish or return a "
     "negative code); handles from get_engine() keep it running until they are released."},
    {"__enter__", engine_enter, METH_NOARGS, NULL},
    {"__exit__", engine_exit, METH_VARARGS, NULL},
    {"get_engine", engine_get_engine, METH_NOARGS,
     "A capsule named 'mooncake.engine_handle' holding the mc_engine_t* (None before initialize)."
     " It keeps the engine alive; hold it as long as the pointer is used."},
    {"get_rpc_port", mcpy_get_rpc_port, METH_NOARGS, "The RPC port peers reach this engine on."},
    {"get_local_segment_name", mcpy_get_local_segment_name, METH_NOARGS,
     "The segment name peers pass as target_hostname to reach this engine."},
    {"get_transport_stats", mcpy_get_transport_stats, METH_NOARGS,
     "{'tcp': (tasks, bytes), 'shm': ..., 'local': ...}: completed transfers per transport "
     "since initialize (empty before). Not in the reference."},
#define KWM(name, doc)                                                                             \
    { #name, (PyCFunction)(void (*)(void))mcpy_##name, METH_VARARGS | METH_KEYWORDS, doc }
    KWM(allocate_managed_buffer, "allocate_managed_buffer(length) -> address, 0 on failure"),
    KWM(free_managed_buffer, "free_managed_buffer(buffer_addr, length) -> 0 or negative"),
    KWM(register_memory, "register_memory(buffer_addr, capacity, location='*') -> 0 or negative"),
    KWM(unregister_memory, "unregister_memory(buffer_addr) -> 0 or negative"),
    KWM(batch_register_memory,
        "batch_register_memory(buffer_addresses, capacities, location='*') -> 0 or negative"),
    KWM(batch_unregister_memory, "batch_unregister_memory(buffer_addresses) -> 0 or negative"),
    KWM(write_bytes_to_buffer, "write_bytes_to_buffer(dest_address, src_bytes, length) -> 0"),
    KWM(read_bytes_from_buffer, "read_bytes_from_buffer(source_address, length) -> bytes"),
    KWM(get_first_buffer_address,
        "get_first_buffer_address(segment_name) -> address of the peer's first buffer, 0 if none"),
    KWM(transfer_sync_write, "transfer_sync_write(target_hostname, buffer, peer_buffer_address, "
                             "length) -> 0 or negative"),
    KWM(transfer_sync_read, "transfer_sync_read(target_hostname, buffer, peer_buffer_address, "
                            "length) -> 0 or negative"),
    KWM(transfer_sync, "transfer_sync(target_hostname, buffer, peer_buffer_address, length, opcode,"
                       " notify=None) -> 0 or negative"),
    KWM(batch_transfer_sync_write,
        "batch_transfer_sync_write(target_hostname, buffers, peer_buffer_addresses, lengths)"),
    KWM(batch_transfer_sync_read,
        "batch_transfer_sync_read(target_hostname, buffers, peer_buffer_addresses, lengths)"),
    KWM(batch_transfer_sync, "batch_transfer_sync(target_hostname, buffers, peer_buffer_addresses,"
                             " lengths, opcode, notify=None) -> 0 or negative"),
    KWM(batch_transfer_async_write, "batch_transfer_async_write(...) -> batch id, 0 on failure"),
    KWM(batch_transfer_async_read, "batch_transfer_async_read(...) -> batch id, 0 on failure"),
    KWM(batch_transfer_async, "batch_transfer_async(..., opcode) -> batch id, 0 on failure"),
    KWM(get_batch_transfer_status,
        "get_batch_transfer_status(batch_ids) -> 0 all completed, -1 any failed or timed out;"
        " waits for the batches and frees them"),
    KWM(transfer_submit_write,
        "transfer_submit_write(target_hostname, buffer, peer_buffer_address, length) -> batch"
        " id, 0 on failure (unknown peer, bad arguments, not initialized)"),
    KWM(transfer_check_status,
        "transfer_check_status(batch_id) -> 1 done, 0 pending, -1 failed, -2 timed out"),
    KWM(send_notify, "send_notify(target_hostname, notify) -> 0 or negative"),
#undef KWM
    {"get_notifies", (PyCFunction)(void (*)(void))mcpy_get_notifies,
     METH_METHOD | METH_FASTCALL | METH_KEYWORDS,
     "get_notifies() -> list of TransferNotify received since the last call"},
    {NULL, NULL, 0, NULL},
};

MCPY_TYPE_SPEC(mcpy_engine_spec, "mooncake._engine.TransferEngine", mcpy_engine_t,
               Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, {Py_tp_new, engine_new},
               {Py_tp_dealloc, engine_dealloc}, {Py_tp_methods, engine_methods},
               {Py_tp_doc,
                "TransferEngine(): moves bytes between registered memory of processes."});
