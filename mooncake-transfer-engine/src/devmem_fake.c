/* A fake device-memory backend (devmem.h) for hosts without a GPU. Its "device memory" is host
 * memory the tests name (mc__devmem_fake_add, or a registration with location "cuda:N", which
 * marks the registered range as GPU N's); the engine must reach it only through this table's
 * copies, which count what they move and fail on demand (devmem_fake.h). So the staging
 * pipeline, its chunking, its bounds and its errors run on every host. */
#include "devmem_fake.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "devmem.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/config.h"
#include "mooncake/common/log.h"
#include "mooncake/error.h"

#define MC__FAKE_RANGES 64

typedef struct mc__fake_range {
    uintptr_t lo, hi;
    int device;
    int refs; /* registrations that noted it (the last one's unregistration removes it); 0: added
               * by mc__devmem_fake_add, removed by mc__devmem_fake_remove */
} mc__fake_range_t;

static pthread_mutex_t mc__fake_lock = PTHREAD_MUTEX_INITIALIZER;
static mc__fake_range_t mc__fake_ranges[MC__FAKE_RANGES];
static int mc__fake_n;
static _Atomic int64_t mc__fake_fail_in = -1;
static mc__devmem_fake_stats_t mc__fake_st; /* under mc__fake_lock */

static int mc__fake_devices(void) {
    return (int)mc__env_size_in("MC_DEVMEM_FAKE_DEVICES", 2, 1, 64);
}

static int mc__fake_add_locked(uintptr_t lo, uintptr_t hi, int device, int refs) {
    for (int i = 0; i < mc__fake_n; i++) {
        mc__fake_range_t *r = &mc__fake_ranges[i];
        /* the same buffer registered by another engine of this process: one more reference */
        if (refs && r->refs && r->lo == lo && r->hi == hi && r->device == device) {
            r->refs++;
            return 0;
        }
        if (lo < r->hi && r->lo < hi)
            return MC_ERR_ADDRESS_OVERLAPPED;
    }
    if (mc__fake_n == MC__FAKE_RANGES)
        return MC_ERR_MEMORY;
    mc__fake_ranges[mc__fake_n++] = (mc__fake_range_t){lo, hi, device, refs};
    return 0;
}

int mc__devmem_fake_add(const void *addr, size_t len, int device) {
    int rc;
    if (!addr || !len || device < 0)
        return MC_ERR_INVALID_ARGUMENT;
    pthread_mutex_lock(&mc__fake_lock);
    rc = mc__fake_add_locked((uintptr_t)addr, (uintptr_t)addr + len, device, 0);
    pthread_mutex_unlock(&mc__fake_lock);
    return rc;
}

static void mc__fake_remove(const void *addr, int unreg) {
    pthread_mutex_lock(&mc__fake_lock);
    for (int i = 0; i < mc__fake_n; i++) {
        mc__fake_range_t *r = &mc__fake_ranges[i];
        /* an unregistration names the start of its registration, which may lie inside the
         * device buffer another registration noted */
        if (unreg ? r->refs == 0 || (uintptr_t)addr < r->lo || (uintptr_t)addr >= r->hi
                  : r->lo != (uintptr_t)addr)
            continue;
        if (!unreg || --r->refs == 0)
            *r = mc__fake_ranges[--mc__fake_n];
        break;
    }
    pthread_mutex_unlock(&mc__fake_lock);
}

void mc__devmem_fake_remove(const void *addr) {
    mc__fake_remove(addr, 0);
}

void mc__devmem_fake_fail_after(int64_t n) {
    atomic_store(&mc__fake_fail_in, n);
}

void mc__devmem_fake_stats(mc__devmem_fake_stats_t *out) {
    pthread_mutex_lock(&mc__fake_lock);
    *out = mc__fake_st;
    pthread_mutex_unlock(&mc__fake_lock);
}

void mc__devmem_fake_reset_stats(void) {
    pthread_mutex_lock(&mc__fake_lock);
    int64_t live = mc__fake_st.pinned_live;
    memset(&mc__fake_st, 0, sizeof(mc__fake_st));
    mc__fake_st.pinned_live = live; /* buffers still held stay counted */
    pthread_mutex_unlock(&mc__fake_lock);
}

static int mc__fake_query(const void *addr, size_t len, int *device) {
    uintptr_t lo = (uintptr_t)addr, hi = lo + len;
    int rc = 0;
    *device = -1;
    pthread_mutex_lock(&mc__fake_lock);
    for (int i = 0; i < mc__fake_n; i++) {
        const mc__fake_range_t *r = &mc__fake_ranges[i];
        if (lo < r->hi && r->lo < hi) {
            if (lo < r->lo || hi > r->hi)
                rc = MC_ERR_INVALID_ARGUMENT; /* runs off the device allocation */
            else
                *device = r->device;
            break;
        }
    }
    pthread_mutex_unlock(&mc__fake_lock);
    if (rc)
        MC_ERROR("[%p, +%zu) is device memory only in part", addr, len);
    return rc;
}

/* "cuda:N" registers the range as fake GPU N's (N must exist); anything else is whatever the
 * table already says of it. */
