/* Store methods: parse, call the C client without the GIL, build the reference's return values. */
#include <string.h>

#include "store_py.h"

/* ---- raw addresses ---- */

int mcpy_check_iovs(mc_store_t *s, const mc_store_iov_t *iov, size_t n, int writable) {
    for (size_t i = 0; i < n; i++) {
        int rc = mc_store_check_memory(s, iov[i].base, iov[i].len, writable);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* A batch of items at raw addresses: items whose memory fails the check get its code in codes[]
 * and stay out of the C call; the others are copied to good[] in order, with their indices in
 * idx[]. Returns how many passed. No GIL needed. */
static size_t screen_items(mc_store_t *s, const mc_store_item_t *items, size_t n, int writable,
                           int64_t *codes, mc_store_item_t *good, size_t *idx) {
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        codes[i] = mcpy_check_iovs(s, items[i].iov, items[i].iovcnt, writable);
        if (codes[i] == 0) {
            good[m] = items[i];
            idx[m++] = i;
        }
    }
    return m;
}

/* Scratch for screen_items over n items (PyMem; NULL members with MemoryError). */
typedef struct {
    mc_store_item_t *good;
    size_t *idx;
    int64_t *codes;
    int *sub;       /* the C call's results for good[] (puts) */
    int64_t *sub64; /* (gets) */
} screen_t;

static int screen_alloc(screen_t *sc, size_t n) {
    size_t c = n ? n : 1;
    sc->good = PyMem_Calloc(c, sizeof(*sc->good));
    sc->idx = PyMem_Calloc(c, sizeof(*sc->idx));
    sc->codes = PyMem_Calloc(c, sizeof(*sc->codes));
    sc->sub = PyMem_Calloc(c, sizeof(*sc->sub));
    sc->sub64 = PyMem_Calloc(c, sizeof(*sc->sub64));
    if (sc->good && sc->idx && sc->codes && sc->sub && sc->sub64)
        return 1;
    PyErr_NoMemory();
    return 0;
}

static void screen_free(screen_t *sc) {
    PyMem_Free(sc->good);
    PyMem_Free(sc->idx);
    PyMem_Free(sc->codes);
    PyMem_Free(sc->sub);
    PyMem_Free(sc->sub64);
}

/* ---- puts ---- */

/* put and upsert share their parsing; upsert replaces an existing value (mooncake/store.h). */
/* Each put call has an upsert twin that differs only in the C call it ends in: one
 * implementation, impl(self, args, kw, upsert), serves both methods. */
#define MCPY_PUT_AND_UPSERT(impl, put_name, upsert_name)                                           \
    PyObject *mcpy_##put_name(PyObject *self, PyObject *args, PyObject *kw) {                      \
        return impl(self, args, kw, 0);                                                            \
    }                                                                                              \
    PyObject *mcpy_##upsert_name(PyObject *self, PyObject *args, PyObject *kw) {                   \
        return impl(self, args, kw, 1);                                                            \
    }

static PyObject *put_one(PyObject *self, PyObject *args, PyObject *kw, int upsert) {
    static char *kwl[] = {"key", "value", "config", NULL};
    PyObject *key, *value, *cfg = NULL;
    Py_buffer view;
    mcpy_rconfig_t rc;
    const char *k;
    int code;
    if (!PyArg_ParseTupleAndKeywords(args, kw, upsert ? "OO|O:upsert" : "OO|O:put", kwl, &key,
                                     &value, &cfg) ||
        !mcpy_key(key, &k))
        return NULL;
    if (PyObject_GetBuffer(value, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    if (!mcpy_rconfig(cfg, &rc)) {
        PyBuffer_Release(&view);
        return NULL;
    }
    NOGIL(code = (upsert ? mc_store_upsert : mc_store_put)(MCPY_STORE(self), k, view.buf,
                                                           (size_t)view.len, &rc.rc));
    mcpy_rconfig_release(&rc);
    PyBuffer_Release(&view);
    return PyLong_FromLong(code);
}

MCPY_PUT_AND_UPSERT(put_one, put, upsert)

/* Buffers of a sequence of bytes-like objects; *views is PyMem_Malloc'ed, *got views are held. */
static int get_views(PyObject *seq, Py_ssize_t n, Py_buffer **views, Py_ssize_t *got) {
    *got = 0;
    *views = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Py_buffer));
    if (!*views) {
        PyErr_NoMemory();
        return 0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PyTuple_GetItem(seq, i);
        if (PyObject_GetBuffer(o, &(*views)[i], PyBUF_SIMPLE) < 0)
            return 0;
        (*got)++;
    }
    return 1;
}

static void release_views(Py_buffer *views, Py_ssize_t got) {
    for (Py_ssize_t i = 0; views && i < got; i++)
        PyBuffer_Release(&views[i]);
    PyMem_Free(views);
}

/* One iov per held view (PyMem); NULL with MemoryError. The views must outlive the iovs. */
static mc_store_iov_t *views_iov(const Py_buffer *views, Py_ssize_t n) {
    mc_store_iov_t *iov = PyMem_Calloc((size_t)(n ? n : 1), sizeof(*iov));
    if (!iov) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        iov[i].base = views[i].buf;
        iov[i].len = (size_t)views[i].len;
    }
    return iov;
}

/* Single-part items: items[i] names keys[i] and the one iov[i]; both arrays outlive items. */
static void single_items(mc_store_item_t *items, const char **keys, mc_store_iov_t *iov, size_t n) {
    for (size_t i = 0; i < n; i++) {
        items[i].key = keys[i];
        items[i].iov = &iov[i];
        items[i].iovcnt = 1;
    }
}

/* Only "config" may be passed by keyword to methods taking *args. */
static int only_config_kw(PyObject *kw, const char *fn, PyObject **cfg) {
    PyObject *key, *val;
    Py_ssize_t pos = 0;
    *cfg = NULL;
    while (kw && PyDict_Next(kw, &pos, &key, &val)) {
        if (PyUnicode_Check(key) && PyUnicode_CompareWithASCIIString(key, "config") == 0) {
            *cfg = val;
            continue;
        }
        PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", fn, key);
        return 0;
    }
    return 1;
}

