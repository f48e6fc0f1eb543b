/* mc_engine_probe against a live te_target process, a killed one, unknown names (P2P and HTTP
 * metadata); the RPC channel over loopback: data and tensors of several sizes checked byte for
 * byte in the handler, pooled connections, bad addresses, a dead server, malformed frames, the
 * tensor header codec, stop while clients are connected. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>
#include <cmocka.h>

#include "http_kv_store.h"
#include "mooncake/common/frame.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "mooncake/rpc_channel.h"
#include "mooncake/transfer_engine.h"
#include "rpc_channel_proto.h"
#include "te_test_util.h"

#define MiB (1u << 20)

static mc_engine_t *new_engine(const char *meta, const char *name) {
    mc_engine_t *e = NULL;
    mc_engine_options_t o = {.local_server_name = name, .metadata_conn = meta, .protocol = "tcp"};
    assert_int_equal(mc_engine_create(&e), 0);
    assert_int_equal(mc_engine_init(e, &o), 0);
    return e;
}

static void test_probe_p2p(void **state) {
    (void)state;
    te_target_t t;
    char dead[256];
    mc_engine_t *e = new_engine("P2PHANDSHAKE", "127.0.0.1");
    assert_int_equal(te_target_start(&t, "P2PHANDSHAKE", NULL, MiB, MiB), 0);
    assert_int_equal(mc_engine_probe(e, t.name), 0);
    assert_int_equal(mc_engine_probe(e, mc_engine_local_name(e)), 0); /* itself */
    snprintf(dead, sizeof(dead), "%s", t.name);
    te_target_kill(&t);
    assert_int_equal(mc_engine_probe(e, dead), MC_ERR_SOCKET);
    assert_int_equal(mc_engine_probe(e, "127.0.0.1:1"), MC_ERR_SOCKET);
    assert_int_equal(mc_engine_probe(e, "unreachable_peer.invalid:9"), MC_ERR_DNS);
    assert_int_equal(mc_engine_probe(e, "no-port"), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_engine_probe(e, ""), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_engine_probe(e, NULL), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_engine_probe(NULL, "127.0.0.1:1"), MC_ERR_INVALID_ARGUMENT);
    mc_engine_destroy(e);
}

static void test_probe_http(void **state) {
    (void)state;
    mc_http_kv_store_t *kv = NULL;
    char url[128];
    te_target_t t;
    assert_int_equal(mc__http_kv_store_start("127.0.0.1", 0, &kv), 0);
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/metadata", mc__http_kv_store_port(kv));
    assert_int_equal(te_target_start(&t, url, "probe-target", MiB, MiB), 0);
    mc_engine_t *e = new_engine(url, "probe-initiator");
    assert_int_equal(mc_engine_probe(e, "probe-target"), 0);
    assert_int_equal(mc_engine_probe(e, "unreachable_peer:9"), MC_ERR_METADATA);
    /* killed without unpublishing: the descriptor is there, nobody answers */
    te_target_kill(&t);
    assert_int_equal(mc_engine_probe(e, "probe-target"), MC_ERR_SOCKET);
    mc_engine_destroy(e);
    mc__http_kv_store_stop(kv);
}

/* ---- RPC channel ---- */

typedef struct got {
    pthread_mutex_t mu;
    int count;
    int kind;
    size_t len;
    uint64_t hash;
    char dtype[MC_RPC_MAX_DTYPE + 1];
    size_t ndim;
    uint64_t shape[MC_RPC_MAX_DIMS];
    char source[80];
} got_t;

static void on_msg(void *ctx, const mc_rpc_message_t *m) {
    got_t *g = ctx;
    pthread_mutex_lock(&g->mu);
    g->count++;
    g->kind = m->kind;
    g->len = m->len;
    g->hash = te_hash(m->data, m->len);
    snprintf(g->dtype, sizeof(g->dtype), "%s", m->dtype);
    g->ndim = m->ndim;
    for (size_t i = 0; i < m->ndim; i++)
        g->shape[i] = m->shape[i];
    snprintf(g->source, sizeof(g->source), "%s", m->source);
    pthread_mutex_unlock(&g->mu);
}

typedef struct rpc_fixture {
    got_t got;
    mc_rpc_server_t *s;
    mc_rpc_client_t *c;
    char target[64];
} rpc_fixture_t;

