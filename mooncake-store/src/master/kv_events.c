/* The KV-event publisher (kv_events.h): a bounded queue the model appends to, a publisher thread
 * that encodes batches in the reference's msgpack layout and sends them on our ZMTP PUB socket,
 * and a replay ROUTER serving the batches kept. */
#include "master/kv_events.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "master/master_state.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/log.h"
#include "mooncake/common/msgpack.h"
#include "mooncake/common/time.h"
#include "mooncake/common/zmtp_socket.h"
#include "mooncake/error.h"

#define MAX_BATCH 64  /* events per message, as the reference batches them */
#define MAX_TAKE 4096 /* events taken off the queue per lock: fewer turns against the emitters */
#define REPLAY_MAX_BYTES (64u << 20)
#define PUB_HWM_BYTES (64u << 20)

typedef struct pending {
    uint8_t kind;
    const char *medium; /* a literal */
    uint32_t len;
    uint8_t key[];
} pending_t;

typedef struct replay_rec {
    uint64_t seq;
    size_t len;
    uint8_t *data;
} replay_rec_t;

struct mc__kv_events {
    mc__kv_events_config_t cfg;
    char *backend_id, *tenant_id;
    mc_zmtp_server_t *pub, *router;
    pthread_t thr;
    pthread_mutex_t mu; /* the queue, stop; a leaf under the model's locks */
    pthread_cond_t cv;
    int stop;
    pending_t **q; /* a ring: q_len entries from q_head */
    size_t q_cap, q_head, q_len;
    _Atomic uint64_t next_seq, next_event_id;
    _Atomic uint64_t batches, events, dropped, skipped, replays, replay_bad, last_seq;
    pthread_mutex_t rmu; /* the replay ring */
    replay_rec_t *ring;
    size_t r_cap, r_head, r_len, r_bytes;
};

void mc__kv_events_config_defaults(mc__kv_events_config_t *c) {
    memset(c, 0, sizeof(*c));
    c->bind_endpoint = "";
    c->replay_endpoint = "";
    c->replay_buffer_steps = 10000;
    c->backend_id = "";
    c->model_name = c->additional_salt = c->lora_name = "";
    c->tenant_id = "default";
    c->emit_legacy_compat = 1;
    c->emit_object_key = 1;
    c->queue_capacity = 65536;
}

static int bad(char *err, size_t cap, const char *what) {
    snprintf(err, cap, "%s", what);
    return MC_ERR_INVALID_PARAMS;
}

int mc__kv_events_config_validate(const mc__kv_events_config_t *c, char *err, size_t cap) {
    char host[256];
    uint16_t port;
    if (c->queue_capacity < 0 || c->queue_capacity > UINT32_MAX)
        return bad(err, cap, "--kv_events_queue_capacity must be in 0..4294967295");
    if (c->block_size < 0 || c->block_size > UINT32_MAX || c->dp_rank < 0 ||
        c->dp_rank > UINT32_MAX)
        return bad(err, cap, "--kv_events_block_size and --kv_events_dp_rank are u32");
    if (c->replay_buffer_steps < 1 || c->replay_buffer_steps > 10000000)
        return bad(err, cap, "--kv_events_replay_buffer_steps must be in 1..10000000");
    if (!c->enabled)
        return 0;
    /* The reference logs these and runs without events; a publisher asked for and not running
     * is better refused at start (docs/compatibility.md). */
    if (!c->bind_endpoint || !*c->bind_endpoint)
        return bad(err, cap,
                   "--enable_kv_events needs --kv_events_bind_endpoint (tcp://host:port)");
    if (mc__zmtp_endpoint_parse(c->bind_endpoint, host, sizeof(host), &port) != 0)
        return bad(err, cap, "--kv_events_bind_endpoint must be tcp://host:port");
    if (c->replay_endpoint && *c->replay_endpoint &&
        mc__zmtp_endpoint_parse(c->replay_endpoint, host, sizeof(host), &port) != 0)
        return bad(err, cap, "--kv_events_replay_endpoint must be tcp://host:port");
    if (!c->backend_id || !*c->backend_id)
        return bad(err, cap, "--enable_kv_events needs --kv_events_backend_id");
    return 0;
}