static PyObject *put_parts(PyObject *self, PyObject *args, PyObject *kw, int upsert) {
    const char *fn = upsert ? "upsert_parts" : "put_parts";
    PyObject *cfg, *parts = NULL, *ret = NULL;
    Py_buffer *views = NULL;
    Py_ssize_t n, got = 0;
    mc_store_iov_t *iov = NULL;
    mcpy_rconfig_t rc = {0};
    const char *k;
    int code;
    if (!only_config_kw(kw, fn, &cfg))
        return NULL;
    if (PyTuple_Size(args) < 1) {
        PyErr_Format(PyExc_TypeError, "%s() missing required argument 'key'", fn);
        return NULL;
    }
    if (!mcpy_key(PyTuple_GetItem(args, 0), &k))
        return NULL;
    parts = PyTuple_GetSlice(args, 1, PyTuple_Size(args));
    if (!parts)
        return NULL;
    n = PyTuple_Size(parts);
    if (!get_views(parts, n, &views, &got) || !mcpy_rconfig(cfg, &rc) ||
        !(iov = views_iov(views, n)))
        goto out;
    NOGIL(code = (upsert ? mc_store_upsert_parts : mc_store_put_parts)(MCPY_STORE(self), k, iov,
                                                                       (size_t)n, &rc.rc));
    ret = PyLong_FromLong(code);
out:
    mcpy_rconfig_release(&rc);
    PyMem_Free(iov);
    release_views(views, got);
    Py_XDECREF(parts);
    return ret;
}

MCPY_PUT_AND_UPSERT(put_parts, put_parts, upsert_parts)

/* Runs a batch put of items; raw: their memory is at raw addresses, checked per item first (an
 * item that fails gets the check's code and stays out of the C call). INT32_MIN with
 * MemoryError when the scratch cannot be had. */
static int put_items(PyObject *self, const mc_store_item_t *items, size_t n,
                     const mc_replicate_config_t *rc, int upsert, int raw, int *res) {
    int (*op)(mc_store_t *, const mc_store_item_t *, size_t, const mc_replicate_config_t *, int *) =
        upsert ? mc_store_batch_upsert : mc_store_batch_put;
    mc_store_t *s = MCPY_STORE(self);
    screen_t sc = {0};
    int code = 0;
    if (!raw) {
        NOGIL(code = op(s, items, n, rc, res));
        return code;
    }
    if (!screen_alloc(&sc, n)) {
        code = INT32_MIN;
        goto out;
    }
    NOGIL(size_t m = screen_items(s, items, n, 0, sc.codes, sc.good, sc.idx);
          code = m ? op(s, sc.good, m, rc, sc.sub) : 0;
          for (size_t j = 0; j < m; j++) sc.codes[sc.idx[j]] = sc.sub[j]);
    for (size_t i = 0; i < n; i++) {
        res[i] = (int)sc.codes[i];
        if (code == 0 && res[i] != 0)
            code = res[i];
    }
out:
    screen_free(&sc);
    return code;
}

/* A batch of single-part items from keys and one iov per key. */
static PyObject *batch_put(PyObject *self, const char **keys, mc_store_iov_t *iov, size_t n,
                           PyObject *cfg, int as_list, int upsert, int raw) {
    mc_store_item_t *items = PyMem_Calloc(n ? n : 1, sizeof(*items));
    int *res = PyMem_Calloc(n ? n : 1, sizeof(*res));
    mcpy_rconfig_t rc = {0};
    PyObject *ret = NULL;
    int code;
    if (!items || !res) {
        PyErr_NoMemory();
        goto out;
    }
    if (!mcpy_rconfig(cfg, &rc))
        goto out;
    single_items(items, keys, iov, n);
    code = put_items(self, items, n, &rc.rc, upsert, raw, res);
    if (code == INT32_MIN)
        goto out;
    ret = as_list ? mcpy_int_list(res, (Py_ssize_t)n) : PyLong_FromLong(code);
out:
    mcpy_rconfig_release(&rc);
    PyMem_Free(res);
    PyMem_Free(items);
    return ret;
}

static PyObject *put_batch(PyObject *self, PyObject *args, PyObject *kw, int upsert) {
    static char *kwl[] = {"keys", "values", "config", NULL};
    PyObject *keys_o, *values_o, *cfg = NULL, *hold = NULL, *vals = NULL, *ret = NULL;
    const char **keys = NULL;
    Py_buffer *views = NULL;
    mc_store_iov_t *iov = NULL;
    Py_ssize_t n, got = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, upsert ? "OO|O:upsert_batch" : "OO|O:put_batch", kwl,
                                     &keys_o, &values_o, &cfg))
        return NULL;
    n = mcpy_keys(keys_o, "keys", &hold, &keys);
    if (n < 0)
        return NULL;
    if (PyUnicode_Check(values_o) || !PySequence_Check(values_o) ||
        !(vals = PySequence_Tuple(values_o))) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "values must be a list of bytes-like objects");
        goto out;
    }
    if (PyTuple_Size(vals) != n) { /* the reference's answer: INVALID_PARAMS, no exception */
        ret = PyLong_FromLong(MC_ERR_INVALID_PARAMS);
        goto out;
    }
    if (!get_views(vals, n, &views, &got) || !(iov = views_iov(views, n)))
        goto out;
    ret = batch_put(self, keys, iov, (size_t)n, cfg, 0, upsert, 0);
out:
    PyMem_Free(iov);
    release_views(views, got);
    Py_XDECREF(vals);
    Py_XDECREF(hold);
    PyMem_Free(keys);
    return ret;
}

MCPY_PUT_AND_UPSERT(put_batch, put_batch, upsert_batch)

static PyObject *put_from(PyObject *self, PyObject *args, PyObject *kw, int upsert) {
    static char *kwl[] = {"key", "buffer_ptr", "size", "config", NULL};
    PyObject *key, *cfg = NULL;
    uint64_t ptr;
    size_t size;
    mc_store_iov_t v;
    mcpy_rconfig_t rc;
    const char *k;
    int code;
    if (!PyArg_ParseTupleAndKeywords(args, kw, upsert ? "OO&O&|O:upsert_from" : "OO&O&|O:put_from",
                                     kwl, &key, mcpy_conv_u64, &ptr, mcpy_conv_size, &size, &cfg) ||
        !mcpy_key(key, &k) || !mcpy_rconfig(cfg, &rc))
        return NULL;
    v.base = (void *)(uintptr_t)ptr;
    v.len = size;
    NOGIL(code = mcpy_check_iovs(MCPY_STORE(self), &v, 1, 0);
          if (code == 0) code =
              (upsert ? mc_store_upsert : mc_store_put)(MCPY_STORE(self), k, v.base, size, &rc.rc));
    mcpy_rconfig_release(&rc);
    return PyLong_FromLong(code);
}

