/* The communicator's lifecycle (engine, region, rendezvous) and its membership: active set,
 * epoch, deactivation, probes. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/time.h"
#include "pg_internal.h"

#define PG_DEFAULT_TIMEOUT_MS 30000
#define PG_DEFAULT_SLOT (1u << 20)
#define PG_MIN_SLOT 4096u

size_t mc_pg_dtype_size(int dtype) {
    switch (dtype) {
    case MC_PG_INT8:
    case MC_PG_UINT8:
    case MC_PG_BOOL:
    case MC_PG_FLOAT8_E4M3FN:
    case MC_PG_FLOAT8_E5M2:
    case MC_PG_FLOAT8_E4M3FNUZ:
    case MC_PG_FLOAT8_E5M2FNUZ:
    case MC_PG_FLOAT8_E8M0FNU:
        return 1;
    case MC_PG_INT16:
    case MC_PG_UINT16:
    case MC_PG_FLOAT16:
    case MC_PG_BFLOAT16:
        return 2;
    case MC_PG_INT32:
    case MC_PG_UINT32:
    case MC_PG_FLOAT32:
        return 4;
    case MC_PG_INT64:
    case MC_PG_UINT64:
    case MC_PG_FLOAT64:
        return 8;
    default:
        return 0;
    }
}

static size_t slot_from_env(void) {
    const char *s = getenv("MC_PG_SLOT_BYTES");
    if (!s || !*s)
        return PG_DEFAULT_SLOT;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (!end || *end || v < PG_MIN_SLOT || v > (1ull << 30))
        return PG_DEFAULT_SLOT;
    return (size_t)v;
}

static int start_engine(mc_pg_comm_t *c, const mc_pg_options_t *o) {
    int rc = mc_engine_create(&c->engine);
    if (rc)
        return rc;
    c->own_engine = 1;
    mc_engine_options_t eo = {0};
    eo.local_server_name = o->host_ip && *o->host_ip ? o->host_ip : "127.0.0.1";
    eo.metadata_conn = "P2PHANDSHAKE";
    eo.protocol = o->protocol && *o->protocol ? o->protocol : "auto";
    /* A transfer to a dead peer must not outlast the operation's own deadline. */
    eo.transfer_timeout_ms = c->coll_timeout_ms;
    return mc_engine_init(c->engine, &eo);
}

int mc_pg_create(const mc_pg_options_t *o, mc_pg_comm_t **out) {
    if (!o || !out)
        return MC_ERR_INVALID_ARGUMENT;
    *out = NULL;
    int seats = o->max_group_size ? o->max_group_size : o->size;
    if (o->size < 1 || seats < o->size || seats > MC_PG_MAX_RANKS || o->rank < 0 ||
        o->rank >= seats || o->collective_timeout_ms < 0 || o->p2p_timeout_ms < 0)
        return MC_ERR_INVALID_ARGUMENT;
    size_t slot = o->slot_bytes ? o->slot_bytes : slot_from_env();
    if (slot < PG_MIN_SLOT || slot > (1ull << 30))
        return MC_ERR_INVALID_ARGUMENT;
    slot &= ~(size_t)63; /* every slot starts cache-line aligned */

    mc_pg_comm_t *c = mc__calloc(1, sizeof(*c));
    if (!c)
        return MC_ERR_MEMORY;
    pthread_mutex_init(&c->lock, NULL);
    c->rank = o->rank;
    c->size = o->size;
    c->seats = seats;
    c->slot = slot;
    c->coll_timeout_ms =
        o->collective_timeout_ms ? o->collective_timeout_ms : PG_DEFAULT_TIMEOUT_MS;
    c->p2p_timeout_ms = o->p2p_timeout_ms ? o->p2p_timeout_ms : PG_DEFAULT_TIMEOUT_MS;
    c->auto_deactivate = o->auto_deactivate_on_failure;
    c->num_synced = o->size;
    c->epoch = 1;
    for (int i = 0; i < o->size; i++)
        c->active[i] = 1;
    c->active[c->rank] = 1;
    int rc = MC_ERR_MEMORY;
    c->peers = mc__calloc((size_t)seats, sizeof(*c->peers));
    c->scratch = mc__malloc(slot);
    if (!c->peers || !c->scratch)
        goto fail;
    if (o->engine) {
        c->engine = o->engine;
    } else if ((rc = start_engine(c, o)) != 0) {
        goto fail;
    }
    c->region_len = MC_PG_OFF_P2P(c, seats);
    void *region = NULL;
    if ((rc = mc_engine_alloc_managed(c->engine, c->region_len, &region)) != 0)
        goto fail;
    c->region = region;
    memset(c->region, 0, MC_PG_CTRL_LEN(c));
    c->flags = (uint64_t *)(c->region + MC_PG_OFF_FLAGS(c));
    c->p2p_seq = (uint64_t *)(c->region + MC_PG_OFF_P2P_SEQ(c));
    c->p2p_done = (uint64_t *)(c->region + MC_PG_OFF_P2P_DONE(c));
    c->sync_flags = (uint64_t *)(c->region + MC_PG_OFF_SYNC_FLAGS(c));
    c->left = (uint64_t *)(c->region + MC_PG_OFF_LEFT(c));
    *out = c;
    return 0;
fail:
    mc_pg_destroy(c);
    return rc;
}

