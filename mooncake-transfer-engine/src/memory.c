/* Registering local memory and engine-managed (shareable) buffers. Every change is re-published
 * so peers using the HTTP metadata service see it; P2P peers fetch on demand. */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mooncake/common/log.h"
#include "te_internal.h"
#include "transports/shm.h"

static void mc__republish(mc_engine_t *e) {
    int rc;
    if (!e->initialized)
        return;
    rc = mc__meta_publish(e);
    if (rc)
        MC_WARN("re-publishing segment %s failed: %s", e->name, mc_strerror(rc));
}

static int mc__location_ok(const char *location) {
    return !location || strlen(location) < sizeof(((mc__region_t *)0)->location);
}

int mc_engine_register_memory(mc_engine_t *e, void *addr, size_t len, const char *location) {
    mc__region_t g;
    int rc;
    if (!e || !addr || !len || !mc__location_ok(location))
        return MC_ERR_INVALID_ARGUMENT;
    memset(&g, 0, sizeof(g));
    g.addr = (uint64_t)(uintptr_t)addr;
    g.len = len;
    g.memfd = -1;
    strcpy(g.location, location && *location ? location : "*");
    rc = mc__reg_add(&e->reg, &g);
    if (!rc)
        mc__republish(e);
    return rc;
}

/* Removes a registration of the wanted kind (managed or not) starting at addr. */
static int mc__unregister(mc_engine_t *e, void *addr, int managed, mc__region_t *out) {
    int rc;
    if (!e || !addr)
        return MC_ERR_INVALID_ARGUMENT;
    rc = mc__reg_remove(&e->reg, (uint64_t)(uintptr_t)addr, managed, out);
    if (!rc)
        mc__republish(e);
    return rc;
}

int mc_engine_unregister_memory(mc_engine_t *e, void *addr) {
    return mc__unregister(e, addr, 0, NULL);
}

int mc_engine_alloc_managed(mc_engine_t *e, size_t len, void **out) {
    mc__region_t g;
    void *p = NULL;
    size_t map_len = 0;
    int fd = -1;
    int rc = MC_ERR_INVALID_ARGUMENT;
    if (!e || !len || !out)
        goto out;
    *out = NULL;
    rc = mc__shm_alloc(len, &fd, &p, &map_len);
    if (rc)
        goto out;
    memset(&g, 0, sizeof(g));
    g.addr = (uint64_t)(uintptr_t)p;
    g.len = len;
    g.memfd = fd;
    g.map_len = map_len;
    strcpy(g.location, "cpu:0");
    rc = mc__reg_add(&e->reg, &g);
    if (rc) {
        munmap(p, map_len);
        close(fd);
        goto out;
    }
    *out = p;
    mc__republish(e);
out:
    return rc;
}

int mc_engine_free_managed(mc_engine_t *e, void *addr) {
    mc__region_t g;
    int rc = mc__unregister(e, addr, 1, &g);
    if (rc)
        return rc;
    /* the registry generation was bumped by the removal, before this unmap */
    munmap(addr, g.map_len);
    close(g.memfd);
    return 0;
}
