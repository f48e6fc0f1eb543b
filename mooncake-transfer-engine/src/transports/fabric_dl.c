/* dlopen("libfabric.so.1") once per process (fabric_dl.h). The handle is never closed: providers
 * keep threads and atexit handlers inside it. */
#include "transports/fabric_dl.h"

#ifdef MC_HAVE_LIBFABRIC
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

static mc__fi_api_t mc__fi;
static const char *mc__fi_why;
static int mc__fi_ok;
static pthread_once_t mc__fi_once = PTHREAD_ONCE_INIT;

/* dlsym returns an object pointer; POSIX guarantees it converts to a function pointer. */
#define MC__FI_SYM(h, field, name)                                                                 \
    do {                                                                                           \
        void *sym_ = dlsym(h, name);                                                               \
        if (!sym_) {                                                                               \
            mc__fi_why = "libfabric.so.1 lacks " name;                                             \
            return;                                                                                \
        }                                                                                          \
        *(void **)(&mc__fi.field) = sym_;                                                          \
    } while (0)

static void mc__fi_open(void) {
    void *h = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        mc__fi_why = "libfabric.so.1 is not installed";
        return;
    }
    MC__FI_SYM(h, getinfo, "fi_getinfo");
    MC__FI_SYM(h, freeinfo, "fi_freeinfo");
    MC__FI_SYM(h, dupinfo, "fi_dupinfo");
    MC__FI_SYM(h, fabric, "fi_fabric");
    MC__FI_SYM(h, strerror, "fi_strerror");
    mc__fi_ok = 1;
}

const mc__fi_api_t *mc__fi_load(const char **why) {
    pthread_once(&mc__fi_once, mc__fi_open);
    if (why)
        *why = mc__fi_why;
    return mc__fi_ok ? &mc__fi : NULL;
}
#else
typedef int mc__fi_dl_unused; /* ISO C wants something in a translation unit */
#endif
