/* Two-process test of the reference C interface. It includes nothing of ours but
 * transfer_engine_c.h and links only libtransfer_engine, as a program written for the reference
 * would. The initiator re-executes itself as the target and drives it over a pipe:
 *   target -> "ready <segment> <addr> <len> <sum>"; commands "sum", "notifs", "quit". */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* builds outside our tree too, with plain -std=c11 */
#endif
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "transfer_engine_c.h"

#define BUF_LEN (4u << 20)
#define DEADLINE_S 20

static int failures, checks;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        checks++;                                                                                  \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);               \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static uint64_t fnv1a(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static void fill(unsigned char *p, size_t n, uint32_t seed) {
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        p[i] = (unsigned char)x;
    }
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* ---- target side ---- */

static int run_target(void) {
    transfer_engine_t eng = createTransferEngine("P2PHANDSHAKE", "127.0.0.1", "", 0, 1);
    unsigned char *buf = NULL;
    char name[256], line[128];
    int rc = 1;
    if (!eng) {
        fprintf(stderr, "target: createTransferEngine failed\n");
        goto out;
    }
    buf = malloc(BUF_LEN);
    if (!buf)
        goto out;
    fill(buf, BUF_LEN, 7);
    if (registerLocalMemory(eng, buf, BUF_LEN, "cpu:0", 1) != 0 ||
        getLocalIpAndPort(eng, name, sizeof(name)) != 0) {
        fprintf(stderr, "target: setup failed\n");
        goto out;
    }
    printf("ready %s %" PRIu64 " %u %016" PRIx64 "\n", name, (uint64_t)(uintptr_t)buf, BUF_LEN,
           fnv1a(buf, BUF_LEN));
    fflush(stdout);
    while (fgets(line, sizeof(line), stdin)) {
        if (strncmp(line, "sum", 3) == 0) {
            printf("sum %016" PRIx64 "\n", fnv1a(buf, BUF_LEN));
        } else if (strncmp(line, "notifs", 6) == 0) {
            int n = 0;
            notify_msg_t *m = getNotifsFromEngine(eng, &n);
            printf("notifs %d", n);
            for (int i = 0; i < n; i++)
                printf(" %s=%s", m[i].name, m[i].msg);
            printf("\n");
            CHECK(freeNotifsMsgBuf(m, n) == 0);
        } else if (strncmp(line, "quit", 4) == 0) {
            break;
        }
        fflush(stdout);
    }
    CHECK(unregisterLocalMemory(eng, buf) == 0);
    rc = failures ? 1 : 0;
out:
    destroyTransferEngine(eng);
    free(buf);
    return rc;
}

/* ---- initiator side ---- */

typedef struct peer {
    pid_t pid;
    FILE *to, *from;
    char name[256];
    uint64_t addr, len, sum;
} peer_t;

static int spawn_target(const char *self, peer_t *p) {
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0)
        return -1;
    p->pid = fork();
    if (p->pid < 0)
        return -1;
    if (p->pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]), close(in[1]), close(out[0]), close(out[1]);
        execl(self, self, "--target", (char *)NULL);
        _exit(127);
    }
    close(in[0]), close(out[1]);
    p->to = fdopen(in[1], "w");
    p->from = fdopen(out[0], "r");
    char line[512];
    if (!p->to || !p->from || !fgets(line, sizeof(line), p->from))
        return -1;
    if (sscanf(line, "ready %255s %" SCNu64 " %" SCNu64 " %" SCNx64, p->name, &p->addr, &p->len,
               &p->sum) != 4)
        return -1;
    return 0;
}

static uint64_t target_sum(peer_t *p) {
    char line[128];
    uint64_t s = 0;
    fprintf(p->to, "sum\n");
    fflush(p->to);
    if (fgets(line, sizeof(line), p->from))
        sscanf(line, "sum %" SCNx64, &s);
    return s;
}

/* Waits for a task to leave WAITING/PENDING; returns its final status (-1 on a call error). */
static int wait_task(transfer_engine_t eng, batch_id_t b, size_t task, uint64_t *bytes) {
    struct transfer_status st = {0};
    double end = now_s() + DEADLINE_S;
    while (now_s() < end) {
        if (getTransferStatus(eng, b, task, &st) != 0)
            return -1;
        if (st.status != STATUS_WAITING && st.status != STATUS_PENDING) {
            if (bytes)
                *bytes = st.transferred_bytes;
            return st.status;
        }
        sleep_us(200);
    }
    return STATUS_TIMEOUT;
}

