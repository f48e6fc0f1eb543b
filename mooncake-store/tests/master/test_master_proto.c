/* Master RPC codec without I/O: round trips, and every way a body can be wrong. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mooncake/common/alloc.h"
#include "mooncake/error.h"
#include "proto/disk_proto.h"
#include "proto/master_proto.h"

static mc__mp_str_t S(const char *s) {
    mc__mp_str_t v = {(const uint8_t *)s, (uint32_t)strlen(s)};
    return v;
}

/* Encodes r, decodes it back into out (caller frees). */
static int roundtrip(const mc__mp_request_t *r, mc_buf_t *b, mc__mp_request_t *out) {
    mc_frame_header_t h;
    int rc = mc__mp_encode_request(b, r);
    if (rc)
        return rc;
    assert_int_equal(mc__frame_header_decode(b->data, b->len, MC_MP_MAX_BODY, &h), 0);
    assert_int_equal(h.body_len, b->len - MC_FRAME_HEADER_SIZE);
    return mc__mp_decode_request(&h, b->data + MC_FRAME_HEADER_SIZE, (size_t)h.body_len, out);
}

/* STORAGE_CONFIG: a request of the client id alone, a reply of the shared directory. */
static void test_storage_config(void **state) {
    mc__mp_request_t r, out;
    mc_buf_t b;
    mc_frame_header_t h;
    char dir[MC_MP_MAX_SEGMENT_NAME + 1];
    uint8_t ev = 9;
    uint64_t quota = 9;
    (void)state;
    memset(&r, 0, sizeof(r));
    r.type = MC_MP_STORAGE_CONFIG;
    r.request_id = 7;
    mc__buf_init(&b);
    assert_int_equal(roundtrip(&r, &b, &out), 0);
    assert_int_equal(out.type, MC_MP_STORAGE_CONFIG);
    mc__mp_request_free(&out);
    /* A byte more than the client id is refused. */
    assert_int_equal(mc__frame_header_decode(b.data, b.len, MC_MP_MAX_BODY, &h), 0);
    mc__buf_put(&b, "x", 1);
    assert_int_equal(
        mc__mp_decode_request(&h, b.data + MC_FRAME_HEADER_SIZE, MC_MP_CLIENT_ID_LEN + 1, &out),
        MC_ERR_INVALID_PARAMS);
    mc__buf_free(&b);

    /* The reply, with a directory and without one (the master has no --root_fs_dir). */
    for (int i = 0; i < 2; i++) {
        const char *want = i == 0 ? "/mnt/fs/mooncake_cluster" : "";
        mc__buf_init(&b);
        assert_int_equal(mc__dp_encode_storage_config(&b, 7, want, (uint8_t)(1 - i), 42u * !i), 0);
        assert_int_equal(mc__frame_header_decode(b.data, b.len, MC_MP_MAX_BODY, &h), 0);
        assert_int_equal(mc__dp_decode_storage_config(&h, b.data + MC_FRAME_HEADER_SIZE,
                                                      (size_t)h.body_len, dir, &ev, &quota),
                         0);
        assert_string_equal(dir, want);
        assert_int_equal(ev, 1 - i);
        assert_int_equal(quota, 42u * !i);
        /* Short: not a reply. */
        assert_int_equal(mc__dp_decode_storage_config(&h, b.data + MC_FRAME_HEADER_SIZE,
                                                      (size_t)h.body_len - 1, dir, &ev, &quota),
                         MC_ERR_RPC_FAIL);
        mc__buf_free(&b);
    }
}

