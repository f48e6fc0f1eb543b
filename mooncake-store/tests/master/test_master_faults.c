/* What users and peers get wrong, and what happens to the master around them: bad flags and
 * config, garbage on the RPC port, dead clients, abandoned puts, restarts; plus the admin HTTP
 * endpoints reflecting all of it. Each test runs its own mooncake_master process. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "master_proc.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/frame.h"
#include "mooncake/common/http.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"
#include "proto/master_client.h"

static const char *g_bin;

static void expect_usage_error(const char *const *args, const char *needle) {
    char err[2048];
    int code = mc_test_run_capture(g_bin, args, err, sizeof(err));
    if (code != 2 || !strstr(err, needle))
        fail_msg("args %s: exit %d, stderr '%s' (wanted 2 and '%s')", args[0], code, err, needle);
    /* One line, not a dump. */
    assert_non_null(strchr(err, '\n'));
    assert_null(strchr(strchr(err, '\n') + 1, '\n'));
}

static void test_bad_flags(void **state) {
    char path[64], err[4096];
    FILE *fp;
    (void)state;
    {
        const char *a[] = {"--eviction_ratio=-0.1", NULL};
        expect_usage_error(a, "eviction_ratio");
    }
    {
        const char *a[] = {"--eviction_high_watermark_ratio=1.5", NULL};
        expect_usage_error(a, "eviction_high_watermark_ratio");
    }
    {
        const char *a[] = {"--port=70000", NULL};
        expect_usage_error(a, "port");
    }
    {
        const char *a[] = {"--metrics_port=-1", NULL};
        expect_usage_error(a, "metrics_port");
    }
    {
        const char *a[] = {"--client_ttl=0", NULL};
        expect_usage_error(a, "client_ttl");
    }
    {
        const char *a[] = {"--no_such_flag=1", NULL};
        expect_usage_error(a, "no_such_flag");
    }
    {
        const char *a[] = {"--port=abc", NULL};
        expect_usage_error(a, "port");
    }
    {
        const char *a[] = {"--config_path=/nonexistent/master.json", NULL};
        expect_usage_error(a, "/nonexistent/master.json");
    }
    {
        const char *a[] = {"--enable_ha", NULL};
        expect_usage_error(a, "enable_ha");
    }
    snprintf(path, sizeof(path), "/tmp/mc_master_cfg_%d.json", (int)getpid());
    fp = fopen(path, "w");
    /* An unknown key is a warning (named on stderr), not fatal: the bad port stops it. */
    fputs("{\"port\": 70000, \"colour\": \"blue\"}", fp);
    fclose(fp);
    {
        char arg[96];
        const char *a[] = {arg, NULL};
        snprintf(arg, sizeof(arg), "--config_path=%s", path);
        assert_int_equal(mc_test_run_capture(g_bin, a, err, sizeof(err)), 2);
        assert_non_null(strstr(err, "unknown key 'colour' ignored"));
        assert_non_null(strstr(err, "--port must be in 0..65535"));
        fp = fopen(path, "w");
        fputs("{\"eviction_ratio\": \"lots\"}", fp);
        fclose(fp);
        expect_usage_error(a, "eviction_ratio");
        fp = fopen(path, "w");
        fputs("[1, 2", fp);
        fclose(fp);
        expect_usage_error(a, "JSON");
    }
    {
        const char *a[] = {"--version", NULL};
        assert_int_equal(mc_test_run_capture(g_bin, a, err, sizeof(err)), 0);
    }
    {
        const char *a[] = {"--help", NULL};
        assert_int_equal(mc_test_run_capture(g_bin, a, err, sizeof(err)), 0);
    }
    /* A valid config file is obeyed (ephemeral metrics port from the file, rpc from the flag). */
    fp = fopen(path, "w");
    fputs("{\"metrics_port\": 0, \"client_ttl\": 3, \"eviction_ratio\": 0.1,"
          " \"enable_metric_reporting\": true, \"rpc_address\": \"127.0.0.1\"}",
          fp);
    fclose(fp);
    {
        mc_test_master_t m;
        char arg[96];
        const char *extra[] = {arg, NULL};
        snprintf(arg, sizeof(arg), "--config_path=%s", path);
        assert_int_equal(mc_test_master_start(g_bin, 0, extra, &m), 0);
        assert_int_equal(mc_test_master_stop(&m, 0), 0);
    }
    unlink(path);
}

/* Sends bytes on a fresh connection and reports whether the master closed it. */
static int send_and_expect_close(uint16_t port, const void *p, size_t n, int32_t *err_code) {
    int fd = mc__tcp_connect("127.0.0.1", port, mc__now_ms() + 2000);
    uint8_t hdr[MC_FRAME_HEADER_SIZE];
    uint8_t body[512];
    int closed = 0;
    *err_code = 0;
    assert_true(fd >= 0);
    assert_int_equal(mc__send_all(fd, p, n, mc__now_ms() + 2000), 0);
    /* Either an error reply and then EOF, or EOF at once. */
    if (mc__recv_all(fd, hdr, sizeof(hdr), mc__now_ms() + 3000) == 0) {
        mc_frame_header_t h;
        assert_int_equal(mc__frame_header_decode(hdr, sizeof(hdr), sizeof(body), &h), 0);
        assert_true(h.flags & MC_FRAME_F_ERROR);
        assert_int_equal(mc__recv_all(fd, body, (size_t)h.body_len, mc__now_ms() + 2000), 0);
        *err_code = mc__mp_decode_error(&h, body, (size_t)h.body_len, NULL, 0);
    }
    closed = mc__recv_all(fd, hdr, 1, mc__now_ms() + 3000) != 0;
    close(fd);
    return closed;
}

/* Sends one frame of type with a client id and body on a fresh connection: the code of the
 * error reply the master answers before closing it (the test fails when it does not close). */
