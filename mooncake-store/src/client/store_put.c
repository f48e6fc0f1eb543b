/* Puts and upserts: start at the master, WRITE into every replica, end; revoke on any failure so
 * a half-written object never becomes visible and its space comes back. A put of an existing key
 * keeps the first value; an upsert writes the new value to new space and its end replaces the
 * old one (readers see one or the other, whole). */
#include <string.h>

#include "client/direct.h"
#include "client/store_internal.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/failpoint.h"
#include "mooncake/common/log.h"
#include "mooncake/common/time.h"

static int mc__check_parts(mc_store_t *s, const mc_store_iov_t *parts, size_t nparts,
                           uint64_t *total) {
    uint64_t t = 0;
    if (nparts && !parts)
        return MC_ERR_INVALID_PARAMS;
    for (size_t i = 0; i < nparts; i++) {
        if (parts[i].len && !parts[i].base)
            return MC_ERR_INVALID_PARAMS;
        t += parts[i].len;
    }
    /* A zero-size object is refused, as the reference's master refuses it. */
    if (t == 0 || mc__store_iovs_overrun(s, parts, nparts))
        return MC_ERR_INVALID_PARAMS;
    *total = t;
    return 0;
}

/* Puts whose replica transfer failed are placed again this many times in all, so that a put
 * with a live segment that has room succeeds although a dead node is still mounted; and not
 * after MC__PUT_PLACE_MS since the put began (the default transfer timeout), so that a put that
 * met several silent nodes in a row still ends within about two transfer timeouts. */
#define MC__PUT_TRIES 3
#define MC__PUT_PLACE_MS 30000
/* mc__finish_put's answer for a non-upsert put whose bytes all landed but whose placement the
 * master no longer had at its end (OBJECT_NOT_FOUND: the segment was dropped while the bytes
 * moved, e.g. a node that stalled past client_ttl and then resumed): placed again like a failed
 * transfer. Never returned to callers. */
#define MC__PUT_PLACEMENT_GONE INT32_MIN

/* Ends (end = 1) or revokes one started put or upsert (kr: what its start gave). */
static int mc__put_finish_rpc(mc_store_t *s, int upsert, int end, const char *key,
                              const mc__key_replicas_t *kr) {
    int32_t code = 0;
    int rc = mc__master_client_batch_finish(s->master, upsert, end, 1, &key, &kr->version, &code);
    return rc ? rc : code;
}

/* Writes the parts into the replicas the start granted, then ends or revokes the put. */
static int mc__finish_put(mc_store_t *s, int upsert, const char *key, const mc_store_iov_t *parts,
                          size_t nparts, const mc__key_replicas_t *kr, uint8_t *failed) {
    int rc = mc__store_move_each(s, MC_OPCODE_WRITE, parts, nparts, kr->replicas, kr->n_replicas,
                                 failed);
    int revoke;
    if (rc == 0) {
        /* a writer that stalls between its bytes and its end (tests stop it here) */
        mc__failpoint("store_put_before_end");
        rc = mc__put_finish_rpc(s, upsert, 1, key, kr);
        /* An upsert's placement may be gone because a newer upsert replaced it: not placed
         * again, which would put the older value back on top. */
        if (rc == MC_ERR_OBJECT_NOT_FOUND && !upsert)
            return MC__PUT_PLACEMENT_GONE;
        if (rc != 0)
            MC_WARN("store: %s end of %s failed: %s", upsert ? "upsert" : "put", key,
                    mc_store_strerror(rc));
        return rc;
    }
    revoke = mc__put_finish_rpc(s, upsert, 0, key, kr);
    /* OBJECT_NOT_FOUND: the placement is gone already (its segment was dropped, say) */
    if (revoke != 0 && revoke != MC_ERR_OBJECT_NOT_FOUND)
        MC_WARN("store: revoking the %s of %s failed; the master discards it later",
                upsert ? "upsert" : "put", key);
    return rc;
}

/* Reports the replicas of kr whose segments failed as unreachable (see MC__REP_*). */
static void mc__store_report_unreachable(mc_store_t *s, const mc__key_replicas_t *kr,
                                         const uint8_t *failed) {
    const char *names[MC_MP_MAX_REPLICA_NUM];
    int32_t codes[MC_MP_MAX_REPLICA_NUM];
    size_t n = 0;
    for (uint32_t r = 0; r < kr->n_replicas && r < MC_MP_MAX_REPLICA_NUM; r++)
        if (failed[r] == MC__REP_UNREACHABLE)
            names[n++] = kr->replicas[r].segment_name;
    if (n && mc__master_client_segment_unreachable(s->master, n, names, codes) != 0)
        MC_DEBUG("store: reporting %zu unreachable segments to the master failed", n);
}

