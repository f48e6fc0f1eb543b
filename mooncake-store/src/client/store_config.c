/* Client configuration: one setter that every source (JSON file, environment, Python dict or
 * keywords) goes through, so each source spells keys and sizes the same way. */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/config.h"
#include "mooncake/common/log.h"
#include "mooncake/store.h"

void mc_store_config_init(mc_store_config_t *c) {
    if (!c)
        return;
    memset(c, 0, sizeof(*c));
    snprintf(c->metadata_server, sizeof(c->metadata_server), "P2PHANDSHAKE");
    snprintf(c->protocol, sizeof(c->protocol), "tcp");
    snprintf(c->master_server_addr, sizeof(c->master_server_addr), "%s", MC_STORE_DEFAULT_MASTER);
    c->global_segment_size = MC_STORE_DEFAULT_SEGMENT_SIZE;
    c->local_buffer_size = MC_STORE_DEFAULT_BUFFER_SIZE;
    c->replica_cache_entries = MC_STORE_DEFAULT_REPLICA_CACHE_ENTRIES;
}

static int mc__set_str(char *dst, size_t cap, const char *key, const char *value) {
    size_t n = strlen(value);
    if (n >= cap) {
        MC_ERROR("store config: value of %s is too long (%zu bytes, at most %zu)", key, n, cap - 1);
        return MC_ERR_INVALID_PARAMS;
    }
    memcpy(dst, value, n + 1);
    return 0;
}

static int mc__set_size(uint64_t *dst, const char *key, const char *value) {
    uint64_t v = 0;
    if (mc__parse_size(value, &v) != 0) {
        MC_ERROR("store config: %s=\"%s\" is not a size (e.g. 1073741824, \"4gb\")", key, value);
        return MC_ERR_INVALID_PARAMS;
    }
    *dst = v;
    return 0;
}

/* Every key this client knows, as one table: settings (a string or a size into a field; some
 * with the reference's alias), and keys of the reference that select features this client does
 * not have, accepted so configs written for the reference keep working as long as they do not
 * turn the feature on. */
enum { MC__KEY_STR, MC__KEY_SIZE, MC__KEY_BOOL, MC__KEY_IGNORED, MC__KEY_MUST_BE_OFF };
typedef struct mc__config_key {
    const char *name;
    int kind;
    size_t off, cap; /* the field (MC__KEY_STR, MC__KEY_SIZE) */
} mc__config_key_t;

#define MC__STR(name, field)                                                                       \
    {                                                                                              \
        name, MC__KEY_STR, offsetof(mc_store_config_t, field),                                     \
            sizeof(((mc_store_config_t *)0)->field)                                                \
    }
#define MC__SIZE(name, field)                                                                      \
    { name, MC__KEY_SIZE, offsetof(mc_store_config_t, field), 0 }
#define MC__BOOL(name, field)                                                                      \
    { name, MC__KEY_BOOL, offsetof(mc_store_config_t, field), 0 }
static const mc__config_key_t mc__config_keys[] = {
    MC__STR("local_hostname", local_hostname),
    MC__STR("metadata_server", metadata_server),
    MC__STR("protocol", protocol),
    MC__STR("device_name", device_name),
    MC__STR("rdma_devices", device_name),
    MC__STR("master_server_address", master_server_addr),
    MC__STR("master_server_addr", master_server_addr),
    MC__STR("cluster_secret", cluster_secret),
    MC__STR("cluster_secret_file", cluster_secret_file),
    MC__SIZE("global_segment_size", global_segment_size),
    MC__SIZE("local_buffer_size", local_buffer_size),
    {"tenant_id", MC__KEY_IGNORED, 0, 0},
    MC__STR("ssd_offload_path", ssd_offload_path),
    MC__SIZE("ssd_offload_capacity", ssd_offload_capacity),
    MC__SIZE("replica_cache_entries", replica_cache_entries),
    MC__BOOL("enable_ssd_offload", enable_ssd_offload),
    {"client_http_port", MC__KEY_IGNORED, 0, 0},
    {"enable_client_http_server", MC__KEY_MUST_BE_OFF, 0, 0},
};
#undef MC__STR
#undef MC__SIZE
#undef MC__BOOL

