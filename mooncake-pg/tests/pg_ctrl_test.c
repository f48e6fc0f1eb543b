/* The control plane's wire and coordinator: the codec both ways and against bodies that lie, and
 * a real coordinator on a loopback socket fed malformed frames, unknown types, oversize and
 * truncated bodies and a client that vanishes mid-frame; it answers each with a clear error (or
 * closes that connection) and keeps serving the next client. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"
#include "mooncake/pg.h"
#include "pg_ctrl_proto.h"

static mc_pgc_req_t sample(uint8_t type) {
    mc_pgc_req_t r;
    memset(&r, 0, sizeof(r));
    r.type = type;
    strcpy(r.group, "g");
    r.rank = 1;
    r.size = 2;
    r.seats = 4;
    strcpy(r.addr, "127.0.0.1:1234#4096");
    r.joiners = 0x8;
    r.active = 0x3;
    r.round = 7;
    r.syncs = 2;
    r.epoch = 3;
    r.window_ms = 100;
    r.timeout_ms = 2000;
    return r;
}

static void test_codec_round_trip(void **state) {
    for (uint8_t t = MC_PGC_REGISTER; t <= MC_PGC_VIEW; t++) {
        mc_pgc_req_t r = sample(t), back;
        mc_buf_t b;
        mc__buf_init(&b);
        assert_int_equal(mc__pgc_encode_request(&r, 9, &b), 0);
        mc_frame_header_t h;
        assert_int_equal(mc__frame_header_decode(b.data, b.len, MC_PGC_MAX_BODY, &h), 0);
        assert_int_equal(h.type, t);
        char err[64];
        const uint8_t *body = b.data + MC_FRAME_HEADER_SIZE;
        size_t len = b.len - MC_FRAME_HEADER_SIZE;
        assert_int_equal(mc__pgc_decode_request(t, body, len, &back, err, sizeof(err)), 0);
        assert_string_equal(back.group, "g");
        assert_int_equal(back.rank, 1);
        if (t != MC_PGC_VIEW)
            assert_string_equal(back.addr, r.addr);
        if (t == MC_PGC_ACTIVATE)
            assert_true(back.joiners == 0x8 && back.active == 0x3 && back.epoch == 3 &&
                        back.window_ms == 100);
        /* every strict prefix is refused, and so is one byte too many */
        for (size_t cut = 0; cut < len; cut++)
            assert_int_equal(mc__pgc_decode_request(t, body, cut, &back, err, sizeof(err)),
                             MC_ERR_INVALID_ARGUMENT);
        mc__buf_u8(&b, 0);
        assert_int_equal(mc__pgc_decode_request(t, body, len + 1, &back, err, sizeof(err)),
                         MC_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(err, "trailing"));
        assert_int_equal(mc__pgc_decode_request(9, body, len, &back, err, sizeof(err)),
                         MC_ERR_INVALID_ARGUMENT);
        mc__buf_free(&b);
    }
}

