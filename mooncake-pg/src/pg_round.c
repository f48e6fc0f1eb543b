/* The data plane: one collective round (data writes into the peers' slots, then the flags, then
 * the wait for theirs) and the credit-driven point-to-point channel. */
#include <sched.h>
#include <string.h>
#include <time.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/time.h"
#include "pg_internal.h"

static uint64_t load_acquire(const uint64_t *p) {
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

/* Waits without burning a core on a busy host: a short spin for the fast case, then sleeps that
 * grow to 200 us. */
static void backoff(unsigned *spins) {
    unsigned s = (*spins)++;
    if (s < 64) {
        sched_yield();
        return;
    }
    long ns = s < 256 ? 5000 : (s < 2048 ? 50000 : 200000);
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

static void wait_flags(mc_pg_comm_t *c, const uint64_t *flag, uint64_t want,
                       const uint8_t *want_from, int timeout_ms, int32_t *failed, uint8_t *alive);

static mc_request_t write_req(const mc_pg_comm_t *c, int j, const void *src, uint64_t off,
                              size_t len) {
    mc_request_t q = {0};
    q.opcode = MC_OPCODE_WRITE;
    q.source = (void *)src;
    q.target_id = c->peers[j].seg;
    q.target_offset = c->peers[j].base + off;
    q.length = len;
    return q;
}

/* Writes n requests that each go to peers[j[i]]; a failed one marks its peer. */
static int write_all(mc_pg_comm_t *c, const mc_request_t *reqs, const int *to, size_t n,
                     int32_t *failed, uint8_t *alive) {
    /* Links under injected fault fail here, as a dead peer's transfer would. */
    mc_request_t live[MC_PG_MAX_RANKS];
    int live_to[MC_PG_MAX_RANKS], errs[MC_PG_MAX_RANKS];
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (__atomic_load_n(&c->link_fault[to[i]], __ATOMIC_RELAXED)) {
            if (alive[to[i]]) {
                alive[to[i]] = 0;
                mc__pg_mark_failed(c, to[i], failed);
            }
            continue;
        }
        live[m] = reqs[i];
        live_to[m++] = to[i];
    }
    if (!m)
        return 0;
    int rc =
        mc_engine_transfer_sync_each_ex(c->engine, live, m, errs, MC_SUBMIT_UNREGISTERED_LOCAL);
    if (rc == MC_ERR_INVALID_ARGUMENT || rc == MC_ERR_CONTEXT || rc == MC_ERR_MEMORY)
        return rc;
    for (size_t i = 0; i < m; i++) {
        if (errs[i] && alive[live_to[i]]) {
            alive[live_to[i]] = 0;
            mc__pg_mark_failed(c, live_to[i], failed);
        }
    }
    return 0;
}

/* Writes *value into this rank's entry of the flag array at flags_off in every alive peer. */
static int write_flags(mc_pg_comm_t *c, const uint64_t *value, uint64_t flags_off, int32_t *failed,
                       uint8_t *alive) {
    mc_request_t reqs[MC_PG_MAX_RANKS];
    int to[MC_PG_MAX_RANKS];
    size_t n = 0;
    for (int j = 0; j < c->seats; j++) {
        if (!alive[j])
            continue;
        to[n] = j;
        reqs[n++] = write_req(c, j, value, flags_off + 8ull * (uint64_t)c->rank, 8);
    }
    return write_all(c, reqs, to, n, failed, alive);
}

int mc__pg_write_word(mc_pg_comm_t *c, const uint64_t *value, uint64_t off, const uint8_t *to) {
    uint8_t alive[MC_PG_MAX_RANKS];
    memcpy(alive, to, (size_t)c->seats);
    alive[c->rank] = 0;
    return write_flags(c, value, off, NULL, alive);
}

int mc__pg_round(mc_pg_comm_t *c, const struct mc_pg_part *parts, int timeout_ms, int32_t *failed,
                 uint64_t *round, uint8_t *alive) {
    uint8_t active[MC_PG_MAX_RANKS];
    mc__pg_active_snapshot(c, active);
    uint64_t r = ++c->round;
    *round = r;
    mc_request_t reqs[MC_PG_MAX_RANKS];
    int to[MC_PG_MAX_RANKS];
    size_t n = 0;
    for (int j = 0; j < c->seats; j++) {
        /* A peer that already failed in this operation is not tried again in its later rounds
         * (each try could cost a transfer timeout, and the ranks would drift apart). */
        if (failed && failed[j])
            active[j] = 0;
        alive[j] = active[j] && j != c->rank;
        if (!alive[j] || !parts[j].len)
            continue;
        if (parts[j].len > c->slot)
            return MC_ERR_INVALID_ARGUMENT;
        to[n] = j;
        reqs[n++] = write_req(c, j, parts[j].src, MC_PG_OFF_COLL(c, r & 1, c->rank), parts[j].len);
    }
    int rc = write_all(c, reqs, to, n, failed, alive);
    if (rc)
        return rc;
    /* The flag goes only after the data landed: a peer that sees it may read the slot. */
    if ((rc = write_flags(c, &r, MC_PG_OFF_FLAGS(c), failed, alive)) != 0)
        return rc;
    active[c->rank] = 0;
    wait_flags(c, c->flags, r, active, timeout_ms, failed, alive);
    return 0;
}

/* Waits until flag[j] >= want for every seat with want_from[j]; those still short at the
 * deadline lose their alive bit and are marked failed. */
static void wait_flags(mc_pg_comm_t *c, const uint64_t *flag, uint64_t want,
                       const uint8_t *want_from, int timeout_ms, int32_t *failed, uint8_t *alive) {
    uint64_t deadline = mc__now_ms() + (uint64_t)timeout_ms;
    unsigned spins = 0;
    for (;;) {
        int waiting = 0;
        for (int j = 0; j < c->seats && !waiting; j++)
            waiting = want_from[j] && load_acquire(&flag[j]) < want;
        if (!waiting)
            break;
        if (mc__now_ms() > deadline) {
            for (int j = 0; j < c->seats; j++) {
                if (want_from[j] && load_acquire(&flag[j]) < want) {
                    if (alive[j])
                        mc__pg_mark_failed(c, j, failed);
                    alive[j] = 0;
                }
            }
            break;
        }
        backoff(&spins);
    }
    /* A peer whose flag arrived delivered its bytes, even if our write to it failed. */
    for (int j = 0; j < c->seats; j++)
        alive[j] = want_from[j] && load_acquire(&flag[j]) >= want;
}

int mc__pg_sync_round(mc_pg_comm_t *c, const uint8_t *msg, uint8_t *alive) {
    uint8_t active[MC_PG_MAX_RANKS];
    mc__pg_active_snapshot(c, active);
    /* Peers this rank saw fail are counted out by its own message: no write to them (a dead
     * peer's transfer could take its timeout, and the others would stop waiting for us). */
    pthread_mutex_lock(&c->lock);
    for (int j = 0; j < c->seats; j++)
        if (c->pending[j])
            active[j] = 0;
    pthread_mutex_unlock(&c->lock);
    active[c->rank] = 0;
    uint64_t s = ++c->syncs;
    mc_request_t reqs[MC_PG_MAX_RANKS];
    int to[MC_PG_MAX_RANKS];
    size_t n = 0;
    for (int j = 0; j < c->seats; j++) {
        alive[j] = active[j];
        if (!active[j])
            continue;
        to[n] = j;
        reqs[n++] = write_req(c, j, msg, MC_PG_OFF_SYNC_MSG(c, c->rank), MC_PG_SYNC_MSG);
    }
    int rc = write_all(c, reqs, to, n, NULL, alive);
    if (rc)
        return rc;
    if ((rc = write_flags(c, &s, MC_PG_OFF_SYNC_FLAGS(c), NULL, alive)) != 0)
        return rc;
    wait_flags(c, c->sync_flags, s, active, c->coll_timeout_ms, NULL, alive);
    return 0;
}

static int check_peer(mc_pg_comm_t *c, const void *buf, size_t len, int peer) {
    if (!c || (len && !buf) || peer < 0 || peer >= c->seats || peer == c->rank || !c->connected ||
        !c->peers[peer].base)
        return MC_ERR_INVALID_ARGUMENT;
    return 0;
}

static int xfer(mc_pg_comm_t *c, int peer, const mc_request_t *q, size_t n) {
    if (__atomic_load_n(&c->link_fault[peer], __ATOMIC_RELAXED))
        return MC_ERR_ENDPOINT;
    return mc_engine_transfer_sync_each_ex(c->engine, q, n, NULL, MC_SUBMIT_UNREGISTERED_LOCAL);
}

/* Waits until *p >= want; 0, or MC_ERR_ENDPOINT at the p2p deadline. */
static int wait_counter(mc_pg_comm_t *c, const uint64_t *p, uint64_t want) {
    uint64_t deadline = mc__now_ms() + (uint64_t)c->p2p_timeout_ms;
    unsigned spins = 0;
    while (load_acquire(p) < want) {
        if (mc__now_ms() > deadline)
            return MC_ERR_ENDPOINT;
        backoff(&spins);
    }
    return 0;
}

int mc_pg_send(mc_pg_comm_t *c, const void *buf, size_t len, int peer, int32_t *failed) {
    int rc = check_peer(c, buf, len, peer);
    if (rc)
        return rc;
    const uint8_t *p = buf;
    size_t left = len;
    /* A zero-length message still moves one (empty) chunk, so its recv returns. */
    do {
        size_t n = left < c->slot ? left : c->slot;
        uint64_t seq = c->p2p_sent[peer];
        /* Credit: the receiver consumed everything sent before, so its slot is free. */
        if ((rc = wait_counter(c, &c->p2p_done[peer], seq)) != 0)
            goto fail;
        uint64_t next = seq + 1;
        mc_request_t data = write_req(c, peer, p, MC_PG_OFF_P2P(c, c->rank), n);
        mc_request_t flag =
            write_req(c, peer, &next, MC_PG_OFF_P2P_SEQ(c) + 8ull * (uint64_t)c->rank, 8);
        if (n && (rc = xfer(c, peer, &data, 1)) != 0)
            goto fail;
        if ((rc = xfer(c, peer, &flag, 1)) != 0)
            goto fail;
        c->p2p_sent[peer] = next;
        p += n;
        left -= n;
    } while (left);
    return 0;
fail:
    mc__pg_mark_failed(c, peer, failed);
    return MC_ERR_ENDPOINT;
}

int mc_pg_recv(mc_pg_comm_t *c, void *buf, size_t len, int peer, int32_t *failed) {
    int rc = check_peer(c, buf, len, peer);
    if (rc)
        return rc;
    uint8_t *p = buf;
    size_t left = len;
    do {
        size_t n = left < c->slot ? left : c->slot;
        uint64_t next = c->p2p_recvd[peer] + 1;
        if ((rc = wait_counter(c, &c->p2p_seq[peer], next)) != 0)
            goto fail;
        memcpy(p, c->region + MC_PG_OFF_P2P(c, peer), n);
        c->p2p_recvd[peer] = next;
        /* The credit back: the slot is free for the sender's next chunk. The bytes are ours
         * already, so a sender that left after its last chunk fails nothing here; a sender
         * that is really gone fails its next message. */
        mc_request_t done =
            write_req(c, peer, &next, MC_PG_OFF_P2P_DONE(c) + 8ull * (uint64_t)c->rank, 8);
        (void)xfer(c, peer, &done, 1);
        p += n;
        left -= n;
    } while (left);
    return 0;
fail:
    mc__pg_mark_failed(c, peer, failed);
    return MC_ERR_ENDPOINT;
}
