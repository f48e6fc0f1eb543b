/* The RPC message codec and the descriptor JSON codec, without I/O. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "desc.h"
#include "mooncake/common/alloc.h"
#include "mooncake/error.h"
#include "proto.h"
#include "te_internal.h"

/* An engine holding only the transport table: what mc__transports_desc_parsed walks. */
static const mc_engine_t *table_engine(void) {
    static mc_engine_t e;
    if (!e.tps)
        e.tps = mc__transport_list(&e.ntp);
    return &e;
}

static void test_rw_roundtrip(void **state) {
    uint8_t raw[MC__TE_RW_HEAD];
    mc_frame_header_t h;
    uint64_t a = 0, l = 0, ep = 0;
    (void)state;
    mc__te_encode_rw(raw, MC__TE_WRITE, 5, 0x7f0012345678ull, 1000, 0x1122334455667788ull, 0);
    assert_int_equal(mc__frame_header_decode(raw, sizeof(raw), MC__TE_MAX_REQUEST_BODY, &h), 0);
    assert_int_equal(h.type, MC__TE_WRITE);
    assert_true(h.body_len == 1024);
    assert_int_equal(mc__te_check_request(&h), 0);
    assert_int_equal(mc__te_decode_rw(&h, raw + MC_FRAME_HEADER_SIZE, 24, &a, &l, &ep), 0);
    assert_true(a == 0x7f0012345678ull && l == 1000 && ep == 0x1122334455667788ull);
    assert_int_equal(h.flags, 0);
    /* the request flags travel in the header and leave the request valid */
    mc__te_encode_rw(raw, MC__TE_WRITE, 5, 0x7f0012345678ull, 1000, 0, MC__TE_F_BULK);
    assert_int_equal(mc__frame_header_decode(raw, sizeof(raw), MC__TE_MAX_REQUEST_BODY, &h), 0);
    assert_int_equal(h.flags, MC__TE_F_BULK);
    assert_int_equal(mc__te_check_request(&h), 0);
    /* short body, zero length, oversized length, WRITE length mismatch */
    assert_int_equal(mc__te_decode_rw(&h, raw + MC_FRAME_HEADER_SIZE, 23, &a, &l, &ep),
                     MC_ERR_INVALID_ARGUMENT);
    mc__te_encode_rw(raw, MC__TE_READ, 5, 1, 0, 0, 0);
    mc__frame_header_decode(raw, sizeof(raw), MC__TE_MAX_REQUEST_BODY, &h);
    assert_int_equal(mc__te_decode_rw(&h, raw + MC_FRAME_HEADER_SIZE, 24, &a, &l, &ep),
                     MC_ERR_INVALID_ARGUMENT);
    mc__te_encode_rw(raw, MC__TE_READ, 5, 1, MC__TE_MAX_SLICE + 1, 0, 0);
    mc__frame_header_decode(raw, sizeof(raw), MC__TE_MAX_REQUEST_BODY, &h);
    assert_int_equal(mc__te_decode_rw(&h, raw + MC_FRAME_HEADER_SIZE, 24, &a, &l, &ep),
                     MC_ERR_INVALID_ARGUMENT);
    h.type = MC__TE_WRITE;
    h.body_len = 24 + 10;
    mc__te_encode_rw(raw, MC__TE_READ, 5, 1, 11, 0, 0);
    assert_int_equal(mc__te_decode_rw(&h, raw + MC_FRAME_HEADER_SIZE, 24, &a, &l, &ep),
                     MC_ERR_INVALID_ARGUMENT);
}