static void test_codec_rejects_bad_fields(void **state) {
    char err[64];
    mc_pgc_req_t r;
    mc_buf_t b;
    mc__buf_init(&b);
#define REJECT(type_, stmt)                                                                        \
    do {                                                                                           \
        r = sample(type_);                                                                         \
        stmt;                                                                                      \
        mc__buf_reset(&b);                                                                         \
        assert_int_equal(mc__pgc_encode_request(&r, 1, &b), 0);                                    \
        mc_pgc_req_t out;                                                                          \
        assert_int_equal(mc__pgc_decode_request(type_, b.data + MC_FRAME_HEADER_SIZE,              \
                                                b.len - MC_FRAME_HEADER_SIZE, &out, err,           \
                                                sizeof(err)),                                      \
                         MC_ERR_INVALID_ARGUMENT);                                                 \
    } while (0)
    REJECT(MC_PGC_REGISTER, r.seats = 0);
    REJECT(MC_PGC_REGISTER, r.seats = 65);
    REJECT(MC_PGC_REGISTER, r.size = 5);
    REJECT(MC_PGC_REGISTER, r.rank = 4);
    REJECT(MC_PGC_REGISTER, r.extension = 2);
    REJECT(MC_PGC_REGISTER, r.addr[0] = 0);
    REJECT(MC_PGC_JOIN, r.group[0] = 0);
    REJECT(MC_PGC_JOIN, r.rank = 64);
    REJECT(MC_PGC_ACTIVATE, r.joiners = 0);
    REJECT(MC_PGC_ACTIVATE, r.joiners = 0x2); /* a joiner the proposer holds active */
    REJECT(MC_PGC_ACTIVATE, r.active = 0x1);  /* a proposer outside its own view */
#undef REJECT
    mc__buf_free(&b);

    /* replies: an error reply gives the peer's code; a view with a seat past its seats, an
     * address list that claims more entries than it holds, a positive error code: refused */
    mc_pgc_view_t v, back;
    memset(&v, 0, sizeof(v));
    v.status = MC_PGC_APPLIED;
    v.seats = 2;
    v.active = 0x3;
    v.known = 0x3;
    strcpy(v.addrs[0], "a#1");
    strcpy(v.addrs[1], "b#2");
    mc__buf_init(&b);
    assert_int_equal(mc__pgc_encode_view(&v, 1, &b), 0);
    const uint8_t *body = b.data + MC_FRAME_HEADER_SIZE;
    size_t len = b.len - MC_FRAME_HEADER_SIZE;
    assert_int_equal(mc__pgc_decode_reply(MC_FRAME_F_REPLY, body, len, &back), 0);
    assert_string_equal(back.addrs[1], "b#2");
    assert_int_equal(mc__pgc_decode_reply(0, body, len, &back), MC_ERR_INVALID_ARGUMENT);
    for (size_t cut = 0; cut < len; cut++)
        assert_int_equal(mc__pgc_decode_reply(MC_FRAME_F_REPLY, body, cut, &back),
                         MC_ERR_INVALID_ARGUMENT);
    v.active = 0x4; /* a seat the group does not have */
    mc__buf_reset(&b);
    mc__pgc_encode_view(&v, 1, &b);
    assert_int_equal(mc__pgc_decode_reply(MC_FRAME_F_REPLY, b.data + MC_FRAME_HEADER_SIZE,
                                          b.len - MC_FRAME_HEADER_SIZE, &back),
                     MC_ERR_INVALID_ARGUMENT);
    /* the count of addresses (after 1+4+8*6 bytes) raised past what follows */
    v.active = 0x3;
    mc__buf_reset(&b);
    mc__pgc_encode_view(&v, 1, &b);
    b.data[MC_FRAME_HEADER_SIZE + 53] = 40;
    assert_int_equal(mc__pgc_decode_reply(MC_FRAME_F_REPLY, b.data + MC_FRAME_HEADER_SIZE,
                                          b.len - MC_FRAME_HEADER_SIZE, &back),
                     MC_ERR_INVALID_ARGUMENT);
    mc__buf_reset(&b);
    mc__pgc_encode_error(MC_ERR_ENDPOINT, "late", 1, &b);
    assert_int_equal(mc__pgc_decode_reply(MC_FRAME_F_REPLY | MC_FRAME_F_ERROR,
                                          b.data + MC_FRAME_HEADER_SIZE,
                                          b.len - MC_FRAME_HEADER_SIZE, &back),
                     MC_ERR_ENDPOINT);
    assert_string_equal(back.reason, "late");
    mc__buf_reset(&b);
    mc__pgc_encode_error(5, "positive", 1, &b);
    assert_int_equal(mc__pgc_decode_reply(MC_FRAME_F_REPLY | MC_FRAME_F_ERROR,
                                          b.data + MC_FRAME_HEADER_SIZE,
                                          b.len - MC_FRAME_HEADER_SIZE, &back),
                     MC_ERR_INVALID_ARGUMENT);
    mc__buf_free(&b);
}

/* --- a live coordinator --- */

static mc_pg_coordinator_t *coord;
static uint16_t port;

static int setup(void **state) {
    if (mc_pg_coordinator_start("127.0.0.1", 0, &coord) != 0)
        return -1;
    char a[64];
    mc_pg_coordinator_address(coord, a, sizeof(a));
    port = (uint16_t)atoi(strrchr(a, ':') + 1);
    return 0;
}