static int32_t refused(uint16_t port, uint8_t type, const mc_buf_t *body) {
    mc_buf_t b;
    size_t start;
    int32_t code = 0;
    mc__buf_init(&b);
    mc__buf_frame_begin(&b, type, 0, 7, &start);
    mc__buf_put(&b, "0123456789abcdef", 16);
    mc__buf_put(&b, body->data, body->len);
    mc__buf_frame_end(&b, start);
    assert_true(send_and_expect_close(port, b.data, b.len, &code));
    mc__buf_free(&b);
    return code;
}

static void test_garbage_on_rpc_port(void **state) {
    mc_test_master_t m;
    mc__master_client_t *c = NULL;
    mc__key_replicas_t r;
    uint8_t junk[300];
    mc_buf_t b;
    size_t start;
    int32_t code;
    (void)state;
    assert_int_equal(mc_test_master_start(g_bin, 0, NULL, &m), 0);
    assert_int_equal(mc__master_client_connect(m.addr, 15000, NULL, &c), 0);
    assert_int_equal(mc__master_client_mount_segment(c, "good:1", 0x1000000, 1 << 20), 0);
    assert_int_equal(mc__master_client_put_start(c, "survivor", 100, NULL, &r), 0);
    assert_int_equal(mc__master_client_put_end(c, "survivor", r.version), 0);

    for (size_t i = 0; i < sizeof(junk); i++)
        junk[i] = (uint8_t)(i * 131 + 7);
    assert_true(send_and_expect_close(m.rpc_port, junk, sizeof(junk), &code));
    assert_int_equal(code, 0);

    /* Our framing, body length far beyond the limit: refused before anything is buffered. */
    mc__buf_init(&b);
    mc__buf_frame_begin(&b, MC_MP_EXIST, 0, 1, &start);
    assert_true(send_and_expect_close(m.rpc_port, b.data, b.len, &code) || 1);
    mc__buf_reset(&b);
    {
        mc_frame_header_t h = {
            MC_FRAME_MAGIC, MC_FRAME_VERSION, MC_MP_EXIST, 0, 2, (uint64_t)MC_MP_MAX_BODY + 1};
        uint8_t raw[MC_FRAME_HEADER_SIZE];
        mc__frame_header_encode(&h, raw);
        assert_true(send_and_expect_close(m.rpc_port, raw, sizeof(raw), &code));
        assert_int_equal(code, MC_ERR_INVALID_PARAMS);
        /* Another version of the protocol gets a clear error. */
        h.version = 9;
        h.body_len = 0;
        mc__frame_header_encode(&h, raw);
        assert_true(send_and_expect_close(m.rpc_port, raw, sizeof(raw), &code));
        assert_int_equal(code, MC_ERR_INVALID_VERSION);
    }
    /* A count that promises more keys than bytes sent. */
    mc__buf_frame_begin(&b, MC_MP_EXIST, 0, 3, &start);
    mc__buf_put(&b, "0123456789abcdef", 16);
    mc__buf_u32(&b, 1000000);
    mc__buf_frame_end(&b, start);
    assert_true(send_and_expect_close(m.rpc_port, b.data, b.len, &code));
    assert_int_equal(code, MC_ERR_INVALID_PARAMS);
    /* An empty key on the wire (the client library refuses it earlier). */
    mc__buf_reset(&b);
    mc__buf_frame_begin(&b, MC_MP_EXIST, 0, 4, &start);
    mc__buf_put(&b, "0123456789abcdef", 16);
    mc__buf_u32(&b, 1);
    mc__buf_bytes(&b, "", 0);
    mc__buf_frame_end(&b, start);
    assert_true(send_and_expect_close(m.rpc_port, b.data, b.len, &code));
    assert_int_equal(code, MC_ERR_INVALID_KEY);
    /* Put slots: a reserve asking for more slots than allowed, a reserve without its config, a
     * commit whose count promises entries that are not there (each entry a key and two u64). */
    {
        mc_buf_t body;
        mc__buf_init(&body);
        mc__buf_u32(&body, MC_MP_MAX_SLOTS + 1);
        mc__buf_u64(&body, 4096);
        mc__buf_u32(&body, 1);
        mc__buf_u8(&body, 0);
        mc__buf_u64(&body, 0);
        mc__buf_u32(&body, 0);
        assert_int_equal(refused(m.rpc_port, MC_MP_PUT_RESERVE, &body), MC_ERR_INVALID_PARAMS);
        body.len = 12; /* the count and the length, no config */
        assert_int_equal(refused(m.rpc_port, MC_MP_PUT_RESERVE, &body), MC_ERR_INVALID_PARAMS);
        mc__buf_reset(&body);
        mc__buf_u32(&body, 3);
        mc__buf_bytes(&body, "k", 1);
        mc__buf_u64(&body, 100);
        mc__buf_u64(&body, 1);
        assert_int_equal(refused(m.rpc_port, MC_MP_PUT_COMMIT, &body), MC_ERR_INVALID_PARAMS);
        mc__buf_free(&body);
    }
    /* A truncated frame followed by a hang-up. */
    {
        int fd = mc__tcp_connect("127.0.0.1", m.rpc_port, mc__now_ms() + 2000);
        assert_true(fd >= 0);
        assert_int_equal(mc__send_all(fd, b.data, b.len - 3, mc__now_ms() + 2000), 0);
        close(fd);
    }
    /* An unknown message type is answered and the connection stays usable. */
    {
        int fd = mc__tcp_connect("127.0.0.1", m.rpc_port, mc__now_ms() + 2000);
        uint8_t hdr[MC_FRAME_HEADER_SIZE], body[256];
        mc_frame_header_t h;
        mc__buf_reset(&b);
        mc__buf_frame_begin(&b, 99, 0, 5, &start);
        mc__buf_put(&b, "0123456789abcdef", 16);
        mc__buf_frame_end(&b, start);
        mc__buf_frame_begin(&b, MC_MP_HEARTBEAT, 0, 6, &start);
        mc__buf_put(&b, "0123456789abcdef", 16);
        mc__buf_frame_end(&b, start);
        assert_int_equal(mc__send_all(fd, b.data, b.len, mc__now_ms() + 2000), 0);
        assert_int_equal(mc__recv_all(fd, hdr, sizeof(hdr), mc__now_ms() + 2000), 0);
        assert_int_equal(mc__frame_header_decode(hdr, sizeof(hdr), sizeof(body), &h), 0);
        assert_int_equal(mc__recv_all(fd, body, (size_t)h.body_len, mc__now_ms() + 2000), 0);
        assert_int_equal(mc__mp_decode_error(&h, body, (size_t)h.body_len, NULL, 0),
                         MC_ERR_NOT_IMPLEMENTED);
        assert_int_equal(mc__recv_all(fd, hdr, sizeof(hdr), mc__now_ms() + 2000), 0);
        assert_int_equal(mc__frame_header_decode(hdr, sizeof(hdr), sizeof(body), &h), 0);
        assert_int_equal(h.request_id, 6);
        assert_false(h.flags & MC_FRAME_F_ERROR);
        close(fd);
    }
    mc__buf_free(&b);
    /* The established client never noticed. */
    assert_int_equal(mc__master_client_exist(c, "survivor"), 1);
    assert_int_equal(mc__master_client_get_replica_list(c, "survivor", &r), 0);
    mc__master_client_close(c);
    assert_int_equal(mc_test_master_stop(&m, 0), 0);
}