MCPY_PUT_AND_UPSERT(put_from, put_from, upsert_from)

/* Lists of unequal length: the reference answers INVALID_PARAMS for every key, no exception. */
static PyObject *invalid_for_each(Py_ssize_t n) {
    PyObject *l = PyList_New(n);
    for (Py_ssize_t i = 0; l && i < n; i++)
        PyList_SetItem(l, i, PyLong_FromLong(MC_ERR_INVALID_PARAMS));
    return l;
}

/* Keys and the memory each one's bytes move from or to: one iov per key (flat_iovs), or items
 * with several iovs each (multi_parse). */
typedef struct {
    PyObject *hold;
    const char **keys;
    mc_store_item_t *items;
    mc_store_iov_t *iov;
    Py_ssize_t n;
} multi_t;

static void multi_free(multi_t *m) {
    Py_CLEAR(m->hold);
    PyMem_Free(m->keys);
    PyMem_Free(m->items);
    PyMem_Free(m->iov);
    memset(m, 0, sizeof(*m));
}

/* keys + flat pointer and size lists of equal length -> an iov per key (no items). 0, or -1 with
 * *answer what the method returns: NULL with an exception set, or for lists of unequal length
 * INVALID_PARAMS for every key. Nothing to free on failure. */
static int flat_iovs(PyObject *keys_o, PyObject *ptrs_o, PyObject *sizes_o, multi_t *f,
                     PyObject **answer) {
    uint64_t *ptrs = NULL, *sizes = NULL;
    Py_ssize_t np, ns;
    int mismatch = 0;
    memset(f, 0, sizeof(*f));
    *answer = NULL;
    f->n = mcpy_keys(keys_o, "keys", &f->hold, &f->keys);
    if (f->n < 0)
        return -1;
    np = mcpy_u64_array(ptrs_o, "buffer_ptrs", &ptrs);
    ns = np < 0 ? -1 : mcpy_u64_array(sizes_o, "sizes", &sizes);
    if (np >= 0 && ns >= 0 && (np != f->n || ns != f->n))
        mismatch = 1;
    else if (np >= 0 && ns >= 0 &&
             !(f->iov = PyMem_Calloc((size_t)(f->n ? f->n : 1), sizeof(*f->iov))))
        PyErr_NoMemory();
    for (Py_ssize_t i = 0; f->iov && i < f->n; i++) {
        f->iov[i].base = (void *)(uintptr_t)ptrs[i];
        f->iov[i].len = (size_t)sizes[i];
    }
    PyMem_Free(ptrs);
    PyMem_Free(sizes);
    if (f->iov)
        return 0;
    if (mismatch)
        *answer = invalid_for_each(f->n);
    multi_free(f);
    return -1;
}

static PyObject *batch_put_from(PyObject *self, PyObject *args, PyObject *kw, int upsert) {
    static char *kwl[] = {"keys", "buffer_ptrs", "sizes", "config", NULL};
    PyObject *keys_o, *ptrs_o, *sizes_o, *cfg = NULL, *ret;
    multi_t f;
    if (!PyArg_ParseTupleAndKeywords(args, kw,
                                     upsert ? "OOO|O:batch_upsert_from" : "OOO|O:batch_put_from",
                                     kwl, &keys_o, &ptrs_o, &sizes_o, &cfg))
        return NULL;
    if (flat_iovs(keys_o, ptrs_o, sizes_o, &f, &ret) < 0)
        return ret;
    ret = batch_put(self, f.keys, f.iov, (size_t)f.n, cfg, 1, upsert, 1);
    multi_free(&f);
    return ret;
}

MCPY_PUT_AND_UPSERT(batch_put_from, batch_put_from, batch_upsert_from)

/* keys + lists of pointer lists and size lists -> items with several iovs each. 1, 0 (an
 * exception is set), or 2 when lengths differ (m->n keys, nothing to free). */
static int multi_parse(PyObject *keys_o, PyObject *ptrs_o, PyObject *sizes_o, multi_t *m) {
    PyObject *pt = NULL, *st = NULL;
    uint64_t **ptrs = NULL, **sizes = NULL;
    Py_ssize_t *counts = NULL, total = 0;
    int ok = 0;
    memset(m, 0, sizeof(*m));
    m->n = mcpy_keys(keys_o, "keys", &m->hold, &m->keys);
    if (m->n < 0)
        return 0;
    if (PyUnicode_Check(ptrs_o) || PyUnicode_Check(sizes_o) || !PySequence_Check(ptrs_o) ||
        !PySequence_Check(sizes_o)) {
        PyErr_SetString(PyExc_TypeError, "buffer_ptrs and sizes must be lists of lists of int");
        goto out;
    }
    pt = PySequence_Tuple(ptrs_o);
    st = pt ? PySequence_Tuple(sizes_o) : NULL;
    if (!st)
        goto out;
    if (PyTuple_Size(pt) != m->n || PyTuple_Size(st) != m->n) {
        ok = 2; /* the reference's answer: INVALID_PARAMS for every key */
        goto out;
    }
    ptrs = PyMem_Calloc((size_t)(m->n ? m->n : 1), sizeof(*ptrs));
    sizes = PyMem_Calloc((size_t)(m->n ? m->n : 1), sizeof(*sizes));
    counts = PyMem_Calloc((size_t)(m->n ? m->n : 1), sizeof(*counts));
    if (!ptrs || !sizes || !counts) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t i = 0; i < m->n; i++) {
        Py_ssize_t a = mcpy_u64_array(PyTuple_GetItem(pt, i), "buffer_ptrs[i]", &ptrs[i]);
        Py_ssize_t b = a < 0 ? -1 : mcpy_u64_array(PyTuple_GetItem(st, i), "sizes[i]", &sizes[i]);
        if (a < 0 || b < 0)
            goto out;
        if (a != b) {
            ok = 2;
            goto out;
        }
        counts[i] = a;
        total += a;
    }
    m->items = PyMem_Calloc((size_t)(m->n ? m->n : 1), sizeof(*m->items));
    m->iov = PyMem_Calloc((size_t)(total ? total : 1), sizeof(*m->iov));
    if (!m->items || !m->iov) {
        PyErr_NoMemory();
        goto out;
    }
    total = 0;
    for (Py_ssize_t i = 0; i < m->n; i++) {
        m->items[i].key = m->keys[i];
        m->items[i].iov = &m->iov[total];
        m->items[i].iovcnt = (size_t)counts[i];
        for (Py_ssize_t j = 0; j < counts[i]; j++) {
            m->iov[total].base = (void *)(uintptr_t)ptrs[i][j];
            m->iov[total].len = (size_t)sizes[i][j];
            total++;
        }
    }
    ok = 1;
