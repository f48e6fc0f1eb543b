/* Synchronous transfers: one call allocates a batch, submits, waits for every task and frees it,
 * on top of batch.c and submit.c (which know nothing of this one). */
#include "te_internal.h"

int mc__transfer_sync_each(mc_engine_t *e, const mc_request_t *reqs, size_t n, int *errors,
                           unsigned flags) {
    mc_batch_id_t id = 0;
    int rc = mc__batch_alloc(e, n, &id);
    if (rc)
        return rc;
    rc = mc__batch_submit(e, id, reqs, n, flags | MC__SUBMIT_RUN_HERE);
    if (!rc) {
        /* user memory may not be touched after we return: wait for every task to end, also
         * when a close begins meanwhile (it waits for us; each task ends by its deadline) */
        do {
            rc = mc__batch_wait(e, id, -1, 1);
        } while (rc == MC_ERR_BATCH_BUSY);
    }
    /* all completed (the common case): no task needs asking */
    for (size_t i = 0; errors && rc == 0 && i < n; i++)
        errors[i] = 0;
    for (size_t i = 0; errors && rc != 0 && i < n; i++) {
        mc_task_state_t st;
        /* a batch that never started: every request carries the submit's verdict */
        if (mc__task_status(e, id, i, &st) != 0)
            errors[i] = rc;
        else
            errors[i] = st.status == MC_STATUS_COMPLETED ? 0 : st.error ? st.error : MC_ERR_SOCKET;
    }
    (void)mc__batch_free(e, id);
    return rc;
}

/* --- the public calls, inside the gate --- */

int mc_engine_transfer_sync(mc_engine_t *e, const mc_request_t *reqs, size_t n) {
    int rc;
    MC__GATED(e, rc, mc__transfer_sync_each(e, reqs, n, NULL, 0));
    return rc;
}

int mc_engine_transfer_sync_each(mc_engine_t *e, const mc_request_t *reqs, size_t n, int *errors) {
    return mc_engine_transfer_sync_each_ex(e, reqs, n, errors, 0);
}

int mc_engine_transfer_sync_each_ex(mc_engine_t *e, const mc_request_t *reqs, size_t n, int *errors,
                                    unsigned flags) {
    /* MC_SUBMIT_CALLER_WAITS says what these calls always do */
    unsigned known = MC_SUBMIT_UNREGISTERED_LOCAL | MC_SUBMIT_CALLER_WAITS;
    int rc = flags & ~known ? MC_ERR_INVALID_ARGUMENT : mc__engine_enter(e);
    flags &= ~(unsigned)MC_SUBMIT_CALLER_WAITS;
    if (rc) {
        /* refused at the gate: every request carries its verdict, as for a failed submit */
        for (size_t i = 0; errors && i < n; i++)
            errors[i] = rc;
        return rc;
    }
    rc = mc__transfer_sync_each(e, reqs, n, errors, flags);
    mc__engine_leave(e);
    return rc;
}
