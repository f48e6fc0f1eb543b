/* The coordinator: one server holding every group's view (seats, addresses, active set, epoch,
 * counters) and deciding membership changes. A call that must wait for others (a registration for
 * the first ranks, a join for its admission, a proposal for the other members) is held on its
 * connection's thread until the decision or its deadline, so no ticker is needed: whichever
 * waiting thread sees the condition first decides, under the one lock.
 *
 * A proposal (ACTIVATE) names joiners; every member of the proposer's active set must propose the
 * same joiners from the same active set. It is decided once every member proposed and every
 * joiner asked (JOIN), or once the window after the first proposal has passed and every joiner
 * asked: the members that stayed silent are dropped (a paused or hung member cannot stall the
 * recovery). A proposal whose joiners do not ask within its timeout fails for all its members. */
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/cond.h"
#include "mooncake/common/conn_server.h"
#include "mooncake/common/log.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "mooncake/pg.h"
#include "pg_ctrl_proto.h"

_Static_assert(MC_PGC_MAX_SEATS == MC_PG_MAX_RANKS, "a seat set is one u64 on the wire");

struct pgc_join {
    char addr[MC_PGC_ADDR_MAX];
    uint64_t round, syncs;
    uint64_t ticket;   /* the newest request for the seat */
    uint64_t admitted; /* the newest ticket a decision admitted */
};

struct pgc_group {
    char name[MC_PGC_GROUP_MAX];
    uint32_t seats, size;
    uint64_t known, registered; /* seats with an address; first-size ranks that registered */
    int complete;               /* every one of the first size ranks registered */
    char addrs[MC_PG_MAX_RANKS][MC_PGC_ADDR_MAX];
    uint64_t epoch, active, round, syncs; /* the view */
    struct pgc_join join[MC_PG_MAX_RANKS];
    uint64_t tickets;
    /* the open proposal (gen != decided_gen while open) */
    uint64_t gen, decided_gen, aborted_gen;
    uint64_t p_joiners, p_members, p_arrived, p_round, p_syncs, p_epoch;
    uint64_t p_window_end, p_deadline;
    /* the last decision, for the proposers that read it and for late ones */
    uint64_t d_dropped, d_epoch;
    struct pgc_group *next;
};

struct mc_pg_coordinator {
    mc_conn_server_t *srv;
    char host[128];
    pthread_mutex_t mu;
    pthread_cond_t cv; /* any change of any group */
    struct pgc_group *groups;
    int stopping;
    pid_t pid; /* the process whose threads serve it (a fork() child has none of them) */
};

static struct pgc_group *find_group(mc_pg_coordinator_t *k, const char *name) {
    for (struct pgc_group *g = k->groups; g; g = g->next)
        if (strcmp(g->name, name) == 0)
            return g;
    return NULL;
}

/* Waits on the condition until deadline_ms (monotonic); returns non-zero once past it. */
static int wait_until(mc_pg_coordinator_t *k, uint64_t deadline_ms) {
    uint64_t now = mc__now_ms();
    if (now >= deadline_ms)
        return 1;
    uint64_t left = deadline_ms - now;
    if (left > 200)
        left = 200; /* wake now and then: a deadline of another waiter may have passed */
    struct timespec ts = mc__clock_after_ms(CLOCK_MONOTONIC, left);
    pthread_cond_timedwait(&k->cv, &k->mu, &ts);
    return 0;
}

static void view_of(const struct pgc_group *g, mc_pgc_view_t *v) {
    memset(v, 0, sizeof(*v));
    v->status = MC_PGC_APPLIED;
    v->seats = g->seats;
    v->epoch = g->epoch;
    v->active = g->active;
    v->round = g->round;
    v->syncs = g->syncs;
    v->known = g->known;
    for (uint32_t i = 0; i < g->seats; i++) {
        if (g->known >> i & 1)
            memcpy(v->addrs[i], g->addrs[i], MC_PGC_ADDR_MAX);
        if (g->join[i].ticket > g->join[i].admitted)
            v->joining |= 1ull << i;
    }
}

/* The reply of a call that failed: code < 0 and a message. */
struct outcome {
    int code;
    char msg[MC_PGC_REASON_MAX];
};

