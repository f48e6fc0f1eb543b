/* Extra segments: memory a client contributes beside its global segment, mounted at the master
 * under the client's own segment name (its engine serves all of them), each named by an id.
 *
 * Two kinds, as the reference has them: a range of a file mapped shared (mount_segment: the
 * file's pages are the pool's memory, e.g. on a DAX or hugetlbfs mount), and memory the call
 * allocates (allocate_and_mount_segment). An allocated segment lives in incarnations like the
 * global one: when the master forgets it, it comes back as new memory under a new epoch. A file
 * segment cannot change its memory, so one the master forgot is not mounted again (stale
 * placements in it could otherwise write into the next objects' bytes); mount it anew. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/store_internal.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/log.h"
#include "mooncake/common/random.h"
#include "mooncake/common/time.h"

#define MC__ALLOC_ROUND (4ull << 20) /* allocated segments round up, as the reference's slabs */

static int mc__extra_find(mc_store_t *s, const char *id) {
    for (size_t i = 0; i < s->n_extras; i++)
        if (strcmp(s->extras[i].id, id) == 0)
            return (int)i;
    return -1;
}

/* Gives the memory back (after the master let go of it). */
static void mc__extra_release(mc_store_t *s, mc__extra_seg_t *x) {
    if (!x->addr)
        return;
    if (x->file) {
        mc_engine_unregister_memory(s->engine, x->addr);
        munmap(x->addr, x->size);
    } else {
        mc_engine_free_managed(s->engine, x->addr);
    }
    x->addr = NULL;
}

static int mc__extra_add(mc_store_t *s, const mc__extra_seg_t *x) {
    if (s->n_extras == s->cap_extras) {
        size_t cap = s->cap_extras ? s->cap_extras * 2 : 4;
        mc__extra_seg_t *p = mc__realloc(s->extras, cap * sizeof(*p));
        if (!p)
            return MC_ERR_INTERNAL_ERROR;
        s->extras = p;
        s->cap_extras = cap;
    }
    s->extras[s->n_extras++] = *x;
    return 0;
}

/* Mounts x at the master and records it; on failure x's memory is released. */
static int mc__extra_mount(mc_store_t *s, mc__extra_seg_t *x, char id_out[37]) {
    uint8_t raw[MC_MP_CLIENT_ID_LEN];
    int rc;
    mc__uuid_generate(raw);
    mc__uuid_format(raw, x->id);
    rc = mc__master_client_mount_segment_epoch(s->master, s->hostname, (uint64_t)(uintptr_t)x->addr,
                                               x->size, x->epoch);
    pthread_mutex_lock(&s->extras_mu);
    if (rc == 0)
        rc = mc__extra_add(s, x);
    pthread_mutex_unlock(&s->extras_mu);
    if (rc != 0) {
        MC_ERROR("store: mounting a %llu-byte segment at the master failed: %s",
                 (unsigned long long)x->size, mc_store_strerror(rc));
        (void)mc__master_client_unmount_segment(s->master, s->hostname,
                                                (uint64_t)(uintptr_t)x->addr);
        mc__extra_release(s, x);
        return rc;
    }
    memcpy(id_out, x->id, 37);
    return 0;
}

/* Opens path read-write for mapping. The file is the pool's memory from then on (puts from any
 * client write into it), so a symbolic link as its last component is not followed when the
 * directory holding it is sticky and writable by anyone (/dev/shm, /tmp): another user may have
 * planted it there to have some file of ours overwritten (the REST service mounts names from
 * requests). A link elsewhere was put there by someone who could write that directory, and is
 * followed as the reference follows it. -1 with errno (ELOOP for such a link). */
static int mc__open_segment_file(const char *path) {
    const char *slash = strrchr(path, '/');
    char dir[4096];
    struct stat st;
    int dfd, fd, flags = O_RDWR | O_CLOEXEC | O_NOCTTY;
    size_t n = slash ? (size_t)(slash - path) : 1;
    if (!slash)
        memcpy(dir, ".", 2);
    else if (n == 0)
        memcpy(dir, "/", 2);
    else if (n < sizeof(dir)) {
        memcpy(dir, path, n);
        dir[n] = '\0';
    } else {
        errno = ENAMETOOLONG;
        return -1;
    }
    dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -1;
    if (fstat(dfd, &st) == 0 && (st.st_mode & S_ISVTX) && (st.st_mode & S_IWOTH))
        flags |= O_NOFOLLOW;
    fd = openat(dfd, slash ? slash + 1 : path, flags);
    n = (size_t)errno;
    close(dfd);
    errno = (int)n;
    return fd;
}