/* Moves the whole buffer in mixed-size pieces with one batch; all tasks must complete. */
static void move_all(transfer_engine_t eng, segment_id_t seg, peer_t *p, unsigned char *local,
                     int opcode) {
    static const uint64_t sizes[] = {1, 1023, 4096, 65536, 1u << 20, 3u << 20};
    struct transfer_request req[64];
    size_t n = 0;
    uint64_t off = 0;
    for (size_t k = 0; off < BUF_LEN && n < 64; k++, n++) {
        uint64_t len = sizes[k % 6];
        if (len > BUF_LEN - off)
            len = BUF_LEN - off;
        memset(&req[n], 0, sizeof(req[n]));
        req[n].opcode = opcode;
        req[n].source = local + off;
        req[n].target_id = seg;
        req[n].target_offset = p->addr + off;
        req[n].length = len;
        off += len;
    }
    CHECK(off == BUF_LEN);
    batch_id_t b = allocateBatchID(eng, n);
    CHECK(b != INVALID_BATCH);
    CHECK(submitTransfer(eng, b, req, n) == 0);
    for (size_t i = 0; i < n; i++) {
        uint64_t bytes = 0;
        CHECK(wait_task(eng, b, i, &bytes) == STATUS_COMPLETED);
        CHECK(bytes == req[i].length);
    }
    CHECK(freeBatchID(eng, b) == 0);
}

static int wait_notifs(peer_t *p, const char *want) {
    char line[512];
    double end = now_s() + DEADLINE_S;
    while (now_s() < end) {
        fprintf(p->to, "notifs\n");
        fflush(p->to);
        if (!fgets(line, sizeof(line), p->from))
            return 0;
        if (strstr(line, want))
            return 1;
        sleep_us(20000);
    }
    return 0;
}

/* Every entry point given no engine: an error value, never a crash. */
static void null_engine_checks(void) {
    struct transfer_status st;
    struct transfer_request req = {0};
    buffer_entry_t entry = {&st, sizeof(st)};
    void *addr = &st;
    notify_msg_t msg = {.name = "x", .msg = "y"};
    char buf[64];
    int n = 7;
    CHECK(getLocalIpAndPort(NULL, buf, sizeof(buf)) < 0);
    CHECK(installTransport(NULL, "tcp", NULL) == NULL);
    CHECK(uninstallTransport(NULL, "tcp") < 0);
    CHECK(openSegment(NULL, "127.0.0.1:1") < 0);
    CHECK(openSegmentNoCache(NULL, "127.0.0.1:1") < 0);
    CHECK(closeSegment(NULL, 1) < 0);
    CHECK(removeLocalSegment(NULL, "x") < 0);
    CHECK(syncSegmentCache(NULL) < 0);
    CHECK(registerLocalMemory(NULL, &st, sizeof(st), "*", 1) < 0);
    CHECK(unregisterLocalMemory(NULL, &st) < 0);
    CHECK(registerLocalMemoryBatch(NULL, &entry, 1, "*") < 0);
    CHECK(unregisterLocalMemoryBatch(NULL, &addr, 1) < 0);
    CHECK(allocateBatchID(NULL, 1) == INVALID_BATCH);
    CHECK(submitTransfer(NULL, 1, &req, 1) < 0);
    CHECK(submitTransferWithNotify(NULL, 1, &req, 1, msg) < 0);
    CHECK(getTransferStatus(NULL, 1, 0, &st) < 0);
    CHECK(freeBatchID(NULL, 1) < 0);
    CHECK(getNotifsFromEngine(NULL, &n) == NULL && n == 0);
    CHECK(freeNotifsMsgBuf(NULL, 0) == 0);
    CHECK(genNotifyInEngine(NULL, 1, msg) < 0);
    destroyTransferEngine(NULL);
    /* A metadata service that does not exist: creation fails cleanly. */
    CHECK(createTransferEngine("http://127.0.0.1:1/metadata", "127.0.0.1", "", 0, 1) == NULL);
    CHECK(createTransferEngine("bogus://nowhere", "127.0.0.1", "", 0, 1) == NULL);
}

