/* Put-session methods of MooncakeDistributedStore (mc_store_put_session_* in mooncake/store.h):
 * start, ranged writes, end, revoke. The reference's nested list shapes of the ranged write are
 * flattened by the Python facade (mooncake/store/_ranges.py). */
#include "store_py.h"

/* batch_put_session_start(keys, sizes, config=None) -> list of codes */
PyObject *mcpy_batch_put_session_start(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwl[] = {"keys", "sizes", "config", NULL};
    PyObject *keys_o, *sizes_o, *cfg = Py_None, *ret = NULL;
    uint64_t *sizes = NULL;
    mcpy_keyed_t k;
    mcpy_rconfig_t rc;
    Py_ssize_t ns;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|O:batch_put_session_start", kwl, &keys_o,
                                     &sizes_o, &cfg) ||
        mcpy_keyed(keys_o, &k) < 0)
        return NULL;
    ns = mcpy_u64_array(sizes_o, "sizes", &sizes);
    if (ns < 0 || !mcpy_rconfig(cfg, &rc))
        goto out;
    if (ns != k.n) {
        /* As the reference answers lists of unequal length: every key INVALID_PARAMS. */
        for (Py_ssize_t i = 0; i < k.n; i++)
            k.codes[i] = MC_ERR_INVALID_PARAMS;
    } else {
        NOGIL(mc_store_put_session_start(MCPY_STORE(self), k.keys, sizes, (size_t)k.n, &rc.rc,
                                         k.codes));
    }
    ret = mcpy_int_list(k.codes, k.n);
    mcpy_rconfig_release(&rc);
out:
    PyMem_Free(sizes);
    mcpy_keyed_free(&k);
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
    PyObject *ret;
    mcpy_flat_ranges_t f;
    if (mcpy_flat_ranges(args, kw, "_put_ranges_raw", kwl, sizeof(mc_store_range_write_t),
                         sizeof(mc_store_put_range_t), &f) != 0)
        return NULL;
    mc_store_range_write_t *writes = f.recs;
    mc_store_put_range_t *ranges = f.ranges;
    MCPY_FLAT_RANGES_LINK(f, writes, ranges);
    for (Py_ssize_t j = 0; j < f.total; j++) {
        ranges[j].src = (const void *)(uintptr_t)f.a[j];
        ranges[j].dst_off = f.b[j];
        ranges[j].len = f.c[j];
    }
    NOGIL(screen_src_ranges(MCPY_STORE(self), writes, (size_t)f.n, ranges, f.bad);
          mc_store_put_session_write(MCPY_STORE(self), writes, (size_t)f.n));
    ret = PyList_New(f.n);
    for (Py_ssize_t i = 0; ret && i < f.n; i++)
        PyList_SetItem(ret, i, PyLong_FromLongLong(f.bad[i] ? f.bad[i] : writes[i].result));
    mcpy_flat_ranges_free(&f);
    return ret;
}

typedef int (*mcpy_finish_fn)(mc_store_t *, const char *const *, size_t, int *);

static PyObject *finish(PyObject *self, PyObject *args, PyObject *kw, const char *fmt,
                        mcpy_finish_fn fn) {
    static char *kwl[] = {"keys", NULL};
    PyObject *keys_o, *ret;
    mcpy_keyed_t k;
    if (!PyArg_ParseTupleAndKeywords(args, kw, fmt, kwl, &keys_o) || mcpy_keyed(keys_o, &k) < 0)
        return NULL;
    NOGIL(fn(MCPY_STORE(self), k.keys, (size_t)k.n, k.codes));
    ret = mcpy_int_list(k.codes, k.n);
    mcpy_keyed_free(&k);
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