/* client_ttl of the expiry tests: the clients that must stay alive heartbeat (or are used) well
 * within it even on a loaded machine, the others are waited for, however long that takes. */
#define EXPIRY_TTL_S 3
#define EXPIRY_TTL_FLAG "--client_ttl=3"
/* How long a test waits for an expiry that must come: generous, it ends as soon as it came. */
#define EXPIRY_WAIT_MS 60000

static void test_client_expiry(void **state) {
    static const char *const extra[] = {EXPIRY_TTL_FLAG, NULL};
    mc_test_master_t m;
    mc__master_client_t *dying = NULL, *alive = NULL;
    mc__key_replicas_t r;
    mc__replicate_config_t two;
    char *body = NULL;
    uint8_t st = 0;
    double v = 0;
    uint64_t t0;
    (void)state;
    assert_int_equal(mc_test_master_start(g_bin, 0, extra, &m), 0);
    assert_int_equal(mc__master_client_connect(m.addr, 15000, NULL, &dying), 0);
    assert_int_equal(mc__master_client_connect(m.addr, 15000, NULL, &alive), 0);
    assert_int_equal(mc__master_client_mount_segment(dying, "dying:1", 0x1000000, 1 << 20), 0);
    assert_int_equal(mc__master_client_mount_segment(alive, "alive:2", 0x2000000, 1 << 20), 0);
    memset(&two, 0, sizeof(two));
    two.replica_num = 2;
    assert_int_equal(mc__master_client_put_start(alive, "both", 1000, &two, &r), 0);
    assert_int_equal(r.n_replicas, 2);
    assert_int_equal(mc__master_client_put_end(alive, "both", r.version), 0);
    two.replica_num = 1;
    two.n_preferred = 1;
    two.preferred[0].p = (const uint8_t *)"dying:1";
    two.preferred[0].len = 7;
    assert_int_equal(mc__master_client_put_start(alive, "only-dying", 1000, &two, &r), 0);
    assert_string_equal(r.replicas[0].segment_name, "dying:1");
    assert_int_equal(mc__master_client_put_end(alive, "only-dying", r.version), 0);
    /* Only `alive` heartbeats (every 250 ms, the TTL many times over), until `dying` expired. */
    t0 = mc__now_ms();
    for (;;) {
        int gone;
        assert_int_equal(mc__master_client_heartbeat(alive, &st), 0);
        assert_int_equal(st, MC_MP_CLIENT_OK);
        assert_int_equal(mc_test_http_get(m.metrics_port, "/get_all_segments", &body), 200);
        gone = strstr(body, "dying:1") == NULL;
        if (gone || mc__now_ms() - t0 >= EXPIRY_WAIT_MS)
            break;
        mc__free(body);
        usleep(250 * 1000);
    }
    assert_null(strstr(body, "dying:1"));
    assert_non_null(strstr(body, "alive:2"));
    mc__free(body);
    assert_int_equal(mc__master_client_exist(alive, "only-dying"), 0);
    assert_int_equal(mc__master_client_get_replica_list(alive, "both", &r), 0);
    assert_int_equal(r.n_replicas, 1);
    assert_string_equal(r.replicas[0].segment_name, "alive:2");
    assert_int_equal(mc_test_metric(m.metrics_port, "mooncake_master_expired_clients_total", &v),
                     0);
    assert_true(v >= 1);
    /* The expired client comes back: told to remount, and its segment is back. */
    assert_int_equal(mc__master_client_heartbeat(dying, &st), 0);
    assert_int_equal(st, MC_MP_CLIENT_NEED_REMOUNT);
    assert_int_equal(mc_test_http_get(m.metrics_port, "/query_segment?segment=dying:1", &body),
                     200);
    mc__free(body);
    mc__master_client_close(dying);
    mc__master_client_close(alive);
    assert_int_equal(mc_test_master_stop(&m, 0), 0);
}

