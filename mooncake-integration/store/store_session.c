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

/* Each write whose ranges include one that fails the check: that range is made empty (the C
 * call then refuses the key, none of its ranges written) and bad[i], the key's result, is the
 * check's code. The writes' ranges lie in order in ranges[]. */
static void screen_src_ranges(mc_store_t *s, const mc_store_range_write_t *w, size_t n,
                              mc_store_put_range_t *ranges, int *bad) {
    for (size_t i = 0, at = 0; i < n; at += w[i].n, i++) {
        bad[i] = 0;
        for (size_t j = at; j < at + w[i].n; j++) {
            mc_store_iov_t v = {(void *)(uintptr_t)ranges[j].src, (size_t)ranges[j].len};
            int rc = v.len ? mcpy_check_iovs(s, &v, 1, 0) : 0;
            if (rc != 0) {
                ranges[j].len = 0;
                bad[i] = rc;
            }
        }
    }
}

/* _put_ranges_raw(keys, counts, srcs, dst_offsets, sizes) -> one result per key (bytes written
 * or a code): key i owns the next counts[i] entries of the three flat lists. */
PyObject *mcpy_put_ranges_raw(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwl[] = {"keys", "counts", "srcs", "dst_offsets", "sizes", NULL};
    static const char *const names[5] = {"keys", "counts", "srcs", "dst_offsets", "sizes"};
    PyObject *objs[5], *ret = NULL;
    mcpy_flat_ranges_t f;
    mc_store_range_write_t *writes = NULL;
    mc_store_put_range_t *ranges = NULL;
    int *bad = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOOO:_put_ranges_raw", kwl, &objs[0], &objs[1],
                                     &objs[2], &objs[3], &objs[4]) ||
        mcpy_flat_ranges(objs, names, "_put_ranges_raw", &f) != 0)
        return NULL;
    writes = PyMem_Calloc((size_t)(f.n ? f.n : 1), sizeof(*writes));
    ranges = PyMem_Calloc((size_t)(f.total ? f.total : 1), sizeof(*ranges));
    bad = PyMem_Calloc((size_t)(f.n ? f.n : 1), sizeof(*bad));
    if (!writes || !ranges || !bad) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t i = 0, at = 0; i < f.n; i++) {
        writes[i].key = f.keys[i];
        writes[i].ranges = &ranges[at];
        writes[i].n = (size_t)f.counts[i];
        at += (Py_ssize_t)f.counts[i];
    }
    for (Py_ssize_t j = 0; j < f.total; j++) {
        ranges[j].src = (const void *)(uintptr_t)f.a[j];
        ranges[j].dst_off = f.b[j];
        ranges[j].len = f.c[j];
    }
    NOGIL(screen_src_ranges(MCPY_STORE(self), writes, (size_t)f.n, ranges, bad);
          mc_store_put_session_write(MCPY_STORE(self), writes, (size_t)f.n));
    ret = PyList_New(f.n);
    for (Py_ssize_t i = 0; ret && i < f.n; i++)
        PyList_SetItem(ret, i, PyLong_FromLongLong(bad[i] ? bad[i] : writes[i].result));
out:
    PyMem_Free(bad);
    PyMem_Free(ranges);
    PyMem_Free(writes);
    mcpy_flat_ranges_free(&f);
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
