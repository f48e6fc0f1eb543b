/* Host limits for benchmark ratios. Both loops touch buffer-sized regions (not one hot block) so
 * caches help them exactly as much as they help the transfers they are compared with. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "limits.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"

int mc__bench_memcpy_gbps(size_t block, size_t buffer, double seconds, double *gbps) {
    unsigned char *src = NULL, *dst = NULL;
    uint64_t bytes = 0, t0, t1, stop;
    size_t off = 0;
    int rc = 0;
    if (block == 0 || buffer < block || seconds <= 0 || !gbps) {
        rc = MC_ERR_INVALID_ARGUMENT;
        goto out;
    }
    src = mc__malloc(buffer);
    dst = mc__malloc(buffer);
    if (!src || !dst) {
        rc = MC_ERR_MEMORY;
        goto out;
    }
    /* Fault every page in first: page faults are not part of a copy's cost. */
    memset(src, 0x5a, buffer);
    memset(dst, 0xa5, buffer);
    t0 = mc__now_ns();
    stop = t0 + (uint64_t)(seconds * 1e9);
    do {
        /* Several copies per clock read keep the clock out of small-block results. */
        for (int i = 0; i < 16; i++) {
            if (off + block > buffer)
                off = 0;
            memcpy(dst + off, src + off, block);
            off += block;
            bytes += block;
        }
        t1 = mc__now_ns();
    } while (t1 < stop);
    /* Make the copies observable so the compiler cannot drop them. */
    if (dst[0] != 0x5a)
        rc = MC_ERR_INTERNAL_ERROR;
    *gbps = (double)bytes / (double)(t1 - t0);
out:
    mc__free(src);
    mc__free(dst);
    return rc;
}

typedef struct mc__pump {
    int fd;
    size_t block, buffer;
    unsigned char *mem;
    uint64_t stop_ns;
    uint64_t bytes;
    uint64_t t0, t1;
    int err;
} mc__pump_t;

static void *mc__pump_send(void *arg) {
    mc__pump_t *p = arg;
    size_t off = 0;
    while (mc__now_ns() < p->stop_ns) {
        if (off + p->block > p->buffer)
            off = 0;
        if (mc__send_all(p->fd, p->mem + off, p->block, 0) != 0) {
            p->err = MC_ERR_SOCKET;
            break;
        }
        off += p->block;
    }
    shutdown(p->fd, SHUT_WR);
    return NULL;
}

static void *mc__pump_recv(void *arg) {
    mc__pump_t *p = arg;
    size_t off = 0;
    p->t0 = mc__now_ns();
    for (;;) {
        if (off + p->block > p->buffer)
            off = 0;
        /* Block-sized reads, like a transport that receives straight into registered memory. */
        ssize_t n = recv(p->fd, p->mem + off, p->block, MSG_WAITALL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            p->err = MC_ERR_SOCKET;
        if (n <= 0)
            break;
        p->bytes += (uint64_t)n;
        off += (size_t)n;
    }
    p->t1 = mc__now_ns();
    return NULL;
}

int mc__bench_tcp_pump_gbps(size_t block, size_t buffer, double seconds, double *gbps) {
    mc__pump_t tx = {.fd = -1}, rx = {.fd = -1};
    pthread_t ttx, trx;
    int lfd = -1;
    uint16_t port = 0;
    int rc = 0;
    if (block == 0 || buffer < block || seconds <= 0 || !gbps) {
        rc = MC_ERR_INVALID_ARGUMENT;
        goto out;
    }
    lfd = mc__tcp_listen("127.0.0.1", 0, 1, &port);
    if (lfd < 0) {
        rc = lfd;
        goto out;
    }
    tx.fd = mc__tcp_connect("127.0.0.1", port, mc__now_ms() + 5000);
    if (tx.fd < 0) {
        rc = tx.fd;
        goto out;
    }
    rx.fd = mc__accept(lfd);
    if (rx.fd < 0) {
        rc = rx.fd;
        goto out;
    }
    tx.block = rx.block = block;
    tx.buffer = rx.buffer = buffer;
    tx.mem = mc__malloc(buffer);
    rx.mem = mc__malloc(buffer);
    if (!tx.mem || !rx.mem) {
        rc = MC_ERR_MEMORY;
        goto out;
    }
    memset(tx.mem, 0x11, buffer);
    memset(rx.mem, 0x22, buffer);
    tx.stop_ns = mc__now_ns() + (uint64_t)(seconds * 1e9);
    if (pthread_create(&trx, NULL, mc__pump_recv, &rx) != 0) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    if (pthread_create(&ttx, NULL, mc__pump_send, &tx) != 0) {
        shutdown(rx.fd, SHUT_RDWR);
        pthread_join(trx, NULL);
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    pthread_join(ttx, NULL);
    pthread_join(trx, NULL);
    rc = tx.err ? tx.err : rx.err;
    if (rc == 0 && rx.t1 > rx.t0)
        *gbps = (double)rx.bytes / (double)(rx.t1 - rx.t0);
out:
    if (tx.fd >= 0)
        close(tx.fd);
    if (rx.fd >= 0)
        close(rx.fd);
    if (lfd >= 0)
        close(lfd);
    mc__free(tx.mem);
    mc__free(rx.mem);
    return rc;
}