/* What a slot's commit answered, as mc__put_by_slot returns it. */
static int mc__put_slot_answer(mc_store_t *s, const mc__put_slot_t *slot, int32_t code) {
    if (code == MC_ERR_OBJECT_ALREADY_EXISTS) {
        mc__put_slot_keep(s, slot); /* the first value stays; the slot is still ours */
        return 0;
    }
    return code == MC_ERR_OBJECT_NOT_FOUND ? 1 : code;
}

/* Whether the key's object is the one the slot became: its one replica where the slot was. A
 * slot's space is no other object's while that object lives, so no other put can match. */
static int mc__put_slot_became(mc_store_t *s, const char *key, uint64_t total,
                               const mc__put_slot_t *slot) {
    const mc__replica_desc_t *d = &slot->kr.replicas[0];
    mc__key_replicas_t *kr = mc__calloc(1, sizeof(*kr));
    int yes = kr && mc__master_client_get_replica_list(s->master, key, kr) == 0 && kr->code == 0 &&
              kr->size == total && kr->n_replicas == 1 && kr->replicas[0].addr == d->addr &&
              kr->replicas[0].epoch == d->epoch &&
              strcmp(kr->replicas[0].segment_name, d->segment_name) == 0;
    mc__free(kr);
    return yes;
}

/* A forwarded put whose answer did not come (the holder died, or the master did not answer it):
 * its commit may or may not have been recorded. Giving the slot back settles it: taken back,
 * nothing was recorded and the put is placed again; already gone, the holder's commit made the
 * object, or the master lost the slot (then the key holds no object there, and the put is
 * placed again). Returns as mc__put_by_slot. */
static int mc__put_slot_settle(mc_store_t *s, const char *key, uint64_t total,
                               const mc__put_slot_t *slot) {
    uint64_t back = 0;
    int32_t code = 0;
    int rc = mc__put_slots_commit(s, 1, &key, &back, &slot->kr.version, &code);
    if (rc != 0) {
        MC_WARN("store: put of %s: its holder did not answer and the master cannot say what "
                "became of it: %s",
                key, mc_store_strerror(rc));
        return rc;
    }
    if (code != MC_ERR_OBJECT_NOT_FOUND)
        return 1;
    return mc__put_slot_became(s, key, total, slot) ? 0 : 1;
}

/* The one piece of a put of nparts parts that holds bytes, or NULL when several do. */
static const mc_store_iov_t *mc__one_piece(const mc_store_iov_t *parts, size_t nparts) {
    const mc_store_iov_t *one = NULL;
    for (size_t i = 0; i < nparts; i++) {
        if (!parts[i].len)
            continue;
        if (one)
            return NULL;
        one = &parts[i];
    }
    return one;
}

/* The put through a reserved slot (put_slots.h): the bytes into the slot, then one commit; or
 * both in one message to the slot's holder, which forwards the commit (slot_forward.h).
 * Returns 1 when the put should take the start / write / end path instead (no slot, its bytes
 * did not land, or the master lost the slot: nothing of it is visible), else the put's code. */
static int mc__put_by_slot(mc_store_t *s, const char *key, const mc_store_iov_t *parts,
                           size_t nparts, uint64_t total, const mc__replicate_config_t *wc) {
    mc__put_slot_t slot;
    uint8_t failed[MC_MP_MAX_REPLICA_NUM] = {0};
    const mc_store_iov_t *one = mc__one_piece(parts, nparts);
    uint64_t back = 0;
    int32_t code = 0;
    int rc;
    if (mc__put_slot_take(s, total, wc, &slot) != 0)
        return 1;
    /* the same stops as the start path's: a writer between its placement and its bytes ... */
    mc__failpoint("store_put_after_start");
    if (one && mc__slot_forward_fits(s, key, &slot)) {
        int how;
        /* Here the bytes and the end travel together, so this stop comes before both; the
         * holder's own stops (store_forward_*) come between them. */
        mc__failpoint("store_put_before_end");
        how = mc__slot_forward_put(s, key, one->base, total, &slot, &code);
        if (how == MC__FWD_DONE) {
            if (code == MC_ERR_OBJECT_NOT_FOUND) /* as mc__put_slots_commit does */
                mc__put_slots_release(s, 1);
            return mc__put_slot_answer(s, &slot, code);
        }
        if (how == MC__FWD_UNKNOWN) {
            /* the pools may hold more slots of that holder, and it may be gone */
            mc__put_slots_release(s, 1);
            return mc__put_slot_settle(s, key, total, &slot);
        }
        /* MC__FWD_UNUSED: nothing written; the usual write and commit */
    }
    rc = mc__store_move_each(s, MC_OPCODE_WRITE, parts, nparts, slot.kr.replicas,
                             slot.kr.n_replicas, failed);
    if (rc != 0) {
        /* Give the slot back, tell the master what we could not reach, and place the put the
         * old way, which retries and avoids those segments. */
        (void)mc__put_slots_commit(s, 1, &key, &back, &slot.kr.version, &code);
        mc__store_report_unreachable(s, &slot.kr, failed);
        /* The pools may hold more slots on that segment; each would fail the same way (after
         * a transfer timeout, for a silent node). */
        mc__put_slots_release(s, 1);
        return 1;
    }
    /* ... and between its bytes and its end */
    mc__failpoint("store_put_before_end");
    rc = mc__put_slots_commit(s, 1, &key, &total, &slot.kr.version, &code);
    if (rc != 0) {
        MC_WARN("store: put commit of %s failed: %s", key, mc_store_strerror(rc));
        return rc;
    }
    return mc__put_slot_answer(s, &slot, code);
}

