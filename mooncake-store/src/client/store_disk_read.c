/* Reading LOCAL_DISK copies from the nodes that own them (disk_proto.h's read server). One
 * request per read on a connection taken from a small idle cache (so a stream of small reads
 * does not pay a connect each); the bytes land straight in the caller's parts. A copy in the
 * shared directory (the master's --root_fs_dir) is read from its file here, by any client. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "client/store_disk.h"
#include "client/store_internal.h"
#include "disk/file_store.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/auth.h"
#include "mooncake/common/log.h"
#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "proto/disk_proto.h"

#define MC__DCONN_IDLE_MAX 16
#define MC__DREAD_TIMEOUT_MS 10000u

typedef struct mc__dconn {
    char endpoint[MC_MP_MAX_SEGMENT_NAME + 1];
    int fd;
} mc__dconn_t;

/* An idle connection to endpoint, or a new one: its fd, or a negative code. */
static int mc__dconn_get(mc_store_t *s, const char *endpoint, uint64_t deadline) {
    char host[MC_MP_MAX_SEGMENT_NAME + 1];
    uint16_t port = 0;
    mc_auth_t *auth = NULL;
    int fd = -1;
    pthread_mutex_lock(&s->disk_mu);
    for (size_t i = 0; i < s->n_dconns; i++) {
        if (strcmp(s->dconns[i].endpoint, endpoint) == 0) {
            fd = s->dconns[i].fd;
            s->dconns[i] = s->dconns[--s->n_dconns];
            break;
        }
    }
    pthread_mutex_unlock(&s->disk_mu);
    if (fd >= 0)
        return fd;
    if (mc__split_host_port(endpoint, host, sizeof(host), &port) != 0 || port == 0)
        return MC_ERR_INVALID_PARAMS;
    fd = mc__tcp_connect(host, port, deadline);
    if (fd < 0)
        return MC_ERR_TRANSFER_FAIL;
    auth = mc__malloc(sizeof(*auth));
    if (!auth || mc__auth_init(auth, s->cfg.cluster_secret, s->cfg.cluster_secret_file) != 0 ||
        (auth->enabled && mc__auth_client(auth, fd, deadline) != 0)) {
        mc__free(auth);
        close(fd);
        return MC_ERR_TRANSFER_FAIL;
    }
    mc__free(auth);
    return fd;
}

static void mc__dconn_put(mc_store_t *s, const char *endpoint, int fd) {
    pthread_mutex_lock(&s->disk_mu);
    if (s->n_dconns < MC__DCONN_IDLE_MAX) {
        if (!s->dconns)
            s->dconns = mc__calloc(MC__DCONN_IDLE_MAX, sizeof(*s->dconns));
        if (s->dconns) {
            snprintf(s->dconns[s->n_dconns].endpoint, sizeof(s->dconns[0].endpoint), "%s",
                     endpoint);
            s->dconns[s->n_dconns++].fd = fd;
            fd = -1;
        }
    }
    pthread_mutex_unlock(&s->disk_mu);
    if (fd >= 0)
        close(fd);
}

uint64_t mc_store_disk_read_count(const mc_store_t *s) {
    return s ? atomic_load(&((mc_store_t *)(uintptr_t)s)->disk_reads) : 0;
}

void mc__store_disk_conns_close(mc_store_t *s) {
    pthread_mutex_lock(&s->disk_mu);
    for (size_t i = 0; i < s->n_dconns; i++)
        close(s->dconns[i].fd);
    mc__free(s->dconns);
    s->dconns = NULL;
    s->n_dconns = 0;
    pthread_mutex_unlock(&s->disk_mu);
}

/* One request on fd: 0 with the bytes in iov, a node's code (kept: the connection is fine; after
 * a streamed value's failed verdict, CHECKSUM_MISMATCH or INVALID_READ with iov's bytes unusable),
 * or TRANSFER_FAIL (*broken set: close it). */
