/* Replaying the master's metadata log into an empty master, and writing a master's state as a
 * compacted log (persist.h).
 *
 * The replay keeps the log's final state in three tables (segments, allocated ranges, objects),
 * then builds the master from them: each live segment's allocator with exactly its allocated
 * ranges, each object with its replicas. Space that is allocated but belongs to no object (a put
 * that was still being written, an upsert's shadow, a task's targets, graveyard space a reader
 * may still hold) goes to the graveyard and comes back after the put release timeout, as it
 * would have without the restart; nothing anyone may still touch is handed out again. Restored
 * objects carry a fresh lease (readers may be in the middle of reading them), and the segments'
 * owners are known clients from now on: one that does not come back within client_ttl expires as
 * it would have. A restored segment takes no new placements until its owner is heard from. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "master/disk.h"
#include "master/master_internal.h"
#include "master/persist.h"
#include "master/restore.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/crc32.h"
#include "mooncake/common/log.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"

typedef struct mc__rseg {
    uint64_t serial;
    char name[MC_MP_MAX_SEGMENT_NAME + 1];
    uint32_t name_len;
    uint64_t base, size, epoch;
    uint8_t owner[MC_MP_CLIENT_ID_LEN];
    int live;
    uint32_t slot;
} mc__rseg_t;

typedef struct mc__ralloc {
    struct mc__ralloc *next;
    uint64_t serial, off, len;
    uint32_t handle;
    int used_by; /* 0: orphan; 1: an object holds it */
} mc__ralloc_t;

typedef struct mc__robj {
    struct mc__robj *next;
    uint64_t version, size, pin_left;
    uint8_t flags;
    uint32_t n;
    uint64_t serial[MC_MP_MAX_REPLICA_NUM], off[MC_MP_MAX_REPLICA_NUM];
    uint32_t key_len;
    uint8_t key[];
} mc__robj_t;

#define MC__RBUCKETS 65536u

typedef struct mc__replay {
    mc__rseg_t *segs;
    size_t n_segs, cap_segs;
    mc__ralloc_t **allocs; /* MC__RBUCKETS chains */
    mc__robj_t **objs;     /* MC__RBUCKETS chains, by version */
    size_t n_allocs;
    uint64_t max_version, max_serial;
    mc__master_t *m; /* disk copies go straight into its disk view (disk.h) */
} mc__replay_t;

static uint32_t mc__rb(uint64_t a, uint64_t b) {
    uint64_t h = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull) * 0xC2B2AE3D27D4EB4Full;
    return (uint32_t)(h >> 40) & (MC__RBUCKETS - 1);
}

static mc__ralloc_t **mc__ralloc_slot(mc__replay_t *r, uint64_t serial, uint64_t off) {
    mc__ralloc_t **pp = &r->allocs[mc__rb(serial, off)];
    while (*pp && !((*pp)->serial == serial && (*pp)->off == off))
        pp = &(*pp)->next;
    return pp;
}

static mc__robj_t **mc__robj_slot(mc__replay_t *r, uint64_t version) {
    mc__robj_t **pp = &r->objs[mc__rb(version, 0)];
    while (*pp && (*pp)->version != version)
        pp = &(*pp)->next;
    return pp;
}

static mc__rseg_t *mc__rseg_find(mc__replay_t *r, uint64_t serial) {
    for (size_t i = 0; i < r->n_segs; i++)
        if (r->segs[i].serial == serial && r->segs[i].live)
            return &r->segs[i];
    return NULL;
}

static const mc__rseg_t *mc__rseg_by_slot(const mc__replay_t *r, uint32_t slot) {
    for (size_t i = 0; i < r->n_segs; i++)
        if (r->segs[i].live && r->segs[i].slot == slot)
            return &r->segs[i];
    return NULL;
}

