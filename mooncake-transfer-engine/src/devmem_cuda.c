/* The CUDA driver's device-memory table (devmem.h), resolved at run time. A buffer can only be
 * CUDA device memory in a process that loaded the driver (libcuda.so.1, which every CUDA
 * framework loads), so the driver is looked up with RTLD_NOLOAD, never loaded by us: on a host
 * or in a process without it every query says "host" and nothing else is ever called. The copies
 * run on the engine's own threads, which have no CUDA context: each makes the device's primary
 * context (the one the CUDA runtime and PyTorch use) current before it copies. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "devmem.h"
#include "mooncake/common/log.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"

/* The driver API's types and values used (cuda.h, stable since CUDA 4); not included, so that
 * this builds without CUDA's headers. */
typedef int cu_result;
typedef int cu_device;
typedef void *cu_context;
typedef unsigned long long cu_ptr;
#define MC__CU_ATTR_MEMORY_TYPE 2
#define MC__CU_ATTR_DEVICE_ORDINAL 9
#define MC__CU_MEMTYPE_DEVICE 2
#define MC__CU_HOSTALLOC_PORTABLE 1
#define MC__CU_MAX_DEVICES 64

/* Where CUDA's headers are (a GPU build host, mooncake-transfer-engine/CMakeLists.txt), the
 * values and types above are checked against them at compile time; nothing is linked. */
#ifdef MC_HAVE_CUDA_H
#include <cuda.h>
_Static_assert(CU_POINTER_ATTRIBUTE_MEMORY_TYPE == MC__CU_ATTR_MEMORY_TYPE, "cuda.h differs");
_Static_assert(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL == MC__CU_ATTR_DEVICE_ORDINAL, "cuda.h differs");
_Static_assert(CU_MEMORYTYPE_DEVICE == MC__CU_MEMTYPE_DEVICE, "cuda.h differs");
_Static_assert(CU_MEMHOSTALLOC_PORTABLE == MC__CU_HOSTALLOC_PORTABLE, "cuda.h differs");
_Static_assert(sizeof(CUresult) == sizeof(cu_result), "cuda.h differs");
_Static_assert(sizeof(CUdevice) == sizeof(cu_device), "cuda.h differs");
_Static_assert(sizeof(CUcontext) == sizeof(cu_context), "cuda.h differs");
_Static_assert(_Generic((CUdeviceptr)0, cu_ptr : 1, default : 0), "cuda.h differs");
/* the copies' parameter lists, as the driver declares them */
_Static_assert(_Generic(&cuMemcpyDtoH_v2, CUresult (*)(void *, CUdeviceptr, size_t) : 1,
                        default : 0),
               "cuda.h differs");
_Static_assert(_Generic(&cuMemcpyHtoD_v2, CUresult (*)(CUdeviceptr, const void *, size_t) : 1,
                        default : 0),
               "cuda.h differs");
_Static_assert(_Generic(&cuMemHostAlloc, CUresult (*)(void **, size_t, unsigned int) : 1,
                        default : 0),
               "cuda.h differs");
#endif

typedef struct mc__cu {
    cu_result (*ptr_attr)(void *data, int attr, cu_ptr p);
    cu_result (*device_get)(cu_device *d, int ordinal);
    cu_result (*primary_retain)(cu_context *ctx, cu_device d);
    cu_result (*ctx_set)(cu_context ctx);
    cu_result (*dtoh)(void *dst, cu_ptr src, size_t n);
    cu_result (*htod)(cu_ptr dst, const void *src, size_t n);
    cu_result (*ctx_sync)(void);
    cu_result (*host_alloc)(void **p, size_t n, unsigned flags);
    cu_result (*host_free)(void *p);
} mc__cu_t;