static void test_put_start_roundtrip(void **state) {
    mc__mp_str_t keys[3] = {S("a"), S("bb"), S("ccc")};
    uint64_t lens[3] = {1, 1u << 20, 12345};
    mc__mp_request_t r, d;
    mc_buf_t b;
    (void)state;
    memset(&r, 0, sizeof(r));
    mc__buf_init(&b);
    r.type = MC_MP_PUT_START;
    r.request_id = 77;
    memset(r.client_id, 0xab, sizeof(r.client_id));
    r.n_keys = 3;
    r.keys = keys;
    r.value_lens = lens;
    r.config.replica_num = 2;
    r.config.flags = MC_MP_CFG_SOFT_PIN;
    r.config.soft_pin_ttl_ms = 999;
    r.config.n_preferred = 1;
    r.config.preferred[0] = S("host:1");
    assert_int_equal(roundtrip(&r, &b, &d), 0);
    assert_int_equal(d.type, MC_MP_PUT_START);
    assert_int_equal(d.request_id, 77);
    assert_memory_equal(d.client_id, r.client_id, 16);
    assert_int_equal(d.n_keys, 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(d.keys[i].len, keys[i].len);
        assert_memory_equal(d.keys[i].p, keys[i].p, keys[i].len);
        assert_int_equal(d.value_lens[i], lens[i]);
    }
    assert_int_equal(d.config.replica_num, 2);
    assert_int_equal(d.config.flags, MC_MP_CFG_SOFT_PIN);
    assert_int_equal(d.config.soft_pin_ttl_ms, 999);
    assert_int_equal(d.config.n_preferred, 1);
    assert_memory_equal(d.config.preferred[0].p, "host:1", 6);
    mc__mp_request_free(&d);

    /* Every strict prefix of the body is refused, never over-read (ASan watches). */
    for (size_t cut = 0; cut < b.len - MC_FRAME_HEADER_SIZE; cut++) {
        mc_frame_header_t h;
        uint8_t *copy = malloc(cut ? cut : 1);
        mc__frame_header_decode(b.data, b.len, MC_MP_MAX_BODY, &h);
        memcpy(copy, b.data + MC_FRAME_HEADER_SIZE, cut);
        assert_int_not_equal(mc__mp_decode_request(&h, copy, cut, &d), 0);
        free(copy);
    }
    /* Trailing garbage is refused too. */
    {
        mc_frame_header_t h;
        mc__buf_u8(&b, 0);
        mc__frame_header_decode(b.data, b.len, MC_MP_MAX_BODY, &h);
        assert_int_equal(mc__mp_decode_request(&h, b.data + MC_FRAME_HEADER_SIZE, b.len - 24, &d),
                         MC_ERR_INVALID_PARAMS);
    }
    mc__buf_free(&b);
}

static void test_other_requests(void **state) {
    mc__mp_str_t keys[2] = {S("k1"), S("k2")};
    mc__mp_request_t r, d;
    mc_buf_t b;
    const uint8_t types[] = {MC_MP_PUT_END, MC_MP_PUT_REVOKE, MC_MP_GET_REPLICA_LIST, MC_MP_EXIST,
                             MC_MP_REMOVE};
    (void)state;
    mc__buf_init(&b);
    for (size_t t = 0; t < sizeof(types); t++) {
        memset(&r, 0, sizeof(r));
        mc__buf_reset(&b);
        r.type = types[t];
        r.n_keys = 2;
        r.keys = keys;
        r.force = 1;
        assert_int_equal(roundtrip(&r, &b, &d), 0);
        assert_int_equal(d.n_keys, 2);
        assert_memory_equal(d.keys[1].p, "k2", 2);
        assert_int_equal(d.force, types[t] == MC_MP_REMOVE);
        mc__mp_request_free(&d);
    }
    memset(&r, 0, sizeof(r));
    mc__buf_reset(&b);
    r.type = MC_MP_MOUNT_SEGMENT;
    r.segment_name = S("seg");
    r.base = 0x1000;
    r.size = 4096;
    assert_int_equal(roundtrip(&r, &b, &d), 0);
    assert_int_equal(d.base, 0x1000);
    assert_int_equal(d.size, 4096);
    assert_memory_equal(d.segment_name.p, "seg", 3);
    mc__mp_request_free(&d);
    mc__buf_reset(&b);
    r.type = MC_MP_REMOVE_ALL;
    r.force = 1;
    assert_int_equal(roundtrip(&r, &b, &d), 0);
    assert_int_equal(d.force, 1);
    mc__buf_reset(&b);
    r.type = MC_MP_HEARTBEAT;
    r.n_mounted = 3;
    assert_int_equal(roundtrip(&r, &b, &d), 0);
    assert_int_equal(d.n_mounted, 3);
    {
        /* An older client sends the client id only: accepted, the count unknown. */
        mc_frame_header_t h;
        assert_int_equal(mc__frame_header_decode(b.data, b.len, MC_MP_MAX_BODY, &h), 0);
        h.body_len -= 4;
        assert_int_equal(
            mc__mp_decode_request(&h, b.data + MC_FRAME_HEADER_SIZE, (size_t)h.body_len, &d), 0);
        assert_int_equal(d.n_mounted, MC_MP_MOUNTS_UNKNOWN);
        /* A partial count is malformed. */
        h.body_len += 2;
        assert_int_equal(
            mc__mp_decode_request(&h, b.data + MC_FRAME_HEADER_SIZE, (size_t)h.body_len, &d),
            MC_ERR_INVALID_PARAMS);
    }
    /* UNREGISTER_CLIENT is the client id alone; anything after it is malformed. */
    mc__buf_reset(&b);
    memset(&r, 0, sizeof(r));
    r.type = MC_MP_UNREGISTER_CLIENT;
    r.client_id[0] = 0x5a;
    assert_int_equal(roundtrip(&r, &b, &d), 0);
    assert_int_equal(d.type, MC_MP_UNREGISTER_CLIENT);
    assert_int_equal(d.client_id[0], 0x5a);
    assert_string_equal(mc__mp_type_name(MC_MP_UNREGISTER_CLIENT), "unregister_client");
    {
        mc_frame_header_t h;
        uint8_t body[MC_MP_CLIENT_ID_LEN + 1] = {0};
        assert_int_equal(mc__frame_header_decode(b.data, b.len, MC_MP_MAX_BODY, &h), 0);
        assert_int_equal(h.body_len, MC_MP_CLIENT_ID_LEN);
        h.body_len = sizeof(body);
        assert_int_equal(mc__mp_decode_request(&h, body, sizeof(body), &d), MC_ERR_INVALID_PARAMS);
        h.body_len = MC_MP_CLIENT_ID_LEN - 1;
        assert_int_equal(mc__mp_decode_request(&h, body, MC_MP_CLIENT_ID_LEN - 1, &d),
                         MC_ERR_INVALID_PARAMS);
        /* The reserved numbers after it are not ours: unknown. */
        h.type = MC_MP_TYPE_MAX_;
        h.body_len = MC_MP_CLIENT_ID_LEN;
        assert_int_equal(mc__mp_decode_request(&h, body, MC_MP_CLIENT_ID_LEN, &d),
                         MC_ERR_NOT_IMPLEMENTED);
    }
    mc__buf_free(&b);
}

