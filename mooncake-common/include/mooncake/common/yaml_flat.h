/* A reader for the flat subset of YAML that configuration files use: one `key: value` per line,
 * comments, plain / 'single' / "double" quoted scalars. Everything else (nesting, lists, flow
 * collections, block scalars, anchors, tags, several documents) is refused with the line and the
 * reason, so a file is either read exactly or not at all. No I/O: text in, pairs out. */
#ifndef MC_COMMON_YAML_FLAT_H
#define MC_COMMON_YAML_FLAT_H
#include <stddef.h>

typedef struct mc__yaml_pair {
    const char *key;
    const char *value; /* a plain scalar trimmed, or a quoted one unescaped; never NULL */
    int quoted;        /* 1 when the value was quoted: "" is then an empty string, not null */
    int line;          /* 1-based */
} mc__yaml_pair_t;

/* Called once per pair, in file order; a non-zero return stops the parse and is returned. */
typedef int (*mc__yaml_pair_fn)(void *ctx, const mc__yaml_pair_t *pair);

/* Parses text (NUL-terminated; rewritten in place, and the strings handed to fn point into it, so
 * keep it alive as long as they are used). Returns 0, fn's non-zero return, or
 * MC_ERR_INVALID_ARGUMENT with "line N: why" in err. A plain value that is empty, `~` or `null`
 * is handed over as "" with quoted = 0: the caller decides what a null means. */
int mc__yaml_flat_parse(char *text, mc__yaml_pair_fn fn, void *ctx, char *err, size_t cap);
#endif