int mc__kv_key_hash(const uint8_t *key, uint32_t len, uint64_t *hash) {
    char buf[72];
    char *end;
    int base = 10;
    /* Longer than any u64 spelling with some blanks: strtoull would refuse it anyway. */
    if (len == 0 || len >= sizeof(buf) || memchr(key, 0, len))
        return 0;
    memcpy(buf, key, len);
    buf[len] = 0;
    if (len >= 2 && buf[0] == '0' && (buf[1] == 'x' || buf[1] == 'X'))
        base = 16;
    errno = 0;
    unsigned long long v = strtoull(buf, &end, base);
    if (errno != 0 || end == buf || *end != 0)
        return 0;
    *hash = v;
    return 1;
}

/* --- the emitter */

void mc__kv_event(mc__master_t *m, int kind, const uint8_t *key, uint32_t len, const char *medium) {
    struct mc__kv_events *k = m->kv;
    pending_t *p, *old = NULL;
    if (!k)
        return;
    p = mc__malloc(sizeof(*p) + len);
    if (!p) {
        atomic_fetch_add(&k->dropped, 1);
        atomic_fetch_add(&k->next_seq, 1);
        return;
    }
    p->kind = (uint8_t)kind;
    p->medium = medium;
    p->len = len;
    memcpy(p->key, key, len);
    pthread_mutex_lock(&k->mu);
    if (k->cfg.queue_capacity > 0 && k->q_len >= (size_t)k->cfg.queue_capacity) {
        old = k->q[k->q_head];
        k->q_head = (k->q_head + 1) % k->q_cap;
        k->q_len--;
        atomic_fetch_add(&k->dropped, 1);
        /* a sequence number nobody gets: subscribers see the gap */
        atomic_fetch_add(&k->next_seq, 1);
    }
    if (k->q_len == k->q_cap) {
        /* unbounded (or not yet at capacity): the ring doubles, its entries unrolled */
        size_t cap = k->q_cap ? k->q_cap * 2 : 1024;
        pending_t **nq = mc__malloc(cap * sizeof(*nq));
        if (!nq) {
            pthread_mutex_unlock(&k->mu);
            mc__free(p);
            atomic_fetch_add(&k->dropped, 1);
            atomic_fetch_add(&k->next_seq, 1);
            return;
        }
        for (size_t i = 0; i < k->q_len; i++)
            nq[i] = k->q[(k->q_head + i) % k->q_cap];
        mc__free(k->q);
        k->q = nq;
        k->q_cap = cap;
        k->q_head = 0;
    }
    k->q[(k->q_head + k->q_len) % k->q_cap] = p;
    /* the publisher sleeps only on an empty queue: one wake-up per burst, not per event */
    if (k->q_len++ == 0)
        pthread_cond_signal(&k->cv);
    pthread_mutex_unlock(&k->mu);
    mc__free(old);
}

/* --- the publisher thread */

static void put_key(mc_buf_t *b, const char *s) {
    mc__mp_cstr(b, s);
}

static void encode_event(struct mc__kv_events *k, mc_buf_t *b, const pending_t *p, int has_hash,
                         uint64_t hash, uint64_t event_id, int64_t ts) {
    int stored = p->kind == MC__KV_STORED;
    int legacy = k->cfg.emit_legacy_compat;
    uint32_t n = 13 + (legacy ? 2 : 0) + (k->cfg.emit_object_key ? 1 : 0) +
                 (stored ? 3 + (legacy ? 1 : 0) : 1);
    mc__mp_map(b, n);
    put_key(b, "event_id");
    mc__mp_uint(b, event_id);
    put_key(b, "timestamp");
    mc__mp_int(b, ts);
    put_key(b, "event_type");
    mc__mp_cstr(b, stored ? "stored" : "removed");
    if (legacy) {
        put_key(b, "type");
        mc__mp_cstr(b, stored ? "BlockStored" : "BlockRemoved");
    }
    /* what a storage pool does not know is nil: the indexer's /register supplies it */
    put_key(b, "model_name");
    mc__mp_nil(b);
    put_key(b, "block_size");
    mc__mp_nil(b);
    put_key(b, "additional_salt");
    mc__mp_nil(b);
    put_key(b, "lora_name");
    mc__mp_nil(b);
    put_key(b, "tenant_id");
    mc__mp_cstr(b, k->tenant_id);
    put_key(b, "backend_id");
    mc__mp_cstr(b, k->backend_id);
    put_key(b, "group_id");
    mc__mp_nil(b);
    put_key(b, "medium");
    mc__mp_cstr(b, p->medium);
    put_key(b, "dp_rank");
    mc__mp_nil(b);
    if (k->cfg.emit_object_key) {
        put_key(b, "object_key");
        mc__mp_str(b, (const char *)p->key, p->len);
    }
    put_key(b, "seq_hashes");
    mc__mp_array(b, has_hash);
    if (has_hash)
        mc__mp_uint(b, hash);
    if (legacy) {
        /* vLLM's block hashes are signed 64-bit */
        put_key(b, "block_hashes");
        mc__mp_array(b, has_hash);
        if (has_hash)
            mc__mp_int(b, (int64_t)hash);
    }
    put_key(b, "base_block_idx");
    if (stored) {
        mc__mp_uint(b, 0); /* a pool's key is a block of its own: depth 0 */
        put_key(b, "parent_hash");
        mc__mp_nil(b);
        put_key(b, "token_ids");
        mc__mp_nil(b);
        if (legacy) {
            put_key(b, "parent_block_hash");
            mc__mp_nil(b);
        }
    } else {
        mc__mp_nil(b);
    }
}

