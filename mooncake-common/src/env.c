/* Environment variables with the same strict parsing as flags and config files. */
#include <stdlib.h>

#include "mooncake/common/config.h"
#include "mooncake/common/log.h"
#include "mooncake/error.h"

const char *mc__env_str(const char *name, const char *def) {
    const char *v = name ? getenv(name) : NULL;
    return v && *v ? v : def;
}

/* The typed look-ups differ only in their parser and in what the warning says a value must be. */
#define MC__ENV_PARSED(fn, type, parse, what)                                                      \
    int fn(const char *name, type def, type *out) {                                                \
        const char *v = mc__env_str(name, NULL);                                                   \
        *out = def;                                                                                \
        if (!v || parse(v, out) == 0)                                                              \
            return 0;                                                                              \
        *out = def;                                                                                \
        MC_WARN("environment variable %s='%s' is not " what, name, v);                             \
        return MC_ERR_INVALID_ARGUMENT;                                                            \
    }
MC__ENV_PARSED(mc__env_size, uint64_t, mc__parse_size, "a size (like 4gb or 512MB)")
MC__ENV_PARSED(mc__env_i64, int64_t, mc__parse_i64, "an integer")
MC__ENV_PARSED(mc__env_bool, int, mc__parse_bool, "a boolean (true/false)")
#undef MC__ENV_PARSED

int64_t mc__env_size_in(const char *name, int64_t def, int64_t lo, int64_t hi) {
    const char *v = mc__env_str(name, NULL);
    uint64_t n = 0;
    if (!v)
        return def;
    if (mc__parse_size(v, &n) != 0 || n > (uint64_t)INT64_MAX || (int64_t)n < lo ||
        (int64_t)n > hi) {
        MC_WARN("ignoring %s=%s (expected a size in %lld..%lld)", name, v, (long long)lo,
                (long long)hi);
        return def;
    }
    return (int64_t)n;
}

int64_t mc__env_i64_in(const char *name, int64_t def, int64_t lo, int64_t hi) {
    const char *v = mc__env_str(name, NULL);
    int64_t n = 0;
    if (!v)
        return def;
    if (mc__parse_i64(v, &n) != 0 || n < lo || n > hi) {
        MC_WARN("ignoring %s=%s (expected %lld..%lld)", name, v, (long long)lo, (long long)hi);
        return def;
    }
    return n;
}