out:
    for (Py_ssize_t i = 0; ptrs && i < m->n; i++) {
        PyMem_Free(ptrs[i]);
        PyMem_Free(sizes[i]);
    }
    PyMem_Free(ptrs);
    PyMem_Free(sizes);
    PyMem_Free(counts);
    Py_XDECREF(pt);
    Py_XDECREF(st);
    if (ok != 1) {
        Py_ssize_t n = m->n;
        multi_free(m);
        m->n = n; /* a mismatch answers per key */
    }
    return ok;
}

static PyObject *put_multi(PyObject *self, PyObject *args, PyObject *kw, int upsert) {
    static char *kwl[] = {"keys", "all_buffer_ptrs", "all_sizes", "config", NULL};
    PyObject *keys_o, *ptrs_o, *sizes_o, *cfg = NULL, *ret = NULL;
    mcpy_rconfig_t rc = {0};
    multi_t m;
    int *res = NULL;
    int parsed;
    if (!PyArg_ParseTupleAndKeywords(args, kw,
                                     upsert ? "OOO|O:batch_upsert_from_multi_buffers"
                                            : "OOO|O:batch_put_from_multi_buffers",
                                     kwl, &keys_o, &ptrs_o, &sizes_o, &cfg) ||
        !(parsed = multi_parse(keys_o, ptrs_o, sizes_o, &m)))
        return NULL;
    if (parsed == 2)
        return invalid_for_each(m.n);
    res = PyMem_Calloc((size_t)(m.n ? m.n : 1), sizeof(*res));
    if (!res) {
        PyErr_NoMemory();
        goto out;
    }
    if (!mcpy_rconfig(cfg, &rc))
        goto out;
    if (put_items(self, m.items, (size_t)m.n, &rc.rc, upsert, 1, res) == INT32_MIN)
        goto out;
    ret = mcpy_int_list(res, m.n);
out:
    mcpy_rconfig_release(&rc);
    PyMem_Free(res);
    multi_free(&m);
    return ret;
}

MCPY_PUT_AND_UPSERT(put_multi, batch_put_from_multi_buffers, batch_upsert_from_multi_buffers)

/* ---- gets ---- */

/* bytes from a read buffer; the copy runs without the GIL (the new bytes is not shared yet). */
static PyObject *bytes_from(mc_store_buffer_t *b) {
    size_t n = mc_store_buffer_size(b);
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n);
    char *dst;
    if (!out || !(dst = PyBytes_AsString(out))) {
        NOGIL(mc_store_buffer_free(b));
        Py_XDECREF(out);
        return NULL;
    }
    NOGIL(memcpy(dst, mc_store_buffer_data(b), n); mc_store_buffer_free(b));
    return out;
}

PyObject *mcpy_get(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwl[] = {"key", NULL};
    PyObject *key;
    mc_store_buffer_t *b = NULL;
    const char *k;
    int code;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:get", kwl, &key) || !mcpy_key(key, &k))
        return NULL;
    NOGIL(code = mc_store_get_buffer(MCPY_STORE(self), k, &b));
    if (code != 0)
        return PyBytes_FromStringAndSize("", 0);
    return bytes_from(b);
}

/* Turns one batch read result into a list item; owns b (NULL where the key was not read). */
typedef PyObject *(*wrap_buffer_fn)(PyObject *self, PyTypeObject *buffer_type,
                                    mc_store_buffer_t *b);

/* get_batch and batch_get_buffer: one batch read without the GIL, then a list with one item per
 * key from wrap. Buffers not yet handed to wrap are freed on every path. */
static PyObject *batch_get_list(PyObject *self, PyObject *keys_o, wrap_buffer_fn wrap,
                                PyTypeObject *buffer_type) {
    PyObject *hold = NULL, *ret = NULL;
    const char **keys = NULL;
    mc_store_buffer_t **bufs = NULL;
    int *res = NULL;
    Py_ssize_t n;
    n = mcpy_keys(keys_o, "keys", &hold, &keys);
    if (n < 0)
        return NULL;
    bufs = PyMem_Calloc((size_t)(n ? n : 1), sizeof(*bufs));
    res = PyMem_Calloc((size_t)(n ? n : 1), sizeof(*res));
    if (!bufs || !res) {
        PyErr_NoMemory();
        goto out;
    }
    NOGIL(mc_store_batch_get_buffer(MCPY_STORE(self), keys, (size_t)n, bufs, res));
    ret = PyList_New(n);
    for (Py_ssize_t i = 0; ret && i < n; i++) {
        PyObject *item = wrap(self, buffer_type, bufs[i]);
        bufs[i] = NULL;
        if (!mcpy_list_set(&ret, i, item))
            break;
    }
out:
    for (Py_ssize_t j = 0; bufs && j < n; j++)
        mc_store_buffer_free(bufs[j]);
    PyMem_Free(bufs);
    PyMem_Free(res);
    PyMem_Free(keys);
    Py_XDECREF(hold);
    return ret;
}

/* get_batch: a copy as bytes, b"" for a key that was not read. */
static PyObject *wrap_bytes(PyObject *self, PyTypeObject *buffer_type, mc_store_buffer_t *b) {
    (void)self;
    (void)buffer_type;
    return b ? bytes_from(b) : PyBytes_FromStringAndSize("", 0);
}

/* Values from this size on are read straight into their bytes objects, not into a read buffer
 * and then copied. Where the store moves any memory (tcp, shm) that costs nothing and the copy
 * of a value as small as this one costs more than the sizes' look-up; elsewhere the bytes are
 * registered for the call (about 10 us), which only a large value's copy outweighs. */
#define MCPY_DIRECT_MIN_ANY (16u << 10)
#define MCPY_DIRECT_MIN (1u << 20)

