/* Where a registered buffer lives: host memory or a GPU's. Transports that can reach device
 * memory (the fabric transport, through libfabric's FI_HMEM interface) register it as such;
 * the others only ever see host memory.
 *
 * Nothing here links or loads a GPU library: the CUDA driver is asked only when the process has
 * already loaded it (a buffer cannot be CUDA device memory otherwise), so CPU hosts and the
 * default wheel are unaffected. */
#ifndef MC_TE_DEVICE_MEM_H
#define MC_TE_DEVICE_MEM_H

enum { MC__MEM_HOST = 0, MC__MEM_CUDA = 1 };

typedef struct mc__mem_place {
    int kind;   /* MC__MEM_HOST or MC__MEM_CUDA */
    int device; /* the GPU's ordinal (MC__MEM_CUDA) */
} mc__mem_place_t;

/* Classifies [addr] registered with `location` (the reference's "cpu:N", "cuda:N" or "*"):
 * - "cpu..." is host memory, asked of nobody;
 * - otherwise the CUDA driver, when the process has it loaded, says whether addr is device
 *   memory and of which GPU (its answer wins over the location's ordinal);
 * - "cuda:N" that the driver does not confirm (no driver loaded, or it says host) is host
 *   memory, with a warning: handing host memory to a GPU interface would fail later and less
 *   clearly.
 * Returns 0, or MC_ERR_INVALID_ARGUMENT for a location "cuda..." that is not "cuda" or
 * "cuda:<ordinal>". */
int mc__mem_classify(const void *addr, const char *location, mc__mem_place_t *out);

#endif