static pthread_mutex_t mc__cu_lock = PTHREAD_MUTEX_INITIALIZER;
static mc__cu_t mc__cu_fns;
static int mc__cu_ready; /* 1 once every symbol was found (under mc__cu_lock, then read-only) */
/* 0: not found yet, 1: queries only, 2: ready; set once under mc__cu_lock, then read without */
static _Atomic int mc__cu_state;
static _Atomic uint64_t mc__cu_next_try_ms; /* the next NOLOAD look-up (set under mc__cu_lock) */
static cu_context mc__cu_ctx[MC__CU_MAX_DEVICES];

static void mc__cu_sym(void *h, const char *name, void *slot) {
    void *s = dlsym(h, name);
    memcpy(slot, &s, sizeof(s)); /* POSIX: dlsym's object pointer converts to a function's */
}

/* The driver's table once the process has loaded it, else NULL (asked again next time: the
 * framework may load it after the engine started). */
static const mc__cu_t *mc__cu(int force) {
    const mc__cu_t *out = NULL;
    uint64_t now;
    if (atomic_load_explicit(&mc__cu_state, memory_order_acquire))
        return &mc__cu_fns;
    /* Queries look at most once a second: a submit of unregistered memory on a host without a
     * GPU stays as cheap as before. A copy (force) always looks: its memory was registered as
     * a GPU's, so the driver is there. */
    now = mc__now_ms();
    if (!force && now < atomic_load_explicit(&mc__cu_next_try_ms, memory_order_relaxed))
        return NULL;
    pthread_mutex_lock(&mc__cu_lock);
    if (!mc__cu_ready && (force || now >= mc__cu_next_try_ms)) {
        mc__cu_next_try_ms = now + 1000;
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
        if (h) {
            mc__cu_t f;
            memset(&f, 0, sizeof(f));
            mc__cu_sym(h, "cuPointerGetAttribute", &f.ptr_attr);
            mc__cu_sym(h, "cuDeviceGet", &f.device_get);
            mc__cu_sym(h, "cuDevicePrimaryCtxRetain", &f.primary_retain);
            mc__cu_sym(h, "cuCtxSetCurrent", &f.ctx_set);
            mc__cu_sym(h, "cuMemcpyDtoH_v2", &f.dtoh);
            mc__cu_sym(h, "cuMemcpyHtoD_v2", &f.htod);
            mc__cu_sym(h, "cuCtxSynchronize", &f.ctx_sync);
            mc__cu_sym(h, "cuMemHostAlloc", &f.host_alloc);
            mc__cu_sym(h, "cuMemFreeHost", &f.host_free);
            /* the handle stays open: the symbols are used from now on */
            if (f.ptr_attr && f.device_get && f.primary_retain && f.ctx_set && f.dtoh && f.htod &&
                f.ctx_sync && f.host_alloc && f.host_free) {
                mc__cu_fns = f;
                mc__cu_ready = 1;
            } else if (f.ptr_attr) {
                /* a partial driver (a test's stand-in): queries only */
                mc__cu_fns.ptr_attr = f.ptr_attr;
            }
        }
    }
    if (mc__cu_ready || mc__cu_fns.ptr_attr) {
        out = &mc__cu_fns;
        atomic_store_explicit(&mc__cu_state, mc__cu_ready ? 2 : 1, memory_order_release);
    }
    pthread_mutex_unlock(&mc__cu_lock);
    return out;
}

/* Makes GPU device's primary context current on this thread: 0 or MC_ERR_DEVICE_NOT_FOUND. */
static int mc__cu_enter(const mc__cu_t **out, int device) {
    const mc__cu_t *cu = mc__cu(1);
    cu_context ctx;
    if (!cu || !mc__cu_ready || device < 0 || device >= MC__CU_MAX_DEVICES)
        return MC_ERR_DEVICE_NOT_FOUND;
    pthread_mutex_lock(&mc__cu_lock);
    ctx = mc__cu_ctx[device];
    if (!ctx) {
        cu_device d;
        if (cu->device_get(&d, device) == 0 && cu->primary_retain(&ctx, d) == 0)
            mc__cu_ctx[device] = ctx; /* kept for the process's life, as the runtime does */
        else
            ctx = NULL;
    }
    pthread_mutex_unlock(&mc__cu_lock);
    if (!ctx || cu->ctx_set(ctx) != 0)
        return MC_ERR_DEVICE_NOT_FOUND;
    *out = cu;
    return 0;
}

