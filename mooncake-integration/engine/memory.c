/* TransferEngine methods about local memory: managed buffers, registration, raw byte access,
 * and what this engine and its peers publish about themselves. */
#include <string.h>

#include "engine_py.h"

/* From about a MiB on, a copy takes long enough to be worth letting other threads run. */
#define MCPY_NOGIL_COPY (1u << 20)

PyObject *mcpy_get_rpc_port(PyObject *obj, PyObject *unused) {
    mc_engine_t *e = mcpy_engine_get((mcpy_engine_t *)obj);
    return PyLong_FromLong(e ? mc_engine_rpc_port(e) : MC_ERR_INVALID_ARGUMENT);
}

/* {"tcp": (tasks, bytes), "shm": ..., "fabric": ..., "local": ...}: completed tasks per transport,
 * so callers (and tests) can tell which transport carried their transfers. */
PyObject *mcpy_get_transport_stats(PyObject *obj, PyObject *unused) {
    static const char *const names[] = {"tcp", "shm", "fabric", "local"};
    mc_engine_t *e = mcpy_engine_get((mcpy_engine_t *)obj);
    PyObject *d = PyDict_New();
    for (size_t i = 0; d && e && i < sizeof(names) / sizeof(names[0]); i++) {
        uint64_t tasks = 0, bytes = 0;
        PyObject *v;
        if (mc_engine_get_stats(e, names[i], &tasks, &bytes))
            continue;
        v = Py_BuildValue("(KK)", (unsigned long long)tasks, (unsigned long long)bytes);
        if (!v || PyDict_SetItemString(d, names[i], v) < 0) {
            Py_XDECREF(v);
            Py_CLEAR(d);
            break;
        }
        Py_DECREF(v);
    }
    return d;
}

PyObject *mcpy_get_local_segment_name(PyObject *obj, PyObject *unused) {
    mc_engine_t *e = mcpy_engine_get((mcpy_engine_t *)obj);
    const char *name = e ? mc_engine_local_name(e) : NULL;
    if (!name)
        Py_RETURN_NONE;
    return PyUnicode_FromString(name);
}

PyObject *mcpy_allocate_managed_buffer(PyObject *obj, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"length", NULL};
    mcpy_engine_t *self = (mcpy_engine_t *)obj;
    size_t len;
    void *addr = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&:allocate_managed_buffer", kwlist,
                                     mcpy_conv_index_size, &len))
        return NULL;
    int rc;
    MCPY_ENGINE_CALL(self, rc, mc_engine_alloc_managed(e, len, &addr));
    return PyLong_FromUnsignedLongLong(rc < 0 ? 0 : (uintptr_t)addr);
}

PyObject *mcpy_free_managed_buffer(PyObject *obj, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"buffer_addr", "length", NULL};
    mcpy_engine_t *self = (mcpy_engine_t *)obj;
    uint64_t addr;
    size_t len = 0; /* the engine knows each buffer's length; kept for the reference signature */
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|O&:free_managed_buffer", kwlist,
                                     mcpy_conv_index_u64, &addr, mcpy_conv_index_size, &len))
        return NULL;
    int rc;
    MCPY_ENGINE_CALL(self, rc, mc_engine_free_managed(e, (void *)(uintptr_t)addr));
    return PyLong_FromLong(rc);
}

PyObject *mcpy_register_memory(PyObject *obj, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"buffer_addr", "capacity", "location", NULL};
    mcpy_engine_t *self = (mcpy_engine_t *)obj;
    uint64_t addr;
    size_t len;
    const char *loc = "*";
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&O&|s:register_memory", kwlist,
                                     mcpy_conv_index_u64, &addr, mcpy_conv_index_size, &len, &loc))
        return NULL;
    int rc;
    MCPY_ENGINE_CALL(self, rc, mc_engine_register_memory(e, (void *)(uintptr_t)addr, len, loc));
    return PyLong_FromLong(rc);
}