static void test_encoder_limits(void **state) {
    mc__mp_str_t keys[1] = {S("")};
    mc__mp_request_t r;
    mc_buf_t b;
    char *big = malloc(MC_MP_MAX_KEY + 1);
    (void)state;
    mc__buf_init(&b);
    memset(&r, 0, sizeof(r));
    r.type = MC_MP_EXIST;
    r.n_keys = 1;
    r.keys = keys;
    assert_int_equal(mc__mp_encode_request(&b, &r), MC_ERR_INVALID_KEY);
    memset(big, 'k', MC_MP_MAX_KEY + 1);
    keys[0].p = (const uint8_t *)big;
    keys[0].len = MC_MP_MAX_KEY + 1;
    assert_int_equal(mc__mp_encode_request(&b, &r), MC_ERR_INVALID_KEY);
    r.n_keys = MC_MP_MAX_BATCH + 1;
    assert_int_equal(mc__mp_encode_request(&b, &r), MC_ERR_INVALID_PARAMS);
    r.type = 0;
    assert_int_equal(mc__mp_encode_request(&b, &r), MC_ERR_INVALID_PARAMS);
    r.type = MC_MP_MOUNT_SEGMENT;
    assert_int_equal(mc__mp_encode_request(&b, &r), MC_ERR_INVALID_PARAMS); /* no name */
    assert_int_equal(b.len, 0);
    free(big);
    mc__buf_free(&b);
}

