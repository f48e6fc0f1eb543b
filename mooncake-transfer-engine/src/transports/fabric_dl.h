/* libfabric, loaded at run time: the few functions libfabric exports (every other fi_* call is a
 * static inline in its headers that goes through the ops tables of the objects these return), so
 * nothing links against it and an engine without libfabric.so.1 runs as before. */
#ifndef MC_TE_FABRIC_DL_H
#define MC_TE_FABRIC_DL_H

#ifdef MC_HAVE_LIBFABRIC
#include <rdma/fabric.h>

typedef struct mc__fi_api {
    int (*getinfo)(uint32_t version, const char *node, const char *service, uint64_t flags,
                   const struct fi_info *hints, struct fi_info **info);
    void (*freeinfo)(struct fi_info *info);
    struct fi_info *(*dupinfo)(const struct fi_info *info);
    int (*fabric)(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context);
    const char *(*strerror)(int errnum);
} mc__fi_api_t;

/* The library's functions (loaded once, kept for the process), or NULL with *why saying what was
 * missing. */
const mc__fi_api_t *mc__fi_load(const char **why);
#endif
#endif
