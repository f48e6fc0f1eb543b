/* Fabric transport: one-sided RMA (fi_read / fi_write) over libfabric, loaded at run time
 * (fabric_dl.h). One reliable-datagram (FI_EP_RDM) endpoint per engine with an address vector of
 * its peers; every buffer the engine registers is registered with the provider and its remote key
 * is published in the descriptor, next to the endpoint's address.
 *
 * Threads: submit() cuts a task into chunks and hands them to one progress thread, which posts
 * them (at most max_inflight at once), reads the completion queue and enforces each task's
 * deadline. The completion queue is the only thing that moves the provider along for
 * providers with manual progress, so the thread runs for targets too: their memory is served by
 * the provider, not by our RPC server.
 *
 * A chunk that timed out or whose peer died stays posted until the provider completes it (or the
 * engine closes): its memory may still change until then, as with any RDMA NIC. Its task has
 * already ended; the chunk's record outlives it. */
#include "transports/fabric.h"
#include "te_internal.h"
#include "transports/fabric_dl.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/cond.h"
#include "mooncake/common/config.h"
#include "mooncake/common/log.h"
#include "mooncake/common/time.h"

#ifdef MC_HAVE_LIBFABRIC
#include <cjson/cJSON.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "peer_conn.h"
#include "registry.h"

#define MC__FAB_VERSION FI_VERSION(1, 10)
#define MC__FAB_ADDR_MAX 256 /* bytes of a libfabric endpoint name */
#define MC__FAB_RETRIES 3

typedef struct mc__fab_mr {
    uint64_t addr, len;
    struct fid_mr *mr;
    uint64_t key;
    void *desc;
} mc__fab_mr_t;

/* What a peer's descriptor says of fabric (its "fabric" part, read by mc__fab_desc_parse): its
 * endpoint, its provider, whether remote addresses are virtual (else offsets into the buffer),
 * and the remote key of each buffer registered with the provider. */
typedef struct mc__fab_key {
    uint64_t buf_addr, key;
} mc__fab_key_t;

typedef struct mc__fab_desc {
    char prov[64];
    uint8_t addr[MC__FAB_ADDR_MAX];
    size_t addrlen;
    int virt;
    size_t nkeys;
    mc__fab_key_t *keys; /* sorted by buf_addr */
} mc__fab_desc_t;

struct mc__fab_task;

typedef struct mc__fab_op {
    struct fi_context ctx; /* first: the provider hands it back in completions */
    struct mc__fab_op *next;
    struct mc__fab_task *ft;
    uint8_t *local;
    void *ldesc;
    uint64_t raddr;
    uint64_t len;
    int retried;         /* times posted again after a broken connection */
    uint64_t not_before; /* a retry waits until then (ms), for the provider to drop the old
                          * connection */
} mc__fab_op_t;

/* One task's chunks. Owned by the progress thread once handed over; freed when the task has
 * ended and none of its chunks is still posted. */
typedef struct mc__fab_task {
    struct mc__fab_task *next, *prev; /* the thread's active list */
    struct mc__fab_task *in_next;     /* the hand-over list */
    mc__task_t *t;                    /* NULL once it ended */
    mc_engine_t *e;
    struct mc__fab_peer *ps; /* the peer's entry (it lives as long as the engine) */
    uint64_t gen;            /* ps->gen when dest was taken */
    uint64_t instance;       /* the peer's instance the task is for */
    uint64_t probe_seq;      /* ps->probe_seq at submit */
    fi_addr_t dest;
    uint64_t rkey;
    int write;
    uint32_t nops;
    uint32_t unposted; /* chunks not yet posted (left in the post queue) */
    uint32_t posted;   /* chunks posted and not completed */
    int err;
    mc__fab_op_t ops[];
} mc__fab_task_t;

/* Per peer (p->tp_peer[MC__TP_FABRIC]): its entry in our address vector, for one instance. */
typedef struct mc__fab_peer {
    uint64_t instance_id; /* 0: no entry (yet, or it could not be renewed) */
    fi_addr_t addr;
    uint8_t name[MC__FAB_ADDR_MAX]; /* its endpoint address, to renew the entry */
    size_t namelen;
    /* Bumped (under av_lock) when the entry is renewed after an error: chunks queued for the
     * older one take the new one (same instance) or fail (another). */
    _Atomic uint64_t gen;
    /* Liveness after an error (the prober thread's answer, under the fabric lock): a provider
     * may retry connecting to a dead endpoint forever, so retries wait for the RPC port to say
     * the same instance still runs. */
    mc__peer_t *peer;
    int probe; /* MC__FAB_PROBE_* */
    uint64_t alive_instance;
    struct mc__fab_peer *probe_next;
    /* The same answer for the progress thread: probe_seq counts finished probes, probe_alive is
     * the instance the last one found (0: none). A task is judged only by probes that finished
     * after it was submitted. */
    _Atomic uint64_t probe_seq;
    _Atomic uint64_t probe_alive;
} mc__fab_peer_t;

enum { MC__FAB_PROBE_NONE = 0, MC__FAB_PROBE_PENDING, MC__FAB_PROBE_DONE };

typedef struct mc__fabric mc__fabric_t;
struct mc__fabric {
    mc_engine_t *e;
    const mc__fi_api_t *api;
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;
    struct fid_cq *cq;
    struct fid_ep *ep;
    char prov[64];
    uint8_t addr[MC__FAB_ADDR_MAX];
    size_t addrlen;
    int virt_addr, mr_local, prov_key, mr_endpoint, can_wait;
    int hmem; /* the provider registers device memory (FI_HMEM) */
    /* Every WRITE is posted with these flags. A WRITE's completion must mean that its bytes are
     * in the target's memory (the store makes an object readable right after): FI_DELIVERY_COMPLETE
     * asks for that on each operation rather than through the endpoint's defaults, which a
     * provider may take from the hints or not. It is missing only for a hardware provider that
     * lacks it, whose completions come from the target's acknowledgment (mc__fab_pick). */
    uint64_t write_flags;
    uint64_t next_key;
    uint64_t chunk;
    uint32_t max_inflight;

    pthread_rwlock_t mr_lock; /* mrs (sorted by addr, not overlapping: the registry's) */
    mc__fab_mr_t *mrs;
    size_t nmrs, capmrs;

    pthread_mutex_t av_lock; /* address vector inserts and the peers' entries */

    pthread_mutex_t lock; /* in, stop */
    mc__fab_task_t *in_head, *in_tail;
    int stop;
    pthread_t thr;
    int thr_started;
    pthread_t prober;
    int prober_started;
    pthread_cond_t probe_cond;
    mc__fab_peer_t *probe_head;
    /* mc__fab_barrier: requests asked, and the last one the progress thread answered (under
     * lock) */
    uint64_t barrier_asked, barrier_passed;
    pthread_cond_t barrier_cond;

    /* the progress thread's own */
    mc__fab_task_t *active;
    mc__fab_op_t *postq_head, *postq_tail;
    mc__fab_op_t *delayed; /* retries waiting for their not_before */
    uint32_t inflight;
};

