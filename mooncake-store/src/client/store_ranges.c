/* Ranged reads: byte ranges of objects into caller memory. Every range becomes a read of a
 * narrowed replica list (each replica's address moved to the range, its size the range's), so the
 * batch read path moves all ranges of all keys together after one master round trip (none for
 * keys whose replica lists this client holds under a live lease, replica_cache.c).
 *
 * A LOCAL_DISK copy is read whole, once per key, and the ranges are copied out of it: the node's
 * checksum covers all of an object's bytes (its verdict follows them, disk_proto.h), so a part of
 * it could not be served verified anyway. That covers disk-only objects and ranges whose
 * memory replicas all failed. */
#include <string.h>

#include "client/direct.h"
#include "client/store_disk.h"
#include "client/store_internal.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/log.h"

/* The replica list of range [off, off+len) of the object kr describes. Only the replicas the
 * list has are copied (a list is ~2 KiB, most of it unused name space). */
static void mc__narrow(const mc__key_replicas_t *kr, uint64_t off, uint64_t len,
                       mc__key_replicas_t *out) {
    uint32_t n = kr->n_replicas < MC_MP_MAX_REPLICA_NUM ? kr->n_replicas : MC_MP_MAX_REPLICA_NUM;
    out->code = kr->code;
    out->size = len;
    out->n_replicas = 0;
    out->key = NULL; /* a range of a LOCAL_DISK copy is not read: memory replicas only */
    for (uint32_t r = 0; r < n; r++) {
        if (kr->replicas[r].status == MC_MP_REPLICA_DISK)
            continue;
        out->replicas[out->n_replicas] = kr->replicas[r];
        out->replicas[out->n_replicas].addr += off;
        out->replicas[out->n_replicas].size = len;
        out->n_replicas++;
    }
}

/* kr's LOCAL_DISK copy, or NULL. */
static const mc__replica_desc_t *mc__disk_copy(const mc__key_replicas_t *kr) {
    uint32_t n = kr->n_replicas < MC_MP_MAX_REPLICA_NUM ? kr->n_replicas : MC_MP_MAX_REPLICA_NUM;
    for (uint32_t r = 0; r < n; r++)
        if (kr->replicas[r].status == MC_MP_REPLICA_DISK)
            return &kr->replicas[r];
    return NULL;
}

/* Reads key's object whole from its disk copy d and copies out every range of read whose
 * want flag is set (their bounds were checked against kr->size); each gets its length or the
 * read's code. */
static void mc__ranges_from_disk(mc_store_t *s, const mc_store_range_read_t *read,
                                 const mc__key_replicas_t *kr, const mc__replica_desc_t *d,
                                 const uint8_t *want) {
    uint8_t *buf = mc__malloc(kr->size ? (size_t)kr->size : 1);
    mc_store_iov_t iov = {buf, (size_t)kr->size};
    int rc = buf ? mc__store_disk_read(s, read->key, d, &iov, 1, kr->size) : MC_ERR_INTERNAL_ERROR;
    if (rc != 0)
        MC_WARN("store: reading %s from the disk of %s for its ranges failed (%s)", read->key,
                d->segment_name, mc_store_strerror(rc));
    for (size_t j = 0; j < read->n; j++) {
        mc_store_range_t *r = &read->ranges[j];
        if (!want[j])
            continue;
        if (rc == 0) {
            memcpy(r->dst, buf + r->src_off, (size_t)r->len);
            r->result = (int64_t)r->len;
        } else {
            r->result = rc;
        }
    }
    mc__free(buf);
}

/* The code of one range before any bytes move (0: read it). */
static int64_t mc__range_check(mc_store_t *s, const mc__key_replicas_t *kr,
                               const mc_store_range_t *r) {
    if (kr->code != 0)
        return kr->code;
    if (r->len == 0 || !r->dst || r->src_off > kr->size || r->len > kr->size - r->src_off ||
        mc__store_registered_overrun(s, r->dst, (size_t)r->len))
        return MC_ERR_INVALID_PARAMS;
    return 0;
}

static int mc__batch_get_ranges_impl(mc_store_t *s, mc_store_range_read_t *reads, size_t n,
                                     int cached);

/* Keys read through cached replica lists whose ranges did not all work, or ended too late: their
 * ranges again, through the master. */
static int mc__redo_uncached(mc_store_t *s, mc_store_range_read_t *reads, size_t n,
                             const uint64_t *read_by) {
    mc_store_range_read_t *again = NULL;
    size_t m = 0;
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t worst = 0;
        if (!read_by[i])
            continue;
        for (size_t j = 0; j < reads[i].n; j++)
            if (reads[i].ranges[j].result < 0)
                worst = reads[i].ranges[j].result;
        if (mc__store_cached_read_ok(s, reads[i].key, worst, read_by[i]))
            continue;
        if (!again && !(again = mc__calloc(n, sizeof(*again))))
            return MC_ERR_INTERNAL_ERROR;
        again[m++] = reads[i]; /* the same ranges: their results are written in place */
    }
    if (m > 0)
        rc = mc__batch_get_ranges_impl(s, again, m, 0);
    mc__free(again);
    return rc;
}

