/* Spawns and stops real mooncake_master processes for the tests. */
#include "master_proc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/http.h"
#include "mooncake/common/time.h"

int mc_test_read_line(int fd, char *line, size_t cap, uint64_t deadline) {
    size_t n = 0;
    while (n + 1 < cap) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        uint64_t now = mc__now_ms();
        char ch;
        if (now >= deadline || poll(&p, 1, (int)(deadline - now)) <= 0)
            return -1;
        if (read(fd, &ch, 1) != 1)
            return -1;
        if (ch == '\n')
            break;
        line[n++] = ch;
    }
    line[n] = '\0';
    return 0;
}

static uint16_t mc__port_of(const char *line) {
    const char *c = strrchr(line, ':');
    return c ? (uint16_t)atoi(c + 1) : 0;
}

int mc_test_master_start(const char *bin, uint16_t port, const char *const *extra,
                         mc_test_master_t *m) {
    const char *argv[40];
    char port_arg[32];
    int pfd[2];
    int n = 0;
    uint64_t deadline = mc__now_ms() + 10000;
    int want_meta = 0;
    memset(m, 0, sizeof(*m));
    snprintf(port_arg, sizeof(port_arg), "--port=%u", (unsigned)port);
    argv[n++] = bin;
    argv[n++] = port_arg;
    argv[n++] = "--metrics_port=0";
    argv[n++] = "--rpc_address=127.0.0.1";
    for (int i = 0; extra && extra[i] && n < 38; i++) {
        if (strstr(extra[i], "enable_http_metadata_server"))
            want_meta = 1;
        argv[n++] = extra[i];
    }
    argv[n] = NULL;
    if (pipe2(pfd, O_CLOEXEC) != 0)
        return -1;
    m->pid = fork();
    if (m->pid < 0)
        return -1;
    if (m->pid == 0) {
        /* A failed test must not leave a master behind. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(pfd[1], 1);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    close(pfd[1]);
    m->out_fd = pfd[0];
    while (!m->rpc_port || !m->metrics_port || (want_meta && !m->meta_port)) {
        char line[256];
        if (mc_test_read_line(m->out_fd, line, sizeof(line), deadline)) {
            mc_test_master_stop(m, 1);
            return -1;
        }
        if (strstr(line, "listening on rpc"))
            m->rpc_port = mc__port_of(line);
        else if (strstr(line, "metrics on"))
            m->metrics_port = mc__port_of(line);
        else if (strstr(line, "http metadata on"))
            m->meta_port = mc__port_of(line);
    }
    snprintf(m->addr, sizeof(m->addr), "127.0.0.1:%u", (unsigned)m->rpc_port);
    return 0;
}

int mc_test_master_stop(mc_test_master_t *m, int hard) {
    int status = -1;
    if (m->pid > 0) {
        kill(m->pid, hard ? SIGKILL : SIGTERM);
        while (waitpid(m->pid, &status, 0) < 0 && errno == EINTR)
            ;
    }
    if (m->out_fd > 0)
        close(m->out_fd);
    m->pid = 0;
    m->out_fd = 0;
    return status;
}

int mc_test_run_capture(const char *bin, const char *const *args, char *err, size_t cap) {
    const char *argv[32];
    int pfd[2];
    int n = 0, status = 0;
    size_t got = 0;
    pid_t pid;
    argv[n++] = bin;
    for (int i = 0; args && args[i] && n < 30; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    if (pipe2(pfd, O_CLOEXEC) != 0)
        return -1;
    pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        dup2(pfd[1], 2);
        dup2(devnull, 1);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    close(pfd[1]);
    for (;;) {
        ssize_t r;
        if (got + 1 >= cap)
            break;
        r = read(pfd[0], err + got, cap - 1 - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    err[got] = '\0';
    close(pfd[0]);
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int mc_test_http_get(uint16_t port, const char *path, char **body) {
    char url[512];
    int status = 0;
    size_t len = 0;
    snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", (unsigned)port, path);
    *body = NULL;
    if (mc__http_request("GET", url, NULL, 0, 5000, &status, body, &len))
        return -1;
    return status;
}

int mc_test_metric(uint16_t port, const char *name, double *v) {
    char *body = NULL;
    char *p;
    int rc = -1;
    if (mc_test_http_get(port, "/metrics", &body) != 200)
        goto out;
    for (p = body; (p = strstr(p, name)) != NULL; p++) {
        if ((p == body || p[-1] == '\n') && p[strlen(name)] == ' ') {
            *v = strtod(p + strlen(name) + 1, NULL);
            rc = 0;
            break;
        }
    }
out:
    mc__free(body);
    return rc;
}

uint16_t mc_test_free_port(void) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    uint16_t p = 0;
    if (fd < 0)
        return 0;
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &l) == 0)
        p = ntohs(a.sin_port);
    close(fd);
    return p;
}