static void test_decoder_rejects(void **state) {
    mc_frame_header_t h = {MC_FRAME_MAGIC, MC_FRAME_VERSION, MC_MP_EXIST, 0, 1, 0};
    mc__mp_request_t d;
    mc_buf_t b;
    (void)state;
    mc__buf_init(&b);
    /* Unknown type. */
    h.type = 200;
    assert_int_equal(mc__mp_decode_request(&h, (const uint8_t *)"", 0, &d), MC_ERR_NOT_IMPLEMENTED);
    h.type = MC_MP_EXIST;
    /* No client id. */
    assert_int_equal(mc__mp_decode_request(&h, (const uint8_t *)"abc", 3, &d),
                     MC_ERR_INVALID_PARAMS);
    /* A count larger than the bytes that follow. */
    mc__buf_put(&b, "0123456789abcdef", 16);
    mc__buf_u32(&b, 0xffffffffu);
    assert_int_equal(mc__mp_decode_request(&h, b.data, b.len, &d), MC_ERR_INVALID_PARAMS);
    /* A key longer than the limit. */
    mc__buf_reset(&b);
    mc__buf_put(&b, "0123456789abcdef", 16);
    mc__buf_u32(&b, 1);
    mc__buf_u32(&b, MC_MP_MAX_KEY + 1);
    for (uint32_t i = 0; i < MC_MP_MAX_KEY + 1; i++)
        mc__buf_u8(&b, 'x');
    assert_int_equal(mc__mp_decode_request(&h, b.data, b.len, &d), MC_ERR_INVALID_KEY);
    /* Too many preferred segments. */
    mc__buf_reset(&b);
    h.type = MC_MP_PUT_START;
    mc__buf_put(&b, "0123456789abcdef", 16);
    mc__buf_u32(&b, 1);
    mc__buf_bytes(&b, "k", 1);
    mc__buf_u64(&b, 10);
    mc__buf_u32(&b, 1);
    mc__buf_u8(&b, 0);
    mc__buf_u64(&b, 0);
    mc__buf_u32(&b, MC_MP_MAX_PREFERRED + 1);
    for (uint32_t i = 0; i < MC_MP_MAX_PREFERRED + 1; i++)
        mc__buf_bytes(&b, "s", 1);
    assert_int_equal(mc__mp_decode_request(&h, b.data, b.len, &d), MC_ERR_INVALID_PARAMS);
    mc__buf_free(&b);
}

/* Every strict prefix of the body in b is refused, and so is one byte too many. */
static void assert_prefixes_refused(mc_buf_t *b) {
    mc_frame_header_t h;
    mc__mp_request_t d;
    for (size_t cut = 0; cut < b->len - MC_FRAME_HEADER_SIZE; cut++) {
        uint8_t *copy = malloc(cut ? cut : 1);
        mc__frame_header_decode(b->data, b->len, MC_MP_MAX_BODY, &h);
        memcpy(copy, b->data + MC_FRAME_HEADER_SIZE, cut);
        assert_int_not_equal(mc__mp_decode_request(&h, copy, cut, &d), 0);
        free(copy);
    }
    mc__buf_u8(b, 0);
    mc__frame_header_decode(b->data, b->len, MC_MP_MAX_BODY, &h);
    assert_int_equal(mc__mp_decode_request(&h, b->data + MC_FRAME_HEADER_SIZE,
                                           b->len - MC_FRAME_HEADER_SIZE, &d),
                     MC_ERR_INVALID_PARAMS);
}