static const char *mc__fab_err(const mc__fabric_t *f, int rc) {
    return f->api->strerror(rc < 0 ? -rc : rc);
}

/* ---- memory registrations ---- */

/* The index of the first of n records (stride bytes apart, sorted by the uint64_t at offset off
 * of each) whose field is >= a: the one binary search behind the registration and remote-key
 * lookups. */
static size_t mc__fab_lower(const void *base, size_t n, size_t stride, size_t off, uint64_t a) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t v;
        memcpy(&v, (const char *)base + mid * stride + off, sizeof(v));
        if (v < a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* index of the first registration with addr >= a (mr_lock held) */
static size_t mc__fab_mr_lower(const mc__fabric_t *f, uint64_t a) {
    return mc__fab_lower(f->mrs, f->nmrs, sizeof(*f->mrs), offsetof(mc__fab_mr_t, addr), a);
}

/* the registration holding [a, a+len), or NULL (mr_lock held) */
static const mc__fab_mr_t *mc__fab_mr_find(const mc__fabric_t *f, uint64_t a, uint64_t len) {
    size_t i = mc__fab_mr_lower(f, a + 1);
    if (i == 0)
        return NULL;
    i--;
    if (a >= f->mrs[i].addr && len <= f->mrs[i].len && a - f->mrs[i].addr <= f->mrs[i].len - len)
        return &f->mrs[i];
    return NULL;
}

/* Registers device memory through the provider's HMEM interface: the provider moves it with the
 * GPU's own means (GPUDirect RDMA, or its copy engine), never through a host pointer. */
static int mc__fab_mr_reg_device(mc__fabric_t *f, const mc__region_t *r, uint64_t access,
                                 uint64_t key, struct fid_mr **mr) {
    struct iovec iov = {.iov_base = (void *)(uintptr_t)r->addr, .iov_len = r->len};
    struct fi_mr_attr a;
    memset(&a, 0, sizeof(a));
    a.mr_iov = &iov;
    a.iov_count = 1;
    a.access = access;
    a.requested_key = key;
    a.iface = FI_HMEM_CUDA;
    a.device.cuda = r->place.device;
    return fi_mr_regattr(f->domain, &a, 0, mr);
}

static void mc__fab_mr_add(mc__fabric_t *f, const mc__region_t *r) {
    struct fid_mr *mr = NULL;
    uint64_t access = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
    uint64_t addr = r->addr, len = r->len;
    int device = r->place.kind == MC__MEM_CUDA;
    uint64_t want_key;
    size_t at;
    int rc;
    if (device && !f->hmem) {
        /* no other transport of ours reaches device memory either: say so once, here */
        MC_WARN("fabric: provider %s cannot register device memory (no FI_HMEM): the %llu bytes "
                "of GPU %d at %#llx cannot be moved by this engine",
                f->prov, (unsigned long long)len, r->place.device, (unsigned long long)addr);
        return;
    }
    pthread_rwlock_wrlock(&f->mr_lock);
    want_key = f->next_key++;
    if (f->nmrs == f->capmrs) {
        size_t ncap = f->capmrs ? f->capmrs * 2 : 16;
        mc__fab_mr_t *n = mc__realloc(f->mrs, ncap * sizeof(*n));
        if (!n) {
            pthread_rwlock_unlock(&f->mr_lock);
            MC_WARN("fabric: out of memory registering %llu bytes; they go over tcp",
                    (unsigned long long)len);
            return;
        }
        f->mrs = n;
        f->capmrs = ncap;
    }
    if (device)
        rc = mc__fab_mr_reg_device(f, r, access, want_key, &mr);
    else
        rc = fi_mr_reg(f->domain, (void *)(uintptr_t)addr, len, access, 0, want_key, 0, &mr, NULL);
    if (!rc && f->mr_endpoint) {
        rc = fi_mr_bind(mr, &f->ep->fid, 0);
        if (!rc)
            rc = fi_mr_enable(mr);
    }
    if (rc) {
        if (mr)
            fi_close(&mr->fid);
        pthread_rwlock_unlock(&f->mr_lock);
        if (device)
            MC_WARN("fabric: cannot register %llu bytes of GPU %d at %#llx with %s (FI_HMEM, "
                    "CUDA): %s; this engine cannot move them",
                    (unsigned long long)len, r->place.device, (unsigned long long)addr, f->prov,
                    mc__fab_err(f, rc));
        else
            MC_WARN("fabric: cannot register %llu bytes at %#llx with %s: %s; they go over tcp",
                    (unsigned long long)len, (unsigned long long)addr, f->prov, mc__fab_err(f, rc));
        return;
    }
    at = mc__fab_mr_lower(f, addr);
    memmove(&f->mrs[at + 1], &f->mrs[at], (f->nmrs - at) * sizeof(*f->mrs));
    f->mrs[at] = (mc__fab_mr_t){.addr = addr,
                                .len = len,
                                .mr = mr,
                                .key = f->prov_key ? fi_mr_key(mr) : want_key,
                                .desc = fi_mr_desc(mr)};
    f->nmrs++;
    pthread_rwlock_unlock(&f->mr_lock);
}

static void mc__fab_mem_registered(mc_engine_t *e, const mc__region_t *regs, size_t n) {
    for (size_t i = 0; e->tp_state[MC__TP_FABRIC] && i < n; i++)
        mc__fab_mr_add(e->tp_state[MC__TP_FABRIC], &regs[i]);
}

static void mc__fab_mem_unregistered(mc_engine_t *e, const uint64_t *addrs, size_t n) {
    mc__fabric_t *f = e->tp_state[MC__TP_FABRIC];
    if (!f)
        return;
    pthread_rwlock_wrlock(&f->mr_lock);
    for (size_t k = 0; k < n; k++) {
        size_t i = mc__fab_mr_lower(f, addrs[k]);
        if (i >= f->nmrs || f->mrs[i].addr != addrs[k])
            continue; /* never got a registration */
        /* from here on the provider refuses every remote access to it */
        fi_close(&f->mrs[i].mr->fid);
        memmove(&f->mrs[i], &f->mrs[i + 1], (f->nmrs - i - 1) * sizeof(*f->mrs));
        f->nmrs--;
    }
    pthread_rwlock_unlock(&f->mr_lock);
}

/* Our part of the descriptor: {"provider", "addr" (hex), "virt_addr", "keys": [{"addr", "key"}]},
 * a key for each of its buffers that the provider registered. */
static void mc__fab_describe(const mc_engine_t *e, mc__desc_t *d) {
    mc__fabric_t *f = e->tp_state[MC__TP_FABRIC];
    char hex[2 * MC__FAB_ADDR_MAX + 1];
    cJSON *o, *keys;
    char *text = NULL;
    int ok;
    if (!f)
        return;
    for (size_t i = 0; i < f->addrlen; i++)
        snprintf(hex + 2 * i, 3, "%02x", f->addr[i]);
    hex[2 * f->addrlen] = 0;
    o = cJSON_CreateObject();
    ok = o && cJSON_AddStringToObject(o, "provider", f->prov) &&
         cJSON_AddStringToObject(o, "addr", hex) &&
         cJSON_AddBoolToObject(o, "virt_addr", f->virt_addr);
    keys = ok ? cJSON_AddArrayToObject(o, "keys") : NULL;
    ok = keys != NULL;
    pthread_rwlock_rdlock(&f->mr_lock);
    for (size_t i = 0; ok && i < d->nbufs; i++) {
        const mc__fab_mr_t *m = mc__fab_mr_find(f, d->bufs[i].addr, d->bufs[i].len);
        cJSON *k;
        if (!m || m->addr != d->bufs[i].addr)
            continue;
        k = cJSON_CreateObject();
        ok = k && cJSON_AddItemToArray(keys, k) &&
             !mc__desc_json_add_u64(k, "addr", d->bufs[i].addr) &&
             !mc__desc_json_add_u64(k, "key", m->key);
    }
    pthread_rwlock_unlock(&f->mr_lock);
    if (ok)
        text = cJSON_PrintUnformatted(o);
    if (!text || mc__desc_add_part(d, "fabric", text))
        MC_WARN("fabric: could not describe our endpoint; peers reach us over tcp");
    cJSON_free(text);
    cJSON_Delete(o);
}

static void mc__fab_desc_free(void *priv) {
    mc__fab_desc_t *fd = priv;
    if (!fd)
        return;
    mc__free(fd->keys);
    mc__free(fd);
}

static int mc__fab_hexval(char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

static int mc__fab_key_cmp(const void *a, const void *b) {
    const mc__fab_key_t *x = a, *y = b;
    return x->buf_addr < y->buf_addr ? -1 : x->buf_addr > y->buf_addr;
}

/* Reads a peer's "fabric" part, whole or not at all. */
static int mc__fab_desc_read(const cJSON *o, mc__fab_desc_t *fd) {
    const cJSON *virt = cJSON_GetObjectItemCaseSensitive(o, "virt_addr");
    const cJSON *keys = cJSON_GetObjectItemCaseSensitive(o, "keys"), *k;
    char hex[2 * MC__FAB_ADDR_MAX + 1];
    size_t n, i = 0;
    if (!cJSON_IsObject(o) || mc__desc_json_str(o, "provider", fd->prov, sizeof(fd->prov)) ||
        !fd->prov[0] || mc__desc_json_str(o, "addr", hex, sizeof(hex)) || !cJSON_IsBool(virt) ||
        !cJSON_IsArray(keys))
        return MC_ERR_MALFORMED_JSON;
    n = strlen(hex);
    if (n == 0 || n % 2)
        return MC_ERR_MALFORMED_JSON;
    for (size_t j = 0; j < n / 2; j++) {
        int hi = mc__fab_hexval(hex[2 * j]), lo = mc__fab_hexval(hex[2 * j + 1]);
        if (hi < 0 || lo < 0)
            return MC_ERR_MALFORMED_JSON;
        fd->addr[j] = (uint8_t)(hi << 4 | lo);
    }
    fd->addrlen = n / 2;
    fd->virt = cJSON_IsTrue(virt);
    n = (size_t)cJSON_GetArraySize(keys);
    if (n > MC__DESC_MAX_BUFFERS)
        return MC_ERR_MALFORMED_JSON;
    fd->keys = n ? mc__calloc(n, sizeof(*fd->keys)) : NULL;
    if (n && !fd->keys)
        return MC_ERR_MEMORY;
    cJSON_ArrayForEach(k, keys) {
        if (i >= n || !cJSON_IsObject(k) || mc__desc_json_u64(k, "addr", &fd->keys[i].buf_addr) ||
            mc__desc_json_u64(k, "key", &fd->keys[i].key))
            return MC_ERR_MALFORMED_JSON;
        i++;
    }
    fd->nkeys = i;
    if (i)
        qsort(fd->keys, i, sizeof(*fd->keys), mc__fab_key_cmp);
    for (i = 1; i < fd->nkeys; i++)
        if (fd->keys[i - 1].buf_addr == fd->keys[i].buf_addr)
            return MC_ERR_MALFORMED_JSON;
    return 0;
}

static int mc__fab_desc_parse(const char *json, void **priv, void (**priv_free)(void *)) {
    cJSON *o = cJSON_Parse(json);
    mc__fab_desc_t *fd = mc__calloc(1, sizeof(*fd));
    int rc = fd ? mc__fab_desc_read(o, fd) : MC_ERR_MEMORY;
    cJSON_Delete(o);
    if (rc) {
        mc__fab_desc_free(fd);
        return rc;
    }
    *priv = fd;
    *priv_free = mc__fab_desc_free;
    return 0;
}

/* The remote key of the peer's buffer starting at buf_addr: 1, or 0 when it has none. */
static int mc__fab_desc_key(const mc__fab_desc_t *fd, uint64_t buf_addr, uint64_t *key) {
    size_t lo = mc__fab_lower(fd->keys, fd->nkeys, sizeof(*fd->keys),
                              offsetof(mc__fab_key_t, buf_addr), buf_addr);
    if (lo == fd->nkeys || fd->keys[lo].buf_addr != buf_addr)
        return 0;
    *key = fd->keys[lo].key;
    return 1;
}

/* ---- the progress thread ---- */

static void mc__fab_task_free_if_done(mc__fab_task_t *ft, mc__fabric_t *f) {
    if (ft->t || ft->posted || ft->unposted)
        return;
    if (ft->prev)
        ft->prev->next = ft->next;
    else
        f->active = ft->next;
    if (ft->next)
        ft->next->prev = ft->prev;
    mc__free(ft);
}

/* Ends the task (once). err 0: completed. */
static void mc__fab_task_end(mc__fab_task_t *ft, int err) {
    mc__task_t *t = ft->t;
    int status = MC_STATUS_COMPLETED;
    if (!t)
        return;
    ft->t = NULL;
    if (err) {
        status = mc__now_ms() >= t->deadline_ms ? MC_STATUS_TIMEOUT : MC_STATUS_FAILED;
        if (t->peer && err != MC_ERR_CONTEXT)
            mc__peer_mark_broken(t->peer); /* re-fetch its descriptor before the next use */
    } else {
        atomic_store(&t->transferred, t->len);
        mc__transport_account(ft->e, MC__TP_FABRIC, t->len);
    }
    mc__task_finish(t, status, err);
}

/* A provider error as the engine's code: a refused key or range is memory the peer does not (or
 * no longer) expose; anything else is a broken path to it. */
static int mc__fab_code(int fi_err) {
    switch (fi_err < 0 ? -fi_err : fi_err) {
    case FI_EKEYREJECTED:
    case FI_EACCES:
    case FI_EINVAL:
    case FI_EFAULT:
        return MC_ERR_ADDRESS_NOT_REGISTERED;
    default:
        return MC_ERR_SOCKET;
    }
}

/* After an error on the path to a peer: renew its address-vector entry (providers such as
 * ofi_rxm keep a failed connection per entry), so the next chunk connects afresh. */
static void mc__fab_peer_reset(mc__fabric_t *f, mc__fab_task_t *ft) {
    mc__fab_peer_t *ps = ft->ps;
    pthread_mutex_lock(&f->av_lock);
    if (ps->instance_id == ft->instance && atomic_load(&ps->gen) == ft->gen) {
        fi_addr_t a = ps->addr;
        int rc = fi_av_remove(f->av, &a, 1, 0);
        if (rc)
            MC_INFO("fabric: dropping a peer's address failed: %s", mc__fab_err(f, rc));
        a = FI_ADDR_UNSPEC;
        if (fi_av_insert(f->av, ps->name, 1, &a, 0, NULL) == 1)
            ps->addr = a;
        else
            ps->instance_id = 0; /* the next submit tries again */
        atomic_fetch_add(&ps->gen, 1);
    }
    pthread_mutex_unlock(&f->av_lock);
}

/* Chunks queued under an older entry of their peer take its current one, when it is still the
 * same instance: 0, or -1 to fail them. */
static int mc__fab_retarget(mc__fabric_t *f, mc__fab_task_t *ft) {
    mc__fab_peer_t *ps = ft->ps;
    int rc = -1;
    pthread_mutex_lock(&f->av_lock);
    if (ps->instance_id == ft->instance) {
        ft->dest = ps->addr;
        ft->gen = atomic_load(&ps->gen);
        rc = 0;
    }
    pthread_mutex_unlock(&f->av_lock);
    return rc;
}

static void mc__fab_queue(mc__fabric_t *f, mc__fab_op_t *op) {
    op->next = NULL;
    if (f->postq_tail)
        f->postq_tail->next = op;
    else
        f->postq_head = op;
    f->postq_tail = op;
}

/* Asks the prober whether the peer still runs (fabric lock taken here). */
static void mc__fab_probe(mc__fabric_t *f, mc__fab_peer_t *ps) {
    pthread_mutex_lock(&f->lock);
    if (ps->probe != MC__FAB_PROBE_PENDING) {
        ps->probe = MC__FAB_PROBE_PENDING;
        ps->probe_next = f->probe_head;
        f->probe_head = ps;
        pthread_cond_signal(&f->probe_cond);
    }
    pthread_mutex_unlock(&f->lock);
}

/* A delayed retry's fate: 1 post it, 0 not yet (the probe is still out), -1 fail it (the peer
 * is gone or another instance of it runs). */
static int mc__fab_probe_verdict(mc__fabric_t *f, const mc__fab_task_t *ft) {
    int v;
    pthread_mutex_lock(&f->lock);
    if (ft->ps->probe == MC__FAB_PROBE_PENDING)
        v = 0;
    else
        v = ft->ps->probe == MC__FAB_PROBE_DONE && ft->ps->alive_instance == ft->instance ? 1 : -1;
    pthread_mutex_unlock(&f->lock);
    return v;
}

/* The prober thread: for each peer asked about, a fresh descriptor and a fresh connection to its
 * RPC port, each bounded by the metadata timeout; the instance it finds is what retries go to. */
static void *mc__fab_prober(void *arg) {
    mc__fabric_t *f = arg;
    mc_engine_t *e = f->e;
    pthread_mutex_lock(&f->lock);
    for (;;) {
        mc__fab_peer_t *ps;
        mc__peer_t *p;
        uint64_t alive = 0;
        int fd;
        while (!f->probe_head && !f->stop)
            pthread_cond_wait(&f->probe_cond, &f->lock);
        if (f->stop)
            break;
        ps = f->probe_head;
        f->probe_head = ps->probe_next;
        p = ps->peer;
        pthread_mutex_unlock(&f->lock);
        fd = mc__peer_refresh(e, p) == 0
                 ? mc__peer_connect(e, p->host, p->port,
                                    mc__now_ms() + (e->timeout_ms < 2000 ? e->timeout_ms : 2000))
                 : -1;
        if (fd >= 0) {
            close(fd);
            pthread_mutex_lock(&p->lock);
            alive = p->desc ? p->desc->instance_id : 0;
            pthread_mutex_unlock(&p->lock);
        }
        pthread_mutex_lock(&f->lock);
        ps->alive_instance = alive;
        ps->probe = MC__FAB_PROBE_DONE;
        atomic_store(&ps->probe_alive, alive);
        atomic_fetch_add(&ps->probe_seq, 1);
    }
    /* peers still asked about: nobody waits for them any more */
    while (f->probe_head) {
        f->probe_head->probe = MC__FAB_PROBE_NONE;
        f->probe_head = f->probe_head->probe_next;
    }
    pthread_mutex_unlock(&f->lock);
    return NULL;
}

static void mc__fab_op_done(mc__fabric_t *f, mc__fab_op_t *op, int err) {
    mc__fab_task_t *ft = op->ft;
    if (err && !ft->err)
        mc__fab_peer_reset(f, ft);
    ft->posted--;
    /* A broken connection (the peer dropped it after refusing a request on it, say) gets a few
     * more tries, spaced so that the provider has let the old connection go; a dead peer fails
     * them at once too. */
    if (err == MC_ERR_SOCKET && op->retried < MC__FAB_RETRIES && ft->t && !ft->err &&
        mc__now_ms() < ft->t->deadline_ms) {
        static const int backoff_ms[MC__FAB_RETRIES] = {10, 50, 200};
        mc__fab_probe(f, ft->ps);
        op->not_before = mc__now_ms() + (uint64_t)backoff_ms[op->retried++];
        ft->unposted++;
        op->next = f->delayed;
        f->delayed = op;
        return;
    }
    if (err && !ft->err)
        ft->err = err;
    if (ft->t && (err || (!ft->posted && !ft->unposted)))
        mc__fab_task_end(ft, ft->err);
    mc__fab_task_free_if_done(ft, f);
}

static int mc__fab_post(mc__fabric_t *f, mc__fab_op_t *op) {
    mc__fab_task_t *ft = op->ft;
    if (ft->write) {
        struct iovec iov = {.iov_base = op->local, .iov_len = op->len};
        struct fi_rma_iov rma = {.addr = op->raddr, .len = op->len, .key = ft->rkey};
        void *desc = op->ldesc;
        struct fi_msg_rma msg = {.msg_iov = &iov,
                                 .desc = &desc,
                                 .iov_count = 1,
                                 .addr = ft->dest,
                                 .rma_iov = &rma,
                                 .rma_iov_count = 1,
                                 .context = &op->ctx};
        return (int)fi_writemsg(f->ep, &msg, f->write_flags);
    }
    /* a READ's completion means its bytes are here, whatever the flags */
    return (int)fi_read(f->ep, op->local, op->len, op->ldesc, ft->dest, op->raddr, ft->rkey,
                        &op->ctx);
}

/* Posts queued chunks while there is room; returns how many it posted. */
static int mc__fab_post_some(mc__fabric_t *f) {
    int posted = 0;
    if (f->delayed) { /* retries that are due join the queue, once their peer answered */
        uint64_t now = mc__now_ms();
        mc__fab_op_t **pp = &f->delayed;
        while (*pp) {
            mc__fab_op_t *op = *pp;
            int v = op->not_before <= now && op->ft->t ? mc__fab_probe_verdict(f, op->ft) : 1;
            if (op->not_before <= now && v != 0) {
                *pp = op->next;
                if (v < 0) { /* dead, or restarted: the task fails now */
                    mc__fab_task_t *ft = op->ft;
                    ft->unposted--;
                    ft->posted++;
                    op->retried = MC__FAB_RETRIES;
                    mc__fab_op_done(f, op, MC_ERR_SOCKET);
                } else {
                    mc__fab_queue(f, op);
                }
            } else {
                pp = &op->next;
            }
        }
    }
    while (f->postq_head && f->inflight < f->max_inflight) {
        mc__fab_op_t *op = f->postq_head;
        mc__fab_task_t *ft = op->ft;
        int rc = 0;
        if (ft->t && !ft->err && ft->gen != atomic_load(&ft->ps->gen) && mc__fab_retarget(f, ft))
            rc = -FI_ENOTCONN; /* its peer restarted meanwhile */
        else if (ft->t && !ft->err)
            rc = mc__fab_post(f, op);
        if (rc == -FI_EAGAIN)
            break; /* the provider's queue is full: read completions first */
        f->postq_head = op->next;
        if (!f->postq_head)
            f->postq_tail = NULL;
        ft->unposted--;
        if (!ft->t || ft->err) { /* the task already ended: drop the rest of it */
            mc__fab_task_free_if_done(ft, f);
            continue;
        }
        if (rc) {
            if (!ft->err)
                MC_INFO("fabric: posting a %s of %llu bytes failed: %s",
                        ft->write ? "write" : "read", (unsigned long long)op->len,
                        mc__fab_err(f, rc));
            ft->posted++; /* accounted as posted-and-completed with an error */
            mc__fab_op_done(f, op, mc__fab_code(rc));
            continue;
        }
        ft->posted++;
        f->inflight++;
        posted++;
    }
    return posted;
}

/* Reads what completed; returns how many. */
static int mc__fab_reap(mc__fabric_t *f, int wait_ms) {
    struct fi_cq_entry ent[32];
    ssize_t n;
    if (wait_ms > 0 && f->can_wait)
        n = fi_cq_sread(f->cq, ent, 32, NULL, wait_ms);
    else
        n = fi_cq_read(f->cq, ent, 32);
    if (n > 0) {
        for (ssize_t i = 0; i < n; i++) {
            f->inflight--;
            mc__fab_op_done(f, ent[i].op_context, 0);
        }
        return (int)n;
    }
    if (n == -FI_EAVAIL) {
        struct fi_cq_err_entry err;
        memset(&err, 0, sizeof(err));
        if (fi_cq_readerr(f->cq, &err, 0) == 1 && err.op_context) {
            mc__fab_op_t *op = err.op_context;
            if (!op->ft->err) /* once per task */
                MC_INFO("fabric: a %s of %llu bytes failed: %s", op->ft->write ? "write" : "read",
                        (unsigned long long)op->len, mc__fab_err(f, err.err));
            f->inflight--;
            mc__fab_op_done(f, op, mc__fab_code(err.err));
            return 1;
        }
    }
    if (wait_ms > 0 && !f->can_wait) {
        struct timespec ts = {0, 200 * 1000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

static void mc__fab_take_incoming(mc__fabric_t *f, mc__fab_task_t *list) {
    while (list) {
        mc__fab_task_t *ft = list;
        list = ft->in_next;
        ft->prev = NULL;
        ft->next = f->active;
        if (f->active)
            f->active->prev = ft;
        f->active = ft;
        for (uint32_t i = 0; i < ft->nops; i++)
            mc__fab_queue(f, &ft->ops[i]);
    }
}

static void mc__fab_deadlines(mc__fabric_t *f) {
    uint64_t now = mc__now_ms();
    mc__fab_task_t *ft = f->active;
    while (ft) {
        mc__fab_task_t *next = ft->next;
        /* past its deadline, or its peer was found gone (or restarted) since it started: a
         * provider may hold chunks to a dead endpoint until the deadline without a word */
        if (ft->t &&
            (now >= ft->t->deadline_ms || (atomic_load(&ft->ps->probe_seq) > ft->probe_seq &&
                                           atomic_load(&ft->ps->probe_alive) != ft->instance))) {
            mc__fab_task_end(ft, MC_ERR_SOCKET);
            mc__fab_task_free_if_done(ft, f);
        }
        ft = next;
    }
}

static void *mc__fab_thread(void *arg) {
    mc__fabric_t *f = arg;
    uint64_t last_scan = 0;
    for (;;) {
        mc__fab_task_t *in;
        int stop, busy;
        pthread_mutex_lock(&f->lock);
        in = f->in_head;
        f->in_head = f->in_tail = NULL;
        stop = f->stop;
        /* every provider call of the passes before has returned: barriers asked meanwhile are
         * answered (the lock orders them both ways) */
        if (f->barrier_passed != f->barrier_asked) {
            f->barrier_passed = f->barrier_asked;
            pthread_cond_broadcast(&f->barrier_cond);
        }
        pthread_mutex_unlock(&f->lock);
        mc__fab_take_incoming(f, in);
        if (stop)
            break;
        busy = mc__fab_post_some(f);
        busy += mc__fab_reap(f, f->inflight || f->postq_head ? 0 : 5);
        if (mc__now_ms() != last_scan) {
            last_scan = mc__now_ms();
            mc__fab_deadlines(f);
        }
        if (!busy && (f->inflight || f->postq_head))
            mc__fab_reap(f, 1); /* waiting on the provider: let it progress without spinning */
    }
    /* the engine is closing: every task still here fails now (their chunks die with the
     * endpoint in close) */
    for (mc__fab_task_t *ft = f->active; ft; ft = ft->next)
        mc__fab_task_end(ft, MC_ERR_CONTEXT);
    return NULL;
}

static void mc__fab_wake(mc__fabric_t *f) {
    if (f->can_wait)
        fi_cq_signal(f->cq);
}

void mc__fab_barrier(mc_engine_t *e) {
    mc__fabric_t *f = e ? e->tp_state[MC__TP_FABRIC] : NULL;
    uint64_t mine;
    if (!f)
        return;
    pthread_mutex_lock(&f->lock);
    mine = ++f->barrier_asked;
    pthread_mutex_unlock(&f->lock);
    mc__fab_wake(f); /* out of a blocking completion-queue read */
    /* bounded: the thread's own waits are (5 ms at most), and close wakes us */
    pthread_mutex_lock(&f->lock);
    while (!f->stop && f->barrier_passed < mine)
        pthread_cond_wait(&f->barrier_cond, &f->lock);
    pthread_mutex_unlock(&f->lock);
}

/* ---- submitting ---- */

/* Our address-vector entry for the peer's current instance (av_lock held). */
static int mc__fab_peer_addr(mc__fabric_t *f, mc__fab_peer_t *ps, const mc__desc_t *d,
                             const mc__fab_desc_t *fd, fi_addr_t *out, uint64_t *gen) {
    fi_addr_t a = FI_ADDR_UNSPEC;
    int rc;
    *gen = atomic_load(&ps->gen);
    if (ps->instance_id == d->instance_id) {
        *out = ps->addr;
        return 0;
    }
    /* a new peer, or another instance of it: the old entry stays (entries are small and the
     * old instance is gone), a new one is added */
    rc = fi_av_insert(f->av, fd->addr, 1, &a, 0, NULL);
    if (rc != 1) {
        MC_WARN("fabric: cannot add peer %s to the address vector: %s", d->name,
                mc__fab_err(f, rc < 0 ? rc : -FI_EINVAL));
        return -1;
    }
    ps->instance_id = d->instance_id;
    ps->addr = a;
    memcpy(ps->name, fd->addr, fd->addrlen);
    ps->namelen = fd->addrlen;
    *out = a;
    return 0;
}

static int mc__fab_submit(mc_engine_t *e, mc__task_t *t) {
    mc__fabric_t *f = e->tp_state[MC__TP_FABRIC];
    mc__peer_t *p = t->peer;
    mc__fab_peer_t *ps = p ? p->tp_peer[MC__TP_FABRIC] : NULL;
    mc__fab_task_t *ft;
    const mc__fab_mr_t *lm;
    const mc__fab_desc_t *fd;
    uint64_t nops, raddr = 0, rkey = 0;
    void *ldesc = NULL;
    fi_addr_t dest = FI_ADDR_UNSPEC;
    uint64_t gen = 0, instance = 0;
    int ok = 0;
    if (!f || !ps)
        return MC__TP_DECLINED;
    pthread_rwlock_rdlock(&f->mr_lock);
    lm = mc__fab_mr_find(f, (uint64_t)(uintptr_t)t->local, t->len);
    if (lm)
        ldesc = lm->desc;
    pthread_rwlock_unlock(&f->mr_lock);
    if (!lm)
        return MC__TP_DECLINED; /* our buffer is not registered with the provider */
    pthread_mutex_lock(&p->lock);
    fd = p->desc ? mc__desc_priv(p->desc, "fabric") : NULL;
    if (fd && !strcmp(fd->prov, f->prov)) {
        long i = mc__desc_find(p->desc, t->remote, t->len);
        if (i >= 0 && mc__fab_desc_key(fd, p->desc->bufs[i].addr, &rkey)) {
            raddr = fd->virt ? t->remote : t->remote - p->desc->bufs[i].addr;
            pthread_mutex_lock(&f->av_lock);
            ok = mc__fab_peer_addr(f, ps, p->desc, fd, &dest, &gen) == 0;
            instance = p->desc->instance_id;
            pthread_mutex_unlock(&f->av_lock);
        }
    }
    pthread_mutex_unlock(&p->lock);
    if (!ok)
        return MC__TP_DECLINED; /* a tcp-only peer, another provider, or a buffer without key */
    nops = (t->len + f->chunk - 1) / f->chunk;
    ft = mc__calloc(1, sizeof(*ft) + nops * sizeof(mc__fab_op_t));
    if (!ft)
        return MC__TP_DECLINED;
    ft->t = t;
    ft->e = e;
    ft->ps = ps;
    ft->gen = gen;
    ft->instance = instance;
    ft->probe_seq = atomic_load(&ps->probe_seq);
    ft->dest = dest;
    ft->rkey = rkey;
    ft->write = t->opcode == MC_OPCODE_WRITE;
    ft->nops = (uint32_t)nops;
    ft->unposted = (uint32_t)nops;
    for (uint64_t i = 0; i < nops; i++) {
        uint64_t off = i * f->chunk;
        mc__fab_op_t *op = &ft->ops[i];
        op->ft = ft;
        op->local = t->local + off;
        op->ldesc = ldesc;
        op->raddr = raddr + off;
        op->len = t->len - off < f->chunk ? t->len - off : f->chunk;
    }
    t->nslices = (uint32_t)nops;
    pthread_mutex_lock(&f->lock);
    if (f->stop) {
        pthread_mutex_unlock(&f->lock);
        mc__free(ft);
        return MC__TP_DECLINED;
    }
    if (f->in_tail)
        f->in_tail->in_next = ft;
    else
        f->in_head = ft;
    f->in_tail = ft;
    pthread_mutex_unlock(&f->lock);
    mc__fab_wake(f);
    return 0;
}

/* ---- setup ---- */

static struct fi_info *mc__fab_hints(const mc__fi_api_t *api, const char *prov, int delivery,
                                     int hmem) {
    struct fi_info *h = api->dupinfo(NULL);
    if (!h)
        return NULL;
    /* A WRITE's completion must mean its bytes are in the target's memory (and were accepted
     * there), not just that they left: delivery complete where the provider offers it. */
    if (delivery)
        h->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
    h->caps = FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
    h->mode = FI_CONTEXT;
    h->ep_attr->type = FI_EP_RDM;
    h->domain_attr->mr_mode =
        FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
    /* device memory: we pass every buffer's descriptor, which is what FI_MR_HMEM asks */
    if (hmem) {
        h->caps |= FI_HMEM;
        h->domain_attr->mr_mode |= FI_MR_HMEM;
    }
    h->domain_attr->threading = FI_THREAD_SAFE;
    h->addr_format = FI_FORMAT_UNSPEC;
    if (prov) {
        h->fabric_attr->prov_name = strdup(prov); /* fi_freeinfo frees it with free() */
        if (!h->fabric_attr->prov_name) {
            api->freeinfo(h);
            return NULL;
        }
    }
    return h;
}

/* Providers whose WRITE completes only once the target's side acknowledged it (verbs RC, efa,
 * cxi), delivery complete asked or not: the only ones taken without it. */
static int mc__fab_acks_writes(const char *prov) {
    static const char *const acked[] = {"verbs", "efa", "cxi"};
    for (size_t i = 0; i < sizeof(acked) / sizeof(acked[0]); i++) {
        size_t n = strlen(acked[i]);
        if (!strncmp(prov, acked[i], n) && (prov[n] == 0 || prov[n] == ';'))
            return 1;
    }
    return 0;
}

/* The first provider offering RMA: the named one (MC_FABRIC_PROVIDER), else the first hardware
 * provider present. node: bind where our RPC port is (the interface for tcp, the device for
 * verbs), falling back to any when the provider cannot. *delivery: whether its WRITEs are asked
 * for delivery complete. */
static struct fi_info *mc__fab_pick(const mc__fi_api_t *api, const char *node, const char *want,
                                    int want_hmem, int *delivery, const char **why) {
    static const char *const hw[] = {"verbs;ofi_rxm", "efa", "cxi"};
    const char *const *list = want ? &want : hw;
    size_t nlist = want ? 1 : sizeof(hw) / sizeof(hw[0]);
    *why = "no RDMA device (libfabric found no verbs, efa or cxi provider)";
    for (size_t i = 0; i < nlist; i++) {
        int refused = 0;
        /* delivery complete first (what a WRITE's completion must mean), then device memory
         * (FI_HMEM) where wanted: a provider without it is still taken, for host memory */
        for (int k = 0; k < 4; k++) {
            int dc = k < 2, hmem = k % 2 == 0;
            struct fi_info *h, *info = NULL;
            int rc;
            if (hmem && !want_hmem)
                continue;
            h = mc__fab_hints(api, list[i], dc, hmem);
            if (!h) {
                *why = "out of memory";
                return NULL;
            }
            rc = api->getinfo(MC__FAB_VERSION, node, NULL, node ? FI_SOURCE : 0, h, &info);
            if (rc && node)
                rc = api->getinfo(MC__FAB_VERSION, NULL, NULL, 0, h, &info);
            api->freeinfo(h);
            if (rc || !info)
                continue;
            if (!dc && !mc__fab_acks_writes(info->fabric_attr->prov_name)) {
                /* its completion may come while the bytes are still on their way */
                MC_INFO("fabric: %s offers no delivery-complete writes; not used",
                        info->fabric_attr->prov_name);
                api->freeinfo(info);
                refused = 1;
                *why = "the provider offers no delivery-complete writes (a WRITE's completion "
                       "would not mean its bytes arrived)";
                continue;
            }
            if (!dc)
                MC_INFO("fabric: %s offers no delivery-complete writes; its completions come "
                        "from the target's acknowledgment",
                        info->fabric_attr->prov_name);
            *delivery = dc;
            return info;
        }
        if (want && !refused)
            *why = "the provider named by MC_FABRIC_PROVIDER offers no RMA endpoint here";
    }
    return NULL;
}

static void mc__fab_destroy(mc__fabric_t *f) {
    if (f->ep)
        fi_close(&f->ep->fid);
    for (size_t i = 0; i < f->nmrs; i++)
        fi_close(&f->mrs[i].mr->fid);
    mc__free(f->mrs);
    if (f->av)
        fi_close(&f->av->fid);
    if (f->cq)
        fi_close(&f->cq->fid);
    if (f->domain)
        fi_close(&f->domain->fid);
    if (f->fabric)
        fi_close(&f->fabric->fid);
    if (f->info)
        f->api->freeinfo(f->info);
    pthread_rwlock_destroy(&f->mr_lock);
    pthread_mutex_destroy(&f->av_lock);
    pthread_mutex_destroy(&f->lock);
    pthread_cond_destroy(&f->probe_cond);
    pthread_cond_destroy(&f->barrier_cond);
    mc__free(f);
}

static int mc__fab_open(mc__fabric_t *f, const char **why) {
    struct fi_info *i = f->info;
    struct fi_cq_attr cqa;
    struct fi_av_attr ava;
    int rc;
    memset(&cqa, 0, sizeof(cqa));
    memset(&ava, 0, sizeof(ava));
    snprintf(f->prov, sizeof(f->prov), "%s", i->fabric_attr->prov_name);
    f->virt_addr = (i->domain_attr->mr_mode & FI_MR_VIRT_ADDR) != 0;
    f->mr_local = (i->domain_attr->mr_mode & FI_MR_LOCAL) != 0;
    f->prov_key = (i->domain_attr->mr_mode & FI_MR_PROV_KEY) != 0;
    f->mr_endpoint = (i->domain_attr->mr_mode & FI_MR_ENDPOINT) != 0;
    f->hmem = (i->caps & FI_HMEM) != 0;
    *why = "fi_fabric";
    rc = f->api->fabric(i->fabric_attr, &f->fabric, NULL);
    if (!rc) {
        *why = "fi_domain";
        rc = fi_domain(f->fabric, i, &f->domain, NULL);
    }
    if (!rc) {
        cqa.format = FI_CQ_FORMAT_CONTEXT;
        cqa.size = f->max_inflight * 2u;
        cqa.wait_obj = FI_WAIT_UNSPEC;
        *why = "fi_cq_open";
        rc = fi_cq_open(f->domain, &cqa, &f->cq, NULL);
        f->can_wait = rc == 0;
        if (rc) { /* a provider without wait objects: poll */
            cqa.wait_obj = FI_WAIT_NONE;
            rc = fi_cq_open(f->domain, &cqa, &f->cq, NULL);
        }
    }
    if (!rc) {
        ava.type = FI_AV_UNSPEC;
        *why = "fi_av_open";
        rc = fi_av_open(f->domain, &ava, &f->av, NULL);
    }
    if (!rc) {
        *why = "fi_endpoint";
        rc = fi_endpoint(f->domain, i, &f->ep, NULL);
    }
    if (!rc) {
        *why = "fi_ep_bind";
        rc = fi_ep_bind(f->ep, &f->av->fid, 0);
        if (!rc)
            rc = fi_ep_bind(f->ep, &f->cq->fid, FI_TRANSMIT | FI_RECV);
    }
    if (!rc) {
        *why = "fi_enable";
        rc = fi_enable(f->ep);
    }
    if (!rc) {
        f->addrlen = sizeof(f->addr);
        *why = "fi_getname";
        rc = fi_getname(&f->ep->fid, f->addr, &f->addrlen);
        if (!rc && (f->addrlen == 0 || f->addrlen > sizeof(f->addr)))
            rc = -FI_ETOOSMALL;
    }
    if (rc)
        MC_INFO("fabric: %s failed with %s: %s", *why, f->prov, mc__fab_err(f, rc));
    return rc;
}

static int mc__fab_init(mc_engine_t *e) {
    const char *want = getenv("MC_FABRIC_PROVIDER");
    const char *why = NULL;
    int strict = e->proto == MC__PROTO_FABRIC;
    int delivery = 0;
    const mc__fi_api_t *api;
    mc__fabric_t *f;
    if (e->proto != MC__PROTO_RDMA && e->proto != MC__PROTO_FABRIC)
        return 0;
    if (want && !*want)
        want = NULL;
    api = mc__fi_load(&why);
    f = api ? mc__calloc(1, sizeof(*f)) : NULL;
    if (api && !f)
        return MC_ERR_MEMORY;
    if (f) {
        f->e = e;
        f->api = api;
        f->next_key = 1;
        f->chunk = (uint64_t)mc__env_size_in("MC_FABRIC_CHUNK", 1 << 20, 4096, 1 << 30);
        f->max_inflight = (uint32_t)mc__env_size_in("MC_FABRIC_INFLIGHT", 64, 1, 4096);
        pthread_rwlock_init(&f->mr_lock, NULL);
        pthread_mutex_init(&f->av_lock, NULL);
        pthread_mutex_init(&f->lock, NULL);
        pthread_cond_init(&f->probe_cond, NULL);
        pthread_cond_init(&f->barrier_cond, NULL);
        /* MC_FABRIC_HMEM=0: never ask for device memory support (a provider may pick slower
         * protocols to offer it) */
        f->info = mc__fab_pick(api, e->host, want, mc__env_i64_in("MC_FABRIC_HMEM", 1, 0, 1) != 0,
                               &delivery, &why);
        f->write_flags = FI_COMPLETION | (delivery ? FI_DELIVERY_COMPLETE : 0);
        if (f->info) {
            if (f->info->ep_attr->max_msg_size && f->chunk > f->info->ep_attr->max_msg_size)
                f->chunk = f->info->ep_attr->max_msg_size;
            if (f->info->tx_attr->size && f->max_inflight > f->info->tx_attr->size)
                f->max_inflight = (uint32_t)f->info->tx_attr->size;
        }
        if (!f->info || mc__fab_open(f, &why)) {
            mc__fab_destroy(f);
            f = NULL;
        }
    }
    if (!f) {
        if (strict) {
            MC_ERROR("protocol \"fabric\": the fabric transport cannot start: %s", why);
            return MC_ERR_DEVICE_NOT_FOUND;
        }
        /* one warning, as before the fabric transport existed; peers get tcp/shm */
        MC_WARN("protocol \"rdma\" is not available on this host (%s); using tcp/shm (auto)", why);
        e->proto = MC__PROTO_AUTO;
        return 0;
    }
    /* memory registered before initialize */
    pthread_rwlock_rdlock(&e->reg.lock);
    for (size_t i = 0; i < e->reg.n; i++)
        mc__fab_mr_add(f, &e->reg.regions[i]);
    pthread_rwlock_unlock(&e->reg.lock);
    if (pthread_create(&f->prober, NULL, mc__fab_prober, f)) {
        mc__fab_destroy(f);
        return MC_ERR_MEMORY;
    }
    f->prober_started = 1;
    if (pthread_create(&f->thr, NULL, mc__fab_thread, f)) {
        mc__cond_raise(&f->lock, &f->probe_cond, &f->stop);
        pthread_join(f->prober, NULL);
        mc__fab_destroy(f);
        return MC_ERR_MEMORY;
    }
    f->thr_started = 1;
    e->tp_state[MC__TP_FABRIC] = f;
    MC_INFO("fabric transport up: provider %s, %llu-byte chunks, %u in flight, device memory "
            "(FI_HMEM) %s, writes complete %s",
            f->prov, (unsigned long long)f->chunk, f->max_inflight, f->hmem ? "yes" : "no",
            delivery ? "on delivery" : "on the target's acknowledgment");
    return 0;
}

/* Stops the progress thread (tasks still in it fail) and the endpoint with it: from here on no
 * chunk of ours touches memory, and peers' accesses to ours are refused. */
static void mc__fab_close(mc_engine_t *e) {
    mc__fabric_t *f = e->tp_state[MC__TP_FABRIC];
    if (!f || !f->thr_started)
        return;
    pthread_mutex_lock(&f->lock);
    f->stop = 1;
    pthread_cond_broadcast(&f->probe_cond);
    pthread_cond_broadcast(&f->barrier_cond);
    pthread_mutex_unlock(&f->lock);
    mc__fab_wake(f);
    pthread_join(f->thr, NULL);
    f->thr_started = 0;
    if (f->prober_started) /* it ends after the probe it may be running (bounded) */
        pthread_join(f->prober, NULL);
    f->prober_started = 0;
    fi_close(&f->ep->fid);
    f->ep = NULL;
    while (f->active) {
        mc__fab_task_t *ft = f->active;
        f->active = ft->next;
        mc__free(ft);
    }
    f->postq_head = f->postq_tail = NULL;
    f->delayed = NULL;
}

static void mc__fab_release(mc_engine_t *e) {
    if (!e->tp_state[MC__TP_FABRIC])
        return;
    mc__fab_close(e);
    mc__fab_destroy(e->tp_state[MC__TP_FABRIC]);
    e->tp_state[MC__TP_FABRIC] = NULL;
}

static int mc__fab_carries(const mc_engine_t *e, const mc__route_t *r) {
    /* a peer that published no fabric part is not asked; submit declines what the peer cannot
     * take (another provider, a buffer without a key): tcp carries those */
    return e->tp_state[MC__TP_FABRIC] && r->peer && (r->reach & (1u << MC__TP_FABRIC)) &&
           (r->proto == MC__PROTO_RDMA || r->proto == MC__PROTO_FABRIC);
}

static int mc__fab_peer_init(mc__peer_t *p) {
    mc__fab_peer_t *ps = mc__calloc(1, sizeof(*ps));
    if (!ps)
        return MC_ERR_MEMORY;
    ps->peer = p;
    p->tp_peer[MC__TP_FABRIC] = ps;
    return 0;
}

static void mc__fab_peer_destroy(mc__peer_t *p) {
    mc__free(p->tp_peer[MC__TP_FABRIC]);
    p->tp_peer[MC__TP_FABRIC] = NULL;
}

const mc__transport_t mc__tp_fabric = {.name = "fabric",
                                       .id = MC__TP_FABRIC,
                                       .init = mc__fab_init,
                                       .close = mc__fab_close,
                                       .release = mc__fab_release,
                                       .carries = mc__fab_carries,
                                       .submit = mc__fab_submit,
                                       .peer_init = mc__fab_peer_init,
                                       .peer_destroy = mc__fab_peer_destroy,
                                       .describe = mc__fab_describe,
                                       .desc_parse = mc__fab_desc_parse,
                                       .mem_registered = mc__fab_mem_registered,
                                       .mem_unregistered = mc__fab_mem_unregistered};

#else /* built without <rdma/fabric.h>: the transport exists and is never up */

static int mc__fab_init(mc_engine_t *e) {
    if (e->proto == MC__PROTO_FABRIC) {
        MC_ERROR("protocol \"fabric\": this build has no fabric transport (built without "
                 "libfabric's headers)");
        return MC_ERR_DEVICE_NOT_FOUND;
    }
    if (e->proto == MC__PROTO_RDMA) {
        MC_WARN("protocol \"rdma\" is not available on this host (built without libfabric); "
                "using tcp/shm (auto)");
        e->proto = MC__PROTO_AUTO;
    }
    return 0;
}

static int mc__fab_carries(const mc_engine_t *e, const mc__route_t *r) {
    return 0;
}

static int mc__fab_submit(mc_engine_t *e, mc__task_t *t) {
    return MC__TP_DECLINED;
}

void mc__fab_barrier(mc_engine_t *e) {
    (void)e; /* no provider: nothing of ours is written behind the engine's back */
}

const mc__transport_t mc__tp_fabric = {.name = "fabric",
                                       .id = MC__TP_FABRIC,
                                       .init = mc__fab_init,
                                       .carries = mc__fab_carries,
                                       .submit = mc__fab_submit};
#endif
