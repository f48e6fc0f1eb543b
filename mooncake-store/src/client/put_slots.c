/* Put slots: the client's pools of placements reserved ahead (put_slots.h). A pool holds slots
 * of one size class and one config; a put takes the newest slot, the pool asks the master for
 * more when it is empty (one round trip for several puts: 2, then 4, ... up to a byte budget),
 * and slots left unused for MC__SLOT_MAX_AGE_MS are given back, well before the master would
 * discard them as stale puts (put_start_discard_timeout, 30 s by default) and hold their space
 * until its release timeout. */
#include "client/put_slots.h"

#include <stddef.h>
#include <string.h>

#include "client/store_internal.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/config.h"
#include "mooncake/common/log.h"
#include "mooncake/common/time.h"

/* Values up to this size take slots; larger ones move enough bytes that two extra round trips
 * cost little, and their slots would hold much of a small pool idle. */
#define MC__SLOT_MAX_LEN (256u << 10)
/* Bytes one pool reserves at most in one go, and slots it holds at most. */
#define MC__SLOT_POOL_BYTES (1u << 20)
#define MC__SLOT_MAX_WANT 64u
#define MC__SLOT_CAP (2u * MC__SLOT_MAX_WANT)
#define MC__SLOT_MAX_AGE_MS 5000u

void mc__put_slots_init(mc__put_slots_t *t) {
    memset(t, 0, sizeof(*t));
    pthread_mutex_init(&t->mu, NULL);
    t->enabled = (int)mc__env_i64_in("MC_STORE_PUT_SLOTS", 1, 0, 1);
}

void mc__put_slots_forget(mc__put_slots_t *t) {
    for (int i = 0; i < MC__SLOT_POOLS; i++) {
        mc__free(t->pools[i].slots);
        t->pools[i].slots = NULL;
    }
}

void mc__put_slots_fini(mc__put_slots_t *t) {
    mc__put_slots_forget(t);
    pthread_mutex_destroy(&t->mu);
}

/* The size class of len: rounded up to an eighth of its highest power of two (64 bytes at
 * least), so values of nearly one size share a pool and a slot wastes under 1/8. */
static uint64_t mc__slot_class(uint64_t len) {
    uint64_t step = 64;
    while (step * 16 <= len)
        step *= 2;
    return (len + step - 1) / step * step;
}

/* With t->mu held: the pool of (len, wc), made when there is room; NULL when none. */
static mc__slot_pool_t *mc__pool_of(mc__put_slots_t *t, uint64_t len,
                                    const mc__replicate_config_t *wc, uint32_t *index) {
    mc__slot_pool_t *spare = NULL;
    for (uint32_t i = 0; i < MC__SLOT_POOLS; i++) {
        mc__slot_pool_t *p = &t->pools[i];
        if (p->len == len && p->replica_num == wc->replica_num && p->flags == wc->flags &&
            p->soft_pin_ttl_ms == wc->soft_pin_ttl_ms) {
            *index = i;
            return p;
        }
        if (!p->len && !spare) {
            spare = p;
            *index = i;
        }
    }
    if (!spare || !(spare->slots = mc__calloc(MC__SLOT_CAP, sizeof(*spare->slots))))
        return NULL;
    spare->len = len;
    spare->replica_num = wc->replica_num;
    spare->flags = wc->flags;
    spare->soft_pin_ttl_ms = wc->soft_pin_ttl_ms;
    spare->want = 2;
    return spare;
}

void mc__kr_copy(mc__key_replicas_t *dst, const mc__key_replicas_t *src) {
    uint32_t n = src->n_replicas < MC_MP_MAX_REPLICA_NUM ? src->n_replicas : MC_MP_MAX_REPLICA_NUM;
    memcpy(dst, src, offsetof(mc__key_replicas_t, replicas) + n * sizeof(src->replicas[0]));
    dst->key = NULL;
}

static void mc__slot_copy(mc__put_slot_t *dst, const mc__put_slot_t *src) {
    dst->got_ms = src->got_ms;
    dst->pool = src->pool;
    mc__kr_copy(&dst->kr, &src->kr);
}

/* With t->mu held: pops p's newest slot that is young enough into out (1), or 0. */
static int mc__pool_pop(mc__slot_pool_t *p, uint64_t now, mc__put_slot_t *out) {
    if (p->n == 0 || now - p->slots[p->n - 1].got_ms >= MC__SLOT_MAX_AGE_MS)
        return 0; /* the older ones below are older still: release gives them back */
    mc__slot_copy(out, &p->slots[--p->n]);
    return 1;
}

