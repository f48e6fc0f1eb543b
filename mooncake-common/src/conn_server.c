/* Thread-per-connection TCP server shared by every listener in the project. Threads suit our
 * connection counts (peers, clients, admin scrapers: tens to hundreds) and keep each protocol
 * handler a plain blocking loop with deadlines; the hot data path does its own I/O inside
 * serve(). Finished threads are joined by the accept loop, so a long-running server does not
 * accumulate zombies. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/conn_server.h"
#include "mooncake/common/log.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"

#define MC__CONN_DEFAULT_MAX 256

typedef struct mc__conn {
    struct mc__conn *next;
    struct mc__conn **pprev;
    struct mc_conn_server *srv;
    pthread_t thread;
    int fd;
    struct sockaddr_storage peer; /* for the per-peer limit */
    _Atomic uint64_t idle_since;  /* monotonic ms, 0 while busy */
    int evicted;                  /* shut down to make room (under the server lock) */
} mc__conn_t;

/* The connection the calling thread serves (serve() runs on it), for mc__conn_idle. */
static _Thread_local mc__conn_t *mc__conn_self;

struct mc_conn_server {
    mc_conn_server_opts_t o;
    int lfd;
    int wake[2]; /* pipe: a byte here tells the accept thread to stop */
    uint16_t port;
    pthread_t accept_thread;
    pthread_attr_t attr;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int nconns;
    uint64_t refuse_logged_ms;
    mc__conn_t *active;
    mc__conn_t *done; /* finished threads waiting to be joined */
};

void mc__conn_idle(int idle) {
    mc__conn_t *c = mc__conn_self;
    if (c)
        atomic_store(&c->idle_since, idle ? mc__now_ms() | 1u : 0);
}

static void *mc__conn_main(void *arg) {
    mc__conn_t *c = arg;
    mc_conn_server_t *s = c->srv;
    mc__conn_self = c;
    s->o.serve(s->o.ctx, c->fd);
    mc__conn_self = NULL;
    pthread_mutex_lock(&s->mu);
    close(c->fd);
    c->fd = -1;
    *c->pprev = c->next;
    if (c->next)
        c->next->pprev = c->pprev;
    c->next = s->done;
    s->done = c;
    s->nconns--;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static void mc__conn_reap(mc_conn_server_t *s) {
    mc__conn_t *list;
    pthread_mutex_lock(&s->mu);
    list = s->done;
    s->done = NULL;
    pthread_mutex_unlock(&s->mu);
    while (list) {
        mc__conn_t *next = list->next;
        pthread_join(list->thread, NULL);
        mc__free(list);
        list = next;
    }
}

static int mc__same_peer(const struct sockaddr_storage *a, const struct sockaddr_storage *b) {
    if (a->ss_family != b->ss_family)
        return 0;
    if (a->ss_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    if (a->ss_family == AF_INET6)
        return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                       &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr));
    return 1; /* unix sockets: one local peer */
}

/* With the lock held: shuts down the connection idle longest (among those of `peer` when peer
 * is non-NULL) so that a new one can have its place. 1 when there was one. */
static int mc__conn_evict_idle(mc_conn_server_t *s, const struct sockaddr_storage *peer) {
    mc__conn_t *oldest = NULL;
    uint64_t oldest_ms = UINT64_MAX;
    for (mc__conn_t *c = s->active; c; c = c->next) {
        uint64_t t = atomic_load(&c->idle_since);
        if (t && !c->evicted && t < oldest_ms && (!peer || mc__same_peer(&c->peer, peer))) {
            oldest = c;
            oldest_ms = t;
        }
    }
    if (!oldest)
        return 0;
    oldest->evicted = 1;
    shutdown(oldest->fd, SHUT_RDWR);
    return 1;
}

/* With the lock held: closes connections idle past the timeout. */
static void mc__conn_expire_idle(mc_conn_server_t *s, uint64_t now) {
    for (mc__conn_t *c = s->active; c; c = c->next) {
        uint64_t t = atomic_load(&c->idle_since);
        if (t && !c->evicted && t + (uint64_t)s->o.idle_timeout_ms <= now) {
            c->evicted = 1;
            shutdown(c->fd, SHUT_RDWR);
        }
    }
}

