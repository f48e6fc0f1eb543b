/* The collectives, each a loop of rounds (pg_round.c) over slot-sized chunks. all_reduce is a
 * reduce-scatter round then an all-gather round per chunk: each active rank reduces one segment
 * of the chunk, in rank order, so every rank ends with the same bits. Reductions everywhere run
 * in rank order for the same reason. */
#include <string.h>

#include "pg_internal.h"

struct op {
    int a[MC_PG_MAX_RANKS]; /* the active seats, in order */
    int na, pos;            /* how many, and this rank's place among them */
    size_t esz, cap;        /* element size, elements per slot */
    struct mc_pg_part parts[MC_PG_MAX_RANKS];
    uint8_t alive[MC_PG_MAX_RANKS];
};

static int begin(mc_pg_comm_t *c, int dtype, const void *send, const void *recv, size_t count,
                 int32_t *failed, struct op *o) {
    if (!c || !c->connected || !mc_pg_dtype_size(dtype) || (count && (!send || !recv)))
        return MC_ERR_INVALID_ARGUMENT;
    uint8_t active[MC_PG_MAX_RANKS];
    mc__pg_active_snapshot(c, active);
    o->na = 0;
    for (int i = 0; i < c->seats; i++) {
        if (!active[i])
            continue;
        if (i == c->rank)
            o->pos = o->na;
        o->a[o->na++] = i;
    }
    o->esz = mc_pg_dtype_size(dtype);
    o->cap = c->slot / o->esz;
    if (failed)
        memset(failed, 0, (size_t)c->seats * sizeof(*failed));
    return 0;
}

static void clear_parts(mc_pg_comm_t *c, struct op *o) {
    memset(o->parts, 0, (size_t)c->seats * sizeof(o->parts[0]));
}

/* Segment k of n elements split over parts pieces, the first n % parts one element longer. */
static void segment(size_t n, int parts, int k, size_t *start, size_t *len) {
    size_t base = n / (size_t)parts, extra = n % (size_t)parts, kk = (size_t)k;
    *start = kk * base + (kk < extra ? kk : extra);
    *len = base + (kk < extra);
}

static size_t min_sz(size_t a, size_t b) {
    return a < b ? a : b;
}

/* Reduces n elements of seat-ordered contributions into c->scratch and copies the result to
 * out: own is this rank's piece, the others come from round r's slots at byte offset slot_off. */
static void reduce_ordered(mc_pg_comm_t *c, struct op *o, uint64_t r, const uint8_t *own,
                           size_t slot_off, size_t n, int dtype, int op, void *out) {
    int first = 1, used = 0;
    for (int k = 0; k < o->na; k++) {
        int j = o->a[k];
        const uint8_t *src =
            j == c->rank ? own : (o->alive[j] ? mc__pg_slot(c, r, j) + slot_off : NULL);
        if (!src)
            continue;
        if (first)
            memmove(c->scratch, src, n * o->esz);
        else
            mc__pg_reduce_into(c->scratch, src, n, dtype, op);
        first = 0;
        used++;
    }
    if (op == MC_PG_AVG && dtype != MC_PG_BOOL)
        mc__pg_divide(c->scratch, n, dtype, o->na);
    (void)used;
    memmove(out, c->scratch, n * o->esz);
}

int mc_pg_all_reduce(mc_pg_comm_t *c, const void *send, void *recv, size_t count, int dtype, int op,
                     int32_t *failed) {
    struct op o;
    int rc = begin(c, dtype, send, recv, count, failed, &o);
    if (rc || (rc = mc__pg_reduce_check(dtype, op)) != 0)
        return rc;
    uint8_t *buf = recv;
    if (send != recv)
        memmove(buf, send, count * o.esz);
    size_t chunk = o.cap * (size_t)o.na;
    for (size_t off = 0; off < count; off += chunk) {
        size_t cc = min_sz(chunk, count - off), s, l, my_s, my_l;
        uint64_t r;
        clear_parts(c, &o);
        for (int k = 0; k < o.na; k++) {
            segment(cc, o.na, k, &s, &l);
            o.parts[o.a[k]] = (struct mc_pg_part){buf + (off + s) * o.esz, l * o.esz};
        }
        if ((rc = mc__pg_round(c, o.parts, c->coll_timeout_ms, failed, &r, o.alive)) != 0)
            return rc;
        segment(cc, o.na, o.pos, &my_s, &my_l);
        uint8_t *mine = buf + (off + my_s) * o.esz;
        reduce_ordered(c, &o, r, mine, 0, my_l, dtype, op, mine);
        for (int k = 0; k < o.na; k++)
            o.parts[o.a[k]] = (struct mc_pg_part){mine, my_l * o.esz};
        if ((rc = mc__pg_round(c, o.parts, c->coll_timeout_ms, failed, &r, o.alive)) != 0)
            return rc;
        for (int k = 0; k < o.na; k++) {
            int j = o.a[k];
            if (j == c->rank || !o.alive[j])
                continue;
            segment(cc, o.na, k, &s, &l);
            memcpy(buf + (off + s) * o.esz, mc__pg_slot(c, r, j), l * o.esz);
        }
    }
    return 0;
}