static void mc__slot_narrow(mc__put_slot_t *slot, uint64_t len) {
    slot->kr.size = len;
    for (uint32_t r = 0; r < slot->kr.n_replicas; r++)
        slot->kr.replicas[r].size = len;
}

/* With t->mu held: the pool index of a value of len bytes (-1: it takes no slot). */
static int mc__pool_for(mc__put_slots_t *t, uint64_t len, const mc__replicate_config_t *wc) {
    uint32_t idx = 0;
    if (!t->enabled || len == 0 || len > MC__SLOT_MAX_LEN || wc->n_preferred ||
        (wc->flags & MC_MP_CFG_PROMOTE) || !mc__pool_of(t, mc__slot_class(len), wc, &idx))
        return -1;
    return (int)idx;
}

/* Asks the master for the slots pool pi lacks (need) and its next share, and hands them to the
 * values of that pool still without one (pool[i] == pi + 1). */
static void mc__refill(mc_store_t *s, uint32_t pi, uint32_t need, size_t n, uint8_t *pool,
                       mc__put_slot_t *slots, uint8_t *has) {
    mc__put_slots_t *t = &s->slots;
    mc__slot_pool_t *p = &t->pools[pi];
    mc__replicate_config_t wc;
    mc__key_replicas_t *kr;
    uint64_t now = mc__now_ms(), cls;
    uint32_t want;
    size_t next = 0;
    int rc;
    pthread_mutex_lock(&t->mu);
    want = need + p->want;
    want = want < MC_MP_MAX_SLOTS ? want : MC_MP_MAX_SLOTS;
    cls = p->len;
    memset(&wc, 0, sizeof(wc));
    wc.replica_num = p->replica_num;
    wc.flags = p->flags;
    wc.soft_pin_ttl_ms = p->soft_pin_ttl_ms;
    /* Puts keep coming: ask for more next time, at least a batch's worth more. */
    p->want = p->want * 2 > need ? p->want * 2 : need;
    while (p->want > 2 &&
           (p->want > MC__SLOT_MAX_WANT || (uint64_t)p->want * cls > MC__SLOT_POOL_BYTES))
        p->want /= 2;
    pthread_mutex_unlock(&t->mu);
    kr = mc__malloc(want * sizeof(*kr)); /* the reply fills what is read */
    if (!kr)
        return;
    rc = mc__master_client_put_reserve(s->master, want, cls, &wc, kr);
    pthread_mutex_lock(&t->mu);
    if (rc == MC_ERR_NOT_IMPLEMENTED && t->enabled) {
        MC_INFO("store: the master has no put slots; puts take start, write and end");
        t->enabled = 0; /* a master that predates them */
    }
    for (uint32_t i = 0; rc == 0 && i < want; i++) {
        mc__put_slot_t *to = NULL;
        if (kr[i].code != 0 || kr[i].n_replicas == 0)
            continue; /* no room for this one: the start path evicts or waits as it must */
        while (next < n && pool[next] != pi + 1)
            next++;
        if (next < n) {
            to = &slots[next];
            has[next] = 1;
            pool[next++] = 0;
        } else if (p->n < MC__SLOT_CAP) {
            to = &p->slots[p->n++];
        }
        if (to) {
            to->got_ms = now;
            to->pool = pi;
            mc__kr_copy(&to->kr, &kr[i]);
        }
        /* else: a pool full after concurrent refills; that slot waits for the master's
         * discard timeout */
    }
    pthread_mutex_unlock(&t->mu);
    mc__free(kr);
}

void mc__put_slots_take_many(mc_store_t *s, size_t n, const uint64_t *lens,
                             const mc__replicate_config_t *wc, mc__put_slot_t *slots,
                             uint8_t *has) {
    mc__put_slots_t *t = &s->slots;
    uint32_t need[MC__SLOT_POOLS] = {0};
    uint8_t *pool = mc__calloc(n ? n : 1, 1); /* pool index + 1 of a value still without one */
    uint64_t now = mc__now_ms();
    memset(has, 0, n);
    if (!pool)
        return;
    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i < n; i++) {
        int pi = mc__pool_for(t, lens[i], wc);
        if (pi < 0)
            continue;
        if (mc__pool_pop(&t->pools[pi], now, &slots[i])) {
            has[i] = 1;
        } else {
            pool[i] = (uint8_t)(pi + 1);
            need[pi]++;
        }
    }
    pthread_mutex_unlock(&t->mu);
    for (uint32_t pi = 0; pi < MC__SLOT_POOLS; pi++)
        if (need[pi])
            mc__refill(s, pi, need[pi], n, pool, slots, has);
    for (size_t i = 0; i < n; i++)
        if (has[i])
            mc__slot_narrow(&slots[i], lens[i]);
    mc__free(pool);
}