static void replay_keep(struct mc__kv_events *k, uint64_t seq, const uint8_t *data, size_t len) {
    uint8_t *copy;
    if (!k->router || !(copy = mc__malloc(len)))
        return;
    memcpy(copy, data, len);
    pthread_mutex_lock(&k->rmu);
    while (k->r_len && (k->r_len == k->r_cap || k->r_bytes + len > REPLAY_MAX_BYTES)) {
        replay_rec_t *o = &k->ring[k->r_head];
        k->r_bytes -= o->len;
        mc__free(o->data);
        k->r_head = (k->r_head + 1) % k->r_cap;
        k->r_len--;
    }
    k->ring[(k->r_head + k->r_len) % k->r_cap] = (replay_rec_t){seq, len, copy};
    k->r_len++;
    k->r_bytes += len;
    pthread_mutex_unlock(&k->rmu);
}

static void publish_batch(struct mc__kv_events *k, pending_t **batch, size_t n, mc_buf_t *b) {
    int64_t ts = (int64_t)mc__wall_ms();
    uint32_t kept = 0;
    uint64_t hashes[MAX_BATCH];
    uint8_t has[MAX_BATCH];
    for (size_t i = 0; i < n; i++) {
        has[i] = (uint8_t)mc__kv_key_hash(batch[i]->key, batch[i]->len, &hashes[i]);
        if (!has[i])
            atomic_fetch_add(&k->skipped, 1);
        /* without a hash the key itself is the only name left to send */
        if (has[i] || (k->cfg.emit_object_key && batch[i]->len))
            kept++;
    }
    if (!kept)
        return;
    mc__buf_reset(b);
    mc__mp_array(b, 3);
    mc__mp_int(b, ts);
    mc__mp_array(b, kept);
    for (size_t i = 0; i < n; i++)
        if (has[i] || (k->cfg.emit_object_key && batch[i]->len))
            encode_event(k, b, batch[i], has[i], hashes[i], atomic_fetch_add(&k->next_event_id, 1),
                         ts);
    mc__mp_uint(b, 0); /* the batch's DP rank: a storage pool has none */
    if (b->failed) {
        atomic_fetch_add(&k->dropped, kept);
        atomic_fetch_add(&k->next_seq, 1);
        return;
    }
    uint64_t seq = atomic_fetch_add(&k->next_seq, 1);
    uint8_t seq_be[8];
    for (int i = 0; i < 8; i++)
        seq_be[i] = (uint8_t)(seq >> (56 - 8 * i));
    struct iovec parts[3] = {{"", 0}, {seq_be, 8}, {b->data, b->len}};
    mc__zmtp_server_publish(k->pub, parts, 3);
    replay_keep(k, seq, b->data, b->len);
    atomic_store(&k->last_seq, seq);
    atomic_fetch_add(&k->batches, 1);
    atomic_fetch_add(&k->events, kept);
}