/* PUT_RESERVE and PUT_COMMIT: round trips, the limits both sides keep, malformed bodies. */
static void test_put_slots(void **state) {
    mc__mp_str_t keys[2] = {S("k1"), S("key-two")};
    uint64_t lens[2] = {4096, 0}, slots[2] = {7, 1ull << 40};
    mc__mp_request_t r, d;
    mc_frame_header_t h = {MC_FRAME_MAGIC, MC_FRAME_VERSION, MC_MP_PUT_RESERVE, 0, 1, 0};
    mc_buf_t b;
    (void)state;
    mc__buf_init(&b);
    memset(&r, 0, sizeof(r));
    r.type = MC_MP_PUT_RESERVE;
    r.n_slots = 16;
    r.size = 65536;
    r.config.replica_num = 2;
    r.config.flags = MC_MP_CFG_HARD_PIN;
    r.config.n_preferred = 1;
    r.config.preferred[0] = S("host:2");
    assert_int_equal(roundtrip(&r, &b, &d), 0);
    assert_int_equal(d.n_slots, 16);
    assert_int_equal(d.size, 65536);
    assert_int_equal(d.config.replica_num, 2);
    assert_int_equal(d.config.flags, MC_MP_CFG_HARD_PIN);
    assert_memory_equal(d.config.preferred[0].p, "host:2", 6);
    assert_int_equal(d.n_keys, 0);
    mc__mp_request_free(&d);
    assert_prefixes_refused(&b);
    /* Counts outside 1..MC_MP_MAX_SLOTS are refused by the encoder and the decoder. */
    r.n_slots = 0;
    assert_int_equal(mc__mp_encode_request(&b, &r), MC_ERR_INVALID_PARAMS);
    r.n_slots = MC_MP_MAX_SLOTS + 1;
    assert_int_equal(mc__mp_encode_request(&b, &r), MC_ERR_INVALID_PARAMS);
    for (uint32_t n = 0; n <= 1; n++) {
        mc__buf_reset(&b);
        mc__buf_put(&b, "0123456789abcdef", 16);
        mc__buf_u32(&b, n ? MC_MP_MAX_SLOTS + 1 : 0);
        mc__buf_u64(&b, 4096);
        mc__buf_u32(&b, 1);
        mc__buf_u8(&b, 0);
        mc__buf_u64(&b, 0);
        mc__buf_u32(&b, 0);
        assert_int_equal(mc__mp_decode_request(&h, b.data, b.len, &d), MC_ERR_INVALID_PARAMS);
    }

    mc__buf_reset(&b);
    memset(&r, 0, sizeof(r));
    r.type = MC_MP_PUT_COMMIT;
    r.n_keys = 2;
    r.keys = keys;
    r.value_lens = lens;
    r.slots = slots;
    assert_int_equal(roundtrip(&r, &b, &d), 0);
    assert_int_equal(d.n_keys, 2);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(d.keys[i].len, keys[i].len);
        assert_memory_equal(d.keys[i].p, keys[i].p, keys[i].len);
        assert_int_equal(d.value_lens[i], lens[i]);
        assert_int_equal(d.slots[i], slots[i]);
    }
    mc__mp_request_free(&d);
    assert_null(d.slots);
    assert_prefixes_refused(&b);
    /* A commit without its slots is refused before anything is written. */
    r.slots = NULL;
    mc__buf_reset(&b);
    assert_int_equal(mc__mp_encode_request(&b, &r), MC_ERR_INVALID_PARAMS);
    assert_int_equal(b.len, 0);
    /* A count larger than the entries that follow (a key and two u64 each); an empty key. */
    h.type = MC_MP_PUT_COMMIT;
    for (int bad = 0; bad < 2; bad++) {
        mc__buf_reset(&b);
        mc__buf_put(&b, "0123456789abcdef", 16);
        mc__buf_u32(&b, bad ? 1 : 2);
        mc__buf_bytes(&b, "k", bad ? 0 : 1);
        mc__buf_u64(&b, 1);
        mc__buf_u64(&b, 1);
        assert_int_equal(mc__mp_decode_request(&h, b.data, b.len, &d),
                         bad ? MC_ERR_INVALID_KEY : MC_ERR_INVALID_PARAMS);
    }
    mc__buf_free(&b);
}