/* Applies one record; 0, or -1 when it is malformed (the replay stops there). */
static int mc__apply(mc__replay_t *r, mc_cursor_t *c) {
    uint8_t type = 0;
    uint64_t serial = 0, off = 0, len = 0, version = 0;
    if (mc__cur_u8(c, &type))
        return -1;
    switch (type) {
    case MC__R_SEG_MOUNT: {
        mc__rseg_t s;
        const uint8_t *name = NULL;
        memset(&s, 0, sizeof(s));
        if (mc__cur_u64(c, &s.serial) ||
            mc__cur_bytes(c, MC_MP_MAX_SEGMENT_NAME, &name, &s.name_len) || s.name_len == 0 ||
            mc__cur_u64(c, &s.base) || mc__cur_u64(c, &s.size) || mc__cur_u64(c, &s.epoch) ||
            mc__cur_left(c) < MC_MP_CLIENT_ID_LEN)
            return -1;
        memcpy(s.name, name, s.name_len);
        memcpy(s.owner, c->pos, MC_MP_CLIENT_ID_LEN);
        c->pos += MC_MP_CLIENT_ID_LEN;
        s.live = 1;
        if (mc__rseg_find(r, s.serial))
            return 0; /* again (a compaction's snapshot and the changes after it) */
        if (r->n_segs == r->cap_segs) {
            size_t cap = r->cap_segs ? r->cap_segs * 2 : 16;
            mc__rseg_t *p = mc__realloc(r->segs, cap * sizeof(*p));
            if (!p)
                return -1;
            r->segs = p;
            r->cap_segs = cap;
        }
        r->segs[r->n_segs++] = s;
        if (s.serial > r->max_serial)
            r->max_serial = s.serial;
        return 0;
    }
    case MC__R_SEG_DROP: {
        mc__rseg_t *s = NULL;
        if (mc__cur_u64(c, &serial))
            return -1;
        s = mc__rseg_find(r, serial);
        if (s)
            s->live = 0; /* its ranges and replicas are ignored at build */
        return 0;
    }
    case MC__R_ALLOC: {
        mc__ralloc_t **pp = NULL, *a = NULL;
        if (mc__cur_u64(c, &serial) || mc__cur_u64(c, &off) || mc__cur_u64(c, &len) || len == 0)
            return -1;
        pp = mc__ralloc_slot(r, serial, off);
        if (*pp) {
            (*pp)->len = len; /* freed and taken again without its free in the log: cannot be */
            return 0;
        }
        a = mc__calloc(1, sizeof(*a));
        if (!a)
            return -1;
        a->serial = serial;
        a->off = off;
        a->len = len;
        *pp = a;
        r->n_allocs++;
        return 0;
    }
    case MC__R_FREE: {
        mc__ralloc_t **pp = NULL, *a = NULL;
        if (mc__cur_u64(c, &serial) || mc__cur_u64(c, &off))
            return -1;
        pp = mc__ralloc_slot(r, serial, off);
        if ((a = *pp) != NULL) {
            *pp = a->next;
            mc__free(a);
            r->n_allocs--;
        }
        return 0;
    }
    case MC__R_OBJ_SET: {
        mc__robj_t **pp = NULL, *o = NULL;
        const uint8_t *key = NULL;
        uint32_t key_len = 0, n = 0;
        uint64_t size = 0, pin = 0;
        uint8_t flags = 0;
        if (mc__cur_u64(c, &version) || mc__cur_bytes(c, MC_MP_MAX_KEY, &key, &key_len) ||
            key_len == 0 || mc__cur_u64(c, &size) || mc__cur_u8(c, &flags) ||
            mc__cur_u64(c, &pin) || mc__cur_count(c, MC_MP_MAX_REPLICA_NUM, 24, &n))
            return -1;
        o = mc__calloc(1, sizeof(*o) + key_len);
        if (!o)
            return -1;
        o->version = version;
        o->size = size;
        o->flags = flags;
        o->pin_left = pin;
        o->n = n;
        o->key_len = key_len;
        memcpy(o->key, key, key_len);
        for (uint32_t i = 0; i < n; i++) {
            if (mc__cur_u64(c, &o->serial[i]) || mc__cur_u64(c, &o->off[i]) ||
                mc__cur_u64(c, &len)) {
                mc__free(o);
                return -1;
            }
        }
        pp = mc__robj_slot(r, version);
        if (*pp) { /* the same object's newer state */
            o->next = (*pp)->next;
            mc__free(*pp);
        }
        *pp = o;
        if (version > r->max_version)
            r->max_version = version;
        return 0;
    }
    case MC__R_OBJ_DEL: {
        mc__robj_t **pp = NULL, *o = NULL;
        if (mc__cur_u64(c, &version))
            return -1;
        pp = mc__robj_slot(r, version);
        if ((o = *pp) != NULL) {
            *pp = o->next;
            mc__free(o);
        }
        return 0;
    }
    case MC__R_DISK_SET: {
        const uint8_t *key = NULL;
        uint32_t key_len = 0;
        uint64_t size = 0, disk_id = 0;
        if (mc__cur_u64(c, &version) || mc__cur_bytes(c, MC_MP_MAX_KEY, &key, &key_len) ||
            key_len == 0 || mc__cur_u64(c, &size) || mc__cur_u64(c, &disk_id))
            return -1;
        if (version > r->max_version)
            r->max_version = version;
        return mc__disk_restore_set(r->m, key, key_len, version, size, disk_id) == 0 ? 0 : -1;
    }
    case MC__R_DISK_DEL: {
        const uint8_t *key = NULL;
        uint32_t key_len = 0;
        if (mc__cur_bytes(c, MC_MP_MAX_KEY, &key, &key_len) || key_len == 0)
            return -1;
        mc__disk_restore_del(r->m, key, key_len);
        return 0;
    }
    default:
        return -1;
    }
}