static int run_initiator(const char *self) {
    peer_t p = {0};
    transfer_engine_t eng = NULL;
    unsigned char *local = NULL, *unreg = NULL;
    char name[256], tiny[4];
    segment_id_t seg = -1;
    int status = 0;

    null_engine_checks();
    if (spawn_target(self, &p) != 0) {
        fprintf(stderr, "could not start the target\n");
        failures++;
        goto out;
    }
    eng = createTransferEngine("P2PHANDSHAKE", "127.0.0.1", "", 0, 0);
    CHECK(eng != NULL);
    if (!eng)
        goto out;
    CHECK(installTransport(eng, "tcp", NULL) != NULL);
    /* No RDMA here: it falls back, as the reference's users (vLLM, SGLang) expect. */
    CHECK(installTransport(eng, "rdma", NULL) != NULL);
    CHECK(installTransport(eng, "carrier-pigeon", NULL) == NULL);
    CHECK(uninstallTransport(eng, "carrier-pigeon") < 0);
    CHECK(getLocalIpAndPort(eng, name, sizeof(name)) == 0 && strchr(name, ':') != NULL);
    CHECK(getLocalIpAndPort(eng, tiny, sizeof(tiny)) < 0);
    CHECK(supportFileBuffer(eng) == false);

    local = malloc(BUF_LEN);
    unreg = malloc(BUF_LEN);
    CHECK(local && unreg);
    if (!local || !unreg)
        goto out;
    buffer_entry_t entry = {local, BUF_LEN};
    CHECK(registerLocalMemoryBatch(eng, &entry, 1, "cpu:0") == 0);
    CHECK(registerLocalMemory(eng, local + 100, 100, "*", 1) < 0); /* overlaps */

    seg = openSegment(eng, p.name);
    CHECK(seg >= 0);
    CHECK(openSegment(eng, "127.0.0.1:1") < 0);
    CHECK(openSegment(eng, "") < 0);
    CHECK(openSegment(NULL, p.name) < 0);
    if (seg < 0)
        goto out;
    CHECK(openSegmentNoCache(eng, p.name) >= 0);
    CHECK(syncSegmentCache(eng) == 0);
    /* Documented as unsupported: the segment lives as long as the engine; no file segments. */
    CHECK(removeLocalSegment(eng, name) == -303);
    file_id_t fid = 0;
    CHECK(registerLocalFile(eng, "/dev/null", 0, &fid) < 0);
    CHECK(unregisterLocalFile(eng, "/dev/null") < 0);

    /* READ: the target's initial contents arrive intact. */
    memset(local, 0, BUF_LEN);
    move_all(eng, seg, &p, local, OPCODE_READ);
    CHECK(fnv1a(local, BUF_LEN) == p.sum);

    /* WRITE: our contents replace the target's. */
    fill(local, BUF_LEN, 99);
    uint64_t want = fnv1a(local, BUF_LEN);
    move_all(eng, seg, &p, local, OPCODE_WRITE);
    CHECK(target_sum(&p) == want);

    /* A remote range the target never registered fails and leaves its memory untouched. */
    struct transfer_request bad[3];
    memset(bad, 0, sizeof(bad));
    bad[0] = (struct transfer_request){.opcode = OPCODE_WRITE,
                                       .source = local,
                                       .target_id = seg,
                                       .target_offset = p.addr + p.len - 8,
                                       .length = 4096};
    bad[1] = (struct transfer_request){.opcode = OPCODE_WRITE,
                                       .source = local,
                                       .target_id = seg,
                                       .target_offset = 4096,
                                       .length = 64};
    bad[2] = (struct transfer_request){.opcode = OPCODE_READ,
                                       .source = local,
                                       .target_id = seg,
                                       .target_offset = p.addr + p.len,
                                       .length = 1};
    /* Our engine refuses them at submit (it knows the peer's registrations); the reference fails
     * the task instead. Either is a clear error. */
    batch_id_t b;
    for (size_t i = 0; i < 3; i++) {
        b = allocateBatchID(eng, 1);
        CHECK(b != INVALID_BATCH);
        int src = submitTransfer(eng, b, &bad[i], 1);
        CHECK(src == -3 /* ADDRESS_NOT_REGISTERED */ ||
              (src == 0 && wait_task(eng, b, 0, NULL) == STATUS_FAILED));
        CHECK(freeBatchID(eng, b) == 0);
    }
    CHECK(target_sum(&p) == want);

    /* An unregistered local source is refused at submit or fails its task. */
    struct transfer_request loose = {.opcode = OPCODE_WRITE,
                                     .source = unreg,
                                     .target_id = seg,
                                     .target_offset = p.addr,
                                     .length = 4096};
    b = allocateBatchID(eng, 1);
    int rc = submitTransfer(eng, b, &loose, 1);
    CHECK(rc == -3 || (rc == 0 && wait_task(eng, b, 0, NULL) == STATUS_FAILED));
    CHECK(freeBatchID(eng, b) == 0);
    CHECK(target_sum(&p) == want);

    /* A segment id that was never opened. */
    struct transfer_request nowhere = {.opcode = OPCODE_READ,
                                       .source = local,
                                       .target_id = 4242,
                                       .target_offset = p.addr,
                                       .length = 64};
    b = allocateBatchID(eng, 1);
    rc = submitTransfer(eng, b, &nowhere, 1);
    CHECK(rc < 0 || wait_task(eng, b, 0, NULL) == STATUS_FAILED);
    CHECK(freeBatchID(eng, b) == 0);

    /* Batch misuse: too many tasks, a freed batch, a double free, an empty batch. */
    struct transfer_request two[2] = {{.opcode = OPCODE_READ,
                                       .source = local,
                                       .target_id = seg,
                                       .target_offset = p.addr,
                                       .length = 8},
                                      {.opcode = OPCODE_READ,
                                       .source = local + 8,
                                       .target_id = seg,
                                       .target_offset = p.addr + 8,
                                       .length = 8}};
    b = allocateBatchID(eng, 1);
    CHECK(submitTransfer(eng, b, two, 2) < 0);
    CHECK(freeBatchID(eng, b) == 0);
    struct transfer_status st;
    CHECK(getTransferStatus(eng, b, 0, &st) < 0);
    CHECK(submitTransfer(eng, b, two, 1) < 0);
    CHECK(freeBatchID(eng, b) < 0);
    CHECK(allocateBatchID(eng, 0) == INVALID_BATCH);
    CHECK(allocateBatchID(NULL, 4) == INVALID_BATCH);

    /* Notifies: a direct one, and one deferred until its batch completed. */
    notify_msg_t hello = {.name = "initiator", .msg = "hello"};
    CHECK(genNotifyInEngine(eng, (uint64_t)seg, hello) == 0);
    CHECK(wait_notifs(&p, "initiator=hello"));
    CHECK(genNotifyInEngine(eng, 4242, hello) < 0);
    notify_msg_t done = {.name = "initiator", .msg = "batch-done"};
    b = allocateBatchID(eng, 2);
    CHECK(submitTransferWithNotify(eng, b, two, 2, done) == 0);
    CHECK(submitTransferWithNotify(eng, b, two, 0, done) < 0);
    for (size_t i = 0; i < 2; i++)
        CHECK(wait_task(eng, b, i, NULL) == STATUS_COMPLETED);
    CHECK(freeBatchID(eng, b) == 0);
    CHECK(wait_notifs(&p, "initiator=batch-done"));

    /* A dead peer: its tasks end FAILED or TIMEOUT, never hang. */
    fprintf(p.to, "quit\n");
    fflush(p.to);
    waitpid(p.pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    p.pid = 0;
    b = allocateBatchID(eng, 1);
    rc = submitTransfer(eng, b, two, 1);
    if (rc == 0) {
        int s = wait_task(eng, b, 0, NULL);
        CHECK(s == STATUS_FAILED || s == STATUS_TIMEOUT);
    }
    CHECK(freeBatchID(eng, b) == 0);

    CHECK(closeSegment(eng, seg) == 0);
    void *addrs[1] = {local};
    CHECK(unregisterLocalMemoryBatch(eng, addrs, 1) == 0);
    CHECK(unregisterLocalMemory(eng, local) < 0); /* already gone */
out:
    if (p.pid > 0) {
        kill(p.pid, SIGKILL);
        waitpid(p.pid, &status, 0);
    }
    if (p.to)
        fclose(p.to);
    if (p.from)
        fclose(p.from);
    destroyTransferEngine(eng);
    free(local);
    free(unreg);
    fprintf(stderr, "te_compat_test: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    if (argc > 1 && strcmp(argv[1], "--target") == 0)
        return run_target();
    return run_initiator("/proc/self/exe");
}
