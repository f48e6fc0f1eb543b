/* A subscription against real sockets: our PUB and a replay ROUTER (mooncake-common's ZMTP)
 * publishing batches in the Mooncake master's layout. Events arrive in sequence order; a gap is
 * filled from the replay endpoint; a sequence number nobody kept is counted lost; a sequence that
 * goes back is a restart; a payload that is no batch is counted and the stream goes on. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "kv_subscriber.h"
#include "mooncake/common/msgpack.h"
#include "mooncake/common/time.h"
#include "mooncake/common/zmtp_socket.h"
#include "mooncake/error.h"

#define KEPT 64

typedef struct world {
    mc_zmtp_server_t *pub, *router;
    mc_buf_t kept[KEPT]; /* payload of seq i, for replay */
    int kept_ok[KEPT];
    pthread_mutex_t mu;
    uint64_t got[256]; /* hashes seen, in order */
    int n_got, restarts;
} world_t;

static void payload(mc_buf_t *b, uint64_t hash) {
    char key[32];
    snprintf(key, sizeof(key), "%llu", (unsigned long long)hash);
    mc__buf_init(b);
    mc__mp_array(b, 3);
    mc__mp_uint(b, 1700000000000ull);
    mc__mp_array(b, 1);
    mc__mp_map(b, 4);
    mc__mp_cstr(b, "event_type");
    mc__mp_cstr(b, "stored");
    mc__mp_cstr(b, "medium");
    mc__mp_cstr(b, "cpu");
    mc__mp_cstr(b, "seq_hashes");
    mc__mp_array(b, 1);
    mc__mp_uint(b, hash);
    mc__mp_cstr(b, "object_key");
    mc__mp_cstr(b, key);
    mc__mp_uint(b, 0);
}

/* Publishes seq with hash as its one event (live: also sent; kept: served by replay). */
static void publish(world_t *w, uint64_t seq, uint64_t hash, int live, int kept) {
    mc_buf_t b;
    uint8_t be[8];
    payload(&b, hash);
    for (int i = 0; i < 8; i++)
        be[i] = (uint8_t)(seq >> (56 - 8 * i));
    struct iovec parts[3] = {{"", 0}, {be, 8}, {b.data, b.len}};
    if (live)
        assert_int_equal(mc__zmtp_server_publish(w->pub, parts, 3), 0);
    pthread_mutex_lock(&w->mu);
    if (kept && seq < KEPT) {
        w->kept[seq] = b;
        w->kept_ok[seq] = 1;
    } else {
        mc__buf_free(&b);
    }
    pthread_mutex_unlock(&w->mu);
}