static int mc__mount_file_impl(mc_store_t *s, const char *path, uint64_t offset, uint64_t size,
                               char id_out[37]) {
    long page = sysconf(_SC_PAGESIZE);
    mc__extra_seg_t x;
    struct stat st;
    void *p = MAP_FAILED;
    int fd, rc;
    if (!path || !*path || !id_out || size == 0 || (page > 0 && offset % (uint64_t)page != 0))
        return MC_ERR_INVALID_PARAMS;
    fd = mc__open_segment_file(path);
    if (fd < 0) {
        MC_ERROR("store: mount_segment: cannot open %s: %s", path,
                 errno == ELOOP ? "a symbolic link in a directory anyone may write (such as "
                                  "/dev/shm) is not followed"
                                : strerror(errno));
        return errno == ENOENT ? MC_ERR_FILE_NOT_FOUND : MC_ERR_INVALID_PARAMS;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || offset > (uint64_t)st.st_size ||
        size > (uint64_t)st.st_size - offset) {
        MC_ERROR("store: mount_segment: [%llu, +%llu) is not inside the regular file %s",
                 (unsigned long long)offset, (unsigned long long)size, path);
        close(fd);
        return MC_ERR_INVALID_PARAMS;
    }
    /* Holes in the range get their blocks now (the bytes stay as they are): on a full tmpfs a
     * write into a hole of the mapping would kill this process with SIGBUS, and peers write into
     * it. A file system that cannot reserve (EOPNOTSUPP) is mapped as it is. */
    if (fallocate(fd, 0, (off_t)offset, (off_t)size) != 0 &&
        (errno == ENOSPC || errno == EDQUOT || errno == EFBIG)) {
        MC_ERROR("store: mount_segment: no room to back [%llu, +%llu) of %s: %s",
                 (unsigned long long)offset, (unsigned long long)size, path, strerror(errno));
        close(fd);
        return MC_ERR_NO_AVAILABLE_HANDLE;
    }
    p = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)offset);
    close(fd); /* the mapping keeps the file */
    if (p == MAP_FAILED) {
        MC_ERROR("store: mount_segment: mmap of %s failed: %s", path, strerror(errno));
        return MC_ERR_INVALID_PARAMS;
    }
    rc = mc_engine_register_memory(s->engine, p, (size_t)size, "cpu:0");
    if (rc != 0) {
        munmap(p, (size_t)size);
        return mc__store_engine_code(rc);
    }
    memset(&x, 0, sizeof(x));
    x.addr = p;
    x.size = (size_t)size;
    x.file = 1; /* epoch 0: the engine serves it as plain registered memory */
    return mc__extra_mount(s, &x, id_out);
}

static uint64_t mc__extra_epoch(void) {
    uint64_t e = 0;
    do
        mc__random_fill(&e, sizeof(e));
    while (e == 0);
    return e;
}

static int mc__alloc_mount_impl(mc_store_t *s, uint64_t size, char id_out[37],
                                uint64_t *allocated) {
    mc__extra_seg_t x;
    uint64_t rounded;
    void *p = NULL;
    int rc;
    if (!id_out || size == 0 || size > MC_MP_MAX_SEGMENT_SIZE)
        return MC_ERR_INVALID_PARAMS;
    rounded = (size + MC__ALLOC_ROUND - 1) / MC__ALLOC_ROUND * MC__ALLOC_ROUND;
    memset(&x, 0, sizeof(x));
    x.epoch = mc__extra_epoch();
    rc = mc_engine_alloc_managed_epoch(s->engine, (size_t)rounded, x.epoch, &p);
    if (rc != 0) {
        MC_ERROR("store: cannot allocate a %llu-byte segment: %s", (unsigned long long)rounded,
                 mc_strerror(rc));
        return mc__store_engine_code_for(rc, MC__ENG_ALLOC);
    }
    x.addr = p;
    x.size = (size_t)rounded;
    rc = mc__extra_mount(s, &x, id_out);
    if (rc == 0 && allocated)
        *allocated = rounded;
    return rc;
}

/* Unmounts the extra segment id at the master now and releases its memory. file: 1 for
 * mount_segment's, 0 for allocate_and_mount_segment's (each unmount call takes only its kind,
 * as the reference's do). */
static int mc__unmount_now(mc_store_t *s, const char *id, int file) {
    mc__extra_seg_t x;
    int i, rc;
    pthread_mutex_lock(&s->extras_mu);
    i = mc__extra_find(s, id);
    if (i < 0 || s->extras[i].file != file) {
        pthread_mutex_unlock(&s->extras_mu);
        return MC_ERR_SEGMENT_NOT_FOUND;
    }
    x = s->extras[i];
    s->extras[i] = s->extras[--s->n_extras];
    pthread_mutex_unlock(&s->extras_mu);
    rc = mc__master_client_unmount_segment(s->master, s->hostname, (uint64_t)(uintptr_t)x.addr);
    if (rc != 0 && rc != MC_ERR_SEGMENT_NOT_FOUND)
        MC_WARN("store: unmounting segment %s at the master failed: %s (its memory is released "
                "anyway; the master drops it with this client)",
                id, mc_store_strerror(rc));
    mc__extra_release(s, &x);
    return 0;
}

