/* A target engine in its own process for the TE tests. Prints
 *   READY <name> <plain_addr> <plain_len> <managed_addr> <managed_len>
 * then answers one command per stdin line:
 *   H addr len        -> OK <xxh3 of the bytes>
 *   F addr len seed   -> OK            (fill with the test pattern)
 *   U addr            -> OK <rc>       (unregister plain memory; the bytes stay readable)
 *   M addr            -> OK <rc>       (free a managed buffer)
 *   N                 -> OK <count> [<from> <name> <msg>] of the first notify
 *   P                 -> OK <count>       (remote accesses in progress: the registry's pins)
 *   K 0|1             -> OK <rc>       (removes / sets the write-ask handler, te_ask_msg_t)
 *   C                 -> OK <calls> <hash> <len> (handler calls so far; the last message's
 *                                         xxh3 and length)
 *   Q                 -> exits
 * usage: te_target <metadata> <name|-> <protocol> <plain_len> <managed_len>
 * TE_TARGET_GRACE_MS in the environment sets how long an unregister waits for a stalled remote
 * access before it cuts its connection (the registry's grace period; at most the engine's). */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mooncake/transfer_engine.h"
#include "te_internal.h"
#include "te_test_util.h"
#include "transports/fabric.h"

/* The write-ask handler (te_test_util.h's te_ask_msg_t): sleeps, fails or answers as the message
 * asks; the answer is te_ask_answer's (the payload's hash as this process sees it in memory, so
 * the initiator can tell the bytes were in place before the call). A shorter message is echoed. */
static _Atomic uint64_t ask_calls;
static pthread_mutex_t ask_last_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t ask_last_hash, ask_last_len;

static int te_ask_handler(void *ctx, const void *msg, size_t msg_len, void *answer, size_t cap,
                          size_t *answer_len) {
    te_ask_msg_t m;
    (void)ctx;
    pthread_mutex_lock(&ask_last_lock);
    ask_last_hash = te_hash(msg, msg_len);
    ask_last_len = msg_len;
    pthread_mutex_unlock(&ask_last_lock);
    atomic_fetch_add(&ask_calls, 1);
    if (msg_len < sizeof(m)) {
        memcpy(answer, msg, msg_len);
        *answer_len = msg_len;
        return 0;
    }
    memcpy(&m, msg, sizeof(m));
    if (m.sleep_ms)
        usleep((useconds_t)m.sleep_ms * 1000);
    if (m.ret)
        return m.ret;
    if (m.answer_len > cap)
        return -9999;
    te_ask_answer(answer, m.answer_len, te_hash((const void *)(uintptr_t)m.addr, m.len),
                  te_hash(msg, msg_len));
    *answer_len = m.answer_len;
    return 0;
}

