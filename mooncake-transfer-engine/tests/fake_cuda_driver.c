/* A stand-in for the CUDA driver (libcuda.so.1) on hosts without a GPU: cuPointerGetAttribute
 * says "device memory of GPU <n>" for one range the test names with fake_cuda_set_device_range,
 * and "not CUDA memory" (CUDA_ERROR_INVALID_VALUE) for everything else. Only the two attributes
 * the engine asks about are answered. */
#include <stddef.h>
#include <stdint.h>

#define FAKE_CUDA_SUCCESS 0
#define FAKE_CUDA_ERROR_INVALID_VALUE 1
#define FAKE_ATTR_MEMORY_TYPE 2
#define FAKE_ATTR_DEVICE_ORDINAL 9
#define FAKE_MEMORYTYPE_DEVICE 2

#define FAKE_EXPORT __attribute__((visibility("default")))

FAKE_EXPORT void fake_cuda_set_device_range(const void *addr, size_t len, int device);
FAKE_EXPORT int cuPointerGetAttribute(void *data, int attribute, unsigned long long ptr);

static uintptr_t range_lo, range_hi;
static int range_device;

void fake_cuda_set_device_range(const void *addr, size_t len, int device) {
    range_lo = (uintptr_t)addr;
    range_hi = (uintptr_t)addr + len;
    range_device = device;
}

int cuPointerGetAttribute(void *data, int attribute, unsigned long long ptr) {
    if (ptr < range_lo || ptr >= range_hi)
        return FAKE_CUDA_ERROR_INVALID_VALUE;
    if (attribute == FAKE_ATTR_MEMORY_TYPE) {
        *(unsigned int *)data = FAKE_MEMORYTYPE_DEVICE;
        return FAKE_CUDA_SUCCESS;
    }
    if (attribute == FAKE_ATTR_DEVICE_ORDINAL) {
        *(int *)data = range_device;
        return FAKE_CUDA_SUCCESS;
    }
    return FAKE_CUDA_ERROR_INVALID_VALUE;
}
