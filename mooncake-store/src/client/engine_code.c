/* The one place an engine code becomes a store code. Store calls never return an engine code
 * raw: the two tables give some numbers other meanings (-102 is SOCKET to the engine and
 * SEGMENT_ALREADY_EXISTS to the store), and what an engine failure means to a store caller
 * depends on what the store asked the engine for (memory that cannot be had is "no space" to a
 * mount, a peer that failed us is a failed transfer to a get). */
#include "client/store_internal.h"

int mc__store_engine_code_for(int rc, int op) {
    if (rc == 0)
        return 0;
    /* a shared engine closed by its owner under us: the store cannot work until set up again */
    if (rc == MC_ERR_CONTEXT)
        return MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS;
    switch (op) {
    case MC__ENG_SETUP:
        /* a setup that cannot start its engine (port taken, bad metadata URL, ...) is a setup
         * with parameters that do not work here */
        return rc == MC_ERR_MEMORY ? MC_ERR_INTERNAL_ERROR : MC_ERR_INVALID_PARAMS;
    case MC__ENG_ALLOC:
        return MC_ERR_NO_AVAILABLE_HANDLE;
    case MC__ENG_TRANSFER:
        return MC_ERR_TRANSFER_FAIL;
    default:
        break;
    }
    switch (rc) {
    case MC_ERR_INVALID_ARGUMENT:
    case MC_ERR_ADDRESS_NOT_REGISTERED:
    case MC_ERR_ADDRESS_OVERLAPPED:
    case MC_ERR_NOT_IMPLEMENTED:
    case MC_ERR_DNS:
        return MC_ERR_INVALID_PARAMS; /* what the caller asked for cannot be done */
    case MC_ERR_SOCKET:
    case MC_ERR_REJECT_HANDSHAKE:
    case MC_ERR_METADATA:
    case MC_ERR_ENDPOINT:
        return MC_ERR_TRANSFER_FAIL; /* a peer or the metadata service failed us */
    default:
        return MC_ERR_INTERNAL_ERROR;
    }
}

int mc__store_engine_code(int rc) {
    return mc__store_engine_code_for(rc, MC__ENG_MEMORY);
}
