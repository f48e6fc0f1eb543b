/* TransferNotify (name + msg, as in the reference) and the TransferEngine notify methods. */
#include <stddef.h>
#include <string.h>

#include "engine_py.h"

/* Py_XSETREF is not in the limited API. Stores v (a new reference) and drops the old value. */
static void replace_ref(PyObject **slot, PyObject *v) {
    PyObject *old = *slot;
    *slot = v;
    Py_XDECREF(old);
}

/* msg may be str (the reference's type) or any bytes-like object (binary payloads). */
static int check_msg(PyObject *v) {
    if (PyUnicode_Check(v) || PyObject_CheckBuffer(v))
        return 0;
    PyErr_Format(PyExc_TypeError, "TransferNotify.msg must be str or bytes, not %R",
                 (PyObject *)Py_TYPE(v));
    return -1;
}

static int check_name(PyObject *v) {
    if (PyUnicode_Check(v))
        return 0;
    PyErr_Format(PyExc_TypeError, "TransferNotify.name must be str, not %R",
                 (PyObject *)Py_TYPE(v));
    return -1;
}

static PyObject *notify_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    allocfunc alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
    mcpy_notify_t *self = (mcpy_notify_t *)alloc(type, 0);
    if (!self)
        return NULL;
    self->name = PyUnicode_FromString("");
    self->msg = PyUnicode_FromString("");
    if (!self->name || !self->msg) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static int notify_init(PyObject *obj, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"name", "msg", NULL};
    mcpy_notify_t *self = (mcpy_notify_t *)obj;
    PyObject *name = NULL, *msg = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO:TransferNotify", kwlist, &name, &msg))
        return -1;
    if ((name && check_name(name) < 0) || (msg && check_msg(msg) < 0))
        return -1;
    if (name)
        replace_ref(&self->name, Py_NewRef(name));
    if (msg)
        replace_ref(&self->msg, Py_NewRef(msg));
    return 0;
}

static void notify_dealloc(PyObject *obj) {
    mcpy_notify_t *self = (mcpy_notify_t *)obj;
    PyTypeObject *tp = Py_TYPE(obj);
    Py_CLEAR(self->name);
    Py_CLEAR(self->msg);
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tp_free(obj);
    Py_DECREF(tp);
}

static PyObject *notify_repr(PyObject *obj) {
    mcpy_notify_t *self = (mcpy_notify_t *)obj;
    return PyUnicode_FromFormat("TransferNotify(name=%R, msg=%R)", self->name, self->msg);
}

/* name and msg: one getter and setter, the closure saying which field and how to check it. */
typedef struct {
    size_t offset;
    int (*check)(PyObject *);
    const char *deleted; /* the message for del */
} field_t;

static const field_t name_field = {offsetof(mcpy_notify_t, name), check_name,
                                   "cannot delete TransferNotify.name"};
static const field_t msg_field = {offsetof(mcpy_notify_t, msg), check_msg,
                                  "cannot delete TransferNotify.msg"};

static PyObject **field_slot(PyObject *obj, const field_t *f) {
    return (PyObject **)((char *)obj + f->offset);
}

static PyObject *get_field(PyObject *obj, void *closure) {
    return Py_NewRef(*field_slot(obj, closure));
}

static int set_field(PyObject *obj, PyObject *v, void *closure) {
    const field_t *f = closure;
    if (!v) {
        PyErr_SetString(PyExc_AttributeError, f->deleted);
        return -1;
    }
    if (f->check(v) < 0)
        return -1;
    replace_ref(field_slot(obj, f), Py_NewRef(v));
    return 0;
}

static PyGetSetDef notify_getset[] = {
    {"name", get_field, set_field, "notification name (str)", (void *)&name_field},
    {"msg", get_field, set_field, "payload: str, or bytes when it is not valid UTF-8",
     (void *)&msg_field},
    {NULL, NULL, NULL, NULL, NULL},
};

MCPY_TYPE_SPEC(mcpy_notify_spec, "mooncake._engine.TransferNotify", mcpy_notify_t,
               Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, {Py_tp_new, notify_new},
               {Py_tp_init, notify_init}, {Py_tp_dealloc, notify_dealloc},
               {Py_tp_repr, notify_repr}, {Py_tp_getset, notify_getset},
               {Py_tp_doc,
                "TransferNotify(name='', msg=''): a small message delivered to a peer engine."});

/* str -> UTF-8 bytes; bytes-like -> a bytes copy. */
static PyObject *as_bytes(PyObject *v, const char *what) {
    if (PyUnicode_Check(v))
        return PyUnicode_AsUTF8String(v);
    if (PyObject_CheckBuffer(v))
        return PyBytes_FromObject(v);
    PyErr_Format(PyExc_TypeError, "notify %s must be str or bytes, not %R", what,
                 (PyObject *)Py_TYPE(v));
    return NULL;
}