int mc_pg_local_address(mc_pg_comm_t *c, char *buf, size_t cap) {
    if (!c || !buf)
        return MC_ERR_INVALID_ARGUMENT;
    int n = snprintf(buf, cap, "%s#%" PRIu64, mc_engine_local_name(c->engine),
                     (uint64_t)(uintptr_t)c->region);
    return n < 0 || (size_t)n >= cap ? MC_ERR_INVALID_ARGUMENT : 0;
}

/* "name#address" into a peer entry; the segment is opened by the caller. */
static int parse_address(const char *a, struct mc_pg_peer *p) {
    const char *hash = a ? strrchr(a, '#') : NULL;
    if (!hash || hash == a || (size_t)(hash - a) >= sizeof(p->name))
        return MC_ERR_INVALID_ARGUMENT;
    char *end = NULL;
    errno = 0;
    unsigned long long base = strtoull(hash + 1, &end, 10);
    if (errno || !end || *end || base == 0 || hash[1] == '\0')
        return MC_ERR_INVALID_ARGUMENT;
    memcpy(p->name, a, (size_t)(hash - a));
    p->name[hash - a] = '\0';
    p->base = base;
    return 0;
}

static int set_peer(mc_pg_comm_t *c, int i, const char *addr) {
    struct mc_pg_peer p = {0};
    int rc = parse_address(addr, &p);
    if (rc)
        return rc;
    if (i == c->rank) {
        p.seg = MC_LOCAL_SEGMENT_ID;
        if (p.base != (uint64_t)(uintptr_t)c->region)
            return MC_ERR_INVALID_ARGUMENT;
    } else {
        /* A peer's engine on a busy host may not answer the handshake at once (a refused or
         * reset connection): try again until the collective timeout before giving up. */
        uint64_t deadline = mc__now_ms() + (uint64_t)c->coll_timeout_ms;
        while ((rc = mc_engine_open_segment(c->engine, p.name, &p.seg)) != 0) {
            if (rc == MC_ERR_INVALID_ARGUMENT || mc__now_ms() > deadline)
                return rc;
            usleep(20000);
        }
    }
    c->peers[i] = p;
    return 0;
}

int mc_pg_connect(mc_pg_comm_t *c, const char *const *addrs, size_t n) {
    if (!c || !addrs || n < (size_t)c->size || n > (size_t)c->seats)
        return MC_ERR_INVALID_ARGUMENT;
    for (size_t i = 0; i < n; i++) {
        int rc = set_peer(c, (int)i, addrs[i]);
        if (rc)
            return rc;
    }
    c->connected = 1;
    return 0;
}

static int write_file(const char *path, const char *text) {
    char tmp[4096];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp%d", path, (int)getpid()) >= (int)sizeof(tmp))
        return MC_ERR_INVALID_ARGUMENT;
    FILE *f = fopen(tmp, "w");
    if (!f)
        return MC_ERR_INVALID_ARGUMENT;
    int ok = fputs(text, f) >= 0;
    ok = (fclose(f) == 0) && ok;
    /* rename makes the address appear whole or not at all to the readers */
    if (!ok || rename(tmp, path) != 0)
        return MC_ERR_INVALID_ARGUMENT;
    return 0;
}

static int read_file(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    return n ? 0 : -1;
}

