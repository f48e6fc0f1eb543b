/* The master's view of the disk tier (see disk.h). */
#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "disk/file_store.h"
#include "master/disk.h"
#include "master/persist.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/log.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"
#include "proto/disk_proto.h"

/* An offload fetched but not reported this long is handed out again (the node lost the reply,
 * or its report). */
#define MC__DISK_REFETCH_MS 30000u
/* A promotion not done by then may be queued again by the next read. */
#define MC__DISK_REPROMOTE_MS 5000u
/* Work queued for one node at most (the reference's offloading_queue_limit). */
#define MC__DISK_QUEUE_LIMIT 50000u
/* The node of a detached copy (its disk is not connected; see disk.h). */
#define MC__DNODE_NONE UINT32_MAX
/* The node of a copy in the shared directory: none (every reader opens it itself). */
#define MC__DNODE_SHARED (UINT32_MAX - 1u)
/* The disk id the log records shared copies under ("SHAREDFS"). */
#define MC__DISK_ID_SHARED 0x5346444552414853ull

typedef struct mc__dentry {
    struct mc__dentry *next;
    uint32_t hash;
    uint32_t key_len;
    uint32_t node; /* MC__DNODE_NONE: detached */
    uint8_t promoting;
    uint8_t candidate; /* admitted by its reads, refused by the watermark: retried */
    uint64_t disk_id;  /* the disk the record says holds the copy */
    uint64_t size, version, hits;
    uint64_t promote_ms; /* when its promotion was queued */
    uint8_t key[];
} mc__dentry_t;

typedef struct mc__djob {
    uint8_t kind;
    uint32_t key_len;
    uint64_t size, version, addr, epoch, started_ms;
    char *key; /* NUL-terminated */
    char *seg; /* OFFLOAD only */
} mc__djob_t;

typedef struct mc__dnode {
    int used;
    uint8_t id[MC_MP_CLIENT_ID_LEN];
    char endpoint[MC_MP_MAX_SEGMENT_NAME + 1];
    uint32_t endpoint_len;
    uint64_t capacity;
    uint64_t disk_id; /* the directory's identity, across the node's restarts */
    int adopt;        /* this announce may take copies the master has no record of (disk.h) */
    int shared;       /* its tier is the shared directory (announced with SHARED) */
    mc__djob_t *q;    /* FIFO: q[head..n) */
    size_t head, n, cap;
    mc__djob_t *fly; /* offloads fetched, not yet reported */
    size_t nfly, capfly;
} mc__dnode_t;

struct mc__disk {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    mc__dnode_t *nodes;
    uint32_t n_nodes;
    mc__dentry_t **buckets;
    uint32_t mask;
    _Atomic uint64_t count; /* peeked without the lock: a master without disks pays nothing */
    uint64_t bytes, pending;
    uint64_t detached, detached_bytes; /* of count and bytes */
    uint64_t promote_bytes;            /* promotions queued, not yet seen done */
    _Atomic uint64_t candidates;       /* entries with candidate set (peeked without the lock) */
    uint64_t *seen;                    /* disk ids announced to this process (adoption, disk.h) */
    size_t n_seen, cap_seen;
    uint64_t offloads, offload_failures, disk_hits, promotions, deletes;
    /* The shared-filesystem tier: root_fs_dir/cluster_id ("" without one), and the endpoint
     * replica lists name its copies by (MC_DP_SHARED_PREFIX and the directory). */
    char fsdir[MC_MP_MAX_SEGMENT_NAME + 1];
    char shared_ep[MC_MP_MAX_SEGMENT_NAME + 1];
    uint32_t shared_ep_len;
    uint32_t shared_rr; /* the last shared node given work: deletes and promotions take turns */
};

int mc__disk_root_check(const char *root_fs_dir, const char *cluster_id, char *err, size_t cap) {
    char fsdir[MC_MP_MAX_SEGMENT_NAME + 1];
    struct stat st;
    if (!root_fs_dir || !*root_fs_dir)
        return 0;
    if (!cluster_id || !*cluster_id || strchr(cluster_id, '/') || !strcmp(cluster_id, ".") ||
        !strcmp(cluster_id, "..")) {
        snprintf(err, cap, "--root_fs_dir needs a --cluster_id that names one directory");
        return MC_ERR_INVALID_PARAMS;
    }
    if (stat(root_fs_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, cap,
                 "--root_fs_dir=%s: %s (it must be an existing directory every node "
                 "mounts: the shared filesystem)",
                 root_fs_dir, stat(root_fs_dir, &st) != 0 ? strerror(errno) : "not a directory");
        return MC_ERR_INVALID_PARAMS;
    }
    /* Replica lists name the directory with its prefix in a segment name of 255 bytes. */
    if (strlen(MC_DP_SHARED_PREFIX) + strlen(root_fs_dir) + 1 + strlen(cluster_id) >
        MC_MP_MAX_SEGMENT_NAME) {
        snprintf(err, cap, "--root_fs_dir: %s/%s is longer than %u bytes", root_fs_dir, cluster_id,
                 MC_MP_MAX_SEGMENT_NAME - (unsigned)strlen(MC_DP_SHARED_PREFIX));
        return MC_ERR_INVALID_PARAMS;
    }
    snprintf(fsdir, sizeof(fsdir), "%s/%s", root_fs_dir, cluster_id);
    {
        char why[320];
        if (mc__fstore_check(fsdir, why, sizeof(why)) != 0) {
            snprintf(err, cap, "--root_fs_dir: %s", why);
            return MC_ERR_INVALID_PARAMS;
        }
    }
    return 0;
}

int mc__disk_init(mc__master_t *m) {
    struct mc__disk *d = mc__calloc(1, sizeof(*d));
    if (!d)
        return MC_ERR_MEMORY;
    d->buckets = mc__calloc(1024, sizeof(*d->buckets));
    if (!d->buckets) {
        mc__free(d);
        return MC_ERR_MEMORY;
    }
    d->mask = 1023;
    if (m->cfg.root_fs_dir && *m->cfg.root_fs_dir) {
        char err[512];
        if (mc__disk_root_check(m->cfg.root_fs_dir, m->cfg.cluster_id, err, sizeof(err)) != 0) {
            MC_ERROR("%s", err);
            mc__free(d->buckets);
            mc__free(d);
            return MC_ERR_INVALID_PARAMS;
        }
        snprintf(d->fsdir, sizeof(d->fsdir), "%s/%s", m->cfg.root_fs_dir, m->cfg.cluster_id);
        d->shared_ep_len = (uint32_t)snprintf(d->shared_ep, sizeof(d->shared_ep), "%s%s",
                                              MC_DP_SHARED_PREFIX, d->fsdir);
    }
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    m->disk = d;
    return 0;
}

