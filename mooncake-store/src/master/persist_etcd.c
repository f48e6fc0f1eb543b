/* The HA master's metadata log in etcd (persist_etcd.h). */
#include "master/persist_etcd.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "master/persist.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/etcd.h"
#include "mooncake/common/log.h"
#include "mooncake/error.h"
#include "proto/master_view.h"

/* A log entry or snapshot chunk holds at most this much: with base64 and JSON around it a txn
 * stays well under etcd's default request limit (1.5 MiB). */
#define MC__ELOG_CHUNK (512u << 10)
/* Snapshot chunks and log entries read per range request (a page stays under the client's
 * response limit even with base64). */
#define MC__ELOG_PAGE 32
#define MC__ELOG_RETRY_US (50 * 1000)
#define MC__ELOG_KEY_MAX (MC_MASTER_VIEW_KEY_MAX + 64)

struct mc__elog {
    mc_etcd_t *etcd;
    int64_t term;
    int (*is_leader)(void *ctx, int64_t term);
    void *ctx;
    char view_key[MC_MASTER_VIEW_KEY_MAX];
    size_t view_len;
    char prefix[MC_MASTER_VIEW_KEY_MAX]; /* "mooncake-store/<cluster_id>/metadata/" */
    size_t prefix_len;
    _Atomic uint64_t next_seq; /* the next entry to reserve */
    uint64_t gen;              /* the snapshot in force (the installing thread's) */
    int64_t last_install_rev;  /* etcd's history is compacted up to here at the next install */
    _Atomic uint64_t appended, snap_bytes;
};

static size_t key_of(const mc__elog_t *l, char *buf, const char *fmt, ...) {
    va_list ap;
    int n = snprintf(buf, MC__ELOG_KEY_MAX, "%s", l->prefix);
    va_start(ap, fmt);
    n += vsnprintf(buf + n, MC__ELOG_KEY_MAX - (size_t)n, fmt, ap);
    va_end(ap);
    return (size_t)n;
}
#define KEY_HEAD(l, buf) key_of(l, buf, "head")
#define KEY_SNAP_GEN(l, buf, g) key_of(l, buf, "snap/%016" PRIx64 "/", (uint64_t)(g))
#define KEY_SNAP(l, buf, g, i)                                                                     \
    key_of(l, buf, "snap/%016" PRIx64 "/%08" PRIx64, (uint64_t)(g), (uint64_t)(i))
#define KEY_LOG(l, buf, s) key_of(l, buf, "log/%016" PRIx64, (uint64_t)(s))

static int still_leader(mc__elog_t *l) {
    return l->is_leader(l->ctx, l->term);
}

static void fence_cmp(const mc__elog_t *l, mc_etcd_cmp_t *c) {
    memset(c, 0, sizeof(*c));
    c->target = MC_ETCD_CMP_CREATE;
    c->result = MC_ETCD_EQUAL;
    c->key = l->view_key;
    c->key_len = l->view_len;
    c->number = l->term;
}

/* Runs a fenced txn until etcd answers it, retrying while this writer leads: 0 when it applied,
 * -1 when fenced out or no longer leader. With `absent` (a key), the txn also requires that key
 * to be absent and reads it when it is not: a key already holding exactly the value of ops[0]
 * is an earlier, unanswered try of ours that landed, so the write is not made twice. Without
 * it the ops must be ones that may be repeated (puts, deletes). */
static int fenced_txn(mc__elog_t *l, const mc_etcd_op_t *ops, size_t n, const char *absent,
                      const char *what, int64_t *rev) {
    mc_etcd_cmp_t cmps[2];
    mc_etcd_op_t get = {.type = MC_ETCD_OP_RANGE, .key = absent};
    size_t ncmp = 1;
    int warned = 0;
    fence_cmp(l, &cmps[0]);
    if (absent) {
        get.key_len = strlen(absent);
        memset(&cmps[1], 0, sizeof(cmps[1]));
        cmps[1].target = MC_ETCD_CMP_VERSION;
        cmps[1].result = MC_ETCD_EQUAL;
        cmps[1].key = absent;
        cmps[1].key_len = get.key_len;
        ncmp = 2;
    }
    while (still_leader(l)) {
        mc_etcd_txn_result_t res;
        int rc;
        memset(&res, 0, sizeof(res));
        rc = mc__etcd_txn(l->etcd, cmps, ncmp, ops, n, absent ? &get : NULL, absent ? 1 : 0, &res);
        if (rc == 0) {
            int ok = res.succeeded;
            if (!ok && absent && res.n == 1 && res.ranges[0].n == 1) {
                const mc_etcd_kv_t *kv = &res.ranges[0].kvs[0];
                ok = kv->value_len == ops[0].value_len &&
                     memcmp(kv->value, ops[0].value, kv->value_len) == 0;
            }
            if (rev)
                *rev = res.revision;
            mc__etcd_txn_result_free(&res);
            if (!ok)
                MC_ERROR("master: %s refused by etcd: term %" PRId64 " is no longer the leader's",
                         what, l->term);
            return ok ? 0 : -1;
        }
        if (!warned++)
            MC_WARN("master: %s: etcd did not answer (%s); retrying while this master leads", what,
                    mc_strerror(rc));
        usleep(MC__ELOG_RETRY_US);
    }
    MC_ERROR("master: %s not recorded: leadership of term %" PRId64 " ran out", what, l->term);
    return -1;
}

