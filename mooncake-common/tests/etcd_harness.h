/* Starts real etcd servers on loopback for tests: ephemeral ports, a temporary data dir, killed
 * and removed at the end. The binary is $MC_ETCD_BIN or "etcd" on PATH (Debian: etcd-server). */
#ifndef MC_TEST_ETCD_HARNESS_H
#define MC_TEST_ETCD_HARNESS_H
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/http.h"
#include "mooncake/common/time.h"

typedef struct th_etcd {
    pid_t pid;
    uint16_t client_port, peer_port;
    char name[16];
    char dir[64];
} th_etcd_t;

/* A port nothing listens on right now (bound and released). */
static uint16_t th_free_port(void) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    uint16_t p = 0;
    if (fd < 0)
        return 0;
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &l) == 0)
        p = ntohs(a.sin_port);
    close(fd);
    return p;
}

static const char *th_etcd_bin(void) {
    const char *b = getenv("MC_ETCD_BIN");
    return b && *b ? b : "etcd";
}

/* 1 when an etcd binary can be run. */
static int th_etcd_available(void) {
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "%s --version >/dev/null 2>&1", th_etcd_bin());
    return system(cmd) == 0;
}

/* Spawns one member; cluster is the --initial-cluster value. */
static int th_etcd_spawn(th_etcd_t *e, const char *cluster, const char *token) {
    char curl[64], purl[64];
    snprintf(e->dir, sizeof(e->dir), "/tmp/mc-etcd-test-XXXXXX");
    if (!mkdtemp(e->dir))
        return -1;
    snprintf(curl, sizeof(curl), "http://127.0.0.1:%u", (unsigned)e->client_port);
    snprintf(purl, sizeof(purl), "http://127.0.0.1:%u", (unsigned)e->peer_port);
    e->pid = fork();
    if (e->pid < 0)
        return -1;
    if (e->pid == 0) {
        char data[96], log[96];
        int fd;
        snprintf(data, sizeof(data), "%s/data", e->dir);
        snprintf(log, sizeof(log), "%s/log", e->dir);
        fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execlp(th_etcd_bin(), th_etcd_bin(), "--name", e->name, "--data-dir", data,
               "--listen-client-urls", curl, "--advertise-client-urls", curl, "--listen-peer-urls",
               purl, "--initial-advertise-peer-urls", purl, "--initial-cluster", cluster,
               "--initial-cluster-state", "new", "--initial-cluster-token", token,
               "--heartbeat-interval", "50", "--election-timeout", "400", "--log-level", "error",
               (char *)NULL);
        _exit(127);
    }
    return 0;
}

/* Waits until the member answers /health with a leader (or the deadline). */
static int th_etcd_wait(const th_etcd_t *e, int ms) {
    uint64_t dl = mc__now_ms() + (uint64_t)ms;
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/health", (unsigned)e->client_port);
    while (mc__now_ms() < dl) {
        char *body = NULL;
        int status = 0;
        if (mc__http_request("GET", url, NULL, 0, 500, &status, &body, NULL) == 0 &&
            status == 200 && body && strstr(body, "true")) {
            mc__free(body);
            return 0;
        }
        mc__free(body);
        usleep(50 * 1000);
    }
    return -1;
}

static void th_etcd_kill(th_etcd_t *e) {
    char cmd[320]; /* room for any dir gcc -O3 can prove, not only the 64 bytes used */
    if (e->pid > 0) {
        kill(e->pid, SIGKILL);
        waitpid(e->pid, NULL, 0);
        e->pid = 0;
    }
    if (e->dir[0]) {
        snprintf(cmd, sizeof(cmd), "rm -rf %s", e->dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", e->dir);
        e->dir[0] = '\0';
    }
}
/* n members (1..5) forming one cluster, all healthy on return. */
static int th_etcd_cluster(th_etcd_t *m, int n) {
    char cluster[512] = "", token[32];
    size_t off = 0;
    snprintf(token, sizeof(token), "mc-test-%d-%u", (int)getpid(), (unsigned)mc__now_ms());
    for (int i = 0; i < n; i++) {
        memset(&m[i], 0, sizeof(m[i]));
        m[i].client_port = th_free_port();
        m[i].peer_port = th_free_port();
        snprintf(m[i].name, sizeof(m[i].name), "m%d", i);
        off += (size_t)snprintf(cluster + off, sizeof(cluster) - off, "%s%s=http://127.0.0.1:%u",
                                i ? "," : "", m[i].name, (unsigned)m[i].peer_port);
    }
    for (int i = 0; i < n; i++) {
        if (th_etcd_spawn(&m[i], cluster, token))
            goto fail;
    }
    for (int i = 0; i < n; i++) {
        if (th_etcd_wait(&m[i], 15000))
            goto fail;
    }
    return 0;
fail:
    for (int i = 0; i < n; i++)
        th_etcd_kill(&m[i]);
    return -1;
}

#endif
