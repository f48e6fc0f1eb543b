/* Device-memory classification (device_mem.h): the location string and, when the process has
 * loaded it, the CUDA driver's cuPointerGetAttribute. */
#include "device_mem.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mooncake/common/log.h"
#include "mooncake/error.h"

/* The few driver API values used (cuda.h, stable since CUDA 4): not included, so that nothing
 * here needs CUDA's headers to build. */
#define MC__CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define MC__CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
#define MC__CU_MEMORYTYPE_DEVICE 2
typedef int (*mc__cu_pointer_get_attribute_fn)(void *data, int attribute, unsigned long long ptr);

/* The driver's cuPointerGetAttribute if the process has libcuda.so.1 loaded, else NULL. Looked
 * up on every call (a registration, not a transfer): the driver may be loaded after the engine
 * started, by the framework that allocates the GPU buffers. RTLD_NOLOAD never loads it. */
static mc__cu_pointer_get_attribute_fn mc__cu_driver(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    mc__cu_pointer_get_attribute_fn fn = NULL;
    void *sym;
    if (!h)
        return NULL;
    sym = dlsym(h, "cuPointerGetAttribute");
    if (sym) /* POSIX: dlsym's object pointer converts to a function pointer */
        *(void **)(&fn) = sym;
    dlclose(h); /* drops only the reference NOLOAD took; the library stays */
    return fn;
}

/* "cuda" (device 0) or "cuda:<ordinal>": 1 and the ordinal; 0 for anything else */
static int mc__parse_cuda(const char *loc, int *device) {
    const char *p = loc + 4;
    char *end;
    long v;
    if (!*p) {
        *device = 0;
        return 1;
    }
    if (*p != ':' || p[1] < '0' || p[1] > '9')
        return 0;
    errno = 0;
    v = strtol(p + 1, &end, 10);
    if (errno || *end || v > 1023)
        return 0;
    *device = (int)v;
    return 1;
}

int mc__mem_classify(const void *addr, const char *location, mc__mem_place_t *out) {
    const char *loc = location ? location : "*";
    mc__cu_pointer_get_attribute_fn get;
    int named_cuda = 0, named_device = 0;
    unsigned int type = 0;
    int ordinal = 0;
    out->kind = MC__MEM_HOST;
    out->device = 0;
    if (!strncmp(loc, "cpu", 3))
        return 0;
    if (!strncmp(loc, "cuda", 4)) {
        if (!mc__parse_cuda(loc, &named_device)) {
            MC_ERROR("memory location \"%s\": expected \"cuda\" or \"cuda:<ordinal>\"", loc);
            return MC_ERR_INVALID_ARGUMENT;
        }
        named_cuda = 1;
    }
    get = mc__cu_driver();
    if (get &&
        get(&type, MC__CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (unsigned long long)(uintptr_t)addr) ==
            0 &&
        type == MC__CU_MEMORYTYPE_DEVICE) {
        if (get(&ordinal, MC__CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                (unsigned long long)(uintptr_t)addr) != 0)
            ordinal = named_device;
        if (named_cuda && ordinal != named_device)
            MC_WARN("memory at %p registered as \"%s\" is on GPU %d (the CUDA driver says so)",
                    addr, loc, ordinal);
        out->kind = MC__MEM_CUDA;
        out->device = ordinal;
        return 0;
    }
    if (named_cuda)
        MC_WARN("memory at %p registered as \"%s\" is not CUDA device memory (%s); treated as "
                "host memory",
                addr, loc,
                get ? "the CUDA driver says so" : "the CUDA driver is not loaded in this process");
    return 0;
}