static int check_root(mc_pg_comm_t *c, int root) {
    return root < 0 || root >= c->size ? MC_ERR_INVALID_ARGUMENT : 0;
}

int mc_pg_broadcast(mc_pg_comm_t *c, const void *send, void *recv, size_t count, int dtype,
                    int root, int32_t *failed) {
    struct op o;
    int rc = begin(c, dtype, send, recv, count, failed, &o);
    if (rc || (rc = check_root(c, root)) != 0)
        return rc;
    uint8_t *buf = recv;
    if (c->rank == root && send != recv)
        memmove(buf, send, count * o.esz);
    for (size_t off = 0; off < count; off += o.cap) {
        size_t cc = min_sz(o.cap, count - off);
        uint64_t r;
        clear_parts(c, &o);
        if (c->rank == root)
            for (int k = 0; k < o.na; k++)
                o.parts[o.a[k]] = (struct mc_pg_part){buf + off * o.esz, cc * o.esz};
        if ((rc = mc__pg_round(c, o.parts, c->coll_timeout_ms, failed, &r, o.alive)) != 0)
            return rc;
        if (c->rank != root && o.alive[root])
            memcpy(buf + off * o.esz, mc__pg_slot(c, r, root), cc * o.esz);
    }
    return 0;
}

int mc_pg_reduce(mc_pg_comm_t *c, const void *send, void *recv, size_t count, int dtype, int op,
                 int root, int32_t *failed) {
    struct op o;
    int rc = begin(c, dtype, send, recv, count, failed, &o);
    if (rc || (rc = mc__pg_reduce_check(dtype, op)) != 0 || (rc = check_root(c, root)) != 0)
        return rc;
    const uint8_t *in = send;
    for (size_t off = 0; off < count; off += o.cap) {
        size_t cc = min_sz(o.cap, count - off);
        uint64_t r;
        clear_parts(c, &o);
        if (c->rank != root)
            o.parts[root] = (struct mc_pg_part){in + off * o.esz, cc * o.esz};
        if ((rc = mc__pg_round(c, o.parts, c->coll_timeout_ms, failed, &r, o.alive)) != 0)
            return rc;
        if (c->rank == root)
            reduce_ordered(c, &o, r, in + off * o.esz, 0, cc, dtype, op,
                           (uint8_t *)recv + off * o.esz);
    }
    return 0;
}

/* One block of count elements per rank: gather (to root), all_gather (to all). */
static int gather_like(mc_pg_comm_t *c, const void *send, void *recv, size_t count, int dtype,
                       int root, int32_t *failed) {
    struct op o;
    int rc = begin(c, dtype, send, recv, count, failed, &o);
    if (rc)
        return rc;
    const uint8_t *in = send;
    uint8_t *out = recv;
    int all = root < 0;
    for (size_t off = 0; off < count; off += o.cap) {
        size_t cc = min_sz(o.cap, count - off);
        uint64_t r;
        clear_parts(c, &o);
        for (int k = 0; k < o.na; k++)
            if (all || o.a[k] == root)
                o.parts[o.a[k]] = (struct mc_pg_part){in + off * o.esz, cc * o.esz};
        if ((rc = mc__pg_round(c, o.parts, c->coll_timeout_ms, failed, &r, o.alive)) != 0)
            return rc;
        if (!all && c->rank != root)
            continue;
        for (int k = 0; k < o.na; k++) {
            int j = o.a[k];
            if (j >= c->size)
                continue;
            uint8_t *dst = out + ((size_t)j * count + off) * o.esz;
            if (j == c->rank)
                memmove(dst, in + off * o.esz, cc * o.esz);
            else if (o.alive[j])
                memcpy(dst, mc__pg_slot(c, r, j), cc * o.esz);
        }
    }
    return 0;
}

