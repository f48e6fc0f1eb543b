/* mooncake_http_metadata_server: the reference's standalone HTTP metadata service
 * (GET/PUT/DELETE /metadata?key=K), for clusters that use `http://host:port/metadata` as the
 * Transfer Engine's metadata connection string. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http_kv_store.h"
#include "mooncake/common/auth.h"
#include "mooncake/common/config.h"
#include "mooncake/common/version.h"

#define PROG "mooncake_http_metadata_server"

/* --log-level as the Python module (and the reference's) takes it, to MC_LOG_LEVEL's words:
 * set before the first log line, which is when the logger reads it. NULL when unknown. */
static const char *log_level_env(const char *level) {
    static const char *const map[][2] = {
        {"DEBUG", "debug"}, {"INFO", "info"},      {"WARNING", "warn"}, {"WARN", "warn"},
        {"ERROR", "error"}, {"CRITICAL", "error"}, {"TRACE", "trace"}};
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (strcasecmp(level, map[i][0]) == 0)
            return map[i][1];
    return NULL;
}

int main(int argc, char **argv) {
    const char *host = "0.0.0.0";
    const char *secret_file = NULL;
    const char *log_level = NULL;
    int64_t port = 8080;
    const mc_flag_t flags[] = {
        {"host", MC_FLAG_STRING, &host, "address to listen on"},
        {"port", MC_FLAG_INT, &port, "port to listen on (0 picks a free one)"},
        {"cluster_secret_file", MC_FLAG_STRING, &secret_file,
         "file holding the cluster secret every request must prove (default: MC_CLUSTER_SECRET "
         "or MC_CLUSTER_SECRET_FILE from the environment; none: no authentication)"},
        {"log-level", MC_FLAG_STRING, &log_level,
         "DEBUG, INFO, WARNING, ERROR or CRITICAL (default: MC_LOG_LEVEL, else warnings)"},
        {"log_level", MC_FLAG_STRING, &log_level, "the same as --log-level"},
    };
    mc_auth_t auth;
    mc_http_kv_store_t *store = NULL;
    sigset_t sigs;
    int sig = 0;
    int rc = mc__flags_parse(argc, argv, flags, sizeof(flags) / sizeof(flags[0]), PROG,
                             MC_VERSION_STRING, "serves Transfer Engine metadata over HTTP");
    if (rc == 1 || rc == 2)
        return 0;
    if (rc < 0)
        return 2;
    if (log_level) {
        const char *env = log_level_env(log_level);
        if (!env) {
            fprintf(stderr,
                    "%s: invalid value '%s' for flag '--log-level' (expected DEBUG, INFO, "
                    "WARNING, ERROR or CRITICAL)\n",
                    PROG, log_level);
            return 2;
        }
        setenv("MC_LOG_LEVEL", env, 1);
    }
    if (port < 0 || port > 65535) {
        fprintf(stderr, "%s: invalid value '%lld' for flag '--port' (expected 0..65535)\n", PROG,
                (long long)port);
        return 2;
    }
    /* Block the stop signals before any server thread exists so all threads inherit the mask
     * and only sigwait below ever sees them. */
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (mc__auth_init(&auth, NULL, secret_file) != 0) {
        fprintf(stderr, "%s: the cluster secret cannot be used\n", PROG);
        return 2;
    }
    rc = mc__http_kv_store_start_auth(host, (uint16_t)port, &auth, &store);
    if (rc) {
        fprintf(stderr, "%s: cannot listen on %s:%lld: %s\n", PROG, host, (long long)port,
                errno ? strerror(errno) : "address could not be resolved");
        return 1;
    }
    printf("listening on %s:%u\n", host, (unsigned)mc__http_kv_store_port(store));
    fflush(stdout);
    while (sigwait(&sigs, &sig) != 0)
        ;
    mc__http_kv_store_stop(store);
    fprintf(stderr, "%s: stopped by signal %d\n", PROG, sig);
    return 0;
}