static void mc__djob_free(mc__djob_t *j) {
    mc__free(j->key);
    mc__free(j->seg);
}

static void mc__dnode_clear(mc__dnode_t *n) {
    for (size_t i = n->head; i < n->n; i++)
        mc__djob_free(&n->q[i]);
    for (size_t i = 0; i < n->nfly; i++)
        mc__djob_free(&n->fly[i]);
    mc__free(n->q);
    mc__free(n->fly);
    memset(n, 0, sizeof(*n));
}

void mc__disk_destroy(mc__master_t *m) {
    struct mc__disk *d = m->disk;
    if (!d)
        return;
    for (uint32_t b = 0; b <= d->mask; b++) {
        mc__dentry_t *e = d->buckets[b];
        while (e) {
            mc__dentry_t *next = e->next;
            mc__free(e);
            e = next;
        }
    }
    for (uint32_t i = 0; i < d->n_nodes; i++)
        mc__dnode_clear(&d->nodes[i]);
    mc__free(d->nodes);
    mc__free(d->buckets);
    mc__free(d->seen);
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
    mc__free(d);
    m->disk = NULL;
}

/* --- entries (d->mu held) --- */

static mc__dentry_t **mc__dlink(struct mc__disk *d, const uint8_t *key, uint32_t len,
                                uint32_t hash) {
    mc__dentry_t **pp = &d->buckets[hash & d->mask];
    while (*pp &&
           !((*pp)->hash == hash && (*pp)->key_len == len && memcmp((*pp)->key, key, len) == 0))
        pp = &(*pp)->next;
    return pp;
}

static void mc__dgrow(struct mc__disk *d) {
    uint32_t nb = (d->mask + 1) * 2;
    mc__dentry_t **nbk = NULL;
    if (d->count <= (uint64_t)(d->mask + 1) * 2 || nb > (1u << 26))
        return;
    nbk = mc__calloc(nb, sizeof(*nbk));
    if (!nbk)
        return; /* longer chains, still correct */
    for (uint32_t b = 0; b <= d->mask; b++) {
        mc__dentry_t *e = d->buckets[b];
        while (e) {
            mc__dentry_t *next = e->next;
            e->next = nbk[e->hash & (nb - 1)];
            nbk[e->hash & (nb - 1)] = e;
            e = next;
        }
    }
    mc__free(d->buckets);
    d->buckets = nbk;
    d->mask = nb - 1;
}

/* Inserts a copy (node MC__DNODE_NONE: detached) without logging it. */
static mc__dentry_t *mc__dinsert_raw(struct mc__disk *d, const uint8_t *key, uint32_t len,
                                     uint32_t hash, uint32_t node, uint64_t disk_id, uint64_t size,
                                     uint64_t version) {
    mc__dentry_t *e = mc__calloc(1, sizeof(*e) + len);
    if (!e)
        return NULL;
    e->hash = hash;
    e->key_len = len;
    e->node = node;
    e->disk_id = disk_id;
    e->size = size;
    e->version = version;
    memcpy(e->key, key, len);
    e->next = d->buckets[hash & d->mask];
    d->buckets[hash & d->mask] = e;
    d->count++;
    d->bytes += size;
    if (node == MC__DNODE_NONE) {
        d->detached++;
        d->detached_bytes += size;
    }
    mc__dgrow(d);
    return e;
}

/* A new copy on a connected node, recorded in the log before the reply that makes it count. */
static mc__dentry_t *mc__dinsert(mc__master_t *m, const uint8_t *key, uint32_t len, uint32_t hash,
                                 uint32_t node, uint64_t size, uint64_t version) {
    struct mc__disk *d = m->disk;
    int shared = d->nodes[node].shared;
    mc__dentry_t *e =
        mc__dinsert_raw(d, key, len, hash, shared ? MC__DNODE_SHARED : node,
                        shared ? MC__DISK_ID_SHARED : d->nodes[node].disk_id, size, version);
    if (e) {
        mc__persist_disk_set(m, key, len, version, size, e->disk_id);
        mc__kv_event(m, MC__KV_STORED, key, len, "disk");
    }
    return e;
}

/* A promotion of e is over (done, failed, or e goes). */
static void mc__dpromote_end(struct mc__disk *d, mc__dentry_t *e) {
    if (!e->promoting)
        return;
    e->promoting = 0;
    d->promote_bytes -= e->size;
}

static void mc__dcandidate_end(struct mc__disk *d, mc__dentry_t *e) {
    if (!e->candidate)
        return;
    e->candidate = 0;
    d->candidates--;
}

static void mc__dunlink_raw(struct mc__disk *d, mc__dentry_t **pp) {
    mc__dentry_t *e = *pp;
    mc__dpromote_end(d, e);
    mc__dcandidate_end(d, e);
    *pp = e->next;
    d->count--;
    d->bytes -= e->size;
    if (e->node == MC__DNODE_NONE) {
        d->detached--;
        d->detached_bytes -= e->size;
    }
    mc__free(e);
}

/* Forgets a copy for good: the log says no disk holds key any more. */
static void mc__dunlink(mc__master_t *m, mc__dentry_t **pp) {
    mc__persist_disk_del(m, (*pp)->key, (*pp)->key_len);
    mc__kv_event(m, MC__KV_REMOVED, (*pp)->key, (*pp)->key_len, "disk");
    mc__dunlink_raw(m->disk, pp);
}

static void mc__ddetach(struct mc__disk *d, mc__dentry_t *e) {
    if (e->node == MC__DNODE_NONE)
        return;
    e->node = MC__DNODE_NONE;
    mc__dpromote_end(d, e);
    mc__dcandidate_end(d, e);
    d->detached++;
    d->detached_bytes += e->size;
}

static void mc__dattach(struct mc__disk *d, mc__dentry_t *e, uint32_t node) {
    if (e->node == MC__DNODE_NONE) {
        d->detached--;
        d->detached_bytes -= e->size;
    }
    e->node = node;
}

