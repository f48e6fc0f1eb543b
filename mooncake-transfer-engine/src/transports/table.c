/* What the core does through the transport table (transport.h): each call walks the engine's
 * transports (e->tps, from list.c, in the list's order) and calls one hook of each. */
#include "mooncake/common/log.h"
#include "te_internal.h"

const mc__transport_t *mc__transport_get(const mc_engine_t *e, int id) {
    for (size_t i = 0; i < e->ntp; i++)
        if (e->tps[i]->id == id)
            return e->tps[i];
    return NULL;
}

int mc__transports_init(mc_engine_t *e) {
    for (size_t i = 0; i < e->ntp; i++) {
        int rc = e->tps[i]->init ? e->tps[i]->init(e) : 0;
        if (rc) {
            while (i-- > 0) {
                if (e->tps[i]->close)
                    e->tps[i]->close(e);
                if (e->tps[i]->release)
                    e->tps[i]->release(e);
            }
            return rc;
        }
    }
    return 0;
}

void mc__transports_interrupt(mc_engine_t *e) {
    for (size_t i = 0; i < e->ntp; i++)
        if (e->tps[i]->interrupt)
            e->tps[i]->interrupt(e);
}

void mc__transports_close(mc_engine_t *e) {
    for (size_t i = e->ntp; i-- > 0;)
        if (e->tps[i]->close)
            e->tps[i]->close(e);
}

void mc__transports_release(mc_engine_t *e) {
    for (size_t i = e->ntp; i-- > 0;)
        if (e->tps[i]->release)
            e->tps[i]->release(e);
}

const mc__transport_t *mc__transport_fallback(const mc_engine_t *e) {
    for (size_t i = 0; i < e->ntp; i++)
        if (!e->tps[i]->carries)
            return e->tps[i];
    return NULL; /* a table without a fallback is a build error in spirit: see the tests */
}

const mc__transport_t *mc__transport_route(const mc_engine_t *e, const mc__route_t *r) {
    for (size_t i = 0; i < e->ntp; i++)
        if (!e->tps[i]->carries || e->tps[i]->carries(e, r))
            return e->tps[i];
    return mc__transport_fallback(e);
}

int mc__transports_peer_init(const mc_engine_t *e, mc__peer_t *p) {
    for (size_t i = 0; i < e->ntp; i++) {
        if (e->tps[i]->peer_init && e->tps[i]->peer_init(p) != 0) {
            while (i-- > 0)
                if (e->tps[i]->peer_destroy)
                    e->tps[i]->peer_destroy(p);
            return MC_ERR_MEMORY;
        }
    }
    return 0;
}

void mc__transports_peer_destroy(const mc_engine_t *e, mc__peer_t *p) {
    for (size_t i = e->ntp; i-- > 0;)
        if (e->tps[i]->peer_destroy)
            e->tps[i]->peer_destroy(p);
}

void mc__transports_peer_tokens(const mc_engine_t *e, mc__peer_t *p, uint64_t tok[MC__TP_COUNT]) {
    for (size_t i = 0; i < e->ntp; i++)
        tok[e->tps[i]->id] = e->tps[i]->peer_fetch_token ? e->tps[i]->peer_fetch_token(p) : 0;
}

void mc__transports_peer_swapped(const mc_engine_t *e, mc__peer_t *p,
                                 const uint64_t tok[MC__TP_COUNT], int restarted) {
    for (size_t i = 0; i < e->ntp; i++)
        if (e->tps[i]->peer_swapped)
            e->tps[i]->peer_swapped(p, tok[e->tps[i]->id], restarted);
}

void mc__transports_peer_refreshed(const mc_engine_t *e, mc__peer_t *p, int restarted) {
    for (size_t i = 0; i < e->ntp; i++)
        if (e->tps[i]->peer_refreshed)
            e->tps[i]->peer_refreshed(p, restarted);
}

void mc__transports_peer_abort(mc_engine_t *e, mc__peer_t *p) {
    for (size_t i = 0; i < e->ntp; i++)
        if (e->tps[i]->peer_abort)
            e->tps[i]->peer_abort(e, p);
}

void mc__transports_describe(const mc_engine_t *e, mc__desc_t *d) {
    for (size_t i = 0; i < e->ntp; i++)
        if (e->tps[i]->describe)
            e->tps[i]->describe(e, d);
}

void mc__transports_desc_parsed(const mc_engine_t *e, mc__desc_t *d) {
    d->reach = 0;
    for (size_t i = 0; i < e->ntp; i++) {
        const mc__transport_t *tp = e->tps[i];
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
    for (size_t i = 0; i < e->ntp; i++)
        if (e->tps[i]->mem_registered)
            e->tps[i]->mem_registered(e, regs, n);
}

void mc__transports_mem_unregistered(mc_engine_t *e, const uint64_t *addrs, size_t n) {
    for (size_t i = e->ntp; i-- > 0;)
        if (e->tps[i]->mem_unregistered)
            e->tps[i]->mem_unregistered(e, addrs, n);
}
