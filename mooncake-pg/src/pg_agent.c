/* A rank's side of the control plane: one request to the coordinator per call (a connection of
 * its own, so calls from several threads or a forked child never share a socket), and what the
 * decided view means for this communicator (peers to connect, seats to start over, the view to
 * apply). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/log.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "pg_ctrl_proto.h"
#include "pg_internal.h"

/* One round trip: the coordinator may hold the call up to hold_ms; a refused connection (the
 * coordinator not listening yet) is tried again within the same deadline. A call it answers at
 * once (hold_ms 0: a peer-state probe) gives up sooner, so a coordinator that is gone costs a
 * caller polling peer states little. */
static int call(const char *coord, const mc_pgc_req_t *r, int hold_ms, mc_pgc_view_t *v) {
    const char *a = strncmp(coord, "tcp://", 6) == 0 ? coord + 6 : coord;
    char host[256];
    uint16_t port;
    if (mc__split_host_port(a, host, sizeof(host), &port) != 0 || port == 0)
        return MC_ERR_INVALID_ARGUMENT;
    uint64_t deadline = mc__now_ms() + (uint64_t)hold_ms + (hold_ms ? 10000 : 2000);
    int fd;
    while ((fd = mc__tcp_connect(host, port, deadline)) < 0) {
        if (fd == MC_ERR_DNS || mc__now_ms() + 50 >= deadline)
            return fd;
        usleep(50000);
    }
    static _Thread_local uint64_t next_id;
    uint64_t id = ++next_id;
    mc_buf_t b;
    mc__buf_init(&b);
    uint8_t *body = NULL;
    int rc = mc__pgc_encode_request(r, id, &b);
    if (!rc)
        rc = mc__send_all(fd, b.data, b.len, deadline);
    uint8_t hdr[MC_FRAME_HEADER_SIZE];
    mc_frame_header_t h;
    if (!rc)
        rc = mc__recv_all(fd, hdr, sizeof(hdr), deadline);
    if (!rc &&
        (mc__frame_header_decode(hdr, sizeof(hdr), MC_PGC_MAX_BODY, &h) != 0 || h.request_id != id))
        rc = MC_ERR_SOCKET; /* not our coordinator speaking */
    if (!rc && !(body = mc__malloc(h.body_len ? (size_t)h.body_len : 1)))
        rc = MC_ERR_MEMORY;
    if (!rc)
        rc = mc__recv_all(fd, body, (size_t)h.body_len, deadline);
    if (!rc)
        rc = mc__pgc_decode_reply(h.flags, body, (size_t)h.body_len, v);
    if (rc && rc != MC_ERR_MEMORY && v->reason[0])
        MC_WARN("pg control plane: %s", v->reason);
    mc__free(body);
    mc__buf_free(&b);
    close(fd);
    return rc;
}

static void base_request(mc_pg_comm_t *c, mc_pgc_req_t *r, uint8_t type, int timeout_ms) {
    memset(r, 0, sizeof(*r));
    r->type = type;
    snprintf(r->group, sizeof(r->group), "%s", c->ctrl_group);
    r->rank = (uint32_t)c->rank;
    r->timeout_ms = (uint32_t)timeout_ms;
    mc_pg_local_address(c, r->addr, sizeof(r->addr));
}

/* Points every seat of mask at the view's address (those this rank already uses stay). */
static int connect_seats(mc_pg_comm_t *c, const mc_pgc_view_t *v, uint64_t mask) {
    for (int i = 0; i < c->seats; i++) {
        if (!(mask >> i & 1) || i == c->rank)
            continue;
        if (!(v->known >> i & 1))
            return MC_ERR_INVALID_ARGUMENT; /* an active seat without an address */
        char cur[MC_PGC_ADDR_MAX];
        snprintf(cur, sizeof(cur), "%s#%llu", c->peers[i].name,
                 (unsigned long long)c->peers[i].base);
        if (c->peers[i].base && strcmp(cur, v->addrs[i]) == 0)
            continue;
        int rc = mc_pg_set_peer(c, i, v->addrs[i]);
        if (rc)
            return rc;
    }
    return 0;
}

static int apply(mc_pg_comm_t *c, const mc_pgc_view_t *v) {
    int32_t active[MC_PG_MAX_RANKS];
    for (int i = 0; i < c->seats; i++)
        active[i] = (int32_t)(v->active >> i & 1);
    return mc_pg_admit(c, active, (size_t)c->seats, v->round, v->syncs, v->epoch);
}

int mc__pg_ctrl_connect_joiners(mc_pg_comm_t *c, uint64_t seats) {
    if (!c->ctrl_addr[0])
        return 0;
    mc_pgc_req_t r;
    base_request(c, &r, MC_PGC_VIEW, 0);
    mc_pgc_view_t *v = mc__malloc(sizeof(*v));
    if (!v)
        return MC_ERR_MEMORY;
    int rc = call(c->ctrl_addr, &r, 0, v);
    if (!rc && v->seats == (uint32_t)c->seats)
        rc = connect_seats(c, v, v->joining & v->known & seats);
    mc__free(v);
    return rc;
}