PyObject *mcpy_unregister_memory(PyObject *obj, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"buffer_addr", NULL};
    mcpy_engine_t *self = (mcpy_engine_t *)obj;
    uint64_t addr;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&:unregister_memory", kwlist, mcpy_conv_index_u64,
                                     &addr))
        return NULL;
    int rc;
    MCPY_ENGINE_CALL(self, rc, mc_engine_unregister_memory(e, (void *)(uintptr_t)addr));
    return PyLong_FromLong(rc);
}

/* The C API takes pointer and size_t arrays; Python hands over u64s. */
static int register_all(mc_engine_t *e, const uint64_t *addrs, const uint64_t *lens, size_t n,
                        const char *loc, void **ptrs, size_t *sizes) {
    /* an empty batch registers nothing and is not an error, as in the reference */
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++) {
        ptrs[i] = (void *)(uintptr_t)addrs[i];
        sizes[i] = (size_t)lens[i];
    }
    /* all or none, in one table edit */
    return mc_engine_register_memory_batch(e, ptrs, sizes, n, loc);
}

PyObject *mcpy_batch_register_memory(PyObject *obj, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"buffer_addresses", "capacities", "location", NULL};
    mcpy_engine_t *self = (mcpy_engine_t *)obj;
    PyObject *addr_seq, *len_seq, *ret = NULL;
    const char *loc = "*";
    uint64_t *addrs = NULL, *lens = NULL;
    void **ptrs = NULL;
    size_t *sizes = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|s:batch_register_memory", kwlist, &addr_seq,
                                     &len_seq, &loc))
        return NULL;
    Py_ssize_t n = mcpy_index_u64_array(addr_seq, "buffer_addresses", &addrs);
    if (n < 0)
        goto out;
    Py_ssize_t m = mcpy_index_u64_array(len_seq, "capacities", &lens);
    if (m < 0)
        goto out;
    if (m != n) {
        PyErr_Format(PyExc_ValueError, "buffer_addresses has %zd entries but capacities has %zd", n,
                     m);
        goto out;
    }
    ptrs = PyMem_Calloc((size_t)n + 1, sizeof(*ptrs));
    sizes = PyMem_Calloc((size_t)n + 1, sizeof(*sizes));
    if (!ptrs || !sizes) {
        PyErr_NoMemory();
        goto out;
    }
    int rc;
    MCPY_ENGINE_CALL(self, rc, register_all(e, addrs, lens, (size_t)n, loc, ptrs, sizes));
    ret = PyLong_FromLong(rc);
out:
    PyMem_Free(addrs);
    PyMem_Free(lens);
    PyMem_Free(ptrs);
    PyMem_Free(sizes);
    return ret;
}

/* All or none: when one address is not registered nothing is removed. */
static int unregister_all(mc_engine_t *e, const uint64_t *addrs, size_t n, void **ptrs) {
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        ptrs[i] = (void *)(uintptr_t)addrs[i];
    return mc_engine_unregister_memory_batch(e, ptrs, n);
}

PyObject *mcpy_batch_unregister_memory(PyObject *obj, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"buffer_addresses", NULL};
    mcpy_engine_t *self = (mcpy_engine_t *)obj;
    PyObject *addr_seq;
    uint64_t *addrs = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:batch_unregister_memory", kwlist, &addr_seq))
        return NULL;
    Py_ssize_t n = mcpy_index_u64_array(addr_seq, "buffer_addresses", &addrs);
    if (n < 0)
        return NULL;
    void **ptrs = PyMem_Calloc((size_t)n + 1, sizeof(*ptrs));
    if (!ptrs) {
        PyMem_Free(addrs);
        return PyErr_NoMemory();
    }
    int rc;
    MCPY_ENGINE_CALL(self, rc, unregister_all(e, addrs, (size_t)n, ptrs));
    PyMem_Free(addrs);
    PyMem_Free(ptrs);
    return PyLong_FromLong(rc);
}

/* A raw address the copies below would touch: 1 when the engine says this process may (inside
 * a registered buffer, or mapped memory allowing the access), else 0 with ValueError. */