/* One log entry, written exactly once. */
static int append_entry(mc__elog_t *l, uint64_t seq, const uint8_t *data, size_t n) {
    char key[MC__ELOG_KEY_MAX], what[64];
    size_t kl = KEY_LOG(l, key, seq);
    mc_etcd_op_t put = {
        .type = MC_ETCD_OP_PUT, .key = key, .key_len = kl, .value = data, .value_len = n};
    snprintf(what, sizeof(what), "metadata log entry %" PRIu64, seq);
    return fenced_txn(l, &put, 1, key, what, NULL);
}

/* The end of the entry that starts at `at`: whole records, at most MC__ELOG_CHUNK unless one
 * record is larger; 0 when data is not a sequence of records. */
static size_t entry_end(const uint8_t *data, size_t n, size_t at) {
    size_t end = at;
    while (end < n) {
        uint32_t len;
        size_t rec;
        if (n - end < 8)
            return 0;
        len = (uint32_t)data[end] | (uint32_t)data[end + 1] << 8 | (uint32_t)data[end + 2] << 16 |
              (uint32_t)data[end + 3] << 24;
        rec = 8 + (size_t)len;
        if (rec > n - end)
            return 0;
        if (end > at && end - at + rec > MC__ELOG_CHUNK)
            break;
        end += rec;
    }
    return end;
}

size_t mc__elog_entries(const uint8_t *data, size_t n) {
    size_t count = 0;
    for (size_t at = 0; at < n; count++) {
        size_t end = entry_end(data, n, at);
        if (end == 0)
            return 0;
        at = end;
    }
    return count;
}

uint64_t mc__elog_reserve(mc__elog_t *l, size_t n_entries) {
    return atomic_fetch_add(&l->next_seq, n_entries);
}

int mc__elog_write(mc__elog_t *l, uint64_t seq, const uint8_t *data, size_t n) {
    for (size_t at = 0; at < n; seq++) {
        size_t end = entry_end(data, n, at);
        if (end == 0)
            return -1; /* not records: the caller's bug, never acknowledged */
        if (append_entry(l, seq, data + at, end - at) != 0)
            return -1;
        atomic_fetch_add(&l->appended, end - at);
        at = end;
    }
    return 0;
}

int mc__elog_append(mc__elog_t *l, const uint8_t *data, size_t n) {
    size_t k = mc__elog_entries(data, n);
    if (k == 0 && n > 0)
        return -1;
    return mc__elog_write(l, mc__elog_reserve(l, k), data, n);
}

uint64_t mc__elog_mark(mc__elog_t *l) {
    atomic_store(&l->appended, 0);
    return atomic_load(&l->next_seq);
}

uint64_t mc__elog_appended(mc__elog_t *l) {
    return atomic_load(&l->appended);
}

uint64_t mc__elog_snapshot_bytes(mc__elog_t *l) {
    return atomic_load(&l->snap_bytes);
}

