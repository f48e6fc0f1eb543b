/* The storage node: its control channel's codec, and a real mooncake_master with a real
 * mooncake_client daemon serving a dummy client of this process (bytes verified by checksum),
 * bad input on the channel (malformed frames, oversized ones, handles never given, descriptors
 * that are no sealed memfd, a dummy that dies in the middle of a request), each answered with an
 * error while the node keeps serving, and SIGTERM unmounting the node's segment. Arguments: the
 * paths of mooncake_master and mooncake_client. */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "master_proc.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "mooncake/store.h"
#include "mooncake/store_dummy.h"
#include "proto/node_proto.h"

static const char *g_master_bin;
static const char *g_node_bin;

/* ---- codec ----------------------------------------------------------------------------------- */

static void test_codec_roundtrip_and_truncation(void **state) {
    mc__np_part_t parts[2] = {{1, 0, 10}, {2, 4096, 20}};
    mc__np_item_t items[2] = {{"k1", parts, 2}, {"key-two", &parts[1], 1}};
    const char *pref[] = {"seg-a"};
    mc_replicate_config_t rc;
    mc__np_request_t req;
    mc_buf_t b;
    char err[256];
    (void)state;
    mc_replicate_config_init(&rc);
    rc.replica_num = 2;
    rc.preferred_segments = pref;
    rc.preferred_segment_count = 1;
    mc__buf_init(&b);
    assert_int_equal(mc__np_encode_items(&b, MC_NP_PUT, 7, &rc, items, 2), 0);
    assert_int_equal(mc__np_decode_request(MC_NP_PUT, b.data + MC_FRAME_HEADER_SIZE,
                                           b.len - MC_FRAME_HEADER_SIZE, &req, err, sizeof(err)),
                     0);
    assert_int_equal(req.n, 2);
    assert_string_equal(req.items[1].key, "key-two");
    assert_int_equal(req.items[0].nparts, 2);
    assert_int_equal(req.items[0].parts[1].off, 4096);
    assert_int_equal(req.rc.replica_num, 2);
    assert_string_equal(req.rc.preferred_segments[0], "seg-a");
    mc__np_request_free(&req);
    /* Every shorter body is refused, with a reason, and never read past its end. */
    for (size_t len = 0; len < b.len - MC_FRAME_HEADER_SIZE; len++) {
        uint8_t *copy = malloc(len ? len : 1);
        memcpy(copy, b.data + MC_FRAME_HEADER_SIZE, len);
        assert_int_equal(mc__np_decode_request(MC_NP_PUT, copy, len, &req, err, sizeof(err)),
                         MC_ERR_INVALID_PARAMS);
        assert_true(err[0] != '\0');
        mc__np_request_free(&req);
        free(copy);
    }
    mc__buf_free(&b);
}

static void test_codec_refusals(void **state) {
    /* a count of 2^32-1 items backed by 4 bytes; a huge part count; trailing bytes; an
     * unknown type; a key with a NUL in it */
    static const uint8_t many[] = {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0};
    static const uint8_t nul_key[] = {1, 0, 0, 0, 3, 0, 0, 0, 'a', 0, 'b'};
    static const uint8_t trailing[] = {0, 0, 0, 0, 9};
    mc__np_request_t req;
    char err[256];
    (void)state;
    assert_int_equal(mc__np_decode_request(MC_NP_GET, many, sizeof(many), &req, err, sizeof(err)),
                     MC_ERR_INVALID_PARAMS);
    assert_non_null(strstr(err, "count"));
    mc__np_request_free(&req);
    assert_int_equal(
        mc__np_decode_request(MC_NP_EXIST, nul_key, sizeof(nul_key), &req, err, sizeof(err)),
        MC_ERR_INVALID_PARAMS);
    mc__np_request_free(&req);
    assert_int_equal(
        mc__np_decode_request(MC_NP_GET, trailing, sizeof(trailing), &req, err, sizeof(err)),
        MC_ERR_INVALID_PARAMS);
    assert_non_null(strstr(err, "trailing"));
    mc__np_request_free(&req);
    assert_int_equal(mc__np_decode_request(99, NULL, 0, &req, err, sizeof(err)),
                     MC_ERR_INVALID_PARAMS);
    assert_non_null(strstr(err, "unknown"));
    mc__np_request_free(&req);
}