int mc_pg_ctrl_register(mc_pg_comm_t *c, const char *coordinator, const char *group, int extension,
                        int timeout_ms) {
    if (!c || !coordinator || !group || !*group || timeout_ms <= 0 ||
        strlen(coordinator) >= sizeof(c->ctrl_addr) || strlen(group) >= sizeof(c->ctrl_group))
        return MC_ERR_INVALID_ARGUMENT;
    snprintf(c->ctrl_addr, sizeof(c->ctrl_addr), "%s", coordinator);
    snprintf(c->ctrl_group, sizeof(c->ctrl_group), "%s", group);
    mc_pgc_req_t r;
    base_request(c, &r, MC_PGC_REGISTER, timeout_ms);
    r.size = (uint32_t)c->size;
    r.seats = (uint32_t)c->seats;
    r.extension = extension ? 1 : 0;
    mc_pgc_view_t *v = mc__malloc(sizeof(*v));
    if (!v)
        return MC_ERR_MEMORY;
    int rc = call(c->ctrl_addr, &r, timeout_ms, v);
    if (!rc && (v->seats != (uint32_t)c->seats || v->status != MC_PGC_APPLIED))
        rc = MC_ERR_INVALID_ARGUMENT;
    if (!rc && !extension) {
        rc = connect_seats(c, v, v->active);
        if (!rc)
            rc = apply(c, v);
    } else if (!rc) {
        /* runs alone until admitted: collectives over itself only */
        int32_t alone[MC_PG_MAX_RANKS] = {0};
        alone[c->rank] = 1;
        rc = mc_pg_admit(c, alone, (size_t)c->seats, 0, 0, v->epoch);
    }
    mc__free(v);
    return rc;
}

int mc_pg_ctrl_join(mc_pg_comm_t *c, int timeout_ms) {
    if (!c || !c->ctrl_addr[0] || timeout_ms <= 0)
        return MC_ERR_INVALID_ARGUMENT;
    /* A new incarnation: every seat's point-to-point counters start over before anyone can send
     * (the members admit this rank only after this request). */
    int32_t all[MC_PG_MAX_RANKS];
    for (int i = 0; i < c->seats; i++)
        all[i] = i;
    int rc = mc_pg_reset_seats(c, all, (size_t)c->seats);
    if (rc)
        return rc;
    mc_pgc_req_t r;
    base_request(c, &r, MC_PGC_JOIN, timeout_ms);
    mc_pg_counters(c, &r.round, &r.syncs);
    mc_pgc_view_t *v = mc__malloc(sizeof(*v));
    if (!v)
        return MC_ERR_MEMORY;
    rc = call(c->ctrl_addr, &r, timeout_ms, v);
    if (!rc && (v->seats != (uint32_t)c->seats || !(v->active >> c->rank & 1)))
        rc = MC_ERR_INVALID_ARGUMENT;
    if (!rc)
        rc = connect_seats(c, v, v->active);
    if (!rc)
        rc = apply(c, v);
    mc__free(v);
    return rc;
}

int mc_pg_ctrl_activate(mc_pg_comm_t *c, const int32_t *ranks, size_t n, int window_ms,
                        int timeout_ms, mc_pg_proposal_result_t *out) {
    if (!c || !out || (n && !ranks) || !c->ctrl_addr[0] || window_ms < 0 || timeout_ms <= 0)
        return MC_ERR_INVALID_ARGUMENT;
    memset(out, 0, sizeof(*out));
    int32_t act[MC_PG_MAX_RANKS];
    int rc = mc_pg_active_ranks(c, act, MC_PG_MAX_RANKS);
    if (rc)
        return rc;
    uint64_t active = 0, joiners = 0;
    for (int i = 0; i < c->seats; i++)
        active |= (uint64_t)(act[i] != 0) << i;
    int32_t seats[MC_PG_MAX_RANKS];
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (ranks[i] < 0 || ranks[i] >= c->seats)
            return MC_ERR_INVALID_ARGUMENT;
        if (!(active >> ranks[i] & 1) && !(joiners >> ranks[i] & 1)) {
            joiners |= 1ull << ranks[i];
            seats[k++] = ranks[i];
        }
    }
    out->epoch = mc_pg_epoch(c);
    out->status = MC_PG_PROPOSAL_APPLIED;
    if (!joiners)
        return 0; /* all of them are active already */
    /* The joiners' seats start over here before the proposal can be decided, so nothing a
     * joiner sends once admitted can be cleared by a late reset. */
    if ((rc = mc_pg_reset_seats(c, seats, k)) != 0)
        return rc;
    mc_pgc_req_t r;
    base_request(c, &r, MC_PGC_ACTIVATE, timeout_ms);
    r.joiners = joiners;
    r.active = active;
    r.epoch = out->epoch;
    r.window_ms = (uint32_t)window_ms;
    mc_pg_counters(c, &r.round, &r.syncs);
    mc_pgc_view_t *v = mc__malloc(sizeof(*v));
    if (!v)
        return MC_ERR_MEMORY;
    rc = call(c->ctrl_addr, &r, timeout_ms > window_ms ? timeout_ms : window_ms, v);
    if (!rc && v->seats != (uint32_t)c->seats)
        rc = MC_ERR_INVALID_ARGUMENT;
    if (!rc && v->status == MC_PGC_REJECTED) {
        out->status = MC_PG_PROPOSAL_REJECTED;
        snprintf(out->reason, sizeof(out->reason), "%s", v->reason);
    } else if (!rc) {
        rc = connect_seats(c, v, v->active);
        if (!rc)
            rc = apply(c, v);
        out->status = v->status == MC_PGC_APPLIED_DROP ? MC_PG_PROPOSAL_APPLIED_WITH_DROPPED
                                                       : MC_PG_PROPOSAL_APPLIED;
        out->epoch = mc_pg_epoch(c);
        for (int i = 0; i < c->seats; i++)
            out->dropped[i] = (int32_t)(v->dropped >> i & 1);
    }
    if (rc && v->reason[0])
        snprintf(out->reason, sizeof(out->reason), "%s", v->reason);
    mc__free(v);
    return rc;
}