int mc_pg_all_gather(mc_pg_comm_t *c, const void *send, void *recv, size_t count, int dtype,
                     int32_t *failed) {
    return gather_like(c, send, recv, count, dtype, -1, failed);
}

int mc_pg_gather(mc_pg_comm_t *c, const void *send, void *recv, size_t count, int dtype, int root,
                 int32_t *failed) {
    if (c && check_root(c, root))
        return MC_ERR_INVALID_ARGUMENT;
    if (c && c->rank != root && !recv)
        recv = (void *)send; /* only the root has an output */
    return gather_like(c, send, recv, count, dtype, root, failed);
}

/* Block j of send goes to rank j: scatter (from root), all_to_all (from all); reduce_scatter
 * reduces what arrives. */
static int scatter_like(mc_pg_comm_t *c, const void *send, void *recv, size_t count, int dtype,
                        int root, int op, int32_t *failed) {
    struct op o;
    int rc = begin(c, dtype, send, recv, count, failed, &o);
    if (rc)
        return rc;
    const uint8_t *in = send;
    uint8_t *out = recv;
    int all = root < 0, reducing = op >= 0;
    for (size_t off = 0; off < count; off += o.cap) {
        size_t cc = min_sz(o.cap, count - off);
        uint64_t r;
        clear_parts(c, &o);
        if (all || c->rank == root)
            for (int k = 0; k < o.na; k++) {
                int j = o.a[k];
                if (j < c->size)
                    o.parts[j] =
                        (struct mc_pg_part){in + ((size_t)j * count + off) * o.esz, cc * o.esz};
            }
        if ((rc = mc__pg_round(c, o.parts, c->coll_timeout_ms, failed, &r, o.alive)) != 0)
            return rc;
        const uint8_t *own =
            all || c->rank == root ? in + ((size_t)c->rank * count + off) * o.esz : NULL;
        if (reducing) {
            reduce_ordered(c, &o, r, own, 0, cc, dtype, op, out + off * o.esz);
        } else if (!all) {
            if (own)
                memmove(out + off * o.esz, own, cc * o.esz);
            else if (o.alive[root])
                memcpy(out + off * o.esz, mc__pg_slot(c, r, root), cc * o.esz);
        } else {
            for (int k = 0; k < o.na; k++) {
                int j = o.a[k];
                uint8_t *dst = out + ((size_t)j * count + off) * o.esz;
                if (j == c->rank)
                    memmove(dst, own, cc * o.esz);
                else if (o.alive[j] && j < c->size)
                    memcpy(dst, mc__pg_slot(c, r, j), cc * o.esz);
            }
        }
    }
    return 0;
}

int mc_pg_scatter(mc_pg_comm_t *c, const void *send, void *recv, size_t count, int dtype, int root,
                  int32_t *failed) {
    if (c && check_root(c, root))
        return MC_ERR_INVALID_ARGUMENT;
    if (c && c->rank != root && !send)
        send = recv; /* only the root has an input */
    return scatter_like(c, send, recv, count, dtype, root, -1, failed);
}

int mc_pg_all_to_all(mc_pg_comm_t *c, const void *send, void *recv, size_t count, int dtype,
                     int32_t *failed) {
    return scatter_like(c, send, recv, count, dtype, -1, -1, failed);
}

int mc_pg_reduce_scatter(mc_pg_comm_t *c, const void *send, void *recv, size_t count, int dtype,
                         int op, int32_t *failed) {
    int rc = mc__pg_reduce_check(dtype, op);
    return rc ? rc : scatter_like(c, send, recv, count, dtype, -1, op, failed);
}

int mc_pg_barrier(mc_pg_comm_t *c, int32_t *failed) {
    struct op o;
    int rc = begin(c, MC_PG_UINT8, NULL, NULL, 0, failed, &o);
    if (rc)
        return rc;
    uint64_t r;
    clear_parts(c, &o);
    return mc__pg_round(c, o.parts, c->coll_timeout_ms, failed, &r, o.alive);
}