/* ---- processes ------------------------------------------------------------------------------- */

typedef struct node_proc {
    pid_t pid;
    int out_fd;
    uint16_t port;
    char addr[64];
    char segment[256];
} node_proc_t;

typedef struct fixture {
    mc_test_master_t m;
    node_proc_t node;
    mc_shm_pool_t *pool;
    mc_store_t *dummy;
} fixture_t;

static int node_start(const char *master_addr, uint16_t port, node_proc_t *np) {
    char a_master[128], a_port[32];
    const char *argv[] = {g_node_bin,
                          a_master,
                          a_port,
                          "--host=127.0.0.1",
                          "--metadata_server=P2PHANDSHAKE",
                          "--global_segment_size=32mb",
                          NULL};
    int pfd[2];
    uint64_t deadline = mc__now_ms() + 10000;
    int ready = 0;
    memset(np, 0, sizeof(*np));
    snprintf(a_master, sizeof(a_master), "--master_server_address=%s", master_addr);
    snprintf(a_port, sizeof(a_port), "--port=%u", (unsigned)port);
    np->port = port;
    snprintf(np->addr, sizeof(np->addr), "127.0.0.1:%u", (unsigned)port);
    if (pipe2(pfd, O_CLOEXEC) != 0)
        return -1;
    np->pid = fork();
    if (np->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(pfd[1], 1);
        execv(g_node_bin, (char *const *)argv);
        _exit(127);
    }
    close(pfd[1]);
    np->out_fd = pfd[0];
    while (!ready) {
        char line[512];
        if (mc_test_read_line(np->out_fd, line, sizeof(line), deadline) != 0)
            return -1;
        if (sscanf(line, "mooncake_client segment %255s", np->segment) == 1)
            continue;
        ready = strstr(line, "serving dummy clients") != NULL;
    }
    return 0;
}

static int node_stop(node_proc_t *np, int sig) {
    int status = -1;
    if (np->pid > 0) {
        kill(np->pid, sig);
        waitpid(np->pid, &status, 0);
    }
    if (np->out_fd > 0)
        close(np->out_fd);
    np->pid = 0;
    np->out_fd = 0;
    return status;
}

/* A node on a port the kernel just handed out. A port derived from the pid collided with a
 * connection of a test running beside this one (ctest -j2 on a busy machine): the node could not
 * listen and the fixture failed. Another process may still take the port first, so a node that
 * does not come up is tried on another. Restarts reuse the node's port (the dummy dials it). */
static int node_start_free(const char *master_addr, node_proc_t *np) {
    for (int attempt = 0; attempt < 5; attempt++) {
        uint16_t port = mc_test_free_port();
        if (port && node_start(master_addr, port, np) == 0)
            return 0;
        node_stop(np, SIGKILL);
    }
    return -1;
}

static mc_store_t *make_dummy(fixture_t *f, uint64_t local_buffer) {
    mc_store_dummy_config_t c;
    mc_store_t *s = NULL;
    mc_store_dummy_config_init(&c);
    snprintf(c.server_address, sizeof(c.server_address), "%s", f->node.addr);
    c.local_buffer_size = local_buffer;
    c.pool = f->pool;
    assert_int_equal(mc_store_create(&s), 0);
    assert_int_equal(mc_store_setup_dummy(s, &c), 0);
    return s;
}

static int setup(void **state) {
    fixture_t *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(mc_test_master_start(g_master_bin, 0, NULL, &f->m), 0);
    assert_int_equal(node_start_free(f->m.addr, &f->node), 0);
    assert_int_equal(mc_shm_pool_create(&f->pool), 0);
    f->dummy = make_dummy(f, 4u << 20);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture_t *f = *state;
    mc_store_destroy(f->dummy);
    mc_shm_pool_destroy(f->pool);
    node_stop(&f->node, SIGKILL);
    mc_test_master_stop(&f->m, 0);
    free(f);
    return 0;
}

static void fill(uint8_t *p, size_t n, unsigned seed) {
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (uint8_t)x;
    }
}

