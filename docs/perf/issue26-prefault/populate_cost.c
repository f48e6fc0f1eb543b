#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
static double now() {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}
int main(int c, char **v) {
    size_t len = (size_t)1 << 30;
    int f = memfd_create("x", 0);
    ftruncate(f, len);
    char *p = mmap(0, len, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
    double t = now();
    int r = madvise(p, len, 23);
    double t2 = now();
    printf("populate rc=%d %.3f s %.2f GB/s\n", r, t2 - t, len / (t2 - t) / 1e9);
    int f2 = memfd_create("y", 0);
    ftruncate(f2, len);
    char *q = mmap(0, len, PROT_READ | PROT_WRITE, MAP_SHARED, f2, 0);
    t = now();
    for (size_t i = 0; i < len; i += 4096)
        q[i] = 1;
    t2 = now();
    printf("touch %.3f s\n", t2 - t);
    t = now();
    memset(q, 2, len);
    t2 = now();
    printf("memset warm %.3f s %.2f GB/s\n", t2 - t, len / (t2 - t) / 1e9);
    return 0;
}
