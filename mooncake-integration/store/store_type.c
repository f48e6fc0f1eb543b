/* MooncakeDistributedStore: construction, setup (arguments, dict or environment), close. */
#include <string.h>

#include "store_py.h"

static PyObject *store_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    mcpy_store_t *self = (mcpy_store_t *)PyType_GenericNew(type, NULL, NULL);
    if (!self)
        return NULL;
    if (mc_store_create(&self->store) != 0) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    return (PyObject *)self;
}

static void store_dealloc(PyObject *obj) {
    mcpy_store_t *self = (mcpy_store_t *)obj;
    PyTypeObject *tp = Py_TYPE(obj);
    mc_store_t *s = self->store;
    PyObject_GC_UnTrack(obj);
    self->store = NULL;
    if (s) {
        /* Unmounting talks to the master: not with the GIL held. */
        Py_BEGIN_ALLOW_THREADS mc_store_destroy(s);
        Py_END_ALLOW_THREADS
    }
    mcpy_release_held(obj);
    Py_CLEAR(self->engine);
    ((freefunc)PyType_GetSlot(tp, Py_tp_free))(obj);
    Py_DECREF(tp);
}

static const char *const size_keys[] = {"global_segment_size", "local_buffer_size",
                                        "client_http_port"};
static const char *const bool_keys[] = {"enable_ssd_offload", "enable_client_http_server"};

static int in_list(const char *key, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(key, list[i]) == 0)
            return 1;
    return 0;
}

/* Applies one explicit setting. Sizes take int or str ("4gb"); booleans bool; the rest str.
 * A C-side refusal (bad size string, unknown key) is reported as the code it returned. */
static int apply(mc_store_config_t *cfg, const char *key, PyObject *v, int *code) {
    PyObject *s = NULL;
    const char *text;
    int ok = 0;
    if (v == Py_None) { /* as the reference's binding: None is no string or number */
        PyErr_Format(PyExc_TypeError, "setup(): %s must not be None", key);
        return 0;
    }
    if (in_list(key, bool_keys, 2)) {
        if (!PyBool_Check(v)) {
            PyErr_Format(PyExc_TypeError, "setup(): %s must be bool", key);
            return 0;
        }
        s = PyUnicode_FromString(v == Py_True ? "true" : "false");
    } else if (in_list(key, size_keys, 3)) {
        if (PyBool_Check(v) || (!PyLong_Check(v) && !PyUnicode_Check(v))) {
            PyErr_Format(PyExc_TypeError,
                         "setup(): %s must be an int or a size string like "
                         "\"4gb\", not %R",
                         key, (PyObject *)Py_TYPE(v));
            return 0;
        }
        s = PyObject_Str(v);
    } else {
        if (!PyUnicode_Check(v)) {
            PyErr_Format(PyExc_TypeError, "setup(): %s must be str, not %R", key,
                         (PyObject *)Py_TYPE(v));
            return 0;
        }
        Py_INCREF(v);
        s = v;
    }
    if (!s)
        return 0;
    text = PyUnicode_AsUTF8AndSize(s, NULL);
    if (!text)
        goto out;
    if (*code == 0)
        *code = mc_store_config_set(cfg, key, text);
    ok = 1;
out:
    Py_DECREF(s);
    return ok;
}

static int take_engine(mcpy_store_t *self, PyObject *engine, mc_store_config_t *cfg) {
    if (!engine || engine == Py_None)
        return 1;
    if (!PyCapsule_IsValid(engine, MCPY_ENGINE_CAPSULE)) {
        PyErr_SetString(PyExc_TypeError, "setup(): engine must be the handle returned by "
                                         "TransferEngine.get_engine()");
        return 0;
    }
    cfg->engine = PyCapsule_GetPointer(engine, MCPY_ENGINE_CAPSULE);
    if (!cfg->engine)
        return 0;
    Py_INCREF(engine);
    Py_XDECREF(self->engine);
    self->engine = engine;
    return 1;
}