static void test_check_request(void **state) {
    mc_frame_header_t h = {.magic = MC_FRAME_MAGIC, .version = 1};
    (void)state;
    h.type = MC__TE_PING;
    assert_int_equal(mc__te_check_request(&h), 0);
    h.body_len = 1;
    assert_int_equal(mc__te_check_request(&h), MC_ERR_INVALID_ARGUMENT);
    h.type = MC__TE_READ;
    h.body_len = MC__TE_RW_BODY;
    assert_int_equal(mc__te_check_request(&h), 0);
    h.body_len = 16; /* the addr/len body of a peer that sends no epoch */
    assert_int_equal(mc__te_check_request(&h), MC_ERR_INVALID_ARGUMENT);
    h.body_len = MC__TE_RW_BODY + 1;
    assert_int_equal(mc__te_check_request(&h), MC_ERR_INVALID_ARGUMENT);
    h.type = MC__TE_WRITE;
    h.body_len = MC__TE_RW_BODY - 1;
    assert_int_equal(mc__te_check_request(&h), MC_ERR_INVALID_ARGUMENT);
    h.type = MC__TE_NOTIFY;
    h.body_len = MC__TE_MAX_NOTIFY_BODY + 1;
    assert_int_equal(mc__te_check_request(&h), MC_ERR_INVALID_ARGUMENT);
    h.type = 200;
    h.body_len = 10;
    assert_int_equal(mc__te_check_request(&h), MC_ERR_NOT_IMPLEMENTED);
    h.body_len = 1u << 30;
    assert_int_equal(mc__te_check_request(&h), MC_ERR_INVALID_ARGUMENT);
    h.type = MC__TE_PING;
    h.body_len = 0;
    h.flags = MC_FRAME_F_REPLY;
    assert_int_equal(mc__te_check_request(&h), MC_ERR_INVALID_ARGUMENT);
}

