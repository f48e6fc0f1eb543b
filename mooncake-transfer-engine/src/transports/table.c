/* The transport table (transport.h): adding a transport is its own file(s), an id, and one entry
 * here. Order matters twice: it is the order of init (and reverse of close), and the order in
 * which carries() is asked, so the cheapest transport that can carry a request comes first. */
#include "mooncake/common/log.h"
#include "te_internal.h"

static const mc__transport_t *const mc__table[] = {&mc__tp_local, &mc__tp_shm, &mc__tp_fabric,
                                                   &mc__tp_tcp};
#define MC__NTP (sizeof(mc__table) / sizeof(mc__table[0]))

const mc__transport_t *mc__transport_get(int id) {
    for (size_t i = 0; i < MC__NTP; i++)
        if (mc__table[i]->id == id)
            return mc__table[i];
    return NULL;
}

int mc__transports_init(mc_engine_t *e) {
    for (size_t i = 0; i < MC__NTP; i++) {
        int rc = mc__table[i]->init ? mc__table[i]->init(e) : 0;
        if (rc) {
            while (i-- > 0) {
                if (mc__table[i]->close)
                    mc__table[i]->close(e);
                if (mc__table[i]->release)
                    mc__table[i]->release(e);
            }
            return rc;
        }
    }
    return 0;
}

void mc__transports_interrupt(mc_engine_t *e) {
    for (size_t i = 0; i < MC__NTP; i++)
        if (mc__table[i]->interrupt)
            mc__table[i]->interrupt(e);
}

void mc__transports_close(mc_engine_t *e) {
    for (size_t i = MC__NTP; i-- > 0;)
        if (mc__table[i]->close)
            mc__table[i]->close(e);
}

void mc__transports_release(mc_engine_t *e) {
    for (size_t i = MC__NTP; i-- > 0;)
        if (mc__table[i]->release)
            mc__table[i]->release(e);
}

const mc__transport_t *mc__transport_fallback(void) {
    for (size_t i = 0; i < MC__NTP; i++)
        if (!mc__table[i]->carries)
            return mc__table[i];
    return NULL; /* a table without a fallback is a build error in spirit: see the tests */
}

const mc__transport_t *mc__transport_route(const mc_engine_t *e, const mc__route_t *r) {
    for (size_t i = 0; i < MC__NTP; i++)
        if (!mc__table[i]->carries || mc__table[i]->carries(e, r))
            return mc__table[i];
    return mc__transport_fallback();
}

int mc__transports_peer_init(mc__peer_t *p) {
    for (size_t i = 0; i < MC__NTP; i++) {
        if (mc__table[i]->peer_init && mc__table[i]->peer_init(p) != 0) {
            while (i-- > 0)
                if (mc__table[i]->peer_destroy)
                    mc__table[i]->peer_destroy(p);
            return MC_ERR_MEMORY;
        }
    }
    return 0;
}

void mc__transports_peer_destroy(mc__peer_t *p) {
    for (size_t i = MC__NTP; i-- > 0;)
        if (mc__table[i]->peer_destroy)
            mc__table[i]->peer_destroy(p);
}

void mc__transports_peer_tokens(mc__peer_t *p, uint64_t tok[MC__TP_COUNT]) {
    for (size_t i = 0; i < MC__NTP; i++)
        tok[mc__table[i]->id] =
            mc__table[i]->peer_fetch_token ? mc__table[i]->peer_fetch_token(p) : 0;
}

void mc__transports_peer_swapped(mc__peer_t *p, const uint64_t tok[MC__TP_COUNT], int restarted) {
    for (size_t i = 0; i < MC__NTP; i++)
        if (mc__table[i]->peer_swapped)
            mc__table[i]->peer_swapped(p, tok[mc__table[i]->id], restarted);
}

void mc__transports_peer_refreshed(mc__peer_t *p, int restarted) {
    for (size_t i = 0; i < MC__NTP; i++)
        if (mc__table[i]->peer_refreshed)
            mc__table[i]->peer_refreshed(p, restarted);
}

void mc__transports_peer_abort(mc_engine_t *e, mc__peer_t *p) {
    for (size_t i = 0; i < MC__NTP; i++)
        if (mc__table[i]->peer_abort)
            mc__table[i]->peer_abort(e, p);
}

void mc__transports_describe(const mc_engine_t *e, mc__desc_t *d) {
    for (size_t i = 0; i < MC__NTP; i++)
        if (mc__table[i]->describe)
            mc__table[i]->describe(e, d);
}

void mc__transports_desc_parsed(mc__desc_t *d) {
    d->reach = 0;
    for (size_t i = 0; i < MC__NTP; i++) {
        const mc__transport_t *tp = mc__table[i];
        mc__desc_part_t *part = tp->desc_parse ? mc__desc_part(d, tp->name) : NULL;
        int rc;
        if (!part)
            continue;
        rc = tp->desc_parse(part->json, &part->priv, &part->priv_free);
        if (rc) {
            part->priv = NULL;
            MC_WARN("segment %s: its %s part is malformed (%s); not reachable over %s", d->name,
                    tp->name, mc_strerror(rc), tp->name);
            continue;
        }
        d->reach |= 1u << tp->id;
    }
}

void mc__transports_mem_registered(mc_engine_t *e, const mc__region_t *regs, size_t n) {
    for (size_t i = 0; i < MC__NTP; i++)
        if (mc__table[i]->mem_registered)
            mc__table[i]->mem_registered(e, regs, n);
}

void mc__transports_mem_unregistered(mc_engine_t *e, const uint64_t *addrs, size_t n) {
    for (size_t i = MC__NTP; i-- > 0;)
        if (mc__table[i]->mem_unregistered)
            mc__table[i]->mem_unregistered(e, addrs, n);
}

void mc__transport_account(mc_engine_t *e, int id, unsigned long long bytes) {
    atomic_fetch_add_explicit(&e->stat_tasks[id], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&e->stat_bytes[id], bytes, memory_order_relaxed);
}