static char *setup_kwlist[] = {"local_hostname",
                               "metadata_server",
                               "global_segment_size",
                               "local_buffer_size",
                               "protocol",
                               "rdma_devices",
                               "master_server_addr",
                               "engine",
                               "enable_ssd_offload",
                               "ssd_offload_path",
                               "tenant_id",
                               "enable_client_http_server",
                               "client_http_port",
                               NULL};

/* setup(local_hostname, metadata_server, global_segment_size, local_buffer_size, protocol,
 *       rdma_devices, master_server_addr, engine=None, ...) or setup(config_dict).
 * Settings not given come from MOONCAKE_CONFIG_PATH / MOONCAKE_* / defaults (the C client). */
/* Remembers an explicitly given setting (and its alias) so that neither MOONCAKE_CONFIG_PATH nor
 * the environment is consulted for it: explicit arguments win. */
#define MCPY_MAX_SKIP 32
static void add_explicit(const char **skip, size_t *n, const char *key) {
    static const char *const aliases[][2] = {{"master_server_addr", "master_server_address"},
                                             {"rdma_devices", "device_name"}};
    if (*n + 2 > MCPY_MAX_SKIP)
        return;
    skip[(*n)++] = key;
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++) {
        if (strcmp(key, aliases[i][0]) == 0)
            skip[(*n)++] = aliases[i][1];
        else if (strcmp(key, aliases[i][1]) == 0)
            skip[(*n)++] = aliases[i][0];
    }
}

static PyObject *store_setup(PyObject *obj, PyObject *args, PyObject *kw) {
    mcpy_store_t *self = (mcpy_store_t *)obj;
    PyObject *v[13] = {NULL};
    mc_store_config_t cfg;
    const char *skip[MCPY_MAX_SKIP];
    size_t nskip = 0;
    int code = 0;

    mc_store_config_init(&cfg);
    if (PyTuple_Size(args) == 1 && PyDict_Check(PyTuple_GetItem(args, 0))) {
        PyObject *d = PyTuple_GetItem(args, 0), *key, *val;
        Py_ssize_t pos = 0;
        PyObject *engine = kw ? PyDict_GetItemString(kw, "engine") : NULL;
        if (kw && PyDict_Size(kw) > (engine ? 1 : 0)) {
            PyErr_SetString(PyExc_TypeError, "setup(config) accepts only the engine keyword");
            return NULL;
        }
        while (PyDict_Next(d, &pos, &key, &val)) {
            const char *k = PyUnicode_Check(key) ? PyUnicode_AsUTF8AndSize(key, NULL) : NULL;
            if (k && val != Py_None)
                add_explicit(skip, &nskip, k);
        }
        code = mc_store_config_load_env_ex(&cfg, skip, nskip);
        pos = 0;
        while (PyDict_Next(d, &pos, &key, &val)) {
            const char *k;
            if (!PyUnicode_Check(key)) {
                PyErr_SetString(PyExc_TypeError, "setup(config): keys must be str");
                return NULL;
            }
            k = PyUnicode_AsUTF8AndSize(key, NULL);
            if (!k)
                return NULL;
            if (strcmp(k, "engine") == 0) {
                engine = val;
                continue;
            }
            if (!in_list(k, (const char *const *)setup_kwlist, 13) &&
                strcmp(k, "master_server_address") != 0 && strcmp(k, "device_name") != 0) {
                PyErr_Format(PyExc_TypeError, "setup(config): unknown key '%s'", k);
                return NULL;
            }
            /* vLLM passes every value as a string, booleans included. */
            if (PyUnicode_Check(val) || PyLong_Check(val)) {
                PyObject *s = PyObject_Str(val);
                const char *t = s ? PyUnicode_AsUTF8AndSize(s, NULL) : NULL;
                if (!t) {
                    Py_XDECREF(s);
                    return NULL;
                }
                if (code == 0)
                    code = mc_store_config_set(&cfg, k, t);
                Py_DECREF(s);
            } else if (!apply(&cfg, k, val, &code)) {
                return NULL;
            }
        }
        if (!take_engine(self, engine, &cfg))
            return NULL;
    } else {
        if (!PyArg_ParseTupleAndKeywords(args, kw, "|OOOOOOOOOOOOO:setup", setup_kwlist, &v[0],
                                         &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8],
                                         &v[9], &v[10], &v[11], &v[12]))
            return NULL;
        for (int i = 0; i < 13; i++)
            if (i != 7 && v[i] && v[i] != Py_None)
                add_explicit(skip, &nskip, setup_kwlist[i]);
        code = mc_store_config_load_env_ex(&cfg, skip, nskip);
        for (int i = 0; i < 13; i++) {
            if (i == 7 || !v[i])
                continue;
            if (!apply(&cfg, setup_kwlist[i], v[i], &code))
                return NULL;
        }
        if (!take_engine(self, v[7], &cfg))
            return NULL;
    }
    if (code == 0) {
        Py_BEGIN_ALLOW_THREADS code = mc_store_setup(self->store, &cfg);
        Py_END_ALLOW_THREADS
    }
    return PyLong_FromLong(code);
}