static int check_raw(mcpy_engine_t *self, uint64_t addr, size_t len, int writable,
                     const char *what) {
    /* no engine (not initialized, or closed): the probe alone answers */
    int rc =
        mc_engine_check_memory(mcpy_engine_get(self), (const void *)(uintptr_t)addr, len, writable);
    if (rc == 0)
        return 1;
    /* (PyErr_Format has no %llx: the address goes as %p) */
    PyErr_Format(PyExc_ValueError, "%s %p (+%zu) is not memory this process may %s: %s", what,
                 (void *)(uintptr_t)addr, len, writable ? "write" : "read", mc_err_name(rc));
    return 0;
}

PyObject *mcpy_write_bytes_to_buffer(PyObject *obj, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"dest_address", "src_bytes", "length", NULL};
    mcpy_engine_t *self = (mcpy_engine_t *)obj;
    uint64_t dest;
    PyObject *src, *ret = NULL;
    size_t len = SIZE_MAX;
    Py_buffer view = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&O|O&:write_bytes_to_buffer", kwlist,
                                     mcpy_conv_index_u64, &dest, &src, mcpy_conv_index_size, &len))
        return NULL;
    if (PyObject_GetBuffer(src, &view, PyBUF_SIMPLE) < 0)
        goto out;
    if (len == SIZE_MAX)
        len = (size_t)view.len;
    if (len > (size_t)view.len) {
        PyErr_Format(PyExc_ValueError, "length %zu is larger than src_bytes (%zd bytes)", len,
                     view.len);
        goto out;
    }
    if (dest == 0 && len > 0) {
        PyErr_SetString(PyExc_ValueError, "dest_address is NULL");
        goto out;
    }
    if (!check_raw(self, dest, len, 1, "dest_address"))
        goto out;
    if (len >= MCPY_NOGIL_COPY)
        MCPY_NOGIL(self, memcpy((void *)(uintptr_t)dest, view.buf, len));
    else if (len > 0)
        memcpy((void *)(uintptr_t)dest, view.buf, len);
    ret = PyLong_FromLong(0);
out:
    if (view.obj)
        PyBuffer_Release(&view);
    return ret;
}

PyObject *mcpy_read_bytes_from_buffer(PyObject *obj, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"source_address", "length", NULL};
    mcpy_engine_t *self = (mcpy_engine_t *)obj;
    uint64_t src;
    size_t len;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&O&:read_bytes_from_buffer", kwlist,
                                     mcpy_conv_index_u64, &src, mcpy_conv_index_size, &len))
        return NULL;
    if (src == 0 && len > 0) {
        PyErr_SetString(PyExc_ValueError, "source_address is NULL");
        return NULL;
    }
    if (len > (size_t)PY_SSIZE_T_MAX) {
        PyErr_SetString(PyExc_ValueError, "length is too large");
        return NULL;
    }
    if (!check_raw(self, src, len, 0, "source_address"))
        return NULL;
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)len);
    if (!out)
        return NULL;
    char *dst = PyBytes_AsString(out); /* not shared yet: filling it in place is safe */
    if (len >= MCPY_NOGIL_COPY)
        MCPY_NOGIL(self, memcpy(dst, (const void *)(uintptr_t)src, len));
    else if (len > 0)
        memcpy(dst, (const void *)(uintptr_t)src, len);
    return out;
}

PyObject *mcpy_get_first_buffer_address(PyObject *obj, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"segment_name", NULL};
    mcpy_engine_t *self = (mcpy_engine_t *)obj;
    const char *name;
    mc_segment_id_t seg;
    uint64_t addr = 0, len = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s:get_first_buffer_address", kwlist, &name))
        return NULL;
    int rc;
    /* the call that discovers a peer: in the engine's start-up window it waits for a peer that
     * has not published itself or its buffer yet (transfer_engine.h) */
    MCPY_ENGINE_CALL(self, rc, mc_engine_open_segment_wait(e, name, &seg));
    mc_engine_t *e = mcpy_engine_get(self);
    if (rc == 0 && e)
        MCPY_NOGIL(self, rc = mc_engine_segment_first_buffer(e, seg, &addr, &len));
    return PyLong_FromUnsignedLongLong(rc < 0 ? 0 : addr);
}