int mc__elog_install(mc__elog_t *l, const uint8_t *body, size_t n, uint64_t log_from) {
    char key[MC__ELOG_KEY_MAX], end[MC__ELOG_KEY_MAX], old[MC__ELOG_KEY_MAX],
        old_end[MC__ELOG_KEY_MAX], lg[MC__ELOG_KEY_MAX], lg_end[MC__ELOG_KEY_MAX], head[64];
    uint64_t gen = l->gen + 1, chunk = 0;
    size_t kl, el, ol, oel, ll, lel;
    int64_t rev = 0;
    mc_etcd_op_t ops[3];
    /* leftovers of an install that crashed half-way would be read as part of this one */
    kl = KEY_SNAP_GEN(l, key, gen);
    el = mc__etcd_prefix_end(key, kl, (uint8_t *)end);
    ops[0] = (mc_etcd_op_t){.type = MC_ETCD_OP_DELETE,
                            .key = key,
                            .key_len = kl,
                            .range_end = end,
                            .range_end_len = el};
    if (fenced_txn(l, ops, 1, NULL, "snapshot", NULL) != 0)
        return -1;
    for (size_t at = 0; at < n || (n == 0 && chunk == 0); chunk++) {
        size_t len = n - at < MC__ELOG_CHUNK ? n - at : MC__ELOG_CHUNK;
        kl = KEY_SNAP(l, key, gen, chunk);
        ops[0] = (mc_etcd_op_t){.type = MC_ETCD_OP_PUT,
                                .key = key,
                                .key_len = kl,
                                .value = body + at,
                                .value_len = len};
        if (fenced_txn(l, ops, 1, NULL, "snapshot chunk", NULL) != 0)
            return -1;
        at += len;
        if (n == 0)
            break;
    }
    /* the switch: head to the new snapshot, the old one and the log it covers gone */
    kl = KEY_HEAD(l, key);
    snprintf(head, sizeof(head), "%" PRIu64 " %" PRIu64, gen, log_from);
    ol = KEY_SNAP_GEN(l, old, l->gen);
    oel = mc__etcd_prefix_end(old, ol, (uint8_t *)old_end);
    ll = KEY_LOG(l, lg, 0);
    lel = KEY_LOG(l, lg_end, log_from);
    ops[0] = (mc_etcd_op_t){.type = MC_ETCD_OP_PUT,
                            .key = key,
                            .key_len = kl,
                            .value = head,
                            .value_len = strlen(head)};
    ops[1] = (mc_etcd_op_t){.type = MC_ETCD_OP_DELETE,
                            .key = old,
                            .key_len = ol,
                            .range_end = old_end,
                            .range_end_len = oel};
    ops[2] = (mc_etcd_op_t){.type = MC_ETCD_OP_DELETE,
                            .key = lg,
                            .key_len = ll,
                            .range_end = lg_end,
                            .range_end_len = lel};
    if (fenced_txn(l, ops, 3, NULL, "snapshot switch", &rev) != 0)
        return -1;
    l->gen = gen;
    atomic_store(&l->snap_bytes, n);
    /* etcd keeps every revision until compacted; one install behind, so watchers elsewhere
     * (standbys, engines) have had a snapshot's time to read past it */
    if (l->last_install_rev > 0 && mc__etcd_compact(l->etcd, l->last_install_rev) != 0)
        MC_WARN("master: compacting etcd's history to revision %" PRId64 " failed",
                l->last_install_rev);
    l->last_install_rev = rev;
    return 0;
}

/* Appends every value of [key, end) to b, paged; with want_seq, the keys must be the log entries
 * *want_seq, *want_seq + 1, ... (advanced as they are read): at the first one missing it stops,
 * with *gap set. */
static int read_range(mc__elog_t *l, const char *key, size_t kl, const char *end, size_t el,
                      mc_buf_t *b, uint64_t *want_seq, int *gap, char *err, size_t cap) {
    char from[MC__ELOG_KEY_MAX + 1];
    size_t fl = kl;
    memcpy(from, key, kl);
    for (;;) {
        mc_etcd_kvs_t r;
        int rc = mc__etcd_range(l->etcd, from, fl, end, el, MC__ELOG_PAGE, 0, &r);
        if (rc) {
            snprintf(err, cap, "cannot read the metadata log from etcd: %s", mc_strerror(rc));
            return rc;
        }
        for (size_t i = 0; i < r.n; i++) {
            if (want_seq) {
                char expect[MC__ELOG_KEY_MAX];
                size_t xl = KEY_LOG(l, expect, *want_seq);
                if (r.kvs[i].key_len != xl || memcmp(r.kvs[i].key, expect, xl) != 0) {
                    *gap = 1;
                    mc__etcd_kvs_free(&r);
                    return 0;
                }
                (*want_seq)++;
            }
            mc__buf_put(b, r.kvs[i].value, r.kvs[i].value_len);
        }
        if (r.n == 0 || !r.more) {
            mc__etcd_kvs_free(&r);
            break;
        }
        /* the next page starts just after the last key */
        fl = r.kvs[r.n - 1].key_len;
        if (fl + 1 > sizeof(from)) {
            mc__etcd_kvs_free(&r);
            snprintf(err, cap, "a metadata key in etcd is too long");
            return MC_ERR_INTERNAL_ERROR;
        }
        memcpy(from, r.kvs[r.n - 1].key, fl);
        from[fl++] = '\0';
        mc__etcd_kvs_free(&r);
    }
    if (b->failed) {
        snprintf(err, cap, "out of memory reading the metadata log");
        return MC_ERR_MEMORY;
    }
    return 0;
}