/* PUT_COMMIT_FOR: PUT_COMMIT entries each preceded by the client id they are for. */
static void test_put_commit_for(void **state) {
    mc__mp_str_t keys[3] = {S("k1"), S("key-two"), S("k3")};
    uint64_t lens[3] = {4096, 0, 1}, slots[3] = {7, 1ull << 40, 9};
    uint8_t clients[3][MC_MP_CLIENT_ID_LEN];
    mc__mp_request_t r, d;
    mc_frame_header_t h = {MC_FRAME_MAGIC, MC_FRAME_VERSION, MC_MP_PUT_COMMIT_FOR, 0, 1, 0};
    mc_buf_t b;
    int64_t live = 0;
    (void)state;
    for (int i = 0; i < 3; i++)
        memset(clients[i], 0xa0 + i, MC_MP_CLIENT_ID_LEN);
    mc__buf_init(&b);
    memset(&r, 0, sizeof(r));
    r.type = MC_MP_PUT_COMMIT_FOR;
    memset(r.client_id, 0x55, MC_MP_CLIENT_ID_LEN); /* the forwarder's own */
    r.n_keys = 3;
    r.keys = keys;
    r.value_lens = lens;
    r.slots = slots;
    r.key_clients = clients;
    assert_int_equal(roundtrip(&r, &b, &d), 0);
    /* The wire: the forwarder's id, the count, then the first entry's id before its key. */
    assert_int_equal(b.data[MC_FRAME_HEADER_SIZE], 0x55);
    assert_int_equal(b.data[MC_FRAME_HEADER_SIZE + MC_MP_CLIENT_ID_LEN + 4], 0xa0);
    assert_memory_equal(d.client_id, r.client_id, MC_MP_CLIENT_ID_LEN);
    assert_int_equal(d.n_keys, 3);
    assert_non_null(d.key_clients);
    for (int i = 0; i < 3; i++) {
        assert_memory_equal(d.key_clients[i], clients[i], MC_MP_CLIENT_ID_LEN);
        assert_int_equal(d.keys[i].len, keys[i].len);
        assert_memory_equal(d.keys[i].p, keys[i].p, keys[i].len);
        assert_int_equal(d.value_lens[i], lens[i]);
        assert_int_equal(d.slots[i], slots[i]);
    }
    mc__mp_request_free(&d);
    assert_null(d.key_clients);
    /* Decoding fails cleanly when the entries' memory cannot be had. */
    mc__frame_header_decode(b.data, b.len, MC_MP_MAX_BODY, &h);
    live = mc__alloc_live_bytes();
    mc__alloc_fail_after(1);
    assert_int_equal(
        mc__mp_decode_request(&h, b.data + MC_FRAME_HEADER_SIZE, b.len - MC_FRAME_HEADER_SIZE, &d),
        MC_ERR_MEMORY);
    mc__alloc_fail_after(0);
    assert_int_equal(mc__alloc_live_bytes(), live);
    assert_prefixes_refused(&b); /* every prefix, and a trailing byte */
    /* A PUT_COMMIT never carries (nor decodes) ids: its entries are the sender's. */
    mc__buf_reset(&b);
    r.type = MC_MP_PUT_COMMIT;
    assert_int_equal(roundtrip(&r, &b, &d), 0);
    assert_null(d.key_clients);
    mc__mp_request_free(&d);
    r.type = MC_MP_PUT_COMMIT_FOR;
    /* Without the ids, or without the slots, nothing is written. */
    mc__buf_reset(&b);
    r.key_clients = NULL;
    assert_int_equal(mc__mp_encode_request(&b, &r), MC_ERR_INVALID_PARAMS);
    r.key_clients = clients;
    r.slots = NULL;
    assert_int_equal(mc__mp_encode_request(&b, &r), MC_ERR_INVALID_PARAMS);
    assert_int_equal(b.len, 0);
    r.slots = slots;
    /* The batch limit of PUT_COMMIT holds, on both sides. */
    r.n_keys = MC_MP_MAX_BATCH + 1;
    assert_int_equal(mc__mp_encode_request(&b, &r), MC_ERR_INVALID_PARAMS);
    h.type = MC_MP_PUT_COMMIT_FOR;
    mc__buf_reset(&b);
    mc__buf_put(&b, "0123456789abcdef", 16);
    mc__buf_u32(&b, MC_MP_MAX_BATCH + 1);
    assert_int_equal(mc__mp_decode_request(&h, b.data, b.len, &d), MC_ERR_INVALID_PARAMS);
    /* A count larger than the entries that follow (an id, a key and two u64 each: a PUT_COMMIT
     * entry's bytes are not enough); an empty key after its id. */
    for (int bad = 0; bad < 3; bad++) {
        mc__buf_reset(&b);
        mc__buf_put(&b, "0123456789abcdef", 16);
        mc__buf_u32(&b, bad == 1 ? 1 : 2);
        if (bad != 2)
            mc__buf_put(&b, "ABCDEFGHIJKLMNOP", 16);
        mc__buf_bytes(&b, "k", bad == 1 ? 0 : 1);
        mc__buf_u64(&b, 1);
        mc__buf_u64(&b, 1);
        if (bad == 2) { /* two PUT_COMMIT entries: bytes enough for one forwarded one, barely */
            mc__buf_bytes(&b, "k", 1);
            mc__buf_u64(&b, 1);
            mc__buf_u64(&b, 1);
        }
        assert_int_not_equal(mc__mp_decode_request(&h, b.data, b.len, &d), 0);
    }
    mc__buf_reset(&b);
    mc__buf_put(&b, "0123456789abcdef", 16);
    mc__buf_u32(&b, 1);
    mc__buf_put(&b, "ABCDEFGHIJKLMNOP", 16);
    mc__buf_bytes(&b, "", 0);
    mc__buf_u64(&b, 1);
    mc__buf_u64(&b, 1);
    assert_int_equal(mc__mp_decode_request(&h, b.data, b.len, &d), MC_ERR_INVALID_KEY);
    /* Its reply is PUT_COMMIT's: one code per entry. */
    {
        int32_t codes[3] = {0, MC_ERR_OBJECT_ALREADY_EXISTS, MC_ERR_OBJECT_NOT_FOUND}, got[3];
        mc__buf_reset(&b);
        assert_int_equal(mc__mp_encode_codes_reply(&b, MC_MP_PUT_COMMIT_FOR, 3, 3, codes), 0);
        mc__frame_header_decode(b.data, b.len, MC_MP_MAX_BODY, &h);
        assert_int_equal(mc__mp_decode_codes_reply(&h, b.data + MC_FRAME_HEADER_SIZE,
                                                   b.len - MC_FRAME_HEADER_SIZE, 3, got),
                         0);
        assert_memory_equal(got, codes, sizeof(codes));
    }
    mc__buf_free(&b);
}

