/* Registered user buffers: which caller memory the engine moves as it is, the checks every call
 * taking caller memory makes against it, and the direct backend's register and unregister. */

#include "client/backend.h"
#include "client/direct.h"
#include "client/store_internal.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/log.h"
#include "mooncake/common/mem_probe.h"

/* ---- registered user buffers ---- */

unsigned mc__store_submit_flags(const mc_store_t *s) {
    return s->direct_mem ? MC_SUBMIT_UNREGISTERED_LOCAL : 0;
}

int mc__store_is_registered(mc_store_t *s, const void *p, size_t len) {
    uintptr_t a = (uintptr_t)p;
    /* the staging buffer is the common case and needs no lookup */
    if (s->staging_mem && a >= (uintptr_t)s->staging_mem &&
        a + len <= (uintptr_t)s->staging_mem + s->cfg.local_buffer_size)
        return 1;
    return s->be->is_registered(s, p, len);
}

int mc__direct_is_registered(mc_store_t *s, const void *p, size_t len) {
    return s->engine && len > 0 && mc_engine_is_registered(s->engine, p, len) == 0;
}

int mc__store_registered_overrun(mc_store_t *s, const void *p, size_t len) {
    /* Registered ranges never overlap, so the one holding p is the only one that could hold the
     * whole range. The whole range first: registered memory, the zero-copy fast path, then
     * takes one lookup. */
    return !mc__store_is_registered(s, p, len) && mc__store_is_registered(s, p, 1);
}

int mc__store_iovs_overrun(mc_store_t *s, const mc_store_iov_t *iov, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (iov[i].len && mc__store_registered_overrun(s, iov[i].base, iov[i].len))
            return 1;
    return 0;
}

/* Registered memory needs one lookup and no system call: the fast path of every zero-copy
 * caller. A range that starts in a registered buffer and runs past it is a caller's error
 * (the next bytes belong to someone else, if to anyone). Other memory is probed, since the
 * store moves unregistered memory as it is (tcp, shm) and a bad address would fault inside. */
static int mc__check_memory_impl(mc_store_t *s, const void *addr, size_t len, int writable) {
    if (len == 0)
        return 0;
    if (!addr || (uintptr_t)addr + len < (uintptr_t)addr)
        return MC_ERR_INVALID_PARAMS;
    if (mc__store_is_registered(s, addr, len))
        return 0;
    if (mc__store_is_registered(s, addr, 1))
        return MC_ERR_INVALID_PARAMS;
    if (mc__mem_probe(addr, len, writable) == 0)
        return 0;
    /* not readable by the CPU: a GPU's memory passes (the engine's device-memory hook moves it) */
    return s->engine && mc_engine_check_memory(s->engine, addr, len, writable) == 0
               ? 0
               : MC_ERR_INVALID_PARAMS;
}

int mc_store_check_memory(mc_store_t *s, const void *addr, size_t len, int writable) {
    /* a dummy client too: its registrations are the pool ranges it mapped */
    int rc = mc__store_enter_any(s);
    if (rc != 0)
        return rc;
    rc = mc__check_memory_impl(s, addr, len, writable);
    mc__store_leave(s);
    return rc;
}

static int mc__register_buffer_impl(mc_store_t *s, void *addr, size_t len) {
    int rc = mc__store_ready(s);
    if (rc != 0)
        return rc;
    if (!addr || len == 0)
        return MC_ERR_INVALID_PARAMS;
    pthread_rwlock_wrlock(&s->reg_lock);
    mc_store_iov_t *grown = mc__array_grow(s->regs, s->nregs, &s->regs_cap, sizeof(*grown), 8);
    if (!grown) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    s->regs = grown;
    rc = mc_engine_register_memory(s->engine, addr, len, "*");
    if (rc != 0) {
        MC_ERROR("store: registering %zu bytes at %p failed: %s", len, addr, mc_strerror(rc));
        rc = mc__store_engine_code(rc);
        goto out;
    }
    s->regs[s->nregs].base = addr;
    s->regs[s->nregs].len = len;
    s->nregs++;
out:
    pthread_rwlock_unlock(&s->reg_lock);
    return rc;
}

static int mc__unregister_buffer_impl(mc_store_t *s, void *addr) {
    int rc = mc__store_ready(s);
    size_t i;
    if (rc != 0)
        return rc;
    pthread_rwlock_wrlock(&s->reg_lock);
    for (i = 0; i < s->nregs && s->regs[i].base != addr; i++)
        ;
    if (i == s->nregs) {
        rc = MC_ERR_INVALID_PARAMS;
        goto out;
    }
    rc = mc__store_engine_code(mc_engine_unregister_memory(s->engine, addr));
    s->regs[i] = s->regs[s->nregs - 1];
    s->nregs--;
out:
    pthread_rwlock_unlock(&s->reg_lock);
    return rc;
}

/* The direct backend's entries (backend.h): each holds the store open while it runs. */

int mc__direct_register_buffer(mc_store_t *s, void *addr, size_t len) {
    int rc;
    MC__STORE_HELD(s, rc, mc__register_buffer_impl(s, addr, len));
    return rc;
}

int mc__direct_unregister_buffer(mc_store_t *s, void *addr) {
    int rc;
    MC__STORE_HELD(s, rc, mc__unregister_buffer_impl(s, addr));
    return rc;
}