static int mc__cu_query(const void *addr, size_t len, int *device) {
    const mc__cu_t *cu = mc__cu(0);
    unsigned int t0 = 0, t1 = 0;
    int ordinal = 0;
    *device = -1;
    if (!cu)
        return 0;
    if (cu->ptr_attr(&t0, MC__CU_ATTR_MEMORY_TYPE, (cu_ptr)(uintptr_t)addr) != 0)
        t0 = 0;
    if (len > 1 &&
        cu->ptr_attr(&t1, MC__CU_ATTR_MEMORY_TYPE, (cu_ptr)(uintptr_t)addr + len - 1) != 0)
        t1 = 0;
    if (len <= 1)
        t1 = t0;
    if ((t0 == MC__CU_MEMTYPE_DEVICE) != (t1 == MC__CU_MEMTYPE_DEVICE)) {
        MC_ERROR("[%p, +%zu) is device memory only in part", addr, len);
        return MC_ERR_INVALID_ARGUMENT;
    }
    if (t0 != MC__CU_MEMTYPE_DEVICE)
        return 0;
    if (cu->ptr_attr(&ordinal, MC__CU_ATTR_DEVICE_ORDINAL, (cu_ptr)(uintptr_t)addr) != 0)
        ordinal = 0;
    *device = ordinal;
    return 0;
}

static int mc__cu_classify(const void *addr, size_t len, const char *location,
                           mc__mem_place_t *out) {
    (void)len;
    return mc__mem_classify(addr, location, out);
}

static void mc__cu_forget(const void *addr) {
    (void)addr;
}

static int mc__cu_to_host(void *host, const void *dev, size_t n, int device) {
    const mc__cu_t *cu;
    int rc = mc__cu_enter(&cu, device);
    if (rc)
        return rc;
    if (cu->dtoh(host, (cu_ptr)(uintptr_t)dev, n) != 0) {
        MC_ERROR("GPU %d: copy of %zu bytes to host failed", device, n);
        return MC_ERR_MEMORY;
    }
    return 0;
}

static int mc__cu_from_host(void *dev, const void *host, size_t n, int device) {
    const mc__cu_t *cu;
    int rc = mc__cu_enter(&cu, device);
    if (rc)
        return rc;
    if (cu->htod((cu_ptr)(uintptr_t)dev, host, n) != 0) {
        MC_ERROR("GPU %d: copy of %zu bytes from host failed", device, n);
        return MC_ERR_MEMORY;
    }
    return 0;
}

static int mc__cu_sync(int device) {
    const mc__cu_t *cu;
    int rc = mc__cu_enter(&cu, device);
    if (rc)
        return rc;
    return cu->ctx_sync() == 0 ? 0 : MC_ERR_MEMORY;
}

static void *mc__cu_pinned_alloc(size_t n, int device) {
    const mc__cu_t *cu;
    void *p = NULL;
    if (mc__cu_enter(&cu, device) || cu->host_alloc(&p, n, MC__CU_HOSTALLOC_PORTABLE) != 0)
        return NULL;
    return p;
}

static void mc__cu_pinned_free(void *p, size_t n) {
    (void)n;
    if (p && mc__cu_ready)
        (void)mc__cu_fns.host_free(p);
}

const mc__devmem_ops_t mc__devmem_cuda = {.name = "cuda",
                                          .query = mc__cu_query,
                                          .classify = mc__cu_classify,
                                          .forget = mc__cu_forget,
                                          .to_host = mc__cu_to_host,
                                          .from_host = mc__cu_from_host,
                                          .sync = mc__cu_sync,
                                          .pinned_alloc = mc__cu_pinned_alloc,
                                          .pinned_free = mc__cu_pinned_free};