/* Whether a disk id was announced to this process before; records it. */
static int mc__dseen(struct mc__disk *d, uint64_t disk_id) {
    for (size_t i = 0; i < d->n_seen; i++)
        if (d->seen[i] == disk_id)
            return 1;
    if (d->n_seen == d->cap_seen) {
        size_t cap = d->cap_seen ? d->cap_seen * 2 : 16;
        uint64_t *p = mc__realloc(d->seen, cap * sizeof(*p));
        if (!p)
            return 1; /* not adopting is the safe side */
        d->seen = p;
        d->cap_seen = cap;
    }
    d->seen[d->n_seen++] = disk_id;
    return 0;
}

/* What a node's copies are recorded under: the node, or the shared directory. */
static uint32_t mc__dslot(const struct mc__disk *d, uint32_t node) {
    return d->nodes[node].shared ? MC__DNODE_SHARED : node;
}

/* The node that does the work (delete, promote) of a copy recorded under slot: the node itself,
 * or, for a shared copy, the connected shared nodes in turn; -1 when there is none. */
static int mc__dworker(struct mc__disk *d, uint32_t slot) {
    if (slot != MC__DNODE_SHARED)
        return slot == MC__DNODE_NONE ? -1 : (int)slot;
    for (uint32_t k = 1; k <= d->n_nodes; k++) {
        uint32_t i = (d->shared_rr + k) % d->n_nodes;
        if (d->nodes[i].used && d->nodes[i].shared) {
            d->shared_rr = i;
            return (int)i;
        }
    }
    return -1;
}

static int mc__dnode_of(struct mc__disk *d, const uint8_t *id) {
    for (uint32_t i = 0; i < d->n_nodes; i++)
        if (d->nodes[i].used && memcmp(d->nodes[i].id, id, MC_MP_CLIENT_ID_LEN) == 0)
            return (int)i;
    return -1;
}

/* Makes room for one more job at the end of n's queue: 0 or -1. */
static int mc__dq_room(mc__dnode_t *n) {
    if (n->head > 0 && n->n == n->cap) {
        memmove(n->q, n->q + n->head, (n->n - n->head) * sizeof(*n->q));
        n->n -= n->head;
        n->head = 0;
    }
    if (n->n == n->cap) {
        size_t cap = n->cap ? n->cap * 2 : 64;
        mc__djob_t *p = mc__realloc(n->q, cap * sizeof(*p));
        if (!p)
            return -1;
        n->q = p;
        n->cap = cap;
    }
    return 0;
}

static int mc__dq_append(mc__dnode_t *n, const mc__djob_t *j) {
    if (mc__dq_room(n) != 0)
        return -1;
    n->q[n->n++] = *j;
    return 0;
}

/* Queues a job; 0, or -1 when the queue is full or memory ran out (the work is not done: an
 * offload leaves the object in memory only, a delete leaves dead bytes the node's own LRU and
 * a later announce reclaim). */
static int mc__dpush(struct mc__disk *d, uint32_t node, uint8_t kind, const uint8_t *key,
                     uint32_t len, uint64_t size, uint64_t version, const char *seg, uint64_t addr,
                     uint64_t epoch) {
    mc__dnode_t *n = &d->nodes[node];
    mc__djob_t *j = NULL;
    if (n->n - n->head >= MC__DISK_QUEUE_LIMIT || mc__dq_room(n) != 0)
        return -1;
    j = &n->q[n->n];
    memset(j, 0, sizeof(*j));
    j->key = mc__strndup((const char *)key, len);
    j->seg = seg ? mc__strndup(seg, strlen(seg)) : NULL;
    if (!j->key || (seg && !j->seg)) {
        mc__djob_free(j);
        return -1;
    }
    j->kind = kind;
    j->key_len = len;
    j->size = size;
    j->version = version;
    j->addr = addr;
    j->epoch = epoch;
    n->n++;
    if (kind == MC_DP_JOB_OFFLOAD)
        d->pending++;
    return 0;
}

/* The record goes first (logged): a DELETE that never reaches the node (it is down, the queue
 * is full, the master stops before the node fetches it) cannot bring the copy back, since the
 * node's announce finds no record of it. */
static void mc__dforget_link(mc__master_t *m, mc__dentry_t **pp) {
    struct mc__disk *d = m->disk;
    mc__dentry_t *e = *pp;
    int w = mc__dworker(d, e->node);
    if (w >= 0 && mc__dpush(d, (uint32_t)w, MC_DP_JOB_DELETE, e->key, e->key_len, e->size,
                            e->version, NULL, 0, 0) == 0)
        d->deletes++;
    mc__dunlink(m, pp);
}

/* --- called by the object paths --- */

/* The reference's watermark gate: a read admits a promotion only while memory, counting the
 * promotions already queued, is under the eviction high watermark. Promoting into a full pool
 * would only evict other objects, so a burst of reads of many disk objects (one
 * batch_get_replica_desc of them all) would churn memory instead of keeping any of them there.
 * A read refused here leaves the object a *candidate*, which the monitor promotes later
 * (mc__disk_promote_retry) only when the promotion itself fits under the watermark (extra = its
 * size): a retry never makes eviction run, so candidates cannot push each other (or the object
 * a read just promoted) out. With d->mu held. */
static int mc__promote_fits(mc__master_t *m, uint64_t extra) {
    double cap = (double)atomic_load(&m->capacity_bytes);
    double used = (double)atomic_load(&m->used_bytes);
    return used + (double)m->disk->promote_bytes + (double)extra <
           m->cfg.eviction_high_watermark_ratio * cap;
}

/* Queues e's promotion when memory has room by the gate above (retry: the monitor's, e's size
 * counted); else e stays a candidate. With d->mu held (and e's shard: e is not in memory). */
static void mc__dpromote(mc__master_t *m, mc__dentry_t *e, uint64_t now, int retry) {
    struct mc__disk *d = m->disk;
    int w = mc__dworker(d, e->node);
    if (w < 0)
        return; /* no node to promote a shared copy now: a later read tries again */
    if (!mc__promote_fits(m, retry ? e->size : 0)) {
        if (!e->candidate) {
            e->candidate = 1;
            d->candidates++;
        }
        return;
    }
    if (mc__dpush(d, (uint32_t)w, MC_DP_JOB_PROMOTE, e->key, e->key_len, e->size, e->version, NULL,
                  0, 0) != 0)
        return; /* the node's queue is full: a later read tries again */
    mc__dcandidate_end(d, e);
    e->promoting = 1;
    e->promote_ms = now;
    d->promote_bytes += e->size;
}