static PyObject *store_enter(PyObject *obj, PyObject *unused) {
    (void)unused;
    return Py_NewRef(obj);
}

/* Closes the store (closing one that is closed, or was never set up, is fine) and returns False,
 * so that an exception from the with-block propagates. */
static PyObject *store_exit(PyObject *obj, PyObject *args) {
    (void)args;
    Py_BEGIN_ALLOW_THREADS(void) mc_store_close(MCPY_STORE(obj));
    Py_END_ALLOW_THREADS mcpy_release_held(obj);
    Py_RETURN_FALSE;
}

static PyObject *store_close(PyObject *obj, PyObject *unused) {
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = mc_store_close(MCPY_STORE(obj));
    Py_END_ALLOW_THREADS
        /* The store unregistered every buffer: their objects may go now. */
        mcpy_release_held(obj);
    /* close() twice is harmless, as in the reference. */
    return PyLong_FromLong(rc == MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS ? 0 : rc);
}

static PyObject *store_health_check(PyObject *obj, PyObject *unused) {
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = mc_store_health_check(MCPY_STORE(obj));
    Py_END_ALLOW_THREADS return PyLong_FromLong(rc);
}

static PyObject *store_disk_read_count(PyObject *obj, PyObject *unused) {
    return PyLong_FromUnsignedLongLong(
        (unsigned long long)mc_store_disk_read_count(MCPY_STORE(obj)));
}

static PyObject *store_get_hostname(PyObject *obj, PyObject *unused) {
    return PyUnicode_FromString(mc_store_hostname(MCPY_STORE(obj)));
}