static int mc__unmount_impl(mc_store_t *s, const char *const *ids, size_t n, uint64_t grace_s,
                            int file) {
    int first = 0;
    if (n && !ids)
        return MC_ERR_INVALID_PARAMS;
    for (size_t i = 0; i < n; i++) {
        int rc = MC_ERR_INVALID_PARAMS;
        if (ids[i] && strlen(ids[i]) == 36) {
            pthread_mutex_lock(&s->extras_mu);
            int j = mc__extra_find(s, ids[i]);
            rc = j < 0 || s->extras[j].file != file ? MC_ERR_SEGMENT_NOT_FOUND : 0;
            /* With a grace period the segment stays mounted (readers keep reading it) until
             * the maintenance thread unmounts it when the period has passed. */
            if (rc == 0 && grace_s > 0)
                s->extras[j].unmount_at_ms = mc__now_ms() + grace_s * 1000u;
            pthread_mutex_unlock(&s->extras_mu);
            if (rc == 0 && grace_s == 0)
                rc = mc__unmount_now(s, ids[i], file);
        }
        if (rc != 0 && first == 0)
            first = rc;
    }
    return first;
}

void mc__store_extras_tick(mc_store_t *s) {
    uint64_t now = mc__now_ms();
    for (;;) {
        char id[37] = "";
        int file = 0;
        pthread_mutex_lock(&s->extras_mu);
        for (size_t i = 0; i < s->n_extras && !id[0]; i++)
            if (s->extras[i].unmount_at_ms && s->extras[i].unmount_at_ms <= now) {
                memcpy(id, s->extras[i].id, sizeof(id));
                file = s->extras[i].file;
            }
        pthread_mutex_unlock(&s->extras_mu);
        if (!id[0])
            return;
        (void)mc__unmount_now(s, id, file);
    }
}

void mc__store_extras_teardown(mc_store_t *s) {
    /* One at a time, never holding extras_mu around an RPC (a reconnect inside it runs the
     * remount hook, which takes extras_mu). */
    for (;;) {
        mc__extra_seg_t x;
        pthread_mutex_lock(&s->extras_mu);
        if (s->n_extras == 0) {
            pthread_mutex_unlock(&s->extras_mu);
            return;
        }
        x = s->extras[--s->n_extras];
        pthread_mutex_unlock(&s->extras_mu);
        if (s->master)
            (void)mc__master_client_unmount_segment(s->master, s->hostname,
                                                    (uint64_t)(uintptr_t)x.addr);
        mc__extra_release(s, &x);
    }
}

int mc__store_extras_remount(mc_store_t *s, uint64_t *base, uint64_t *epoch) {
    void *p = NULL;
    uint64_t e;
    int rc = MC_ERR_SEGMENT_NOT_FOUND;
    /* The master client's lock is held: no RPC here; and nobody holds extras_mu around one of
     * the master client's calls (mount, unmount and teardown take it only between them). */
    pthread_mutex_lock(&s->extras_mu);
    for (size_t i = 0; i < s->n_extras; i++) {
        mc__extra_seg_t *x = &s->extras[i];
        if ((uint64_t)(uintptr_t)x->addr != *base)
            continue;
        if (x->file) {
            MC_WARN("store: the master forgot file segment %s; it is not mounted again (mount "
                    "the file anew)",
                    x->id);
            mc__extra_release(s, x);
            s->extras[i] = s->extras[--s->n_extras];
            rc = MC_ERR_SEGMENT_NOT_FOUND;
            break;
        }
        e = mc__extra_epoch();
        mc_engine_free_managed(s->engine, x->addr);
        x->addr = NULL;
        rc = mc_engine_alloc_managed_epoch(s->engine, x->size, e, &p);
        if (rc != 0) {
            s->extras[i] = s->extras[--s->n_extras];
            rc = mc__store_engine_code_for(rc, MC__ENG_ALLOC);
            break;
        }
        x->addr = p;
        x->epoch = e;
        *base = (uint64_t)(uintptr_t)p;
        *epoch = e;
        rc = 0;
        break;
    }
    pthread_mutex_unlock(&s->extras_mu);
    return rc;
}

/* --- public entry points --- */

int mc_store_mount_segment(mc_store_t *s, const char *path, uint64_t offset, uint64_t size,
                           char id[37]) {
    int rc;
    MC__STORE_HELD(s, rc, mc__mount_file_impl(s, path, offset, size, id));
    return rc;
}

int mc_store_allocate_and_mount_segment(mc_store_t *s, uint64_t size, char id[37],
                                        uint64_t *allocated) {
    int rc;
    MC__STORE_HELD(s, rc, mc__alloc_mount_impl(s, size, id, allocated));
    return rc;
}

int mc_store_unmount_segment(mc_store_t *s, const char *const *ids, size_t n, uint64_t grace_s) {
    int rc;
    MC__STORE_HELD(s, rc, mc__unmount_impl(s, ids, n, grace_s, 1));
    return rc;
}

int mc_store_unmount_and_free_segment(mc_store_t *s, const char *const *ids, size_t n,
                                      uint64_t grace_s) {
    int rc;
    MC__STORE_HELD(s, rc, mc__unmount_impl(s, ids, n, grace_s, 0));
    return rc;
}