/* get_batch with large values: the sizes first (from replica locations the client holds, or one
 * master RPC whose leases the read then uses), then bytes objects of those sizes, the large ones
 * registered unless the store moves any memory, and one batched read into them. 1 with *out set (or
 * NULL and an exception); 0 when no value is large (or the sizes cannot be had), and the caller
 * reads the usual way. */
static int get_batch_direct(PyObject *self, const char **keys, Py_ssize_t n, PyObject **out) {
    mc_store_t *st = MCPY_STORE(self);
    int64_t *sizes = PyMem_Calloc((size_t)(n ? n : 1), sizeof(*sizes));
    int64_t *res = PyMem_Calloc((size_t)(n ? n : 1), sizeof(*res));
    mc_store_item_t *items = PyMem_Calloc((size_t)(n ? n : 1), sizeof(*items));
    mc_store_iov_t *iov = PyMem_Calloc((size_t)(n ? n : 1), sizeof(*iov));
    char *reg = PyMem_Calloc((size_t)(n ? n : 1), 1);
    Py_ssize_t *idx = PyMem_Calloc((size_t)(n ? n : 1), sizeof(*idx));
    PyObject *ret = NULL;
    Py_ssize_t m = 0; /* the keys found: only they are read */
    int large = 0, done = 0;
    int any_mem = mc_store_moves_any_memory(st);
    size_t direct_min = any_mem ? MCPY_DIRECT_MIN_ANY : MCPY_DIRECT_MIN;
    *out = NULL;
    if (!sizes || !res || !items || !iov || !reg || !idx) {
        PyErr_NoMemory();
        done = 1;
        goto out;
    }
    NOGIL(mc_store_batch_get_size(st, keys, (size_t)n, sizes));
    for (Py_ssize_t i = 0; i < n; i++)
        large |= sizes[i] >= (int64_t)direct_min && sizes[i] <= PY_SSIZE_T_MAX;
    if (!large)
        goto out;
    done = 1;
    ret = PyList_New(n);
    for (Py_ssize_t i = 0; ret && i < n; i++) {
        PyObject *b = PyBytes_FromStringAndSize(NULL, sizes[i] > 0 ? (Py_ssize_t)sizes[i] : 0);
        if (!b) {
            Py_CLEAR(ret);
            break;
        }
        PyList_SetItem(ret, i, b);
        if (sizes[i] <= 0)
            continue; /* a miss: b"" */
        items[m].key = keys[i];
        iov[m].base = PyBytes_AsString(b);
        iov[m].len = (size_t)sizes[i];
        items[m].iov = &iov[m];
        items[m].iovcnt = 1;
        idx[m++] = i;
    }
    if (!ret)
        goto out;
    /* The new bytes objects are ours alone until returned: filled without the GIL. */
    Py_BEGIN_ALLOW_THREADS;
    for (Py_ssize_t j = 0; j < m; j++)
        reg[j] = !any_mem && iov[j].len >= MCPY_DIRECT_MIN &&
                 mc_store_register_buffer(st, iov[j].base, iov[j].len) == 0;
    mc_store_batch_get_into(st, items, (size_t)m, res);
    for (Py_ssize_t j = 0; j < m; j++)
        if (reg[j])
            mc_store_unregister_buffer(st, iov[j].base);
    Py_END_ALLOW_THREADS;
    /* A key whose read failed (it went, or changed size in between) is read again on its own. */
    for (Py_ssize_t j = 0; ret && j < m; j++) {
        mc_store_buffer_t *b = NULL;
        PyObject *item;
        int code;
        if (res[j] == sizes[idx[j]])
            continue;
        NOGIL(code = mc_store_get_buffer(st, keys[idx[j]], &b));
        item = code == 0 ? bytes_from(b) : PyBytes_FromStringAndSize("", 0);
        if (!item)
            Py_CLEAR(ret);
        else
            PyList_SetItem(ret, idx[j], item);
    }
out:
    PyMem_Free(idx);
    PyMem_Free(reg);
    PyMem_Free(iov);
    PyMem_Free(items);
    PyMem_Free(res);
    PyMem_Free(sizes);
    *out = ret;
    return done;
}

PyObject *mcpy_get_batch(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwl[] = {"keys", NULL};
    PyObject *keys_o, *hold = NULL, *ret = NULL;
    const char **keys = NULL;
    Py_ssize_t n;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:get_batch", kwl, &keys_o))
        return NULL;
    n = mcpy_keys(keys_o, "keys", &hold, &keys);
    if (n < 0)
        return NULL;
    /* Without the cache the sizes would cost a second master RPC: read the usual way then. */
    if (mc_store_replica_cache_capacity(MCPY_STORE(self)) == 0 ||
        !get_batch_direct(self, keys, n, &ret))
        ret = batch_get_list(self, hold, wrap_bytes, NULL);
    PyMem_Free(keys);
    Py_XDECREF(hold);
    return ret;
}

PyObject *mcpy_get_into(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwl[] = {"key", "buffer_ptr", "size", NULL};
    PyObject *key;
    uint64_t ptr;
    size_t size;
    mc_store_iov_t v;
    const char *k;
    int64_t n;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO&O&:get_into", kwl, &key, mcpy_conv_u64, &ptr,
                                     mcpy_conv_size, &size) ||
        !mcpy_key(key, &k))
        return NULL;
    v.base = (void *)(uintptr_t)ptr;
    v.len = size;
    NOGIL(n = mcpy_check_iovs(MCPY_STORE(self), &v, 1, 1);
          if (n == 0) n = mc_store_get_into(MCPY_STORE(self), k, v.base, size));
    return PyLong_FromLongLong(n);
}

/* Reads into raw addresses: each item's memory is checked first (screen_items). */
static PyObject *batch_get_items(PyObject *self, mc_store_item_t *items, Py_ssize_t n) {
    mc_store_t *s = MCPY_STORE(self);
    screen_t sc = {0};
    PyObject *ret = NULL;
    if (!screen_alloc(&sc, (size_t)n))
        goto out;
    NOGIL(size_t m = screen_items(s, items, (size_t)n, 1, sc.codes, sc.good, sc.idx);
          if (m) mc_store_batch_get_into(s, sc.good, m, sc.sub64);
          for (size_t j = 0; j < m; j++) sc.codes[sc.idx[j]] = sc.sub64[j]);
    ret = mcpy_i64_list(sc.codes, n);
out:
    screen_free(&sc);
    return ret;
}

