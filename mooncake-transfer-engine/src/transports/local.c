/* Transfers within this engine's own segment: both ranges were checked against our registrations
 * at submit, so this is one memmove (ranges may overlap when both lie in one buffer) under a pin
 * of the target region. Either side may be a GPU's memory: then the device-memory hook copies
 * (devmem.h), through host memory when both are. */
#include <string.h>

#include "devmem.h"
#include "te_internal.h"

static int mc__local_submit(mc_engine_t *e, mc__task_t *t) {
    uint8_t *remote = (uint8_t *)(uintptr_t)t->remote;
    mc__pin_t pin;
    int rc;
    /* the target range may have been unregistered since submit checked it; pinned, it cannot
     * be given back under the copy */
    if (mc__reg_pin(&e->reg, t->remote, t->len, t->epoch, -1, &pin)) {
        mc__task_finish(t, MC_STATUS_FAILED, MC_ERR_ADDRESS_NOT_REGISTERED);
        return 0;
    }
    if (t->opcode == MC_OPCODE_READ)
        rc = mc__devmem_move(e->devmem, t->local, t->local_device, remote, pin.device, t->len);
    else
        rc = mc__devmem_move(e->devmem, remote, pin.device, t->local, t->local_device, t->len);
    mc__reg_unpin(&e->reg, &pin);
    if (rc) {
        mc__task_finish(t, MC_STATUS_FAILED, rc);
        return 0;
    }
    atomic_store(&t->transferred, t->len);
    mc__transport_account(e, MC__TP_LOCAL, t->len);
    mc__task_finish(t, MC_STATUS_COMPLETED, 0);
    return 0;
}

/* Requests to our own segment (the core checked both ranges against our registrations). */
static int mc__local_carries(const mc_engine_t *e, const mc__route_t *r) {
    (void)e;
    return r->peer == NULL;
}

const mc__transport_t mc__tp_local = {
    .name = "local", .id = MC__TP_LOCAL, .carries = mc__local_carries, .submit = mc__local_submit};
