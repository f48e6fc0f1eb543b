/* Registering local memory and engine-managed (shareable) buffers. Every change is re-published
 * so peers using the HTTP metadata service see it; P2P peers fetch on demand. */
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "devmem.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/log.h"
#include "mooncake/common/mem_probe.h"
#include "te_internal.h"

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

static int mc__register_batch(mc_engine_t *e, void *const *addrs, const size_t *lens, size_t n,
                              const char *location) {
    mc__region_t one;
    mc__region_t *gs = &one;
    int rc = MC_ERR_INVALID_ARGUMENT;
    size_t classified = 0;
    if (!e || !addrs || !lens || !n || !mc__location_ok(location))
        return rc;
    if (n > 1) {
        gs = mc__calloc(n, sizeof(*gs));
        if (!gs)
            return MC_ERR_MEMORY;
    }
    for (size_t i = 0; i < n; i++) {
        rc = MC_ERR_INVALID_ARGUMENT;
        if (!addrs[i] || !lens[i])
            goto out;
        memset(&gs[i], 0, sizeof(gs[i]));
        gs[i].addr = (uint64_t)(uintptr_t)addrs[i];
        gs[i].len = lens[i];
        gs[i].memfd = -1;
        strcpy(gs[i].location, location && *location ? location : "*");
        rc = e->devmem->classify(addrs[i], lens[i], gs[i].location, &gs[i].place);
        if (rc)
            goto out;
        classified = i + 1;
        /* Host memory that is not there (a wild integer from Python, say) is refused now, not
         * found out by a fault when a peer's request reaches it. Device memory is the driver's. */
        if (gs[i].place.kind == MC__MEM_HOST && mc__mem_probe(addrs[i], lens[i], 0) != 0) {
            MC_ERROR("register_memory: [%p, +%zu) is not mapped readable in this process", addrs[i],
                     lens[i]);
            rc = MC_ERR_INVALID_ARGUMENT;
            goto out;
        }
    }
    /* all or none in one table edit, and one re-publish for the lot */
    rc = mc__reg_add_many(&e->reg, gs, n);
    if (!rc) {
        mc__transports_mem_registered(e, gs, n);
        mc__republish(e);
    }
out:
    /* a refused registration leaves no record with the device-memory hook (devmem_fake.c
     * counts the registrations of its device ranges) */
    if (rc)
        for (size_t i = 0; i < classified; i++)
            if (gs[i].place.kind == MC__MEM_CUDA)
                e->devmem->forget(addrs[i]);
    if (gs != &one)
        mc__free(gs);
    return rc;
}

/* Removes registrations of the wanted kind (managed or not) starting at addrs, all or none. */
static int mc__unregister(mc_engine_t *e, void *const *addrs, size_t n, int managed,
                          mc__region_t *out) {
    uint64_t one;
    uint64_t *as = &one;
    int rc = MC_ERR_INVALID_ARGUMENT;
    if (!e || !addrs || !n)
        return rc;
    if (n > 1) {
        as = mc__calloc(n, sizeof(*as));
        if (!as)
            return MC_ERR_MEMORY;
    }
    for (size_t i = 0; i < n; i++) {
        if (!addrs[i])
            goto out;
        as[i] = (uint64_t)(uintptr_t)addrs[i];
    }
    rc = mc__reg_remove_many(&e->reg, as, n, managed, out);
    if (!rc) {
        for (size_t i = 0; i < n; i++)
            e->devmem->forget(addrs[i]);
        mc__transports_mem_unregistered(e, as, n);
        mc__republish(e);
    }
out:
    if (as != &one)
        mc__free(as);
    return rc;
}

int mc_engine_register_memory(mc_engine_t *e, void *addr, size_t len, const char *location) {
    int rc;
    MC__GATED(e, rc, mc__register_batch(e, &addr, &len, 1, location));
    return rc;
}