int mc_pg_rendezvous_dir(mc_pg_comm_t *c, const char *dir, int timeout_ms) {
    if (!c || !dir || !*dir || timeout_ms <= 0)
        return MC_ERR_INVALID_ARGUMENT;
    char path[4096], mine[512];
    int rc = mc_pg_local_address(c, mine, sizeof(mine));
    if (rc)
        return rc;
    if (snprintf(path, sizeof(path), "%s/rank_%d", dir, c->rank) >= (int)sizeof(path))
        return MC_ERR_INVALID_ARGUMENT;
    if ((rc = write_file(path, mine)) != 0)
        return rc;
    char(*addrs)[512] = mc__calloc((size_t)c->size, sizeof(*addrs));
    const char **ptrs = mc__calloc((size_t)c->size, sizeof(*ptrs));
    rc = MC_ERR_MEMORY;
    if (!addrs || !ptrs)
        goto out;
    uint64_t deadline = mc__now_ms() + (uint64_t)timeout_ms;
    for (int i = 0; i < c->size; i++) {
        snprintf(path, sizeof(path), "%s/rank_%d", dir, i);
        while (read_file(path, addrs[i], sizeof(addrs[i])) != 0) {
            if (mc__now_ms() > deadline) {
                rc = MC_ERR_ENDPOINT;
                goto out;
            }
            usleep(2000);
        }
        ptrs[i] = addrs[i];
    }
    rc = mc_pg_connect(c, ptrs, (size_t)c->size);
out:
    mc__free(addrs);
    mc__free(ptrs);
    return rc;
}

void mc_pg_destroy(mc_pg_comm_t *c) {
    if (!c)
        return;
    if (c->region)
        mc_engine_free_managed(c->engine, c->region);
    if (c->own_engine)
        mc_engine_destroy(c->engine);
    mc__free(c->peers);
    mc__free(c->scratch);
    pthread_mutex_destroy(&c->lock);
    mc__free(c);
}

int mc_pg_rank(const mc_pg_comm_t *c) {
    return c ? c->rank : MC_ERR_INVALID_ARGUMENT;
}
int mc_pg_size(const mc_pg_comm_t *c) {
    return c ? c->size : MC_ERR_INVALID_ARGUMENT;
}
int mc_pg_max_group_size(const mc_pg_comm_t *c) {
    return c ? c->seats : MC_ERR_INVALID_ARGUMENT;
}
mc_engine_t *mc_pg_engine(const mc_pg_comm_t *c) {
    return c ? c->engine : NULL;
}

int mc_pg_set_timeouts(mc_pg_comm_t *c, int collective_timeout_ms, int p2p_timeout_ms) {
    if (!c || collective_timeout_ms < 0 || p2p_timeout_ms < 0)
        return MC_ERR_INVALID_ARGUMENT;
    if (collective_timeout_ms)
        c->coll_timeout_ms = collective_timeout_ms;
    if (p2p_timeout_ms)
        c->p2p_timeout_ms = p2p_timeout_ms;
    return 0;
}

void mc__pg_mark_failed(mc_pg_comm_t *c, int j, int32_t *failed) {
    if (failed)
        failed[j] = 1;
    pthread_mutex_lock(&c->lock);
    c->pending[j] = 1;
    if (c->auto_deactivate && c->active[j] && j != c->rank) {
        c->active[j] = 0;
        c->epoch++;
    }
    pthread_mutex_unlock(&c->lock);
}

/* Peers that left gracefully wrote their mark into our region: they leave our active set (the
 * epoch grows) without anyone waiting for them to time out. Called with the lock held. */
static void apply_leave_marks(mc_pg_comm_t *c) {
    for (int i = 0; i < c->seats; i++) {
        if (i != c->rank && c->active[i] && __atomic_load_n(&c->left[i], __ATOMIC_ACQUIRE)) {
            c->active[i] = 0;
            c->epoch++;
        }
    }
}

int mc__pg_active_snapshot(mc_pg_comm_t *c, uint8_t *active) {
    int n = 0;
    pthread_mutex_lock(&c->lock);
    apply_leave_marks(c);
    for (int i = 0; i < c->seats; i++) {
        active[i] = c->active[i] && (c->peers[i].base != 0 || i == c->rank);
        n += active[i];
    }
    pthread_mutex_unlock(&c->lock);
    return n;
}

int mc_pg_active_ranks(mc_pg_comm_t *c, int32_t *active, size_t n) {
    if (!c || !active || n < (size_t)c->seats)
        return MC_ERR_INVALID_ARGUMENT;
    pthread_mutex_lock(&c->lock);
    apply_leave_marks(c);
    for (int i = 0; i < c->seats; i++)
        active[i] = c->active[i];
    pthread_mutex_unlock(&c->lock);
    return 0;
}

uint64_t mc_pg_epoch(mc_pg_comm_t *c) {
    if (!c)
        return 0;
    pthread_mutex_lock(&c->lock);
    apply_leave_marks(c);
    uint64_t e = c->epoch;
    pthread_mutex_unlock(&c->lock);
    return e;
}