PyObject *mcpy_batch_get_into(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwl[] = {"keys", "buffer_ptrs", "sizes", NULL};
    PyObject *keys_o, *ptrs_o, *sizes_o, *ret = NULL;
    mc_store_item_t *items;
    multi_t f;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO:batch_get_into", kwl, &keys_o, &ptrs_o,
                                     &sizes_o))
        return NULL;
    if (flat_iovs(keys_o, ptrs_o, sizes_o, &f, &ret) < 0)
        return ret;
    items = PyMem_Calloc((size_t)(f.n ? f.n : 1), sizeof(*items));
    if (!items) {
        PyErr_NoMemory();
    } else {
        single_items(items, f.keys, f.iov, (size_t)f.n);
        ret = batch_get_items(self, items, f.n);
    }
    PyMem_Free(items);
    multi_free(&f);
    return ret;
}

PyObject *mcpy_batch_get_into_multi_buffers(PyObject *self, PyObject *args, PyObject *kw) {
    /* prefer_alloc_in_same_node is the reference's; reads here try a replica in this process's
     * own segment first anyway. */
    static char *kwl[] = {"keys", "all_buffer_ptrs", "all_sizes", "prefer_alloc_in_same_node",
                          NULL};
    PyObject *keys_o, *ptrs_o, *sizes_o, *ret;
    multi_t m;
    int parsed, same_node = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|p:batch_get_into_multi_buffers", kwl, &keys_o,
                                     &ptrs_o, &sizes_o, &same_node) ||
        !(parsed = multi_parse(keys_o, ptrs_o, sizes_o, &m)))
        return NULL;
    if (parsed == 2)
        return invalid_for_each(m.n);
    ret = batch_get_items(self, m.items, m.n);
    multi_free(&m);
    return ret;
}

/* Fastcall methods that need the module state (the Buffer type) through their defining class. */
static int one_arg(const char *fn, const char *name, PyObject *const *args, Py_ssize_t nargs,
                   PyObject *kwnames, PyObject **out) {
    Py_ssize_t nkw = kwnames ? PyTuple_Size(kwnames) : 0;
    if (nargs + nkw != 1) {
        PyErr_Format(PyExc_TypeError, "%s() takes exactly one argument (%zd given)", fn,
                     nargs + nkw);
        return 0;
    }
    if (nkw == 1 && PyUnicode_CompareWithASCIIString(PyTuple_GetItem(kwnames, 0), name) != 0) {
        PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", fn,
                     PyTuple_GetItem(kwnames, 0));
        return 0;
    }
    *out = args[0];
    return 1;
}

PyObject *mcpy_get_buffer(PyObject *self, PyTypeObject *cls, PyObject *const *args,
                          Py_ssize_t nargs, PyObject *kwnames) {
    mcpy_store_state_t *st = PyType_GetModuleState(cls);
    mc_store_buffer_t *b = NULL;
    PyObject *key;
    const char *k;
    int code;
    if (!st || !one_arg("get_buffer", "key", args, nargs, kwnames, &key) || !mcpy_key(key, &k))
        return NULL;
    NOGIL(code = mc_store_get_buffer(MCPY_STORE(self), k, &b));
    if (code != 0)
        Py_RETURN_NONE;
    return mcpy_buffer_new(st->buffer_type, self, b);
}

/* batch_get_buffer: a zero-copy Buffer, None for a key that was not read. */
static PyObject *wrap_buffer(PyObject *self, PyTypeObject *buffer_type, mc_store_buffer_t *b) {
    if (!b)
        return Py_NewRef(Py_None);
    return mcpy_buffer_new(buffer_type, self, b);
}

PyObject *mcpy_batch_get_buffer(PyObject *self, PyTypeObject *cls, PyObject *const *args,
                                Py_ssize_t nargs, PyObject *kwnames) {
    mcpy_store_state_t *st = PyType_GetModuleState(cls);
    PyObject *keys_o;
    if (!st || !one_arg("batch_get_buffer", "keys", args, nargs, kwnames, &keys_o))
        return NULL;
    return batch_get_list(self, keys_o, wrap_buffer, st->buffer_type);
}

/* ---- metadata ---- */

PyObject *mcpy_is_exist(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwl[] = {"key", NULL};
    PyObject *key;
    const char *k;
    int code;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:is_exist", kwl, &key) || !mcpy_key(key, &k))
        return NULL;
    NOGIL(code = mc_store_is_exist(MCPY_STORE(self), k));
    return PyLong_FromLong(code < 0 ? -1 : code);
}

/* A per-key batch call of the C client, run without the GIL; force only where the call takes it. */
typedef void (*keys_op_fn)(mc_store_t *s, const char *const *keys, size_t n, int force, int *res);

/* batch_is_exist and batch_remove: keys in, one int per key out as a list. */
static PyObject *keys_int_list(PyObject *self, PyObject *keys_o, keys_op_fn op, int force) {
    mcpy_keyed_t k;
    PyObject *ret;
    if (mcpy_keyed(keys_o, &k) < 0)
        return NULL;
    NOGIL(op(MCPY_STORE(self), k.keys, (size_t)k.n, force, k.codes));
    ret = mcpy_int_list(k.codes, k.n);
    mcpy_keyed_free(&k);
    return ret;
}

/* Every error code reads as -1 in the reference's batch_is_exist. */
static void op_is_exist(mc_store_t *s, const char *const *keys, size_t n, int force, int *res) {
    (void)force;
    mc_store_batch_is_exist(s, keys, n, res);
    for (size_t i = 0; i < n; i++)
        res[i] = res[i] < 0 ? -1 : res[i];
}

static void op_remove(mc_store_t *s, const char *const *keys, size_t n, int force, int *res) {
    mc_store_batch_remove(s, keys, n, force, res);
}

PyObject *mcpy_batch_is_exist(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwl[] = {"keys", NULL};
    PyObject *keys_o;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:batch_is_exist", kwl, &keys_o))
        return NULL;
    return keys_int_list(self, keys_o, op_is_exist, 0);
}

PyObject *mcpy_get_size(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwl[] = {"key", NULL};
    PyObject *key;
    const char *k;
    int64_t n;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:get_size", kwl, &key) || !mcpy_key(key, &k))
        return NULL;
    NOGIL(n = mc_store_get_size(MCPY_STORE(self), k));
    return PyLong_FromLongLong(n);
}

