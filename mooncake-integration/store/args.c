/* The store's own argument marshalling: ReplicateConfig and the flat lists of the ranged calls.
 * Keys, integers and lists of them are the shared helpers' (mcpy_common.h). Wrong types raise
 * TypeError, out-of-range numbers ValueError; everything else is the C client's call. */
#include <stdio.h>
#include <string.h>

#include "store_py.h"

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
    PyMem_Free(r->bad);
    PyMem_Free(r->ranges);
    PyMem_Free(r->recs);
    PyMem_Free(r->c);
    PyMem_Free(r->b);
    PyMem_Free(r->a);
    PyMem_Free(r->counts);
    PyMem_Free(r->keys);
    Py_XDECREF(r->hold);
    memset(r, 0, sizeof(*r));
}

int mcpy_flat_ranges(PyObject *args, PyObject *kw, const char *fn, char *kwl[6], size_t rec_size,
                     size_t range_size, mcpy_flat_ranges_t *out) {
    Py_ssize_t nc, na, nb, nl;
    uint64_t total = 0;
    PyObject *objs[5];
    char fmt[64];
    memset(out, 0, sizeof(*out));
    snprintf(fmt, sizeof(fmt), "OOOOO:%s", fn);
    if (!PyArg_ParseTupleAndKeywords(args, kw, fmt, kwl, &objs[0], &objs[1], &objs[2], &objs[3],
                                     &objs[4]))
        return -1;
    out->n = mcpy_keys(objs[0], kwl[0], &out->hold, &out->keys);
    if (out->n < 0) {
        out->n = 0;
        return -1;
    }
    nc = mcpy_u64_array(objs[1], kwl[1], &out->counts);
    na = nc < 0 ? -1 : mcpy_u64_array(objs[2], kwl[2], &out->a);
    nb = na < 0 ? -1 : mcpy_u64_array(objs[3], kwl[3], &out->b);
    nl = nb < 0 ? -1 : mcpy_u64_array(objs[4], kwl[4], &out->c);
    if (nl < 0)
        goto fail;
    for (Py_ssize_t i = 0; i < nc; i++)
        total += out->counts[i];
    if (nc != out->n || na != nb || na != nl || (uint64_t)na != total) {
        PyErr_Format(PyExc_ValueError, "%s: list lengths disagree", fn);
        goto fail;
    }
    out->total = na;
    out->recs = PyMem_Calloc((size_t)(out->n ? out->n : 1), rec_size);
    out->ranges = PyMem_Calloc((size_t)(na ? na : 1), range_size);
    out->bad = PyMem_Calloc((size_t)(na > out->n ? na : out->n ? out->n : 1), sizeof(int));
    if (out->recs && out->ranges && out->bad)
        return 0;
    PyErr_NoMemory();
fail:
    mcpy_flat_ranges_free(out);
    return -1;
}

int mcpy_keyed(PyObject *keys_o, mcpy_keyed_t *k) {
    memset(k, 0, sizeof(*k));
    k->n = mcpy_keys(keys_o, "keys", &k->hold, &k->keys);
    if (k->n < 0) {
        k->n = 0;
        return -1;
    }
    k->codes = PyMem_Calloc((size_t)(k->n ? k->n : 1), sizeof(*k->codes));
    if (!k->codes) {
        PyErr_NoMemory();
        mcpy_keyed_free(k);
        return -1;
    }
    return 0;
}

void mcpy_keyed_free(mcpy_keyed_t *k) {
    PyMem_Free(k->codes);
    PyMem_Free(k->keys);
    Py_XDECREF(k->hold);
    memset(k, 0, sizeof(*k));
}
