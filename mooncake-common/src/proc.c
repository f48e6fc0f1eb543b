#include "mooncake/common/proc.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

/* Process-wide by nature (one pid per process), and here in the one shared library so every
 * artifact of a process reads the same value. 0: not known yet, or forgotten by a fork. */
static _Atomic int mc__cached_pid;
static pthread_once_t mc__pid_once = PTHREAD_ONCE_INIT;

static void mc__pid_forget(void) {
    atomic_store_explicit(&mc__cached_pid, 0, memory_order_relaxed);
}

static void mc__pid_watch_forks(void) {
    /* Without the handler a child would keep its parent's pid here and pass every check. */
    (void)pthread_atfork(NULL, NULL, mc__pid_forget);
}

int mc__pid(void) {
    int pid = atomic_load_explicit(&mc__cached_pid, memory_order_relaxed);
    if (pid != 0)
        return pid;
    /* Registered before the first pid is cached: a fork after this point resets the cache. */
    pthread_once(&mc__pid_once, mc__pid_watch_forks);
    pid = (int)getpid();
    atomic_store_explicit(&mc__cached_pid, pid, memory_order_relaxed);
    return pid;
}