int mc__disk_find(mc__master_t *m, const uint8_t *key, uint32_t len, uint32_t hash, int get,
                  int in_memory, mc__disk_hit_t *hit) {
    struct mc__disk *d = m->disk;
    mc__dentry_t *e = NULL;
    if (!d || d->count == 0)
        return 0; /* a racy peek: a master without disk nodes pays nothing */
    pthread_mutex_lock(&d->mu);
    e = *mc__dlink(d, key, len, hash);
    if (e && e->node == MC__DNODE_NONE)
        e = NULL; /* its disk is not connected: nothing to read it from */
    if (e) {
        if (hit && e->node == MC__DNODE_SHARED) {
            memcpy(hit->endpoint, d->shared_ep, d->shared_ep_len + 1);
            hit->endpoint_len = d->shared_ep_len;
        } else if (hit) {
            mc__dnode_t *n = &d->nodes[e->node];
            memcpy(hit->endpoint, n->endpoint, n->endpoint_len + 1);
            hit->endpoint_len = n->endpoint_len;
        }
        if (hit) {
            hit->size = e->size;
            hit->version = e->version;
        }
        if (get) {
            e->hits++;
            if (!in_memory)
                d->disk_hits++;
            uint64_t now = mc__now_ms();
            /* A promotion queued long ago and never seen done failed (no room, the node's
             * queue was full): this read may admit it again. */
            if (e->promoting && e->promote_ms + MC__DISK_REPROMOTE_MS <= now)
                mc__dpromote_end(d, e);
            if (!in_memory && m->cfg.promotion_on_hit && !e->promoting &&
                e->hits >= (uint64_t)m->cfg.promotion_admission_threshold)
                mc__dpromote(m, e, now, 0);
        }
    }
    pthread_mutex_unlock(&d->mu);
    return e != NULL;
}

int mc__disk_forget(mc__master_t *m, const uint8_t *key, uint32_t len, uint32_t hash) {
    struct mc__disk *d = m->disk;
    mc__dentry_t **pp = NULL;
    int found = 0;
    if (!d || d->count == 0)
        return 0;
    pthread_mutex_lock(&d->mu);
    pp = mc__dlink(d, key, len, hash);
    if (*pp) {
        mc__dforget_link(m, pp);
        found = 1;
    }
    pthread_mutex_unlock(&d->mu);
    return found;
}

/* The owner, name, base and epoch of a registry slot's live segment: 0, or -1 when gone. */
static int mc__slot_info(mc__master_t *m, uint32_t slot, uint8_t *owner, char *name, uint64_t *base,
                         uint64_t *epoch) {
    int rc = -1;
    pthread_rwlock_rdlock(&m->registry);
    if (slot < m->n_slots && m->slots[slot] && !m->slots[slot]->dying) {
        mc__segment_t *s = m->slots[slot];
        memcpy(owner, s->owner, MC_MP_CLIENT_ID_LEN);
        memcpy(name, s->name, s->name_len);
        name[s->name_len] = '\0';
        *base = s->base;
        *epoch = s->epoch;
        rc = 0;
    }
    pthread_rwlock_unlock(&m->registry);
    return rc;
}

/* Queues o's offload to the first node with a disk that holds one of its replicas: 1 when
 * queued (o is then unevictable until that node reports). */
static int mc__queue_offload(mc__master_t *m, mc__object_t *o) {
    struct mc__disk *d = m->disk;
    const mc__replica_t *reps = mc__obj_reps(o);
    if (!d || d->n_nodes == 0 || (o->flags & MC__OBJ_OFFLOAD_PENDING) ||
        memchr(o->data, 0, o->key_len)) /* upsert shadows: never offloaded */
        return 0;
    for (uint8_t i = 0; i < o->n_replicas; i++) {
        uint8_t owner[MC_MP_CLIENT_ID_LEN];
        char name[MC_MP_MAX_SEGMENT_NAME + 1];
        uint64_t base = 0, epoch = 0;
        int node, queued = 0;
        if (mc__slot_info(m, reps[i].seg, owner, name, &base, &epoch) != 0)
            continue;
        pthread_mutex_lock(&d->mu);
        node = mc__dnode_of(d, owner);
        if (node >= 0 && mc__dpush(d, (uint32_t)node, MC_DP_JOB_OFFLOAD, o->data, o->key_len,
                                   o->size, o->version, name, base + reps[i].off, epoch) == 0)
            queued = 1;
        pthread_mutex_unlock(&d->mu);
        if (queued) {
            o->flags |= MC__OBJ_OFFLOAD_PENDING;
            return 1;
        }
    }
    return 0;
}

int mc__disk_offloading(const mc__master_t *m) {
    return m->disk && (m->cfg.enable_offload || m->disk->fsdir[0]);
}

void mc__disk_on_complete(mc__master_t *m, mc__object_t *o) {
    struct mc__disk *d = m->disk;
    if (!d)
        return;
    if (d->count) {
        pthread_mutex_lock(&d->mu);
        mc__dentry_t **pp = mc__dlink(d, o->data, o->key_len, o->hash);
        if (*pp && (o->flags & MC__OBJ_PROMOTED)) {
            mc__dpromote_end(d, *pp);
            d->promotions++;
        } else if (*pp) {
            mc__dforget_link(m, pp); /* a new value: the disk holds the old one */
        }
        pthread_mutex_unlock(&d->mu);
    }
    if (mc__disk_offloading(m) && !m->cfg.offload_on_evict && !(o->flags & MC__OBJ_PROMOTED))
        mc__queue_offload(m, o);
}

int mc__disk_evict_offload(mc__master_t *m, mc__object_t *o) {
    if (!m->disk || !mc__disk_offloading(m) || !m->cfg.offload_on_evict ||
        (o->flags & MC__OBJ_PROMOTED) || mc__disk_find(m, o->data, o->key_len, o->hash, 0, 1, NULL))
        return 0;
    return mc__queue_offload(m, o);
}

uint64_t mc__disk_pending(mc__master_t *m) {
    struct mc__disk *d = m->disk;
    uint64_t n = 0;
    if (!d)
        return 0;
    pthread_mutex_lock(&d->mu);
    n = d->pending;
    pthread_mutex_unlock(&d->mu);
    return n;
}

void mc__disk_wait(mc__master_t *m, uint64_t timeout_ms) {
    struct mc__disk *d = m->disk;
    struct timespec ts;
    if (!d)
        return;
    ts = mc__realtime_after_ms(timeout_ms);
    pthread_mutex_lock(&d->mu);
    if (d->pending)
        pthread_cond_timedwait(&d->cv, &d->mu, &ts);
    pthread_mutex_unlock(&d->mu);
}

