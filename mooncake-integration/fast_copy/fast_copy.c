/* mooncake._fast_copy: concat_arrays_into(arrays, dest_ptr, dest_size, start=0, count=-1,
 * nthreads=1) copies arrays[start:start+count] back to back into raw memory at dest_ptr and
 * returns the bytes copied, as the reference's extension of that name does (the structured
 * object store gathers a ragged field's rows with it straight into a registered buffer).
 *
 * Sources are read through the buffer protocol, so any C-contiguous exporter works (numpy
 * arrays, bytes, memoryview) and the module needs neither numpy's C API nor the full API: one
 * abi3 build serves every CPython >= 3.11. The copy runs with the GIL released; with nthreads > 1
 * the total byte range is cut into equal slices (not whole arrays), so one large array is also
 * copied in parallel. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

/* More threads than this cannot speed up a memcpy on any host we serve; it bounds the stack. */
#define FC_MAX_THREADS 64

typedef struct {
    Py_buffer *views; /* the sources, in order */
    size_t *starts;   /* byte offset of each source in the destination */
    Py_ssize_t n;     /* sources */
    char *dst;        /* destination base */
    size_t lo, hi;    /* this slice's destination byte range */
} fc_slice_t;

/* Copy the part of every source that falls inside [lo, hi). */
static void *fc_copy_slice(void *arg) {
    fc_slice_t *s = arg;
    for (Py_ssize_t i = 0; i < s->n && s->lo < s->hi; i++) {
        size_t a = s->starts[i], len = (size_t)s->views[i].len, b = a + len;
        if (b <= s->lo || a >= s->hi)
            continue;
        size_t from = a > s->lo ? a : s->lo;
        size_t to = b < s->hi ? b : s->hi;
        memcpy(s->dst + from, (const char *)s->views[i].buf + (from - a), to - from);
    }
    return NULL;
}

static void fc_copy(Py_buffer *views, size_t *starts, Py_ssize_t n, char *dst, size_t total,
                    int nthreads) {
    pthread_t tid[FC_MAX_THREADS];
    fc_slice_t slices[FC_MAX_THREADS] = {{0}};
    int started[FC_MAX_THREADS] = {0};
    for (int t = 0; t < nthreads; t++) {
        slices[t] =
            (fc_slice_t){views,
                         starts,
                         n,
                         dst,
                         total / (size_t)nthreads * (size_t)t,
                         t + 1 == nthreads ? total : total / (size_t)nthreads * (size_t)(t + 1)};
    }
    /* A thread that cannot be created is not an error: its slice is copied here instead. */
    for (int t = 1; t < nthreads; t++)
        started[t] = pthread_create(&tid[t], NULL, fc_copy_slice, &slices[t]) == 0;
    fc_copy_slice(&slices[0]);
    for (int t = 1; t < nthreads; t++) {
        if (started[t])
            pthread_join(tid[t], NULL);
        else
            fc_copy_slice(&slices[t]);
    }
}

static PyObject *concat_arrays_into(PyObject *mod, PyObject *args) {
    PyObject *seq;
    unsigned long long dest_ptr, dest_size;
    Py_ssize_t start = 0, count = -1;
    int nthreads = 1;
    (void)mod;
    if (!PyArg_ParseTuple(args, "OKK|nni:concat_arrays_into", &seq, &dest_ptr, &dest_size, &start,
                          &count, &nthreads))
        return NULL;
    if (!PyList_Check(seq) && !PyTuple_Check(seq)) {
        PyErr_SetString(PyExc_TypeError, "concat_arrays_into: arrays must be a list or tuple");
        return NULL;
    }
    Py_ssize_t len = PySequence_Size(seq);
    if (len < 0)
        return NULL;
    /* The reference's clamping: a range past either end is cut to the list. */
    if (start < 0)
        start = 0;
    if (start > len)
        start = len;
    if (count < 0 || count > len - start)
        count = len - start;
    if (count == 0)
        return PyLong_FromLong(0);
    if (nthreads < 1)
        nthreads = 1;
    if (nthreads > FC_MAX_THREADS)
        nthreads = FC_MAX_THREADS;

    PyObject *result = NULL;
    Py_ssize_t held = 0;
    Py_buffer *views = PyMem_Calloc((size_t)count, sizeof(*views));
    size_t *starts = PyMem_Calloc((size_t)count, sizeof(*starts));
    if (views == NULL || starts == NULL) {
        PyErr_NoMemory();
        goto out;
    }
    size_t total = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = PySequence_GetItem(seq, start + i);
        if (item == NULL)
            goto out;
        int rc = PyObject_GetBuffer(item, &views[i], PyBUF_STRIDES);
        Py_DECREF(item);
        if (rc < 0) {
            if (PyErr_ExceptionMatches(PyExc_BufferError)) {
                /* numpy refuses a strided view this way: still the reference's complaint. */
                PyErr_Clear();
                PyErr_Format(PyExc_ValueError, "arrays[%zd] is not C-contiguous", start + i);
            } else if (PyErr_ExceptionMatches(PyExc_TypeError)) {
                PyErr_Clear();
                PyErr_Format(PyExc_TypeError, "arrays[%zd] is not an array (no buffer protocol)",
                             start + i);
            }
            goto out;
        }
        held++;
        if (!PyBuffer_IsContiguous(&views[i], 'C')) {
            PyErr_Format(PyExc_ValueError, "arrays[%zd] is not C-contiguous", start + i);
            goto out;
        }
        if ((size_t)views[i].len > SIZE_MAX - total) {
            PyErr_SetString(PyExc_OverflowError, "array byte sizes overflow");
            goto out;
        }
        starts[i] = total;
        total += (size_t)views[i].len;
    }
    if (total > dest_size) {
        PyErr_Format(PyExc_ValueError, "destination buffer too small: need %zu bytes, got %llu",
                     total, dest_size);
        goto out;
    }
    if (total > 0 && dest_ptr == 0) {
        PyErr_SetString(PyExc_ValueError, "concat_arrays_into: dest_ptr is 0");
        goto out;
    }
    if ((size_t)nthreads > total / 65536 + 1) /* a thread per 64 KiB at least: fewer is faster */
        nthreads = (int)(total / 65536 + 1);
    PyThreadState *ts = PyEval_SaveThread();
    fc_copy(views, starts, count, (char *)(uintptr_t)dest_ptr, total, nthreads);
    PyEval_RestoreThread(ts);
    result = PyLong_FromSize_t(total);
out:
    for (Py_ssize_t i = 0; i < held; i++)
        PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    PyMem_Free(starts);
    return result;
}

static PyMethodDef fc_methods[] = {
    {"concat_arrays_into", concat_arrays_into, METH_VARARGS,
     "concat_arrays_into(arrays, dest_ptr, dest_size, start=0, count=-1, nthreads=1) -> int\n"
     "Copy arrays[start:start+count] (C-contiguous buffers) back to back into the raw memory\n"
     "at dest_ptr (dest_size bytes) with the GIL released; returns the bytes copied."},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef_Slot fc_slots[] = {
    {0, NULL},
};

static struct PyModuleDef fc_module = {
    PyModuleDef_HEAD_INIT,
    "mooncake._fast_copy",
    "Gather copy of a list of arrays into one raw buffer (the reference's _fast_copy).",
    0,
    fc_methods,
    fc_slots,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__fast_copy(void) {
    return PyModuleDef_Init(&fc_module);
}