static int teardown(void **state) {
    mc_pg_coordinator_stop(coord);
    return 0;
}

static int dial(void) {
    int fd = mc__tcp_connect("127.0.0.1", port, mc__now_ms() + 10000);
    assert_true(fd >= 0);
    return fd;
}

/* Sends raw bytes, reads one reply frame: its decode result (0 or the error code) into *out,
 * -1000 when the coordinator closed the connection instead. */
static int exchange(int fd, const void *p, size_t n, mc_pgc_view_t *out) {
    assert_int_equal(mc__send_all(fd, p, n, mc__now_ms() + 10000), 0);
    uint8_t hdr[MC_FRAME_HEADER_SIZE];
    if (mc__recv_all(fd, hdr, sizeof(hdr), mc__now_ms() + 30000) != 0)
        return -1000;
    mc_frame_header_t h;
    assert_int_equal(mc__frame_header_decode(hdr, sizeof(hdr), MC_PGC_MAX_BODY, &h), 0);
    static uint8_t body[MC_PGC_MAX_BODY];
    assert_int_equal(mc__recv_all(fd, body, (size_t)h.body_len, mc__now_ms() + 10000), 0);
    return mc__pgc_decode_reply(h.flags, body, (size_t)h.body_len, out);
}

static int request(int fd, const mc_pgc_req_t *r, mc_pgc_view_t *out) {
    mc_buf_t b;
    mc__buf_init(&b);
    assert_int_equal(mc__pgc_encode_request(r, 5, &b), 0);
    int rc = exchange(fd, b.data, b.len, out);
    mc__buf_free(&b);
    return rc;
}

static void hdr_put(uint8_t *out, uint8_t type, uint16_t flags, uint64_t id, uint64_t len) {
    mc_frame_header_t h = {MC_FRAME_MAGIC, MC_FRAME_VERSION, type, flags, id, len};
    mc__frame_header_encode(&h, out);
}