static int failed(struct outcome *o, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int failed(struct outcome *o, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    o->code = code;
    vsnprintf(o->msg, sizeof(o->msg), fmt, ap);
    va_end(ap);
    return code;
}

static int do_register(mc_pg_coordinator_t *k, const mc_pgc_req_t *r, mc_pgc_view_t *v,
                       struct outcome *o) {
    struct pgc_group *g = find_group(k, r->group);
    if (!g) {
        if (r->extension)
            return failed(o, MC_ERR_INVALID_ARGUMENT, "no group %s to attach to", r->group);
        g = mc__calloc(1, sizeof(*g));
        if (!g)
            return failed(o, MC_ERR_MEMORY, "out of memory for group %s", r->group);
        snprintf(g->name, sizeof(g->name), "%s", r->group);
        g->seats = r->seats;
        g->size = r->size;
        g->next = k->groups;
        k->groups = g;
    }
    if (g->seats != r->seats)
        return failed(o, MC_ERR_INVALID_ARGUMENT, "group %s has %u seats", g->name, g->seats);
    uint64_t bit = 1ull << r->rank;
    if (!r->extension && g->complete && (g->registered & bit)) {
        /* A rank of a complete group registers again: the group is made anew (destroyed and
         * re-created under the same name); the first size ranks meet again. */
        uint64_t gen = g->gen, dgen = g->decided_gen;
        struct pgc_group *next = g->next;
        memset((char *)g + sizeof(g->name), 0, sizeof(*g) - sizeof(g->name));
        g->seats = r->seats;
        g->size = r->size;
        g->gen = g->decided_gen = gen > dgen ? gen : dgen;
        g->next = next;
    }
    snprintf(g->addrs[r->rank], MC_PGC_ADDR_MAX, "%s", r->addr);
    g->known |= bit;
    pthread_cond_broadcast(&k->cv);
    if (r->extension) {
        view_of(g, v);
        return 0;
    }
    if (r->size != g->size)
        return failed(o, MC_ERR_INVALID_ARGUMENT, "group %s starts with %u ranks", g->name,
                      g->size);
    g->registered |= bit;
    uint64_t first = g->size == 64 ? ~0ull : (1ull << g->size) - 1;
    uint64_t deadline = mc__now_ms() + r->timeout_ms;
    while (!g->complete) {
        if ((g->registered & first) == first) {
            g->complete = 1;
            g->active = first;
            g->epoch = 1;
            pthread_cond_broadcast(&k->cv);
            break;
        }
        if (k->stopping || wait_until(k, deadline))
            return failed(o, MC_ERR_ENDPOINT,
                          "group %s: not all of its first %u"
                          " ranks registered in time",
                          g->name, g->size);
    }
    view_of(g, v);
    return 0;
}

static int do_join(mc_pg_coordinator_t *k, const mc_pgc_req_t *r, mc_pgc_view_t *v,
                   struct outcome *o) {
    struct pgc_group *g = find_group(k, r->group);
    if (!g || r->rank >= g->seats)
        return failed(o, MC_ERR_INVALID_ARGUMENT, "no group %s with seat %u", r->group, r->rank);
    struct pgc_join *j = &g->join[r->rank];
    snprintf(j->addr, sizeof(j->addr), "%s", r->addr);
    j->round = r->round;
    j->syncs = r->syncs;
    uint64_t ticket = j->ticket = ++g->tickets;
    snprintf(g->addrs[r->rank], MC_PGC_ADDR_MAX, "%s", r->addr);
    g->known |= 1ull << r->rank;
    pthread_cond_broadcast(&k->cv);
    uint64_t deadline = mc__now_ms() + r->timeout_ms;
    while (j->admitted < ticket) {
        if (j->ticket != ticket)
            return failed(o, MC_ERR_INVALID_ARGUMENT,
                          "group %s: a newer join for seat %u"
                          " replaced this one",
                          g->name, r->rank);
        if (k->stopping || wait_until(k, deadline)) {
            if (j->ticket == ticket)
                j->ticket = j->admitted; /* withdrawn: a proposal must not count on it */
            return failed(o, MC_ERR_ENDPOINT,
                          "group %s: no member admitted rank %u"
                          " in time",
                          g->name, r->rank);
        }
    }
    view_of(g, v);
    return 0;
}

/* Every joiner of the open proposal has a join request waiting. */
static int joiners_asked(const struct pgc_group *g) {
    for (uint32_t i = 0; i < g->seats; i++)
        if ((g->p_joiners >> i & 1) && g->join[i].ticket <= g->join[i].admitted)
            return 0;
    return 1;
}

static void decide(mc_pg_coordinator_t *k, struct pgc_group *g) {
    uint64_t round = g->p_round, syncs = g->p_syncs;
    for (uint32_t i = 0; i < g->seats; i++)
        if (g->p_joiners >> i & 1) {
            struct pgc_join *j = &g->join[i];
            round = j->round > round ? j->round : round;
            syncs = j->syncs > syncs ? j->syncs : syncs;
        }
    g->d_dropped = g->p_members & ~g->p_arrived;
    g->active = (g->p_members & g->p_arrived) | g->p_joiners;
    /* flags only grow: everyone goes on above the highest round and sync anyone ran */
    g->round = round;
    g->syncs = syncs;
    g->epoch = g->d_epoch = g->p_epoch + 1;
    for (uint32_t i = 0; i < g->seats; i++)
        if (g->p_joiners >> i & 1)
            g->join[i].admitted = g->join[i].ticket;
    g->decided_gen = g->gen;
    if (g->d_dropped)
        MC_WARN("pg coordinator: group %s admits 0x%" PRIx64 " at epoch %" PRIu64
                ", dropping silent members 0x%" PRIx64,
                g->name, g->p_joiners, g->epoch, g->d_dropped);
    pthread_cond_broadcast(&k->cv);
}

static int do_activate(mc_pg_coordinator_t *k, const mc_pgc_req_t *r, mc_pgc_view_t *v,
                       struct outcome *o) {
    struct pgc_group *g = find_group(k, r->group);
    uint64_t mask = 0;
    if (g)
        mask = g->seats == 64 ? ~0ull : (1ull << g->seats) - 1;
    if (!g || r->rank >= g->seats || (r->active & ~mask) || (r->joiners & ~mask))
        return failed(o, MC_ERR_INVALID_ARGUMENT, "no group %s with seat %u and those sets",
                      r->group, r->rank);
    uint64_t bit = 1ull << r->rank;
    memset(v, 0, sizeof(*v));
    v->seats = g->seats;
    v->status = MC_PGC_REJECTED;
    if (g->decided_gen && r->epoch < g->d_epoch) {
        /* The group decided past this member's view: it was dropped or its view is stale. */
        view_of(g, v);
        v->status = MC_PGC_REJECTED;
        snprintf(v->reason, sizeof(v->reason),
                 "the group moved on to epoch %" PRIu64 " (this rank's view is at %" PRIu64 ")%s",
                 g->epoch, r->epoch, (g->d_dropped & bit) ? "; it was dropped as silent" : "");
        return 0;
    }
    if (g->gen == g->decided_gen) {
        g->gen++;
        g->p_joiners = r->joiners;
        g->p_members = r->active;
        g->p_arrived = 0;
        g->p_round = g->p_syncs = g->p_epoch = 0;
        g->p_window_end = mc__now_ms() + r->window_ms;
        g->p_deadline = mc__now_ms() + r->timeout_ms;
    } else if (g->p_joiners != r->joiners || g->p_members != r->active) {
        snprintf(v->reason, sizeof(v->reason),
                 "another proposal (joiners 0x%" PRIx64 ", members 0x%" PRIx64
                 ") is in progress; members must propose the same ranks from one view "
                 "(sync_after_failure first)",
                 g->p_joiners, g->p_members);
        return 0;
    }
    uint64_t gen = g->gen;
    g->p_arrived |= bit;
    g->p_round = r->round > g->p_round ? r->round : g->p_round;
    g->p_syncs = r->syncs > g->p_syncs ? r->syncs : g->p_syncs;
    g->p_epoch = r->epoch > g->p_epoch ? r->epoch : g->p_epoch;
    snprintf(g->addrs[r->rank], MC_PGC_ADDR_MAX, "%s", r->addr);
    g->known |= bit;
    pthread_cond_broadcast(&k->cv);
    for (;;) {
        if (g->aborted_gen >= gen)
            return failed(o, MC_ERR_ENDPOINT,
                          "group %s: the joiners 0x%" PRIx64 " did not ask to join in time",
                          g->name, r->joiners);
        if (g->decided_gen >= gen) {
            view_of(g, v);
            v->dropped = g->d_dropped;
            v->status = g->d_dropped ? MC_PGC_APPLIED_DROP : MC_PGC_APPLIED;
            return 0;
        }
        uint64_t now = mc__now_ms();
        if (joiners_asked(g) && (g->p_arrived == g->p_members || now >= g->p_window_end)) {
            decide(k, g);
            continue;
        }
        if (k->stopping || now >= g->p_deadline) {
            g->aborted_gen = gen;
            g->decided_gen = gen; /* closed without a decision: the next proposal opens anew */
            pthread_cond_broadcast(&k->cv);
            return failed(o, MC_ERR_ENDPOINT,
                          "group %s: the joiners 0x%" PRIx64 " did not ask to join in time",
                          g->name, r->joiners);
        }
        uint64_t until = g->p_deadline;
        if (now < g->p_window_end && g->p_window_end < until)
            until = g->p_window_end;
        wait_until(k, until);
    }
}

/* One request: the reply frame goes into b. */
struct pgc_conn {
    uint8_t body[MC_PGC_MAX_BODY];
    mc_pgc_req_t r;
    mc_pgc_view_t v;
};

static void handle(mc_pg_coordinator_t *k, const mc_frame_header_t *h, struct pgc_conn *cn,
                   mc_buf_t *b) {
    mc_pgc_req_t *rq = &cn->r;
    mc_pgc_view_t *vw = &cn->v;
    char err[128];
    struct outcome o = {0};
    if (mc__pgc_decode_request(h->type, cn->body, (size_t)h->body_len, rq, err, sizeof(err)) != 0) {
        mc__pgc_encode_error(MC_ERR_INVALID_ARGUMENT, err, h->request_id, b);
        return;
    }
    pthread_mutex_lock(&k->mu);
    int rc;
    switch (rq->type) {
    case MC_PGC_REGISTER:
        rc = do_register(k, rq, vw, &o);
        break;
    case MC_PGC_JOIN:
        rc = do_join(k, rq, vw, &o);
        break;
    case MC_PGC_ACTIVATE:
        rc = do_activate(k, rq, vw, &o);
        break;
    default: {
        struct pgc_group *g = find_group(k, rq->group);
        rc = g ? 0 : failed(&o, MC_ERR_INVALID_ARGUMENT, "no group %s", rq->group);
        if (g)
            view_of(g, vw);
        break;
    }
    }
    pthread_mutex_unlock(&k->mu);
    if (rc)
        mc__pgc_encode_error(o.code, o.msg, h->request_id, b);
    else
        mc__pgc_encode_view(vw, h->request_id, b);
}

/* A connection: requests one after another; a frame that breaks the framing ends it, a body
 * that does not decode gets an error reply and the connection goes on. */
static void serve(void *ctx, int fd) {
    mc_pg_coordinator_t *k = ctx;
    uint8_t hdr[MC_FRAME_HEADER_SIZE];
    struct pgc_conn *cn = mc__malloc(sizeof(*cn));
    mc_buf_t b;
    mc__buf_init(&b);
    while (cn) {
        mc__conn_idle(1);
        if (mc__recv_all(fd, hdr, sizeof(hdr), 0) != 0)
            break;
        mc__conn_idle(0);
        mc_frame_header_t h;
        if (mc__frame_header_decode(hdr, sizeof(hdr), MC_PGC_MAX_BODY, &h) != 0 ||
            (h.flags & MC_FRAME_F_REPLY)) {
            mc__buf_reset(&b);
            mc__pgc_encode_error(MC_ERR_INVALID_ARGUMENT, "bad frame header", h.request_id, &b);
            mc__send_all(fd, b.data, b.len, mc__now_ms() + 5000);
            break;
        }
        /* a peer that stops mid-body does not hold the thread for ever */
        if (mc__recv_all(fd, cn->body, (size_t)h.body_len, mc__now_ms() + 30000) != 0)
            break;
        mc__buf_reset(&b);
        handle(k, &h, cn, &b);
        if (b.failed || mc__send_all(fd, b.data, b.len, mc__now_ms() + 30000) != 0)
            break;
    }
    mc__buf_free(&b);
    mc__free(cn);
}

int mc_pg_coordinator_start(const char *host, uint16_t port, mc_pg_coordinator_t **out) {
    if (!out)
        return MC_ERR_INVALID_ARGUMENT;
    const char *h = host && *host ? host : "127.0.0.1";
    mc_pg_coordinator_t *k = mc__calloc(1, sizeof(*k));
    if (!k)
        return MC_ERR_MEMORY;
    snprintf(k->host, sizeof(k->host), "%s", h);
    k->pid = getpid();
    pthread_mutex_init(&k->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&k->cv, &ca);
    pthread_condattr_destroy(&ca);
    mc_conn_server_opts_t o = {0};
    o.name = "pg-coordinator";
    o.listen_fd = -1;
    o.host = h;
    o.port = port;
    o.serve = serve;
    o.ctx = k;
    int rc = mc__conn_server_start(&o, &k->srv);
    if (rc) {
        mc_pg_coordinator_stop(k);
        return rc;
    }
    *out = k;
    return 0;
}

int mc_pg_coordinator_address(const mc_pg_coordinator_t *k, char *buf, size_t cap) {
    if (!k || !buf)
        return MC_ERR_INVALID_ARGUMENT;
    int n = snprintf(buf, cap, "%s:%u", k->host, (unsigned)mc__conn_server_port(k->srv));
    return n < 0 || (size_t)n >= cap ? MC_ERR_INVALID_ARGUMENT : 0;
}

void mc_pg_coordinator_stop(mc_pg_coordinator_t *k) {
    if (!k)
        return;
    if (getpid() != k->pid) {
        /* a fork() child's copy: stopping would shut the parent's sockets */
        if (k->srv)
            mc__conn_server_forget(k->srv);
    } else {
        mc__cond_raise(&k->mu, &k->cv, &k->stopping); /* held calls return when they wake */
        if (k->srv)
            mc__conn_server_stop(k->srv);
    }
    while (k->groups) {
        struct pgc_group *g = k->groups;
        k->groups = g->next;
        mc__free(g);
    }
    pthread_cond_destroy(&k->cv);
    pthread_mutex_destroy(&k->mu);
    mc__free(k);
}
