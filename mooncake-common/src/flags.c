/* gflags-style command lines, so our binaries accept what the reference's accept:
 * --name=value, -name=value, --name value, bare --bool, --nobool, --help, --helpshort,
 * --version, and gflags' built-ins --flagfile=FILE (one flag a line, # comments, nested files),
 * --fromenv=a,b / --tryfromenv=a,b (values from FLAGS_a, FLAGS_b) and --undefok=a,b (those
 * names are ignored when this program does not know them). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mooncake/common/alloc.h"
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
    printf("  --help, --helpshort (show this help)\n  --version (show the version)\n"
           "  --flagfile=FILE, --fromenv=a,b, --tryfromenv=a,b, --undefok=a,b (as gflags)\n");
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

/* Nested --flagfile is allowed; this bounds a file that names itself. */
#define MC__FLAGFILE_DEPTH 8

typedef struct {
    const mc_flag_t *flags;
    size_t n;
    const char *prog, *version, *usage_line;
    const char *undefok; /* comma-separated names, or NULL */
} mc__flag_ctx_t;

static int mc__flags_args(mc__flag_ctx_t *c, int argc, char **argv, int depth);

/* Whether name[0..len) is an item of the comma-separated list. */
static int mc__in_list(const char *list, const char *name, size_t len) {
    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, ',');
        size_t l = end ? (size_t)(end - p) : strlen(p);
        if (l == len && strncmp(p, name, len) == 0)
            return 1;
        p = end ? end + 1 : NULL;
    }
    return 0;
}

/* The flags of a --flagfile, each line one argument. The lines stay allocated for the process's
 * life: string flags keep pointers into them, as they do into argv. */
static int mc__flagfile(mc__flag_ctx_t *c, const char *path, int depth) {
    FILE *fp;
    char line[4096];
    int rc = 0, lineno = 0;
    if (depth >= MC__FLAGFILE_DEPTH) {
        fprintf(stderr, "%s: --flagfile nested deeper than %d (a loop?) at '%s'\n", c->prog,
                MC__FLAGFILE_DEPTH, path);
        return MC_ERR_INVALID_ARGUMENT;
    }
    fp = fopen(path, "r");
    if (!fp) {
        fprintf(stderr, "%s: cannot read --flagfile '%s'\n", c->prog, path);
        return MC_ERR_INVALID_ARGUMENT;
    }
    while (rc == 0 && fgets(line, sizeof(line), fp)) {
        char *a = line, *end;
        lineno++;
        if (!strchr(line, '\n') && !feof(fp)) {
            fprintf(stderr, "%s: %s:%d: line longer than %zu bytes\n", c->prog, path, lineno,
                    sizeof(line) - 1);
            rc = MC_ERR_INVALID_ARGUMENT;
            break;
        }
        while (*a == ' ' || *a == '\t')
            a++;
        end = a + strlen(a);
        while (end > a && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' ' || end[-1] == '\t'))
            *--end = '\0';
        if (*a == '\0' || *a == '#')
            continue;
        if (*a != '-') {
            fprintf(stderr, "%s: %s:%d: not a flag: '%s'\n", c->prog, path, lineno, a);
            rc = MC_ERR_INVALID_ARGUMENT;
            break;
        }
        char *kept = mc__strdup(a);
        if (!kept) {
            rc = MC_ERR_INVALID_ARGUMENT;
            break;
        }
        char *one[2] = {NULL, kept};
        rc = mc__flags_args(c, 2, one, depth + 1);
    }
    fclose(fp);
    return rc;
}