static int mc__dread_once(int fd, const char *key, const mc__replica_desc_t *d,
                          const mc_store_iov_t *iov, size_t iovcnt, uint64_t size,
                          uint64_t deadline, int *broken) {
    uint8_t hdr[MC_FRAME_HEADER_SIZE];
    uint8_t body[64];
    mc_frame_header_t h;
    mc_buf_t req;
    int32_t code = 0;
    uint64_t len = 0;
    int rc;
    *broken = 1;
    mc__buf_init(&req);
    rc = mc__dp_encode_read(&req, 1, key, d->epoch, size);
    if (rc == 0 && mc__send_all(fd, req.data, req.len, deadline) != 0)
        rc = MC_ERR_TRANSFER_FAIL;
    mc__buf_free(&req);
    if (rc)
        return rc == MC_ERR_INVALID_KEY ? rc : MC_ERR_TRANSFER_FAIL;
    /* The reply's wait spins before it sleeps, as a master round trip's does: a small value the
     * node read ahead (objects read in the order they went to disk) comes back within tens of
     * microseconds, and a reader that slept for it paid a wake-up on every get (one reader's
     * 64 KiB gets, p50 129-140 us sleeping, 110-122 us spinning; docs/perf/issue26-spin150). */
    if (mc__recv_reply(fd, hdr, sizeof(hdr), deadline, mc__reply_spin_for(size)) != 0 ||
        mc__frame_header_decode(hdr, sizeof(hdr), sizeof(body), &h) != 0 ||
        mc__recv_all(fd, body, (size_t)h.body_len, deadline) != 0 ||
        mc__dp_decode_read_reply(&h, body, (size_t)h.body_len, &code, &len) != 0)
        return MC_ERR_TRANSFER_FAIL;
    if (code != 0) {
        *broken = 0;
        return code;
    }
    if (len != size)
        return MC_ERR_TRANSFER_FAIL; /* not the object the master described: never deliver it */
    for (size_t i = 0; i < iovcnt && len > 0; i++) {
        size_t n = iov[i].len < len ? iov[i].len : (size_t)len;
        if (mc__recv_all(fd, iov[i].base, n, deadline) != 0)
            return MC_ERR_TRANSFER_FAIL;
        len -= n;
    }
    /* The node checksummed the value while it sent it: its verdict follows the bytes, and until
     * it says 0 they are not the object (the caller gets the code and must not use them). */
    uint8_t tr[MC_DP_TRAILER_SIZE];
    int32_t verdict = 0;
    if (len != 0 || mc__recv_all(fd, tr, sizeof tr, deadline) != 0 ||
        mc__dp_decode_read_trailer(tr, sizeof tr, &verdict) != 0)
        return MC_ERR_TRANSFER_FAIL;
    *broken = 0;
    return verdict;
}

int mc__store_disk_read(mc_store_t *s, const char *key, const mc__replica_desc_t *d,
                        const mc_store_iov_t *iov, size_t iovcnt, uint64_t size) {
    uint64_t deadline = mc__now_ms() + MC__DREAD_TIMEOUT_MS;
    int rc = MC_ERR_TRANSFER_FAIL;
    if (d->size != size)
        return MC_ERR_TRANSFER_FAIL;
    if (strncmp(d->segment_name, MC_DP_SHARED_PREFIX, strlen(MC_DP_SHARED_PREFIX)) == 0) {
        struct iovec one[8], *v = iovcnt <= 8 ? one : mc__calloc(iovcnt, sizeof(*v));
        if (!v)
            return MC_ERR_INTERNAL_ERROR;
        for (size_t i = 0; i < iovcnt; i++)
            v[i] = (struct iovec){iov[i].base, iov[i].len};
        /* epoch: the copy's version, which the file must hold (0: an adopted copy, any). */
        rc = mc__fstore_read(d->segment_name + strlen(MC_DP_SHARED_PREFIX), key, v, iovcnt, size,
                             d->epoch);
        if (v != one)
            mc__free(v);
        if (rc == 0)
            atomic_fetch_add(&s->disk_reads, 1);
        return rc;
    }
    /* A cached connection may have been closed by the node meanwhile: one fresh try after. */
    for (int attempt = 0; attempt < 2; attempt++) {
        int broken = 1;
        int fd = mc__dconn_get(s, d->segment_name, deadline);
        if (fd < 0)
            return fd;
        rc = mc__dread_once(fd, key, d, iov, iovcnt, size, deadline, &broken);
        if (rc == 0)
            atomic_fetch_add(&s->disk_reads, 1);
        if (!broken) {
            mc__dconn_put(s, d->segment_name, fd);
            return rc;
        }
        close(fd);
        if (mc__now_ms() >= deadline)
            break;
    }
    return rc;
}

int mc_store_disk_file_path(const char *endpoint, const char *key, char *out, size_t cap) {
    size_t n = strlen(MC_DP_SHARED_PREFIX);
    if (!endpoint || !key || !*key || !out || strncmp(endpoint, MC_DP_SHARED_PREFIX, n) != 0 ||
        !endpoint[n])
        return MC_ERR_INVALID_PARAMS;
    return mc__fstore_path(endpoint + n, key, out, cap);
}