static int mc__fake_classify(const void *addr, size_t len, const char *location,
                             mc__mem_place_t *out) {
    int device = -1, rc = 0;
    out->kind = MC__MEM_HOST;
    out->device = 0;
    if (location && !strncmp(location, "cuda", 4)) {
        char *end = NULL;
        long v = location[4] == ':' ? strtol(location + 5, &end, 10) : 0;
        if ((location[4] && location[4] != ':') ||
            (location[4] == ':' && (end == location + 5 || *end || v < 0)))
            return MC_ERR_INVALID_ARGUMENT;
        if (v >= mc__fake_devices()) {
            MC_ERROR("memory location \"%s\": no such device (%d fake devices)", location,
                     mc__fake_devices());
            return MC_ERR_DEVICE_NOT_FOUND;
        }
        pthread_mutex_lock(&mc__fake_lock);
        rc = mc__fake_add_locked((uintptr_t)addr, (uintptr_t)addr + len, (int)v, 1);
        pthread_mutex_unlock(&mc__fake_lock);
        if (rc)
            return rc;
        out->kind = MC__MEM_CUDA;
        out->device = (int)v;
        return 0;
    }
    pthread_mutex_lock(&mc__fake_lock);
    for (int i = 0; i < mc__fake_n; i++) {
        mc__fake_range_t *r = &mc__fake_ranges[i];
        if ((uintptr_t)addr < r->hi && r->lo < (uintptr_t)addr + len) {
            if ((uintptr_t)addr < r->lo || (uintptr_t)addr + len > r->hi) {
                rc = MC_ERR_INVALID_ARGUMENT;
            } else {
                /* a registration inside another's device buffer holds it too */
                if (r->refs)
                    r->refs++;
                device = r->device;
            }
            break;
        }
    }
    pthread_mutex_unlock(&mc__fake_lock);
    if (rc == 0 && device >= 0) {
        out->kind = MC__MEM_CUDA;
        out->device = device;
    }
    return rc;
}

static void mc__fake_forget(const void *addr) {
    mc__fake_remove(addr, 1);
}

/* 1 when src holds the failure marker at a stride from its start */
static int mc__fake_marked(const void *src, size_t n) {
    const size_t m = sizeof(MC__DEVMEM_FAKE_MARKER) - 1;
    for (size_t off = 0; off + m <= n; off += MC__DEVMEM_FAKE_MARKER_STRIDE)
        if (!memcmp((const uint8_t *)src + off, MC__DEVMEM_FAKE_MARKER, m))
            return 1;
    return 0;
}

static int mc__fake_copy(void *dst, const void *src, size_t n, int device, int to_host) {
    int64_t left = atomic_load(&mc__fake_fail_in);
    int rc = 0;
    if (device < 0 || device >= mc__fake_devices())
        rc = MC_ERR_DEVICE_NOT_FOUND;
    else if (left == 0 || mc__fake_marked(src, n)) {
        rc = MC_ERR_MEMORY;
        if (left == 0)
            atomic_store(&mc__fake_fail_in, -1);
    } else if (left > 0)
        atomic_fetch_sub(&mc__fake_fail_in, 1);
    if (!rc)
        memcpy(dst, src, n);
    pthread_mutex_lock(&mc__fake_lock);
    if (rc)
        mc__fake_st.failed++;
    else if (to_host) {
        mc__fake_st.to_host++;
        mc__fake_st.to_host_bytes += n;
    } else {
        mc__fake_st.from_host++;
        mc__fake_st.from_host_bytes += n;
    }
    if (!rc && n > mc__fake_st.largest_copy)
        mc__fake_st.largest_copy = n;
    pthread_mutex_unlock(&mc__fake_lock);
    if (rc)
        MC_ERROR("fake device %d: copy of %zu bytes %s failed: %s", device, n,
                 to_host ? "to host" : "from host", mc_strerror(rc));
    return rc;
}

static int mc__fake_to_host(void *host, const void *dev, size_t n, int device) {
    return mc__fake_copy(host, dev, n, device, 1);
}

static int mc__fake_from_host(void *dev, const void *host, size_t n, int device) {
    return mc__fake_copy(dev, host, n, device, 0);
}

static int mc__fake_sync(int device) {
    if (device < 0 || device >= mc__fake_devices())
        return MC_ERR_DEVICE_NOT_FOUND;
    pthread_mutex_lock(&mc__fake_lock);
    mc__fake_st.syncs++;
    pthread_mutex_unlock(&mc__fake_lock);
    return 0;
}

static void *mc__fake_pinned_alloc(size_t n, int device) {
    void *p;
    (void)device;
    p = mc__malloc(n);
    if (p) {
        pthread_mutex_lock(&mc__fake_lock);
        mc__fake_st.pinned_allocs++;
        mc__fake_st.pinned_live++;
        pthread_mutex_unlock(&mc__fake_lock);
    }
    return p;
}

static void mc__fake_pinned_free(void *p, size_t n) {
    (void)n;
    if (!p)
        return;
    pthread_mutex_lock(&mc__fake_lock);
    mc__fake_st.pinned_live--;
    pthread_mutex_unlock(&mc__fake_lock);
    mc__free(p);
}

const mc__devmem_ops_t mc__devmem_fake = {.name = "fake",
                                          .query = mc__fake_query,
                                          .classify = mc__fake_classify,
                                          .forget = mc__fake_forget,
                                          .to_host = mc__fake_to_host,
                                          .from_host = mc__fake_from_host,
                                          .sync = mc__fake_sync,
                                          .pinned_alloc = mc__fake_pinned_alloc,
                                          .pinned_free = mc__fake_pinned_free};