/* --fromenv / --tryfromenv: each listed flag from the variable FLAGS_<name>. */
static int mc__fromenv(mc__flag_ctx_t *c, const char *list, int must) {
    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, ',');
        size_t l = end ? (size_t)(end - p) : strlen(p);
        char var[256];
        const mc_flag_t *f = mc__flag_find(c->flags, c->n, p, l);
        if (!f) {
            fprintf(stderr, "%s: --%sfromenv names unknown flag '%.*s'\n", c->prog,
                    must ? "" : "try", (int)l, p);
            return MC_ERR_INVALID_ARGUMENT;
        }
        snprintf(var, sizeof(var), "FLAGS_%s", f->name);
        const char *v = getenv(var);
        if (!v && must) {
            fprintf(stderr, "%s: --fromenv: %s is not set\n", c->prog, var);
            return MC_ERR_INVALID_ARGUMENT;
        }
        if (v && mc__flag_set(f, v) != 0) {
            fprintf(stderr, "%s: invalid value '%s' in %s (expected %s)\n", c->prog, v, var,
                    mc__flag_type_names[f->type]);
            return MC_ERR_INVALID_ARGUMENT;
        }
        p = end ? end + 1 : NULL;
    }
    return 0;
}

/* The built-ins that take a list or a file; 1 when name was not one of them. */
static int mc__flag_builtin(mc__flag_ctx_t *c, const char *name, size_t len, const char *val,
                            int depth) {
    if (len == 8 && !strncmp(name, "flagfile", len))
        return mc__flagfile(c, val, depth);
    if (len == 7 && !strncmp(name, "fromenv", len))
        return mc__fromenv(c, val, 1);
    if (len == 10 && !strncmp(name, "tryfromenv", len))
        return mc__fromenv(c, val, 0);
    if (len == 7 && !strncmp(name, "undefok", len))
        return 0; /* read before the others (mc__flags_parse) */
    return 1;
}

static int mc__flags_args(mc__flag_ctx_t *c, int argc, char **argv, int depth) {
    const mc_flag_t *flags = c->flags;
    size_t n = c->n;
    const char *prog = c->prog;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *name = NULL;
        const char *eq = NULL;
        const char *val = NULL;
        const mc_flag_t *f = NULL;
        size_t len = 0;
        int rc;
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
        if (!f && !eq &&
            (!strcmp(name, "help") || !strcmp(name, "h") || !strcmp(name, "helpshort") ||
             !strcmp(name, "helpfull"))) {
            mc__flags_usage(flags, n, prog, c->usage_line);
            return 1;
        }
        if (!f && !eq && strcmp(name, "version") == 0) {
            printf("%s %s\n", prog, c->version ? c->version : "");
            fflush(stdout);
            return 2;
        }
        if (!f && !eq && len > 2 && strncmp(name, "no", 2) == 0) {
            f = mc__flag_find(flags, n, name + 2, len - 2);
            if (f && f->type == MC_FLAG_BOOL) {
                *(int *)f->value = 0;
                continue;
            }
            if (!f && mc__in_list(c->undefok, name + 2, len - 2))
                continue;
            f = NULL;
        }
        if (!f) {
            const char *bval = eq ? eq + 1 : (i + 1 < argc ? argv[i + 1] : NULL);
            rc = bval ? mc__flag_builtin(c, name, len, bval, depth) : 1;
            if (rc != 1) {
                if (rc)
                    return rc;
                if (!eq)
                    i++;
                continue;
            }
            /* gflags: an unknown flag in --undefok is skipped with its =value (a separate value
             * word cannot be told from a positional argument, so it is not taken) */
            if (mc__in_list(c->undefok, name, len))
                continue;
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

int mc__flags_parse(int argc, char **argv, const mc_flag_t *flags, size_t n, const char *prog,
                    const char *version, const char *usage_line) {
    mc__flag_ctx_t c = {flags, n, prog, version, usage_line, NULL};
    /* --undefok applies to flags before it too, so it is read first */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strncmp(a, "--undefok=", 10) || !strncmp(a, "-undefok=", 9))
            c.undefok = strchr(a, '=') + 1;
        else if ((!strcmp(a, "--undefok") || !strcmp(a, "-undefok")) && i + 1 < argc)
            c.undefok = argv[i + 1];
    }
    return mc__flags_args(&c, argc, argv, 0);
}