/* A key to look at again after d->mu is released. */
typedef struct mc__dkey {
    uint8_t *key;
    uint32_t len, hash;
    uint64_t version;
} mc__dkey_t;

typedef struct mc__dkeys {
    mc__dkey_t *v;
    size_t n, cap;
} mc__dkeys_t;

static void mc__dkeys_add(mc__dkeys_t *k, const uint8_t *key, uint32_t len, uint32_t hash,
                          uint64_t version) {
    uint8_t *p = NULL;
    if (k->n == k->cap) {
        size_t cap = k->cap ? k->cap * 2 : 64;
        mc__dkey_t *v = mc__realloc(k->v, cap * sizeof(*v));
        if (!v)
            return;
        k->v = v;
        k->cap = cap;
    }
    p = mc__malloc(len ? len : 1);
    if (!p)
        return;
    memcpy(p, key, len);
    k->v[k->n++] = (mc__dkey_t){p, len, hash, version};
}

static void mc__dkeys_free(mc__dkeys_t *k) {
    for (size_t i = 0; i < k->n; i++)
        mc__free(k->v[i].key);
    mc__free(k->v);
}

/* With d->mu held: drops a node's queued and in-flight work; the offloads' keys go to keys,
 * whose objects must lose their pending mark. */
static void mc__dnode_drop_work(struct mc__disk *d, mc__dnode_t *n, mc__dkeys_t *keys) {
    for (size_t i = n->head; i < n->n; i++) {
        mc__djob_t *j = &n->q[i];
        if (j->kind == MC_DP_JOB_OFFLOAD) {
            d->pending--;
            mc__dkeys_add(keys, (const uint8_t *)j->key, j->key_len,
                          mc__key_hash((const uint8_t *)j->key, j->key_len), j->version);
        }
        mc__djob_free(j);
    }
    for (size_t i = 0; i < n->nfly; i++) {
        mc__djob_t *j = &n->fly[i];
        d->pending--;
        mc__dkeys_add(keys, (const uint8_t *)j->key, j->key_len,
                      mc__key_hash((const uint8_t *)j->key, j->key_len), j->version);
        mc__djob_free(j);
    }
    n->head = n->n = n->nfly = 0;
}

/* With d->mu held: detaches every copy of node (no delete work: the node itself is gone or
 * about to say what it holds; its records stay, for its announce to be checked against). */
static void mc__dnode_detach_entries(struct mc__disk *d, uint32_t node) {
    for (uint32_t b = 0; b <= d->mask; b++)
        for (mc__dentry_t *e = d->buckets[b]; e; e = e->next)
            if (e->node == node)
                mc__ddetach(d, e);
}

/* With d->mu held, at the end of a disk's announce: the copies of that disk still detached are
 * not on it any more (lost, torn, failed their checksum): their records go. */
static void mc__ddrop_unannounced(mc__master_t *m, uint64_t disk_id) {
    struct mc__disk *d = m->disk;
    for (uint32_t b = 0; b <= d->mask; b++) {
        mc__dentry_t **pp = &d->buckets[b];
        while (*pp) {
            if ((*pp)->node == MC__DNODE_NONE && (*pp)->disk_id == disk_id)
                mc__dunlink(m, pp);
            else
                pp = &(*pp)->next;
        }
    }
}

/* Calls fn for each of the keys gathered under d->mu, now with that lock dropped and the key's
 * shard locked instead (the lock order is shard, then disk), with its object in memory or NULL. */
typedef void (*mc__dkey_fn)(mc__master_t *m, const mc__dkey_t *k, mc__object_t *o, void *arg);

static void mc__dkeys_each(mc__master_t *m, const mc__dkeys_t *keys, mc__dkey_fn fn, void *arg) {
    for (size_t i = 0; i < keys->n; i++) {
        const mc__dkey_t *k = &keys->v[i];
        mc__shard_t *s = mc__shard_of(m, k->hash);
        pthread_mutex_lock(&s->mu);
        fn(m, k, mc__shard_find(s, k->hash, k->key, k->len), arg);
        pthread_mutex_unlock(&s->mu);
    }
}

static void mc__unmark_one(mc__master_t *m, const mc__dkey_t *k, mc__object_t *o, void *arg) {
    (void)m;
    (void)arg;
    if (o && o->version == k->version)
        o->flags &= (uint8_t)~MC__OBJ_OFFLOAD_PENDING;
}

static void mc__unmark_pending(mc__master_t *m, const mc__dkeys_t *keys) {
    mc__dkeys_each(m, keys, mc__unmark_one, NULL);
}

/* The node of client id is gone (left, expired, or took its disk off: why, for the log). */
static void mc__disk_node_gone(mc__master_t *m, const uint8_t *id, const char *why) {
    struct mc__disk *d = m->disk;
    mc__dkeys_t keys = {NULL, 0, 0};
    int node;
    if (!d)
        return;
    pthread_mutex_lock(&d->mu);
    node = mc__dnode_of(d, id);
    if (node >= 0) {
        mc__dnode_drop_work(d, &d->nodes[node], &keys);
        mc__dnode_detach_entries(d, (uint32_t)node);
        MC_INFO("disk tier: the storage node at %s %s; its disk copies are not served until it "
                "announces them again",
                d->nodes[node].endpoint[0] ? d->nodes[node].endpoint : "the shared directory", why);
        mc__dnode_clear(&d->nodes[node]);
        pthread_cond_broadcast(&d->cv);
    }
    pthread_mutex_unlock(&d->mu);
    mc__unmark_pending(m, &keys);
    mc__dkeys_free(&keys);
}

void mc__disk_client_gone(mc__master_t *m, const uint8_t *id) {
    mc__disk_node_gone(m, id, "left");
}

static void mc__remove_one(mc__master_t *m, const mc__dkey_t *k, mc__object_t *o, void *arg) {
    /* Counted here only when the disk holds the object's last copy. */
    if (mc__disk_forget(m, k->key, k->len, k->hash) && !(o && (o->flags & MC__OBJ_COMPLETE)))
        ++*(int64_t *)arg;
}

