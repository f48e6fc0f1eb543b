/* Fuzzes the owner side of the shm hand-off (mc__shm_serve in transports/shm_owner.c, reached
 * through a real engine's abstract unix socket): the input is what a same-host peer writes,
 * normally one mc__shm_req_t (u32 op, u32 pad, u64 id; native layout). The reply is taken with
 * mc__recv_fds as the initiator takes it, and must match what the engine holds: the control page
 * for OP_CTRL, a managed buffer's memfd, address and length for OP_BUFFER with its id, a refusal
 * without descriptors for anything else, and no reply at all to a short request.
 *
 * The engine (two managed buffers, shm ids 0 and 1, and one plain registration, not shareable)
 * is created on the first input and kept: its state does not change between inputs. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"
#include "mooncake/transfer_engine.h"
#include "te_internal.h"
#include "transports/shm.h"
#include "transports/shm_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MC__FUZZ_NMANAGED 2

static mc_engine_t *g_e;
static void *g_managed[MC__FUZZ_NMANAGED];
static size_t g_managed_len[MC__FUZZ_NMANAGED] = {4096, 12345};
static char g_plain[8192];

static void mc__fuzz_engine_start(void) {
    mc_engine_options_t o = {.local_server_name = "127.0.0.1", .protocol = "auto"};
    if (mc_engine_create(&g_e) || mc_engine_init(g_e, &o))
        abort();
    for (int i = 0; i < MC__FUZZ_NMANAGED; i++)
        if (mc_engine_alloc_managed(g_e, g_managed_len[i], &g_managed[i]))
            abort();
    if (mc_engine_register_memory(g_e, g_plain, sizeof(g_plain), "cpu:0"))
        abort();
    if (!mc__shm_owner_socket(g_e)[0])
        abort(); /* no shm owner: nothing to fuzz */
}

/* The managed buffer the engine holds under this shm id, or -1. */
static int mc__fuzz_managed_index(uint64_t id) {
    int found = -1;
    pthread_rwlock_rdlock(&g_e->reg.lock);
    for (size_t i = 0; i < g_e->reg.n; i++) {
        const mc__region_t *g = &g_e->reg.regions[i];
        if (g->shm_id == (int64_t)id && g->memfd >= 0) {
            for (int k = 0; k < MC__FUZZ_NMANAGED; k++)
                if ((uint64_t)(uintptr_t)g_managed[k] == g->addr)
                    found = k;
        }
    }
    pthread_rwlock_unlock(&g_e->reg.lock);
    return found;
}

/* The descriptor that came with a successful reply must be what the reply says it is. */
static void mc__fuzz_check_fd(int fd, const mc__shm_rep_t *rep, int ctrl) {
    struct stat st;
    void *p;
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_size < rep->map_len)
        abort();
    if (!ctrl)
        return;
    p = mmap(NULL, rep->map_len, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED || ((const mc__shm_ctrl_t *)p)->magic != MC__SHM_CTRL_MAGIC)
        abort();
    munmap(p, rep->map_len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint64_t dl;
    mc__shm_req_t req;
    mc__shm_rep_t rep;
    int fds[2] = {-1, -1};
    int nfds = 0, fd, rc, k;
    uint8_t *copy;
    if (!g_e)
        mc__fuzz_engine_start();
    dl = mc__now_ms() + 2000;
    fd = mc__unix_connect(mc__shm_owner_socket(g_e), dl);
    if (fd < 0)
        abort();
    /* a heap copy of exactly the input is what goes on the wire */
    copy = malloc(size ? size : 1);
    memcpy(copy, data, size);
    /* The owner reads one request and closes: bytes past it may meet a closed socket. */
    if (size)
        (void)mc__send_all(fd, copy, size, dl);
    shutdown(fd, SHUT_WR); /* a short request meets EOF at once, not the owner's timeout */
    memset(&rep, 0, sizeof(rep));
    rc = mc__recv_fds(fd, &rep, sizeof(rep), fds, 2, &nfds, dl);
    close(fd);
    if (size < sizeof(req)) {
        if (rc == 0)
            abort(); /* the owner answered a request it never got whole */
        goto out;
    }
    memcpy(&req, copy, sizeof(req));
    if (rc != 0 || rep.pad != 0 || nfds > 1)
        abort();
    if (req.op == MC__SHM_OP_CTRL) {
        if (rep.rc != 0 || nfds != 1 || rep.len != sizeof(mc__shm_ctrl_t) ||
            rep.map_len != sizeof(mc__shm_ctrl_t))
            abort();
        mc__fuzz_check_fd(fds[0], &rep, 1);
    } else if (req.op == MC__SHM_OP_BUFFER && (k = mc__fuzz_managed_index(req.id)) >= 0) {
        if (rep.rc != 0 || nfds != 1 || rep.addr != (uint64_t)(uintptr_t)g_managed[k] ||
            rep.len != g_managed_len[k] || rep.map_len < rep.len)
            abort();
        mc__fuzz_check_fd(fds[0], &rep, 0);
    } else if (req.op == MC__SHM_OP_BUFFER) {
        if (rep.rc != MC_ERR_ADDRESS_NOT_REGISTERED || nfds != 0)
            abort();
    } else if (rep.rc != MC_ERR_INVALID_ARGUMENT || nfds != 0) {
        abort();
    }
out:
    for (int i = 0; i < nfds; i++)
        close(fds[i]);
    free(copy);
    return 0;
}