static void rpc_up(rpc_fixture_t *f) {
    memset(f, 0, sizeof(*f));
    pthread_mutex_init(&f->got.mu, NULL);
    mc_rpc_server_options_t so = {
        .listen_address = "127.0.0.1:0", .handler = on_msg, .ctx = &f->got, .timeout_ms = 2000};
    mc_rpc_client_options_t co = {.pool_size = 2, .timeout_ms = 5000};
    assert_int_equal(mc_rpc_server_create(&so, &f->s), 0);
    assert_int_equal(mc_rpc_server_port(f->s), MC_ERR_INVALID_ARGUMENT); /* not started */
    assert_int_equal(mc_rpc_server_start(f->s), 0);
    assert_int_equal(mc_rpc_server_start(f->s), MC_ERR_INVALID_ARGUMENT);
    assert_true(mc_rpc_server_port(f->s) > 0);
    snprintf(f->target, sizeof(f->target), "127.0.0.1:%d", mc_rpc_server_port(f->s));
    assert_int_equal(mc_rpc_client_create(&co, &f->c), 0);
}

static void rpc_down(rpc_fixture_t *f) {
    mc_rpc_client_destroy(f->c);
    mc_rpc_server_destroy(f->s);
    pthread_mutex_destroy(&f->got.mu);
}

static void test_rpc_data_sizes(void **state) {
    (void)state;
    static const size_t sizes[] = {0, 1, 1000, 1025, MiB, 9 * MiB + 3};
    rpc_fixture_t f;
    uint8_t *buf = malloc(10 * MiB);
    rpc_up(&f);
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        te_fill(buf, sizes[i], (unsigned)i + 5);
        assert_int_equal(mc_rpc_client_send(f.c, f.target, buf, sizes[i]), 0);
        /* send returns after the handler did: no waiting needed */
        assert_int_equal(f.got.count, (int)i + 1);
        assert_int_equal(f.got.kind, MC_RPC_DATA);
        assert_int_equal(f.got.len, sizes[i]);
        assert_true(f.got.hash == te_hash(buf, sizes[i]));
        assert_string_equal(f.got.dtype, "");
        assert_int_equal(f.got.ndim, 0);
        assert_true(strncmp(f.got.source, "127.0.0.1:", 10) == 0);
    }
    free(buf);
    rpc_down(&f);
}