int64_t mc__disk_remove_all(mc__master_t *m, const void *re) {
    struct mc__disk *d = m->disk;
    mc__dkeys_t keys = {NULL, 0, 0};
    char *text = NULL;
    int64_t removed = 0;
    if (!d || d->count == 0)
        return 0;
    text = mc__malloc(MC_MP_MAX_KEY + 1);
    if (!text)
        return 0;
    pthread_mutex_lock(&d->mu);
    for (uint32_t b = 0; b <= d->mask; b++) {
        for (mc__dentry_t *e = d->buckets[b]; e; e = e->next) {
            memcpy(text, e->key, e->key_len);
            text[e->key_len] = '\0';
            if (!re || regexec((const regex_t *)re, text, 0, NULL, 0) == 0)
                mc__dkeys_add(&keys, e->key, e->key_len, e->hash, e->version);
        }
    }
    pthread_mutex_unlock(&d->mu);
    mc__dkeys_each(m, &keys, mc__remove_one, &removed);
    mc__dkeys_free(&keys);
    mc__free(text);
    return removed;
}

/* --- requests --- */

int mc__disk_announce(mc__master_t *m, const mc__mp_request_t *r, int32_t *codes) {
    struct mc__disk *d = m->disk;
    mc__dkeys_t keys = {NULL, 0, 0};
    int drop = (r->mount_flags & MC_DP_ANNOUNCE_DROP) != 0;
    int shared = (r->mount_flags & MC_DP_ANNOUNCE_SHARED) != 0;
    int node;
    uint32_t slot;
    if (!d)
        return MC_ERR_INTERNAL_ERROR;
    if (r->mount_flags & MC_DP_ANNOUNCE_LEAVE) {
        /* unmount_local_disk_segment: as if the node left; a node we do not know is done. */
        if (r->n_keys != 0 || (r->mount_flags & ~(MC_DP_ANNOUNCE_LEAVE | MC_DP_ANNOUNCE_SHARED)))
            return MC_ERR_INVALID_PARAMS;
        mc__disk_node_gone(m, r->client_id, "took its disk off the master");
        return 0;
    }
    if (shared && !d->fsdir[0])
        return MC_ERR_INVALID_PARAMS; /* this master has no shared directory (--root_fs_dir) */
    if (!drop && !shared && r->segment_name.len == 0)
        return MC_ERR_INVALID_PARAMS; /* readers could not reach the copies */
    pthread_mutex_lock(&d->mu);
    node = mc__dnode_of(d, r->client_id);
    if (!drop && !shared && r->base != 0) {
        /* The same directory under another (older) client id: the node restarted before its
         * old self expired. That self is gone; its copies are what this announce says. */
        for (uint32_t i = 0; i < d->n_nodes; i++) {
            if (d->nodes[i].used && (int)i != node && d->nodes[i].disk_id == r->base) {
                mc__dnode_drop_work(d, &d->nodes[i], &keys);
                mc__dnode_detach_entries(d, i);
                mc__dnode_clear(&d->nodes[i]);
                MC_INFO("disk tier: a restarted storage node replaces its old self");
            }
        }
    }
    if (node < 0 && !drop) {
        uint32_t i = 0;
        while (i < d->n_nodes && d->nodes[i].used)
            i++;
        if (i == d->n_nodes) {
            mc__dnode_t *p = mc__realloc(d->nodes, (d->n_nodes + 1) * sizeof(*p));
            if (!p) {
                pthread_mutex_unlock(&d->mu);
                return MC_ERR_MEMORY;
            }
            d->nodes = p;
            memset(&d->nodes[d->n_nodes++], 0, sizeof(*p));
        }
        d->nodes[i].used = 1;
        memcpy(d->nodes[i].id, r->client_id, MC_MP_CLIENT_ID_LEN);
        node = (int)i;
        MC_INFO("disk tier: storage node at %.*s announced (%llu bytes of disk)",
                (int)r->segment_name.len, (const char *)r->segment_name.p,
                (unsigned long long)r->size);
    }
    if (node < 0) {
        pthread_mutex_unlock(&d->mu);
        for (uint32_t i = 0; i < r->n_keys; i++)
            codes[i] = MC_ERR_CLIENT_NOT_FOUND;
        return 0;
    }
    if (!drop) {
        mc__dnode_t *n = &d->nodes[node];
        memcpy(n->endpoint, r->segment_name.p, r->segment_name.len);
        n->endpoint[r->segment_name.len] = '\0';
        n->endpoint_len = r->segment_name.len;
        n->capacity = r->size;
        n->disk_id = shared ? 0 : r->base;
        n->shared = shared;
    }
    if (r->mount_flags & MC_DP_ANNOUNCE_RESET) {
        mc__dnode_t *n = &d->nodes[node];
        mc__dnode_drop_work(d, n, &keys);
        mc__dnode_detach_entries(d, (uint32_t)node);
        /* A master with a log holds every disk to its records; one without adopts a disk it
         * meets for the first time (disk.h). */
        n->adopt = !m->persist && (n->shared ? !mc__dseen(d, MC__DISK_ID_SHARED)
                                             : (!mc__dseen(d, n->disk_id) || n->disk_id == 0));
        pthread_cond_broadcast(&d->cv);
    }
    pthread_mutex_unlock(&d->mu);
    mc__unmark_pending(m, &keys);
    mc__dkeys_free(&keys);

    pthread_mutex_lock(&d->mu);
    slot = mc__dslot(d, (uint32_t)node);
    pthread_mutex_unlock(&d->mu);
    for (uint32_t i = 0; i < r->n_keys; i++) {
        const mc__mp_str_t *k = &r->keys[i];
        uint32_t hash = mc__key_hash(k->p, k->len);
        mc__shard_t *s = mc__shard_of(m, hash);
        mc__object_t *o = NULL;
        mc__dentry_t **pp = NULL, *e = NULL;
        mc__dnode_t *n = NULL;
        pthread_mutex_lock(&s->mu);
        o = drop ? NULL : mc__shard_find(s, hash, k->p, k->len);
        pthread_mutex_lock(&d->mu);
        n = &d->nodes[node];
        pp = mc__dlink(d, k->p, k->len, hash);
        e = *pp;
        if (drop) {
            codes[i] = MC_ERR_OBJECT_NOT_FOUND;
            if (e && e->node == slot) {
                mc__dunlink(m, pp);
                codes[i] = 0;
            }
        } else if (memchr(k->p, 0, k->len)) {
            codes[i] = MC_ERR_INVALID_KEY;
        } else if (e && e->node == slot) {
            /* Announced again without a RESET (or by another node of the shared directory): the
             * same copy. */
            if (e->size != r->value_lens[i]) {
                mc__dpromote_end(d, e); /* its bytes are counted by the old size */
                d->bytes = d->bytes - e->size + r->value_lens[i];
                e->size = r->value_lens[i];
                mc__persist_disk_set(m, e->key, e->key_len, e->version, e->size, e->disk_id);
            }
            codes[i] = 0;
        } else if (e && e->node == MC__DNODE_NONE && e->disk_id == n->disk_id &&
                   e->size == r->value_lens[i]) {
            /* The copy the record names: this disk's, of the value the master acknowledged
             * last for the key (in memory too, or on disk only). */
            mc__dattach(d, e, (uint32_t)node);
            codes[i] = 0;
        } else if (e) {
            /* Another disk holds the recorded copy (connected or not), or this one's record
             * names another size: this copy is stale. */
            codes[i] = MC_ERR_OBJECT_ALREADY_EXISTS;
        } else if (o) {
            /* The master holds a value this disk has no record of (newer, or never
             * offloaded there). */
            codes[i] = MC_ERR_OBJECT_ALREADY_EXISTS;
        } else if (n->adopt) {
            /* A shared file's version is not known here: 0 lets readers take what it holds. */
            uint64_t v = n->shared ? 0 : atomic_fetch_add(&m->next_version, 1) + 1;
            codes[i] = mc__dinsert(m, k->p, k->len, hash, (uint32_t)node, r->value_lens[i], v)
                           ? 0
                           : MC_ERR_MEMORY;
        } else {
            /* No record: the object was removed (or replaced, then removed) while this node
             * could not be told, or its offload was never reported. It must not come back. */
            codes[i] = MC_ERR_OBJECT_NOT_FOUND;
        }
        pthread_mutex_unlock(&d->mu);
        pthread_mutex_unlock(&s->mu);
    }
    if (!drop && (r->mount_flags & MC_DP_ANNOUNCE_END)) {
        pthread_mutex_lock(&d->mu);
        node = mc__dnode_of(d, r->client_id);
        if (node >= 0) {
            d->nodes[node].adopt = 0;
            /* A shared node's walk does not see the files being written meanwhile: it drops
             * nothing (the shared copies are attached to no node anyway). */
            if (!d->nodes[node].shared)
                mc__ddrop_unannounced(m, d->nodes[node].disk_id);
        }
        pthread_mutex_unlock(&d->mu);
    }
    return 0;
}