static const mc__config_key_t *mc__find_key(const char *key) {
    for (size_t i = 0; i < sizeof(mc__config_keys) / sizeof(mc__config_keys[0]); i++)
        if (strcmp(key, mc__config_keys[i].name) == 0)
            return &mc__config_keys[i];
    return NULL;
}

/* mc_store_config_set, telling an unknown key (1: nothing set, nothing logged) from a known key
 * with a bad value (MC_ERR_INVALID_PARAMS, logged). */
static int mc__config_set(mc_store_config_t *c, const char *key, const char *value) {
    const mc__config_key_t *k = mc__find_key(key);
    int on = 0;
    if (!k)
        return 1;
    switch (k->kind) {
    case MC__KEY_STR:
        return mc__set_str((char *)c + k->off, k->cap, key, value);
    case MC__KEY_SIZE:
        return mc__set_size((uint64_t *)(void *)((char *)c + k->off), key, value);
    case MC__KEY_BOOL:
        if (mc__parse_bool(value, &on) != 0) {
            MC_ERROR("store config: %s=\"%s\" is not a boolean", key, value);
            return MC_ERR_INVALID_PARAMS;
        }
        *(int *)(void *)((char *)c + k->off) = on;
        return 0;
    case MC__KEY_MUST_BE_OFF:
        if (mc__parse_bool(value, &on) != 0) {
            MC_ERROR("store config: %s=\"%s\" is not a boolean", key, value);
            return MC_ERR_INVALID_PARAMS;
        }
        if (on) {
            MC_ERROR("store config: %s is not supported by this client", key);
            return MC_ERR_INVALID_PARAMS;
        }
        return 0;
    default:
        return 0;
    }
}

int mc_store_config_set(mc_store_config_t *c, const char *key, const char *value) {
    int rc;
    if (!c || !key || !value)
        return MC_ERR_INVALID_PARAMS;
    rc = mc__config_set(c, key, value);
    if (rc <= 0)
        return rc;
    MC_ERROR("store config: unknown key \"%s\"", key);
    return MC_ERR_INVALID_PARAMS;
}

/* Files shared with other programs (vLLM's, LMCache's) carry keys of theirs: each unknown key
 * is said once per process, at info, and otherwise ignored. */
static void mc__note_unknown_key(const char *key, const char *path) {
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static char seen[32][64];
    static size_t nseen;
    int found = 0;
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < nseen && !found; i++)
        found = strncmp(seen[i], key, sizeof(seen[i]) - 1) == 0;
    if (!found && nseen < sizeof(seen) / sizeof(seen[0]))
        snprintf(seen[nseen++], sizeof(seen[0]), "%s", key);
    pthread_mutex_unlock(&mu);
    if (!found)
        MC_INFO("store config: ignoring key \"%s\" in %s (not a store setting)", key, path);
}

static int mc__skipped(const char *key, const char *const *skip, size_t nskip) {
    for (size_t i = 0; i < nskip; i++)
        if (skip[i] && strcmp(skip[i], key) == 0)
            return 1;
    return 0;
}

static int mc__read_file(const char *path, char **out) {
    FILE *f = NULL;
    char *data = NULL;
    long n;
    int rc = MC_ERR_FILE_NOT_FOUND;

    f = fopen(path, "rb");
    if (!f) {
        MC_ERROR("store config: cannot open %s", path);
        goto out;
    }
    rc = MC_ERR_INVALID_PARAMS;
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || n > (1 << 20) ||
        fseek(f, 0, SEEK_SET) != 0) {
        MC_ERROR("store config: %s is unreadable or larger than 1 MiB", path);
        goto out;
    }
    data = mc__malloc((size_t)n + 1);
    if (!data) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    if (fread(data, 1, (size_t)n, f) != (size_t)n) {
        MC_ERROR("store config: short read from %s", path);
        goto out;
    }
    data[n] = '\0';
    *out = data;
    data = NULL;
    rc = 0;
out:
    mc__free(data);
    if (f)
        fclose(f);
    return rc;
}

int mc_store_config_load_file(mc_store_config_t *c, const char *path) {
    return mc_store_config_load_file_ex(c, path, NULL, 0);
}

