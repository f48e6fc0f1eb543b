/* The converters and module helpers both extensions use (mcpy_common.h). Wrong types raise
 * TypeError, out-of-range numbers ValueError; everything else is the C library's call. */
#include <string.h>

#include "mcpy_common.h"

/* A negative or too large integer is a wrong value, not an arithmetic overflow, for a caller
 * passing an address or a length: report it as ValueError. index: accept any object with
 * __index__ (the engine's spelling); otherwise an int only, and not a bool (the store's). */
static int as_u64(PyObject *obj, int index, uint64_t *out) {
    int ok = 0;
    PyObject *num;
    if (!index && (!PyLong_Check(obj) || PyBool_Check(obj))) {
        PyErr_Format(PyExc_TypeError, "expected an int (address or size), got %R",
                     (PyObject *)Py_TYPE(obj));
        return 0;
    }
    num = index ? PyNumber_Index(obj) : Py_NewRef(obj);
    if (!num)
        return 0;
    unsigned long long v = PyLong_AsUnsignedLongLong(num);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "%R is not a valid address or size (must be 0..2**64-1)",
                         obj);
        }
        goto out;
    }
    *out = (uint64_t)v;
    ok = 1;
out:
    Py_DECREF(num);
    return ok;
}

static int as_size(PyObject *obj, int index, size_t *out) {
    uint64_t v;
    if (!as_u64(obj, index, &v))
        return 0;
    if (v > SIZE_MAX) {
        PyErr_Format(PyExc_ValueError, "size %R does not fit in size_t", obj);
        return 0;
    }
    *out = (size_t)v;
    return 1;
}

int mcpy_conv_u64(PyObject *obj, void *out) {
    return as_u64(obj, 0, out);
}

int mcpy_conv_size(PyObject *obj, void *out) {
    return as_size(obj, 0, out);
}

int mcpy_conv_index_u64(PyObject *obj, void *out) {
    return as_u64(obj, 1, out);
}

int mcpy_conv_index_size(PyObject *obj, void *out) {
    return as_size(obj, 1, out);
}

/* The walk shared by the key and integer lists: a sequence (not str or bytes, which are sequences
 * of characters: never what a caller means) of n items, each converted by conv into a PyMem array
 * of elements of size bytes. On success *hold is the tuple copy the converted items may borrow
 * from (a copy: the caller's list may change while the GIL is released); on failure both outputs
 * are NULL. */
static Py_ssize_t seq_array(PyObject *seq, const char *what, const char *kind, size_t size,
                            int (*conv)(PyObject *, void *), PyObject **hold, void **out) {
    PyObject *t = NULL;
    char *arr = NULL;
    Py_ssize_t n = -1;
    *hold = NULL;
    *out = NULL;
    if (PyUnicode_Check(seq) || PyBytes_Check(seq) || !PySequence_Check(seq)) {
        PyErr_Format(PyExc_TypeError, "%s must be a list of %s, not %R", what, kind,
                     (PyObject *)Py_TYPE(seq));
        return -1;
    }
    t = PySequence_Tuple(seq);
    if (!t)
        goto out;
    n = PyTuple_Size(t);
    arr = PyMem_Malloc((size_t)(n ? n : 1) * size);
    if (!arr) {
        PyErr_NoMemory();
        n = -1;
        goto out;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!conv(PyTuple_GetItem(t, i), arr + (size_t)i * size)) {
            n = -1;
            goto out;
        }
    }
    *hold = t;
    *out = arr;
    t = NULL;
    arr = NULL;
out:
    Py_XDECREF(t);
    PyMem_Free(arr);
    return n;
}

static Py_ssize_t u64_array(PyObject *seq, const char *what, int (*conv)(PyObject *, void *),
                            uint64_t **out) {
    PyObject *hold;
    void *arr;
    Py_ssize_t n = seq_array(seq, what, "int", sizeof(**out), conv, &hold, &arr);
    /* The integers are copies: nothing borrows from the tuple. */
    Py_XDECREF(hold);
    *out = arr;
    return n;
}

Py_ssize_t mcpy_u64_array(PyObject *seq, const char *what, uint64_t **out) {
    return u64_array(seq, what, mcpy_conv_u64, out);
}

Py_ssize_t mcpy_index_u64_array(PyObject *seq, const char *what, uint64_t **out) {
    return u64_array(seq, what, mcpy_conv_index_u64, out);
}

