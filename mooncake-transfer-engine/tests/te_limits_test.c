/* What one misbehaving process can make an engine hold: idle connections that would fill its
 * connection table, and notifies that nobody fetches; and what a caller's bad address gets
 * (a code, not a fault). Against a te_target process over
 * loopback; the engine must keep serving honest transfers. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "mooncake/transfer_engine.h"
#include "te_test_util.h"

#define MiB (1u << 20)
#define IDLE_SOCKETS 1100 /* more than the engine's 1024-connection table */

static mc_engine_t *new_engine(void) {
    mc_engine_t *e = NULL;
    mc_engine_options_t o = {.local_server_name = "127.0.0.1", .protocol = "tcp"};
    assert_int_equal(mc_engine_create(&e), 0);
    assert_int_equal(mc_engine_init(e, &o), 0);
    return e;
}

static int raw_connect(int port) {
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static void test_idle_connections_cannot_lock_peers_out(void **state) {
    static int fds[IDLE_SOCKETS];
    te_target_t t;
    mc_engine_t *e = new_engine();
    uint8_t *buf = aligned_alloc(4096, MiB);
    char host[64];
    int port = 0, opened = 0;
    mc_segment_id_t seg;
    mc_request_t r = {.opcode = MC_OPCODE_WRITE, .source = buf, .length = MiB};
    (void)state;
    assert_int_equal(te_target_start(&t, "P2PHANDSHAKE", NULL, 4 * MiB, 0), 0);
    assert_int_equal(sscanf(t.name, "%63[^:]:%d", host, &port), 2);
    for (int i = 0; i < IDLE_SOCKETS; i++) {
        fds[i] = raw_connect(port);
        opened += fds[i] >= 0;
    }
    assert_true(opened > 1024);
    usleep(200000);
    /* an honest peer connects after the flood and is served */
    assert_int_equal(mc_engine_register_memory(e, buf, MiB, "cpu:0"), 0);
    te_fill(buf, MiB, 9);
    assert_int_equal(mc_engine_open_segment(e, t.name, &seg), 0);
    r.target_id = seg;
    r.target_offset = t.plain_addr;
    assert_int_equal(mc_engine_transfer_sync(e, &r, 1), 0);
    assert_true(te_target_hash(&t, t.plain_addr, MiB) == te_hash(buf, MiB));
    for (int i = 0; i < IDLE_SOCKETS; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    mc_engine_destroy(e);
    free(buf);
    assert_int_equal(te_target_stop(&t), 0);
}

/* Raw addresses: registering memory that is not there is refused, a local source outside the
 * registrations is refused by the transfer (ADDRESS_NOT_REGISTERED), and mc_engine_check_memory
 * answers for addresses a caller cannot vouch for. Two registered pages are followed by a
 * PROT_NONE page. */
static void test_raw_addresses(void **state) {
    const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    mc_engine_t *e = new_engine();
    uint8_t *m = mmap(NULL, 3 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    void *dst = NULL;
    mc_request_t r = {.opcode = MC_OPCODE_WRITE, .target_id = MC_LOCAL_SEGMENT_ID, .length = pg};
    (void)state;
    assert_true(m != MAP_FAILED);
    assert_int_equal(mprotect(m + 2 * pg, pg, PROT_NONE), 0);
    assert_int_equal(mc_engine_alloc_managed(e, pg, &dst), 0);
    assert_int_equal(mc_engine_register_memory(e, (void *)(uintptr_t)pg, pg, "*"),
                     MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_engine_register_memory(e, m + pg, 2 * pg, "cpu:0"),
                     MC_ERR_INVALID_ARGUMENT); /* its second page is PROT_NONE */
    assert_int_equal(mc_engine_register_memory(e, m, 2 * pg, "cpu:0"), 0);

    assert_int_equal(mc_engine_check_memory(e, m, 2 * pg, 1), 0);
    assert_int_equal(mc_engine_check_memory(e, m + pg + 8, pg, 0), MC_ERR_ADDRESS_NOT_REGISTERED);
    assert_int_equal(mc_engine_check_memory(e, m + 2 * pg, 8, 0), MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_engine_check_memory(e, (void *)(uintptr_t)1, 8, 0),
                     MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_engine_check_memory(NULL, (void *)(uintptr_t)1, 8, 0),
                     MC_ERR_INVALID_ARGUMENT);
    assert_int_equal(mc_engine_check_memory(NULL, m, 8, 1), 0);
    assert_int_equal(mc_engine_check_memory(e, NULL, 0, 0), 0);

    r.source = (void *)(uintptr_t)1;
    r.target_offset = (uint64_t)(uintptr_t)dst;
    assert_int_equal(mc_engine_transfer_sync(e, &r, 1), MC_ERR_ADDRESS_NOT_REGISTERED);
    r.source = m + pg + 8; /* overruns its registration into the PROT_NONE page */
    assert_int_equal(mc_engine_transfer_sync(e, &r, 1), MC_ERR_ADDRESS_NOT_REGISTERED);
    r.source = m;
    memset(m, 0x5a, pg);
    assert_int_equal(mc_engine_transfer_sync(e, &r, 1), 0);
    assert_memory_equal(dst, m, pg);
    assert_int_equal(mc_engine_unregister_memory(e, m), 0);
    assert_int_equal(mc_engine_free_managed(e, dst), 0);
    mc_engine_destroy(e);
    munmap(m, 3 * pg);
}

static void test_notify_queue_is_bounded_in_bytes(void **state) {
    te_target_t t;
    mc_engine_t *e = new_engine();
    uint8_t *msg = calloc(1, 64u << 10);
    int accepted = 0, refused = 0;
    (void)state;
    assert_int_equal(te_target_start(&t, "P2PHANDSHAKE", NULL, MiB, 0), 0);
    /* The target never fetches: 64 KiB notifies fill its 64 MiB queue long before 65536 of
     * them (4 GiB) would fill the count limit. */
    for (int i = 0; i < 1100 && refused == 0; i++) {
        int rc = mc_engine_notify_send(e, t.name, "n", msg, 64u << 10);
        if (rc == 0)
            accepted++;
        else
            refused++;
    }
    assert_true(refused == 1);
    assert_true(accepted >= 1000 && accepted <= 1024);
    /* the refusal is an answer, not a broken peer: it still takes what fits */
    assert_int_equal(mc_engine_notify_send(e, t.name, "n", "x", 1), 0);
    mc_engine_destroy(e);
    free(msg);
    assert_int_equal(te_target_stop(&t), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idle_connections_cannot_lock_peers_out),
        cmocka_unit_test(test_notify_queue_is_bounded_in_bytes),
        cmocka_unit_test(test_raw_addresses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
