/* mooncake._store: module definition (multi-phase init, module state, heap types).
 * The public face is mooncake.store; this module is private. */
#include "store_py.h"

static PyObject *mod_strerror(PyObject *mod, PyObject *arg) {
    long code = PyLong_AsLong(arg);
    if (code == -1 && PyErr_Occurred())
        return NULL;
    return PyUnicode_FromString(mc_store_strerror((int)code));
}

static PyObject *mod_err_name(PyObject *mod, PyObject *arg) {
    long code = PyLong_AsLong(arg);
    if (code == -1 && PyErr_Occurred())
        return NULL;
    return PyUnicode_FromString(mc_store_err_name((int)code));
}

static PyMethodDef module_methods[] = {
    {"strerror", mod_strerror, METH_O, "strerror(code) -> message for a Store error code"},
    {"err_name", mod_err_name, METH_O, "err_name(code) -> symbolic name, e.g. 'OBJECT_NOT_FOUND'"},
    {NULL, NULL, 0, NULL},
};

static int add_type(PyObject *mod, PyType_Spec *spec, const char *attr, PyTypeObject **slot) {
    PyObject *t = PyType_FromModuleAndSpec(mod, spec, NULL);
    if (!t)
        return -1;
    *slot = (PyTypeObject *)t;
    return PyModule_AddObjectRef(mod, attr, t);
}

/* STORE_ERRORS: ((name, code), ...) of every code a store call can return, straight from the one
 * error table, so that mooncake.store.StoreError knows each of them. */
#define MCPY_DOMAIN_TE 0
#define MCPY_DOMAIN_STORE 1
#define MCPY_DOMAIN_BOTH 1
static int add_store_errors(PyObject *mod) {
    PyObject *list = PyList_New(0);
    int ok = list != NULL;
#define ADD_STORE(name, value, domain, msg)                                                        \
    if (ok && MCPY_DOMAIN_##domain) {                                                              \
        PyObject *pair = Py_BuildValue("(si)", #name, value);                                      \
        ok = pair && PyList_Append(list, pair) == 0;                                               \
        Py_XDECREF(pair);                                                                          \
    }
    MC_ERRNO_MAP(ADD_STORE)
#undef ADD_STORE
    if (ok) {
        PyObject *t = PyList_AsTuple(list);
        ok = t && PyModule_AddObjectRef(mod, "STORE_ERRORS", t) == 0;
        Py_XDECREF(t);
    }
    Py_XDECREF(list);
    return ok ? 0 : -1;
}

static int module_exec(PyObject *mod) {
    mcpy_store_state_t *st = PyModule_GetState(mod);
    if (add_type(mod, &mcpy_store_spec, "MooncakeDistributedStore", &st->store_type) < 0 ||
        add_type(mod, &mcpy_buffer_spec, "Buffer", &st->buffer_type) < 0 ||
        mcpy_dummy_exec(mod, st) < 0)
        return -1;
    if (PyModule_AddIntConstant(mod, "MAX_KEY_LEN", MC_STORE_MAX_KEY_LEN) < 0)
        return -1;
#define ADD_CODE(name, value, domain, msg)                                                         \
    if (PyModule_AddIntConstant(mod, "ERR_" #name, value) < 0)                                     \
        return -1;
    MC_ERRNO_MAP(ADD_CODE)
#undef ADD_CODE
    return add_store_errors(mod);
}

static int module_traverse(PyObject *mod, visitproc visit, void *arg) {
    mcpy_store_state_t *st = PyModule_GetState(mod);
    if (st) {
        Py_VISIT(st->store_type);
        Py_VISIT(st->buffer_type);
        Py_VISIT(st->host_alloc_type);
    }
    return 0;
}

static int module_clear(PyObject *mod) {
    mcpy_store_state_t *st = PyModule_GetState(mod);
    if (st) {
        Py_CLEAR(st->store_type);
        Py_CLEAR(st->buffer_type);
        Py_CLEAR(st->host_alloc_type);
    }
    return 0;
}

static void module_free(void *mod) {
    mcpy_store_state_t *st = PyModule_GetState((PyObject *)mod);
    module_clear((PyObject *)mod);
    if (st)
        mcpy_dummy_free(st);
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, (void *)module_exec},
    {0, NULL},
};

static struct PyModuleDef store_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "mooncake._store",
    .m_doc = "Private CPython binding of the Mooncake Store client C API; use mooncake.store.",
    .m_size = sizeof(mcpy_store_state_t),
    .m_methods = module_methods,
    .m_slots = module_slots,
    .m_traverse = module_traverse,
    .m_clear = module_clear,
    .m_free = module_free,
};

PyMODINIT_FUNC PyInit__store(void) {
    return PyModuleDef_Init(&store_module);
}
