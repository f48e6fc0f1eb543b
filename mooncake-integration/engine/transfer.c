/* TransferEngine transfer methods: single and batched, synchronous and asynchronous.
 *
 * Each method turns its arguments into mc_request_t records against the peer segment named by
 * target_hostname and hands them to the C engine with the GIL released. API-level failures come
 * back as the engine's negative codes (or batch id 0), as in the reference; only wrong argument
 * types and values raise. transport_hint is accepted for signature compatibility and ignored. */
#include "engine_py.h"

#include <string.h>

/* The engine behind self (*e) and reqs[0..n) aimed at the segment called target: 0, or a negative
 * code (MC_ERR_INVALID_ARGUMENT without an engine). */
static int aim(mcpy_engine_t *self, const char *target, mc_request_t *reqs, size_t n,
               mc_engine_t **e) {
    mc_segment_id_t seg;
    *e = mcpy_engine_get(self);
    if (!*e)
        return MC_ERR_INVALID_ARGUMENT;
    int rc = mcpy_segment(self, target, &seg);
    for (size_t i = 0; rc == 0 && i < n; i++)
        reqs[i].target_id = seg;
    return rc < 0 ? rc : 0;
}

/* Runs reqs[0..n) (target_id filled in here) to completion, then sends notify if given (one
 * engine call: mc_engine_transfer_sync_notify). Returns the engine's code, or INT32_MIN with a
 * Python exception set. */
static int run_sync(mcpy_engine_t *self, const char *target, mc_request_t *reqs, size_t n,
                    PyObject *notify) {
    int rc = MC_ERR_INVALID_ARGUMENT;
    PyObject *name = NULL, *msg = NULL;
    mc_engine_t *e;
    if (notify && notify != Py_None && mcpy_notify_parts(notify, &name, &msg) < 0) {
        rc = INT32_MIN;
        goto out;
    }
    rc = aim(self, target, reqs, n, &e);
    if (rc < 0)
        goto out;
    if (name) {
        const char *nm = PyBytes_AsString(name);
        const char *m = PyBytes_AsString(msg);
        size_t mlen = (size_t)PyBytes_Size(msg);
        MCPY_NOGIL(self, rc = mc_engine_transfer_sync_notify(e, reqs, n, nm, m, mlen));
    } else {
        MCPY_NOGIL(self, rc = mc_engine_transfer_sync(e, reqs, n));
    }
out:
    Py_XDECREF(name);
    Py_XDECREF(msg);
    return rc;
}

static int submit_new_batch(mc_engine_t *e, const mc_request_t *reqs, size_t n, mc_batch_id_t *b) {
    int rc = mc_engine_batch_alloc(e, n, b);
    if (rc < 0)
        goto out;
    rc = mc_engine_batch_submit(e, *b, reqs, n);
    if (rc < 0)
        mc_engine_batch_free(e, *b);
out:
    return rc;
}

/* Allocates a batch for reqs[0..n) and submits them. Returns 0 and the batch, or a negative code
 * (the batch then is already freed). */
static int run_async(mcpy_engine_t *self, const char *target, mc_request_t *reqs, size_t n,
                     mc_batch_id_t *out) {
    int rc = MC_ERR_INVALID_ARGUMENT;
    mc_engine_t *e;
    mc_batch_id_t b = 0;
    rc = aim(self, target, reqs, n, &e);
    if (rc < 0)
        goto out;
    MCPY_NOGIL(self, rc = submit_new_batch(e, reqs, n, &b));
    if (rc == 0)
        *out = b;
out:
    return rc;
}

static PyObject *code_or_error(int rc) {
    return rc == INT32_MIN ? NULL : PyLong_FromLong(rc);
}

/* ---- single transfers ---- */

typedef struct {
    const char *target;
    const char *hint;
    mc_request_t req;
    PyObject *notify;
} single_args_t;

