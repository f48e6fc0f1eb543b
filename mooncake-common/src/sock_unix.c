/* Unix-domain sockets and descriptor passing (used by the shared-memory transport to hand memfds
 * to a peer on the same host). A leading '@' selects the abstract namespace, which needs no file
 * and vanishes with the last descriptor. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "mooncake/common/sock.h"
#include "mooncake/common/time.h"
#include "mooncake/error.h"

#define MC__MAX_PASSED_FDS 64

static int mc__unix_addr(const char *path, struct sockaddr_un *sa, socklen_t *len) {
    size_t n = path ? strlen(path) : 0;
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    if (n == 0 || n >= sizeof(sa->sun_path))
        return MC_ERR_INVALID_ARGUMENT;
    memcpy(sa->sun_path, path, n);
    if (path[0] == '@') {
        sa->sun_path[0] = '\0';
        *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
    } else {
        *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
    }
    return 0;
}

int mc__unix_listen(const char *path) {
    struct sockaddr_un sa;
    socklen_t sl = 0;
    int fd = -1;
    int saved = 0;
    if (mc__unix_addr(path, &sa, &sl))
        return MC_ERR_INVALID_ARGUMENT;
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return MC_ERR_SOCKET;
    if (path[0] != '@')
        (void)unlink(path); /* a stale file from a dead process would block bind */
    if (bind(fd, (struct sockaddr *)&sa, sl) != 0 || listen(fd, 128) != 0) {
        saved = errno;
        close(fd);
        errno = saved;
        return MC_ERR_SOCKET;
    }
    return fd;
}

int mc__unix_connect(const char *path, uint64_t deadline_ms) {
    struct sockaddr_un sa;
    socklen_t sl = 0;
    int fd = -1;
    int rc = MC_ERR_SOCKET;
    int saved = 0;
    if (mc__unix_addr(path, &sa, &sl))
        return MC_ERR_INVALID_ARGUMENT;
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return MC_ERR_SOCKET;
    if (connect(fd, (struct sockaddr *)&sa, sl) != 0) {
        int err = 0;
        socklen_t el = sizeof(err);
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        int timeout = -1;
        if (errno != EINPROGRESS && errno != EAGAIN)
            goto fail;
        if (deadline_ms) {
            uint64_t now = mc__now_ms();
            timeout = now >= deadline_ms ? 0 : (int)(deadline_ms - now);
        }
        if (poll(&pfd, 1, timeout) <= 0) {
            errno = ETIMEDOUT;
            goto fail;
        }
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err) {
            errno = err ? err : errno;
            goto fail;
        }
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    rc = fd;
    goto out;
fail:
    saved = errno;
    close(fd);
    errno = saved;
out:
    return rc;
}

int mc__send_fds(int sock, const void *p, size_t n, const int *fds, int nfds) {
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * MC__MAX_PASSED_FDS)];
    } ctl;
    struct iovec iov = {(void *)p, n};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    ssize_t w;
    /* At least one data byte must travel with the descriptors. */
    if (!p || n == 0 || nfds < 0 || nfds > MC__MAX_PASSED_FDS || (nfds > 0 && !fds))
        return MC_ERR_INVALID_ARGUMENT;
    if (nfds > 0) {
        struct cmsghdr *cm;
        memset(&ctl, 0, sizeof(ctl));
        mh.msg_control = ctl.buf;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
        cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
        memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfds);
    }
    do {
        w = sendmsg(sock, &mh, MSG_NOSIGNAL);
    } while (w < 0 && errno == EINTR);
    if (w < 0)
        return MC_ERR_SOCKET;
    if ((size_t)w < n)
        return mc__send_all(sock, (const char *)p + w, n - (size_t)w, 0);
    return 0;
}

int mc__recv_fds(int sock, void *p, size_t n, int *fds, int max_fds, int *nfds,
                 uint64_t deadline_ms) {
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * MC__MAX_PASSED_FDS)];
    } ctl;
    struct iovec iov = {p, n};
    struct msghdr mh = {.msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = ctl.buf,
                        .msg_controllen = sizeof(ctl.buf)};
    int got = 0;
    int rc = MC_ERR_SOCKET;
    ssize_t r;
    if (!p || n == 0 || max_fds < 0 || (max_fds > 0 && !fds) || !nfds)
        return MC_ERR_INVALID_ARGUMENT;
    *nfds = 0;
    for (;;) {
        if (mc__wait_fd(sock, POLLIN, deadline_ms) != 0)
            return MC_ERR_SOCKET;
        r = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        if (r >= 0)
            break;
        if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)
            return MC_ERR_SOCKET;
    }
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
            continue;
        int k = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        for (int i = 0; i < k; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(cm) + sizeof(int) * (size_t)i, sizeof(int));
            /* Descriptors beyond what the caller can hold are closed, never leaked. */
            if (got < max_fds)
                fds[got++] = fd;
            else
                close(fd);
        }
    }
    if (r == 0) {
        errno = ECONNRESET;
        goto fail;
    }
    if ((mh.msg_flags & MSG_CTRUNC) || (size_t)r < n) {
        if (mh.msg_flags & MSG_CTRUNC) {
            errno = EMSGSIZE;
            goto fail;
        }
        if (mc__recv_all(sock, (char *)p + r, n - (size_t)r, deadline_ms) != 0)
            goto fail;
    }
    *nfds = got;
    return 0;
fail:
    for (int i = 0; i < got; i++)
        close(fds[i]);
    return rc;
}