/* A clean leave unmounts at once and is not an expiry; a client that just vanishes still is. */
static void test_unregister_is_not_expiry(void **state) {
    static const char *const extra[] = {EXPIRY_TTL_FLAG, NULL};
    mc_test_master_t m;
    mc__master_client_t *leaving = NULL, *vanishing = NULL, *reader = NULL;
    mc__key_replicas_t r;
    mc__replicate_config_t one;
    char *body = NULL;
    double v = -1;
    (void)state;
    assert_int_equal(mc_test_master_start(g_bin, 0, extra, &m), 0);
    assert_int_equal(mc__master_client_connect(m.addr, 15000, NULL, &leaving), 0);
    assert_int_equal(mc__master_client_connect(m.addr, 15000, NULL, &reader), 0);
    assert_int_equal(mc__master_client_heartbeat(reader, NULL), 0); /* known to the master */
    assert_int_equal(mc__master_client_mount_segment(leaving, "leaving:1", 0x1000000, 1 << 20), 0);
    memset(&one, 0, sizeof(one));
    one.replica_num = 1;
    assert_int_equal(mc__master_client_put_start(reader, "on-leaving", 1000, &one, &r), 0);
    assert_string_equal(r.replicas[0].segment_name, "leaving:1");
    assert_int_equal(mc__master_client_put_end(reader, "on-leaving", r.version), 0);
    assert_int_equal(mc__master_client_unregister(leaving), 0);
    /* At once, not a client_ttl later: the segment and the object on it are gone. */
    assert_int_equal(mc_test_http_get(m.metrics_port, "/get_all_segments", &body), 200);
    assert_null(strstr(body, "leaving:1"));
    mc__free(body);
    assert_int_equal(mc__master_client_exist(reader, "on-leaving"), 0);
    assert_int_equal(mc_test_metric(m.metrics_port, "mooncake_master_left_clients_total", &v), 0);
    assert_true(v == 1);
    /* Twice, and by a client the master never saw, is harmless. */
    assert_int_equal(mc__master_client_unregister(leaving), 0);
    assert_int_equal(mc__master_client_connect(m.addr, 15000, NULL, &vanishing), 0);
    assert_int_equal(mc__master_client_unregister(vanishing), 0);
    assert_int_equal(mc_test_metric(m.metrics_port, "mooncake_master_left_clients_total", &v), 0);
    assert_true(v == 1);
    mc__master_client_close(leaving);
    /* The reader goes without a word: after client_ttl it is expired, and only it. */
    assert_int_equal(mc__master_client_mount_segment(vanishing, "vanish:2", 0x2000000, 1 << 20), 0);
    mc__master_client_close(vanishing);
    mc__master_client_close(reader);
    for (uint64_t t0 = mc__now_ms(); mc__now_ms() - t0 < EXPIRY_WAIT_MS;) {
        assert_int_equal(
            mc_test_metric(m.metrics_port, "mooncake_master_expired_clients_total", &v), 0);
        if (v >= 2)
            break;
        usleep(100 * 1000);
    }
    assert_true(v == 2); /* reader and vanishing; leaving never */
    /* and a TTL later, still no third: leaving's unregister was final */
    usleep((EXPIRY_TTL_S * 1000 + 500) * 1000);
    assert_int_equal(mc_test_metric(m.metrics_port, "mooncake_master_expired_clients_total", &v),
                     0);
    assert_true(v == 2);
    assert_int_equal(mc_test_master_stop(&m, 0), 0);
}

/* A master that discards an unfinished put after 1 s, and a client of it with a segment of
 * seg_size bytes. The release timeout is well above the discard timeout, so the "space still
 * held" window stays observable on a loaded machine; no background eviction (a test's objects
 * may fill the segment); the client never heartbeats. */
static void start_discarding_master(mc_test_master_t *m, mc__master_client_t **c,
                                    uint64_t seg_size) {
    static const char *const extra[] = {
        "--put_start_discard_timeout_sec=1", "--put_start_release_timeout_sec=10",
        "--eviction_high_watermark_ratio=1.0", "--client_ttl=3600", NULL};
    assert_int_equal(mc_test_master_start(g_bin, 0, extra, m), 0);
    assert_int_equal(mc__master_client_connect(m->addr, 15000, NULL, c), 0);
    assert_int_equal(mc__master_client_mount_segment(*c, "s:1", 0x1000000, seg_size), 0);
}

/* The master's count of discarded puts once it reaches n, or when deadline_ms have passed since
 * t0 (the master sweeps periodically, so the count is polled, not slept for). */
static double wait_discarded(const mc_test_master_t *m, double n, uint64_t t0,
                             uint64_t deadline_ms) {
    double v = 0;
    do {
        usleep(50 * 1000);
        v = 0;
        assert_int_equal(
            mc_test_metric(m->metrics_port, "mooncake_master_discarded_puts_total", &v), 0);
    } while (v < n && mc__now_ms() - t0 < deadline_ms);
    return v;
}

