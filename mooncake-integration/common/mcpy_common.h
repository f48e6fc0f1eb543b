/* What the two CPython extensions (mooncake._engine and mooncake._store) share, so that each
 * converts an address, a length, a list or an error code the same way: the limited-API prelude,
 * the "O&" argument converters, Python lists from C results, the module-level error functions,
 * heap type registration and the error constants generated from the one error table.
 *
 * Each extension compiles its own copy of mcpy_common.c (the symbols are hidden), so nothing here
 * keeps state: both modules may be loaded into one interpreter, and several interpreters too. */
#ifndef MC_MCPY_COMMON_H
#define MC_MCPY_COMMON_H

/* One binary serves CPython 3.11 and every newer version (abi3). The build passes
 * Py_LIMITED_API itself for abi3 builds; a 3.10 interpreter (no PyObject_GetBuffer in its limited
 * API) gets a version-specific build of the same code. */
#include <patchlevel.h>
#if !defined(Py_LIMITED_API) && PY_VERSION_HEX >= 0x030B0000
#define Py_LIMITED_API 0x030B0000
#endif
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

#include "mooncake/error.h"

/* The name the engine's get_engine() gives its capsule; the store's setup(engine=...) checks it. */
#define MCPY_ENGINE_CAPSULE "mooncake.engine_handle"

/* Runs stmt (a C call that may block on the network, a peer or the master) without the GIL. */
#define MCPY_NOGIL_RUN(stmt)                                                                       \
    do {                                                                                           \
        Py_BEGIN_ALLOW_THREADS stmt;                                                               \
        Py_END_ALLOW_THREADS                                                                       \
    } while (0)

/* A heap type's slot list and spec in one place (the slot list's terminator is added here). */
#define MCPY_TYPE_SPEC(spec, qualname, ctype, type_flags, ...)                                     \
    static PyType_Slot spec##_slots[] = {__VA_ARGS__, {0, NULL}};                                  \
    PyType_Spec spec = {                                                                           \
        .name = qualname, .basicsize = sizeof(ctype), .flags = type_flags, .slots = spec##_slots}

/* The module definition of an extension whose file defines module_methods, module_exec,
 * module_traverse, module_clear and module_free: multi-phase init, a state of state_type. */
#define MCPY_MODULE_DEF(def, qualname, doc, state_type)                                            \
    static PyModuleDef_Slot def##_slots[] = {{Py_mod_exec, (void *)module_exec}, {0, NULL}};       \
    static struct PyModuleDef def = {                                                              \
        PyModuleDef_HEAD_INIT,         .m_name = qualname,          .m_doc = doc,                  \
        .m_size = sizeof(state_type),  .m_methods = module_methods, .m_slots = def##_slots,        \
        .m_traverse = module_traverse, .m_clear = module_clear,     .m_free = module_free}

/* "O&" converters for addresses and lengths: non-negative integers that fit (ValueError when out
 * of range). Two spellings, each kept as its reference binding has it: the engine's methods take
 * any object with __index__ (numpy integers too), the store's an int only (bool is a TypeError).
 * The _size forms also check that the value fits in size_t. */
int mcpy_conv_u64(PyObject *obj, void *out);
int mcpy_conv_size(PyObject *obj, void *out);
int mcpy_conv_index_u64(PyObject *obj, void *out);
int mcpy_conv_index_size(PyObject *obj, void *out);

/* A sequence (never str or bytes) of integers, converted as mcpy_conv_u64 (mcpy_u64_array) or
 * mcpy_conv_index_u64 (mcpy_index_u64_array), into a PyMem_Malloc'ed array (free with
 * PyMem_Free). what names the argument in error messages. Returns the count, or -1 with an
 * exception set and *out NULL. */
Py_ssize_t mcpy_u64_array(PyObject *seq, const char *what, uint64_t **out);
Py_ssize_t mcpy_index_u64_array(PyObject *seq, const char *what, uint64_t **out);

/* Keys: str only (TypeError otherwise, ValueError on an embedded NUL). The pointer lives as long
 * as the str object. */
int mcpy_key(PyObject *obj, const char **out);
/* A list/tuple of keys. *hold keeps them alive (a tuple; DECREF it), *keys is PyMem_Malloc'ed. */
Py_ssize_t mcpy_keys(PyObject *seq, const char *what, PyObject **hold, const char ***keys);

/* Stores item (a new reference, or NULL when making it failed) at index i of *list. On NULL the
 * list is dropped (*list becomes NULL, the exception stays set) and 0 returned, so a loop that
 * fills a list stops there; 1 otherwise. */
int mcpy_list_set(PyObject **list, Py_ssize_t i, PyObject *item);

/* A Python list of ints from C ints / int64s; NULL with an exception set. */
PyObject *mcpy_int_list(const int *v, Py_ssize_t n);
PyObject *mcpy_i64_list(const int64_t *v, Py_ssize_t n);

/* The module functions strerror(code) and err_name(code): describe(code) as a str. */
PyObject *mcpy_code_str(PyObject *code, const char *(*describe)(int));

/* Creates the heap type of spec for module mod and adds it under the last component of the spec's
 * dotted name; *slot keeps a reference for the module state. 0, or -1 with an exception set. */
int mcpy_add_type(PyObject *mod, PyType_Spec *spec, PyTypeObject **slot);
/* The module state of each extension begins with its heap types (an array of n): its traverse and
 * clear. */
int mcpy_visit_types(PyTypeObject **types, size_t n, visitproc visit, void *arg);
void mcpy_clear_types(PyTypeObject **types, size_t n);
/* module_traverse and module_clear of a module whose state (state_type) has the array types of
 * ntypes heap types. */
#define MCPY_MODULE_TYPES_GC(state_type, ntypes)                                                   \
    static int module_traverse(PyObject *mod, visitproc visit, void *arg) {                        \
        state_type *st = PyModule_GetState(mod);                                                   \
        return st ? mcpy_visit_types(st->types, ntypes, visit, arg) : 0;                           \
    }                                                                                              \
    static int module_clear(PyObject *mod) {                                                       \
        state_type *st = PyModule_GetState(mod);                                                   \
        if (st)                                                                                    \
            mcpy_clear_types(st->types, ntypes);                                                   \
        return 0;                                                                                  \
    }

/* Adds ERR_<NAME> for every code of the error table (mooncake/error.h), and the tuple
 * attribute table_name of (NAME, code) pairs of the codes whose domain is TE or BOTH
 * (domain_te) or STORE or BOTH (!domain_te): the Python layer's only source of error codes.
 * 0, or -1 with an exception set. */
int mcpy_add_error_table(PyObject *mod, const char *table_name, int domain_te);

#endif
