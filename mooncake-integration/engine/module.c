/* mooncake._engine: module definition (multi-phase init, per-module state, heap types).
 * The public face is mooncake.engine; this module is private. */
#include "engine_py.h"

static PyObject *mod_strerror(PyObject *mod, PyObject *arg) {
    return mcpy_code_str(arg, mc_strerror);
}

static PyObject *mod_err_name(PyObject *mod, PyObject *arg) {
    return mcpy_code_str(arg, mc_err_name);
}

static PyMethodDef module_methods[] = {
    {"strerror", mod_strerror, METH_O, "strerror(code) -> message for a Transfer Engine code"},
    {"err_name", mod_err_name, METH_O,
     "err_name(code) -> symbolic name, e.g. 'ADDRESS_NOT_REGISTERED'"},
    {NULL, NULL, 0, NULL},
};

static int module_exec(PyObject *mod) {
    mcpy_state_t *st = PyModule_GetState(mod);
    if (mcpy_add_type(mod, &mcpy_engine_spec, &st->engine_type) < 0 ||
        mcpy_add_type(mod, &mcpy_notify_spec, &st->notify_type) < 0 ||
        mcpy_add_type(mod, &mcpy_rpc_spec, &st->rpc_type) < 0)
        return -1;
    if (PyModule_AddStringConstant(mod, "ENGINE_HANDLE_CAPSULE", MCPY_ENGINE_CAPSULE) < 0)
        return -1;
    return 0;
}

MCPY_MODULE_TYPES_GC(mcpy_state_t, MCPY_ENGINE_NTYPES)

static void module_free(void *mod) {
    module_clear((PyObject *)mod);
}

MCPY_MODULE_DEF(
    engine_module, "mooncake._engine",
    "Private CPython binding of the Mooncake Transfer Engine C API; use mooncake.engine.",
    mcpy_state_t);

PyMODINIT_FUNC PyInit__engine(void) {
    return PyModuleDef_Init(&engine_module);
}