static void test_discard_abandoned_put(void **state) {
    /* Both checks poll with deadlines instead of sleeping a fixed time. The one object fills the
     * segment: background eviction (above the high watermark) must not take it between its put
     * end and the check that it is there. */
    mc_test_master_t m;
    mc__master_client_t *c = NULL;
    mc__key_replicas_t r;
    double v = 0;
    uint64_t t0;
    int rc;
    (void)state;
    start_discarding_master(&m, &c, 8192);
    t0 = mc__now_ms();
    assert_int_equal(mc__master_client_put_start(c, "abandoned", 8192, NULL, &r), 0);
    /* An unfinished put is neither visible nor evictable. */
    assert_int_equal(mc__master_client_put_start(c, "other", 8192, NULL, &r),
                     MC_ERR_NO_AVAILABLE_HANDLE);
    assert_int_equal(mc__master_client_exist(c, "abandoned"), 0);
    /* After the discard timeout the key is free again ... */
    v = wait_discarded(&m, 1, t0, 9000);
    assert_int_equal(v, 1);
    assert_true(mc__now_ms() - t0 >= 1000);
    /* the reference's names for the same: discarded, its bytes still held, not yet released */
    assert_int_equal(mc_test_metric(m.metrics_port, "master_put_start_discard_cnt", &v), 0);
    assert_int_equal(v, 1);
    assert_int_equal(mc_test_metric(m.metrics_port, "master_put_start_discarded_staging_size", &v),
                     0);
    assert_int_equal(v, 8192);
    assert_int_equal(mc_test_metric(m.metrics_port, "master_put_start_release_cnt", &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(mc_test_metric(m.metrics_port, "master_put_start_alloc_failures_total", &v),
                     0);
    assert_int_equal(v, 1);
    assert_int_equal(mc__master_client_put_end(c, "abandoned", r.version), MC_ERR_OBJECT_NOT_FOUND);
    /* ... but its space is held until the release timeout, for a writer still copying. */
    assert_true(mc__now_ms() - t0 < 10000);
    assert_int_equal(mc__master_client_put_start(c, "other", 8192, NULL, &r),
                     MC_ERR_NO_AVAILABLE_HANDLE);
    do {
        usleep(100 * 1000);
        rc = mc__master_client_put_start(c, "other", 8192, NULL, &r);
    } while (rc == MC_ERR_NO_AVAILABLE_HANDLE && mc__now_ms() - t0 < 40000);
    assert_int_equal(rc, 0);
    assert_true(mc__now_ms() - t0 >= 10000);
    assert_int_equal(mc__master_client_put_end(c, "other", r.version), 0);
    assert_int_equal(mc_test_metric(m.metrics_port, "master_put_start_release_cnt", &v), 0);
    assert_int_equal(v, 1);
    assert_int_equal(mc_test_metric(m.metrics_port, "master_put_start_discarded_staging_size", &v),
                     0);
    assert_int_equal(v, 0);
    assert_int_equal(mc__master_client_exist(c, "other"), 1);
    mc__master_client_close(c);
    assert_int_equal(mc_test_master_stop(&m, 0), 0);
}

/* The sweep for stale unfinished puts walks a shard only once one of its unfinished puts may be
 * due. Committing a slot and ending an upsert both add a finished object; each used to be added
 * with no put start, which told the sweep that its shard held a put due at once, so the next pass
 * walked the shard whole: under steady small puts, the whole table every 100 ms (shard locks
 * held throughout). Here 128 slots stay unfinished until the discard timeout while 128 others
 * are committed and 16 keys upserted: the sweep then walks each shard once, when the slots are
 * due, so it walks at most every object once (256: the slots left and the keys). */
static void test_sweep_walks_only_due_shards(void **state) {
    enum { SLOTS = 256, COMMITS = 128, UPSERTS = 16 };
    mc_test_master_t m;
    mc__master_client_t *c = NULL;
    mc__replicate_config_t cfg;
    mc__key_replicas_t *sl = calloc(SLOTS, sizeof(*sl));
    char names[COMMITS][16];
    const char *keys[COMMITS];
    uint64_t lens[COMMITS], slots[COMMITS], versions[UPSERTS];
    int32_t codes[COMMITS];
    double walked = -1, discarded = 0;
    uint64_t t0;
    (void)state;
    assert_non_null(sl);
    memset(&cfg, 0, sizeof(cfg));
    cfg.replica_num = 1;
    start_discarding_master(&m, &c, 4u << 20);
    t0 = mc__now_ms();
    assert_int_equal(mc__master_client_put_reserve(c, SLOTS, 4096, &cfg, sl), 0);
    for (int i = 0; i < SLOTS; i++)
        assert_int_equal(sl[i].code, 0);
    for (int i = 0; i < COMMITS; i++) {
        snprintf(names[i], sizeof(names[i]), "sweep-%d", i);
        keys[i] = names[i];
        lens[i] = 4096;
        slots[i] = sl[i].version;
    }
    assert_int_equal(mc__master_client_put_commit(c, COMMITS, keys, lens, slots, codes), 0);
    for (int i = 0; i < COMMITS; i++)
        assert_int_equal(codes[i], 0);
    assert_int_equal(mc__master_client_batch_start(c, 1, UPSERTS, keys, lens, &cfg, sl), 0);
    for (int i = 0; i < UPSERTS; i++) {
        assert_int_equal(sl[i].code, 0);
        versions[i] = sl[i].version;
    }
    assert_int_equal(mc__master_client_batch_finish(c, 1, 1, UPSERTS, keys, versions, codes), 0);
    for (int i = 0; i < UPSERTS; i++)
        assert_int_equal(codes[i], 0);
    /* The slots not committed are discarded a timeout after their reserve, by one pass. */
    discarded = wait_discarded(&m, SLOTS - COMMITS, t0, 30000);
    assert_int_equal(discarded, SLOTS - COMMITS);
    assert_true(mc__now_ms() - t0 >= 1000);
    assert_int_equal(
        mc_test_metric(m.metrics_port, "mooncake_master_stale_put_sweep_objects_total", &walked),
        0);
    assert_true(walked >= SLOTS - COMMITS); /* the pass that discarded them walked them */
    assert_true(walked <= SLOTS);
    /* The sweep took no finished object. */
    for (int i = 0; i < COMMITS; i++)
        assert_int_equal(mc__master_client_exist(c, keys[i]), 1);
    mc__master_client_close(c);
    assert_int_equal(mc_test_master_stop(&m, 0), 0);
    free(sl);
}

static void test_restart_reconnects(void **state) {
    mc_test_master_t m;
    mc__master_client_t *c = NULL;
    mc__key_replicas_t r;
    uint16_t port;
    char *body = NULL;
    (void)state;
    assert_int_equal(mc_test_master_start(g_bin, 0, NULL, &m), 0);
    port = m.rpc_port;
    assert_int_equal(mc__master_client_connect(m.addr, 5000, NULL, &c), 0);
    assert_int_equal(mc__master_client_mount_segment(c, "re:1", 0x1000000, 1 << 20), 0);
    assert_int_equal(mc__master_client_put_start(c, "before", 100, NULL, &r), 0);
    assert_int_equal(mc__master_client_put_end(c, "before", r.version), 0);
    assert_int_equal(mc_test_master_stop(&m, 0), 0);
    /* Master down: calls fail within their deadline with RPC_FAIL. */
    mc__master_client_set_timeout(c, 300);
    {
        uint64_t t0 = mc__now_ms();
        assert_int_equal(mc__master_client_exist(c, "before"), MC_ERR_RPC_FAIL);
        assert_true(mc__now_ms() - t0 < 2000);
    }
    /* A refused connection is an answer: the call fails fast, not after its 5 s deadline. */
    mc__master_client_set_timeout(c, 5000);
    for (int i = 0; i < 3; i++) {
        uint64_t t0 = mc__now_ms();
        assert_int_equal(mc__master_client_heartbeat(c, NULL), MC_ERR_RPC_FAIL);
        assert_true(mc__now_ms() - t0 < 1500);
    }
    /* Same port again (freed a moment ago; in the rare case another process took it, the
     * start fails and so does the test, loudly). */
    assert_int_equal(mc_test_master_start(g_bin, port, NULL, &m), 0);
    mc__master_client_set_timeout(c, 5000);
    /* Metadata is gone with the old process; the segment is remounted transparently. */
    assert_int_equal(mc__master_client_exist(c, "before"), 0);
    assert_int_equal(mc_test_http_get(m.metrics_port, "/get_all_segments", &body), 200);
    assert_non_null(strstr(body, "re:1"));
    mc__free(body);
    assert_int_equal(mc__master_client_put_start(c, "after", 100, NULL, &r), 0);
    assert_int_equal(mc__master_client_put_end(c, "after", r.version), 0);
    assert_int_equal(mc__master_client_exist(c, "after"), 1);
    /* A master killed hard behaves the same for the client. */
    assert_int_not_equal(mc_test_master_stop(&m, 1), 0);
    assert_int_equal(mc_test_master_start(g_bin, port, NULL, &m), 0);
    assert_int_equal(mc__master_client_exist(c, "after"), 0);
    mc__master_client_close(c);
    assert_int_equal(mc_test_master_stop(&m, 0), 0);
}

static void test_admin_http(void **state) {
    static const char *const extra[] = {"--enable_http_metadata_server",
                                        "--http_metadata_server_port=0",
                                        "--http_metadata_server_host=127.0.0.1", NULL};
    mc_test_master_t m;
    mc__master_client_t *c = NULL;
    mc__key_replicas_t r;
    char *body = NULL;
    char url[128];
    int status = 0;
    double v = 0;
    (void)state;
    assert_int_equal(mc_test_master_start(g_bin, 0, extra, &m), 0);
    assert_int_equal(mc__master_client_connect(m.addr, 15000, NULL, &c), 0);
    assert_int_equal(mc__master_client_mount_segment(c, "adm:1", 0x1000000, 1 << 20), 0);
    for (int i = 0; i < 3; i++) {
        char key[16];
        snprintf(key, sizeof(key), "m%d", i);
        assert_int_equal(mc__master_client_put_start(c, key, 1000, NULL, &r), 0);
        assert_int_equal(mc__master_client_put_end(c, key, r.version), 0);
    }
    assert_int_equal(mc__master_client_get_replica_list(c, "missing", &r), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc__master_client_get_replica_list(c, "m0", &r), 0);

    assert_int_equal(mc_test_metric(m.metrics_port, "mooncake_master_objects", &v), 0);
    assert_int_equal(v, 3);
    assert_int_equal(mc_test_metric(m.metrics_port, "mooncake_master_object_bytes", &v), 0);
    assert_int_equal(v, 3000);
    assert_int_equal(mc_test_metric(m.metrics_port, "mooncake_master_segments", &v), 0);
    assert_int_equal(v, 1);
    assert_int_equal(mc_test_metric(m.metrics_port, "mooncake_master_capacity_bytes", &v), 0);
    assert_int_equal(v, 1 << 20);
    assert_int_equal(mc_test_metric(m.metrics_port, "mooncake_master_used_bytes", &v), 0);
    assert_int_equal(v, 3 * 1024);
    assert_int_equal(
        mc_test_metric(m.metrics_port, "mooncake_master_ops_total{op=\"put_start\"}", &v), 0);
    assert_int_equal(v, 3);
    assert_int_equal(
        mc_test_metric(m.metrics_port, "mooncake_master_errors_total{op=\"get_replica_list\"}", &v),
        0);
    assert_int_equal(v, 1);
    assert_int_equal(mc_test_metric(m.metrics_port,
                                    "mooncake_master_rpc_duration_seconds_count{op=\"put_end\"}",
                                    &v),
                     0);
    assert_int_equal(v, 3);
    assert_int_equal(
        mc_test_metric(m.metrics_port,
                       "mooncake_master_rpc_duration_seconds_bucket{op=\"put_end\",le=\"+Inf\"}",
                       &v),
        0);
    assert_int_equal(v, 3);

    assert_int_equal(mc_test_metric(m.metrics_port, "master_put_start_requests_total", &v), 0);
    assert_int_equal(v, 3);
    assert_int_equal(mc_test_metric(m.metrics_port, "master_key_count", &v), 0);
    assert_int_equal(v, 3);

    assert_int_equal(mc_test_http_get(m.metrics_port, "/health", &body), 200);
    assert_non_null(strstr(body, "\"status\":\"ok\""));
    mc__free(body);
    assert_int_equal(mc_test_http_get(m.metrics_port, "/metrics/summary", &body), 200);
    assert_non_null(strstr(body, "objects=3"));
    mc__free(body);
    assert_int_equal(mc_test_http_get(m.metrics_port, "/query_key?key=m1", &body), 200);
    assert_non_null(strstr(body, "\"transport_endpoint_\":\"adm:1\""));
    assert_non_null(strstr(body, "\"size_\":1000"));
    mc__free(body);
    assert_int_equal(mc_test_http_get(m.metrics_port, "/json/query_key?key=m1", &body), 200);
    assert_non_null(strstr(body, "\"segment\":\"adm:1\""));
    assert_non_null(strstr(body, "\"size\":1000"));
    mc__free(body);
    assert_int_equal(mc_test_http_get(m.metrics_port, "/query_key?key=nope", &body), 404);
    mc__free(body);
    assert_int_equal(mc_test_http_get(m.metrics_port, "/query_key", &body), 400);
    mc__free(body);
    assert_int_equal(mc_test_http_get(m.metrics_port, "/batch_query_keys?keys=m0,nope", &body),
                     200);
    assert_non_null(strstr(body, "\"m0\":{"));
    assert_non_null(strstr(body, "OBJECT_NOT_FOUND"));
    mc__free(body);
    assert_int_equal(mc_test_http_get(m.metrics_port, "/get_all_keys", &body), 200);
    assert_non_null(strstr(body, "m2\n"));
    mc__free(body);
    assert_int_equal(mc_test_http_get(m.metrics_port, "/json/get_all_keys", &body), 200);
    assert_non_null(strstr(body, "\"m2\""));
    mc__free(body);
    assert_int_equal(mc_test_http_get(m.metrics_port, "/query_segment?segment=adm:1", &body), 200);
    assert_non_null(strstr(body, "Used(bytes): 3072\n"));
    mc__free(body);
    assert_int_equal(mc_test_http_get(m.metrics_port, "/json/query_segment?segment=adm:1", &body),
                     200);
    assert_non_null(strstr(body, "\"used\":3072"));
    mc__free(body);
    assert_int_equal(mc_test_http_get(m.metrics_port, "/query_segment?segment=zzz", &body), 404);
    mc__free(body);
    assert_int_equal(mc_test_http_get(m.metrics_port, "/nothing/here", &body), 404);
    mc__free(body);
    /* A put still being written is not readable yet: the reference's REPLICA_IS_NOT_READY. */
    assert_int_equal(mc__master_client_put_start(c, "pending", 1000, NULL, &r), 0);
    assert_int_equal(mc_test_http_get(m.metrics_port, "/query_key?key=pending", &body), 404);
    assert_non_null(strstr(body, "\"error_code\":-703"));
    mc__free(body);
    assert_int_equal(mc_test_http_get(m.metrics_port, "/batch_query_keys?keys=pending", &body),
                     200);
    assert_non_null(strstr(body, "REPLICA_IS_NOT_READY"));
    mc__free(body);
    assert_int_equal(mc_test_http_get(m.metrics_port, "/get_all_keys", &body), 200);
    assert_null(strstr(body, "pending"));
    mc__free(body);
    /* A segment name the exposition must escape: quote, backslash, newline. */
    assert_int_equal(mc__master_client_mount_segment(c, "q\"\\\nx", 0x9000000, 1 << 20), 0);
    assert_int_equal(mc_test_http_get(m.metrics_port, "/metrics", &body), 200);
    assert_non_null(
        strstr(body, "\nsegment_total_capacity_bytes{segment=\"q\\\"\\\\\\\\x0ax\"} 1048576\n"));
    assert_non_null(strstr(body, "\nsegment_total_capacity_bytes{segment=\"adm:1\"} 1048576\n"));
    mc__free(body);
    {
        /* the longest name, no byte of it UTF-8: 2040 characters of label, still one line */
        char name[256], *want = mc__malloc(4096);
        size_t o = 0;
        memset(name, 0xff, 255);
        name[255] = '\0';
        assert_non_null(want);
        o += (size_t)sprintf(want, "\nsegment_allocated_bytes{segment=\"");
        for (int i = 0; i < 255; i++)
            o += (size_t)sprintf(want + o, "\\\\xff");
        sprintf(want + o, "\"} 0\n");
        assert_int_equal(mc__master_client_mount_segment(c, name, 0xa000000, 1 << 20), 0);
        assert_int_equal(mc_test_http_get(m.metrics_port, "/metrics", &body), 200);
        assert_non_null(strstr(body, want));
        mc__free(want);
    }
    mc__free(body);
    assert_int_equal(mc_test_http_get(m.metrics_port, "/get_all_segments", &body), 200);
    assert_non_null(strstr(body, "adm:1\n"));
    assert_non_null(strstr(body, "q\"\\\\x0ax\n")); /* one line: the newline is written \x0a */
    mc__free(body);

    /* The embedded TE metadata store. */
    assert_true(m.meta_port != 0);
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/metadata?key=seg1", (unsigned)m.meta_port);
    assert_int_equal(mc__http_request("PUT", url, "{\"a\":1}", 7, 2000, &status, NULL, NULL), 0);
    assert_int_equal(status, 200);
    assert_int_equal(mc__http_request("GET", url, NULL, 0, 2000, &status, &body, NULL), 0);
    assert_int_equal(status, 200);
    assert_string_equal(body, "{\"a\":1}");
    mc__free(body);
    mc__master_client_close(c);
    assert_int_equal(mc_test_master_stop(&m, 0), 0);
}

typedef struct stress_arg {
    const char *addr;
    int id;
    int failures;
} stress_arg_t;

/* One client doing every operation on keys shared with the other threads. */
/* A stress call answered what no interleaving allows: counted, and said (which call, which
 * code) so that a failure tells what went wrong. */
static void stress_fail(stress_arg_t *a, const char *what, int rc) {
    a->failures++;
    fprintf(stderr, "stress thread %d: %s answered %d (%s)\n", a->id, what, rc,
            mc_store_strerror(rc));
}

static void *stress_main(void *p) {
    stress_arg_t *a = p;
    mc__master_client_t *c = NULL;
    mc__key_replicas_t r;
    mc__replicate_config_t cfg;
    uint64_t seed = (uint64_t)a->id * 7919u + 1;
    if (mc__master_client_connect(a->addr, 5000, NULL, &c)) {
        a->failures++;
        return NULL;
    }
    memset(&cfg, 0, sizeof(cfg));
    for (int i = 0; i < 400; i++) {
        char key[32];
        int rc;
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        snprintf(key, sizeof(key), "s%llu", (unsigned long long)((seed >> 33) % 40));
        cfg.replica_num = 1 + (uint32_t)((seed >> 20) % 3);
        rc = mc__master_client_put_start(c, key, 1000 + (seed >> 40) % 50000, &cfg, &r);
        if (rc == 0) {
            rc = (seed & 1) ? mc__master_client_put_end(c, key, r.version)
                            : mc__master_client_put_revoke(c, key, r.version);
            /* Another thread's unmount may have taken the only replica: NOT_FOUND is fine. */
            if (rc && rc != MC_ERR_OBJECT_NOT_FOUND)
                stress_fail(a, (seed & 1) ? "put_end" : "put_revoke", rc);
        } else if (rc != MC_ERR_OBJECT_ALREADY_EXISTS && rc != MC_ERR_NO_AVAILABLE_HANDLE) {
            stress_fail(a, "put_start", rc);
        }
        rc = mc__master_client_get_replica_list(c, key, &r);
        if (rc && rc != MC_ERR_OBJECT_NOT_FOUND)
            stress_fail(a, "get_replica_list", rc);
        rc = mc__master_client_exist(c, key);
        if (rc < 0)
            stress_fail(a, "exist", rc);
        rc = mc__master_client_remove(c, key, (int)((seed >> 8) & 1));
        if (rc && rc != MC_ERR_OBJECT_NOT_FOUND && rc != MC_ERR_OBJECT_HAS_LEASE &&
            rc != MC_ERR_REPLICA_IS_NOT_READY)
            stress_fail(a, "remove", rc);
        if (a->id == 0 && i % 40 == 0) {
            /* Segments come and go under the others' feet. */
            if ((rc = mc__master_client_mount_segment(c, "churn:9", 0x9000000, 1 << 20)) ||
                (rc = mc__master_client_unmount_segment(c, "churn:9", 0x9000000)))
                stress_fail(a, "mount/unmount", rc);
        }
    }
    mc__master_client_close(c);
    return NULL;
}

static void test_concurrent_clients(void **state) {
    static const char *const extra[] = {"--default_kv_lease_ttl=5", NULL};
    enum { T = 4 };
    mc_test_master_t m;
    mc__master_client_t *c = NULL;
    pthread_t th[T];
    stress_arg_t args[T];
    double v = -1;
    (void)state;
    assert_int_equal(mc_test_master_start(g_bin, 0, extra, &m), 0);
    assert_int_equal(mc__master_client_connect(m.addr, 2000, NULL, &c), 0);
    assert_int_equal(mc__master_client_mount_segment(c, "st:1", 0x1000000, 1 << 20), 0);
    assert_int_equal(mc__master_client_mount_segment(c, "st:2", 0x2000000, 1 << 20), 0);
    for (int i = 0; i < T; i++) {
        args[i] = (stress_arg_t){m.addr, i, 0};
        assert_int_equal(pthread_create(&th[i], NULL, stress_main, &args[i]), 0);
    }
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(args[i].failures, 0);
    }
    /* Nothing leaked in the accounting: with every object removed, no space is in use (once
     * the space of objects forced out under a lease comes back, 5 ms later). */
    usleep(20 * 1000);
    assert_true(mc__master_client_remove_all(c, 1) >= 0);
    assert_int_equal(mc_test_metric(m.metrics_port, "mooncake_master_objects", &v), 0);
    assert_int_equal(v, 0);
    for (int i = 0; i < 100; i++) {
        assert_int_equal(mc_test_metric(m.metrics_port, "mooncake_master_used_bytes", &v), 0);
        if (v == 0)
            break;
        usleep(50 * 1000);
    }
    assert_int_equal(v, 0);
    assert_int_equal(mc_test_metric(m.metrics_port, "mooncake_master_capacity_bytes", &v), 0);
    assert_int_equal(v, 2 << 20);
    mc__master_client_close(c);
    assert_int_equal(mc_test_master_stop(&m, 0), 0);
}

typedef struct {
    mc__master_client_t *c;
    int rc;
} lookup_arg_t;

static void *lookup_main(void *p) {
    lookup_arg_t *a = p;
    mc__key_replicas_t kr;
    a->rc = mc__master_client_get_replica_list(a->c, "nobody-put-this", &kr);
    return NULL;
}

/* A caller that waits for the client's connection is seen (mc__master_client_wanted: the
 * replica cache's renewer lets it go first). The master is stopped, so the first call holds
 * the connection while it waits for its reply and the second waits for the first. */
static void test_waiting_caller_is_seen(void **state) {
    mc_test_master_t m;
    mc__master_client_t *c = NULL;
    pthread_t th[2];
    lookup_arg_t args[2];
    uint64_t deadline;
    (void)state;
    assert_int_equal(mc_test_master_start(g_bin, 0, NULL, &m), 0);
    assert_int_equal(mc__master_client_connect(m.addr, 60000, NULL, &c), 0);
    assert_false(mc__master_client_wanted(c));
    assert_int_equal(kill(m.pid, SIGSTOP), 0);
    for (int i = 0; i < 2; i++) {
        args[i] = (lookup_arg_t){c, 1};
        assert_int_equal(pthread_create(&th[i], NULL, lookup_main, &args[i]), 0);
    }
    deadline = mc__now_ms() + 30000;
    while (!mc__master_client_wanted(c) && mc__now_ms() < deadline)
        usleep(1000);
    assert_true(mc__master_client_wanted(c));
    assert_int_equal(kill(m.pid, SIGCONT), 0);
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(args[i].rc, MC_ERR_OBJECT_NOT_FOUND);
    }
    assert_false(mc__master_client_wanted(c));
    mc__master_client_close(c);
    assert_int_equal(mc_test_master_stop(&m, 0), 0);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_flags),
        cmocka_unit_test(test_garbage_on_rpc_port),
        cmocka_unit_test(test_client_expiry),
        cmocka_unit_test(test_unregister_is_not_expiry),
        cmocka_unit_test(test_discard_abandoned_put),
        cmocka_unit_test(test_sweep_walks_only_due_shards),
        cmocka_unit_test(test_restart_reconnects),
        cmocka_unit_test(test_admin_http),
        cmocka_unit_test(test_concurrent_clients),
        cmocka_unit_test(test_waiting_caller_is_seen),
    };
    if (argc < 2) {
        fprintf(stderr, "usage: %s <path to mooncake_master>\n", argv[0]);
        return 2;
    }
    g_bin = argv[1];
    return cmocka_run_group_tests_name("store_master_faults", tests, NULL, NULL);
}