PyObject *mcpy_remove(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwl[] = {"key", "force", NULL};
    PyObject *key;
    const char *k;
    int force = 0, code;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|p:remove", kwl, &key, &force) ||
        !mcpy_key(key, &k))
        return NULL;
    NOGIL(code = mc_store_remove(MCPY_STORE(self), k, force));
    return PyLong_FromLong(code);
}

PyObject *mcpy_batch_remove(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwl[] = {"keys", "force", NULL};
    PyObject *keys_o;
    int force = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|p:batch_remove", kwl, &keys_o, &force))
        return NULL;
    return keys_int_list(self, keys_o, op_remove, force);
}

PyObject *mcpy_remove_all(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwl[] = {"force", NULL};
    int force = 0;
    int64_t n;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|p:remove_all", kwl, &force))
        return NULL;
    NOGIL(n = mc_store_remove_all(MCPY_STORE(self), force));
    return PyLong_FromLongLong(n);
}

PyObject *mcpy_remove_by_regex(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwl[] = {"regex_pattern", "force", NULL};
    const char *pattern = NULL;
    int force = 0;
    int64_t n;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|p:remove_by_regex", kwl, &pattern, &force))
        return NULL;
    NOGIL(n = mc_store_remove_by_regex(MCPY_STORE(self), pattern, force));
    return PyLong_FromLongLong(n);
}

/* _check_memory(ptr, size, writable=False) -> 0 or the code: what the raw-address calls check
 * before touching memory (mc_store_check_memory), for the facade's helpers that read a raw
 * address themselves (the tensor object headers). */
PyObject *mcpy_check_memory(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwl[] = {"buffer_ptr", "size", "writable", NULL};
    uint64_t ptr;
    size_t size;
    int writable = 0, code;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&O&|p:_check_memory", kwl, mcpy_conv_u64, &ptr,
                                     mcpy_conv_size, &size, &writable))
        return NULL;
    NOGIL(code = mc_store_check_memory(MCPY_STORE(self), (void *)(uintptr_t)ptr, size, writable));
    return PyLong_FromLong(code);
}

/* The first byte of obj's buffer, or NULL with an exception set (TypeError naming what
 * register_buffer takes; BufferError for a non-contiguous one). *len gets its size. */
