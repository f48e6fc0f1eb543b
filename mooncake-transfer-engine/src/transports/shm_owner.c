/* Owner side of the shm transport. Managed buffers live in memfds; a one-page control memfd holds
 * the registry generation so that peers mapping our buffers notice changes without asking. An
 * abstract unix socket hands the memfds to same-host peers of the same user (SCM_RIGHTS). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/log.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "transports/shm.h"
#include "transports/shm_wire.h"

typedef struct mc__shm_owner mc__shm_owner_t;
struct mc__shm_owner {
    mc_engine_t *e;
    int ctrl_fd;
    mc__shm_ctrl_t *ctrl;
    int lfd;
    pthread_t thr;
    int stopping;
    char name[108];
};

static int mc__shm_same_user(int fd) {
    struct ucred cr;
    socklen_t len = sizeof(cr);
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0 && cr.uid == geteuid();
}

static void mc__shm_serve(mc__shm_owner_t *o, int fd) {
    mc__shm_req_t req;
    mc__shm_rep_t rep;
    int give = -1;
    mc_engine_t *e = o->e;
    memset(&rep, 0, sizeof(rep));
    if (mc__recv_all(fd, &req, sizeof(req), mc__now_ms() + 1000) || !mc__shm_same_user(fd))
        return;
    rep.rc = MC_ERR_INVALID_ARGUMENT;
    if (req.op == MC__SHM_OP_CTRL) {
        rep.rc = 0;
        rep.len = rep.map_len = sizeof(mc__shm_ctrl_t);
        give = o->ctrl_fd;
        (void)mc__send_fds(fd, &rep, sizeof(rep), &give, 1);
        return;
    }
    if (req.op != MC__SHM_OP_BUFFER) {
        (void)mc__send_fds(fd, &rep, sizeof(rep), NULL, 0);
        return;
    }
    /* Hold the registry so the memfd cannot be closed while it is being passed. */
    pthread_rwlock_rdlock(&e->reg.lock);
    rep.rc = MC_ERR_ADDRESS_NOT_REGISTERED;
    for (size_t i = 0; i < e->reg.n; i++) {
        const mc__region_t *g = &e->reg.regions[i];
        if (g->shm_id == (int64_t)req.id && g->memfd >= 0) {
            rep.rc = 0;
            rep.addr = g->addr;
            rep.len = g->len;
            rep.map_len = g->map_len;
            give = g->memfd;
            break;
        }
    }
    (void)mc__send_fds(fd, &rep, sizeof(rep), &give, give >= 0 ? 1 : 0);
    pthread_rwlock_unlock(&e->reg.lock);
}

static void *mc__shm_accept_main(void *arg) {
    mc__shm_owner_t *o = arg;
    /* held while this thread serves: peers only get the control page from it, after this */
    int held = pthread_mutex_lock(&o->ctrl->alive) == 0;
    for (;;) {
        int fd = mc__accept(o->lfd);
        if (fd < 0) {
            if (__atomic_load_n(&o->stopping, __ATOMIC_ACQUIRE))
                break;
            if (errno == EMFILE || errno == ENFILE)
                usleep(10000);
            continue;
        }
        mc__shm_serve(o, fd);
        close(fd);
    }
    if (held)
        pthread_mutex_unlock(&o->ctrl->alive);
    return NULL;
}

/* Initialises the liveness lock in the shared control page. */
static int mc__shm_ctrl_init(mc__shm_ctrl_t *c) {
    pthread_mutexattr_t a;
    int rc = MC_ERR_MEMORY;
    if (pthread_mutexattr_init(&a))
        return rc;
    if (!pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED) &&
        !pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST) &&
        !pthread_mutex_init(&c->alive, &a))
        rc = 0;
    pthread_mutexattr_destroy(&a);
    return rc;
}

int mc__shm_owner_start(mc_engine_t *e) {
    mc__shm_owner_t *o = mc__calloc(1, sizeof(*o));
    void *p = MAP_FAILED;
    int rc = MC_ERR_MEMORY;
    if (!o)
        goto out;
    o->e = e;
    o->lfd = -1;
    o->ctrl_fd = memfd_create("mooncake-ctrl", MFD_CLOEXEC);
    if (o->ctrl_fd < 0 || ftruncate(o->ctrl_fd, sizeof(mc__shm_ctrl_t)) != 0)
        goto out;
    p = mmap(NULL, sizeof(mc__shm_ctrl_t), PROT_READ | PROT_WRITE, MAP_SHARED, o->ctrl_fd, 0);
    if (p == MAP_FAILED)
        goto out;
    o->ctrl = p;
    if (mc__shm_ctrl_init(o->ctrl))
        goto out;
    snprintf(o->name, sizeof(o->name), "@mooncake-shm-%d-%016" PRIx64, (int)getpid(),
             e->instance_id);
    o->lfd = mc__unix_listen(o->name);
    if (o->lfd < 0) {
        rc = MC_ERR_SOCKET;
        goto out;
    }
    o->ctrl->magic = MC__SHM_CTRL_MAGIC;
    pthread_rwlock_wrlock(&e->reg.lock);
    atomic_store(&o->ctrl->gen, atomic_load(e->reg.gen));
    e->reg.gen = &o->ctrl->gen;
    pthread_rwlock_unlock(&e->reg.lock);
    if (pthread_create(&o->thr, NULL, mc__shm_accept_main, o)) {
        pthread_rwlock_wrlock(&e->reg.lock);
        atomic_store(&e->reg.local_gen, atomic_load(&o->ctrl->gen));
        e->reg.gen = &e->reg.local_gen;
        pthread_rwlock_unlock(&e->reg.lock);
        goto out;
    }
    e->tp_state[MC__TP_SHM] = o;
    o = NULL;
    rc = 0;
out:
    if (o) {
        if (o->lfd >= 0)
            close(o->lfd);
        if (p != MAP_FAILED)
            munmap(p, sizeof(mc__shm_ctrl_t));
        if (o->ctrl_fd >= 0)
            close(o->ctrl_fd);
        mc__free(o);
    }
    return rc;
}

void mc__shm_owner_stop(mc_engine_t *e) {
    mc__shm_owner_t *o = e->tp_state[MC__TP_SHM];
    if (!o)
        return;
    __atomic_store_n(&o->stopping, 1, __ATOMIC_RELEASE);
    shutdown(o->lfd, SHUT_RDWR);
    pthread_join(o->thr, NULL);
    close(o->lfd);
    pthread_rwlock_wrlock(&e->reg.lock);
    atomic_store(&e->reg.local_gen, atomic_load(&o->ctrl->gen) + 1);
    e->reg.gen = &e->reg.local_gen;
    pthread_rwlock_unlock(&e->reg.lock);
    /* peers that still map the page see one last change */
    atomic_fetch_add(&o->ctrl->gen, 1);
    munmap(o->ctrl, sizeof(mc__shm_ctrl_t));
    close(o->ctrl_fd);
    mc__free(o);
    e->tp_state[MC__TP_SHM] = NULL;
}

const char *mc__shm_owner_socket(const mc_engine_t *e) {
    const mc__shm_owner_t *o = e->tp_state[MC__TP_SHM];
    return o ? o->name : "";
}
