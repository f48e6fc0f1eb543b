/* Put-session methods of MooncakeDistributedStore (mc_store_put_session_* in mooncake/store.h):
 * start, ranged writes, end, revoke. The reference's nested list shapes of the ranged write are
 * flattened by the Python facade (mooncake/store/_ranges.py). */
#include "store_py.h"

/* batch_put_session_start(keys, sizes, config=None) -> list of codes */
PyObject *mcpy_batch_put_session_start(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwl[] = {"keys", "sizes", "config", NULL};
    PyObject *keys_o, *sizes_o, *cfg = Py_None, *hold = NULL, *ret = NULL;
    const char **keys = NULL;
    uint64_t *sizes = NULL;
    int *codes = NULL;
    mcpy_rconfig_t rc;
    Py_ssize_t n, ns;
    int have_rc = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|O:batch_put_session_start", kwl, &keys_o,
                                     &sizes_o, &cfg))
        return NULL;
    n = mcpy_keys(keys_o, "keys", &hold, &keys);
    if (n < 0)
        return NULL;
    ns = mcpy_u64_array(sizes_o, "sizes", &sizes);
    if (ns < 0 || !mcpy_rconfig(cfg, &rc))
        goto out;
    have_rc = 1;
    codes = PyMem_Calloc((size_t)(n ? n : 1), sizeof(*codes));
    if (!codes) {
        PyErr_NoMemory();
        goto out;
    }
    if (ns != n) {
        /* As the reference answers lists of unequal length: every key INVALID_PARAMS. */
        for (Py_ssize_t i = 0; i < n; i++)
            codes[i] = MC_ERR_INVALID_PARAMS;
    } else {
        NOGIL(mc_store_put_session_start(MCPY_STORE(self), keys, sizes, (size_t)n, &rc.rc, codes));
    }
    ret = mcpy_int_list(codes, n);
out:
    if (have_rc)
        mcpy_rconfig_release(&rc);
    PyMem_Free(codes);
    PyMem_Free(sizes);
    PyMem_Free(keys);
    Py_XDECREF(hold);
    return ret;
}

/* _put_ranges_raw(keys, counts, srcs, dst_offsets, sizes) -> one result per key (bytes written
 * or a code): key i owns the next counts[i] entries of the three flat lists. */
PyObject *mcpy_put_ranges_raw(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwl[] = {"keys", "counts", "srcs", "dst_offsets", "sizes", NULL};
    PyObject *keys_o, *counts_o, *srcs_o, *offs_o, *lens_o, *hold = NULL, *ret = NULL;
    const char **keys = NULL;
    uint64_t *counts = NULL, *srcs = NULL, *offs = NULL, *lens = NULL;
    mc_store_range_write_t *writes = NULL;
    mc_store_put_range_t *ranges = NULL;
    Py_ssize_t n, nc, ns, no, nl;
    uint64_t total = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOOO:_put_ranges_raw", kwl, &keys_o, &counts_o,
                                     &srcs_o, &offs_o, &lens_o))
        return NULL;
    n = mcpy_keys(keys_o, "keys", &hold, &keys);
    if (n < 0)
        return NULL;
    nc = mcpy_u64_array(counts_o, "counts", &counts);
    ns = nc < 0 ? -1 : mcpy_u64_array(srcs_o, "srcs", &srcs);
    no = ns < 0 ? -1 : mcpy_u64_array(offs_o, "dst_offsets", &offs);
    nl = no < 0 ? -1 : mcpy_u64_array(lens_o, "sizes", &lens);
    if (nl < 0)
        goto out;
    for (Py_ssize_t i = 0; i < nc; i++)
        total += counts[i];
    if (nc != n || ns != no || ns != nl || (uint64_t)ns != total) {
        PyErr_SetString(PyExc_ValueError, "_put_ranges_raw: list lengths disagree");
        goto out;
    }
    writes = PyMem_Calloc((size_t)(n ? n : 1), sizeof(*writes));
    ranges = PyMem_Calloc((size_t)(ns ? ns : 1), sizeof(*ranges));
    if (!writes || !ranges) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t i = 0, at = 0; i < n; i++) {
        writes[i].key = keys[i];
        writes[i].ranges = &ranges[at];
        writes[i].n = (size_t)counts[i];
        at += (Py_ssize_t)counts[i];
    }
    for (Py_ssize_t j = 0; j < ns; j++) {
        ranges[j].src = (const void *)(uintptr_t)srcs[j];
        ranges[j].dst_off = offs[j];
        ranges[j].len = lens[j];
    }
    NOGIL(mc_store_put_session_write(MCPY_STORE(self), writes, (size_t)n));
    ret = PyList_New(n);
    for (Py_ssize_t i = 0; ret && i < n; i++)
        PyList_SetItem(ret, i, PyLong_FromLongLong(writes[i].result));
out:
    PyMem_Free(ranges);
    PyMem_Free(writes);
    PyMem_Free(lens);
    PyMem_Free(offs);
    PyMem_Free(srcs);
    PyMem_Free(counts);
    PyMem_Free(keys);
    Py_XDECREF(hold);
    return ret;
}

typedef int (*mcpy_finish_fn)(mc_store_t *, const char *const *, size_t, int *);

static PyObject *finish(PyObject *self, PyObject *args, PyObject *kw, const char *fmt,
                        mcpy_finish_fn fn) {
    static char *kwl[] = {"keys", NULL};
    PyObject *keys_o, *hold = NULL, *ret = NULL;
    const char **keys = NULL;
    int *codes = NULL;
    Py_ssize_t n;
    if (!PyArg_ParseTupleAndKeywords(args, kw, fmt, kwl, &keys_o))
        return NULL;
    n = mcpy_keys(keys_o, "keys", &hold, &keys);
    if (n < 0)
        return NULL;
    codes = PyMem_Calloc((size_t)(n ? n : 1), sizeof(*codes));
    if (!codes) {
        PyErr_NoMemory();
    } else {
        NOGIL(fn(MCPY_STORE(self), keys, (size_t)n, codes));
        ret = mcpy_int_list(codes, n);
    }
    PyMem_Free(codes);
    PyMem_Free(keys);
    Py_XDECREF(hold);
    return ret;
}

/* batch_put_session_end(keys) -> list of codes */
PyObject *mcpy_batch_put_session_end(PyObject *self, PyObject *args, PyObject *kw) {
    return finish(self, args, kw, "O:batch_put_session_end", mc_store_put_session_end);
}

/* batch_put_session_revoke(keys) -> list of codes */
PyObject *mcpy_batch_put_session_revoke(PyObject *self, PyObject *args, PyObject *kw) {
    return finish(self, args, kw, "O:batch_put_session_revoke", mc_store_put_session_revoke);
}