static void test_coordinator_bad_input(void **state) {
    static mc_pgc_view_t v;
    int fd = dial();
    /* a frame of an unknown type: an error reply, the connection stays usable */
    uint8_t hdr[MC_FRAME_HEADER_SIZE + 4];
    hdr_put(hdr, 42, 0, 1, 4);
    memset(hdr + MC_FRAME_HEADER_SIZE, 0, 4);
    assert_int_equal(exchange(fd, hdr, sizeof(hdr), &v), MC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(v.reason, "unknown message type"));
    /* a truncated body (the frame is whole, the fields are not) */
    hdr_put(hdr, MC_PGC_JOIN, 0, 2, 4);
    assert_int_equal(exchange(fd, hdr, sizeof(hdr), &v), MC_ERR_INVALID_ARGUMENT);
    /* requests about a group nobody made */
    mc_pgc_req_t r = sample(MC_PGC_VIEW);
    strcpy(r.group, "nobody");
    assert_int_equal(request(fd, &r, &v), MC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(v.reason, "no group"));
    r = sample(MC_PGC_JOIN);
    strcpy(r.group, "nobody");
    assert_int_equal(request(fd, &r, &v), MC_ERR_INVALID_ARGUMENT);
    r = sample(MC_PGC_REGISTER);
    r.extension = 1;
    strcpy(r.group, "nobody");
    assert_int_equal(request(fd, &r, &v), MC_ERR_INVALID_ARGUMENT);
    /* a group of one is made at once; its view names the rank */
    r = sample(MC_PGC_REGISTER);
    r.rank = 0;
    r.size = 1;
    r.seats = 2;
    strcpy(r.group, "solo");
    assert_int_equal(request(fd, &r, &v), 0);
    assert_true(v.status == MC_PGC_APPLIED && v.active == 0x1 && v.epoch == 1 && v.seats == 2);
    assert_string_equal(v.addrs[0], r.addr);
    /* the same name with another seat count is refused */
    r.seats = 3;
    assert_int_equal(request(fd, &r, &v), MC_ERR_INVALID_ARGUMENT);
    /* a proposal naming seats the group does not have */
    r = sample(MC_PGC_ACTIVATE);
    strcpy(r.group, "solo");
    r.rank = 0;
    r.active = 0x1;
    r.joiners = 0x4;
    assert_int_equal(request(fd, &r, &v), MC_ERR_INVALID_ARGUMENT);
    /* a joiner that never asks: the proposal fails after its timeout, the next one may open */
    r.joiners = 0x2;
    r.timeout_ms = 300;
    r.window_ms = 0;
    assert_int_equal(request(fd, &r, &v), MC_ERR_ENDPOINT);
    assert_non_null(strstr(v.reason, "did not ask to join"));
    /* a register that waits for a second rank that never comes */
    r = sample(MC_PGC_REGISTER);
    strcpy(r.group, "pair");
    r.rank = 0;
    r.timeout_ms = 300;
    assert_int_equal(request(fd, &r, &v), MC_ERR_ENDPOINT);
    /* a reply-flagged frame, then a bad magic: an error, then the connection is closed */
    hdr_put(hdr, MC_PGC_VIEW, MC_FRAME_F_REPLY, 3, 0);
    assert_int_equal(exchange(fd, hdr, MC_FRAME_HEADER_SIZE, &v), MC_ERR_INVALID_ARGUMENT);
    close(fd);
    fd = dial();
    memset(hdr, 0x5a, MC_FRAME_HEADER_SIZE);
    assert_int_equal(exchange(fd, hdr, MC_FRAME_HEADER_SIZE, &v), MC_ERR_INVALID_ARGUMENT);
    close(fd);
    /* a body larger than the channel's limit is refused before it is read */
    fd = dial();
    hdr_put(hdr, MC_PGC_VIEW, 0, 4, MC_PGC_MAX_BODY + 1);
    assert_int_equal(exchange(fd, hdr, MC_FRAME_HEADER_SIZE, &v), MC_ERR_INVALID_ARGUMENT);
    close(fd);
    /* a client that dies half-way through a frame */
    fd = dial();
    hdr_put(hdr, MC_PGC_VIEW, 0, 5, 100);
    assert_int_equal(mc__send_all(fd, hdr, MC_FRAME_HEADER_SIZE + 4, mc__now_ms() + 1000), 0);
    close(fd);
    /* and the coordinator still serves */
    fd = dial();
    r = sample(MC_PGC_VIEW);
    strcpy(r.group, "solo");
    r.rank = 0;
    assert_int_equal(request(fd, &r, &v), 0);
    assert_true(v.active == 0x1 && v.seats == 2);
    close(fd);
}

/* A call held for others (a registration waiting for its second rank) does not hold up a stop. */
static void *held_register(void *arg) {
    static mc_pgc_view_t v;
    int fd = dial();
    mc_pgc_req_t r = sample(MC_PGC_REGISTER);
    strcpy(r.group, "held");
    r.rank = 0;
    r.timeout_ms = 120000;
    *(int *)arg = request(fd, &r, &v);
    close(fd);
    return NULL;
}

static void test_stop_with_held_calls(void **state) {
    static mc_pgc_view_t v;
    int rc = 0;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, held_register, &rc), 0);
    /* the group exists once the registration is held */
    int fd = dial();
    mc_pgc_req_t r = sample(MC_PGC_VIEW);
    strcpy(r.group, "held");
    uint64_t deadline = mc__now_ms() + 60000;
    while (request(fd, &r, &v) != 0) {
        assert_true(mc__now_ms() < deadline);
        usleep(10000);
    }
    close(fd);
    uint64_t t0 = mc__now_ms();
    mc_pg_coordinator_stop(coord);
    coord = NULL;
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_true(mc__now_ms() - t0 < 30000); /* not the registration's 120 s */
    assert_true(rc != 0);
    assert_int_equal(setup(state), 0); /* the teardown's coordinator */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codec_round_trip),
        cmocka_unit_test(test_codec_rejects_bad_fields),
        cmocka_unit_test_setup_teardown(test_coordinator_bad_input, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_with_held_calls, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
