/* The device-memory hook's shared parts (devmem.h): choosing the table, staging buffers, a copy
 * between any two places, and where a request's local side lives. */
#include "devmem.h"

#include <stdlib.h>
#include <string.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/log.h"
#include "mooncake/error.h"
#include "te_internal.h"

/* Device-to-device copies bounce through host memory this much at a time. */
#define MC__DEVMEM_BOUNCE (1u << 20)

const mc__devmem_ops_t *mc__devmem_select(void) {
    const char *v = getenv("MC_DEVMEM");
    if (!v)
        v = "";
    if (!strcmp(v, "fake")) {
        MC_WARN("MC_DEVMEM=fake: device memory is the test backend's, not a GPU's");
        return &mc__devmem_fake;
    }
    if (*v && strcmp(v, "cuda"))
        MC_WARN("MC_DEVMEM=%s: unknown (\"cuda\" or \"fake\"); using cuda", v);
    return &mc__devmem_cuda;
}

int mc__devmem_buf_reserve(const mc__devmem_ops_t *ops, mc__devmem_buf_t *b, size_t n, int device) {
    void *p;
    int pinned = 1;
    if (b->cap >= n)
        return 0;
    mc__devmem_buf_release(ops, b);
    p = ops->pinned_alloc(n, device);
    if (!p) {
        /* pageable memory works, only slower (the driver stages it once more) */
        pinned = 0;
        p = mc__malloc(n);
        if (!p)
            return MC_ERR_MEMORY;
    }
    b->p = p;
    b->cap = n;
    b->pinned = pinned;
    return 0;
}

void mc__devmem_buf_release(const mc__devmem_ops_t *ops, mc__devmem_buf_t *b) {
    if (b->p && b->pinned)
        ops->pinned_free(b->p, b->cap);
    else
        mc__free(b->p);
    b->p = NULL;
    b->cap = 0;
    b->pinned = 0;
}

int mc__devmem_from_host(const mc__devmem_ops_t *ops, void *dev, const void *host, size_t n,
                         int device, int pinned) {
    int rc = ops->from_host(dev, host, n, device);
    return rc || pinned ? rc : ops->sync(device);
}

int mc__devmem_move(const mc__devmem_ops_t *ops, void *dst, int dst_dev, const void *src,
                    int src_dev, size_t n) {
    mc__devmem_buf_t bounce = {0};
    int rc = 0;
    if (dst_dev < 0 && src_dev < 0) {
        memmove(dst, src, n);
        return 0;
    }
    if (dst_dev < 0)
        return ops->to_host(dst, src, n, src_dev);
    if (src_dev < 0)
        return mc__devmem_from_host(ops, dst, src, n, dst_dev, 0);
    rc = mc__devmem_buf_reserve(ops, &bounce, n < MC__DEVMEM_BOUNCE ? n : MC__DEVMEM_BOUNCE,
                                src_dev);
    /* chunk by chunk through the bounce buffer; backwards when dst overlaps src from above, so
     * that overlapping ranges in one buffer move as memmove would move them */
    {
        int back = (uintptr_t)dst > (uintptr_t)src && (uintptr_t)dst < (uintptr_t)src + n;
        size_t nchunks = rc ? 0 : (n + bounce.cap - 1) / bounce.cap;
        for (size_t i = 0; !rc && i < nchunks; i++) {
            size_t off = (back ? nchunks - 1 - i : i) * bounce.cap;
            size_t k = n - off < bounce.cap ? n - off : bounce.cap;
            rc = ops->to_host(bounce.p, (const uint8_t *)src + off, k, src_dev);
            if (!rc)
                rc = mc__devmem_from_host(ops, (uint8_t *)dst + off, bounce.p, k, dst_dev,
                                          bounce.pinned);
        }
    }
    mc__devmem_buf_release(ops, &bounce);
    return rc;
}

int mc__devmem_local(mc_engine_t *e, const void *addr, size_t len, int registered, int *device) {
    const mc__region_t *g;
    int found = 0;
    *device = -1;
    pthread_rwlock_rdlock(&e->reg.lock);
    g = mc__reg_find_locked(&e->reg, (uint64_t)(uintptr_t)addr, len);
    if (g) {
        found = 1;
        *device = g->place.kind == MC__MEM_CUDA ? g->place.device : -1;
    }
    pthread_rwlock_unlock(&e->reg.lock);
    if (found)
        return 0;
    return registered ? MC_ERR_ADDRESS_NOT_REGISTERED : e->devmem->query(addr, len, device);
}