int mcpy_key(PyObject *obj, const char **out) {
    Py_ssize_t n = 0;
    const char *s;
    if (!PyUnicode_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "key must be str, not %R", (PyObject *)Py_TYPE(obj));
        return 0;
    }
    s = PyUnicode_AsUTF8AndSize(obj, &n);
    if (!s)
        return 0;
    if ((size_t)n != strlen(s)) {
        PyErr_SetString(PyExc_ValueError, "key must not contain NUL characters");
        return 0;
    }
    *out = s;
    return 1;
}

static int conv_key(PyObject *obj, void *out) {
    return mcpy_key(obj, (const char **)out);
}

Py_ssize_t mcpy_keys(PyObject *seq, const char *what, PyObject **hold, const char ***keys) {
    void *arr;
    Py_ssize_t n = seq_array(seq, what, "str", sizeof(**keys), conv_key, hold, &arr);
    *keys = arr;
    return n;
}

int mcpy_list_set(PyObject **list, Py_ssize_t i, PyObject *item) {
    if (!item) {
        Py_CLEAR(*list);
        return 0;
    }
    PyList_SetItem(*list, i, item);
    return 1;
}

/* v holds n ints (wide == 0) or n int64s. */
static PyObject *int_list(const void *v, Py_ssize_t n, int wide) {
    PyObject *l = PyList_New(n);
    for (Py_ssize_t i = 0; l && i < n; i++)
        mcpy_list_set(&l, i,
                      PyLong_FromLongLong(wide ? ((const int64_t *)v)[i] : ((const int *)v)[i]));
    return l;
}

PyObject *mcpy_int_list(const int *v, Py_ssize_t n) {
    return int_list(v, n, 0);
}

PyObject *mcpy_i64_list(const int64_t *v, Py_ssize_t n) {
    return int_list(v, n, 1);
}

PyObject *mcpy_code_str(PyObject *code, const char *(*describe)(int)) {
    long c = PyLong_AsLong(code);
    if (c == -1 && PyErr_Occurred())
        return NULL;
    return PyUnicode_FromString(describe((int)c));
}

int mcpy_add_type(PyObject *mod, PyType_Spec *spec, PyTypeObject **slot) {
    PyObject *t = PyType_FromModuleAndSpec(mod, spec, NULL);
    if (!t)
        return -1;
    *slot = (PyTypeObject *)t;
    const char *dot = spec->name;
    for (const char *p = spec->name; *p; p++)
        if (*p == '.')
            dot = p + 1;
    return PyModule_AddObjectRef(mod, dot, t);
}

int mcpy_visit_types(PyTypeObject **types, size_t n, visitproc visit, void *arg) {
    for (size_t i = 0; i < n; i++)
        Py_VISIT(types[i]);
    return 0;
}

void mcpy_clear_types(PyTypeObject **types, size_t n) {
    for (size_t i = 0; i < n; i++)
        Py_CLEAR(types[i]);
}

/* Which domains of the error table each side's table holds. */
#define MCPY_IN_TE_TE 1
#define MCPY_IN_TE_STORE 0
#define MCPY_IN_TE_BOTH 1
#define MCPY_IN_STORE_TE 0
#define MCPY_IN_STORE_STORE 1
#define MCPY_IN_STORE_BOTH 1

int mcpy_add_error_table(PyObject *mod, const char *table_name, int domain_te) {
    PyObject *list = PyList_New(0), *t = NULL;
    int ok = list != NULL;
#define MCPY_ADD_CODE(name, value, domain, msg)                                                    \
    ok = ok && PyModule_AddIntConstant(mod, "ERR_" #name, value) == 0;                             \
    if (ok && (domain_te ? MCPY_IN_TE_##domain : MCPY_IN_STORE_##domain)) {                        \
        PyObject *pair = Py_BuildValue("(si)", #name, value);                                      \
        ok = pair && PyList_Append(list, pair) == 0;                                               \
        Py_XDECREF(pair);                                                                          \
    }
    MC_ERRNO_MAP(MCPY_ADD_CODE)
#undef MCPY_ADD_CODE
    ok = ok && (t = PyList_AsTuple(list)) != NULL && PyModule_AddObjectRef(mod, table_name, t) == 0;
    Py_XDECREF(t);
    Py_XDECREF(list);
    return ok ? 0 : -1;
}
