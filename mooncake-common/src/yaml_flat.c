/* The flat `key: value` subset of YAML (see yaml_flat.h). One pass over the text, line by line;
 * quoted scalars are unescaped in place (the result is never longer than the source). */
#include "mooncake/common/yaml_flat.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "mooncake/common/config.h"
#include "mooncake/error.h"

static int mc__yaml_fail(char *err, size_t cap, int line, const char *fmt, ...) {
    va_list ap;
    int n = snprintf(err, cap, "line %d: ", line);
    if (n >= 0 && (size_t)n < cap) {
        va_start(ap, fmt);
        vsnprintf(err + n, cap - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return MC_ERR_INVALID_ARGUMENT;
}

/* Writes code point cp as UTF-8 at *w; 0, or -1 for a surrogate or a value beyond Unicode. */
static int mc__yaml_utf8(uint32_t cp, char **w) {
    char *o = *w;
    if (cp >= 0xD800 && cp <= 0xDFFF)
        return -1;
    if (cp < 0x80) {
        *o++ = (char)cp;
    } else if (cp < 0x800) {
        *o++ = (char)(0xC0 | (cp >> 6));
        *o++ = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        *o++ = (char)(0xE0 | (cp >> 12));
        *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
        *o++ = (char)(0x80 | (cp & 0x3F));
    } else if (cp <= 0x10FFFF) {
        *o++ = (char)(0xF0 | (cp >> 18));
        *o++ = (char)(0x80 | ((cp >> 12) & 0x3F));
        *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
        *o++ = (char)(0x80 | (cp & 0x3F));
    } else {
        return -1;
    }
    *w = o;
    return 0;
}

/* Unescapes the quoted scalar that starts at *p (on its quote) into itself; *p ends after the
 * closing quote. Returns 0, or -1 with a reason in *why. The escapes of a "double" scalar take
 * at least as many bytes as what they stand for (\uXXXX: 6 bytes for at most 3), so writing
 * behind the reader is safe. */
static int mc__yaml_quoted(char **p, const char **why) {
    char q = **p;
    char *r = *p + 1;
    char *w = *p;
    for (;;) {
        char c = *r;
        if (c == '\0') {
            *why = "unterminated quoted string (a string must end on its line)";
            return -1;
        }
        if (c == q) {
            if (q == '\'' && r[1] == '\'') { /* '' is a quote inside a 'single' scalar */
                *w++ = '\'';
                r += 2;
                continue;
            }
            *w = '\0';
            *p = r + 1;
            return 0;
        }
        if (q == '"' && c == '\\') {
            int digits = 0;
            uint32_t cp = 0;
            r++;
            switch (*r) {
            case '\\':
            case '"':
            case '/':
                *w++ = *r++;
                continue;
            case 'n':
                *w++ = '\n';
                r++;
                continue;
            case 't':
                *w++ = '\t';
                r++;
                continue;
            case 'r':
                *w++ = '\r';
                r++;
                continue;
            case '0':
                *why = "\\0 (a NUL byte) cannot be part of a value";
                return -1;
            case 'x':
                digits = 2;
                break;
            case 'u':
                digits = 4;
                break;
            default:
                *why = "unknown escape in a double-quoted string";
                return -1;
            }
            r++;
            for (int i = 0; i < digits; i++) {
                int h = mc__parse_hex_digit(r[i]);
                if (h < 0) {
                    *why = "bad hex digits in a \\x or \\u escape";
                    return -1;
                }
                cp = cp * 16 + (uint32_t)h;
            }
            r += digits;
            if (cp == 0 || mc__yaml_utf8(cp, &w) != 0) {
                *why = "escape names no usable character (NUL or a surrogate)";
                return -1;
            }
            continue;
        }
        *w++ = c;
        r++;
    }
}

static int mc__yaml_is_null(const char *v) {
    return !strcmp(v, "~") || !strcmp(v, "null") || !strcmp(v, "Null") || !strcmp(v, "NULL");
}

/* Checks the first character of a node (a key or a value) for YAML we do not read. */
static const char *mc__yaml_unsupported(const char *s) {
    switch (*s) {
    case '[':
    case '{':
        return "flow collections ([...] or {...}) are not supported: write one key: value per line";
    case '|':
    case '>':
        return "block scalars (| or >) are not supported: quote the value on one line";
    case '&':
    case '*':
        return "anchors and aliases (& and *) are not supported";
    case '!':
        return "tags (!) are not supported";
    case '@':
    case '`':
        return "'@' and '`' cannot start a plain value: quote it";
    case '%':
        return "directives (%) are not supported";
    case '-':
        if (s[1] == ' ' || s[1] == '\0')
            return "sequences (- item) are not supported";
        return NULL;
    default:
        return NULL;
    }
}

/* The start of a key or a value at *p: a form this reader refuses, or a quoted scalar read whole
 * (*quoted set, *p past it and the blanks after it); a plain one is left to the caller. 0, or -1
 * with a reason in *why. */
static int mc__yaml_scalar(char **p, int *quoted, const char **why) {
    if ((*why = mc__yaml_unsupported(*p)) != NULL)
        return -1;
    *quoted = **p == '"' || **p == '\'';
    if (!*quoted)
        return 0;
    if (mc__yaml_quoted(p, why) != 0)
        return -1;
    while (**p == ' ' || **p == '\t')
        (*p)++;
    return 0;
}

static char *mc__yaml_rtrim(char *b, char *e) {
    while (e > b && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    *e = '\0';
    return e;
}

/* Parses one line (NUL-terminated, no newline) into pair; 1 when it holds one, 0 when it is
 * blank or a comment, -1 with *why otherwise. */
static int mc__yaml_line(char *s, mc__yaml_pair_t *pair, const char **why) {
    char *p = s;
    char *key = NULL;
    char *v = NULL;
    int quoted = 0;
    while (*p == ' ')
        p++;
    if (*p == '\t') {
        *why = "tabs cannot indent YAML";
        return -1;
    }
    if (*p == '\0' || *p == '#')
        return 0;
    if (p != s) {
        *why = "indented line: nested mappings are not supported (one key: value per line)";
        return -1;
    }
    key = p;
    if (mc__yaml_scalar(&p, &quoted, why) != 0)
        return -1;
    if (quoted) {
        if (*p != ':') {
            *why = "expected ':' after the quoted key";
            return -1;
        }
    } else {
        /* A plain key ends at the first ':' followed by a space or the end of the line. */
        while (*p && !(*p == ':' && (p[1] == ' ' || p[1] == '\t' || p[1] == '\0'))) {
            if (*p == '#' && p > key && (p[-1] == ' ' || p[-1] == '\t')) {
                *why = "expected 'key: value'";
                return -1;
            }
            p++;
        }
        if (*p != ':') {
            *why = "expected 'key: value'";
            return -1;
        }
        mc__yaml_rtrim(key, p);
    }
    *p++ = '\0';
    if (*key == '\0') {
        *why = "empty key";
        return -1;
    }
    while (*p == ' ' || *p == '\t')
        p++;
    pair->key = key;
    pair->quoted = 0;
    if (*p == '\0' || *p == '#') {
        pair->value = p;
        *p = '\0';
        return 1;
    }
    v = p;
    if (mc__yaml_scalar(&p, &quoted, why) != 0)
        return -1;
    if (quoted) {
        if (*p != '\0' && *p != '#') {
            *why = "text after the closing quote";
            return -1;
        }
        pair->value = v;
        pair->quoted = 1;
        return 1;
    }
    /* A plain value ends at " #" (a comment) or the end of the line. */
    while (*p && !(*p == '#' && (p[-1] == ' ' || p[-1] == '\t'))) {
        if (*p == ':' && (p[1] == ' ' || p[1] == '\t' || p[1] == '\0')) {
            *why = "': ' inside a plain value (a nested mapping?): quote the value";
            return -1;
        }
        p++;
    }
    mc__yaml_rtrim(v, p);
    pair->value = mc__yaml_is_null(v) ? "" : v;
    return 1;
}

int mc__yaml_flat_parse(char *text, mc__yaml_pair_fn fn, void *ctx, char *err, size_t cap) {
    char *line = text;
    int lineno = 0;
    int pairs = 0;
    int ended = 0;   /* after a "..." document end marker */
    int started = 0; /* after a "---" document start marker */
    if (!text || !fn)
        return MC_ERR_INVALID_ARGUMENT;
    if (err && cap)
        err[0] = '\0';
    if ((unsigned char)line[0] == 0xEF && (unsigned char)line[1] == 0xBB &&
        (unsigned char)line[2] == 0xBF)
        line += 3; /* a UTF-8 byte order mark */
    while (line) {
        char *nl = strchr(line, '\n');
        mc__yaml_pair_t pair;
        const char *why = NULL;
        int rc = 0;
        lineno++;
        if (nl)
            *nl = '\0';
        if (nl > line && nl[-1] == '\r')
            nl[-1] = '\0';
        else if (!nl && *line && line[strlen(line) - 1] == '\r')
            line[strlen(line) - 1] = '\0';
        if (!strncmp(line, "---", 3) && (line[3] == '\0' || line[3] == ' ' || line[3] == '#')) {
            if (pairs || ended || started)
                return mc__yaml_fail(err, cap, lineno,
                                     "a second document ('---') is not supported");
            started = 1;
            line = nl ? nl + 1 : NULL;
            continue;
        }
        if (!strncmp(line, "...", 3) && (line[3] == '\0' || line[3] == ' ' || line[3] == '#')) {
            ended = 1;
            line = nl ? nl + 1 : NULL;
            continue;
        }
        rc = mc__yaml_line(line, &pair, &why);
        if (rc < 0)
            return mc__yaml_fail(err, cap, lineno, "%s", why);
        if (rc > 0) {
            if (ended)
                return mc__yaml_fail(err, cap, lineno, "content after the document end ('...')");
            pair.line = lineno;
            pairs++;
            rc = fn(ctx, &pair);
            if (rc)
                return rc;
        }
        line = nl ? nl + 1 : NULL;
    }
    return 0;
}
