/* How long a sched_yield takes: alone on its core, and when another thread wants the core.
 * Build and run: gcc -O2 -o yield_time yield_time.c && ./yield_time; for two on one core:
 * taskset -c 0 ./yield_time & taskset -c 0 ./yield_time. Prints the mean and a histogram (ns). */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
static long long now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}
int main(void) {
    int n = 200000;
    long long h[8] = {0};
    long long tot = 0;
    for (int i = 0; i < n; i++) {
        long long a = now();
        sched_yield();
        long long d = now() - a;
        tot += d;
        int b = d < 500     ? 0
                : d < 1000  ? 1
                : d < 2000  ? 2
                : d < 4000  ? 3
                : d < 8000  ? 4
                : d < 16000 ? 5
                : d < 64000 ? 6
                            : 7;
        h[b]++;
    }
    printf("avg %lld ns  <0.5:%lld <1:%lld <2:%lld <4:%lld <8:%lld <16:%lld <64:%lld more:%lld\n",
           tot / n, h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]);
}