int mc_engine_register_memory_batch(mc_engine_t *e, void *const *addrs, const size_t *lens,
                                    size_t n, const char *location) {
    int rc;
    MC__GATED(e, rc, mc__register_batch(e, addrs, lens, n, location));
    return rc;
}

int mc_engine_unregister_memory(mc_engine_t *e, void *addr) {
    int rc;
    MC__GATED(e, rc, mc__unregister(e, &addr, 1, 0, NULL));
    return rc;
}

int mc_engine_unregister_memory_batch(mc_engine_t *e, void *const *addrs, size_t n) {
    int rc;
    MC__GATED(e, rc, mc__unregister(e, addrs, n, 0, NULL));
    return rc;
}

int mc_engine_is_registered(mc_engine_t *e, const void *addr, size_t len) {
    int rc;
    if (!addr || !len)
        return MC_ERR_INVALID_ARGUMENT;
    MC__GATED(e, rc,
              mc__reg_contains(&e->reg, (uint64_t)(uintptr_t)addr, len, 0)
                  ? 0
                  : MC_ERR_ADDRESS_NOT_REGISTERED);
    return rc;
}

int mc_engine_is_host_memory(mc_engine_t *e, const void *addr, size_t len) {
    int rc, dev = -1;
    if (!addr || !len)
        return MC_ERR_INVALID_ARGUMENT;
    MC__GATED(e, rc, mc__devmem_local(e, addr, len, 0, &dev) == 0 && dev < 0 ? 0 : 1);
    return rc;
}

/* Memory the CPU cannot read may be a GPU's (not mapped into the host's address space): 0 when
 * the device-memory hook says it is, else MC_ERR_INVALID_ARGUMENT. */
static int mc__unmapped_device(mc_engine_t *e, const void *addr, size_t len) {
    int dev = -1;
    return e->devmem->query(addr, len, &dev) == 0 && dev >= 0 ? 0 : MC_ERR_INVALID_ARGUMENT;
}

int mc_engine_check_memory(mc_engine_t *e, const void *addr, size_t len, int writable) {
    uint64_t a = (uint64_t)(uintptr_t)addr;
    int rc;
    if (len == 0)
        return 0;
    if (!addr || a + len < a)
        return MC_ERR_INVALID_ARGUMENT;
    if (!e) /* no registrations to consult: the memory itself answers */
        return mc__mem_probe(addr, len, writable) ? MC_ERR_INVALID_ARGUMENT : 0;
    MC__GATED(e, rc,
              mc__reg_contains(&e->reg, a, len, 0)      ? 0
              : mc__reg_contains(&e->reg, a, 1, 0)      ? MC_ERR_ADDRESS_NOT_REGISTERED
              : mc__mem_probe(addr, len, writable) == 0 ? 0
                                                        : mc__unmapped_device(e, addr, len));
    return rc;
}

/* The copy runs with the region pinned, as a remote access does: an unregister (or the next
 * incarnation's free_managed) of that memory waits for it, and a copy naming a gone epoch is
 * refused, so a caller copying into its own segment needs no lock of its own around it. */
static int mc__local_copy(mc_engine_t *e, int opcode, void *local, uint64_t addr, size_t len,
                          uint64_t epoch) {
    mc__pin_t pin;
    int dev;
    int rc;
    if ((opcode != MC_OPCODE_READ && opcode != MC_OPCODE_WRITE) || !local || !len || !addr)
        return MC_ERR_INVALID_ARGUMENT;
    /* either side may be a GPU's memory (a store's get_into a device buffer): the device-memory
     * hook copies it (devmem.h) */
    rc = mc__devmem_local(e, local, len, 0, &dev);
    if (rc)
        return rc;
    rc = mc__reg_pin(&e->reg, addr, len, epoch, -1, &pin);
    if (rc)
        return rc;
    if (opcode == MC_OPCODE_WRITE)
        rc = mc__devmem_move(e->devmem, (void *)(uintptr_t)addr, pin.device, local, dev, len);
    else
        rc = mc__devmem_move(e->devmem, local, dev, (const void *)(uintptr_t)addr, pin.device, len);
    mc__reg_unpin(&e->reg, &pin);
    return rc;
}