/* With the lock held: may one more connection from peer be served? Makes room by evicting
 * an idle connection when a limit is reached; 0 when none can be had. */
static int mc__conn_admit(mc_conn_server_t *s, const struct sockaddr_storage *peer) {
    int live = 0, from_peer = 0;
    for (mc__conn_t *c = s->active; c; c = c->next) {
        if (c->evicted)
            continue; /* going away: its slot is as good as free */
        live++;
        from_peer += mc__same_peer(&c->peer, peer);
    }
    if (s->o.max_per_peer > 0 && from_peer >= s->o.max_per_peer && !mc__conn_evict_idle(s, peer))
        return 0;
    if (live >= s->o.max_conns && !mc__conn_evict_idle(s, NULL))
        return 0;
    /* evicted threads may lag behind; never let the table grow past twice its size */
    return s->nconns < 2 * s->o.max_conns;
}

static void mc__conn_accept_one(mc_conn_server_t *s) {
    mc__conn_t *c = NULL;
    struct sockaddr_storage peer;
    socklen_t plen = sizeof(peer);
    int fd = mc__accept(s->lfd);
    if (fd < 0)
        return;
    memset(&peer, 0, sizeof(peer));
    if (getpeername(fd, (struct sockaddr *)&peer, &plen) != 0)
        peer.ss_family = AF_UNSPEC;
    if (s->o.tune)
        s->o.tune(s->o.ctx, fd);
    pthread_mutex_lock(&s->mu);
    if (!mc__conn_admit(s, &peer) || !(c = mc__calloc(1, sizeof(*c)))) {
        int n = s->nconns;
        pthread_mutex_unlock(&s->mu);
        /* one line per second at most: a flood of refusals must not become a flood of logs
         * (0: none logged yet, not "long ago": a host up less than a second logs too) */
        if (s->refuse_logged_ms == 0 || mc__now_ms() >= s->refuse_logged_ms + 1000) {
            s->refuse_logged_ms = mc__now_ms();
            MC_WARN("%s: refusing a connection (%d open, limit %d, %d per peer)", s->o.name, n,
                    s->o.max_conns, s->o.max_per_peer);
        }
        if (s->o.reject)
            s->o.reject(s->o.ctx, fd);
        close(fd);
        return;
    }
    c->srv = s;
    c->fd = fd;
    c->peer = peer;
    c->next = s->active;
    c->pprev = &s->active;
    if (s->active)
        s->active->pprev = &c->next;
    s->active = c;
    s->nconns++;
    if (pthread_create(&c->thread, &s->attr, mc__conn_main, c) != 0) {
        s->active = c->next;
        if (c->next)
            c->next->pprev = &s->active;
        s->nconns--;
        pthread_mutex_unlock(&s->mu);
        MC_WARN("%s: cannot start a connection thread", s->o.name);
        close(fd);
        mc__free(c);
        return;
    }
    pthread_mutex_unlock(&s->mu);
}

static void *mc__conn_accept_main(void *arg) {
    mc_conn_server_t *s = arg;
    for (;;) {
        struct pollfd pfd[2] = {{.fd = s->lfd, .events = POLLIN},
                                {.fd = s->wake[0], .events = POLLIN}};
        /* The timeout only bounds how long finished threads wait to be joined. */
        int r = poll(pfd, 2,
                     s->o.idle_timeout_ms > 0 && s->o.idle_timeout_ms < 1000 ? s->o.idle_timeout_ms
                                                                             : 1000);
        mc__conn_reap(s);
        if (s->o.idle_timeout_ms > 0) {
            pthread_mutex_lock(&s->mu);
            mc__conn_expire_idle(s, mc__now_ms());
            pthread_mutex_unlock(&s->mu);
        }
        if (r < 0 && errno != EINTR)
            break;
        if (r <= 0)
            continue;
        if (pfd[1].revents)
            break;
        if (pfd[0].revents)
            mc__conn_accept_one(s);
    }
    return NULL;
}

