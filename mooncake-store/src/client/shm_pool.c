/* Shared-memory blocks for dummy clients: one memfd per block, so a daemon can map exactly that
 * block (and nothing else of this process) from the descriptor it is handed. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "client/shm_pool.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/log.h"
#include "mooncake/error.h"

typedef struct mc__shm_entry {
    uint64_t id;
    uint8_t *base;
    size_t len;
    int fd;
} mc__shm_entry_t;

struct mc_shm_pool {
    pthread_mutex_t mu;
    mc__shm_entry_t *v;
    size_t n, cap;
    uint64_t next_id;
    uint64_t free_gen;
};

int mc_shm_pool_create(mc_shm_pool_t **out) {
    mc_shm_pool_t *p;
    if (!out)
        return MC_ERR_INVALID_PARAMS;
    p = mc__calloc(1, sizeof(*p));
    if (!p)
        return MC_ERR_INTERNAL_ERROR;
    pthread_mutex_init(&p->mu, NULL);
    p->next_id = 1;
    *out = p;
    return 0;
}

void mc_shm_pool_destroy(mc_shm_pool_t *p) {
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++) {
        munmap(p->v[i].base, p->v[i].len);
        close(p->v[i].fd);
    }
    mc__free(p->v);
    pthread_mutex_destroy(&p->mu);
    mc__free(p);
}

void *mc_shm_pool_alloc(mc_shm_pool_t *p, size_t len) {
    long page = sysconf(_SC_PAGESIZE);
    size_t pg = page > 0 ? (size_t)page : 4096u;
    void *base = MAP_FAILED;
    int fd = -1;
    if (!p || len == 0 || len > SIZE_MAX - pg)
        return NULL;
    len = (len + pg - 1) / pg * pg;
    /* Sealed against shrinking: a daemon that maps the block can never be made to touch pages
     * past its end (SIGBUS) by a dummy that truncates it afterwards. */
    fd = memfd_create("mooncake-dummy", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0 || ftruncate(fd, (off_t)len) != 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        MC_ERROR("shm pool: cannot create a %zu-byte shared memory block: %s", len,
                 strerror(errno));
        goto fail;
    }
    base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        MC_ERROR("shm pool: cannot map a %zu-byte shared memory block: %s", len, strerror(errno));
        goto fail;
    }
    pthread_mutex_lock(&p->mu);
    mc__shm_entry_t *v = mc__array_grow(p->v, p->n, &p->cap, sizeof(*v), 16);
    if (!v) {
        pthread_mutex_unlock(&p->mu);
        goto fail;
    }
    p->v = v;
    p->v[p->n++] = (mc__shm_entry_t){p->next_id++, base, len, fd};
    pthread_mutex_unlock(&p->mu);
    return base;
fail:
    if (base != MAP_FAILED)
        munmap(base, len);
    if (fd >= 0)
        close(fd);
    return NULL;
}

int mc_shm_pool_free(mc_shm_pool_t *p, void *addr) {
    mc__shm_entry_t e;
    size_t i;
    if (!p || !addr)
        return MC_ERR_INVALID_PARAMS;
    pthread_mutex_lock(&p->mu);
    for (i = 0; i < p->n && p->v[i].base != addr; i++)
        ;
    if (i == p->n) {
        pthread_mutex_unlock(&p->mu);
        return MC_ERR_INVALID_PARAMS;
    }
    e = p->v[i];
    p->v[i] = p->v[--p->n];
    p->free_gen++;
    pthread_mutex_unlock(&p->mu);
    munmap(e.base, e.len);
    close(e.fd);
    return 0;
}

static mc__shm_entry_t *mc__shm_lookup(mc_shm_pool_t *p, const void *addr, size_t len) {
    uintptr_t a = (uintptr_t)addr;
    for (size_t i = 0; i < p->n; i++) {
        uintptr_t b = (uintptr_t)p->v[i].base;
        if (a >= b && a - b <= p->v[i].len && len <= p->v[i].len - (a - b))
            return &p->v[i];
    }
    return NULL;
}

int mc_shm_pool_contains(mc_shm_pool_t *p, const void *addr, size_t len) {
    int yes;
    if (!p || !addr)
        return 0;
    pthread_mutex_lock(&p->mu);
    yes = mc__shm_lookup(p, addr, len) != NULL;
    pthread_mutex_unlock(&p->mu);
    return yes;
}

int mc__shm_pool_find(mc_shm_pool_t *p, const void *addr, size_t len, mc__shm_block_t *out) {
    mc__shm_entry_t *e;
    int rc = MC_ERR_INVALID_PARAMS;
    if (!p || !addr)
        return rc;
    pthread_mutex_lock(&p->mu);
    e = mc__shm_lookup(p, addr, len);
    if (e) {
        out->fd = fcntl(e->fd, F_DUPFD_CLOEXEC, 0);
        out->id = e->id;
        out->base = e->base;
        out->len = e->len;
        rc = out->fd >= 0 ? 0 : MC_ERR_INTERNAL_ERROR;
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

int mc__shm_pool_live(mc_shm_pool_t *p, uint64_t id) {
    int yes = 0;
    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; i < p->n && !yes; i++)
        yes = p->v[i].id == id;
    pthread_mutex_unlock(&p->mu);
    return yes;
}

uint64_t mc__shm_pool_free_gen(mc_shm_pool_t *p) {
    uint64_t g;
    pthread_mutex_lock(&p->mu);
    g = p->free_gen;
    pthread_mutex_unlock(&p->mu);
    return g;
}
