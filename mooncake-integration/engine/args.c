/* The engine's own argument converter: a TransferOpcode. Addresses, lengths and lists of them are
 * converted by the helpers both extensions share (mcpy_common.h). */
#include "engine_py.h"

int mcpy_conv_opcode(PyObject *obj, void *out) {
    uint64_t v;
    if (!mcpy_conv_index_u64(obj, &v))
        return 0;
    if (v != MC_OPCODE_READ && v != MC_OPCODE_WRITE) {
        PyErr_Format(PyExc_ValueError,
                     "opcode must be TransferOpcode.Read (0) or .Write (1), not %R", obj);
        return 0;
    }
    *(int *)out = (int)v;
    return 1;
}