static void test_error_and_notify(void **state) {
    mc_buf_t b;
    mc_frame_header_t h;
    mc__te_notify_view_t v;
    char msg[16];
    int code = 0;
    (void)state;
    mc__buf_init(&b);
    assert_int_equal(mc__te_encode_error(&b, MC__TE_READ, 7, MC_ERR_ADDRESS_NOT_REGISTERED,
                                         "a rather long message"),
                     0);
    assert_int_equal(mc__frame_header_decode(b.data, b.len, 4096, &h), 0);
    assert_true(h.flags == (MC_FRAME_F_REPLY | MC_FRAME_F_ERROR) && h.request_id == 7);
    assert_int_equal(
        mc__te_decode_error(b.data + MC_FRAME_HEADER_SIZE, h.body_len, &code, msg, sizeof(msg)), 0);
    assert_int_equal(code, MC_ERR_ADDRESS_NOT_REGISTERED);
    assert_string_equal(msg, "a rather long m"); /* truncated to the buffer */
    /* a peer cannot turn an error into success */
    {
        uint8_t body[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        assert_int_equal(mc__te_decode_error(body, sizeof(body), &code, NULL, 0), 0);
        assert_true(code < 0);
        assert_int_equal(mc__te_decode_error(body, 3, &code, NULL, 0), MC_ERR_INVALID_ARGUMENT);
    }
    mc__buf_reset(&b);
    assert_int_equal(mc__te_encode_notify(&b, 1, "me:1", "done", "xyz", 3), 0);
    assert_int_equal(mc__frame_header_decode(b.data, b.len, MC__TE_MAX_NOTIFY_BODY, &h), 0);
    assert_int_equal(mc__te_decode_notify(b.data + MC_FRAME_HEADER_SIZE, h.body_len, &v), 0);
    assert_true(v.from_len == 4 && !memcmp(v.from, "me:1", 4));
    assert_true(v.name_len == 4 && v.msg_len == 3 && !memcmp(v.msg, "xyz", 3));
    /* truncated, trailing garbage, embedded NUL in a name */
    assert_int_equal(mc__te_decode_notify(b.data + MC_FRAME_HEADER_SIZE, h.body_len - 1, &v),
                     MC_ERR_INVALID_ARGUMENT);
    mc__buf_u8(&b, 0);
    assert_int_equal(mc__te_decode_notify(b.data + MC_FRAME_HEADER_SIZE, h.body_len + 1, &v),
                     MC_ERR_INVALID_ARGUMENT);
    mc__buf_reset(&b);
    assert_int_equal(mc__te_encode_notify(&b, 1, "a", "b\0c", "", 0), 0);
    b.data[MC_FRAME_HEADER_SIZE + 4 + 1 + 4] = 0;
    assert_int_equal(
        mc__te_decode_notify(b.data + MC_FRAME_HEADER_SIZE, b.len - MC_FRAME_HEADER_SIZE, &v),
        MC_ERR_INVALID_ARGUMENT);
    mc__buf_free(&b);
}

static void test_write_ask_codec(void **state) {
    uint8_t raw[MC__TE_ASK_HEAD];
    mc_frame_header_t h;
    uint64_t a = 0, l = 0, ep = 0;
    uint32_t ml = 0;
    (void)state;
    mc__te_encode_ask(raw, 9, 0x7f0012345678ull, 1000, 0x1122334455667788ull, 300);
    assert_int_equal(mc__frame_header_decode(raw, sizeof(raw), MC__TE_MAX_REQUEST_BODY, &h), 0);
    assert_int_equal(h.type, MC__TE_WRITE_ASK);
    assert_true(h.request_id == 9 && h.body_len == 28 + 300 + 1000);
    assert_int_equal(mc__te_check_request(&h), 0);
    assert_int_equal(mc__te_decode_ask(&h, raw + MC_FRAME_HEADER_SIZE, 28, &a, &l, &ep, &ml), 0);
    assert_true(a == 0x7f0012345678ull && l == 1000 && ep == 0x1122334455667788ull && ml == 300);
    /* every truncated prefix of the head is refused */
    for (size_t n = 0; n < MC__TE_ASK_BODY; n++)
        assert_int_equal(mc__te_decode_ask(&h, raw + MC_FRAME_HEADER_SIZE, n, &a, &l, &ep, &ml),
                         MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc__te_decode_ask(&h, NULL, 28, &a, &l, &ep, &ml), MC_ERR_INVALID_ARGUMENT);
    /* a body that does not add up, either way */
    h.body_len++;
    assert_int_equal(mc__te_decode_ask(&h, raw + MC_FRAME_HEADER_SIZE, 28, &a, &l, &ep, &ml),
                     MC_ERR_INVALID_ARGUMENT);
    h.body_len -= 2;
    assert_int_equal(mc__te_decode_ask(&h, raw + MC_FRAME_HEADER_SIZE, 28, &a, &l, &ep, &ml),
                     MC_ERR_INVALID_ARGUMENT);
    /* the bounds: message, payload; a message alone (len 0) is fine */
    mc__te_encode_ask(raw, 1, 1, 0, 0, MC__TE_MAX_ASK_MSG);
    mc__frame_header_decode(raw, sizeof(raw), MC__TE_MAX_REQUEST_BODY, &h);
    assert_int_equal(mc__te_decode_ask(&h, raw + MC_FRAME_HEADER_SIZE, 28, &a, &l, &ep, &ml), 0);
    assert_true(l == 0 && ml == MC__TE_MAX_ASK_MSG);
    mc__te_encode_ask(raw, 1, 1, 0, 0, MC__TE_MAX_ASK_MSG + 1);
    mc__frame_header_decode(raw, sizeof(raw), MC__TE_MAX_REQUEST_BODY, &h);
    assert_int_equal(mc__te_decode_ask(&h, raw + MC_FRAME_HEADER_SIZE, 28, &a, &l, &ep, &ml),
                     MC_ERR_INVALID_ARGUMENT);
    mc__te_encode_ask(raw, 1, 1, MC__TE_MAX_SLICE, 0, MC__TE_MAX_ASK_MSG);
    assert_int_equal(mc__frame_header_decode(raw, sizeof(raw), MC__TE_MAX_REQUEST_BODY, &h), 0);
    assert_int_equal(mc__te_check_request(&h), 0);
    assert_int_equal(mc__te_decode_ask(&h, raw + MC_FRAME_HEADER_SIZE, 28, &a, &l, &ep, &ml), 0);
    mc__te_encode_ask(raw, 1, 1, MC__TE_MAX_SLICE + 1, 0, 0);
    mc__frame_header_decode(raw, sizeof(raw), MC__TE_MAX_REQUEST_BODY + 1, &h);
    assert_int_equal(mc__te_decode_ask(&h, raw + MC_FRAME_HEADER_SIZE, 28, &a, &l, &ep, &ml),
                     MC_ERR_INVALID_ARGUMENT);
    /* the header check: at least the head, at most a full slice with the longest message */
    h.body_len = MC__TE_ASK_BODY - 1;
    assert_int_equal(mc__te_check_request(&h), MC_ERR_INVALID_ARGUMENT);
    h.body_len = MC__TE_ASK_BODY;
    assert_int_equal(mc__te_check_request(&h), 0);
    h.body_len = MC__TE_MAX_REQUEST_BODY + 1;
    assert_int_equal(mc__te_check_request(&h), MC_ERR_INVALID_ARGUMENT);
    /* a WRITE may not announce what only a write-ask may */
    h.type = MC__TE_WRITE;
    h.body_len = MC__TE_RW_BODY + MC__TE_MAX_SLICE + 1;
    assert_int_equal(mc__te_check_request(&h), MC_ERR_INVALID_ARGUMENT);
}

static void test_desc_roundtrip(void **state) {
    mc__desc_buf_t bufs[2] = {
        {.addr = 0xffff000000001000ull, .len = 4096, .location = "cpu:0", .shm_id = 3},
        {.addr = 4096, .len = 100, .location = "*", .shm_id = -1}};
    mc__desc_t d = {.name = "h:1",
                    .instance_id = UINT64_MAX - 5,
                    .host_id = "boot/host",
                    .rpc_host = "h",
                    .rpc_port = 1,
                    .nbufs = 2,
                    .bufs = bufs};
    mc__desc_t *o = NULL;
    char *json = NULL;
    (void)state;
    assert_int_equal(mc__desc_encode(&d, &json), 0);
    assert_int_equal(mc__desc_decode(json, strlen(json), &o), 0);
    assert_string_equal(o->name, "h:1");
    assert_true(o->instance_id == UINT64_MAX - 5);
    assert_int_equal(o->nbufs, 2);
    /* sorted by address, 64-bit addresses intact */
    assert_true(o->bufs[0].addr == 4096 && o->bufs[1].addr == 0xffff000000001000ull);
    assert_true(o->bufs[1].shm_id == 3 && o->bufs[0].shm_id == -1);
    assert_int_equal(mc__desc_find(o, 4096, 100), 0);
    assert_int_equal(mc__desc_find(o, 4096 + 99, 1), 0);
    assert_int_equal(mc__desc_find(o, 4096 + 99, 2), -1);
    assert_int_equal(mc__desc_find(o, 4095, 1), -1);
    assert_int_equal(mc__desc_find(o, 0xffff000000001000ull + 10, 4086), 1);
    assert_int_equal(mc__desc_find(o, 0xffff000000001000ull + 10, UINT64_MAX), -1);
    assert_int_equal(mc__desc_find(o, 4096, 0), -1);
    /* no transport published a part: none, and no "transports" object */
    assert_int_equal(o->nparts, 0);
    assert_null(strstr(json, "transports"));
    mc__desc_free(o);
    mc__free(json);
}

#define DESC_HEAD                                                                                  \
    "{\"name\":\"x\",\"instance_id\":\"1\",\"host_id\":\"h\",\"rpc_host\":\"h\",\"rpc_port\":1,"
#define DESC_BUFS                                                                                  \
    "\"buffers\":[{\"addr\":\"4096\",\"length\":\"100\",\"location\":\"*\",\"shm\":2}]}"

/* decodes DESC_HEAD "transports": {parts} DESC_BUFS, lets the transports read their parts, and
 * returns the descriptor's reach (-1: the codec refused it) */
static long reach_of(const char *parts) {
    char j[2048];
    mc__desc_t *o = NULL;
    long reach;
    int n = snprintf(j, sizeof(j), DESC_HEAD "\"transports\":{%s}," DESC_BUFS, parts);
    assert_true(n > 0 && (size_t)n < sizeof(j));
    if (mc__desc_decode(j, strlen(j), &o) != 0) {
        assert_null(o);
        return -1;
    }
    mc__transports_desc_parsed(table_engine(), o);
    reach = (long)o->reach;
    mc__desc_free(o);
    return reach;
}

/* Transports' parts: carried through the codec as objects it does not read, then read by their
 * own transports; a malformed part only takes its transport off the peer. */
static void test_desc_parts(void **state) {
    static const char *fabric_ok =
        "\"fabric\":{\"provider\":\"tcp;ofi_rxm\",\"addr\":\"0200a4ff7f000001\",\"virt_addr\":true,"
        "\"keys\":[{\"addr\":\"4096\",\"key\":\"18446744073709551615\"}]}";
    static const char *shm_ok = "\"shm\":{\"socket\":\"@x\"}";
    static const char *fabric_bad[] = {
        "\"fabric\":{\"provider\":\"\",\"addr\":\"00\",\"virt_addr\":false,\"keys\":[]}",
        "\"fabric\":{\"provider\":\"p\",\"addr\":\"0\",\"virt_addr\":false,\"keys\":[]}",
        "\"fabric\":{\"provider\":\"p\",\"addr\":\"zz\",\"virt_addr\":false,\"keys\":[]}",
        "\"fabric\":{\"provider\":\"p\",\"addr\":\"\",\"virt_addr\":false,\"keys\":[]}",
        "\"fabric\":{\"provider\":\"p\",\"addr\":\"00\",\"virt_addr\":1,\"keys\":[]}",
        "\"fabric\":{\"provider\":\"p\",\"addr\":\"00\",\"keys\":[]}",
        "\"fabric\":{\"provider\":\"p\",\"addr\":\"00\",\"virt_addr\":false}",
        "\"fabric\":{\"provider\":\"p\",\"addr\":\"00\",\"virt_addr\":false,\"keys\":{}}",
        "\"fabric\":{\"provider\":\"p\",\"addr\":\"00\",\"virt_addr\":false,\"keys\":[{\"addr\":"
        "\"1\",\"key\":\"-3\"}]}",
        "\"fabric\":{\"provider\":\"p\",\"addr\":\"00\",\"virt_addr\":false,\"keys\":[{\"addr\":"
        "\"1\",\"key\":\"1\"},{\"addr\":\"1\",\"key\":\"2\"}]}",
        "\"fabric\":{\"provider\":\"p\",\"addr\":\"00\",\"virt_addr\":false,\"keys\":[7]}",
    };
    static const char *shm_bad[] = {"\"shm\":{\"socket\":\"x\"}", "\"shm\":{\"socket\":\"\"}",
                                    "\"shm\":{}", "\"shm\":{\"socket\":7}"};
    static const char *codec_bad[] = {
        DESC_HEAD "\"transports\":\"shm\"," DESC_BUFS,
        DESC_HEAD "\"transports\":{\"shm\":1}," DESC_BUFS,
        DESC_HEAD "\"transports\":{\"shm\":{},\"shm\":{}}," DESC_BUFS,
        DESC_HEAD "\"transports\":{\"a\":{},\"b\":{},\"c\":{},\"d\":{},\"e\":{},\"f\":{},\"g\":{},"
                  "\"h\":{},\"i\":{}}," DESC_BUFS,
        DESC_HEAD "\"transports\":{\"a_name_of_thirty_two_characters_\":{}}," DESC_BUFS,
    };
    const long shm_bit = 1L << MC__TP_SHM;
#ifdef MC_HAVE_LIBFABRIC
    const long fabric_bit = 1L << MC__TP_FABRIC;
#else
    const long fabric_bit = 0; /* a build without libfabric's headers reads no fabric part */
#endif
    mc__desc_buf_t bufs[1] = {{.addr = 4096, .len = 100, .location = "*", .shm_id = 2}};
    mc__desc_t d = {.name = "h:1",
                    .instance_id = 7,
                    .host_id = "boot/host",
                    .rpc_host = "h",
                    .rpc_port = 1,
                    .nbufs = 1,
                    .bufs = bufs};
    mc__desc_t *o = NULL;
    char *json = NULL, big[1400], part[2100];
    (void)state;
    /* round trip: the parts come back as they went, unknown ones included */
    assert_int_equal(mc__desc_add_part(&d, "shm", "{\"socket\":\"@x\"}"), 0);
    assert_int_equal(mc__desc_add_part(&d, "future", "{\"v\":[1,2]}"), 0);
    assert_int_equal(mc__desc_add_part(&d, "shm", "{}"), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc__desc_add_part(&d, "a_name_of_thirty_two_characters_", "{}"),
                     MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc__desc_encode(&d, &json), 0);
    mc__desc_free_parts(&d);
    assert_int_equal(mc__desc_decode(json, strlen(json), &o), 0);
    assert_int_equal(o->nparts, 2);
    assert_string_equal(mc__desc_part(o, "shm")->json, "{\"socket\":\"@x\"}");
    assert_string_equal(mc__desc_part(o, "future")->json, "{\"v\":[1,2]}");
    assert_null(mc__desc_part(o, "fabric"));
    mc__transports_desc_parsed(table_engine(), o);
    assert_true(o->reach == (uint32_t)shm_bit);
    assert_non_null(mc__desc_priv(o, "shm"));
    assert_null(mc__desc_priv(o, "future")); /* nobody's */
    mc__desc_free(o);
    mc__free(json);

    assert_int_equal(reach_of(""), 0);
    assert_int_equal(reach_of(shm_ok), shm_bit);
    snprintf(part, sizeof(part), "%s,%s", shm_ok, fabric_ok);
    assert_int_equal(reach_of(part), shm_bit | fabric_bit);
    for (size_t i = 0; i < sizeof(fabric_bad) / sizeof(fabric_bad[0]); i++) {
        snprintf(part, sizeof(part), "%s,%s", shm_ok, fabric_bad[i]);
        assert_int_equal(reach_of(part), shm_bit);
    }
    for (size_t i = 0; i < sizeof(shm_bad) / sizeof(shm_bad[0]); i++) {
        snprintf(part, sizeof(part), "%s,%s", shm_bad[i], fabric_ok);
        assert_int_equal(reach_of(part), fabric_bit);
    }
    /* an endpoint address longer than any libfabric name */
    {
        int n =
            snprintf(big, sizeof(big),
                     "\"fabric\":{\"provider\":\"p\",\"virt_addr\":false,\"keys\":[],\"addr\":\"");
        for (int i = 0; i < 2 * 257; i++)
            big[n++] = 'a';
        snprintf(big + n, sizeof(big) - (size_t)n, "\"}");
        assert_int_equal(reach_of(big), 0);
    }
    for (size_t i = 0; i < sizeof(codec_bad) / sizeof(codec_bad[0]); i++) {
        o = (mc__desc_t *)1;
        assert_int_equal(mc__desc_decode(codec_bad[i], strlen(codec_bad[i]), &o),
                         MC_ERR_MALFORMED_JSON);
        assert_null(o);
    }
    assert_int_equal(mc__alloc_live_bytes(), 0);
}

static void test_desc_malformed(void **state) {
    static const char *bad[] = {
        "",
        "[]",
        "{\"name\":\"x\"}",
        "{\"name\":\"x\",\"instance_id\":\"1\",\"host_id\":\"h\",\"rpc_host\":\"h\",\"rpc_port\":0,"
        "\"buffers\":[]}",
        "{\"name\":\"x\",\"instance_id\":\"1\",\"host_id\":\"h\",\"rpc_host\":\"h\",\"rpc_port\":"
        "70000,"
        "\"buffers\":[]}",
        "{\"name\":\"x\",\"instance_id\":\"1x\",\"host_id\":\"h\",\"rpc_host\":\"h\",\"rpc_port\":"
        "1,"
        "\"buffers\":[]}",
        "{\"name\":\"x\",\"instance_id\":\"99999999999999999999999\",\"host_id\":\"h\",\"rpc_"
        "host\":"
        "\"h\",\"rpc_port\":1,\"buffers\":[]}",
        /* overlapping buffers */
        "{\"name\":\"x\",\"instance_id\":\"1\",\"host_id\":\"h\",\"rpc_host\":\"h\",\"rpc_port\":1,"
        "\"buffers\":[{\"addr\":\"100\",\"length\":\"50\",\"location\":\"*\","
        "\"shm\":-1},{\"addr\":\"120\",\"length\":\"5\",\"location\":\"*\",\"shm\":-1}]}",
        /* wrapping range, zero length, bad shm */
        "{\"name\":\"x\",\"instance_id\":\"1\",\"host_id\":\"h\",\"rpc_host\":\"h\",\"rpc_port\":1,"
        "\"buffers\":[{\"addr\":\"18446744073709551615\",\"length\":\"2\","
        "\"location\":\"*\",\"shm\":-1}]}",
        "{\"name\":\"x\",\"instance_id\":\"1\",\"host_id\":\"h\",\"rpc_host\":\"h\",\"rpc_port\":1,"
        "\"buffers\":[{\"addr\":\"1\",\"length\":\"0\",\"location\":\"*\","
        "\"shm\":-1}]}",
        "{\"name\":\"x\",\"instance_id\":\"1\",\"host_id\":\"h\",\"rpc_host\":\"h\",\"rpc_port\":1,"
        "\"buffers\":[{\"addr\":\"1\",\"length\":\"1\",\"location\":\"*\","
        "\"shm\":-7}]}",
        "{\"name\":\"x\",\"instance_id\":\"1\",\"host_id\":\"h\",\"rpc_host\":\"h\",\"rpc_port\":1,"
        "\"buffers\":[7]}",
    };
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        mc__desc_t *o = (mc__desc_t *)1;
        assert_int_equal(mc__desc_decode(bad[i], strlen(bad[i]), &o), MC_ERR_MALFORMED_JSON);
        assert_null(o);
    }
    assert_int_equal(mc__alloc_live_bytes(), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rw_roundtrip),     cmocka_unit_test(test_check_request),
        cmocka_unit_test(test_error_and_notify), cmocka_unit_test(test_write_ask_codec),
        cmocka_unit_test(test_desc_roundtrip),   cmocka_unit_test(test_desc_malformed),
        cmocka_unit_test(test_desc_parts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