static void *object_address(PyObject *obj, size_t *len) {
    Py_buffer view;
    void *p;
    if (!PyObject_CheckBuffer(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "expected an int address or an object with the buffer protocol, got %R",
                     (PyObject *)Py_TYPE(obj));
        return NULL;
    }
    if (PyObject_GetBuffer(obj, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    p = view.buf;
    *len = (size_t)view.len;
    PyBuffer_Release(&view);
    if (!p)
        PyErr_SetString(PyExc_ValueError, "the buffer is empty");
    return p;
}

/* Registers obj's memory and holds a memoryview of it (its export) in self->held, so that obj
 * can be neither freed nor resized until unregister_buffer or close. */
static PyObject *register_object(PyObject *self, PyObject *obj, PyObject *size_o) {
    mcpy_store_t *st = (mcpy_store_t *)self;
    PyObject *mv = NULL, *addr = NULL, *ret = NULL;
    size_t len = 0, size;
    void *p;
    int code;
    if (!(p = object_address(obj, &len)) || !(mv = PyMemoryView_FromObject(obj)))
        goto out;
    size = len;
    if (size_o && size_o != Py_None) {
        if (!mcpy_conv_size(size_o, &size))
            goto out;
        if (size > len) {
            PyErr_Format(PyExc_ValueError, "size %zu is larger than the buffer (%zu bytes)", size,
                         len);
            goto out;
        }
    }
    if (!st->held && !(st->held = PyDict_New()))
        goto out;
    if (!(addr = PyLong_FromVoidPtr(p)))
        goto out;
    NOGIL(code = mc_store_register_buffer(st->store, p, size));
    if (code == 0 && PyDict_SetItem(st->held, addr, mv) < 0) {
        NOGIL(mc_store_unregister_buffer(st->store, p));
        goto out;
    }
    ret = PyLong_FromLong(code);
out:
    Py_XDECREF(addr);
    Py_XDECREF(mv);
    return ret;
}

PyObject *mcpy_register_buffer(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwl[] = {"buffer_ptr", "size", NULL};
    PyObject *target, *size_o = NULL;
    uint64_t ptr;
    size_t size;
    int code;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:register_buffer", kwl, &target, &size_o))
        return NULL;
    if (!PyLong_Check(target))
        return register_object(self, target, size_o);
    /* An int address: the caller owns the memory and keeps it until unregister_buffer. */
    if (!size_o) {
        PyErr_SetString(PyExc_TypeError, "register_buffer() missing required argument 'size'");
        return NULL;
    }
    if (!mcpy_conv_u64(target, &ptr) || !mcpy_conv_size(size_o, &size))
        return NULL;
    NOGIL(code = mc_store_register_buffer(MCPY_STORE(self), (void *)(uintptr_t)ptr, size));
    return PyLong_FromLong(code);
}

/* Drops the hold on the object registered at addr (a key of self->held), if any. */
static int release_one(mcpy_store_t *st, PyObject *addr) {
    PyObject *mv, *r;
    if (!st->held || !(mv = PyDict_GetItemWithError(st->held, addr)))
        return PyErr_Occurred() ? -1 : 0;
    Py_INCREF(mv);
    r = PyObject_CallMethod(mv, "release", NULL);
    Py_XDECREF(r);
    Py_DECREF(mv);
    return r && PyDict_DelItem(st->held, addr) == 0 ? 0 : -1;
}

void mcpy_release_held(PyObject *self) {
    mcpy_store_t *st = (mcpy_store_t *)self;
    PyObject *held = st->held, *key, *mv;
    Py_ssize_t pos = 0;
    if (!held)
        return;
    st->held = NULL;
    while (PyDict_Next(held, &pos, &key, &mv)) {
        PyObject *r = PyObject_CallMethod(mv, "release", NULL);
        if (!r)
            PyErr_Clear();
        Py_XDECREF(r);
    }
    Py_DECREF(held);
}

PyObject *mcpy_unregister_buffer(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwl[] = {"buffer_ptr", NULL};
    PyObject *target, *addr = NULL, *ret = NULL;
    uint64_t ptr;
    size_t len;
    void *p;
    int code;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:unregister_buffer", kwl, &target))
        return NULL;
    if (PyLong_Check(target)) {
        if (!mcpy_conv_u64(target, &ptr))
            return NULL;
        p = (void *)(uintptr_t)ptr;
    } else if (!(p = object_address(target, &len))) {
        return NULL;
    }
    if (!(addr = PyLong_FromVoidPtr(p)))
        return NULL;
    NOGIL(code = mc_store_unregister_buffer(MCPY_STORE(self), p));
    /* Only once the store no longer touches the memory may its object go. */
    if (code == 0 && release_one((mcpy_store_t *)self, addr) < 0)
        goto out;
    ret = PyLong_FromLong(code);
out:
    Py_DECREF(addr);
    return ret;
}

/* For the facade's get_replica_desc / batch_get_replica_desc: one master round trip, each key's
 * code and replicas as plain tuples (the descriptor classes live in Python). */
PyObject *mcpy_batch_replica_desc_raw(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwl[] = {"keys", NULL};
    PyObject *keys_o, *hold = NULL, *ret = NULL;
    const char **keys = NULL;
    mc_store_replica_list_t *out = NULL;
    Py_ssize_t n;
    int rc;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:batch_replica_desc_raw", kwl, &keys_o))
        return NULL;
    n = mcpy_keys(keys_o, "keys", &hold, &keys);
    if (n < 0)
        return NULL;
    out = PyMem_Calloc((size_t)(n ? n : 1), sizeof(*out));
    if (!out) {
        PyErr_NoMemory();
        goto done;
    }
    NOGIL(rc = mc_store_batch_get_replica_desc(MCPY_STORE(self), keys, (size_t)n, out));
    (void)rc; /* a failed call puts its code in every key's entry */
    ret = PyList_New(n);
    for (Py_ssize_t i = 0; ret && i < n; i++) {
        PyObject *reps = PyList_New((Py_ssize_t)out[i].n), *item;
        for (size_t r = 0; reps && r < out[i].n; r++) {
            const mc_store_replica_t *e = &out[i].replicas[r];
            char path[4096];
            PyObject *t;
            /* A DISK replica's file, named here where the key is at hand (None otherwise). */
            if (e->is_disk != 2 ||
                mc_store_disk_file_path(e->transport_endpoint, keys[i], path, sizeof(path)) != 0)
                path[0] = '\0';
            t = Py_BuildValue("(sKKiiz)", e->transport_endpoint,
                              (unsigned long long)e->buffer_address, (unsigned long long)e->size,
                              e->status, e->is_disk, path[0] ? path : NULL);
            if (!t) {
                Py_CLEAR(reps);
                break;
            }
            PyList_SetItem(reps, (Py_ssize_t)r, t);
        }
        item = reps ? Py_BuildValue("(iN)", out[i].code, reps) : NULL;
        if (!mcpy_list_set(&ret, i, item))
            break;
    }
done:
    PyMem_Free(out);
    PyMem_Free(keys);
    Py_XDECREF(hold);
    return ret;
}

/* batch_replica_clear(keys, segment_name="") -> the keys whose replicas were cleared (as the
 * reference returns them); leased or missing keys are left out. */
PyObject *mcpy_batch_replica_clear(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwl[] = {"keys", "segment_name", NULL};
    PyObject *keys_o, *ret;
    const char *segment = "";
    mcpy_keyed_t k;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|s:batch_replica_clear", kwl, &keys_o, &segment) ||
        mcpy_keyed(keys_o, &k) < 0)
        return NULL;
    NOGIL(mc_store_batch_replica_clear(MCPY_STORE(self), k.keys, (size_t)k.n, segment, k.codes));
    ret = PyList_New(0);
    for (Py_ssize_t i = 0; ret && i < k.n; i++) {
        if (k.codes[i] == 0 && PyList_Append(ret, PyTuple_GetItem(k.hold, i)) < 0)
            Py_CLEAR(ret);
    }
    mcpy_keyed_free(&k);
    return ret;
}

/* bad[j] gets the check's code for range j (0: fine); a bad range is made empty, so the C call
 * moves nothing for it, and its result is the check's code. */
static void screen_ranges(mc_store_t *s, mc_store_range_t *ranges, size_t n, int *bad) {
    for (size_t j = 0; j < n; j++) {
        mc_store_iov_t v = {ranges[j].dst, (size_t)ranges[j].len};
        bad[j] = v.len ? mcpy_check_iovs(s, &v, 1, 1) : 0;
        if (bad[j] != 0)
            ranges[j].len = 0;
    }
}

/* _get_ranges_raw(keys, counts, dsts, src_offsets, sizes) -> one result per range: key i owns the
 * next counts[i] entries of the three flat lists. The facade's get_into_ranges and
 * batch_get_into_multi_buffer_ranges give it their nested shapes. */
PyObject *mcpy_get_ranges_raw(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwl[] = {"keys", "counts", "dsts", "src_offsets", "sizes", NULL};
    PyObject *ret;
    mcpy_flat_ranges_t f;
    int rc;
    if (mcpy_flat_ranges(args, kw, "_get_ranges_raw", kwl, sizeof(mc_store_range_read_t),
                         sizeof(mc_store_range_t), &f) != 0)
        return NULL;
    mc_store_range_read_t *reads = f.recs;
    mc_store_range_t *ranges = f.ranges;
    MCPY_FLAT_RANGES_LINK(f, reads, ranges);
    for (Py_ssize_t j = 0; j < f.total; j++) {
        ranges[j].dst = (void *)(uintptr_t)f.a[j];
        ranges[j].src_off = f.b[j];
        ranges[j].len = f.c[j];
    }
    NOGIL(screen_ranges(MCPY_STORE(self), ranges, (size_t)f.total, f.bad);
          rc = mc_store_batch_get_ranges(MCPY_STORE(self), reads, (size_t)f.n));
    ret = PyList_New(f.total);
    for (Py_ssize_t j = 0; ret && j < f.total; j++)
        PyList_SetItem(ret, j,
                       PyLong_FromLongLong(rc != 0    ? rc
                                           : f.bad[j] ? f.bad[j]
                                                      : ranges[j].result));
    mcpy_flat_ranges_free(&f);
    return ret;
}