static int mc__put_parts_impl(mc_store_t *s, int upsert, const char *key,
                              const mc_store_iov_t *parts, size_t nparts,
                              const mc_replicate_config_t *rc_cfg) {
    mc__replicate_config_t wc;
    mc__key_replicas_t *kr = NULL;
    uint64_t total = 0;
    uint64_t began;
    int rc = mc__store_ready(s);
    if (rc != 0)
        return rc;
    if ((rc = mc__store_check_key(key)) != 0 ||
        (rc = mc__check_parts(s, parts, nparts, &total)) != 0 ||
        (rc = mc__store_wire_config(rc_cfg, &wc)) != 0)
        return rc;
    if (!upsert && (rc = mc__put_by_slot(s, key, parts, nparts, total, &wc)) != 1)
        goto out;
    kr = mc__calloc(1, sizeof(*kr));
    if (!kr) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    began = mc__now_ms();
    for (int attempt = 1;; attempt++) {
        uint8_t failed[MC_MP_MAX_REPLICA_NUM] = {0};
        rc = mc__master_client_batch_start(s->master, upsert, 1, &key, &total, &wc, kr);
        /* a writer that stalls between its placement and its bytes (tests stop it here) */
        mc__failpoint("store_put_after_start");
        if (rc == 0)
            rc = kr->code;
        /* The key exists (or is being put): the first value stays and the put succeeds, as the
         * reference's does. KV-cache prefixes are put again all the time. */
        if (rc == MC_ERR_OBJECT_ALREADY_EXISTS && !upsert) {
            rc = 0;
            goto out;
        }
        if (rc == 0 && kr->n_replicas == 0)
            rc = MC_ERR_NO_AVAILABLE_HANDLE;
        if (rc != 0)
            goto out;
        rc = mc__finish_put(s, upsert, key, parts, nparts, kr, failed);
        if ((rc != MC_ERR_TRANSFER_FAIL && rc != MC__PUT_PLACEMENT_GONE) ||
            attempt == MC__PUT_TRIES || mc__now_ms() - began >= MC__PUT_PLACE_MS) {
            if (rc == MC__PUT_PLACEMENT_GONE) {
                rc = MC_ERR_OBJECT_NOT_FOUND;
                MC_WARN("store: put end of %s failed: %s", key, mc_store_strerror(rc));
            }
            break;
        }
        /* The put was revoked (or its placement is gone). Tell the master which segments we
         * could not reach, so that the next placement avoids them, and try again. */
        mc__store_report_unreachable(s, kr, failed);
        MC_DEBUG("store: put of %s did not land; placing it again", key);
    }
out:
    /* Our own write: no later get of ours may read the locations of the value it replaced. */
    mc__replica_cache_drop(s->rcache, key);
    mc__free(kr);
    return rc;
}

/* Writes every started put, then ends the written ones and revokes the failed ones with one RPC
 * each, instead of one RPC per key. keys[] of started items are reused for both lists. */
