/* Configuration helpers shared by binaries and clients: sizes ("4gb", "512MB", "1024"),
 * environment look-ups, and gflags-style command lines (--name=value, --name value, bare
 * booleans, --noname, --help, --version) as the reference Mooncake's binaries accept them. */
#ifndef MC_COMMON_CONFIG_H
#define MC_COMMON_CONFIG_H
#include <stddef.h>
#include <stdint.h>

/* Parses a size with optional suffix b, k/kb/kib, m/mb/mib, g/gb/gib, t/tb/tib (case-insensitive,
 * powers of 1024). Returns 0 or MC_ERR_INVALID_ARGUMENT (garbage, negative, overflow). */
int mc__parse_size(const char *s, uint64_t *out);
/* Strict integer / double / bool parsing; 0 or MC_ERR_INVALID_ARGUMENT. */
int mc__parse_i64(const char *s, int64_t *out);
int mc__parse_double(const char *s, double *out);
int mc__parse_bool(const char *s, int *out); /* 1/0, true/false, yes/no, on/off */
/* The value of one hex digit (either case), or -1. */
int mc__parse_hex_digit(char c);
/* A duration as the reference's master takes one: a non-negative integer with an optional unit
 * ms, s, m or h (case-insensitive, spaces allowed around it; none = milliseconds), e.g. "10s",
 * "500ms", "10000". 0 or MC_ERR_INVALID_ARGUMENT (garbage, negative, fraction, overflow). */
int mc__parse_duration_ms(const char *s, uint64_t *out);

enum mc_flag_type {
    MC_FLAG_BOOL,
    MC_FLAG_INT,
    MC_FLAG_DOUBLE,
    MC_FLAG_STRING,
    MC_FLAG_SIZE,
    MC_FLAG_DURATION_MS /* uint64_t* in milliseconds; mc__parse_duration_ms */
};

typedef struct mc_flag {
    const char *name; /* without dashes */
    enum mc_flag_type type;
    void *value; /* int*, int64_t*, double*, const char**, uint64_t* (size, duration) */
    const char *help;
} mc_flag_t;

/* Sets one flag from its text (as after --name=), the same for a command line and a config file.
 * A string flag keeps the pointer. 0 or MC_ERR_INVALID_ARGUMENT. */
int mc__flag_set(const mc_flag_t *f, const char *text);

/* Parses argv against flags[0..n). On --help prints usage to stdout and returns 1; on --version
 * prints "<prog> <version>" and returns 2; on an unknown flag or bad value prints a one-line
 * message naming it to stderr and returns MC_ERR_INVALID_ARGUMENT. Positional arguments are an
 * error. gflags' built-ins work as there: --helpshort (as --help), --flagfile=FILE (one flag a
 * line; its lines are kept for the process's life, as string flags point into them),
 * --fromenv=a,b (FLAGS_a must be set), --tryfromenv=a,b, --undefok=a,b (unknown a, b skipped). */
int mc__flags_parse(int argc, char **argv, const mc_flag_t *flags, size_t n, const char *prog,
                    const char *version, const char *usage_line);

/* Environment look-ups: *out gets def when the variable is unset or empty. A value that does not
 * parse returns MC_ERR_INVALID_ARGUMENT (with a warning naming the variable) and leaves *out = def,
 * so callers can choose between refusing to start and carrying on with the default. */
const char *mc__env_str(const char *name, const char *def);
int mc__env_size(const char *name, uint64_t def, uint64_t *out);
int mc__env_i64(const char *name, int64_t def, int64_t *out);
int mc__env_bool(const char *name, int def, int *out);
/* Tuning knobs: the value (a size with units, or a plain integer) when it parses and lies in
 * lo..hi, else def, with a warning naming the variable when it was set but unusable. */
int64_t mc__env_size_in(const char *name, int64_t def, int64_t lo, int64_t hi);
int64_t mc__env_i64_in(const char *name, int64_t def, int64_t lo, int64_t hi);
#endif