static void test_rpc_tensor(void **state) {
    (void)state;
    rpc_fixture_t f;
    uint64_t shape[3] = {2, 3, 4};
    float data[24];
    rpc_up(&f);
    for (int i = 0; i < 24; i++)
        data[i] = (float)i * 0.5f;
    assert_int_equal(
        mc_rpc_client_send_tensor(f.c, f.target, "torch.float32", shape, 3, data, sizeof(data)), 0);
    assert_int_equal(f.got.kind, MC_RPC_TENSOR);
    assert_string_equal(f.got.dtype, "torch.float32");
    assert_int_equal(f.got.ndim, 3);
    assert_true(f.got.shape[0] == 2 && f.got.shape[1] == 3 && f.got.shape[2] == 4);
    assert_int_equal(f.got.len, sizeof(data));
    assert_true(f.got.hash == te_hash(data, sizeof(data)));
    /* a scalar: no dims */
    assert_int_equal(mc_rpc_client_send_tensor(f.c, f.target, "int64", NULL, 0, data, 8), 0);
    assert_int_equal(f.got.ndim, 0);
    /* bad tensor arguments are refused before anything is sent */
    int before = f.got.count;
    uint64_t many[MC_RPC_MAX_DIMS + 1] = {0};
    char longname[MC_RPC_MAX_DTYPE + 2];
    memset(longname, 'x', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    assert_int_equal(mc_rpc_client_send_tensor(f.c, f.target, "", shape, 3, data, 4),
                     MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_rpc_client_send_tensor(f.c, f.target, NULL, shape, 3, data, 4),
                     MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_rpc_client_send_tensor(f.c, f.target, longname, shape, 3, data, 4),
                     MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(
        mc_rpc_client_send_tensor(f.c, f.target, "f32", many, MC_RPC_MAX_DIMS + 1, data, 4),
        MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(f.got.count, before);
    rpc_down(&f);
}

static void test_rpc_bad_targets(void **state) {
    (void)state;
    rpc_fixture_t f;
    char dead[64];
    rpc_up(&f);
    assert_int_equal(mc_rpc_client_send(f.c, "no-port", "x", 1), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_rpc_client_send(f.c, "127.0.0.1:0", "x", 1), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_rpc_client_send(f.c, NULL, "x", 1), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_rpc_client_send(f.c, f.target, NULL, 1), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_rpc_client_send(NULL, f.target, "x", 1), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_rpc_client_send(f.c, f.target, "x", MC_RPC_MAX_MESSAGE + 1),
                     MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_rpc_client_send(f.c, "unreachable_peer.invalid:9", "x", 1), MC_ERR_DNS);
    assert_int_equal(mc_rpc_client_send(f.c, "127.0.0.1:1", "x", 1), MC_ERR_SOCKET);
    /* a pooled connection to a server that stopped: the retry fails cleanly too */
    assert_int_equal(mc_rpc_client_send(f.c, f.target, "x", 1), 0);
    snprintf(dead, sizeof(dead), "%s", f.target);
    mc_rpc_server_stop(f.s);
    mc_rpc_server_wait(f.s); /* returns at once once stopped */
    assert_int_equal(mc_rpc_client_send(f.c, dead, "x", 1), MC_ERR_SOCKET);
    /* bad server options */
    mc_rpc_server_t *s = NULL;
    mc_rpc_server_options_t so = {.listen_address = "nowhere"};
    assert_int_equal(mc_rpc_server_create(&so, &s), MC_ERR_INVALID_ARGUMENT);
    assert_null(s);
    assert_int_equal(mc_rpc_server_create(NULL, &s), MC_ERR_INVALID_ARGUMENT);
    /* a port in use */
    so.listen_address = "127.0.0.1:0";
    assert_int_equal(mc_rpc_server_start(f.s), 0); /* restart on a new port */
    char busy[64];
    snprintf(busy, sizeof(busy), "127.0.0.1:%d", mc_rpc_server_port(f.s));
    so.listen_address = busy;
    assert_int_equal(mc_rpc_server_create(&so, &s), 0);
    assert_int_equal(mc_rpc_server_start(s), MC_ERR_SOCKET);
    mc_rpc_server_destroy(s);
    rpc_down(&f);
}

/* One thread sending again and again uses one pooled connection (its source port stays). */
static void test_rpc_pool_reuse(void **state) {
    (void)state;
    rpc_fixture_t f;
    char first[80];
    rpc_up(&f);
    assert_int_equal(mc_rpc_client_send(f.c, f.target, "a", 1), 0);
    snprintf(first, sizeof(first), "%s", f.got.source);
    for (int i = 0; i < 200; i++) {
        assert_int_equal(mc_rpc_client_send(f.c, f.target, &i, sizeof(i)), 0);
        assert_string_equal(f.got.source, first); /* the same connection every time */
    }
    assert_int_equal(f.got.count, 201);
    rpc_down(&f);
}

/* A peer speaking nonsense, announcing a huge body, or sending an unknown type: it is cut off
 * or told so, and the server keeps serving others. */
static void test_rpc_malformed_frames(void **state) {
    (void)state;
    rpc_fixture_t f;
    uint8_t hb[MC_FRAME_HEADER_SIZE];
    char host[64];
    uint16_t port = 0;
    int fd;
    rpc_up(&f);
    assert_int_equal(mc__split_host_port(f.target, host, sizeof(host), &port), 0);
    /* garbage */
    fd = mc__tcp_connect(host, port, mc__now_ms() + 2000);
    assert_true(fd >= 0);
    memset(hb, 0xAB, sizeof(hb));
    assert_int_equal(mc__send_all(fd, hb, sizeof(hb), mc__now_ms() + 2000), 0);
    assert_int_equal(mc__recv_all(fd, hb, 1, mc__now_ms() + 2000), MC_ERR_SOCKET); /* closed */
    close(fd);
    /* a body over the limit is refused from the header alone */
    mc_frame_header_t h = {.magic = MC_FRAME_MAGIC,
                           .version = MC_FRAME_VERSION,
                           .type = MC__RPC_DATA,
                           .request_id = 1,
                           .body_len = MC__RPC_MAX_BODY + 1};
    fd = mc__tcp_connect(host, port, mc__now_ms() + 2000);
    mc__frame_header_encode(&h, hb);
    assert_int_equal(mc__send_all(fd, hb, sizeof(hb), mc__now_ms() + 2000), 0);
    assert_int_equal(mc__recv_all(fd, hb, 1, mc__now_ms() + 2000), MC_ERR_SOCKET);
    close(fd);
    /* an unknown type gets an error frame */
    h.type = 77;
    h.body_len = 0;
    fd = mc__tcp_connect(host, port, mc__now_ms() + 2000);
    mc__frame_header_encode(&h, hb);
    assert_int_equal(mc__send_all(fd, hb, sizeof(hb), mc__now_ms() + 2000), 0);
    assert_int_equal(mc__recv_all(fd, hb, sizeof(hb), mc__now_ms() + 2000), 0);
    mc_frame_header_t r;
    assert_int_equal(mc__frame_header_decode(hb, sizeof(hb), 4096, &r), 0);
    assert_true(r.flags & MC_FRAME_F_ERROR);
    close(fd);
    /* a tensor whose header lies: error reply, the connection stays in step */
    uint8_t body[8] = {200, 0, 0, 0, 'f', 'p', 0, 0}; /* dtype length 200 > bytes left */
    h.type = MC__RPC_TENSOR;
    h.body_len = sizeof(body);
    fd = mc__tcp_connect(host, port, mc__now_ms() + 2000);
    mc__frame_header_encode(&h, hb);
    assert_int_equal(mc__send2(fd, hb, sizeof(hb), body, sizeof(body), mc__now_ms() + 2000), 0);
    assert_int_equal(mc__recv_all(fd, hb, sizeof(hb), mc__now_ms() + 2000), 0);
    assert_int_equal(mc__frame_header_decode(hb, sizeof(hb), 4096, &r), 0);
    assert_true(r.flags & MC_FRAME_F_ERROR);
    close(fd);
    /* a message cut short: the server gives up at its deadline */
    h.type = MC__RPC_DATA;
    h.body_len = 100;
    fd = mc__tcp_connect(host, port, mc__now_ms() + 2000);
    mc__frame_header_encode(&h, hb);
    assert_int_equal(mc__send2(fd, hb, sizeof(hb), body, 4, mc__now_ms() + 2000), 0);
    assert_int_equal(mc__recv_all(fd, hb, 1, mc__now_ms() + 5000), MC_ERR_SOCKET);
    close(fd);
    assert_int_equal(f.got.count, 0);
    assert_int_equal(mc_rpc_client_send(f.c, f.target, "ok", 2), 0);
    assert_int_equal(f.got.count, 1);
    rpc_down(&f);
}

static void test_rpc_tensor_codec(void **state) {
    (void)state;
    mc_buf_t b;
    mc__rpc_tensor_view_t v;
    uint64_t shape[2] = {7, 9};
    mc__buf_init(&b);
    assert_int_equal(mc__rpc_encode_tensor_meta(&b, "bf16", shape, 2), 0);
    mc__buf_put(&b, "DATA", 4);
    assert_int_equal(mc__rpc_decode_tensor_meta(b.data, b.len, &v), 0);
    assert_string_equal(v.dtype, "bf16");
    assert_int_equal(v.ndim, 2);
    assert_true(v.shape[0] == 7 && v.shape[1] == 9);
    assert_int_equal(b.len - v.data_off, 4);
    /* every truncation of the header fails; none reads past the end */
    for (size_t n = 0; n < v.data_off; n++) {
        uint8_t *copy = malloc(n ? n : 1);
        memcpy(copy, b.data, n);
        assert_int_equal(mc__rpc_decode_tensor_meta(copy, n, &v), MC_ERR_INVALID_ARGUMENT);
        free(copy);
    }
    /* too many dims, a NUL in the dtype, an empty dtype */
    mc__buf_reset(&b);
    mc__buf_bytes(&b, "f", 1);
    mc__buf_u32(&b, MC_RPC_MAX_DIMS + 1);
    for (int i = 0; i < MC_RPC_MAX_DIMS + 1; i++)
        mc__buf_u64(&b, 1);
    assert_int_equal(mc__rpc_decode_tensor_meta(b.data, b.len, &v), MC_ERR_INVALID_ARGUMENT);
    mc__buf_reset(&b);
    mc__buf_bytes(&b, "a\0b", 3);
    mc__buf_u32(&b, 0);
    assert_int_equal(mc__rpc_decode_tensor_meta(b.data, b.len, &v), MC_ERR_INVALID_ARGUMENT);
    mc__buf_reset(&b);
    mc__buf_bytes(&b, "", 0);
    mc__buf_u32(&b, 0);
    assert_int_equal(mc__rpc_decode_tensor_meta(b.data, b.len, &v), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc__rpc_decode_tensor_meta(NULL, 0, &v), MC_ERR_INVALID_ARGUMENT);
    mc__buf_free(&b);
}

typedef struct sender {
    mc_rpc_client_t *c;
    const char *target;
    int failures;
    int done;
} sender_t;

static void *send_loop(void *arg) {
    sender_t *s = arg;
    static uint8_t buf[64 << 10];
    for (int i = 0; i < 400; i++) {
        if (mc_rpc_client_send(s->c, s->target, buf, sizeof(buf)) != 0)
            s->failures++;
        else
            s->done++;
    }
    return NULL;
}

/* wait() returns once another thread stops the server; stop with senders still sending joins
 * every connection and the senders get errors, not hangs. */
static void *waiter(void *arg) {
    mc_rpc_server_wait(arg);
    return NULL;
}

static void test_rpc_stop_under_load(void **state) {
    (void)state;
    rpc_fixture_t f;
    pthread_t th[3], w;
    sender_t s[3];
    rpc_up(&f);
    pthread_create(&w, NULL, waiter, f.s);
    for (int i = 0; i < 3; i++) {
        s[i] = (sender_t){.c = f.c, .target = f.target};
        pthread_create(&th[i], NULL, send_loop, &s[i]);
    }
    usleep(50 * 1000);
    uint64_t t0 = mc__now_ms();
    mc_rpc_server_stop(f.s);
    pthread_join(w, NULL);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    assert_true(mc__now_ms() - t0 < 10000);
    int done = 0;
    for (int i = 0; i < 3; i++)
        done += s[i].done;
    pthread_mutex_lock(&f.got.mu);
    assert_true(f.got.count >= done); /* every acknowledged message reached the handler */
    pthread_mutex_unlock(&f.got.mu);
    rpc_down(&f);
}

static void test_local_topology(void **state) {
    (void)state;
    char small[4], big[65536];
    size_t need = 0, need2 = 0;
    assert_int_equal(mc_engine_local_topology(small, sizeof(small), &need),
                     MC_ERR_INVALID_ARGUMENT);
    assert_true(need > sizeof(small));
    assert_int_equal(mc_engine_local_topology(NULL, 0, &need2), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(need2, need);
    assert_int_equal(mc_engine_local_topology(big, need, &need2), 0);
    assert_int_equal(strlen(big) + 1, need);
    assert_int_equal(mc_engine_local_topology(big, 10, NULL), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_engine_local_topology(NULL, 10, &need), MC_ERR_INVALID_ARGUMENT);
    cJSON *j = cJSON_Parse(big);
    assert_non_null(j);
    assert_true(cJSON_IsObject(j) && cJSON_GetArraySize(j) >= 1);
    for (cJSON *it = j->child; it; it = it->next) {
        assert_true(strncmp(it->string, "cpu:", 4) == 0);
        assert_true(cJSON_IsArray(it) && cJSON_GetArraySize(it) == 2);
        assert_int_equal(cJSON_GetArraySize(cJSON_GetArrayItem(it, 0)), 0);
        assert_int_equal(cJSON_GetArraySize(cJSON_GetArrayItem(it, 1)), 0);
    }
    cJSON_Delete(j);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_probe_p2p),
        cmocka_unit_test(test_probe_http),
        cmocka_unit_test(test_rpc_data_sizes),
        cmocka_unit_test(test_rpc_tensor),
        cmocka_unit_test(test_rpc_bad_targets),
        cmocka_unit_test(test_rpc_pool_reuse),
        cmocka_unit_test(test_rpc_malformed_frames),
        cmocka_unit_test(test_rpc_tensor_codec),
        cmocka_unit_test(test_rpc_stop_under_load),
        cmocka_unit_test(test_local_topology),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
