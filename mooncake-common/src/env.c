/* Environment variables with the same strict parsing as flags and config files. */
#include <stdlib.h>

#include "mooncake/common/config.h"
#include "mooncake/common/log.h"
#include "mooncake/error.h"

const char *mc__env_str(const char *name, const char *def) {
    const char *v = name ? getenv(name) : NULL;
    return v && *v ? v : def;
}

int mc__env_size(const char *name, uint64_t def, uint64_t *out) {
    const char *v = mc__env_str(name, NULL);
    *out = def;
    if (!v)
        return 0;
    if (mc__parse_size(v, out) == 0)
        return 0;
    *out = def;
    MC_WARN("environment variable %s='%s' is not a size (like 4gb or 512MB)", name, v);
    return MC_ERR_INVALID_ARGUMENT;
}

int mc__env_i64(const char *name, int64_t def, int64_t *out) {
    const char *v = mc__env_str(name, NULL);
    *out = def;
    if (!v)
        return 0;
    if (mc__parse_i64(v, out) == 0)
        return 0;
    *out = def;
    MC_WARN("environment variable %s='%s' is not an integer", name, v);
    return MC_ERR_INVALID_ARGUMENT;
}

int mc__env_bool(const char *name, int def, int *out) {
    const char *v = mc__env_str(name, NULL);
    *out = def;
    if (!v)
        return 0;
    if (mc__parse_bool(v, out) == 0)
        return 0;
    *out = def;
    MC_WARN("environment variable %s='%s' is not a boolean (true/false)", name, v);
    return MC_ERR_INVALID_ARGUMENT;
}
