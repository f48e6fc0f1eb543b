#include "te_test_util.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef TE_TARGET_BIN
#error "TE_TARGET_BIN must name the te_target executable"
#endif

/* Reads one line with a 20 s bound so a wedged target fails the test instead of hanging it. */
static int te_read_line(int fd, char *buf, size_t cap) {
    size_t n = 0;
    uint64_t dl = te_now_ms() + 20000;
    while (n + 1 < cap) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        uint64_t now = te_now_ms();
        ssize_t r;
        if (now >= dl || poll(&p, 1, (int)(dl - now)) <= 0)
            return -1;
        r = read(fd, buf + n, 1);
        if (r <= 0)
            return -1;
        if (buf[n] == '\n') {
            buf[n] = '\0';
            return 0;
        }
        n++;
    }
    return -1;
}

int te_target_start(te_target_t *t, const char *metadata, const char *name, size_t plain_len,
                    size_t managed_len) {
    return te_target_start_ex(t, metadata, name, "auto", plain_len, managed_len, 0);
}

int te_target_start_ex(te_target_t *t, const char *metadata, const char *name, const char *proto,
                       size_t plain_len, size_t managed_len, int flags) {
    int in[2], out[2];
    char pl[32], ml[32], line[512];
    char *argv[8];
    memset(t, 0, sizeof(*t));
    t->pid = -1;
    if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC))
        return -1;
    snprintf(pl, sizeof(pl), "%zu", plain_len);
    snprintf(ml, sizeof(ml), "%zu", managed_len);
    argv[0] = (char *)TE_TARGET_BIN;
    argv[1] = (char *)metadata;
    argv[2] = (char *)(name ? name : "-");
    argv[3] = (char *)proto;
    argv[4] = pl;
    argv[5] = ml;
    argv[6] = NULL;
    t->pid = fork();
    if (t->pid == 0) {
        /* only async-signal-safe calls between fork and exec: the parent has threads */
        dup2(in[0], 0);
        dup2(out[1], 1);
        if (flags & TE_TARGET_FIXED_LAYOUT)
            (void)personality(ADDR_NO_RANDOMIZE);
        execv(argv[0], argv);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    t->to_child = in[1];
    t->from_child = out[0];
    if (t->pid < 0 || te_read_line(t->from_child, line, sizeof(line)) ||
        sscanf(line, "READY %255s %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64, t->name,
               &t->plain_addr, &t->plain_len, &t->managed_addr, &t->managed_len) != 5) {
        te_target_kill(t);
        return -1;
    }
    return 0;
}

int te_target_cmd(te_target_t *t, char *reply, size_t cap, const char *fmt, ...) {
    char cmd[512], line[1024];
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(cmd, sizeof(cmd) - 1, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(cmd) - 1)
        return -1;
    cmd[n++] = '\n';
    if (write(t->to_child, cmd, (size_t)n) != n || te_read_line(t->from_child, line, sizeof(line)))
        return -1;
    if (strncmp(line, "OK", 2))
        return -1;
    if (reply && cap)
        snprintf(reply, cap, "%s", line[2] ? line + 3 : "");
    return 0;
}

uint64_t te_target_hash(te_target_t *t, uint64_t addr, uint64_t len) {
    char r[64];
    if (te_target_cmd(t, r, sizeof(r), "H %" PRIu64 " %" PRIu64, addr, len))
        return 0;
    return strtoull(r, NULL, 16);
}

int te_target_fill(te_target_t *t, uint64_t addr, uint64_t len, unsigned seed) {
    return te_target_cmd(t, NULL, 0, "F %" PRIu64 " %" PRIu64 " %u", addr, len, seed);
}

static void te_target_close(te_target_t *t) {
    if (t->to_child > 0)
        close(t->to_child);
    if (t->from_child > 0)
        close(t->from_child);
    t->to_child = t->from_child = -1;
    t->pid = -1;
}

int te_target_stop(te_target_t *t) {
    int st = 0;
    if (t->pid <= 0)
        return -1;
    (void)te_target_cmd(t, NULL, 0, "Q");
    close(t->to_child);
    t->to_child = -1;
    /* a clean exit normally takes milliseconds; do not wait forever on a wedged one */
    for (int i = 0; i < 1000; i++) {
        if (waitpid(t->pid, &st, WNOHANG) == t->pid) {
            te_target_close(t);
            return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        }
        usleep(10000);
    }
    te_target_kill(t);
    return -1;
}

void te_target_kill(te_target_t *t) {
    int st;
    if (t->pid > 0) {
        kill(t->pid, SIGKILL);
        while (waitpid(t->pid, &st, 0) < 0 && errno == EINTR) {
        }
    }
    te_target_close(t);
}
