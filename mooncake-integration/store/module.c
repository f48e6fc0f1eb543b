/* mooncake._store: module definition (multi-phase init, module state, heap types).
 * The public face is mooncake.store; this module is private. */
#include "store_py.h"

static PyObject *mod_strerror(PyObject *mod, PyObject *arg) {
    return mcpy_code_str(arg, mc_store_strerror);
}

static PyObject *mod_err_name(PyObject *mod, PyObject *arg) {
    return mcpy_code_str(arg, mc_store_err_name);
}

static PyMethodDef module_methods[] = {
    {"strerror", mod_strerror, METH_O, "strerror(code) -> message for a Store error code"},
    {"err_name", mod_err_name, METH_O, "err_name(code) -> symbolic name, e.g. 'OBJECT_NOT_FOUND'"},
    {NULL, NULL, 0, NULL},
};

static int module_exec(PyObject *mod) {
    mcpy_store_state_t *st = PyModule_GetState(mod);
    if (mcpy_add_type(mod, &mcpy_store_spec, &st->store_type) < 0 ||
        mcpy_add_type(mod, &mcpy_buffer_spec, &st->buffer_type) < 0 || mcpy_dummy_exec(mod, st) < 0)
        return -1;
    if (PyModule_AddIntConstant(mod, "MAX_KEY_LEN", MC_STORE_MAX_KEY_LEN) < 0)
        return -1;
    /* ERR_<NAME> and STORE_ERRORS, from which mooncake.store.StoreError is built. */
    return mcpy_add_error_table(mod, "STORE_ERRORS", 0);
}

MCPY_MODULE_TYPES_GC(mcpy_store_state_t, MCPY_STORE_NTYPES)

static void module_free(void *mod) {
    mcpy_store_state_t *st = PyModule_GetState((PyObject *)mod);
    module_clear((PyObject *)mod);
    if (st)
        mcpy_dummy_free(st);
}

MCPY_MODULE_DEF(store_module, "mooncake._store",
                "Private CPython binding of the Mooncake Store client C API; use mooncake.store.",
                mcpy_store_state_t);

PyMODINIT_FUNC PyInit__store(void) {
    return PyModuleDef_Init(&store_module);
}
