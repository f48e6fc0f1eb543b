/* mooncake_conductor: the KV-event indexer service (src/conductor.h). Flags, the reference's
 * config file (CONDUCTOR_CONFIG_PATH, default ~/.mooncake/conductor_config.json: its
 * http_server_port, and kvevent_instance: static subscriptions registered at start, each as a
 * /register body, its name the instance_id unless it has one), then serve until SIGTERM or
 * SIGINT. */
#include <cjson/cJSON.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conductor.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/config.h"
#include "mooncake/common/log.h"
#include "mooncake/common/msgpack.h"
#include "mooncake/common/version.h"
#include "mooncake/error.h"

#define PROG "mooncake_conductor"

/* The config file as JSON: *doc NULL when there is no file; -1 when it cannot be read or parsed. */
static int config_load(const char *path, cJSON **doc) {
    FILE *f = fopen(path, "rb");
    char *text;
    long n;
    *doc = NULL;
    if (!f)
        return 0;
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || n > (1 << 20) ||
        fseek(f, 0, SEEK_SET) != 0 || !(text = mc__malloc((size_t)n + 1))) {
        fclose(f);
        return -1;
    }
    if (fread(text, 1, (size_t)n, f) == (size_t)n) {
        text[n] = 0;
        *doc = cJSON_Parse(text);
    }
    mc__free(text);
    fclose(f);
    return *doc && cJSON_IsObject(*doc) ? 0 : -1;
}

/* The config file's port: -1 when it has none, -2 when it is no port. */
static int64_t config_port(const cJSON *doc) {
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(doc, "http_server_port");
    if (!p)
        return -1;
    if (cJSON_IsNumber(p) && p->valuedouble >= 0 && p->valuedouble <= 65535 &&
        p->valuedouble == (double)(int64_t)p->valuedouble)
        return (int64_t)p->valuedouble;
    return -2;
}

static void json_to_mp(mc_buf_t *b, const cJSON *v) {
    const cJSON *x;
    if (cJSON_IsString(v)) {
        mc__mp_cstr(b, v->valuestring);
    } else if (cJSON_IsNumber(v) && v->valuedouble == (double)(int64_t)v->valuedouble) {
        mc__mp_int(b, (int64_t)v->valuedouble);
    } else if (cJSON_IsNumber(v) || cJSON_IsBool(v)) {
        /* no field of a registration takes a fraction or a boolean: its text, refused there */
        char *text = cJSON_PrintUnformatted(v);
        mc__mp_cstr(b, text ? text : "?");
        cJSON_free(text);
    } else if (cJSON_IsArray(v)) {
        mc__mp_array(b, (uint32_t)cJSON_GetArraySize(v));
        cJSON_ArrayForEach(x, v) json_to_mp(b, x);
    } else if (cJSON_IsObject(v)) {
        mc__mp_map(b, (uint32_t)cJSON_GetArraySize(v));
        cJSON_ArrayForEach(x, v) {
            mc__mp_cstr(b, x->string);
            json_to_mp(b, x);
        }
    } else {
        mc__mp_nil(b);
    }
}

/* kvevent_instance: each entry registered as /register would; a bad one is logged and skipped,
 * as the reference does. Returns how many were registered. */
static int config_instances(mc_conductor_t *c, const cJSON *doc) {
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(doc, "kvevent_instance"), *it;
    int ok = 0;
    if (!cJSON_IsObject(all))
        return 0;
    cJSON_ArrayForEach(it, all) {
        mc_buf_t b;
        const char *why = "the entry is no object";
        int has_id = cJSON_HasObjectItem(it, "instance_id");
        mc__buf_init(&b);
        if (cJSON_IsObject(it)) {
            mc__mp_map(&b, (uint32_t)cJSON_GetArraySize(it) + (has_id ? 0u : 1u));
            if (!has_id) {
                mc__mp_cstr(&b, "instance_id");
                mc__mp_cstr(&b, it->string);
            }
            const cJSON *x;
            cJSON_ArrayForEach(x, it) {
                mc__mp_cstr(&b, x->string);
                json_to_mp(&b, x);
            }
        }
        if (cJSON_IsObject(it) && !b.failed && mc__conductor_register(c, b.data, b.len, &why) == 0)
            ok++;
        else
            MC_ERROR(PROG ": kvevent_instance %s: %s", it->string,
                     b.failed ? "out of memory" : why);
        mc__buf_free(&b);
    }
    return ok;
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
    cJSON *doc = NULL;
    if (config_load(config, &doc) != 0) {
        fprintf(stderr, PROG ": %s: not a JSON object\n", config);
        cJSON_Delete(doc);
        return 2;
    }
    if (cfg.port < 0) {
        int64_t p = doc ? config_port(doc) : -1;
        if (p == -2) {
            cJSON_Delete(doc);
            fprintf(stderr, PROG ": %s: http_server_port must be a port number\n", config);
            return 2;
        }
        cfg.port = p >= 0 ? p : 13333;
    }
    if (cfg.port > 65535 || cfg.max_blocks < 1) {
        cJSON_Delete(doc);
        fprintf(stderr, PROG ": --port must be in 0..65535 and --max_blocks positive\n");
        return 2;
    }
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    rc = mc__conductor_start(&cfg, &c);
    if (rc)
        cJSON_Delete(doc);
    if (rc) {
        fprintf(stderr, PROG ": cannot serve on %s:%lld: %s\n", cfg.host, (long long)cfg.port,
                mc_strerror(rc));
        return 1;
    }
    if (doc) {
        int n = config_instances(c, doc);
        if (n)
            MC_INFO(PROG ": %d static subscription(s) from %s", n, config);
        cJSON_Delete(doc);
    }
    printf(PROG " HTTP server listening port=%u\n", (unsigned)mc__conductor_port(c));
    fflush(stdout);
    sigwait(&sigs, &sig);
    mc__conductor_stop(c);
    return 0;
}