int mc__put_slot_take(mc_store_t *s, uint64_t len, const mc__replicate_config_t *wc,
                      mc__put_slot_t *out) {
    uint8_t has = 0;
    mc__put_slots_take_many(s, 1, &len, wc, out, &has);
    return has ? 0 : 1;
}

void mc__put_slot_keep(mc_store_t *s, const mc__put_slot_t *slot) {
    mc__put_slots_t *t = &s->slots;
    mc__slot_pool_t *p = &t->pools[slot->pool % MC__SLOT_POOLS];
    pthread_mutex_lock(&t->mu);
    if (p->len && p->n < MC__SLOT_CAP) {
        /* the stack stays ordered by age: the kept slot goes below the younger ones */
        size_t at = p->n;
        while (at > 0 && p->slots[at - 1].got_ms > slot->got_ms)
            at--;
        memmove(&p->slots[at + 1], &p->slots[at], (p->n - at) * sizeof(*p->slots));
        p->n++;
        mc__slot_copy(&p->slots[at], slot);
        mc__slot_narrow(&p->slots[at], p->len);
    }
    pthread_mutex_unlock(&t->mu);
}

int mc__put_slots_commit(mc_store_t *s, size_t n, const char *const *keys, const uint64_t *lens,
                         const uint64_t *slots, int32_t *codes) {
    int lost = 0;
    int rc = mc__master_client_put_commit(s->master, n, keys, lens, slots, codes);
    for (size_t i = 0; rc == 0 && i < n; i++)
        lost |= codes[i] == MC_ERR_OBJECT_NOT_FOUND;
    /* The master restarted, or a segment went: the pooled slots may be gone too, and those
     * that are not would be handed to puts that then find theirs gone. Give them all back. */
    if (lost)
        mc__put_slots_release(s, 1);
    return rc;
}

void mc__put_slots_release(mc_store_t *s, int all) {
    mc__put_slots_t *t = &s->slots;
    uint64_t *back = NULL;
    const char **keys = NULL;
    uint64_t *lens = NULL;
    int32_t *codes = NULL;
    size_t n = 0, cap = (size_t)MC__SLOT_POOLS * MC__SLOT_CAP;
    uint64_t now = mc__now_ms();
    if (!s->master)
        return;
    back = mc__calloc(cap, sizeof(*back));
    keys = mc__calloc(cap, sizeof(*keys));
    lens = mc__calloc(cap, sizeof(*lens));
    codes = mc__calloc(cap, sizeof(*codes));
    if (!back || !keys || !lens || !codes)
        goto out;
    pthread_mutex_lock(&t->mu);
    for (int i = 0; i < MC__SLOT_POOLS; i++) {
        mc__slot_pool_t *p = &t->pools[i];
        size_t old = 0; /* the stack is ordered by age: the old ones are at the bottom */
        while (old < p->n && (all || now - p->slots[old].got_ms >= MC__SLOT_MAX_AGE_MS))
            back[n++] = p->slots[old++].kr.version;
        if (!old)
            continue; /* also a pool never used, whose slots array is still NULL */
        memmove(p->slots, p->slots + old, (p->n - old) * sizeof(*p->slots));
        p->n -= (uint32_t)old;
        if (!all)
            p->want = 2; /* they went unused: ask for fewer next time */
    }
    pthread_mutex_unlock(&t->mu);
    for (size_t i = 0; i < n; i++)
        keys[i] = "-"; /* a give-back names no key (lens[i] is 0) */
    if (n && mc__master_client_put_commit(s->master, n, keys, lens, back, codes) != 0)
        MC_DEBUG("store: giving back %zu put slots failed; the master discards them later", n);
out:
    mc__free(codes);
    mc__free(lens);
    mc__free(keys);
    mc__free(back);
}
