/* Extra-segment methods of MooncakeDistributedStore (mc_store_*mount* in mooncake/store.h), with
 * the reference's result shapes: mount calls answer {"ret", "segment_ids"[, "allocated_size"]},
 * unmount calls the first error or 0. protocol and location are accepted as the reference takes
 * them; the store's engine (its protocol) serves the memory. */
#include "store_py.h"

static PyObject *mount_result(int rc, const char *id, PyObject *allocated) {
    PyObject *d = PyDict_New(), *ids = PyList_New(0), *v = PyLong_FromLong(rc);
    int ok = d && ids && v && PyDict_SetItemString(d, "ret", v) == 0;
    if (ok && rc == 0) {
        PyObject *s = PyUnicode_FromString(id);
        ok = s && PyList_Append(ids, s) == 0;
        Py_XDECREF(s);
    }
    ok = ok && PyDict_SetItemString(d, "segment_ids", ids) == 0;
    if (ok && allocated)
        ok = PyDict_SetItemString(d, "allocated_size", allocated) == 0;
    Py_XDECREF(v);
    Py_XDECREF(ids);
    Py_XDECREF(allocated);
    if (!ok)
        Py_CLEAR(d);
    return d;
}

/* mount_segment(path, size, offset=0, protocol="tcp", location="") */
PyObject *mcpy_mount_segment(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwl[] = {"path", "size", "offset", "protocol", "location", NULL};
    const char *path = NULL, *protocol = "tcp", *location = "";
    uint64_t size = 0, offset = 0;
    char id[37] = "";
    int rc;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sO&|O&ss:mount_segment", kwl, &path, mcpy_conv_u64,
                                     &size, mcpy_conv_u64, &offset, &protocol, &location))
        return NULL;
    NOGIL(rc = mc_store_mount_segment(MCPY_STORE(self), path, offset, size, id));
    return mount_result(rc, id, NULL);
}

/* allocate_and_mount_segment(size, protocol="tcp", location="") */
PyObject *mcpy_allocate_and_mount_segment(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwl[] = {"size", "protocol", "location", NULL};
    const char *protocol = "tcp", *location = "";
    uint64_t size = 0, allocated = 0;
    char id[37] = "";
    int rc;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|ss:allocate_and_mount_segment", kwl,
                                     mcpy_conv_u64, &size, &protocol, &location))
        return NULL;
    NOGIL(rc = mc_store_allocate_and_mount_segment(MCPY_STORE(self), size, id, &allocated));
    return mount_result(rc, id, PyLong_FromUnsignedLongLong(rc == 0 ? allocated : 0));
}

typedef int (*unmount_fn)(mc_store_t *, const char *const *, size_t, uint64_t);

static PyObject *unmount(PyObject *self, PyObject *args, PyObject *kw, const char *fmt,
                         unmount_fn fn) {
    static char *kwl[] = {"segment_ids", "grace_period_seconds", NULL};
    PyObject *ids_o, *hold = NULL;
    const char **ids = NULL;
    uint64_t grace = 0;
    Py_ssize_t n;
    int rc;
    if (!PyArg_ParseTupleAndKeywords(args, kw, fmt, kwl, &ids_o, mcpy_conv_u64, &grace))
        return NULL;
    n = mcpy_keys(ids_o, "segment_ids", &hold, &ids);
    if (n < 0)
        return NULL;
    NOGIL(rc = fn(MCPY_STORE(self), ids, (size_t)n, grace));
    PyMem_Free(ids);
    Py_XDECREF(hold);
    return PyLong_FromLong(rc);
}

/* unmount_segment(segment_ids, grace_period_seconds=0) */
PyObject *mcpy_unmount_segment(PyObject *self, PyObject *args, PyObject *kw) {
    return unmount(self, args, kw, "O|O&:unmount_segment", mc_store_unmount_segment);
}

/* unmount_local_disk_segment(grace_period_seconds=0) */
PyObject *mcpy_unmount_local_disk_segment(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwl[] = {"grace_period_seconds", NULL};
    uint64_t grace = 0;
    int rc;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O&:unmount_local_disk_segment", kwl, mcpy_conv_u64,
                                     &grace))
        return NULL;
    NOGIL(rc = mc_store_unmount_local_disk_segment(MCPY_STORE(self), grace));
    return PyLong_FromLong(rc);
}

/* unmount_and_free_segment(segment_ids, grace_period_seconds=0) */
PyObject *mcpy_unmount_and_free_segment(PyObject *self, PyObject *args, PyObject *kw) {
    return unmount(self, args, kw, "O|O&:unmount_and_free_segment",
                   mc_store_unmount_and_free_segment);
}