int mc_pg_num_synced_ranks(mc_pg_comm_t *c) {
    if (!c)
        return MC_ERR_INVALID_ARGUMENT;
    pthread_mutex_lock(&c->lock);
    int n = c->num_synced;
    pthread_mutex_unlock(&c->lock);
    return n;
}

int mc_pg_peer_state(mc_pg_comm_t *c, const int32_t *ranks, size_t n, int32_t *alive) {
    if (!c || (n && (!ranks || !alive)))
        return MC_ERR_INVALID_ARGUMENT;
    uint64_t inactive = 0;
    uint8_t act[MC_PG_MAX_RANKS];
    mc__pg_active_snapshot(c, act);
    for (size_t i = 0; i < n; i++) {
        if (ranks[i] < 0 || ranks[i] >= c->seats)
            return MC_ERR_INVALID_ARGUMENT;
        if (!act[ranks[i]])
            inactive |= 1ull << ranks[i];
    }
    /* a seat someone asked to join is reached at the joiner's address */
    if (inactive && mc__pg_ctrl_connect_joiners(c, inactive) == MC_ERR_MEMORY)
        return MC_ERR_MEMORY;
    for (size_t i = 0; i < n; i++) {
        const struct mc_pg_peer *p = &c->peers[ranks[i]];
        if (ranks[i] == c->rank)
            alive[i] = 1;
        else
            alive[i] = p->base != 0 && mc_engine_probe(c->engine, p->name) == 0;
    }
    return 0;
}

int mc_pg_deactivate(mc_pg_comm_t *c, const int32_t *ranks, size_t n) {
    if (!c || (n && !ranks))
        return MC_ERR_INVALID_ARGUMENT;
    for (size_t i = 0; i < n; i++)
        if (ranks[i] < 0 || ranks[i] >= c->seats || ranks[i] == c->rank)
            return MC_ERR_INVALID_ARGUMENT;
    pthread_mutex_lock(&c->lock);
    int changed = 0;
    for (size_t i = 0; i < n; i++) {
        changed |= c->active[ranks[i]];
        c->active[ranks[i]] = 0;
    }
    if (changed)
        c->epoch++;
    pthread_mutex_unlock(&c->lock);
    return 0;
}

int mc_pg_sync_after_failure(mc_pg_comm_t *c, int *status) {
    if (!c || !status || !c->connected)
        return MC_ERR_INVALID_ARGUMENT;
    /* The message: this rank's round (8 bytes), whether it has a failure pending (1), and the
     * seats it counts out (one byte each). */
    uint8_t msg[MC_PG_SYNC_MSG] = {0}, active[MC_PG_MAX_RANKS], alive[MC_PG_MAX_RANKS];
    memcpy(msg, &c->round, 8);
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < c->seats; i++) {
        msg[8] |= c->pending[i];
        msg[9 + i] = (uint8_t)(c->pending[i] || !c->active[i]);
    }
    pthread_mutex_unlock(&c->lock);
    msg[9 + c->rank] = 0;
    uint64_t epoch = mc_pg_epoch(c);
    memcpy(msg + MC_PG_SYNC_MSG - 8, &epoch, 8);
    mc__pg_active_snapshot(c, active);
    int rc = mc__pg_sync_round(c, msg, alive);
    if (rc)
        return rc;
    uint8_t gone[MC_PG_MAX_RANKS] = {0};
    int pending_anywhere = msg[8];
    uint64_t round = c->round;
    for (int j = 0; j < c->seats; j++) {
        gone[j] = msg[9 + j];
        if (!active[j] || j == c->rank)
            continue;
        if (!alive[j]) {
            gone[j] = 1;
            pending_anywhere = 1;
        }
    }
    for (int j = 0; j < c->seats; j++) {
        if (!alive[j] || j == c->rank)
            continue;
        const uint8_t *theirs = c->region + MC_PG_OFF_SYNC_MSG(c, j);
        uint64_t r;
        memcpy(&r, theirs, 8);
        if (r > round)
            round = r;
        memcpy(&r, theirs + MC_PG_SYNC_MSG - 8, 8);
        if (r > epoch)
            epoch = r;
        pending_anywhere |= theirs[8];
        for (int k = 0; k < c->seats; k++)
            gone[k] |= theirs[9 + k];
    }
    gone[c->rank] = 0;
    /* Ranks that failed mid-operation may have run different numbers of rounds: all go on from
     * the highest, which every survivor has now seen. */
    c->round = round;
    pthread_mutex_lock(&c->lock);
    int n = 0;
    for (int k = 0; k < c->seats; k++) {
        if (gone[k])
            c->active[k] = 0;
        c->pending[k] = 0;
        n += c->active[k];
    }
    /* every survivor ends on the same epoch: the highest any of them had, one more for a change */
    c->epoch = epoch + (pending_anywhere ? 1 : 0);
    c->num_synced = n;
    pthread_mutex_unlock(&c->lock);
    *status = pending_anywhere ? MC_PG_SYNC_RECONCILED : MC_PG_SYNC_NO_PENDING;
    return 0;
}

