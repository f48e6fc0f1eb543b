/* mooncake_conductor: the KV-event indexer service (src/conductor.h). Flags, the reference's
 * config file (CONDUCTOR_CONFIG_PATH, default ~/.mooncake/conductor_config.json: its
 * http_server_port), then serve until SIGTERM or SIGINT. */
#include <cjson/cJSON.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conductor.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/config.h"
#include "mooncake/common/version.h"
#include "mooncake/error.h"

#define PROG "mooncake_conductor"

/* The config file's port, when the file exists; -1 when it is absent, -2 when it is bad. */
static int64_t config_port(const char *path) {
    FILE *f = fopen(path, "rb");
    char *text;
    long n;
    int64_t port = -2;
    if (!f)
        return -1;
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || n > (1 << 20) ||
        fseek(f, 0, SEEK_SET) != 0 || !(text = mc__malloc((size_t)n + 1))) {
        fclose(f);
        return -2;
    }
    if (fread(text, 1, (size_t)n, f) == (size_t)n) {
        text[n] = 0;
        cJSON *doc = cJSON_Parse(text);
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(doc, "http_server_port");
        if (cJSON_IsNumber(p) && p->valuedouble >= 0 && p->valuedouble <= 65535 &&
            p->valuedouble == (double)(int64_t)p->valuedouble)
            port = (int64_t)p->valuedouble;
        else if (doc && !p)
            port = -1;
        cJSON_Delete(doc);
    }
    mc__free(text);
    fclose(f);
    return port;
}

int main(int argc, char **argv) {
    mc_conductor_config_t cfg = {"0.0.0.0", -1, 10000000};
    const char *config = NULL;
    char def_path[1024];
    mc_flag_t flags[] = {
        {"host", MC_FLAG_STRING, &cfg.host, "HTTP bind address"},
        {"port", MC_FLAG_INT, &cfg.port,
         "HTTP port (default: the config file's http_server_port, else 13333; 0 = ephemeral)"},
        {"max_blocks", MC_FLAG_INT, &cfg.max_blocks,
         "blocks the prefix table holds at most; the coldest are forgotten past it"},
        {"config_path", MC_FLAG_STRING, &config,
         "JSON config (default: CONDUCTOR_CONFIG_PATH, else ~/.mooncake/conductor_config.json)"},
    };
    sigset_t sigs;
    int sig = 0;
    mc_conductor_t *c = NULL;
    int rc = mc__flags_parse(argc, argv, flags, sizeof(flags) / sizeof(flags[0]), PROG,
                             MC_VERSION_STRING, "KV-event indexer: prefix cache view over engines");
    if (rc)
        return rc > 0 ? 0 : 2;
    if (!config)
        config = getenv("CONDUCTOR_CONFIG_PATH");
    if (!config || !*config) {
        snprintf(def_path, sizeof(def_path), "%s/.mooncake/conductor_config.json",
                 getenv("HOME") ? getenv("HOME") : "");
        config = def_path;
    }
    if (cfg.port < 0) {
        int64_t p = config_port(config);
        if (p == -2) {
            fprintf(stderr, PROG ": %s: http_server_port must be a port number\n", config);
            return 2;
        }
        cfg.port = p >= 0 ? p : 13333;
    }
    if (cfg.port > 65535 || cfg.max_blocks < 1) {
        fprintf(stderr, PROG ": --port must be in 0..65535 and --max_blocks positive\n");
        return 2;
    }
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    rc = mc__conductor_start(&cfg, &c);
    if (rc) {
        fprintf(stderr, PROG ": cannot serve on %s:%lld: %s\n", cfg.host, (long long)cfg.port,
                mc_strerror(rc));
        return 1;
    }
    printf(PROG " HTTP server listening port=%u\n", (unsigned)mc__conductor_port(c));
    fflush(stdout);
    sigwait(&sigs, &sig);
    mc__conductor_stop(c);
    return 0;
}