static void test_dummy_data_path(void **state) {
    fixture_t *f = *state;
    mc_store_t *s = f->dummy;
    size_t big = 6u << 20; /* over the 4 MiB local buffer: goes through a block of its own */
    uint8_t *heap = malloc(big), *back = malloc(big);
    uint8_t *shm = mc_shm_pool_alloc(f->pool, 1u << 20);
    uint8_t *shm_back = mc_shm_pool_alloc(f->pool, 1u << 20);
    mc_store_buffer_t *b = NULL;
    const char *keys[] = {"n-heap", "n-big", "n-shm", "n-missing"};
    int ex[4];
    assert_non_null(heap);
    assert_non_null(shm);
    assert_true(mc_store_is_dummy(s));
    assert_string_equal(mc_store_hostname(s), f->node.segment);
    fill(heap, big, 1);
    fill(shm, 1u << 20, 2);
    assert_int_equal(mc_store_put(s, "n-heap", heap, 100000, NULL), 0);
    assert_int_equal(mc_store_put(s, "n-big", heap, big, NULL), 0);
    assert_int_equal(mc_store_register_buffer(s, shm, 1u << 20), 0);
    assert_int_equal(mc_store_put(s, "n-shm", shm, 1u << 20, NULL), 0);
    assert_int_equal(mc_store_get_size(s, "n-big"), (int64_t)big);
    assert_int_equal(mc_store_get_into(s, "n-big", back, big), (int64_t)big);
    assert_true(XXH3_64bits(back, big) == XXH3_64bits(heap, big));
    assert_int_equal(mc_store_get_into(s, "n-shm", shm_back, 1u << 20), 1 << 20);
    assert_memory_equal(shm_back, shm, 1u << 20);
    assert_int_equal(mc_store_get_buffer(s, "n-heap", &b), 0);
    assert_int_equal(mc_store_buffer_size(b), 100000);
    assert_memory_equal(mc_store_buffer_data(b), heap, 100000);
    mc_store_buffer_free(b);
    assert_int_equal(mc_store_get_into(s, "n-heap", back, 10), MC_ERR_BUFFER_OVERFLOW);
    assert_int_equal(mc_store_get_into(s, "n-missing", back, 10), MC_ERR_OBJECT_NOT_FOUND);
    assert_int_equal(mc_store_batch_is_exist(s, keys, 4, ex), 0);
    assert_int_equal(ex[0] + ex[1] + ex[2], 3);
    assert_int_equal(ex[3], 0);
    assert_int_equal(mc_store_is_exist(s, ""), MC_ERR_INVALID_KEY);
    assert_int_equal(mc_store_put(s, "", heap, 1, NULL), MC_ERR_INVALID_KEY);
    assert_int_equal(mc_store_remove(s, "n-heap", 1), 0);
    assert_int_equal(mc_store_is_exist(s, "n-heap"), 0);
    /* calls a dummy does not hand to its node are unavailable on it, never run on the master,
     * engine or segment it lacks */
    {
        const char *tgt[] = {"elsewhere:1"};
        const char *k1[] = {"n-session"};
        uint64_t sz[] = {64};
        int codes[1] = {0};
        mc_store_task_id_t id;
        mc_store_replica_list_t rl;
        assert_int_equal(mc_store_create_copy_task(s, "n-heap", tgt, 1, &id),
                         MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS);
        assert_int_equal(mc_store_put_session_start(s, k1, sz, 1, NULL, codes),
                         MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS);
        assert_int_equal(codes[0], MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS);
        assert_int_equal(mc_store_batch_get_replica_desc(s, k1, 1, &rl),
                         MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS);
    }
    /* unregistered memory of no pool block cannot be registered by a dummy */
    assert_int_equal(mc_store_register_buffer(s, heap, 64), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_shm_pool_free(f->pool, shm), 0);
    assert_int_equal(mc_store_health_check(s), 0); /* the next call lets the mapping go */
    assert_int_equal(mc_store_remove_by_regex(s, "^n-", 1), 2);
    mc_shm_pool_free(f->pool, shm_back);
    free(heap);
    free(back);
}

/* Threads of one dummy run their calls at once, over connections of their own. */
typedef struct job {
    mc_store_t *s;
    int id;
    int failures;
} job_t;