int mc__disk_done(mc__master_t *m, const mc__mp_request_t *r, int32_t *codes) {
    struct mc__disk *d = m->disk;
    int ok = r->force != 0;
    if (!d)
        return MC_ERR_INTERNAL_ERROR;
    for (uint32_t i = 0; i < r->n_keys; i++) {
        const mc__mp_str_t *k = &r->keys[i];
        uint64_t v = r->value_lens[i];
        uint32_t hash = mc__key_hash(k->p, k->len);
        mc__shard_t *s = mc__shard_of(m, hash);
        mc__object_t *o = NULL;
        int node;
        pthread_mutex_lock(&s->mu);
        o = mc__shard_find(s, hash, k->p, k->len);
        pthread_mutex_lock(&d->mu);
        node = mc__dnode_of(d, r->client_id);
        if (node < 0) {
            codes[i] = MC_ERR_CLIENT_NOT_FOUND;
        } else {
            mc__dnode_t *n = &d->nodes[node];
            for (size_t f = 0; f < n->nfly; f++) {
                if (n->fly[f].version == v && n->fly[f].key_len == k->len &&
                    memcmp(n->fly[f].key, k->p, k->len) == 0) {
                    mc__djob_free(&n->fly[f]);
                    n->fly[f] = n->fly[--n->nfly];
                    d->pending--;
                    break;
                }
            }
            if (o && o->version == v && (o->flags & MC__OBJ_COMPLETE)) {
                o->flags &= (uint8_t)~MC__OBJ_OFFLOAD_PENDING;
                codes[i] = 0;
                if (ok) {
                    mc__dentry_t **pp = mc__dlink(d, k->p, k->len, hash);
                    if (*pp && (*pp)->node == mc__dslot(d, (uint32_t)node))
                        mc__dunlink(m, pp); /* this copy replaced it on the same disk */
                    else if (*pp)
                        mc__dforget_link(m, pp);
                    if (mc__dinsert(m, k->p, k->len, hash, (uint32_t)node, o->size, v))
                        d->offloads++;
                    else
                        codes[i] = MC_ERR_MEMORY; /* the node drops its copy */
                } else {
                    d->offload_failures++;
                }
            } else {
                /* Removed or replaced while the node copied it: the copy must not be served. */
                codes[i] = ok ? MC_ERR_OBJECT_NOT_FOUND : 0;
            }
            pthread_cond_broadcast(&d->cv);
        }
        pthread_mutex_unlock(&d->mu);
        pthread_mutex_unlock(&s->mu);
    }
    return 0;
}

int mc__disk_fetch(mc__master_t *m, const mc__mp_request_t *r, mc_buf_t *out) {
    struct mc__disk *d = m->disk;
    uint64_t now = mc__now_ms();
    size_t start = 0;
    uint32_t count = 0;
    mc__dnode_t *n = NULL;
    int node;
    if (!d)
        return mc__mp_encode_error_reply(out, r->type, r->request_id, MC_ERR_INTERNAL_ERROR,
                                         "no disk state");
    pthread_mutex_lock(&d->mu);
    node = mc__dnode_of(d, r->client_id);
    if (node < 0) {
        pthread_mutex_unlock(&d->mu);
        return mc__mp_encode_error_reply(out, r->type, r->request_id, MC_ERR_CLIENT_NOT_FOUND,
                                         "no disk announced by this client: announce it");
    }
    n = &d->nodes[node];
    n->adopt = 0; /* its announce is over (a node that sends no END) */
    /* Offloads fetched long ago and never reported are handed out again. */
    for (size_t f = 0; f < n->nfly;) {
        if (n->fly[f].started_ms + MC__DISK_REFETCH_MS <= now && mc__dq_append(n, &n->fly[f]) == 0)
            n->fly[f] = n->fly[--n->nfly];
        else
            f++;
    }
    count = (uint32_t)(n->n - n->head < r->max_tasks ? n->n - n->head : r->max_tasks);
    if (n->nfly + count > n->capfly) {
        size_t cap = n->nfly + count + 16;
        mc__djob_t *p = mc__realloc(n->fly, cap * sizeof(*p));
        if (!p)
            count = 0;
        else {
            n->fly = p;
            n->capfly = cap;
        }
    }
    mc__dp_fetch_reply_begin(out, r->request_id, count, &start);
    for (uint32_t i = 0; i < count; i++) {
        mc__djob_t *j = &n->q[n->head++];
        mc__disk_job_t w;
        w.kind = j->kind;
        memcpy(w.key, j->key, j->key_len + 1);
        w.size = j->size;
        w.version = j->version;
        memset(&w.src, 0, sizeof(w.src));
        if (j->seg)
            snprintf(w.src.segment_name, sizeof(w.src.segment_name), "%s", j->seg);
        w.src.addr = j->addr;
        w.src.epoch = j->epoch;
        mc__dp_fetch_reply_job(out, &w);
        if (j->kind == MC_DP_JOB_OFFLOAD) {
            j->started_ms = now;
            n->fly[n->nfly++] = *j;
        } else {
            mc__djob_free(j);
        }
    }
    if (n->head == n->n)
        n->head = n->n = 0;
    pthread_mutex_unlock(&d->mu);
    mc__buf_frame_end(out, start);
    return out->failed ? MC_ERR_MEMORY : 0;
}