#define KW(name, doc)                                                                              \
    { #name, (PyCFunction)(void (*)(void))mcpy_##name, METH_VARARGS | METH_KEYWORDS, doc }
static PyMethodDef store_methods[] = {
    {"setup", (PyCFunction)(void (*)(void))store_setup, METH_VARARGS | METH_KEYWORDS,
     "setup(local_hostname, metadata_server, global_segment_size=16MiB, local_buffer_size=16MiB, "
     "protocol='tcp', rdma_devices='', master_server_addr='127.0.0.1:50051', engine=None) or "
     "setup(config: dict) -> 0 or a negative code"},
    {"close", store_close, METH_NOARGS, "close() -> 0"},
    {"__enter__", store_enter, METH_NOARGS, "with store: ... closes the store when the block ends"},
    {"__exit__", store_exit, METH_VARARGS, NULL},
    {"health_check", store_health_check, METH_NOARGS,
     "health_check() -> 0 healthy, 1 not set up, 2 master unreachable"},
    {"get_hostname", store_get_hostname, METH_NOARGS,
     "get_hostname() -> this client's segment name"},
    {"disk_read_count", store_disk_read_count, METH_NOARGS,
     "disk_read_count() -> objects this client read from a storage node's disk tier"},
    KW(put, "put(key, value, config=None) -> 0 or a negative code"),
    KW(put_parts, "put_parts(key, *parts, config=None) -> 0 or a negative code"),
    KW(put_batch, "put_batch(keys, values, config=None) -> 0 or the first negative code"),
    KW(put_from, "put_from(key, buffer_ptr, size, config=None) -> 0 or a negative code"),
    KW(batch_put_from, "batch_put_from(keys, buffer_ptrs, sizes, config=None) -> list of codes"),
    KW(batch_put_from_multi_buffers,
       "batch_put_from_multi_buffers(keys, all_buffer_ptrs, all_sizes, config=None) -> list of "
       "codes: key i is the concatenation of its buffers"),
    KW(batch_upsert_from_multi_buffers,
       "batch_upsert_from_multi_buffers(keys, all_buffer_ptrs, all_sizes, config=None) -> list of "
       "codes (upsert)"),
    KW(upsert, "upsert(key, value, config=None) -> 0 or a negative code: insert, or replace the "
               "value (readers see the old or the new one, whole)"),
    KW(upsert_parts, "upsert_parts(key, *parts, config=None) -> 0 or a negative code"),
    KW(upsert_batch, "upsert_batch(keys, values, config=None) -> 0 or the first negative code"),
    KW(upsert_from, "upsert_from(key, buffer_ptr, size, config=None) -> 0 or a negative code"),
    KW(batch_upsert_from,
       "batch_upsert_from(keys, buffer_ptrs, sizes, config=None) -> list of codes"),
    KW(get, "get(key) -> bytes (empty on a miss)"),
    KW(get_batch, "get_batch(keys) -> list of bytes"),
    KW(get_into, "get_into(key, buffer_ptr, size) -> object length or a negative code"),
    KW(batch_get_into, "batch_get_into(keys, buffer_ptrs, sizes) -> list of lengths or codes"),
    KW(batch_get_into_multi_buffers,
       "batch_get_into_multi_buffers(keys, all_buffer_ptrs, all_sizes, "
       "prefer_alloc_in_same_node=False) -> list of lengths or codes"),
    {"get_buffer", (PyCFunction)(void (*)(void))mcpy_get_buffer,
     METH_METHOD | METH_FASTCALL | METH_KEYWORDS, "get_buffer(key) -> buffer object or None"},
    {"batch_get_buffer", (PyCFunction)(void (*)(void))mcpy_batch_get_buffer,
     METH_METHOD | METH_FASTCALL | METH_KEYWORDS,
     "batch_get_buffer(keys) -> list of buffer objects (None on a miss)"},
    KW(is_exist, "is_exist(key) -> 1, 0 or -1"),
    KW(batch_is_exist, "batch_is_exist(keys) -> list of 1, 0 or -1"),
    KW(batch_replica_desc_raw,
       "batch_replica_desc_raw(keys) -> list of (code, [(endpoint, address, size, status, "
       "is_disk (0 memory, 1 LOCAL_DISK, 2 DISK), DISK file path or None)]); "
       "the facade's get_replica_desc / batch_get_replica_desc build on it"),
    KW(get_size, "get_size(key) -> size or a negative code"),
    KW(remove, "remove(key, force=False) -> 0 or a negative code"),
    KW(batch_remove, "batch_remove(keys, force=False) -> list of codes"),
    KW(remove_all, "remove_all(force=False) -> number removed or a negative code"),
    KW(remove_by_regex, "remove_by_regex(regex_pattern, force=False) -> number of objects whose "
                        "keys match (POSIX extended, anywhere in the key) removed, or a negative "
                        "code"),
    KW(batch_replica_clear,
       "batch_replica_clear(keys, segment_name='') -> list of the keys cleared: their replicas "
       "on that segment (every replica when empty) are dropped once no lease is held"),
    {"_get_ranges_raw", (PyCFunction)(void (*)(void))mcpy_get_ranges_raw,
     METH_VARARGS | METH_KEYWORDS,
     "_get_ranges_raw(keys, counts, dsts, src_offsets, sizes) -> one result per range (the "
     "facade's get_into_ranges and batch_get_into_multi_buffer_ranges build on it)"},
    KW(batch_put_session_start,
       "batch_put_session_start(keys, sizes, config=None) -> list of codes: reserves each "
       "object (readers do not see it until batch_put_session_end)"),
    {"_put_ranges_raw", (PyCFunction)(void (*)(void))mcpy_put_ranges_raw,
     METH_VARARGS | METH_KEYWORDS,
     "_put_ranges_raw(keys, counts, srcs, dst_offsets, sizes) -> one result per key: bytes "
     "written into its put session or a negative code (the facade's "
     "batch_put_from_multi_buffer_ranges builds on it)"},
    KW(batch_put_session_end,
       "batch_put_session_end(keys) -> list of codes: publishes the put sessions' objects"),
    KW(batch_put_session_revoke,
       "batch_put_session_revoke(keys) -> list of codes: abandons the put sessions"),
    {"_create_task_raw", (PyCFunction)(void (*)(void))mcpy_create_task_raw,
     METH_VARARGS | METH_KEYWORDS,
     "_create_task_raw(type, key, source, targets) -> (id_hi, id_lo, code) (the facade's "
     "create_copy_task / create_move_task build on it)"},
    {"_query_task_raw", (PyCFunction)(void (*)(void))mcpy_query_task_raw,
     METH_VARARGS | METH_KEYWORDS,
     "_query_task_raw(hi, lo) -> (code, type, status, created_ms, updated_ms, client_hi, "
     "client_lo, message) (the facade's query_task builds on it)"},
    KW(mount_segment,
       "mount_segment(path, size, offset=0, protocol='tcp', location='') -> {'ret': 0 or a "
       "negative code, 'segment_ids': [id]}: serves [offset, offset+size) of a file as pool "
       "memory"),
    KW(allocate_and_mount_segment,
       "allocate_and_mount_segment(size, protocol='tcp', location='') -> {'ret', 'segment_ids', "
       "'allocated_size'}: size rounded up to 4 MiB"),
    KW(unmount_segment, "unmount_segment(segment_ids, grace_period_seconds=0) -> 0 or the first "
                        "negative code (mount_segment's ids)"),
    KW(unmount_and_free_segment,
       "unmount_and_free_segment(segment_ids, grace_period_seconds=0) -> 0 or the first negative "
       "code (allocate_and_mount_segment's ids)"),
    KW(unmount_local_disk_segment,
       "unmount_local_disk_segment(grace_period_seconds=0) -> 0 or a negative code: takes this "
       "node's disk tier off the master (readers are no longer sent to its disk copies), then "
       "waits the grace period for reads under way; 0 without a disk tier"),
    KW(register_buffer,
       "register_buffer(buffer_ptr, size) -> 0 or a negative code; buffer_ptr may also be an "
       "object with the buffer protocol (size optional), which the store then holds (it can be "
       "neither freed nor resized) until unregister_buffer or close"),
    {"_check_memory", (PyCFunction)(void (*)(void))mcpy_check_memory, METH_VARARGS | METH_KEYWORDS,
     "_check_memory(buffer_ptr, size, writable=False) -> 0 when the raw-address calls accept "
     "[buffer_ptr, +size), else -600"},
    KW(unregister_buffer, "unregister_buffer(buffer_ptr) -> 0 or a negative code (an address, "
                          "or the object registered)"),
    MCPY_DUMMY_METHODS{NULL, NULL, 0, NULL},
};

static int store_traverse(PyObject *obj, visitproc visit, void *arg) {
    Py_VISIT(Py_TYPE(obj));
    Py_VISIT(((mcpy_store_t *)obj)->engine);
    Py_VISIT(((mcpy_store_t *)obj)->held);
    return 0;
}

MCPY_TYPE_SPEC(mcpy_store_spec, "mooncake._store.MooncakeDistributedStore", mcpy_store_t,
               Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
               {Py_tp_new, store_new}, {Py_tp_dealloc, store_dealloc},
               {Py_tp_traverse, store_traverse}, {Py_tp_methods, store_methods},
               {Py_tp_doc, "A client of the Mooncake distributed KV cache (mooncake/store.h)."});
