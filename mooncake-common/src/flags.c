/* gflags-style command lines, so our binaries accept what the reference's accept:
 * --name=value, -name=value, --name value, bare --bool, --nobool, --help, --version. */
#include <stdio.h>
#include <string.h>

#include "mooncake/common/config.h"
#include "mooncake/error.h"

static const char *const mc__flag_type_names[] = {
    "bool", "int64", "double", "string", "size", "duration (10s, 500ms, 1m, 1h)"};

static void mc__flag_print_value(const mc_flag_t *f) {
    switch (f->type) {
    case MC_FLAG_BOOL:
        printf("%s", *(int *)f->value ? "true" : "false");
        break;
    case MC_FLAG_INT:
        printf("%lld", (long long)*(int64_t *)f->value);
        break;
    case MC_FLAG_DOUBLE:
        printf("%g", *(double *)f->value);
        break;
    case MC_FLAG_STRING:
        printf("\"%s\"", *(const char **)f->value ? *(const char **)f->value : "");
        break;
    case MC_FLAG_SIZE:
        printf("%llu", (unsigned long long)*(uint64_t *)f->value);
        break;
    case MC_FLAG_DURATION_MS:
        printf("%llums", (unsigned long long)*(uint64_t *)f->value);
        break;
    }
}

static void mc__flags_usage(const mc_flag_t *flags, size_t n, const char *prog,
                            const char *usage_line) {
    printf("%s: %s\n\nFlags:\n", prog, usage_line ? usage_line : "");
    for (size_t i = 0; i < n; i++) {
        printf("  --%s (%s) type: %s default: ", flags[i].name, flags[i].help ? flags[i].help : "",
               mc__flag_type_names[flags[i].type]);
        mc__flag_print_value(&flags[i]);
        printf("\n");
    }
    printf("  --help (show this help)\n  --version (show the version)\n");
    fflush(stdout);
}

int mc__flag_set(const mc_flag_t *f, const char *v) {
    switch (f->type) {
    case MC_FLAG_BOOL:
        return mc__parse_bool(v, (int *)f->value);
    case MC_FLAG_INT:
        return mc__parse_i64(v, (int64_t *)f->value);
    case MC_FLAG_DOUBLE:
        return mc__parse_double(v, (double *)f->value);
    case MC_FLAG_STRING:
        *(const char **)f->value = v;
        return 0;
    case MC_FLAG_SIZE:
        return mc__parse_size(v, (uint64_t *)f->value);
    case MC_FLAG_DURATION_MS:
        return mc__parse_duration_ms(v, (uint64_t *)f->value);
    }
    return MC_ERR_INVALID_ARGUMENT;
}

static const mc_flag_t *mc__flag_find(const mc_flag_t *flags, size_t n, const char *name,
                                      size_t len) {
    for (size_t i = 0; i < n; i++) {
        if (strlen(flags[i].name) == len && strncmp(flags[i].name, name, len) == 0)
            return &flags[i];
    }
    return NULL;
}

int mc__flags_parse(int argc, char **argv, const mc_flag_t *flags, size_t n, const char *prog,
                    const char *version, const char *usage_line) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *name = NULL;
        const char *eq = NULL;
        const char *val = NULL;
        const mc_flag_t *f = NULL;
        size_t len = 0;
        if (a[0] != '-' || a[1] == '\0') {
            fprintf(stderr, "%s: unexpected argument '%s' (flags look like --name=value)\n", prog,
                    a);
            return MC_ERR_INVALID_ARGUMENT;
        }
        name = a + (a[1] == '-' ? 2 : 1);
        eq = strchr(name, '=');
        len = eq ? (size_t)(eq - name) : strlen(name);
        if (len == 0) {
            fprintf(stderr, "%s: malformed flag '%s'\n", prog, a);
            return MC_ERR_INVALID_ARGUMENT;
        }
        f = mc__flag_find(flags, n, name, len);
        if (!f && !eq && (strcmp(name, "help") == 0 || strcmp(name, "h") == 0)) {
            mc__flags_usage(flags, n, prog, usage_line);
            return 1;
        }
        if (!f && !eq && strcmp(name, "version") == 0) {
            printf("%s %s\n", prog, version ? version : "");
            fflush(stdout);
            return 2;
        }
        if (!f && !eq && len > 2 && strncmp(name, "no", 2) == 0) {
            f = mc__flag_find(flags, n, name + 2, len - 2);
            if (f && f->type == MC_FLAG_BOOL) {
                *(int *)f->value = 0;
                continue;
            }
            f = NULL;
        }
        if (!f) {
            fprintf(stderr, "%s: unknown flag '%.*s' (see --help)\n", prog, (int)len, name);
            return MC_ERR_INVALID_ARGUMENT;
        }
        if (eq) {
            val = eq + 1;
        } else if (f->type == MC_FLAG_BOOL) {
            val = "true";
        } else if (i + 1 < argc) {
            val = argv[++i];
        } else {
            fprintf(stderr, "%s: flag '--%s' needs a value\n", prog, f->name);
            return MC_ERR_INVALID_ARGUMENT;
        }
        if (mc__flag_set(f, val) != 0) {
            fprintf(stderr, "%s: invalid value '%s' for flag '--%s' (expected %s)\n", prog, val,
                    f->name, mc__flag_type_names[f->type]);
            return MC_ERR_INVALID_ARGUMENT;
        }
    }
    return 0;
}