int mc__disk_storage_config(mc__master_t *m, const mc__mp_request_t *r, mc_buf_t *out) {
    struct mc__disk *d = m->disk;
    /* No eviction of files and no quota: the shared directory keeps every copy until its object
     * goes (docs/disk-tier.md). */
    return mc__dp_encode_storage_config(out, r->request_id, d ? d->fsdir : "", 0, 0);
}

void mc__disk_stats(mc__master_t *m, mc__disk_stats_t *out) {
    struct mc__disk *d = m->disk;
    memset(out, 0, sizeof(*out));
    if (!d)
        return;
    pthread_mutex_lock(&d->mu);
    for (uint32_t i = 0; i < d->n_nodes; i++) {
        if (d->nodes[i].used) {
            out->nodes++;
            out->capacity += d->nodes[i].capacity;
        }
    }
    out->objects = d->count - d->detached;
    out->bytes = d->bytes - d->detached_bytes;
    out->detached = d->detached;
    out->pending = d->pending;
    out->offloads = d->offloads;
    out->offload_failures = d->offload_failures;
    out->disk_hits = d->disk_hits;
    out->promotions = d->promotions;
    out->deletes = d->deletes;
    pthread_mutex_unlock(&d->mu);
}

/* --- the log --- */

int mc__disk_restore_set(mc__master_t *m, const uint8_t *key, uint32_t len, uint64_t version,
                         uint64_t size, uint64_t disk_id) {
    struct mc__disk *d = m->disk;
    uint32_t hash = mc__key_hash(key, len);
    mc__dentry_t **pp = NULL;
    int rc = 0;
    if (!d)
        return MC_ERR_INTERNAL_ERROR;
    pthread_mutex_lock(&d->mu);
    pp = mc__dlink(d, key, len, hash);
    if (*pp)
        mc__dunlink_raw(d, pp);
    /* A shared copy needs no node to be read: served at once (when this master still has the
     * shared directory). */
    if (!mc__dinsert_raw(d, key, len, hash,
                         disk_id == MC__DISK_ID_SHARED && d->fsdir[0] ? MC__DNODE_SHARED
                                                                      : MC__DNODE_NONE,
                         disk_id, size, version))
        rc = MC_ERR_MEMORY;
    pthread_mutex_unlock(&d->mu);
    return rc;
}

void mc__disk_restore_del(mc__master_t *m, const uint8_t *key, uint32_t len) {
    struct mc__disk *d = m->disk;
    mc__dentry_t **pp = NULL;
    if (!d)
        return;
    pthread_mutex_lock(&d->mu);
    pp = mc__dlink(d, key, len, mc__key_hash(key, len));
    if (*pp)
        mc__dunlink_raw(d, pp);
    pthread_mutex_unlock(&d->mu);
}

void mc__disk_dump(mc__master_t *m, mc_buf_t *b) {
    struct mc__disk *d = m->disk;
    if (!d)
        return;
    pthread_mutex_lock(&d->mu);
    for (uint32_t k = 0; k <= d->mask; k++) {
        for (const mc__dentry_t *e = d->buckets[k]; e; e = e->next) {
            size_t at = 0;
            mc__persist_record_begin(b, &at);
            mc__persist_put_disk(b, e->key, e->key_len, e->version, e->size, e->disk_id);
            mc__persist_record_end(b, at);
        }
    }
    pthread_mutex_unlock(&d->mu);
}

/* --- promotion retries --- */

/* At most this many candidates looked at per monitor pass. */
#define MC__DISK_RETRY_BATCH 64u

static void mc__promote_one(mc__master_t *m, const mc__dkey_t *k, mc__object_t *o, void *arg) {
    struct mc__disk *d = m->disk;
    mc__dentry_t *e = NULL;
    pthread_mutex_lock(&d->mu);
    e = *mc__dlink(d, k->key, k->len, k->hash);
    if (e && e->candidate) {
        if (o || e->node == MC__DNODE_NONE || e->promoting)
            mc__dcandidate_end(d, e); /* in memory again, or not promotable now */
        else
            mc__dpromote(m, e, *(const uint64_t *)arg, 1);
    }
    pthread_mutex_unlock(&d->mu);
}

void mc__disk_promote_retry(mc__master_t *m) {
    struct mc__disk *d = m->disk;
    mc__dkeys_t keys = {NULL, 0, 0};
    uint64_t now = mc__now_ms();
    if (!d || !m->cfg.promotion_on_hit || d->candidates == 0) /* racy peek, as in find */
        return;
    pthread_mutex_lock(&d->mu);
    for (uint32_t b = 0;
         d->candidates && mc__promote_fits(m, 0) && b <= d->mask && keys.n < MC__DISK_RETRY_BATCH;
         b++)
        for (mc__dentry_t *e = d->buckets[b]; e && keys.n < MC__DISK_RETRY_BATCH; e = e->next)
            if (e->candidate)
                mc__dkeys_add(&keys, e->key, e->key_len, e->hash, e->version);
    pthread_mutex_unlock(&d->mu);
    mc__dkeys_each(m, &keys, mc__promote_one, &now);
    mc__dkeys_free(&keys);
}