static void test_replies(void **state) {
    mc__key_replicas_t in[2], out[2];
    int32_t codes[3] = {0, -704, 1}, got[3];
    mc_frame_header_t h;
    mc_buf_t b;
    char err[64];
    int64_t removed = 0;
    uint8_t st = 0;
    uint64_t view = 0;
    (void)state;
    mc__buf_init(&b);
    memset(in, 0, sizeof(in));
    in[0].code = 0;
    in[0].size = 100;
    in[0].lease_ttl_ms = 5;
    in[0].n_replicas = 2;
    strcpy(in[0].replicas[0].segment_name, "a:1");
    in[0].replicas[0].addr = 0x1000;
    in[0].replicas[0].size = 100;
    in[0].replicas[0].status = MC_MP_REPLICA_COMPLETE;
    strcpy(in[0].replicas[1].segment_name, "b:2");
    in[1].code = MC_ERR_OBJECT_NOT_FOUND;
    assert_int_equal(mc__mp_encode_replicas_reply(&b, MC_MP_GET_REPLICA_LIST, 9, 2, in), 0);
    mc__frame_header_decode(b.data, b.len, MC_MP_MAX_BODY, &h);
    assert_int_equal(mc__mp_decode_replicas_reply(&h, b.data + 24, b.len - 24, 2, out), 0);
    assert_int_equal(out[0].n_replicas, 2);
    assert_string_equal(out[0].replicas[1].segment_name, "b:2");
    assert_int_equal(out[0].replicas[0].addr, 0x1000);
    assert_int_equal(out[1].code, MC_ERR_OBJECT_NOT_FOUND);
    /* Count mismatch and truncation are RPC failures, not partial results. */
    assert_int_equal(mc__mp_decode_replicas_reply(&h, b.data + 24, b.len - 24, 3, out),
                     MC_ERR_RPC_FAIL);
    assert_int_equal(mc__mp_decode_replicas_reply(&h, b.data + 24, b.len - 25, 2, out),
                     MC_ERR_RPC_FAIL);

    mc__buf_reset(&b);
    assert_int_equal(mc__mp_encode_codes_reply(&b, MC_MP_EXIST, 1, 3, codes), 0);
    mc__frame_header_decode(b.data, b.len, MC_MP_MAX_BODY, &h);
    assert_int_equal(mc__mp_decode_codes_reply(&h, b.data + 24, b.len - 24, 3, got), 0);
    assert_memory_equal(got, codes, sizeof(codes));

    mc__buf_reset(&b);
    mc__mp_encode_error_reply(&b, MC_MP_EXIST, 1, MC_ERR_INVALID_KEY, "bad key");
    mc__frame_header_decode(b.data, b.len, MC_MP_MAX_BODY, &h);
    assert_int_equal(mc__mp_decode_error(&h, b.data + 24, b.len - 24, err, sizeof(err)),
                     MC_ERR_INVALID_KEY);
    assert_string_equal(err, "bad key");
    assert_int_equal(mc__mp_decode_codes_reply(&h, b.data + 24, b.len - 24, 3, got),
                     MC_ERR_INVALID_KEY);

    mc__buf_reset(&b);
    mc__mp_encode_remove_all_reply(&b, 2, 42);
    mc__frame_header_decode(b.data, b.len, MC_MP_MAX_BODY, &h);
    assert_int_equal(mc__mp_decode_remove_all_reply(&h, b.data + 24, b.len - 24, &removed), 0);
    assert_int_equal(removed, 42);
    mc__buf_reset(&b);
    mc__mp_encode_heartbeat_reply(&b, 3, MC_MP_CLIENT_NEED_REMOUNT, 7);
    mc__frame_header_decode(b.data, b.len, MC_MP_MAX_BODY, &h);
    assert_int_equal(mc__mp_decode_heartbeat_reply(&h, b.data + 24, b.len - 24, &st, &view), 0);
    assert_int_equal(st, MC_MP_CLIENT_NEED_REMOUNT);
    assert_int_equal(view, 7);
    /* A request frame is not a reply. */
    h.flags = 0;
    assert_int_equal(mc__mp_decode_heartbeat_reply(&h, b.data + 24, b.len - 24, &st, &view),
                     MC_ERR_RPC_FAIL);
    mc__buf_free(&b);
}