static int load(mc__elog_t *l, mc_buf_t *out, char *err, size_t cap) {
    char key[MC__ELOG_KEY_MAX], end[MC__ELOG_KEY_MAX];
    size_t kl = KEY_HEAD(l, key), el;
    uint64_t gen = 0, log_from = 0, seq;
    int gap = 0;
    mc_etcd_kv_t kv;
    int rc = mc__etcd_get(l->etcd, key, kl, &kv);
    mc__buf_put(out, MC__LOG_MAGIC, 8);
    if (rc == 0) {
        char text[64];
        size_t n = kv.value_len < sizeof(text) - 1 ? kv.value_len : sizeof(text) - 1;
        memcpy(text, kv.value, n);
        text[n] = '\0';
        mc__etcd_kv_free(&kv);
        if (sscanf(text, "%" SCNu64 " %" SCNu64, &gen, &log_from) != 2) {
            snprintf(err, cap, "the metadata log's head in etcd (%s) is malformed", key);
            return MC_ERR_INTERNAL_ERROR;
        }
    } else if (rc != MC_ERR_ETCD_KEY_NOT_EXIST) {
        snprintf(err, cap, "cannot read %s from etcd: %s", key, mc_strerror(rc));
        return rc;
    }
    l->gen = gen;
    if (gen > 0) {
        size_t before = out->len;
        kl = KEY_SNAP_GEN(l, key, gen);
        el = mc__etcd_prefix_end(key, kl, (uint8_t *)end);
        rc = read_range(l, key, kl, end, el, out, NULL, NULL, err, cap);
        if (rc)
            return rc;
        atomic_store(&l->snap_bytes, out->len - before);
    }
    kl = KEY_LOG(l, key, 0);
    el = mc__etcd_prefix_end(key, l->prefix_len + 4, (uint8_t *)end); /* past every "log/" key */
    kl = KEY_LOG(l, key, log_from);
    seq = log_from;
    rc = read_range(l, key, kl, end, el, out, &seq, &gap, err, cap);
    if (rc == 0 && gap) {
        /* Entries are acknowledged in order, so none after a missing one ever was (its commit
         * failed while later ones, written beside it, landed): they are dropped, never
         * replayed, and their sequence numbers are this term's to write. */
        mc_etcd_op_t del = {.type = MC_ETCD_OP_DELETE,
                            .key = key,
                            .key_len = KEY_LOG(l, key, seq),
                            .range_end = end,
                            .range_end_len = el};
        MC_WARN("master: the metadata log in etcd has no entry %" PRIu64
                "; the unacknowledged entries after it are dropped",
                seq);
        if (fenced_txn(l, &del, 1, NULL, "dropping unacknowledged log entries", NULL) != 0) {
            snprintf(err, cap, "cannot drop the log entries after the missing entry %" PRIu64, seq);
            return MC_ERR_ETCD_OPERATION_ERROR;
        }
    }
    atomic_store(&l->next_seq, seq);
    return rc;
}

int mc__elog_open(const mc__elog_opts_t *o, mc__elog_t **out, mc_buf_t *loaded, char *err,
                  size_t cap) {
    mc__elog_t *l;
    int rc, vl;
    *out = NULL;
    if (!o || !o->endpoints || !o->is_leader || o->term <= 0) {
        snprintf(err, cap, "HA metadata log: bad options");
        return MC_ERR_INVALID_PARAMS;
    }
    l = mc__calloc(1, sizeof(*l));
    if (!l)
        return MC_ERR_MEMORY;
    l->term = o->term;
    l->is_leader = o->is_leader;
    l->ctx = o->ctx;
    vl = mc__master_view_key(o->cluster_id, l->view_key, sizeof(l->view_key));
    if (vl < 0) {
        snprintf(err, cap, "HA metadata log: bad cluster id");
        mc__free(l);
        return MC_ERR_INVALID_PARAMS;
    }
    l->view_len = (size_t)vl;
    /* the view key without its "master_view" ends in "<cluster_id>/" */
    l->prefix_len =
        (size_t)snprintf(l->prefix, sizeof(l->prefix), "%.*smetadata/",
                         (int)(l->view_len - (sizeof(MC_MASTER_VIEW_KEY_SUFFIX) - 2)), l->view_key);
    atomic_init(&l->appended, 0);
    atomic_init(&l->snap_bytes, 0);
    atomic_init(&l->next_seq, 0);
    rc = mc__etcd_open(o->endpoints, 0, &l->etcd);
    if (rc) {
        snprintf(err, cap, "HA metadata log: bad etcd endpoints %s", o->endpoints);
        mc__free(l);
        return MC_ERR_INVALID_PARAMS;
    }
    rc = load(l, loaded, err, cap);
    if (rc) {
        mc__elog_close(l);
        return rc;
    }
    *out = l;
    return 0;
}

void mc__elog_close(mc__elog_t *l) {
    if (!l)
        return;
    mc__etcd_close(l->etcd);
    mc__free(l);
}
