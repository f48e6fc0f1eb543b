/* mooncake._engine: module definition (multi-phase init, per-module state, heap types).
 * The public face is mooncake.engine; this module is private. */
#include "engine_py.h"

static PyObject *mod_strerror(PyObject *mod, PyObject *arg) {
    long code = PyLong_AsLong(arg);
    if (code == -1 && PyErr_Occurred())
        return NULL;
    return PyUnicode_FromString(mc_strerror((int)code));
}

static PyObject *mod_err_name(PyObject *mod, PyObject *arg) {
    long code = PyLong_AsLong(arg);
    if (code == -1 && PyErr_Occurred())
        return NULL;
    return PyUnicode_FromString(mc_err_name((int)code));
}

static PyMethodDef module_methods[] = {
    {"strerror", mod_strerror, METH_O, "strerror(code) -> message for a Transfer Engine code"},
    {"err_name", mod_err_name, METH_O,
     "err_name(code) -> symbolic name, e.g. 'ADDRESS_NOT_REGISTERED'"},
    {NULL, NULL, 0, NULL},
};

static int add_type(PyObject *mod, PyType_Spec *spec, PyTypeObject **slot) {
    PyObject *t = PyType_FromModuleAndSpec(mod, spec, NULL);
    if (!t)
        return -1;
    *slot = (PyTypeObject *)t;
    /* The spec name is dotted; the attribute is the last component. */
    const char *dot = spec->name;
    for (const char *p = spec->name; *p; p++)
        if (*p == '.')
            dot = p + 1;
    return PyModule_AddObjectRef(mod, dot, t);
}

static int module_exec(PyObject *mod) {
    mcpy_state_t *st = PyModule_GetState(mod);
    if (add_type(mod, &mcpy_engine_spec, &st->engine_type) < 0 ||
        add_type(mod, &mcpy_notify_spec, &st->notify_type) < 0 ||
        add_type(mod, &mcpy_rpc_spec, &st->rpc_type) < 0)
        return -1;
    if (PyModule_AddStringConstant(mod, "ENGINE_HANDLE_CAPSULE", MCPY_ENGINE_CAPSULE) < 0)
        return -1;
    return 0;
}

static int module_traverse(PyObject *mod, visitproc visit, void *arg) {
    mcpy_state_t *st = PyModule_GetState(mod);
    if (st) {
        Py_VISIT(st->engine_type);
        Py_VISIT(st->notify_type);
        Py_VISIT(st->rpc_type);
    }
    return 0;
}

static int module_clear(PyObject *mod) {
    mcpy_state_t *st = PyModule_GetState(mod);
    if (st) {
        Py_CLEAR(st->engine_type);
        Py_CLEAR(st->notify_type);
        Py_CLEAR(st->rpc_type);
    }
    return 0;
}

static void module_free(void *mod) {
    module_clear((PyObject *)mod);
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, (void *)module_exec},
    {0, NULL},
};

static struct PyModuleDef engine_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "mooncake._engine",
    .m_doc = "Private CPython binding of the Mooncake Transfer Engine C API; use mooncake.engine.",
    .m_size = sizeof(mcpy_state_t),
    .m_methods = module_methods,
    .m_slots = module_slots,
    .m_traverse = module_traverse,
    .m_clear = module_clear,
    .m_free = module_free,
};

PyMODINIT_FUNC PyInit__engine(void) {
    return PyModuleDef_Init(&engine_module);
}