static int mc__batch_write_and_end(mc_store_t *s, int upsert, const mc_store_item_t *items,
                                   const size_t *idx, size_t m, const mc__key_replicas_t *kr,
                                   int *results) {
    const char **done = NULL, **failed = NULL;
    size_t *done_idx = NULL;
    int32_t *codes = NULL;
    uint64_t *done_ver = NULL, *failed_ver = NULL; /* upserts name their versions */
    size_t nd = 0, nf = 0;
    int rc = MC_ERR_INTERNAL_ERROR;

    if (m == 0)
        return 0;
    done = mc__calloc(m, sizeof(*done));
    failed = mc__calloc(m, sizeof(*failed));
    done_idx = mc__calloc(m, sizeof(*done_idx));
    codes = mc__calloc(m, sizeof(*codes));
    done_ver = mc__calloc(m, sizeof(*done_ver));
    failed_ver = mc__calloc(m, sizeof(*failed_ver));
    if (!done || !failed || !done_idx || !codes || !done_ver || !failed_ver) {
        /* Started puts stay unfinished; the master discards them after its timeout. */
        for (size_t j = 0; j < m; j++)
            results[idx[j]] = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    /* The bytes of every key in as few engine batches as possible; codes[] holds each result. */
    mc__store_batch_write(s, items, idx, m, kr, codes);
    for (size_t j = 0; j < m; j++) {
        const mc_store_item_t *it = &items[idx[j]];
        if (codes[j] == 0) {
            done[nd] = it->key;
            done_ver[nd] = kr[j].version;
            done_idx[nd++] = idx[j];
        } else if (kr[j].code == 0 && kr[j].n_replicas > 0) {
            failed_ver[nf] = kr[j].version;
            failed[nf++] = it->key;
        }
        results[idx[j]] = codes[j];
    }
    if (nf > 0 &&
        mc__master_client_batch_finish(s->master, upsert, 0, nf, failed, failed_ver, codes) != 0)
        MC_WARN("store: revoking %zu failed puts failed; the master discards them later", nf);
    rc = 0;
    if (nd > 0) {
        int r = mc__master_client_batch_finish(s->master, upsert, 1, nd, done, done_ver, codes);
        for (size_t j = 0; j < nd; j++)
            results[done_idx[j]] = r != 0 ? r : codes[j];
    }
out:
    mc__free(failed_ver);
    mc__free(done_ver);
    mc__free(codes);
    mc__free(done_idx);
    mc__free(failed);
    mc__free(done);
    return rc;
}

/* The batch's puts through reserved slots: their bytes in as few engine batches as possible,
 * then one commit for all of them (with the give-backs of slots whose bytes did not land).
 * Sets results[] of the puts it finished and leaves in keys / lens / idx (m of them on return)
 * the puts that take the start path: no slot, bytes that did not land, a slot the master lost. */
static size_t mc__batch_put_by_slots(mc_store_t *s, const mc_store_item_t *items,
                                     mc__put_batch_t *b, size_t m, int *results) {
    mc__put_slot_t *sl = mc__malloc(m * sizeof(*sl)); /* filled where has[] says */
    uint8_t *has = mc__calloc(m, 1);
    size_t *sidx = mc__calloc(m, sizeof(*sidx)), *owner = mc__calloc(m, sizeof(*owner));
    uint64_t *clen = mc__calloc(m, sizeof(*clen)), *ver = mc__calloc(m, sizeof(*ver));
    const char **ckeys = mc__calloc(m, sizeof(*ckeys));
    int32_t *codes = mc__calloc(m, sizeof(*codes));
    int *wres = mc__calloc(m, sizeof(*wres));
    size_t ns = 0, left = 0;
    int rc;
    if (!sl || !has || !sidx || !owner || !clen || !ver || !ckeys || !codes || !wres)
        goto out; /* every put takes the start path */
    mc__put_slots_take_many(s, m, b->lens, &b->wc, sl, has);
    for (size_t j = 0; j < m; j++)
        if (has[j]) {
            mc__kr_copy(&b->kr[ns], &sl[j].kr);
            ver[ns] = sl[j].kr.version;
            sidx[ns] = b->idx[j];
            owner[ns++] = j;
        }
    if (ns == 0)
        goto out;
    mc__failpoint("store_put_after_start");
    mc__store_batch_write(s, items, sidx, ns, b->kr, wres);
    for (size_t k = 0; k < ns; k++) {
        ckeys[k] = b->keys[owner[k]];
        /* 0: given back; the start path places it again, and reports the segments it cannot
         * reach when that fails too */
        clen[k] = wres[k] == 0 ? b->lens[owner[k]] : 0;
    }
    mc__failpoint("store_put_before_end");
    rc = mc__put_slots_commit(s, ns, ckeys, clen, ver, codes);
    for (size_t k = 0; k < ns; k++)
        if (wres[k] != 0) { /* see mc__put_by_slot */
            mc__put_slots_release(s, 1);
            break;
        }
    for (size_t k = 0; k < ns; k++) {
        size_t j = owner[k];
        if (wres[k] != 0 || (rc == 0 && codes[k] == MC_ERR_OBJECT_NOT_FOUND)) {
            has[j] = 0; /* the start path places it again */
            continue;
        }
        if (rc == 0 && codes[k] == MC_ERR_OBJECT_ALREADY_EXISTS)
            mc__put_slot_keep(s, &sl[j]); /* the first value stays; the slot is still ours */
        results[sidx[k]] = rc != 0 ? rc : codes[k] == MC_ERR_OBJECT_ALREADY_EXISTS ? 0 : codes[k];
    }
out:
    /* What is left takes the start path: compact the batch's arrays to it. */
    for (size_t j = 0; j < m; j++) {
        if (has && has[j])
            continue;
        b->keys[left] = b->keys[j];
        b->lens[left] = b->lens[j];
        b->idx[left++] = b->idx[j];
    }
    mc__free(wres);
    mc__free(codes);
    mc__free(ckeys);
    mc__free(ver);
    mc__free(clen);
    mc__free(owner);
    mc__free(sidx);
    mc__free(has);
    mc__free(sl);
    return left;
}

static int mc__batch_put_impl(mc_store_t *s, int upsert, const mc_store_item_t *items, size_t n,
                              const mc_replicate_config_t *rc_cfg, int *results) {
    mc__put_batch_t b;
    size_t m = 0;
    int first = 0;
    int rc = mc__put_batch_init(s, n, items && results, rc_cfg, &b);
    const char **keys = b.keys;
    uint64_t *lens = b.lens;
    size_t *idx = b.idx; /* items that passed local checks, in order */
    mc__key_replicas_t *kr = b.kr;
    if (rc != 0 || n == 0) {
        mc__put_batch_free(&b);
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        int r = mc__store_check_key(items[i].key);
        if (r == 0)
            r = mc__check_parts(s, items[i].iov, items[i].iovcnt, &lens[m]);
        results[i] = r;
        if (r != 0)
            continue;
        keys[m] = items[i].key;
        idx[m++] = i;
    }
    if (!upsert && m > 0) {
        /* our own writes, whichever path they take: see mc__put_parts_impl */
        for (size_t j = 0; j < m; j++)
            mc__replica_cache_drop(s->rcache, keys[j]);
        m = mc__batch_put_by_slots(s, items, &b, m, results);
    }
    if (m > 0) {
        rc = mc__master_client_batch_start(s->master, upsert, m, keys, lens, &b.wc, kr);
        if (rc != 0) {
            for (size_t j = 0; j < m; j++)
                results[idx[j]] = rc;
            goto out;
        }
    }
    rc = mc__batch_write_and_end(s, upsert, items, idx, m, kr, results);
    for (size_t j = 0; j < m && !upsert; j++) /* existing keys keep their first value: success */
        if (results[idx[j]] == MC_ERR_OBJECT_ALREADY_EXISTS)
            results[idx[j]] = 0;
    /* Keys whose bytes did not get through were revoked: place each again on its own, which
     * tells the master what failed and avoids it. */
    for (size_t j = 0; rc == 0 && j < m; j++) {
        const mc_store_item_t *it = &items[idx[j]];
        if (results[idx[j]] == MC_ERR_TRANSFER_FAIL)
            results[idx[j]] = mc__put_parts_impl(s, upsert, it->key, it->iov, it->iovcnt, rc_cfg);
    }
out:
    for (size_t j = 0; j < m; j++) /* our own writes: see mc__put_parts_impl */
        mc__replica_cache_drop(s->rcache, keys[j]);
    for (size_t i = 0; i < n && rc == 0 && first == 0; i++)
        first = results[i];
    mc__put_batch_free(&b);
    return rc != 0 ? rc : first;
}

/* The direct backend's entries (backend.h): each holds the store open while it runs. */

int mc__direct_put_parts(mc_store_t *s, int upsert, const char *key, const mc_store_iov_t *parts,
                         size_t nparts, const mc_replicate_config_t *rc_cfg) {
    int rc;
    MC__STORE_HELD(s, rc, mc__put_parts_impl(s, upsert, key, parts, nparts, rc_cfg));
    return rc;
}

int mc__direct_batch_put(mc_store_t *s, int upsert, const mc_store_item_t *items, size_t n,
                         const mc_replicate_config_t *rc_cfg, int *results) {
    int rc;
    MC__STORE_HELD_BATCH(s, rc, mc__batch_put_impl(s, upsert, items, n, rc_cfg, results), results,
                         n);
    return rc;
}