static void test_decode_fails_cleanly_without_memory(void **state) {
    mc__mp_str_t keys[2] = {S("k1"), S("k2")};
    mc__mp_request_t r, d;
    mc_frame_header_t h;
    mc_buf_t b;
    int64_t live = 0;
    (void)state;
    memset(&r, 0, sizeof(r));
    mc__buf_init(&b);
    r.type = MC_MP_EXIST;
    r.n_keys = 2;
    r.keys = keys;
    assert_int_equal(mc__mp_encode_request(&b, &r), 0);
    mc__frame_header_decode(b.data, b.len, MC_MP_MAX_BODY, &h);
    live = mc__alloc_live_bytes();
    mc__alloc_fail_after(1);
    assert_int_equal(mc__mp_decode_request(&h, b.data + 24, b.len - 24, &d), MC_ERR_MEMORY);
    mc__alloc_fail_after(0);
    assert_int_equal(mc__alloc_live_bytes(), live);
    mc__buf_free(&b);
}

/* The type map is the wire format: the numbers peers send, and the op labels and reference
 * metric names dashboards read. Spelled out here so that an edit of the map that changes
 * any of them fails a test instead of an upgrade. */
static void test_type_map(void **state) {
    static const struct {
        uint8_t type;
        const char *name, *single, *batch;
    } want[] = {
        {1, "mount_segment", "mount_segment", NULL},
        {2, "unmount_segment", "unmount_segment", NULL},
        {3, "put_start", "put_start", "batch_put_start"},
        {4, "put_end", "put_end", "batch_put_end"},
        {5, "put_revoke", "put_revoke", "batch_put_revoke"},
        {6, "get_replica_list", "get_replica_list", "batch_get_replica_list"},
        {7, "exist", "exist_key", "batch_exist_key"},
        {8, "remove", "remove", NULL},
        {9, "remove_all", NULL, NULL},
        {10, "heartbeat", "ping", NULL},
        {11, "segment_unreachable", NULL, NULL},
        {12, "upsert_start", NULL, NULL},
        {13, "upsert_end", NULL, NULL},
        {14, "upsert_revoke", NULL, NULL},
        {15, "replica_clear", NULL, "batch_replica_clear"},
        {16, "unregister_client", NULL, NULL},
        {17, "task_create", NULL, NULL},
        {18, "task_query", "query_task", NULL},
        {19, "task_fetch", "fetch_tasks", NULL},
        {20, "task_report", "update_task", NULL},
        {21, "disk_announce", NULL, NULL},
        {22, "disk_fetch", NULL, NULL},
        {23, "disk_done", NULL, NULL},
        {24, "put_reserve", NULL, NULL},
        {25, "put_commit", NULL, NULL},
        {26, "storage_config", NULL, NULL},
        {27, "put_commit_for", NULL, NULL},
    };
    (void)state;
    assert_int_equal(MC_MP_TYPE_MAX_, 28);
    assert_int_equal(MC_MP_PUT_START, 3);
    assert_int_equal(MC_MP_TASK_CREATE, 17);
    assert_int_equal(MC_MP_DISK_DONE, 23);
    assert_null(mc__mp_type_info(0));
    assert_null(mc__mp_type_info(MC_MP_TYPE_MAX_));
    assert_string_equal(mc__mp_type_name(0), "unknown");
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        const mc__mp_type_info_t *t = mc__mp_type_info(want[i].type);
        assert_non_null(t);
        assert_string_equal(t->name, want[i].name);
        assert_string_equal(mc__mp_type_name(want[i].type), want[i].name);
        if (want[i].single)
            assert_string_equal(t->ref_single, want[i].single);
        else
            assert_null(t->ref_single);
        if (want[i].batch)
            assert_string_equal(t->ref_batch, want[i].batch);
        else
            assert_null(t->ref_batch);
        assert_int_equal(mc__mp_is_task(want[i].type),
                         want[i].type >= MC_MP_TASK_CREATE && want[i].type <= MC_MP_TASK_REPORT);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_start_roundtrip),
        cmocka_unit_test(test_other_requests),
        cmocka_unit_test(test_encoder_limits),
        cmocka_unit_test(test_decoder_rejects),
        cmocka_unit_test(test_put_slots),
        cmocka_unit_test(test_put_commit_for),
        cmocka_unit_test(test_replies),
        cmocka_unit_test(test_decode_fails_cleanly_without_memory),
        cmocka_unit_test(test_type_map),
        cmocka_unit_test(test_storage_config),
    };
    return cmocka_run_group_tests_name("store_master_proto", tests, NULL, NULL);
}