static int parse_single(PyObject *args, PyObject *kw, const char *fmt, char **kwlist,
                        single_args_t *a, int with_opcode) {
    uint64_t src, peer;
    size_t len;
    a->hint = "";
    a->notify = NULL;
    memset(&a->req, 0, sizeof(a->req));
    a->req.opcode = MC_OPCODE_WRITE;
    int ok = with_opcode
                 ? PyArg_ParseTupleAndKeywords(args, kw, fmt, kwlist, &a->target,
                                               mcpy_conv_index_u64, &src, mcpy_conv_index_u64,
                                               &peer, mcpy_conv_index_size, &len, mcpy_conv_opcode,
                                               &a->req.opcode, &a->notify, &a->hint)
                 : PyArg_ParseTupleAndKeywords(args, kw, fmt, kwlist, &a->target,
                                               mcpy_conv_index_u64, &src, mcpy_conv_index_u64,
                                               &peer, mcpy_conv_index_size, &len, &a->hint);
    if (!ok)
        return -1;
    a->req.source = (void *)(uintptr_t)src;
    a->req.target_offset = peer;
    a->req.length = len;
    a->req.target_id = -1;
    return 0;
}

static char *kw_single[] = {"target_hostname", "buffer",         "peer_buffer_address",
                            "length",          "transport_hint", NULL};
static char *kw_single_op[] = {"target_hostname", "buffer", "peer_buffer_address", "length",
                               "opcode",          "notify", "transport_hint",      NULL};

static PyObject *single_sync(PyObject *obj, PyObject *args, PyObject *kw, int opcode,
                             const char *fmt) {
    single_args_t a;
    if (parse_single(args, kw, fmt, kw_single, &a, 0) < 0)
        return NULL;
    a.req.opcode = opcode;
    return code_or_error(run_sync((mcpy_engine_t *)obj, a.target, &a.req, 1, NULL));
}

PyObject *mcpy_transfer_sync_write(PyObject *obj, PyObject *args, PyObject *kw) {
    return single_sync(obj, args, kw, MC_OPCODE_WRITE, "sO&O&O&|s:transfer_sync_write");
}

PyObject *mcpy_transfer_sync_read(PyObject *obj, PyObject *args, PyObject *kw) {
    return single_sync(obj, args, kw, MC_OPCODE_READ, "sO&O&O&|s:transfer_sync_read");
}

PyObject *mcpy_transfer_sync(PyObject *obj, PyObject *args, PyObject *kw) {
    single_args_t a;
    if (parse_single(args, kw, "sO&O&O&O&|Os:transfer_sync", kw_single_op, &a, 1) < 0)
        return NULL;
    return code_or_error(run_sync((mcpy_engine_t *)obj, a.target, &a.req, 1, a.notify));
}

PyObject *mcpy_transfer_submit_write(PyObject *obj, PyObject *args, PyObject *kw) {
    single_args_t a;
    mc_batch_id_t b = 0;
    if (parse_single(args, kw, "sO&O&O&|s:transfer_submit_write", kw_single, &a, 0) < 0)
        return NULL;
    a.req.opcode = MC_OPCODE_WRITE;
    int rc = run_async((mcpy_engine_t *)obj, a.target, &a.req, 1, &b);
    /* batch ids are unsigned and 0 is never one: the reference's failure sentinel */
    return PyLong_FromUnsignedLongLong(rc < 0 ? 0 : b);
}

PyObject *mcpy_transfer_check_status(PyObject *obj, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"batch_id", NULL};
    mcpy_engine_t *self = (mcpy_engine_t *)obj;
    uint64_t b;
    mc_task_state_t st = {0};
    int rc = MC_ERR_INVALID_ARGUMENT, ret = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&:transfer_check_status", kwlist,
                                     mcpy_conv_index_u64, &b))
        return NULL;
    mc_engine_t *e = mcpy_engine_get(self);
    if (!e)
        goto out;
    MCPY_NOGIL(self, rc = mc_engine_task_status(e, b, 0, &st));
    if (rc < 0)
        goto out;
    switch (st.status) {
    case MC_STATUS_WAITING:
    case MC_STATUS_PENDING:
        ret = 0;
        goto out;
    case MC_STATUS_COMPLETED:
        ret = 1;
        break;
    case MC_STATUS_TIMEOUT:
        ret = -2;
        break;
    default:
        ret = -1;
        break;
    }
    /* The transfer ended: its id is spent, as in the reference. */
    MCPY_NOGIL(self, mc_engine_batch_free(e, b));