static void *job_main(void *arg) {
    job_t *j = arg;
    uint8_t *v = malloc(200000), *back = malloc(200000);
    for (int i = 0; i < 40; i++) {
        char key[64];
        size_t len = 1000 + (size_t)i * 4000;
        snprintf(key, sizeof(key), "thr-%d-%d", j->id, i);
        fill(v, len, (unsigned)(j->id * 100 + i));
        if (mc_store_put(j->s, key, v, len, NULL) != 0 ||
            mc_store_get_into(j->s, key, back, 200000) != (int64_t)len ||
            memcmp(v, back, len) != 0 || mc_store_remove(j->s, key, 1) != 0)
            j->failures++;
    }
    free(v);
    free(back);
    return NULL;
}

static void test_dummy_threads(void **state) {
    fixture_t *f = *state;
    pthread_t t[6];
    job_t jobs[6];
    for (int i = 0; i < 6; i++) {
        jobs[i] = (job_t){f->dummy, i, 0};
        assert_int_equal(pthread_create(&t[i], NULL, job_main, &jobs[i]), 0);
    }
    for (int i = 0; i < 6; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(jobs[i].failures, 0);
    }
}

/* Batches over the channel's limits fail whole with INVALID_PARAMS, every item saying so, and
 * the node serves the next call. */
static void test_dummy_oversized(void **state) {
    fixture_t *f = *state;
    size_t n = MC_NP_MAX_ITEMS + 1, m = 5000;
    const char **keys = calloc(n, sizeof(*keys));
    int *res = calloc(n, sizeof(*res));
    char *big = malloc(4001);
    assert_non_null(keys);
    memset(big, 'k', 4000);
    big[4000] = '\0';
    for (size_t i = 0; i < n; i++)
        keys[i] = "k";
    assert_int_equal(mc_store_batch_is_exist(f->dummy, keys, n, res), MC_ERR_INVALID_PARAMS);
    assert_int_equal(res[0], MC_ERR_INVALID_PARAMS);
    assert_int_equal(res[n - 1], MC_ERR_INVALID_PARAMS);
    /* 5000 keys of 4000 bytes: a 20 MB request */
    for (size_t i = 0; i < m; i++)
        keys[i] = big;
    assert_int_equal(mc_store_batch_is_exist(f->dummy, keys, m, res), MC_ERR_INVALID_PARAMS);
    assert_int_equal(res[m - 1], MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_put(f->dummy, "after-oversized", "v", 1, NULL), 0);
    free(big);
    free(res);
    free(keys);
}

/* One raw connection to the node's control socket. */
static int raw_connect(fixture_t *f) {
    char path[108];
    mc__np_socket_path(f->node.port, path, sizeof(path));
    return mc__unix_connect(path, mc__now_ms() + 5000);
}

/* Sends frame bytes and reads one reply; returns 0 and fills r, or -1 when the node closed. */
static int raw_call(int fd, const void *p, size_t n, int pass_fd, mc__np_reply_t *r) {
    uint8_t hdr[MC_FRAME_HEADER_SIZE];
    mc_frame_header_t h;
    uint8_t *body;
    int rc;
    if ((pass_fd >= 0 ? mc__send_fds(fd, p, n, &pass_fd, 1)
                      : mc__send_all(fd, p, n, mc__now_ms() + 5000)) != 0)
        return -1;
    if (mc__recv_all(fd, hdr, sizeof(hdr), mc__now_ms() + 5000) != 0)
        return -1;
    assert_int_equal(mc__frame_header_decode(hdr, sizeof(hdr), MC_NP_MAX_BODY, &h), 0);
    body = malloc(h.body_len + 1);
    assert_int_equal(mc__recv_all(fd, body, h.body_len, mc__now_ms() + 5000), 0);
    rc = mc__np_decode_reply(h.flags, body, h.body_len, r);
    free(body);
    assert_int_equal(rc, 0);
    return 0;
}

static int node_alive_for(fixture_t *f) {
    return mc_store_health_check(f->dummy) == 0 &&
           mc_store_put(f->dummy, "alive", "x", 1, NULL) == 0;
}

