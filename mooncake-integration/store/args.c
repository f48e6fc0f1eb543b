/* Argument marshalling: keys, integers, lists, ReplicateConfig. Wrong types raise TypeError,
 * out-of-range numbers ValueError; everything else is the C client's call. */
#include <string.h>

#include "store_py.h"

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

/* The walk shared by mcpy_keys and mcpy_u64_array: a sequence (not str or bytes) of n items, each
 * converted by conv into a PyMem array of elements of size bytes. On success *hold is the tuple
 * copy the converted items may borrow from; on failure both outputs are NULL. */
static Py_ssize_t seq_array(PyObject *seq, const char *what, const char *kind, size_t size,
                            int (*conv)(PyObject *, void *), PyObject **hold, void **out) {
    PyObject *t = NULL;
    char *arr = NULL;
    Py_ssize_t n = -1;
    *hold = NULL;
    *out = NULL;
    if (PyUnicode_Check(seq) || PyBytes_Check(seq) || !PySequence_Check(seq)) {
        PyErr_Format(PyExc_TypeError, "%s must be a list of %s", what, kind);
        return -1;
    }
    /* A tuple copy: the caller's list may change while the GIL is released. */
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

static int conv_key(PyObject *obj, void *out) {
    return mcpy_key(obj, (const char **)out);
}

Py_ssize_t mcpy_keys(PyObject *seq, const char *what, PyObject **hold, const char ***keys) {
    void *arr;
    Py_ssize_t n = seq_array(seq, what, "str", sizeof(**keys), conv_key, hold, &arr);
    *keys = arr;
    return n;
}

int mcpy_conv_u64(PyObject *obj, void *out) {
    unsigned long long v;
    if (!PyLong_Check(obj) || PyBool_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "expected an int (address or size), got %R",
                     (PyObject *)Py_TYPE(obj));
        return 0;
    }
    v = PyLong_AsUnsignedLongLong(obj);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%R is not a valid address or size", obj);
        return 0;
    }
    *(uint64_t *)out = (uint64_t)v;
    return 1;
}

int mcpy_conv_size(PyObject *obj, void *out) {
    uint64_t v;
    if (!mcpy_conv_u64(obj, &v))
        return 0;
    if (v > SIZE_MAX) {
        PyErr_Format(PyExc_ValueError, "size %R does not fit in size_t", obj);
        return 0;
    }
    *(size_t *)out = (size_t)v;
    return 1;
}

Py_ssize_t mcpy_u64_array(PyObject *seq, const char *what, uint64_t **out) {
    PyObject *hold;
    void *arr;
    Py_ssize_t n = seq_array(seq, what, "int", sizeof(**out), mcpy_conv_u64, &hold, &arr);
    /* The integers are copies: nothing borrows from the tuple. */
    Py_XDECREF(hold);
    *out = arr;
    return n;
}

PyObject *mcpy_int_list(const int *v, Py_ssize_t n) {
    PyObject *l = PyList_New(n);
    for (Py_ssize_t i = 0; l && i < n; i++) {
        PyObject *x = PyLong_FromLong(v[i]);
        if (!x) {
            Py_DECREF(l);
            return NULL;
        }
        PyList_SetItem(l, i, x);
    }
    return l;
}

PyObject *mcpy_i64_list(const int64_t *v, Py_ssize_t n) {
    PyObject *l = PyList_New(n);
    for (Py_ssize_t i = 0; l && i < n; i++) {
        PyObject *x = PyLong_FromLongLong(v[i]);
        if (!x) {
            Py_DECREF(l);
            return NULL;
        }
        PyList_SetItem(l, i, x);
    }
    return l;
}

/* Attribute as a C int; missing attributes keep the default (callers probe optional ones). */
static int attr_int(PyObject *cfg, const char *name, long long *out) {
    PyObject *v = PyObject_GetAttrString(cfg, name);
    if (!v) {
        if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
            PyErr_Clear();
            return 1;
        }
        return 0;
    }
    if (v != Py_None) {
        if (!PyLong_Check(v)) {
            PyErr_Format(PyExc_TypeError, "ReplicateConfig.%s must be int or bool", name);
            Py_DECREF(v);
            return 0;
        }
        *out = PyLong_AsLongLong(v);
        if (*out == -1 && PyErr_Occurred()) {
            Py_DECREF(v);
            return 0;
        }
    }
    Py_DECREF(v);
    return 1;
}

/* Appends str s to the preferred list; keeps it alive in hold. */
static int add_pref(mcpy_rconfig_t *c, PyObject *s) {
    Py_ssize_t n;
    const char *p;
    if (!PyUnicode_Check(s)) {
        PyErr_SetString(PyExc_TypeError, "preferred segments must be str");
        return 0;
    }
    if (c->rc.preferred_segment_count >= 8) {
        PyErr_SetString(PyExc_ValueError, "at most 8 preferred segments");
        return 0;
    }
    p = PyUnicode_AsUTF8AndSize(s, &n);
    if (!p || PyList_Append(c->hold, s) < 0)
        return 0;
    c->pref[c->rc.preferred_segment_count++] = p;
    return 1;
}

