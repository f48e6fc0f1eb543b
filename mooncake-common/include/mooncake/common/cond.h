/* The stop protocol of our background threads: a flag guarded by a mutex, and a condition
 * variable the thread waits on (with a deadline from mooncake/common/time.h) between steps. */
#ifndef MC_COMMON_COND_H
#define MC_COMMON_COND_H
#include <pthread.h>

/* Sets *flag under mu and wakes every waiter on cv, so a thread between its check of the flag and
 * its wait cannot miss the stop (it holds mu across both). The caller then joins the thread. */
static inline void mc__cond_raise(pthread_mutex_t *mu, pthread_cond_t *cv, int *flag) {
    pthread_mutex_lock(mu);
    *flag = 1;
    pthread_cond_broadcast(cv);
    pthread_mutex_unlock(mu);
}
#endif
