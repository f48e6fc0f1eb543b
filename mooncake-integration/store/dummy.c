/* Dummy clients of a local storage node: MooncakeDistributedStore.setup_dummy and
 * alloc_from_mem_pool, and MooncakeHostMemAllocator (mooncake/store_dummy.h). The module holds
 * one shared-memory pool: blocks from the allocator and from alloc_from_mem_pool come from it,
 * and every dummy store of this process looks there for memory it can hand to its node without a
 * copy. */
#include "mooncake/store_dummy.h"
#include "store_py.h"

/* Fast-call arguments as a tuple and a dict, for PyArg_ParseTupleAndKeywords. */
static int fast_args(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **tup,
                     PyObject **kw) {
    *tup = PyTuple_New(nargs);
    *kw = NULL;
    if (!*tup)
        return 0;
    for (Py_ssize_t i = 0; i < nargs; i++)
        PyTuple_SetItem(*tup, i, Py_NewRef(args[i]));
    if (kwnames && PyTuple_Size(kwnames) > 0) {
        *kw = PyDict_New();
        if (!*kw)
            return 0;
        for (Py_ssize_t i = 0; i < PyTuple_Size(kwnames); i++)
            if (PyDict_SetItem(*kw, PyTuple_GetItem(kwnames, i), args[nargs + i]) < 0)
                return 0;
    }
    return 1;
}

PyObject *mcpy_setup_dummy(PyObject *self, PyTypeObject *cls, PyObject *const *args,
                           Py_ssize_t nargs, PyObject *kwnames) {
    static char *kwlist[] = {"mem_pool_size", "local_buffer_size", "server_address", NULL};
    mcpy_store_state_t *st = PyType_GetModuleState(cls);
    mc_store_dummy_config_t c;
    PyObject *tup = NULL, *kw = NULL;
    uint64_t pool_size = 0, buf_size = 0;
    const char *addr = "";
    int code = 0, ok;
    if (!st)
        return NULL;
    ok = fast_args(args, nargs, kwnames, &tup, &kw) &&
         PyArg_ParseTupleAndKeywords(tup, kw, "O&O&s:setup_dummy", kwlist, mcpy_conv_u64,
                                     &pool_size, mcpy_conv_u64, &buf_size, &addr);
    if (ok) {
        mc_store_dummy_config_init(&c);
        c.mem_pool_size = pool_size;
        c.local_buffer_size = buf_size;
        c.pool = st->shm_pool;
        if (*addr)
            PyOS_snprintf(c.server_address, sizeof(c.server_address), "%s", addr);
        NOGIL(code = mc_store_setup_dummy(MCPY_STORE(self), &c));
    }
    Py_XDECREF(tup);
    Py_XDECREF(kw);
    return ok ? PyLong_FromLong(code) : NULL;
}

PyObject *mcpy_alloc_from_mem_pool(PyObject *self, PyTypeObject *cls, PyObject *const *args,
                                   Py_ssize_t nargs, PyObject *kwnames) {
    mcpy_store_state_t *st = PyType_GetModuleState(cls);
    uint64_t size = 0;
    void *p = NULL;
    if (!st)
        return NULL;
    if (nargs != 1 || (kwnames && PyTuple_Size(kwnames) > 0)) {
        PyErr_SetString(PyExc_TypeError, "alloc_from_mem_pool(size) takes one argument");
        return NULL;
    }
    if (!mcpy_conv_u64(args[0], &size))
        return NULL;
    NOGIL(p = mc_shm_pool_alloc(st->shm_pool, (size_t)size));
    return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)p);
}

/* ---- MooncakeHostMemAllocator ---------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD mc_shm_pool_t *pool;
    PyObject *module; /* keeps the pool alive */
} mcpy_host_alloc_t;

static PyObject *host_alloc_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    mcpy_store_state_t *st = PyType_GetModuleState(type);
    PyObject *mod = PyType_GetModule(type);
    mcpy_host_alloc_t *self;
    if (!st || !mod)
        return NULL;
    if (PyTuple_Size(args) > 0 || (kw && PyDict_Size(kw) > 0)) {
        PyErr_SetString(PyExc_TypeError, "MooncakeHostMemAllocator() takes no arguments");
        return NULL;
    }
    self = (mcpy_host_alloc_t *)PyType_GenericNew(type, NULL, NULL);
    if (!self)
        return NULL;
    self->pool = st->shm_pool;
    self->module = Py_NewRef(mod);
    return (PyObject *)self;
}

static void host_alloc_dealloc(PyObject *obj) {
    PyTypeObject *tp = Py_TYPE(obj);
    Py_CLEAR(((mcpy_host_alloc_t *)obj)->module);
    ((freefunc)PyType_GetSlot(tp, Py_tp_free))(obj);
    Py_DECREF(tp);
}

static PyObject *host_alloc_alloc(PyObject *obj, PyObject *arg) {
    mcpy_host_alloc_t *self = (mcpy_host_alloc_t *)obj;
    uint64_t size = 0;
    void *p = NULL;
    if (!mcpy_conv_u64(arg, &size))
        return NULL;
    NOGIL(p = mc_shm_pool_alloc(self->pool, (size_t)size));
    return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)p);
}

static PyObject *host_alloc_free(PyObject *obj, PyObject *arg) {
    mcpy_host_alloc_t *self = (mcpy_host_alloc_t *)obj;
    uint64_t ptr = 0;
    int code = 0;
    if (!mcpy_conv_u64(arg, &ptr))
        return NULL;
    NOGIL(code = mc_shm_pool_free(self->pool, (void *)(uintptr_t)ptr));
    return PyLong_FromLong(code);
}

static PyMethodDef host_alloc_methods[] = {
    {"alloc", host_alloc_alloc, METH_O,
     "alloc(size) -> address of a zeroed shared-memory block (0 when none can be had) that a "
     "storage node moves without a copy"},
    {"free", host_alloc_free, METH_O, "free(ptr) -> 0, or a negative code for no such block"},
    {NULL, NULL, 0, NULL},
};

MCPY_TYPE_SPEC(mcpy_host_alloc_spec, "mooncake._store.MooncakeHostMemAllocator", mcpy_host_alloc_t,
               Py_TPFLAGS_DEFAULT, {Py_tp_new, host_alloc_new}, {Py_tp_dealloc, host_alloc_dealloc},
               {Py_tp_methods, host_alloc_methods},
               {Py_tp_doc,
                "Shared memory that dummy clients hand to their storage node without a copy "
                "(mooncake/store_dummy.h)."});

int mcpy_dummy_exec(PyObject *mod, mcpy_store_state_t *st) {
    if (mc_shm_pool_create(&st->shm_pool) != 0) {
        PyErr_NoMemory();
        return -1;
    }
    return mcpy_add_type(mod, &mcpy_host_alloc_spec, &st->host_alloc_type);
}

void mcpy_dummy_free(mcpy_store_state_t *st) {
    mc_shm_pool_destroy(st->shm_pool);
    st->shm_pool = NULL;
}