out:
    return PyLong_FromLong(ret);
}

/* ---- batches ---- */

static char *kw_batch[] = {"target_hostname", "buffers",        "peer_buffer_addresses",
                           "lengths",         "transport_hint", NULL};
static char *kw_batch_op[] = {"target_hostname", "buffers", "peer_buffer_addresses", "lengths",
                              "opcode",          "notify",  "transport_hint",        NULL};

/* Builds n requests from the three parallel lists. Returns n, or -1 with an exception set. */
static Py_ssize_t build_batch(PyObject *bufs, PyObject *peers, PyObject *lens, int opcode,
                              mc_request_t **out) {
    Py_ssize_t ret = -1, n, np, nl;
    uint64_t *b = NULL, *p = NULL, *l = NULL;
    mc_request_t *reqs = NULL;
    *out = NULL;
    if ((n = mcpy_index_u64_array(bufs, "buffers", &b)) < 0 ||
        (np = mcpy_index_u64_array(peers, "peer_buffer_addresses", &p)) < 0 ||
        (nl = mcpy_index_u64_array(lens, "lengths", &l)) < 0)
        goto out;
    if (np != n || nl != n) {
        PyErr_Format(PyExc_ValueError,
                     "buffers, peer_buffer_addresses and lengths must have the same length "
                     "(got %zd, %zd, %zd)",
                     n, np, nl);
        goto out;
    }
    reqs = PyMem_Calloc((size_t)(n ? n : 1), sizeof(*reqs));
    if (!reqs) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        reqs[i].opcode = opcode;
        reqs[i].source = (void *)(uintptr_t)b[i];
        reqs[i].target_offset = p[i];
        reqs[i].length = l[i];
        reqs[i].target_id = -1;
    }
    *out = reqs;
    reqs = NULL;
    ret = n;
out:
    PyMem_Free(b);
    PyMem_Free(p);
    PyMem_Free(l);
    PyMem_Free(reqs);
    return ret;
}

typedef struct {
    const char *target;
    const char *hint;
    PyObject *bufs, *peers, *lens, *notify;
    int opcode;
} batch_args_t;

static int parse_batch(PyObject *args, PyObject *kw, const char *fmt, char **kwlist,
                       batch_args_t *a, int with_opcode) {
    a->hint = "";
    a->notify = NULL;
    int ok = with_opcode ? PyArg_ParseTupleAndKeywords(args, kw, fmt, kwlist, &a->target, &a->bufs,
                                                       &a->peers, &a->lens, mcpy_conv_opcode,
                                                       &a->opcode, &a->notify, &a->hint)
                         : PyArg_ParseTupleAndKeywords(args, kw, fmt, kwlist, &a->target, &a->bufs,
                                                       &a->peers, &a->lens, &a->hint);
    return ok ? 0 : -1;
}

static PyObject *batch_sync(PyObject *obj, const batch_args_t *a) {
    mc_request_t *reqs;
    Py_ssize_t n = build_batch(a->bufs, a->peers, a->lens, a->opcode, &reqs);
    if (n < 0)
        return NULL;
    int rc = run_sync((mcpy_engine_t *)obj, a->target, reqs, (size_t)n, a->notify);
    PyMem_Free(reqs);
    return code_or_error(rc);
}