static void serve_replay(mc_zmtp_server_t *s, uint64_t conn, const mc_zmtp_msg_t *m, void *arg) {
    world_t *w = arg;
    static const uint8_t end[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    uint64_t from = 0;
    if (m->nparts == 2 && m->len[1] == 8)
        for (int i = 0; i < 8; i++)
            from = (from << 8) | m->part[1][i];
    pthread_mutex_lock(&w->mu);
    for (uint64_t q = from; q < KEPT; q++) {
        uint8_t be[8];
        if (!w->kept_ok[q])
            continue;
        for (int i = 0; i < 8; i++)
            be[i] = (uint8_t)(q >> (56 - 8 * i));
        struct iovec parts[3] = {{"", 0}, {be, 8}, {w->kept[q].data, w->kept[q].len}};
        mc__zmtp_server_send_to(s, conn, parts, 3);
    }
    pthread_mutex_unlock(&w->mu);
    struct iovec fin[3] = {{"", 0}, {(void *)end, 8}, {"", 0}};
    mc__zmtp_server_send_to(s, conn, fin, 3);
}

static void on_event(void *arg, const mc_kv_event_t *ev, const mc_kv_batch_t *batch) {
    world_t *w = arg;
    assert_int_equal(batch->dp_rank, 0);
    assert_int_equal(ev->kind, MC_KV_EV_STORED);
    pthread_mutex_lock(&w->mu);
    if (w->n_got < 256 && ev->n_hashes == 1)
        w->got[w->n_got++] = ev->hashes[0];
    pthread_mutex_unlock(&w->mu);
}

static void on_restart(void *arg) {
    world_t *w = arg;
    pthread_mutex_lock(&w->mu);
    w->restarts++;
    pthread_mutex_unlock(&w->mu);
}

static int n_got(world_t *w) {
    pthread_mutex_lock(&w->mu);
    int n = w->n_got;
    pthread_mutex_unlock(&w->mu);
    return n;
}

static void wait_got(world_t *w, int n) {
    uint64_t end = mc__now_ms() + 20000;
    while (n_got(w) < n) {
        assert_true(mc__now_ms() < end);
        usleep(2000);
    }
}

static void test_gap_replay_restart(void **state) {
    (void)state;
    static world_t w;
    char pub_ep[64], rep_ep[64];
    mc_kv_sub_t *sub;
    mc_kv_sub_stats_t st;
    mc_kv_sub_ops_t ops = {on_event, on_restart};
    memset(&w, 0, sizeof(w));
    pthread_mutex_init(&w.mu, NULL);
    assert_int_equal(mc__zmtp_server_start("tcp://127.0.0.1:0", "PUB", 0, 0, NULL, NULL, &w.pub),
                     0);
    assert_int_equal(
        mc__zmtp_server_start("tcp://127.0.0.1:0", "ROUTER", 0, 0, serve_replay, &w, &w.router), 0);
    snprintf(pub_ep, sizeof(pub_ep), "tcp://127.0.0.1:%u", mc__zmtp_server_port(w.pub));
    snprintf(rep_ep, sizeof(rep_ep), "tcp://127.0.0.1:%u", mc__zmtp_server_port(w.router));
    assert_int_equal(mc__kv_sub_start("udp://x:1", NULL, &ops, &w, &sub), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc__kv_sub_start(pub_ep, rep_ep, &ops, &w, &sub), 0);
    /* the subscription takes effect some time after the connection: publish until one arrives */
    uint64_t seq = 1;
    for (; n_got(&w) == 0; seq++) {
        assert_true(seq < 20000);
        publish(&w, seq, 1000 + seq, 1, 1);
        usleep(2000);
    }
    /* the probes still in flight arrive too; then a known point */
    publish(&w, seq, 5000, 1, 1);
    uint64_t base = seq;
    while (1) {
        wait_got(&w, 1);
        pthread_mutex_lock(&w.mu);
        int done = w.got[w.n_got - 1] == 5000;
        pthread_mutex_unlock(&w.mu);
        if (done)
            break;
        usleep(2000);
    }
    int before = n_got(&w);
    /* base+1 is kept but never sent live; base+2 arrives: base+1 is replayed first */
    publish(&w, base + 1, 5001, 0, 1);
    publish(&w, base + 2, 5002, 1, 1);
    wait_got(&w, before + 2);
    assert_true(w.got[before] == 5001 && w.got[before + 1] == 5002);
    /* base+3 nobody kept: lost, counted */
    publish(&w, base + 3, 5003, 0, 0);
    publish(&w, base + 4, 5004, 1, 1);
    wait_got(&w, before + 3);
    assert_true(w.got[before + 2] == 5004);
    /* a payload that is no batch: counted, the stream goes on */
    {
        uint8_t be[8] = {0, 0, 0, 0, 0, 0, 0, (uint8_t)(base + 5)};
        struct iovec parts[3] = {{"", 0}, {be, 8}, {"junk", 4}};
        assert_int_equal(mc__zmtp_server_publish(w.pub, parts, 3), 0);
    }
    publish(&w, base + 6, 5006, 1, 1);
    wait_got(&w, before + 4);
    /* the sequence starts over: a restarted publisher */
    publish(&w, 1, 6001, 1, 0);
    wait_got(&w, before + 5);
    mc__kv_sub_stats(sub, &st);
    assert_int_equal(st.gaps, 2);
    assert_int_equal(st.replayed, 1);
    assert_int_equal(st.lost, 1);
    assert_int_equal(st.malformed_batches, 1);
    assert_int_equal(st.restarts, 1);
    assert_int_equal(w.restarts, 1);
    assert_true(st.last_seq == 1);
    mc__kv_sub_stop(sub);
    mc__zmtp_server_stop(w.pub);
    mc__zmtp_server_stop(w.router);
    for (int i = 0; i < KEPT; i++)
        if (w.kept_ok[i])
            mc__buf_free(&w.kept[i]);
    pthread_mutex_destroy(&w.mu);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gap_replay_restart),
    };
    return cmocka_run_group_tests_name("conductor_subscriber", tests, NULL, NULL);
}