static void *publisher_main(void *arg) {
    struct mc__kv_events *k = arg;
    pending_t **batch = mc__malloc(MAX_TAKE * sizeof(*batch));
    mc_buf_t b;
    mc__buf_init(&b);
    for (;;) {
        size_t n = 0;
        int stop;
        pthread_mutex_lock(&k->mu);
        while (!k->stop && k->q_len == 0)
            pthread_cond_wait(&k->cv, &k->mu);
        while (k->q_len && n < (batch ? MAX_TAKE : 0)) {
            batch[n++] = k->q[k->q_head];
            k->q_head = (k->q_head + 1) % k->q_cap;
            k->q_len--;
        }
        stop = k->stop && (k->q_len == 0 || !batch); /* what is left, kv_free frees */
        pthread_mutex_unlock(&k->mu);
        for (size_t i = 0; i < n; i += MAX_BATCH)
            publish_batch(k, batch + i, n - i < MAX_BATCH ? n - i : MAX_BATCH, &b);
        for (size_t i = 0; i < n; i++)
            mc__free(batch[i]);
        if (stop && n == 0)
            break;
        if (!batch) {
            /* no memory for the take list: wait for some instead of spinning */
            usleep(10000);
            batch = mc__malloc(MAX_TAKE * sizeof(*batch));
        }
    }
    mc__free(batch);
    mc__buf_free(&b);
    return NULL;
}

/* --- replay: a request is the first sequence number wanted (u64, big-endian), after an empty
 * frame from a DEALER (vLLM's subscriber sends that) or alone from a REQ. The answer is every
 * batch kept from there on, each as [seq, payload], then [-1 as i64, empty]: the end. */

static void replay_serve(mc_zmtp_server_t *s, uint64_t conn, const mc_zmtp_msg_t *m, void *arg) {
    struct mc__kv_events *k = arg;
    static const uint8_t end_seq[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    int delim = m->nparts == 2 && m->len[0] == 0;
    const uint8_t *req = delim ? m->part[1] : m->part[0];
    size_t req_len = delim ? m->len[1] : m->len[0];
    uint64_t start = 0;
    if ((m->nparts != 1 && !delim) || req_len != 8) {
        /* the answer is the end marker alone, so the asking client does not wait for nothing */
        atomic_fetch_add(&k->replay_bad, 1);
        MC_WARN("kv_events: malformed replay request (%d parts) ignored", m->nparts);
    } else {
        for (int i = 0; i < 8; i++)
            start = (start << 8) | req[i];
        atomic_fetch_add(&k->replays, 1);
        pthread_mutex_lock(&k->rmu);
        for (size_t i = 0; i < k->r_len; i++) {
            const replay_rec_t *r = &k->ring[(k->r_head + i) % k->r_cap];
            uint8_t seq_be[8];
            if (r->seq < start)
                continue;
            for (int j = 0; j < 8; j++)
                seq_be[j] = (uint8_t)(r->seq >> (56 - 8 * j));
            struct iovec parts[3] = {{"", 0}, {seq_be, 8}, {r->data, r->len}};
            if (mc__zmtp_server_send_to(s, conn, parts + !delim, 3 - !delim) != 0)
                break;
        }
        pthread_mutex_unlock(&k->rmu);
    }
    struct iovec fin[3] = {{"", 0}, {(void *)end_seq, 8}, {"", 0}};
    mc__zmtp_server_send_to(s, conn, fin + !delim, 3 - !delim);
}

/* --- lifecycle */

static void kv_free(struct mc__kv_events *k) {
    mc__zmtp_server_stop(k->pub);
    mc__zmtp_server_stop(k->router);
    for (size_t i = 0; i < k->q_len; i++)
        mc__free(k->q[(k->q_head + i) % k->q_cap]);
    mc__free(k->q);
    for (size_t i = 0; i < k->r_len; i++)
        mc__free(k->ring[(k->r_head + i) % k->r_cap].data);
    mc__free(k->ring);
    mc__free(k->backend_id);
    mc__free(k->tenant_id);
    pthread_mutex_destroy(&k->mu);
    pthread_mutex_destroy(&k->rmu);
    pthread_cond_destroy(&k->cv);
    mc__free(k);
}

int mc__kv_events_start(mc__master_t *m, const mc__kv_events_config_t *cfg) {
    struct mc__kv_events *k;
    int rc;
    if (!cfg->enabled)
        return 0;
    if (!(k = mc__calloc(1, sizeof(*k))))
        return MC_ERR_MEMORY;
    k->cfg = *cfg;
    pthread_mutex_init(&k->mu, NULL);
    pthread_mutex_init(&k->rmu, NULL);
    pthread_cond_init(&k->cv, NULL);
    atomic_store(&k->next_seq, 1);
    atomic_store(&k->next_event_id, 1);
    k->backend_id = mc__strdup(cfg->backend_id);
    k->tenant_id = mc__strdup(cfg->tenant_id && *cfg->tenant_id ? cfg->tenant_id : "default");
    k->r_cap = (size_t)cfg->replay_buffer_steps;
    k->ring = mc__calloc(k->r_cap, sizeof(*k->ring));
    if (!k->backend_id || !k->tenant_id || !k->ring) {
        rc = MC_ERR_MEMORY;
        goto fail;
    }
    rc = mc__zmtp_server_start(cfg->bind_endpoint, "PUB", PUB_HWM_BYTES, 4096, NULL, NULL, &k->pub);
    if (rc) {
        MC_ERROR("kv_events: cannot bind %s: %s", cfg->bind_endpoint, mc_strerror(rc));
        goto fail;
    }
    if (cfg->replay_endpoint && *cfg->replay_endpoint) {
        rc = mc__zmtp_server_start(cfg->replay_endpoint, "ROUTER", 2 * (size_t)REPLAY_MAX_BYTES,
                                   4096, replay_serve, k, &k->router);
        if (rc) {
            MC_ERROR("kv_events: cannot bind %s: %s", cfg->replay_endpoint, mc_strerror(rc));
            goto fail;
        }
    }
    if (pthread_create(&k->thr, NULL, publisher_main, k) != 0) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto fail;
    }
    m->kv = k;
    MC_INFO("kv_events: publishing on %s (port %u), backend_id=%s", cfg->bind_endpoint,
            mc__zmtp_server_port(k->pub), k->backend_id);
    return 0;
fail:
    kv_free(k);
    return rc;
}