int mcpy_notify_parts(PyObject *notify, PyObject **name_bytes, PyObject **msg_bytes) {
    int rc = -1;
    PyObject *name = NULL, *msg = NULL, *nb = NULL, *mb = NULL;
    name = PyObject_GetAttrString(notify, "name");
    msg = name ? PyObject_GetAttrString(notify, "msg") : NULL;
    if (!msg) {
        PyErr_Format(PyExc_TypeError,
                     "notify must be a TransferNotify (with .name and .msg), not %R",
                     (PyObject *)Py_TYPE(notify));
        goto out;
    }
    if (!(nb = as_bytes(name, "name")) || !(mb = as_bytes(msg, "msg")))
        goto out;
    /* The name crosses the C API as a C string. */
    if (strlen(PyBytes_AsString(nb)) != (size_t)PyBytes_Size(nb)) {
        PyErr_SetString(PyExc_ValueError, "notify name must not contain NUL characters");
        goto out;
    }
    *name_bytes = nb;
    *msg_bytes = mb;
    nb = mb = NULL;
    rc = 0;
out:
    Py_XDECREF(name);
    Py_XDECREF(msg);
    Py_XDECREF(nb);
    Py_XDECREF(mb);
    return rc;
}

static PyObject *one_notify(PyTypeObject *type, const mc_notify_t *n) {
    PyObject *obj = PyObject_CallNoArgs((PyObject *)type);
    if (!obj)
        return NULL;
    mcpy_notify_t *self = (mcpy_notify_t *)obj;
    const char *name = n->name ? n->name : "";
    PyObject *pyname = PyUnicode_DecodeUTF8(name, (Py_ssize_t)strlen(name), "replace");
    /* A text payload reads as str like the reference's; a binary one stays bytes. */
    PyObject *pymsg = PyUnicode_DecodeUTF8((const char *)n->msg, (Py_ssize_t)n->msg_len, NULL);
    if (!pymsg && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
        pymsg = PyBytes_FromStringAndSize((const char *)n->msg, (Py_ssize_t)n->msg_len);
    }
    if (!pyname || !pymsg) {
        Py_XDECREF(pyname);
        Py_XDECREF(pymsg);
        Py_DECREF(obj);
        return NULL;
    }
    replace_ref(&self->name, pyname);
    replace_ref(&self->msg, pymsg);
    return obj;
}

PyObject *mcpy_notify_list(PyTypeObject *type, const mc_notify_t *arr, size_t count) {
    PyObject *list = PyList_New((Py_ssize_t)count);
    if (!list)
        return NULL;
    for (size_t i = 0; i < count; i++) {
        PyObject *item = one_notify(type, &arr[i]);
        if (!item) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SetItem(list, (Py_ssize_t)i, item); /* steals item */
    }
    return list;
}

PyObject *mcpy_send_notify(PyObject *obj, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"target_hostname", "notify", NULL};
    mcpy_engine_t *self = (mcpy_engine_t *)obj;
    const char *target;
    PyObject *notify, *name = NULL, *msg = NULL;
    int rc = MC_ERR_INVALID_ARGUMENT;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sO:send_notify", kwlist, &target, &notify))
        return NULL;
    if (mcpy_notify_parts(notify, &name, &msg) < 0)
        return NULL;
    mc_engine_t *e = mcpy_engine_get(self);
    const char *n = PyBytes_AsString(name);
    const char *m = PyBytes_AsString(msg);
    size_t mlen = (size_t)PyBytes_Size(msg);
    if (e)
        MCPY_NOGIL(self, rc = mc_engine_notify_send(e, target, n, m, mlen));
    Py_DECREF(name);
    Py_DECREF(msg);
    return PyLong_FromLong(rc);
}

PyObject *mcpy_get_notifies(PyObject *obj, PyTypeObject *defining_class, PyObject *const *args,
                            Py_ssize_t nargs, PyObject *kwnames) {
    mcpy_engine_t *self = (mcpy_engine_t *)obj;
    mc_notify_t *arr = NULL;
    size_t count = 0;
    int rc = MC_ERR_INVALID_ARGUMENT;
    if (nargs != 0 || (kwnames && PyTuple_Size(kwnames) != 0)) {
        PyErr_SetString(PyExc_TypeError, "get_notifies() takes no arguments");
        return NULL;
    }
    mcpy_state_t *st = PyType_GetModuleState(defining_class);
    if (!st)
        return NULL;
    mc_engine_t *e = mcpy_engine_get(self);
    if (e)
        MCPY_NOGIL(self, rc = mc_engine_notifies_fetch(e, &arr, &count));
    if (rc < 0)
        return PyList_New(0);
    PyObject *list = mcpy_notify_list(st->notify_type, arr, count);
    mc_engine_notifies_free(arr, count);
    return list;
}