static int mc__alloc_cmp(const void *a, const void *b) {
    const mc__ralloc_t *x = *(mc__ralloc_t *const *)a, *y = *(mc__ralloc_t *const *)b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* Builds one live segment in a free slot, its allocator holding exactly its ranges. */
static int mc__build_segment(mc__master_t *m, mc__replay_t *r, mc__rseg_t *rs) {
    mc__segment_t *seg = mc__calloc(1, sizeof(*seg));
    mc__ralloc_t **v = NULL;
    size_t n = 0;
    uint32_t tail = 0;
    if (!seg || mc__seg_alloc_init(&seg->alloc, rs->size) != 0) {
        mc__free(seg);
        return MC_ERR_INTERNAL_ERROR;
    }
    v = mc__calloc(r->n_allocs ? r->n_allocs : 1, sizeof(*v));
    if (!v)
        goto fail;
    for (uint32_t b = 0; b < MC__RBUCKETS; b++)
        for (mc__ralloc_t *a = r->allocs[b]; a; a = a->next)
            if (a->serial == rs->serial)
                v[n++] = a;
    qsort(v, n, sizeof(*v), mc__alloc_cmp);
    for (size_t i = 0; i < n; i++) {
        v[i]->handle = tail == MC_SEG_NIL
                           ? MC_SEG_NIL
                           : mc__seg_alloc_take(&seg->alloc, &tail, v[i]->off, v[i]->len);
        if (v[i]->handle == MC_SEG_NIL) {
            MC_ERROR("master: restore: segment %s: the logged range [%llu, +%llu) does not fit; "
                     "the log is inconsistent",
                     rs->name, (unsigned long long)v[i]->off, (unsigned long long)v[i]->len);
            goto fail;
        }
    }
    mc__free(v);
    v = NULL;
    pthread_mutex_init(&seg->mu, NULL);
    memcpy(seg->name, rs->name, rs->name_len);
    seg->name_len = rs->name_len;
    seg->base = rs->base;
    seg->size = rs->size;
    seg->epoch = rs->epoch;
    seg->serial = rs->serial;
    memcpy(seg->owner, rs->owner, MC_MP_CLIENT_ID_LEN);
    if (mc__segment_restore_add(m, seg, &rs->slot) != 0) {
        pthread_mutex_destroy(&seg->mu);
        goto fail;
    }
    mc__client_touch(m, rs->owner);
    /* No placements in it until its owner is heard from (it remounts or heartbeats): an owner
     * that died while no master ran would take writes it can never serve. Nor is anything on it
     * evicted meanwhile: its objects are as acknowledged as any, and a put that finds no room
     * waits for the owners instead (the master is recovering). One that stays away expires
     * after client_ttl, as any silent client. */
    mc__segment_restored(m, seg);
    return 0;
fail:
    mc__free(v);
    mc__seg_alloc_destroy(&seg->alloc);
    mc__free(seg);
    return MC_ERR_INTERNAL_ERROR;
}

/* Builds one object from its logged state (its replicas' ranges must be allocated and free of
 * any other object); 0 when built, 1 when nothing of it is left. */
static int mc__build_object(mc__master_t *m, mc__replay_t *r, const mc__robj_t *ro, uint64_t now) {
    mc__replica_t reps[MC_MP_MAX_REPLICA_NUM];
    mc__ralloc_t *held[MC_MP_MAX_REPLICA_NUM];
    uint8_t n = 0;
    uint32_t hash = mc__key_hash(ro->key, ro->key_len);
    mc__shard_t *s = mc__shard_of(m, hash);
    mc__object_t *o = NULL, *cur = NULL;
    for (uint32_t i = 0; i < ro->n; i++) {
        mc__rseg_t *rs = mc__rseg_find(r, ro->serial[i]);
        mc__ralloc_t *a = rs ? *mc__ralloc_slot(r, ro->serial[i], ro->off[i]) : NULL;
        if (!a || a->used_by || a->handle == MC_SEG_NIL)
            continue;
        reps[n] = (mc__replica_t){rs->slot, a->handle, a->off};
        held[n++] = a;
    }
    if (n == 0)
        return 1;
    cur = mc__shard_find(s, hash, ro->key, ro->key_len);
    if (cur && cur->version > ro->version)
        return 1; /* a newer value of the key is restored already; this one's space is orphaned */
    if (cur) {
        /* an older value (an upsert's predecessor still waiting for readers): its ranges go
         * back to the orphans */
        const mc__replica_t *cr = mc__obj_reps(cur);
        for (uint8_t i = 0; i < cur->n_replicas; i++) {
            const mc__rseg_t *cs = mc__rseg_by_slot(r, cr[i].seg);
            mc__ralloc_t *a = cs ? *mc__ralloc_slot(r, cs->serial, cr[i].off) : NULL;
            if (a)
                a->used_by = 0;
        }
        mc__shard_unlink(s, cur);
        mc__gauge_objects(m, -1, -(int64_t)cur->size);
        mc__free(cur);
    }
    o = mc__object_new(ro->key, ro->key_len, hash, n);
    if (!o)
        return 1;
    memcpy(mc__obj_reps(o), reps, (size_t)n * sizeof(*reps));
    o->size = ro->size;
    o->version = ro->version;
    o->flags = (uint8_t)((ro->flags & (MC__OBJ_HARD_PIN | MC__OBJ_SOFT_PIN)) | MC__OBJ_COMPLETE);
    o->soft_pin_until = (o->flags & MC__OBJ_SOFT_PIN) ? now + ro->pin_left : 0;
    o->access_ms = now;
    o->lease_until = now + (uint64_t)m->cfg.default_kv_lease_ttl_ms;
    for (uint8_t i = 0; i < n; i++)
        held[i]->used_by = 1;
    mc__shard_insert(s, o);
    mc__gauge_objects(m, 1, (int64_t)o->size);
    return 0;
}

static void mc__replay_free(mc__replay_t *r) {
    for (uint32_t b = 0; r->allocs && b < MC__RBUCKETS; b++)
        while (r->allocs[b]) {
            mc__ralloc_t *a = r->allocs[b];
            r->allocs[b] = a->next;
            mc__free(a);
        }
    for (uint32_t b = 0; r->objs && b < MC__RBUCKETS; b++)
        while (r->objs[b]) {
            mc__robj_t *o = r->objs[b];
            r->objs[b] = o->next;
            mc__free(o);
        }
    mc__free(r->allocs);
    mc__free(r->objs);
    mc__free(r->segs);
}

static int mc__read_file(const char *path, uint8_t **out, size_t *len, char *err, size_t cap) {
    FILE *f = fopen(path, "rb");
    long n = 0;
    *out = NULL;
    if (!f || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        snprintf(err, cap, "cannot read %s", path);
        if (f)
            fclose(f);
        return MC_ERR_INVALID_PARAMS;
    }
    *out = mc__malloc((size_t)n + 1);
    if (!*out || fread(*out, 1, (size_t)n, f) != (size_t)n) {
        snprintf(err, cap, "cannot read %s", path);
        fclose(f);
        mc__free(*out);
        *out = NULL;
        return MC_ERR_INVALID_PARAMS;
    }
    fclose(f);
    *len = (size_t)n;
    return 0;
}

int mc__persist_replay(mc__master_t *m, const char *path, char *err, size_t cap) {
    uint8_t *data = NULL;
    size_t len = 0;
    int rc = mc__read_file(path, &data, &len, err, cap);
    if (rc == 0)
        rc = mc__persist_replay_buf(m, data, len, path, err, cap);
    mc__free(data);
    return rc;
}

int mc__persist_replay_buf(mc__master_t *m, const uint8_t *data, size_t len, const char *path,
                           char *err, size_t cap) {
    mc__replay_t r;
    size_t pos = 8, records = 0, orphans = 0, objects = 0;
    uint64_t now = mc__now_ms();
    int rc = 0;
    memset(&r, 0, sizeof(r));
    r.m = m;
    if (len < 8 || memcmp(data, MC__LOG_MAGIC, 8) != 0) {
        snprintf(err, cap, "%s is not a mooncake_master metadata log", path);
        return MC_ERR_INVALID_PARAMS;
    }
    r.allocs = mc__calloc(MC__RBUCKETS, sizeof(*r.allocs));
    r.objs = mc__calloc(MC__RBUCKETS, sizeof(*r.objs));
    if (!r.allocs || !r.objs) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    while (pos + 8 <= len) {
        uint32_t rlen, sum;
        mc_cursor_t c;
        rlen = sum = 0;
        for (int i = 3; i >= 0; i--) {
            rlen = (rlen << 8) | data[pos + (size_t)i];
            sum = (sum << 8) | data[pos + 4 + (size_t)i];
        }
        if (rlen == 0 && sum == 0) {
            /* The zeros written ahead of the records: the log's clean end. */
            pos = len;
            break;
        }
        if (rlen == 0 || rlen > len - pos - 8 || mc__crc32(0, data + pos + 8, rlen) != sum) {
            /* A torn tail (the crash came while this record was written) has nothing but zeros
             * after it; anything else after a bad record is a damaged log, whose later records
             * were acknowledged: refuse rather than silently start without them. */
            size_t from = pos + 8 + (rlen <= len - pos - 8 ? rlen : 0);
            for (size_t k = from; k < len; k++)
                if (data[k] != 0) {
                    snprintf(err, cap,
                             "%s is damaged at byte %zu (record %zu fails its checksum and "
                             "records follow it); move it away to start empty",
                             path, pos, records);
                    rc = MC_ERR_INVALID_PARAMS;
                    goto out;
                }
            break;
        }
        c.pos = data + pos + 8;
        c.end = c.pos + rlen;
        if (mc__apply(&r, &c) != 0 || mc__cur_left(&c) != 0) {
            snprintf(err, cap, "%s: record %zu at byte %zu is malformed", path, records, pos);
            rc = MC_ERR_INVALID_PARAMS;
            goto out;
        }
        records++;
        pos += 8 + rlen;
    }
    if (pos != len)
        MC_WARN("master: %s ends in a torn record (%zu bytes ignored): the crash came while it "
                "was being written, so it was never acknowledged",
                path, len - pos);
    for (size_t i = 0; i < r.n_segs; i++)
        if (r.segs[i].live && (rc = mc__build_segment(m, &r, &r.segs[i])) != 0) {
            snprintf(err, cap, "%s: segment %s cannot be rebuilt", path, r.segs[i].name);
            goto out;
        }
    for (uint32_t b = 0; b < MC__RBUCKETS; b++)
        for (mc__robj_t *o = r.objs[b]; o; o = o->next)
            objects += mc__build_object(m, &r, o, now) == 0;
    /* Allocated and nobody's: held until the release timeout, then reused. */
    for (uint32_t b = 0; b < MC__RBUCKETS; b++)
        for (mc__ralloc_t *a = r.allocs[b]; a; a = a->next) {
            mc__rseg_t *rs = mc__rseg_find(&r, a->serial);
            mc__object_t *g = NULL;
            if (!rs || a->used_by || a->handle == MC_SEG_NIL)
                continue;
            g = mc__object_new((const uint8_t *)"\0restored", 9, 0, 1);
            if (!g)
                continue;
            *mc__obj_reps(g) = (mc__replica_t){rs->slot, a->handle, a->off};
            g->size = a->len;
            mc__grave_add(m, g, mc__put_release_at(m, now));
            orphans++;
        }
    atomic_store(&m->next_serial, r.max_serial + 1);
    /* Past every version a writer from before the restart may still name. */
    atomic_store(&m->next_version, r.max_version + (1ull << 40));
    MC_INFO("master: restored %zu objects on %zu segments from %s (%zu records; %zu reserved "
            "ranges held until the put release timeout)",
            objects, (size_t)atomic_load(&m->n_segments), path, records, orphans);
    rc = 0;
out:
    mc__replay_free(&r);
    return rc;
}

/* --- dump --- */

static int mc__dump_obj(mc__master_t *m, mc__object_t *o, void *arg) {
    mc_buf_t *b = arg;
    size_t at = 0;
    if (!(o->flags & MC__OBJ_COMPLETE))
        return 0;
    mc__persist_record_begin(b, &at);
    mc__persist_put_obj(m, b, o, mc__now_ms());
    mc__persist_record_end(b, at);
    return 0;
}

int mc__persist_dump(mc__master_t *m, mc_buf_t *b) {
    pthread_rwlock_rdlock(&m->registry);
    for (uint32_t i = 0; i < m->n_slots; i++) {
        mc__segment_t *s = m->slots[i];
        size_t at = 0;
        if (!s)
            continue;
        mc__persist_record_begin(b, &at);
        mc__persist_put_seg(b, s);
        mc__persist_record_end(b, at);
        /* Every allocated block, in physical order from the block at offset 0 (handle 0);
         * the segment's lock keeps allocations out while its blocks are walked. */
        pthread_mutex_lock(&s->mu);
        for (uint32_t h = s->alloc.n_blocks ? 0 : MC_SEG_NIL; h != MC_SEG_NIL;
             h = s->alloc.blocks[h].next_phys) {
            const mc__seg_block_t *blk = &s->alloc.blocks[h];
            if (mc__seg_block_is_free(blk))
                continue;
            mc__persist_record_begin(b, &at);
            mc__persist_put_alloc(b, s->serial, blk->off * MC_SEG_ALIGN,
                                  mc__seg_block_size(blk) * MC_SEG_ALIGN);
            mc__persist_record_end(b, at);
        }
        pthread_mutex_unlock(&s->mu);
    }
    pthread_rwlock_unlock(&m->registry);
    mc__objects_sweep(m, mc__dump_obj, b);
    mc__disk_dump(m, b);
    return b->failed ? MC_ERR_INTERNAL_ERROR : 0;
}
