/* Fuzzes descriptor passing (mc__recv_fds, the receiving half of the shm hand-off): a peer
 * chooses how many descriptors travel with which bytes, and the receiver must neither leak one
 * nor hand back more than it asked for, whatever arrives.
 *
 * Input: u8 descriptors on the first piece (mod 72: past the receiver's 64-slot control buffer
 * too), u8 options (bits 0-1: descriptors the receiver takes, bit 2: send the payload in two
 * pieces, bit 3: one more descriptor on the second piece), u8 bytes the receiver expects
 * (1..64), then the payload. Everything is written to one end of a socketpair (closed for
 * writing) and received at the other into heap buffers of exactly the expected sizes. */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MC__FUZZ_MAX_SEND 72
#define MC__FUZZ_FD_SCAN 512

static int g_memfd = -1;
static struct stat g_memfd_st;

/* Sends p[0..n) with nfds copies of the memfd; more than mc__send_fds allows go raw. */
static void mc__fuzz_send(int sock, const uint8_t *p, size_t n, int nfds) {
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * MC__FUZZ_MAX_SEND)];
    } ctl;
    int fds[MC__FUZZ_MAX_SEND];
    struct iovec iov = {(void *)p, n};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    struct cmsghdr *cm;
    if (n == 0)
        return;
    for (int i = 0; i < nfds; i++)
        fds[i] = g_memfd;
    if (nfds <= 64) {
        (void)mc__send_fds(sock, p, n, fds, nfds);
        return;
    }
    memset(&ctl, 0, sizeof(ctl));
    mh.msg_control = ctl.buf;
    mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
    cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
    memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfds);
    (void)sendmsg(sock, &mh, MSG_NOSIGNAL);
}

static void mc__fuzz_open_fds(uint8_t *open_fds) {
    for (int fd = 0; fd < MC__FUZZ_FD_SCAN; fd++)
        open_fds[fd] = fcntl(fd, F_GETFD) >= 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t before[MC__FUZZ_FD_SCAN], after[MC__FUZZ_FD_SCAN];
    int sv[2];
    int nsend, max_fds, split, second_fd, nfds = -1, rc;
    size_t want, plen, first;
    const uint8_t *payload;
    uint8_t *buf;
    int *fds;
    if (size < 3)
        return 0;
    if (g_memfd < 0) {
        g_memfd = memfd_create("mc-fuzz-passed", MFD_CLOEXEC);
        if (g_memfd < 0 || fstat(g_memfd, &g_memfd_st) != 0)
            abort();
    }
    nsend = data[0] % MC__FUZZ_MAX_SEND;
    max_fds = data[1] & 3;
    split = (data[1] >> 2) & 1;
    second_fd = (data[1] >> 3) & 1;
    want = 1 + data[2] % 64;
    payload = data + 3;
    plen = size - 3;
    first = split ? plen / 2 : plen;
    mc__fuzz_open_fds(before);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        abort();
    mc__fuzz_send(sv[0], payload, first, nsend);
    if (split)
        mc__fuzz_send(sv[0], payload + first, plen - first, second_fd);
    shutdown(sv[0], SHUT_WR);

    buf = malloc(want);
    fds = max_fds ? malloc(sizeof(int) * (size_t)max_fds) : NULL;
    rc = mc__recv_fds(sv[1], buf, want, fds, max_fds, &nfds, mc__now_ms() + 1000);
    if (rc == 0) {
        /* the bytes are the payload's first ones; no more descriptors than asked for or sent
         * with them, each a close-on-exec copy of what was sent */
        if (plen < want || memcmp(buf, payload, want) != 0 || nfds < 0 || nfds > max_fds ||
            nfds > nsend + second_fd)
            abort();
        for (int i = 0; i < nfds; i++) {
            struct stat st;
            if (fstat(fds[i], &st) != 0 || st.st_ino != g_memfd_st.st_ino ||
                st.st_dev != g_memfd_st.st_dev || !(fcntl(fds[i], F_GETFD) & FD_CLOEXEC))
                abort();
            close(fds[i]);
        }
    } else if (nfds != 0 && nfds != -1) {
        abort();
    }
    close(sv[0]);
    close(sv[1]);
    /* whatever failed or was surplus was closed: the descriptor table is as it was */
    mc__fuzz_open_fds(after);
    if (memcmp(before, after, sizeof(before)) != 0)
        abort();
    free(fds);
    free(buf);
    return 0;
}
