#include "registry.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"

#define MC__REG_GRACE_MS 1000

int mc__reg_init(mc__registry_t *r) {
    pthread_condattr_t ca;
    int bad;
    memset(r, 0, sizeof(*r));
    atomic_init(&r->local_gen, 1);
    r->gen = &r->local_gen;
    r->grace_ms = MC__REG_GRACE_MS;
    if (pthread_rwlock_init(&r->lock, NULL))
        return MC_ERR_MEMORY;
    if (pthread_mutex_init(&r->pin_lock, NULL)) {
        pthread_rwlock_destroy(&r->lock);
        return MC_ERR_MEMORY;
    }
    /* the grace wait must not stretch when the wall clock is set back */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    bad = pthread_cond_init(&r->pin_cond, &ca);
    pthread_condattr_destroy(&ca);
    if (bad) {
        pthread_mutex_destroy(&r->pin_lock);
        pthread_rwlock_destroy(&r->lock);
        return MC_ERR_MEMORY;
    }
    return 0;
}

void mc__reg_destroy(mc__registry_t *r) {
    mc__free(r->regions);
    r->regions = NULL;
    r->n = 0;
    pthread_cond_destroy(&r->pin_cond);
    pthread_mutex_destroy(&r->pin_lock);
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

int mc__reg_contains(mc__registry_t *r, uint64_t addr, uint64_t len, uint64_t epoch) {
    const mc__region_t *g;
    int ok;
    pthread_rwlock_rdlock(&r->lock);
    g = mc__reg_find_locked(r, addr, len);
    ok = g && (epoch == 0 || g->epoch == epoch);
    pthread_rwlock_unlock(&r->lock);
    return ok;
}

/* Does [a, a+alen) overlap [b, b+blen)? Both were checked not to wrap. */
static int mc__overlaps(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen) {
    return a < b + blen && b < a + alen;
}

static int mc__reg_overlaps_table(const mc__registry_t *r, uint64_t addr, uint64_t len) {
    size_t i = mc__reg_upper(r, addr);
    return (i > 0 && r->regions[i - 1].addr + r->regions[i - 1].len > addr) ||
           (i < r->n && addr + len > r->regions[i].addr);
}

int mc__reg_add_many(mc__registry_t *r, const mc__region_t *regs, size_t n) {
    int rc = MC_ERR_INVALID_ARGUMENT;
    if (!regs || !n)
        return rc;
    for (size_t i = 0; i < n; i++) {
        if (!regs[i].addr || !regs[i].len || regs[i].addr + regs[i].len < regs[i].addr)
            return rc;
    }
    pthread_rwlock_wrlock(&r->lock);
    rc = MC_ERR_ADDRESS_OVERLAPPED;
    for (size_t i = 0; i < n; i++) {
        if (mc__reg_overlaps_table(r, regs[i].addr, regs[i].len))
            goto out;
        /* quadratic, but batches are the size of a model's layer list, and this is not hot */
        for (size_t j = 0; j < i; j++)
            if (mc__overlaps(regs[i].addr, regs[i].len, regs[j].addr, regs[j].len))
                goto out;
    }
    /* grow first: from here on nothing can fail, so the batch goes in whole or not at all */
    if (r->n + n > r->cap) {
        size_t ncap = r->cap ? r->cap : 16;
        mc__region_t *nr;
        while (ncap < r->n + n)
            ncap *= 2;
        nr = mc__realloc(r->regions, ncap * sizeof(*nr));
        if (!nr) {
            rc = MC_ERR_MEMORY;
            goto out;
        }
        r->regions = nr;
        r->cap = ncap;
    }
    for (size_t k = 0; k < n; k++) {
        size_t i = mc__reg_upper(r, regs[k].addr);
        memmove(&r->regions[i + 1], &r->regions[i], (r->n - i) * sizeof(*r->regions));
        r->regions[i] = regs[k];
        r->regions[i].shm_id = regs[k].memfd >= 0 ? r->next_shm_id++ : -1;
        r->regions[i].uid = ++r->next_uid;
        r->n++;
    }
    atomic_fetch_add(r->gen, 1);
    rc = 0;
out:
    pthread_rwlock_unlock(&r->lock);
    return rc;
}

int mc__reg_add(mc__registry_t *r, const mc__region_t *reg) {
    return mc__reg_add_many(r, reg, 1);
}

static void mc__deadline_ts(struct timespec *ts, int ms) {
    *ts = mc__clock_after_ms(CLOCK_MONOTONIC, ms > 0 ? (uint64_t)ms : 0);
}

static int mc__pinned(const mc__registry_t *r, uint64_t uid) {
    for (const mc__pin_t *p = r->pins; p; p = p->next)
        if (p->uid == uid)
            return 1;
    return 0;
}

/* Waits until no pin holds any of the n (already unlisted) regions: a grace period first, then
 * the connections still inside them are shut down, which ends their blocked I/O at once. */
static void mc__reg_drain(mc__registry_t *r, const uint64_t *uids, size_t n) {
    struct timespec ts;
    int cut = 0;
    mc__deadline_ts(&ts, r->grace_ms);
    pthread_mutex_lock(&r->pin_lock);
    for (size_t i = 0; i < n; i++) {
        while (mc__pinned(r, uids[i])) {
            if (!cut) {
                if (pthread_cond_timedwait(&r->pin_cond, &r->pin_lock, &ts) != ETIMEDOUT)
                    continue;
                cut = 1;
            }
            /* fds stay open while their pin is listed: the serving thread unpins before it
             * closes the connection */
            for (mc__pin_t *p = r->pins; p; p = p->next)
                if (p->uid == uids[i] && p->fd >= 0)
                    shutdown(p->fd, SHUT_RDWR);
            pthread_cond_wait(&r->pin_cond, &r->pin_lock);
        }
    }
    pthread_mutex_unlock(&r->pin_lock);
}

int mc__reg_remove_many(mc__registry_t *r, const uint64_t *addrs, size_t n, int managed,
                        mc__region_t *outs) {
    uint64_t one;
    uint64_t *uids = &one;
    int rc = MC_ERR_INVALID_ARGUMENT;
    if (!addrs || !n)
        return rc;
    if (n > 1) {
        uids = mc__calloc(n, sizeof(*uids));
        if (!uids)
            return MC_ERR_MEMORY;
    }
    pthread_rwlock_wrlock(&r->lock);
    for (size_t k = 0; k < n; k++) {
        size_t i = mc__reg_upper(r, addrs[k]);
        if (i == 0 || r->regions[i - 1].addr != addrs[k])
            goto out;
        if (managed >= 0 && (r->regions[i - 1].memfd >= 0) != managed)
            goto out;
        for (size_t j = 0; j < k; j++)
            if (addrs[j] == addrs[k])
                goto out;
    }
    for (size_t k = 0; k < n; k++) {
        size_t i = mc__reg_upper(r, addrs[k]) - 1;
        if (outs)
            outs[k] = r->regions[i];
        uids[k] = r->regions[i].uid;
        memmove(&r->regions[i], &r->regions[i + 1], (r->n - i - 1) * sizeof(*r->regions));
        r->n--;
    }
    /* Bumped before the caller unmaps: a same-host peer copying into this region sees the change
     * after its copy and does not report success. */
    atomic_fetch_add(r->gen, 1);
    rc = 0;
out:
    pthread_rwlock_unlock(&r->lock);
    /* out of the table, no new pin can find them; wait for the ones already taken */
    if (!rc)
        mc__reg_drain(r, uids, n);
    if (uids != &one)
        mc__free(uids);
    return rc;
}

int mc__reg_remove(mc__registry_t *r, uint64_t addr, int managed, mc__region_t *out) {
    return mc__reg_remove_many(r, &addr, 1, managed, out);
}

int mc__reg_pin(mc__registry_t *r, uint64_t addr, uint64_t len, uint64_t epoch, int fd,
                mc__pin_t *pin) {
    const mc__region_t *g;
    int rc = MC_ERR_ADDRESS_NOT_REGISTERED;
    pin->uid = 0;
    pin->fd = fd;
    pthread_rwlock_rdlock(&r->lock);
    g = mc__reg_find_locked(r, addr, len);
    if (g && (epoch == 0 || g->epoch == epoch)) {
        pin->uid = g->uid;
        pin->addr = g->addr;
        pin->len = g->len;
        pin->device = g->place.kind == MC__MEM_CUDA ? g->place.device : -1;
        pthread_mutex_lock(&r->pin_lock);
        pin->next = r->pins;
        r->pins = pin;
        pthread_mutex_unlock(&r->pin_lock);
        rc = 0;
    }
    pthread_rwlock_unlock(&r->lock);
    return rc;
}

void mc__reg_unpin(mc__registry_t *r, mc__pin_t *pin) {
    mc__pin_t **pp;
    if (!pin->uid)
        return;
    pthread_mutex_lock(&r->pin_lock);
    for (pp = &r->pins; *pp && *pp != pin; pp = &(*pp)->next) {
    }
    if (*pp)
        *pp = pin->next;
    /* removers and quiescers wait on this; both are rare, so one shared condition is enough */
    pthread_cond_broadcast(&r->pin_cond);
    pthread_mutex_unlock(&r->pin_lock);
    pin->uid = 0;
}

void mc__reg_quiesce_begin(mc__registry_t *r, uint64_t addr, uint64_t len) {
    int busy;
    pthread_mutex_lock(&r->pin_lock);
    do {
        busy = 0;
        for (const mc__pin_t *p = r->pins; p && !busy; p = p->next)
            busy = mc__overlaps(p->addr, p->len, addr, len);
        if (busy)
            pthread_cond_wait(&r->pin_cond, &r->pin_lock);
    } while (busy);
}

void mc__reg_quiesce_end(mc__registry_t *r) {
    pthread_mutex_unlock(&r->pin_lock);
}