int mc_pg_set_peer(mc_pg_comm_t *c, int rank, const char *addr) {
    if (!c || !addr || rank < 0 || rank >= c->seats)
        return MC_ERR_INVALID_ARGUMENT;
    pthread_mutex_lock(&c->lock);
    int rc = set_peer(c, rank, addr);
    pthread_mutex_unlock(&c->lock);
    return rc;
}

int mc_pg_counters(mc_pg_comm_t *c, uint64_t *round, uint64_t *syncs) {
    if (!c || !round || !syncs)
        return MC_ERR_INVALID_ARGUMENT;
    *round = c->round;
    *syncs = c->syncs;
    return 0;
}

int mc_pg_reset_seats(mc_pg_comm_t *c, const int32_t *seats, size_t n) {
    if (!c || (n && !seats))
        return MC_ERR_INVALID_ARGUMENT;
    for (size_t i = 0; i < n; i++)
        if (seats[i] < 0 || seats[i] >= c->seats)
            return MC_ERR_INVALID_ARGUMENT;
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < n; i++) {
        int j = seats[i];
        if (j == c->rank)
            continue;
        /* The new incarnation's messages count from one again, on both sides. */
        __atomic_store_n(&c->p2p_seq[j], 0, __ATOMIC_RELEASE);
        __atomic_store_n(&c->p2p_done[j], 0, __ATOMIC_RELEASE);
        __atomic_store_n(&c->left[j], 0, __ATOMIC_RELEASE);
        c->p2p_sent[j] = c->p2p_recvd[j] = 0;
        c->pending[j] = 0;
    }
    pthread_mutex_unlock(&c->lock);
    return 0;
}

int mc_pg_admit(mc_pg_comm_t *c, const int32_t *active, size_t n, uint64_t round, uint64_t syncs,
                uint64_t epoch) {
    if (!c || !active || n != (size_t)c->seats || !active[c->rank])
        return MC_ERR_INVALID_ARGUMENT;
    for (size_t i = 0; i < n; i++)
        if (active[i] && !c->peers[i].base && (int)i != c->rank)
            return MC_ERR_INVALID_ARGUMENT; /* an active seat must have an address */
    /* Flags only grow: a round above every member's last one cannot meet a stale flag. */
    if (round > c->round)
        c->round = round;
    if (syncs > c->syncs)
        c->syncs = syncs;
    pthread_mutex_lock(&c->lock);
    int k = 0, extent = 0;
    for (size_t i = 0; i < n; i++) {
        c->active[i] = active[i] != 0;
        k += c->active[i];
        if (c->active[i])
            extent = (int)i + 1;
    }
    /* The buffers' rank space now reaches the highest active seat (an extension grows it). */
    c->size = extent;
    c->epoch = epoch;
    c->num_synced = k;
    c->connected = 1;
    pthread_mutex_unlock(&c->lock);
    return 0;
}

int mc_pg_leave(mc_pg_comm_t *c) {
    if (!c || !c->connected)
        return MC_ERR_INVALID_ARGUMENT;
    uint8_t active[MC_PG_MAX_RANKS];
    mc__pg_active_snapshot(c, active);
    static const uint64_t mark = 1;
    int rc = mc__pg_write_word(c, &mark, MC_PG_OFF_LEFT(c), active);
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < c->seats; i++)
        c->active[i] = i == c->rank;
    c->epoch++;
    c->num_synced = 1;
    pthread_mutex_unlock(&c->lock);
    return rc;
}

int mc_pg_inject_link_fault(mc_pg_comm_t *c, int peer, int on) {
    if (!c || peer < -1 || peer >= c->seats)
        return MC_ERR_INVALID_ARGUMENT;
    for (int j = 0; j < c->seats; j++)
        if (peer == -1 || j == peer)
            __atomic_store_n(&c->link_fault[j], (uint8_t)(on != 0), __ATOMIC_RELAXED);
    return 0;
}