/* cached: ranges may be read through this client's cached replica lists (then checked, and
 * read again through the master where that did not hold); 0: through the master only. */
static int mc__batch_get_ranges_impl(mc_store_t *s, mc_store_range_read_t *reads, size_t n,
                                     int cached) {
    mc__key_replicas_t *kr = NULL, *nkr = NULL;
    mc_store_item_t *items = NULL;
    mc_store_iov_t *iov = NULL;
    int64_t *res = NULL;
    mc_store_range_t **rng = NULL; /* the range each queued read fills */
    size_t *rkey = NULL;           /* the key each queued read belongs to */
    size_t *first = NULL;          /* per key: its ranges' index in via */
    uint8_t *via = NULL;           /* per range: to be read from the key's disk copy */
    const char **keys = NULL;
    uint64_t *read_by = NULL;
    size_t total = 0, m = 0;
    int rc = mc__store_batch_check(s, n, reads != NULL);
    if (rc != 0 || n == 0)
        return rc;
    for (size_t i = 0; i < n; i++) {
        if (reads[i].n && !reads[i].ranges)
            return MC_ERR_INVALID_PARAMS;
        total += reads[i].n;
    }
    rc = mc__store_lookup_arrays(n, &kr, &keys, &read_by);
    if (rc != 0)
        goto out;
    for (size_t i = 0; i < n; i++)
        keys[i] = reads[i].key;
    rc = cached ? mc__store_batch_lookup(s, keys, n, kr, read_by)
                : mc__store_batch_replicas(s, keys, n, kr);
    if (rc != 0)
        goto out;
    if (total > 0) {
        nkr = mc__calloc(total, sizeof(*nkr));
        items = mc__calloc(total, sizeof(*items));
        iov = mc__calloc(total, sizeof(*iov));
        res = mc__calloc(total, sizeof(*res));
        rng = mc__calloc(total, sizeof(*rng));
        rkey = mc__calloc(total, sizeof(*rkey));
        via = mc__calloc(total, sizeof(*via));
        first = mc__calloc(n, sizeof(*first));
        if (!nkr || !items || !iov || !res || !rng || !rkey || !via || !first) {
            rc = MC_ERR_INTERNAL_ERROR;
            goto out;
        }
    }
    for (size_t i = 0, at = 0; i < n; i++) {
        const mc__replica_desc_t *disk = mc__disk_copy(&kr[i]);
        if (first)
            first[i] = at;
        for (size_t j = 0; j < reads[i].n; j++, at++) {
            mc_store_range_t *r = &reads[i].ranges[j];
            r->result = mc__range_check(s, &kr[i], r);
            if (r->result != 0)
                continue;
            mc__narrow(&kr[i], r->src_off, r->len, &nkr[m]);
            if (nkr[m].n_replicas == 0 && disk) {
                via[at] = 1; /* on disk only */
                continue;
            }
            rkey[m] = i;
            iov[m].base = r->dst;
            iov[m].len = (size_t)r->len;
            items[m].key = reads[i].key;
            items[m].iov = &iov[m];
            items[m].iovcnt = 1;
            rng[m++] = r;
        }
    }
    if (m > 0)
        mc__store_batch_read(s, nkr, items, m, res);
    for (size_t k = 0; k < m; k++) {
        rng[k]->result = res[k];
        /* Every memory replica failed: the disk copy, if there is one, may still serve it. */
        if (res[k] < 0 && res[k] != MC_ERR_INVALID_PARAMS && mc__disk_copy(&kr[rkey[k]]))
            via[first[rkey[k]] + (size_t)(rng[k] - reads[rkey[k]].ranges)] = 1;
    }
    for (size_t i = 0; total > 0 && i < n; i++) {
        const mc__replica_desc_t *disk = mc__disk_copy(&kr[i]);
        int any = 0;
        for (size_t j = 0; disk && j < reads[i].n; j++)
            any |= via[first[i] + j];
        if (any)
            mc__ranges_from_disk(s, &reads[i], &kr[i], disk, via + first[i]);
    }
    /* cached lists never hold a disk copy (replica_cache.c), so what is redone here is only
     * what a cached memory location did not serve */
    if (cached)
        rc = mc__redo_uncached(s, reads, n, read_by);
out:
    mc__free(read_by);
    mc__free(first);
    mc__free(via);
    mc__free(rkey);
    mc__free(rng);
    mc__free(res);
    mc__free(iov);
    mc__free(items);
    mc__free(nkr);
    mc__free(keys);
    mc__free(kr);
    return rc;
}

int mc__direct_batch_get_ranges(mc_store_t *s, mc_store_range_read_t *reads, size_t n) {
    int rc;
    MC__STORE_HELD(s, rc, mc__batch_get_ranges_impl(s, reads, n, 1));
    return rc;
}