int mc_store_config_load_file_ex(mc_store_config_t *c, const char *path, const char *const *skip,
                                 size_t nskip) {
    char *text = NULL;
    cJSON *root = NULL;
    const cJSON *item;
    char num[64];
    int rc;

    if (!c || !path)
        return MC_ERR_INVALID_PARAMS;
    rc = mc__read_file(path, &text);
    if (rc != 0)
        goto out;
    rc = MC_ERR_INVALID_PARAMS;
    root = cJSON_Parse(text);
    if (!root || !cJSON_IsObject(root)) {
        MC_ERROR("store config: %s is not a JSON object", path);
        goto out;
    }
    cJSON_ArrayForEach(item, root) {
        const char *value = NULL;
        if (mc__skipped(item->string, skip, nskip))
            continue; /* given explicitly: that value wins, whatever the file says */
        if (cJSON_IsString(item)) {
            value = item->valuestring;
        } else if (cJSON_IsNumber(item)) {
            /* Sizes past 2^53 lose precision in JSON numbers; strings like "4gb" do not. */
            if (item->valuedouble < 0 || item->valuedouble > 9.0e15) {
                MC_ERROR("store config: %s in %s is out of range", item->string, path);
                goto out;
            }
            snprintf(num, sizeof(num), "%.0f", item->valuedouble);
            value = num;
        } else if (cJSON_IsBool(item)) {
            value = cJSON_IsTrue(item) ? "true" : "false";
        } else {
            value = NULL; /* an object, array or null: only another program's key can be one */
        }
        if (!value && mc__find_key(item->string)) {
            MC_ERROR("store config: %s in %s must be a string or a number", item->string, path);
            rc = MC_ERR_INVALID_PARAMS;
            goto out;
        }
        rc = value ? mc__config_set(c, item->string, value) : 1;
        if (rc == 1) {
            mc__note_unknown_key(item->string, path);
            rc = 0;
        }
        if (rc != 0)
            goto out;
    }
    rc = 0;
out:
    cJSON_Delete(root);
    mc__free(text);
    return rc;
}

int mc_store_config_load_env(mc_store_config_t *c) {
    return mc_store_config_load_env_ex(c, NULL, 0);
}

int mc_store_config_load_env_ex(mc_store_config_t *c, const char *const *skip, size_t nskip) {
    static const char *const env_keys[][2] = {
        {"MOONCAKE_MASTER", "master_server_address"},
        {"MOONCAKE_LOCAL_HOSTNAME", "local_hostname"},
        {"MOONCAKE_TE_META_DATA_SERVER", "metadata_server"},
        {"MOONCAKE_PROTOCOL", "protocol"},
        {"MOONCAKE_DEVICE", "device_name"},
        {"MOONCAKE_GLOBAL_SEGMENT_SIZE", "global_segment_size"},
        {"MOONCAKE_LOCAL_BUFFER_SIZE", "local_buffer_size"},
        {"MOONCAKE_OFFLOAD_ENABLED", "enable_ssd_offload"},
        {"MOONCAKE_OFFLOAD_FILE_STORAGE_PATH", "ssd_offload_path"},
        {"MOONCAKE_OFFLOAD_BUCKET_MAX_TOTAL_SIZE", "ssd_offload_capacity"},
        {"MOONCAKE_REPLICA_CACHE_ENTRIES", "replica_cache_entries"},
    };
    const char *path;
    int rc = 0;

    if (!c)
        return MC_ERR_INVALID_PARAMS;
    path = getenv("MOONCAKE_CONFIG_PATH");
    if (path && *path) {
        rc = mc_store_config_load_file_ex(c, path, skip, nskip);
        if (rc != 0)
            return rc;
    }
    for (size_t i = 0; i < sizeof(env_keys) / sizeof(env_keys[0]); i++) {
        const char *v = getenv(env_keys[i][0]);
        if (!v || !*v || mc__skipped(env_keys[i][1], skip, nskip))
            continue;
        rc = mc_store_config_set(c, env_keys[i][1], v);
        if (rc != 0) {
            MC_ERROR("store config: bad environment variable %s", env_keys[i][0]);
            return rc;
        }
    }
    return 0;
}

void mc_replicate_config_init(mc_replicate_config_t *rc) {
    if (!rc)
        return;
    memset(rc, 0, sizeof(*rc));
    rc->replica_num = 1;
    rc->soft_pin_ttl_ms = -1;
}