static void test_bad_frames(void **state) {
    fixture_t *f = *state;
    mc__np_reply_t r;
    mc__np_request_t q;
    mc_buf_t b;
    int fd;
    mc__buf_init(&b);

    /* a malformed body: an error saying why, and the connection serves the next request */
    fd = raw_connect(f);
    assert_true(fd >= 0);
    {
        size_t start;
        mc__buf_frame_begin(&b, MC_NP_GET, 0, 1, &start);
        mc__buf_u32(&b, 1000000); /* a million items in 4 bytes */
        mc__buf_frame_end(&b, start);
    }
    assert_int_equal(raw_call(fd, b.data, b.len, -1, &r), 0);
    assert_int_equal(r.rc, MC_ERR_INVALID_PARAMS);
    assert_non_null(strstr(r.text, "count"));
    mc__np_reply_free(&r);
    memset(&q, 0, sizeof(q));
    mc__buf_reset(&b);
    mc__np_encode_simple(&b, MC_NP_HEALTH, 2, &q);
    assert_int_equal(raw_call(fd, b.data, b.len, -1, &r), 0);
    assert_int_equal(r.rc, 0);
    mc__np_reply_free(&r);

    /* a part naming a handle never given: that item fails, the call answers */
    {
        mc__np_part_t part = {77, 0, 16};
        mc__np_item_t it = {"bad-handle", &part, 1};
        mc__buf_reset(&b);
        mc__np_encode_items(&b, MC_NP_PUT, 3, NULL, &it, 1);
        assert_int_equal(raw_call(fd, b.data, b.len, -1, &r), 0);
        assert_int_equal(r.rc, 0);
        assert_int_equal(r.n, 1);
        assert_int_equal(r.results[0], MC_ERR_INVALID_PARAMS);
        mc__np_reply_free(&r);
    }

    /* MAP without a descriptor, and with one that is no sealed memfd */
    q.map_len = 4096;
    mc__buf_reset(&b);
    mc__np_encode_simple(&b, MC_NP_MAP, 4, &q);
    assert_int_equal(raw_call(fd, b.data, b.len, -1, &r), 0);
    assert_int_equal(r.rc, MC_ERR_INVALID_PARAMS);
    assert_non_null(strstr(r.text, "descriptor"));
    mc__np_reply_free(&r);
    {
        int mfd = memfd_create("unsealed", MFD_CLOEXEC);
        assert_int_equal(ftruncate(mfd, 4096), 0);
        assert_int_equal(raw_call(fd, b.data, b.len, mfd, &r), 0);
        assert_int_equal(r.rc, MC_ERR_INVALID_PARAMS);
        assert_non_null(strstr(r.text, "sealed"));
        mc__np_reply_free(&r);
        close(mfd);
    }
    /* a sealed block, then a part that runs past its end */
    {
        int mfd = memfd_create("sealed", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        mc__np_part_t part = {0, 4000, 200};
        mc__np_item_t it = {"past-end", &part, 1};
        assert_int_equal(ftruncate(mfd, 4096), 0);
        assert_int_equal(fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
        assert_int_equal(raw_call(fd, b.data, b.len, mfd, &r), 0);
        assert_true(r.rc > 0);
        part.handle = (uint32_t)r.rc;
        mc__np_reply_free(&r);
        close(mfd);
        mc__buf_reset(&b);
        mc__np_encode_items(&b, MC_NP_PUT, 5, NULL, &it, 1);
        assert_int_equal(raw_call(fd, b.data, b.len, -1, &r), 0);
        assert_int_equal(r.results[0], MC_ERR_INVALID_PARAMS);
        mc__np_reply_free(&r);
    }
    close(fd);

    /* an oversized frame: refused before its body is read, then the connection is closed */
    fd = raw_connect(f);
    {
        mc_frame_header_t h = {
            MC_FRAME_MAGIC, MC_FRAME_VERSION, MC_NP_PUT, 0, 9, (uint64_t)MC_NP_MAX_BODY + 1};
        uint8_t hdr[MC_FRAME_HEADER_SIZE];
        mc__frame_header_encode(&h, hdr);
        assert_int_equal(raw_call(fd, hdr, sizeof(hdr), -1, &r), 0);
        assert_int_equal(r.rc, MC_ERR_INVALID_PARAMS);
        assert_non_null(strstr(r.text, "limit"));
        mc__np_reply_free(&r);
        assert_int_equal(raw_call(fd, hdr, sizeof(hdr), -1, &r), -1);
    }
    close(fd);

    /* garbage: not a frame at all */
    fd = raw_connect(f);
    {
        uint8_t junk[MC_FRAME_HEADER_SIZE];
        memset(junk, 'G', sizeof(junk));
        assert_int_equal(raw_call(fd, junk, sizeof(junk), -1, &r), 0);
        assert_non_null(strstr(r.text, "not a Mooncake frame"));
        mc__np_reply_free(&r);
    }
    close(fd);

    /* a dummy that dies in the middle of a request: half a body, then gone */
    {
        pid_t pid = fork();
        if (pid == 0) {
            int cfd = raw_connect(f);
            mc_frame_header_t h = {MC_FRAME_MAGIC, MC_FRAME_VERSION, MC_NP_EXIST, 0, 1, 1000};
            uint8_t hdr[MC_FRAME_HEADER_SIZE + 10];
            memset(hdr, 0, sizeof(hdr));
            mc__frame_header_encode(&h, hdr);
            (void)mc__send_all(cfd, hdr, sizeof(hdr), 0);
            _exit(0);
        }
        assert_int_equal(waitpid(pid, NULL, 0), pid);
    }
    mc__buf_free(&b);
    assert_true(node_alive_for(f));
}

static void test_sigterm_unmounts(void **state) {
    fixture_t *f = *state;
    char *body = NULL;
    int status;
    assert_int_equal(mc_test_http_get(f->m.metrics_port, "/get_all_segments", &body), 200);
    assert_non_null(strstr(body, f->node.segment));
    mc__free(body);
    status = node_stop(&f->node, SIGTERM);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(mc_test_http_get(f->m.metrics_port, "/get_all_segments", &body), 200);
    assert_null(strstr(body, f->node.segment));
    mc__free(body);
    /* the dummy now says the node is gone */
    assert_int_equal(mc_store_put(f->dummy, "after", "x", 1, NULL), MC_ERR_RPC_FAIL);
    /* a node back on the same port serves the dummy's very next call */
    assert_int_equal(node_start(f->m.addr, f->node.port, &f->node), 0);
    assert_int_equal(mc_store_put(f->dummy, "after", "x", 1, NULL), 0);
    assert_int_equal(mc_store_get_size(f->dummy, "after"), 1);
}

/* A node restarted between two calls: the next call dials it again instead of failing. */
static void test_node_restart_between_calls(void **state) {
    fixture_t *f = *state;
    uint8_t *blk = mc_shm_pool_alloc(f->pool, 8192);
    uint8_t back[8192];
    memset(blk, 7, 8192);
    assert_int_equal(mc_store_put(f->dummy, "before", blk, 8192, NULL), 0);
    /* SIGTERM: the old segment is unmounted at once, so no put is placed in a dead one */
    node_stop(&f->node, SIGTERM);
    assert_int_equal(node_start(f->m.addr, f->node.port, &f->node), 0);
    /* its mappings start over: the pool block is handed over again */
    assert_int_equal(mc_store_put(f->dummy, "restarted", blk, 8192, NULL), 0);
    assert_int_equal(mc_store_get_into(f->dummy, "restarted", back, sizeof(back)), 8192);
    assert_memory_equal(back, blk, 8192);
    mc_shm_pool_free(f->pool, blk);
}

static void test_no_node(void **state) {
    mc_store_dummy_config_t c;
    mc_store_t *s = NULL;
    (void)state;
    mc_store_dummy_config_init(&c);
    snprintf(c.server_address, sizeof(c.server_address), "127.0.0.1:1");
    assert_int_equal(mc_store_create(&s), 0);
    assert_int_equal(mc_store_setup_dummy(s, &c), MC_ERR_RPC_FAIL);
    snprintf(c.server_address, sizeof(c.server_address), "no-port");
    assert_int_equal(mc_store_setup_dummy(s, &c), MC_ERR_INVALID_PARAMS);
    assert_int_equal(mc_store_put(s, "k", "v", 1, NULL), MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS);
    mc_store_destroy(s);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codec_roundtrip_and_truncation),
        cmocka_unit_test(test_codec_refusals),
        cmocka_unit_test(test_no_node),
        cmocka_unit_test_setup_teardown(test_dummy_data_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dummy_threads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dummy_oversized, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_frames, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sigterm_unmounts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_node_restart_between_calls, setup, teardown),
    };
    if (argc < 3) {
        fprintf(stderr, "usage: %s path/to/mooncake_master path/to/mooncake_client\n", argv[0]);
        return 2;
    }
    g_master_bin = argv[1];
    g_node_bin = argv[2];
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
