/* Python argument converters: integers for addresses, lengths and opcodes, sequences of them. */
#include "engine_py.h"

/* A negative or too large integer is a wrong value, not an arithmetic overflow, for a caller
 * passing an address or a length: report it as ValueError. */
static int as_u64(PyObject *obj, uint64_t *out) {
    int ok = 0;
    PyObject *idx = PyNumber_Index(obj);
    if (!idx)
        goto out;
    unsigned long long v = PyLong_AsUnsignedLongLong(idx);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError,
                         "%R is not a valid address or length (must be 0..2**64-1)", obj);
        }
        goto out;
    }
    *out = (uint64_t)v;
    ok = 1;
out:
    Py_XDECREF(idx);
    return ok;
}

int mcpy_conv_u64(PyObject *obj, void *out) {
    return as_u64(obj, (uint64_t *)out);
}

int mcpy_conv_size(PyObject *obj, void *out) {
    uint64_t v;
    if (!as_u64(obj, &v))
        return 0;
    if (v > SIZE_MAX) {
        PyErr_Format(PyExc_ValueError, "length %R does not fit in size_t", obj);
        return 0;
    }
    *(size_t *)out = (size_t)v;
    return 1;
}

int mcpy_conv_opcode(PyObject *obj, void *out) {
    uint64_t v;
    if (!as_u64(obj, &v))
        return 0;
    if (v != MC_OPCODE_READ && v != MC_OPCODE_WRITE) {
        PyErr_Format(PyExc_ValueError,
                     "opcode must be TransferOpcode.Read (0) or .Write (1), not %R", obj);
        return 0;
    }
    *(int *)out = (int)v;
    return 1;
}

Py_ssize_t mcpy_u64_array(PyObject *seq, const char *what, uint64_t **out) {
    Py_ssize_t ret = -1;
    uint64_t *arr = NULL;
    *out = NULL;
    /* A str is a sequence too, but of characters: never what a caller means here. */
    if (!PySequence_Check(seq) || PyUnicode_Check(seq) || PyBytes_Check(seq)) {
        PyErr_Format(PyExc_TypeError, "%s must be a list of integers, not %R", what,
                     (PyObject *)Py_TYPE(seq));
        goto out;
    }
    Py_ssize_t n = PySequence_Size(seq);
    if (n < 0)
        goto out;
    arr = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(*arr));
    if (!arr) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_GetItem(seq, i);
        if (!item)
            goto out;
        int ok = as_u64(item, &arr[i]);
        Py_DECREF(item);
        if (!ok) {
            if (PyErr_ExceptionMatches(PyExc_TypeError)) {
                PyErr_Clear();
                PyErr_Format(PyExc_TypeError, "%s[%zd] must be an integer", what, i);
            }
            goto out;
        }
    }
    *out = arr;
    arr = NULL;
    ret = n;
out:
    PyMem_Free(arr);
    return ret;
}