static PyObject *batch_async(PyObject *obj, const batch_args_t *a) {
    mc_request_t *reqs;
    mc_batch_id_t b = 0;
    Py_ssize_t n = build_batch(a->bufs, a->peers, a->lens, a->opcode, &reqs);
    if (n < 0)
        return NULL;
    int rc = run_async((mcpy_engine_t *)obj, a->target, reqs, (size_t)n, &b);
    PyMem_Free(reqs);
    return PyLong_FromUnsignedLongLong(rc < 0 ? 0 : b);
}

/* The fixed-opcode batch methods differ only in their name (in fmt), opcode and how they run. */
static PyObject *batch_fixed(PyObject *obj, PyObject *args, PyObject *kw, const char *fmt,
                             int opcode, PyObject *(*run)(PyObject *, const batch_args_t *)) {
    batch_args_t a;
    if (parse_batch(args, kw, fmt, kw_batch, &a, 0) < 0)
        return NULL;
    a.opcode = opcode;
    return run(obj, &a);
}

/* One method per fixed opcode and way of running: mcpy_<name>. */
#define BATCH_FIXED(name, opcode, run)                                                             \
    PyObject *mcpy_##name(PyObject *obj, PyObject *args, PyObject *kw) {                           \
        return batch_fixed(obj, args, kw, "sOOO|s:" #name, opcode, run);                           \
    }
BATCH_FIXED(batch_transfer_sync_write, MC_OPCODE_WRITE, batch_sync)
BATCH_FIXED(batch_transfer_sync_read, MC_OPCODE_READ, batch_sync)
BATCH_FIXED(batch_transfer_async_write, MC_OPCODE_WRITE, batch_async)
BATCH_FIXED(batch_transfer_async_read, MC_OPCODE_READ, batch_async)
#undef BATCH_FIXED

PyObject *mcpy_batch_transfer_sync(PyObject *obj, PyObject *args, PyObject *kw) {
    batch_args_t a;
    if (parse_batch(args, kw, "sOOOO&|Os:batch_transfer_sync", kw_batch_op, &a, 1) < 0)
        return NULL;
    return batch_sync(obj, &a);
}

PyObject *mcpy_batch_transfer_async(PyObject *obj, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {
        "target_hostname", "buffers", "peer_buffer_addresses", "lengths", "opcode",
        "transport_hint",  NULL};
    batch_args_t a = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sOOOO&|s:batch_transfer_async", kwlist, &a.target,
                                     &a.bufs, &a.peers, &a.lens, mcpy_conv_opcode, &a.opcode,
                                     &a.hint))
        return NULL;
    return batch_async(obj, &a);
}

/* Waits for every batch, then frees them all; each id is spent afterwards. Like the C
 * transfer_sync, it does not return while a task may still touch the caller's memory (every task
 * ends by its own deadline, so BATCH_BUSY cannot last). */
static int wait_all(mc_engine_t *e, const uint64_t *ids, size_t n) {
    int ret = 0;
    for (size_t i = 0; i < n; i++) {
        int rc;
        do {
            rc = mc_engine_batch_wait(e, ids[i], -1);
        } while (rc == MC_ERR_BATCH_BUSY);
        if (rc != 0)
            ret = -1;
        if (mc_engine_batch_free(e, ids[i]) != 0)
            ret = -1;
    }
    return ret;
}

PyObject *mcpy_get_batch_transfer_status(PyObject *obj, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"batch_ids", NULL};
    mcpy_engine_t *self = (mcpy_engine_t *)obj;
    PyObject *seq;
    uint64_t *ids = NULL;
    int rc = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:get_batch_transfer_status", kwlist, &seq))
        return NULL;
    Py_ssize_t n = mcpy_index_u64_array(seq, "batch_ids", &ids);
    if (n < 0)
        return NULL;
    mc_engine_t *e = mcpy_engine_get(self);
    if (e)
        MCPY_NOGIL(self, rc = wait_all(e, ids, (size_t)n));
    PyMem_Free(ids);
    return PyLong_FromLong(rc);
}