void mc__kv_events_stop(mc__master_t *m) {
    struct mc__kv_events *k = m->kv;
    if (!k)
        return;
    pthread_mutex_lock(&k->mu);
    k->stop = 1;
    pthread_cond_signal(&k->cv);
    pthread_mutex_unlock(&k->mu);
    pthread_join(k->thr, NULL);
    m->kv = NULL;
    kv_free(k);
}

void mc__kv_events_stats(mc__master_t *m, mc__kv_events_stats_t *out) {
    struct mc__kv_events *k = m->kv;
    memset(out, 0, sizeof(*out));
    if (!k)
        return;
    mc_zmtp_server_stats_t ps;
    out->enabled = 1;
    out->published_batches = atomic_load(&k->batches);
    out->published_events = atomic_load(&k->events);
    out->dropped_events = atomic_load(&k->dropped);
    out->skipped_unparsed_keys = atomic_load(&k->skipped);
    out->replay_requests = atomic_load(&k->replays);
    out->replay_malformed = atomic_load(&k->replay_bad);
    out->last_sequence = atomic_load(&k->last_seq);
    pthread_mutex_lock(&k->mu);
    out->queued = k->q_len;
    pthread_mutex_unlock(&k->mu);
    mc__zmtp_server_stats(k->pub, &ps);
    out->subscribers = ps.peers;
}

void mc__kv_events_status_json(mc__master_t *m, mc_buf_t *b) {
    mc__kv_events_stats_t s;
    char text[640];
    mc__kv_events_stats(m, &s);
    if (!s.enabled) {
        /* the reference's answer, field for field */
        static const char off[] = "{\"enabled\":false,\"published_batches\":0,"
                                  "\"published_events\":0,\"dropped_events\":0,"
                                  "\"skipped_unparsed_keys\":0}";
        mc__buf_put(b, off, sizeof(off) - 1);
        return;
    }
    int n = snprintf(text, sizeof(text),
                     "{\"enabled\":%s,\"published_batches\":%" PRIu64
                     ",\"published_events\":%" PRIu64 ",\"dropped_events\":%" PRIu64
                     ",\"skipped_unparsed_keys\":%" PRIu64 ",\"queued_events\":%" PRIu64
                     ",\"subscribers\":%" PRIu64 ",\"replay_requests\":%" PRIu64
                     ",\"malformed_replay_requests\":%" PRIu64 ",\"last_sequence\":%" PRIu64 "}",
                     s.enabled ? "true" : "false", s.published_batches, s.published_events,
                     s.dropped_events, s.skipped_unparsed_keys, s.queued, s.subscribers,
                     s.replay_requests, s.replay_malformed, s.last_sequence);
    mc__buf_put(b, text, (size_t)n);
}

uint16_t mc__kv_events_port(mc__master_t *m, int replay) {
    struct mc__kv_events *k = m->kv;
    if (!k)
        return 0;
    if (replay)
        return k->router ? mc__zmtp_server_port(k->router) : 0;
    return mc__zmtp_server_port(k->pub);
}
