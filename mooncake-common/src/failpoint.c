#include "mooncake/common/failpoint.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "mooncake/common/log.h"

#define MC__FP_MAX_FIRED 16

static pthread_once_t mc__fp_once = PTHREAD_ONCE_INIT;
static const char *mc__fp_spec; /* the environment's string, read once; NULL: none armed */
static pthread_mutex_t mc__fp_mu = PTHREAD_MUTEX_INITIALIZER;
static const char *mc__fp_fired[MC__FP_MAX_FIRED]; /* points that stopped already */
static int mc__fp_nfired;

/* 1 the first time name gets here (it is recorded), 0 after. */
static int mc__fp_first(const char *name) {
    int first = 1;
    pthread_mutex_lock(&mc__fp_mu);
    for (int i = 0; i < mc__fp_nfired && first; i++)
        first = strcmp(mc__fp_fired[i], name) != 0;
    if (first && mc__fp_nfired < MC__FP_MAX_FIRED)
        mc__fp_fired[mc__fp_nfired++] = name;
    pthread_mutex_unlock(&mc__fp_mu);
    return first;
}

static void mc__fp_load(void) {
    const char *v = getenv("MC_FAILPOINTS");
    mc__fp_spec = v && *v ? v : NULL;
}

/* Is "name=stop" one of the comma-separated entries of spec? */
static int mc__fp_armed(const char *spec, const char *name) {
    size_t n = strlen(name);
    for (const char *p = spec; p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n + 5 && strncmp(p, name, n) == 0 && strncmp(p + n, "=stop", 5) == 0)
            return 1;
        p = end ? end + 1 : NULL;
    }
    return 0;
}

void mc__failpoint(const char *name) {
    pthread_once(&mc__fp_once, mc__fp_load);
    if (!mc__fp_spec || !mc__fp_armed(mc__fp_spec, name) || !mc__fp_first(name))
        return;
    MC_WARN("failpoint %s: stopping (SIGSTOP) until SIGCONT", name);
    raise(SIGSTOP);
}
