/* Strict value parsing: a value is accepted only when the whole string is consumed, so "12abc"
 * or "1e999" are errors rather than silently truncated numbers. */
#include "mooncake/common/config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mooncake/error.h"

static const char *mc__skip_space(const char *s) {
    while (*s && isspace((unsigned char)*s))
        s++;
    return s;
}

/* True when [s, end) is only whitespace. */
static int mc__only_space(const char *s) {
    return *mc__skip_space(s) == '\0';
}

/* The unit after a number: the word after p's spaces, lowercased into out ("" when none), which
 * must end the string but for spaces and fit in cap. 0 or MC_ERR_INVALID_ARGUMENT. */
static int mc__unit_word(const char *p, char *out, size_t cap) {
    size_t n = 0;
    p = mc__skip_space(p);
    for (; p[n] && !isspace((unsigned char)p[n]); n++) {
        if (n + 1 >= cap)
            return MC_ERR_INVALID_ARGUMENT;
        out[n] = (char)tolower((unsigned char)p[n]);
    }
    out[n] = '\0';
    return mc__only_space(p + n) ? 0 : MC_ERR_INVALID_ARGUMENT;
}

int mc__parse_i64(const char *s, int64_t *out) {
    char *end = NULL;
    long long v;
    if (!s || !out)
        return MC_ERR_INVALID_ARGUMENT;
    errno = 0; /* strto* skip leading spaces; a blank string stops at s and is refused */
    v = strtoll(s, &end, 10);
    if (errno || end == s || !mc__only_space(end))
        return MC_ERR_INVALID_ARGUMENT;
    *out = v;
    return 0;
}

int mc__parse_double(const char *s, double *out) {
    char *end = NULL;
    double v;
    if (!s || !out)
        return MC_ERR_INVALID_ARGUMENT;
    errno = 0;
    v = strtod(s, &end);
    if (errno || end == s || !mc__only_space(end) || !isfinite(v))
        return MC_ERR_INVALID_ARGUMENT;
    *out = v;
    return 0;
}

int mc__parse_bool(const char *s, int *out) {
    static const char *const yes[] = {"1", "true", "yes", "on", "y", "t"};
    static const char *const no[] = {"0", "false", "no", "off", "n", "f"};
    if (!s || !out)
        return MC_ERR_INVALID_ARGUMENT;
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *out = 1;
            return 0;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *out = 0;
            return 0;
        }
    }
    return MC_ERR_INVALID_ARGUMENT;
}

int mc__parse_hex_digit(char c) {
    static const char digits[] = "0123456789abcdef";
    const char *p = c ? strchr(digits, tolower((unsigned char)c)) : NULL;
    return p ? (int)(p - digits) : -1;
}

int mc__parse_size(const char *s, uint64_t *out) {
    static const char *const units[] = {"k", "m", "g", "t"};
    char *end = NULL;
    uint64_t mult = 1;
    char suffix[8];
    const char *p;
    if (!s || !out)
        return MC_ERR_INVALID_ARGUMENT;
    p = mc__skip_space(s);
    /* Only plain decimals ("12", "1.5"): no sign, exponent, hex or inf/nan forms. */
    end = (char *)p;
    while (isdigit((unsigned char)*end))
        end++;
    if (*end == '.') {
        end++;
        while (isdigit((unsigned char)*end))
            end++;
    }
    if (end == p || (end == p + 1 && *p == '.'))
        return MC_ERR_INVALID_ARGUMENT;
    int fractional = memchr(p, '.', (size_t)(end - p)) != NULL;
    if (mc__unit_word(end, suffix, sizeof(suffix)) != 0)
        return MC_ERR_INVALID_ARGUMENT;
    if (suffix[0] && strcmp(suffix, "b") != 0) {
        int found = 0;
        for (size_t i = 0; i < 4 && !found; i++) {
            mult *= 1024;
            char a[4], b[4], c[5];
            strcpy(a, units[i]);
            strcpy(b, units[i]);
            strcat(b, "b");
            strcpy(c, units[i]);
            strcat(c, "ib");
            found = !strcmp(suffix, a) || !strcmp(suffix, b) || !strcmp(suffix, c);
        }
        if (!found)
            return MC_ERR_INVALID_ARGUMENT;
    }
    /* Integers are parsed exactly; only fractional inputs go through double. */
    if (!fractional) {
        char *e2 = NULL;
        errno = 0;
        unsigned long long v = strtoull(p, &e2, 10);
        if (errno || v > UINT64_MAX / mult)
            return MC_ERR_INVALID_ARGUMENT;
        *out = (uint64_t)v * mult;
        return 0;
    }
    double d = strtod(p, NULL) * (double)mult;
    if (d < 0 || d >= 18446744073709551616.0)
        return MC_ERR_INVALID_ARGUMENT;
    *out = (uint64_t)d;
    return 0;
}

int mc__parse_duration_ms(const char *s, uint64_t *out) {
    static const struct {
        const char *unit;
        uint64_t ms;
    } units[] = {{"", 1}, {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}};
    const char *p = NULL;
    uint64_t v = 0;
    char suffix[4];
    if (!s || !out)
        return MC_ERR_INVALID_ARGUMENT;
    p = mc__skip_space(s);
    if (!isdigit((unsigned char)*p))
        return MC_ERR_INVALID_ARGUMENT; /* empty, a sign, a dot */
    for (; isdigit((unsigned char)*p); p++) {
        uint64_t d = (uint64_t)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return MC_ERR_INVALID_ARGUMENT;
        v = v * 10 + d;
    }
    if (mc__unit_word(p, suffix, sizeof(suffix)) != 0)
        return MC_ERR_INVALID_ARGUMENT;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcmp(suffix, units[i].unit) == 0) {
            if (v > UINT64_MAX / units[i].ms)
                return MC_ERR_INVALID_ARGUMENT;
            *out = v * units[i].ms;
            return 0;
        }
    }
    return MC_ERR_INVALID_ARGUMENT;
}
