#include "registry.h"

#include <string.h>

#include "mooncake/common/alloc.h"
#include "mooncake/error.h"

int mc__reg_init(mc__registry_t *r) {
    memset(r, 0, sizeof(*r));
    atomic_init(&r->local_gen, 1);
    r->gen = &r->local_gen;
    return pthread_rwlock_init(&r->lock, NULL) ? MC_ERR_MEMORY : 0;
}

void mc__reg_destroy(mc__registry_t *r) {
    mc__free(r->regions);
    r->regions = NULL;
    pthread_rwlock_destroy(&r->lock);
}

/* Index of the first region whose start is > addr. */
static size_t mc__reg_upper(const mc__registry_t *r, uint64_t addr) {
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->regions[mid].addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

const mc__region_t *mc__reg_find_locked(const mc__registry_t *r, uint64_t addr, uint64_t len) {
    size_t i = mc__reg_upper(r, addr);
    const mc__region_t *g;
    if (i == 0 || len == 0 || addr + len < addr)
        return NULL;
    g = &r->regions[i - 1];
    if (addr - g->addr < g->len && len <= g->len - (addr - g->addr))
        return g;
    return NULL;
}

int mc__reg_contains(mc__registry_t *r, uint64_t addr, uint64_t len) {
    int ok;
    pthread_rwlock_rdlock(&r->lock);
    ok = mc__reg_find_locked(r, addr, len) != NULL;
    pthread_rwlock_unlock(&r->lock);
    return ok;
}

int mc__reg_add(mc__registry_t *r, const mc__region_t *reg) {
    size_t i;
    int rc = 0;
    if (!reg->addr || !reg->len || reg->addr + reg->len < reg->addr)
        return MC_ERR_INVALID_ARGUMENT;
    pthread_rwlock_wrlock(&r->lock);
    i = mc__reg_upper(r, reg->addr);
    if ((i > 0 && r->regions[i - 1].addr + r->regions[i - 1].len > reg->addr) ||
        (i < r->n && reg->addr + reg->len > r->regions[i].addr)) {
        rc = MC_ERR_ADDRESS_OVERLAPPED;
        goto out;
    }
    if (r->n == r->cap) {
        size_t ncap = r->cap ? r->cap * 2 : 16;
        mc__region_t *nr = mc__realloc(r->regions, ncap * sizeof(*nr));
        if (!nr) {
            rc = MC_ERR_MEMORY;
            goto out;
        }
        r->regions = nr;
        r->cap = ncap;
    }
    memmove(&r->regions[i + 1], &r->regions[i], (r->n - i) * sizeof(*r->regions));
    r->regions[i] = *reg;
    r->regions[i].shm_id = reg->memfd >= 0 ? r->next_shm_id++ : -1;
    r->n++;
    atomic_fetch_add(r->gen, 1);
out:
    pthread_rwlock_unlock(&r->lock);
    return rc;
}

int mc__reg_remove(mc__registry_t *r, uint64_t addr, int managed, mc__region_t *out) {
    size_t i;
    int rc = MC_ERR_INVALID_ARGUMENT;
    pthread_rwlock_wrlock(&r->lock);
    i = mc__reg_upper(r, addr);
    if (i == 0 || r->regions[i - 1].addr != addr)
        goto out;
    i--;
    if (managed >= 0 && (r->regions[i].memfd >= 0) != managed)
        goto out;
    if (out)
        *out = r->regions[i];
    memmove(&r->regions[i], &r->regions[i + 1], (r->n - i - 1) * sizeof(*r->regions));
    r->n--;
    /* Bumped before the caller unmaps: a same-host peer copying into this region sees the change
     * after its copy and does not report success. */
    atomic_fetch_add(r->gen, 1);
    rc = 0;
out:
    pthread_rwlock_unlock(&r->lock);
    return rc;
}
