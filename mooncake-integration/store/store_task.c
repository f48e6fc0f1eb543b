/* Replica-task methods of MooncakeDistributedStore (mc_store_*_task in mooncake/store.h), as raw
 * tuples; mooncake/store/_tasks.py gives them the reference's shapes (UUID tuples,
 * QueryTaskResponse, TaskType, TaskStatus). */
#include <string.h>

#include "store_py.h"

/* _create_task_raw(type, key, source, targets) -> (hi, lo, code) */
PyObject *mcpy_create_task_raw(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwl[] = {"type", "key", "source", "targets", NULL};
    PyObject *key_o, *src_o, *targets_o, *hold = NULL, *ret = NULL;
    const char *key = NULL, *source = NULL;
    const char **targets = NULL;
    mc_store_task_id_t id = {0, 0};
    Py_ssize_t n;
    int type, rc = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iOOO:_create_task_raw", kwl, &type, &key_o, &src_o,
                                     &targets_o))
        return NULL;
    if (!mcpy_key(key_o, &key))
        return NULL;
    if (src_o != Py_None && !mcpy_key(src_o, &source))
        return NULL;
    n = mcpy_keys(targets_o, "targets", &hold, &targets);
    if (n < 0)
        return NULL;
    if (type == MC_STORE_TASK_REPLICA_MOVE) {
        if (n != 1 || !source) {
            rc = MC_ERR_INVALID_PARAMS;
        } else {
            NOGIL(rc = mc_store_create_move_task(MCPY_STORE(self), key, source, targets[0], &id));
        }
    } else {
        NOGIL(rc = mc_store_create_copy_task(MCPY_STORE(self), key, targets, (size_t)n, &id));
    }
    ret = Py_BuildValue("(KKi)", (unsigned long long)(rc ? 0 : id.hi),
                        (unsigned long long)(rc ? 0 : id.lo), rc);
    PyMem_Free(targets);
    Py_XDECREF(hold);
    return ret;
}

/* _query_task_raw(hi, lo) -> (code, type, status, created_ms, updated_ms, client_hi, client_lo,
 * message) */
PyObject *mcpy_query_task_raw(PyObject *self, PyObject *args, PyObject *kw) {
    static char *kwl[] = {"hi", "lo", NULL};
    mc_store_task_id_t id;
    mc_store_task_info_t info;
    PyObject *msg;
    int rc;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&O&:_query_task_raw", kwl, mcpy_conv_u64, &id.hi,
                                     mcpy_conv_u64, &id.lo))
        return NULL;
    memset(&info, 0, sizeof(info));
    NOGIL(rc = mc_store_query_task(MCPY_STORE(self), &id, &info));
    /* The message comes from the peers: undecodable bytes are replaced, never an exception. */
    msg = PyUnicode_DecodeUTF8(info.message, (Py_ssize_t)strlen(info.message), "replace");
    if (!msg)
        return NULL;
    return Py_BuildValue(
        "(iiiLLKKN)", rc, info.type, info.status, (long long)info.created_at_ms_epoch,
        (long long)info.last_updated_at_ms_epoch, (unsigned long long)info.assigned_client.hi,
        (unsigned long long)info.assigned_client.lo, msg);
}
