/* mooncake._engine: module definition (multi-phase init, per-module state, heap types).
 * The public face is mooncake.engine; this module is private. */
#include "engine_py.h"
#include "mooncake/common/log.h"

static PyObject *mod_strerror(PyObject *mod, PyObject *arg) {
    return mcpy_code_str(arg, mc_strerror);
}

static PyObject *mod_err_name(PyObject *mod, PyObject *arg) {
    return mcpy_code_str(arg, mc_err_name);
}

/* The C logger's hooks for mooncake.log (the bridge to Python's logging): one logger serves
 * both extensions and every C library of the package, so this module holds the only switch. */
static PyObject *mod_log_redirect(PyObject *mod, PyObject *args) {
    int fd, json;
    if (!PyArg_ParseTuple(args, "ip:_log_redirect", &fd, &json))
        return NULL;
    mc_log_redirect(fd, json);
    Py_RETURN_NONE;
}

static PyObject *mod_log_set_level(PyObject *mod, PyObject *arg) {
    long level = PyLong_AsLong(arg);
    if (level == -1 && PyErr_Occurred())
        return NULL;
    if (level < MC_LOG_ERROR || level > MC_LOG_TRACE) {
        PyErr_Format(PyExc_ValueError, "log level %ld is not 0 (error) .. 4 (trace)", level);
        return NULL;
    }
    mc_log_set_level((int)level);
    Py_RETURN_NONE;
}

static PyObject *mod_log_dropped(PyObject *mod, PyObject *unused) {
    return PyLong_FromUnsignedLongLong(mc_log_dropped());
}

static PyMethodDef module_methods[] = {
    {"_log_redirect", mod_log_redirect, METH_VARARGS,
     "_log_redirect(fd, json) -> None: the C logger writes its lines to fd (-1: stderr again)"},
    {"_log_set_level", mod_log_set_level, METH_O,
     "_log_set_level(level) -> None: 0 error, 1 warn, 2 info, 3 debug, 4 trace"},
    {"_log_dropped", mod_log_dropped, METH_NOARGS,
     "_log_dropped() -> int: lines a full redirect pipe could not take"},
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