int mc__conn_server_start(const mc_conn_server_opts_t *opts, mc_conn_server_t **out) {
    mc_conn_server_t *s = NULL;
    int rc = MC_ERR_INVALID_ARGUMENT;
    int sync_ok = 0, attr_ok = 0;
    int lfd = opts ? opts->listen_fd : -1;
    if (!opts || !opts->serve || !out)
        goto out;
    rc = MC_ERR_MEMORY;
    s = mc__calloc(1, sizeof(*s));
    if (!s)
        goto out;
    s->o = *opts;
    if (!s->o.name)
        s->o.name = "server";
    if (s->o.max_conns <= 0)
        s->o.max_conns = MC__CONN_DEFAULT_MAX;
    s->lfd = -1;
    s->wake[0] = s->wake[1] = -1;
    if (pthread_attr_init(&s->attr) != 0)
        goto out;
    attr_ok = 1;
    if (s->o.stack_size && pthread_attr_setstacksize(&s->attr, s->o.stack_size) != 0)
        goto out;
    if (pthread_mutex_init(&s->mu, NULL) != 0)
        goto out;
    if (pthread_cond_init(&s->cv, NULL) != 0) {
        pthread_mutex_destroy(&s->mu);
        goto out;
    }
    sync_ok = 1;
    if (lfd < 0) {
        rc = mc__tcp_listen(s->o.host, s->o.port, s->o.backlog > 0 ? s->o.backlog : 128, &s->port);
        if (rc < 0)
            goto out;
        lfd = rc;
    } else {
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        rc = MC_ERR_SOCKET;
        if (getsockname(lfd, (struct sockaddr *)&ss, &len) != 0)
            goto out;
        s->port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                           : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    }
    s->lfd = lfd;
    lfd = -1;
    rc = MC_ERR_SOCKET;
    if (pipe2(s->wake, O_CLOEXEC) != 0)
        goto out;
    if (pthread_create(&s->accept_thread, NULL, mc__conn_accept_main, s) != 0)
        goto out;
    *out = s;
    s = NULL;
    rc = 0;
out:
    if (lfd >= 0)
        close(lfd);
    if (s) {
        if (s->lfd >= 0)
            close(s->lfd);
        if (s->wake[0] >= 0) {
            close(s->wake[0]);
            close(s->wake[1]);
        }
        if (sync_ok) {
            pthread_cond_destroy(&s->cv);
            pthread_mutex_destroy(&s->mu);
        }
        if (attr_ok)
            pthread_attr_destroy(&s->attr);
        mc__free(s);
    }
    return rc;
}

uint16_t mc__conn_server_port(const mc_conn_server_t *s) {
    return s ? s->port : 0;
}

int mc__conn_server_active(mc_conn_server_t *s) {
    int n;
    pthread_mutex_lock(&s->mu);
    n = s->nconns;
    pthread_mutex_unlock(&s->mu);
    return n;
}

void mc__conn_server_stop(mc_conn_server_t *s) {
    if (!s)
        return;
    (void)!write(s->wake[1], "x", 1);
    pthread_join(s->accept_thread, NULL);
    close(s->lfd);
    pthread_mutex_lock(&s->mu);
    for (mc__conn_t *c = s->active; c; c = c->next)
        shutdown(c->fd, SHUT_RDWR);
    while (s->nconns > 0)
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    mc__conn_reap(s);
    close(s->wake[0]);
    close(s->wake[1]);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    pthread_attr_destroy(&s->attr);
    mc__free(s);
}

void mc__conn_server_forget(mc_conn_server_t *s) {
    if (!s)
        return;
    close(s->lfd);
    close(s->wake[0]);
    close(s->wake[1]);
    /* The table was copied as a parent's thread left it: walked only if no thread of the parent
     * held it mid-change at the fork. Its memory stays (the child's copy, freed at exit). */
    if (pthread_mutex_trylock(&s->mu) == 0) {
        for (mc__conn_t *c = s->active; c; c = c->next)
            if (c->fd >= 0)
                close(c->fd);
    }
}