int main(int argc, char **argv) {
    mc_engine_t *e = NULL;
    mc_engine_options_t o = {0};
    size_t plain_len, managed_len;
    void *plain = NULL, *managed = NULL;
    char line[512];
    int rc;
    if (argc != 6)
        return 2;
    plain_len = strtoull(argv[4], NULL, 10);
    managed_len = strtoull(argv[5], NULL, 10);
    o.metadata_conn = argv[1];
    o.local_server_name = strcmp(argv[2], "-") ? argv[2] : "127.0.0.1";
    o.protocol = argv[3];
    if (mc_engine_create(&e) || (rc = mc_engine_init(e, &o)) != 0) {
        printf("FAIL init\n");
        return 1;
    }
    if (getenv("TE_TARGET_GRACE_MS")) {
        int g = atoi(getenv("TE_TARGET_GRACE_MS"));
        if (g > 0 && (uint64_t)g <= (uint64_t)e->timeout_ms)
            e->reg.grace_ms = g;
    }
    if (plain_len) {
        plain = aligned_alloc(4096, (plain_len + 4095) / 4096 * 4096);
        te_fill(plain, plain_len, 1);
        if (mc_engine_register_memory(e, plain, plain_len, "cpu:0"))
            return 1;
        /* the fabric progress thread started before this memory existed (see H and F) */
        mc__fab_barrier(e);
    }
    if (managed_len) {
        if (mc_engine_alloc_managed(e, managed_len, &managed))
            return 1;
        /* ordered before remote writes into it the way H and F are (see below) */
        mc__reg_quiesce_begin(&e->reg, (uint64_t)(uintptr_t)managed, managed_len);
        te_fill(managed, managed_len, 2);
        mc__fab_barrier(e);
        mc__reg_quiesce_end(&e->reg);
    }
    printf("READY %s %" PRIu64 " %zu %" PRIu64 " %zu\n", mc_engine_local_name(e),
           (uint64_t)(uintptr_t)plain, plain_len, (uint64_t)(uintptr_t)managed, managed_len);
    fflush(stdout);
    while (fgets(line, sizeof(line), stdin)) {
        uint64_t a = 0, l = 0;
        unsigned seed = 0;
        /* H and F wait for remote accesses to end: the RPC server unpins a region after moving
         * its bytes, and that is the ordering ThreadSanitizer needs to see (the real ordering
         * runs through the initiator process, which it cannot see). A peer's fabric WRITE lands
         * inside the fabric progress thread's provider calls instead, with no pin: the barrier
         * orders us after those calls, and (once more after the access) our access before the
         * provider's later ones: a peer's next WRITE over what we hashed, or its READ of a fill. */
        if (line[0] == 'H' && sscanf(line + 1, "%" SCNu64 " %" SCNu64, &a, &l) == 2) {
            uint64_t h;
            mc__reg_quiesce_begin(&e->reg, a, l);
            mc__fab_barrier(e);
            h = te_hash((void *)(uintptr_t)a, l);
            mc__fab_barrier(e);
            mc__reg_quiesce_end(&e->reg);
            printf("OK %016" PRIx64 "\n", h);
        } else if (line[0] == 'F' &&
                   sscanf(line + 1, "%" SCNu64 " %" SCNu64 " %u", &a, &l, &seed) == 3) {
            mc__reg_quiesce_begin(&e->reg, a, l);
            mc__fab_barrier(e);
            te_fill((void *)(uintptr_t)a, l, seed);
            mc__fab_barrier(e);
            mc__reg_quiesce_end(&e->reg);
            printf("OK\n");
        } else if (line[0] == 'U' && sscanf(line + 1, "%" SCNu64, &a) == 1) {
            printf("OK %d\n", mc_engine_unregister_memory(e, (void *)(uintptr_t)a));
        } else if (line[0] == 'M' && sscanf(line + 1, "%" SCNu64, &a) == 1) {
            printf("OK %d\n", mc_engine_free_managed(e, (void *)(uintptr_t)a));
        } else if (line[0] == 'N') {
            mc_notify_t *n = NULL;
            size_t cnt = 0;
            mc_engine_notifies_fetch(e, &n, &cnt);
            if (cnt)
                printf("OK %zu %s %s %.*s\n", cnt, n[0].from, n[0].name, (int)n[0].msg_len,
                       (const char *)n[0].msg);
            else
                printf("OK 0\n");
            mc_engine_notifies_free(n, cnt);
        } else if (line[0] == 'P') {
            size_t n = 0;
            pthread_mutex_lock(&e->reg.pin_lock);
            for (const mc__pin_t *p = e->reg.pins; p; p = p->next)
                n++;
            pthread_mutex_unlock(&e->reg.pin_lock);
            printf("OK %zu\n", n);
        } else if (line[0] == 'K' && sscanf(line + 1, "%u", &seed) == 1) {
            printf("OK %d\n", mc_engine_set_ask_handler(e, seed ? te_ask_handler : NULL, NULL));
        } else if (line[0] == 'C') {
            pthread_mutex_lock(&ask_last_lock);
            printf("OK %" PRIu64 " %016" PRIx64 " %" PRIu64 "\n", atomic_load(&ask_calls),
                   ask_last_hash, ask_last_len);
            pthread_mutex_unlock(&ask_last_lock);
        } else if (line[0] == 'Q') {
            break;
        } else {
            printf("ERR\n");
        }
        fflush(stdout);
    }
    mc_engine_destroy(e);
    free(plain);
    return 0;
}