int mc_engine_local_copy(mc_engine_t *e, int opcode, void *local, uint64_t addr, size_t len,
                         uint64_t epoch) {
    int rc;
    MC__GATED(e, rc, mc__local_copy(e, opcode, local, addr, len, epoch));
    return rc;
}

/* Engine-managed memory lives in a memfd, so that a same-host transport can hand it to a peer
 * (the registry keeps the fd with the region). */
static int mc__memfd_alloc(size_t len, int *fd, void **addr, size_t *map_len) {
    long pg = sysconf(_SC_PAGESIZE);
    size_t ml;
    void *p;
    int f;
    if (pg <= 0)
        pg = 4096;
    if (len > SIZE_MAX - (size_t)pg)
        return MC_ERR_INVALID_ARGUMENT;
    ml = (len + (size_t)pg - 1) / (size_t)pg * (size_t)pg;
    f = memfd_create("mooncake-buffer", MFD_CLOEXEC);
    if (f < 0)
        return MC_ERR_MEMORY;
    if (ftruncate(f, (off_t)ml) != 0) {
        close(f);
        return MC_ERR_MEMORY;
    }
    p = mmap(NULL, ml, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
    if (p == MAP_FAILED) {
        close(f);
        return MC_ERR_MEMORY;
    }
    *fd = f;
    *addr = p;
    *map_len = ml;
    return 0;
}

static int mc__alloc_managed(mc_engine_t *e, size_t len, uint64_t epoch, void **out) {
    mc__region_t g;
    void *p = NULL;
    size_t map_len = 0;
    int fd = -1;
    int rc = MC_ERR_INVALID_ARGUMENT;
    if (!e || !len || !out)
        goto out;
    *out = NULL;
    rc = mc__memfd_alloc(len, &fd, &p, &map_len);
    if (rc)
        goto out;
    memset(&g, 0, sizeof(g));
    g.addr = (uint64_t)(uintptr_t)p;
    g.len = len;
    g.memfd = fd;
    g.map_len = map_len;
    g.epoch = epoch;
    strcpy(g.location, "cpu:0");
    rc = mc__reg_add(&e->reg, &g);
    if (rc) {
        munmap(p, map_len);
        close(fd);
        goto out;
    }
    mc__transports_mem_registered(e, &g, 1);
    *out = p;
    mc__republish(e);
out:
    return rc;
}

int mc_engine_alloc_managed(mc_engine_t *e, size_t len, void **out) {
    int rc;
    MC__GATED(e, rc, mc__alloc_managed(e, len, 0, out));
    return rc;
}

int mc_engine_alloc_managed_epoch(mc_engine_t *e, size_t len, uint64_t epoch, void **out) {
    int rc;
    MC__GATED(e, rc, mc__alloc_managed(e, len, epoch, out));
    return rc;
}

static int mc__free_managed(mc_engine_t *e, void *addr) {
    mc__region_t g;
    int rc = mc__unregister(e, &addr, 1, 1, &g);
    if (rc)
        return rc;
    /* The registry generation was bumped by the removal, before this unmap. Punching the
     * pages out frees them now even while same-host peers still map the memfd (they drop their
     * mappings when they next see the generation move); a late copy by one of them lands in a
     * fresh page of this dead memfd, never in memory anyone reads. */
    (void)fallocate(g.memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, (off_t)g.map_len);
    munmap(addr, g.map_len);
    close(g.memfd);
    return 0;
}

int mc_engine_free_managed(mc_engine_t *e, void *addr) {
    int rc;
    MC__GATED(e, rc, mc__free_managed(e, addr));
    return rc;
}
