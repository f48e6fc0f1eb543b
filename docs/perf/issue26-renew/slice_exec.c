#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
struct attr {
    uint32_t size, policy;
    uint64_t flags;
    int32_t nice;
    uint32_t prio;
    uint64_t rt, dl, per;
    uint32_t umin, umax;
};
int main(int argc, char **argv) {
    struct attr a = {0};
    a.size = sizeof a;
    a.policy = 0;
    a.rt = strtoull(argv[1], 0, 10);
    if (syscall(SYS_sched_setattr, 0, &a, 0)) {
        perror("sched_setattr");
        return 1;
    }
    execvp(argv[2], argv + 2);
    perror("exec");
    return 1;
}