int mcpy_rconfig(PyObject *cfg, mcpy_rconfig_t *c) {
    long long replica_num = 1, soft = 0, hard = 0, ttl = -1;
    PyObject *v = NULL;
    int ok = 0;

    memset(c, 0, sizeof(*c));
    mc_replicate_config_init(&c->rc);
    c->hold = PyList_New(0);
    if (!c->hold)
        return 0;
    c->rc.preferred_segments = c->pref;
    if (!cfg || cfg == Py_None)
        return 1;
    if (!PyObject_HasAttrString(cfg, "replica_num")) {
        PyErr_Format(PyExc_TypeError, "config must be a ReplicateConfig, not %R",
                     (PyObject *)Py_TYPE(cfg));
        goto out;
    }
    /* soft_pin_action (the reference's SoftPinAction) when the config has it, else the older
     * boolean with_soft_pin (True = ENABLE). */
    if (PyObject_HasAttrString(cfg, "soft_pin_action")) {
        if (!attr_int(cfg, "soft_pin_action", &soft))
            goto out;
    } else if (!attr_int(cfg, "with_soft_pin", &soft)) {
        goto out;
    } else {
        soft = soft ? MC_SOFT_PIN_ENABLE : MC_SOFT_PIN_PRESERVE;
    }
    if (!attr_int(cfg, "replica_num", &replica_num) || !attr_int(cfg, "with_hard_pin", &hard) ||
        !attr_int(cfg, "soft_pin_ttl_ms", &ttl))
        goto out;
    if (soft < MC_SOFT_PIN_PRESERVE || soft > MC_SOFT_PIN_DISABLE) {
        PyErr_Format(PyExc_ValueError, "soft_pin_action must be a SoftPinAction, not %lld", soft);
        goto out;
    }
    if (replica_num < 1 || replica_num > 8) {
        PyErr_Format(PyExc_ValueError, "replica_num must be 1..8, not %lld", replica_num);
        goto out;
    }
    c->rc.replica_num = (int)replica_num;
    c->rc.with_soft_pin = (int)soft;
    c->rc.with_hard_pin = hard != 0;
    c->rc.soft_pin_ttl_ms = ttl;
    v = PyObject_GetAttrString(cfg, "preferred_segment");
    if (!v)
        PyErr_Clear();
    else if (v != Py_None && !(PyUnicode_Check(v) && PyUnicode_GetLength(v) == 0) &&
             !add_pref(c, v))
        goto out;
    Py_CLEAR(v);
    v = PyObject_GetAttrString(cfg, "preferred_segments");
    if (!v) {
        PyErr_Clear();
    } else if (v != Py_None) {
        PyObject *t = PySequence_Tuple(v);
        if (!t)
            goto out;
        for (Py_ssize_t i = 0; i < PyTuple_Size(t); i++) {
            if (!add_pref(c, PyTuple_GetItem(t, i))) {
                Py_DECREF(t);
                goto out;
            }
        }
        Py_DECREF(t);
    }
    ok = 1;
out:
    Py_XDECREF(v);
    if (!ok)
        mcpy_rconfig_release(c);
    return ok;
}

void mcpy_rconfig_release(mcpy_rconfig_t *c) {
    Py_CLEAR(c->hold);
}

void mcpy_flat_ranges_free(mcpy_flat_ranges_t *r) {
    PyMem_Free(r->c);
    PyMem_Free(r->b);
    PyMem_Free(r->a);
    PyMem_Free(r->counts);
    PyMem_Free(r->keys);
    Py_XDECREF(r->hold);
    memset(r, 0, sizeof(*r));
}

int mcpy_flat_ranges(PyObject *const objs[5], const char *const names[5], const char *fn,
                     mcpy_flat_ranges_t *out) {
    Py_ssize_t nc, na, nb, nl;
    uint64_t total = 0;
    memset(out, 0, sizeof(*out));
    out->n = mcpy_keys(objs[0], names[0], &out->hold, &out->keys);
    if (out->n < 0) {
        out->n = 0;
        return -1;
    }
    nc = mcpy_u64_array(objs[1], names[1], &out->counts);
    na = nc < 0 ? -1 : mcpy_u64_array(objs[2], names[2], &out->a);
    nb = na < 0 ? -1 : mcpy_u64_array(objs[3], names[3], &out->b);
    nl = nb < 0 ? -1 : mcpy_u64_array(objs[4], names[4], &out->c);
    if (nl < 0)
        goto fail;
    for (Py_ssize_t i = 0; i < nc; i++)
        total += out->counts[i];
    if (nc != out->n || na != nb || na != nl || (uint64_t)na != total) {
        PyErr_Format(PyExc_ValueError, "%s: list lengths disagree", fn);
        goto fail;
    }
    out->total = na;
    return 0;
fail:
    mcpy_flat_ranges_free(out);
    return -1;
}
