/* Messages and names for the error table; both are generated from MC_ERRNO_MAP so the table is
 * the only place a code is spelled out. Values shared by the TE and Store tables resolve by the
 * domain the caller asked for, then fall back to the other domain. */
#include "mooncake/error.h"

#include <stddef.h>

enum { MC__DOM_TE = 1, MC__DOM_STORE = 2, MC__DOM_BOTH = 3 };

typedef struct mc__err_entry {
    int code;
    int domain;
    const char *name;
    const char *msg;
} mc__err_entry_t;

#define MC__ERR_ROW(name, value, domain, msg) {(value), MC__DOM_##domain, #name, (msg)},
static const mc__err_entry_t mc__err_table[] = {MC_ERRNO_MAP(MC__ERR_ROW)};
#undef MC__ERR_ROW

static const mc__err_entry_t *mc__err_find(int code, int prefer) {
    const mc__err_entry_t *fallback = NULL;
    for (size_t i = 0; i < sizeof(mc__err_table) / sizeof(mc__err_table[0]); i++) {
        const mc__err_entry_t *e = &mc__err_table[i];
        if (e->code != code)
            continue;
        if (e->domain & prefer)
            return e;
        if (!fallback)
            fallback = e;
    }
    return fallback;
}

/* A code in neither table reads as this. */
static const mc__err_entry_t mc__err_unknown = {0, 0, "UNKNOWN", "unknown error"};

static const mc__err_entry_t *mc__err_get(int code, int prefer) {
    const mc__err_entry_t *e = mc__err_find(code, prefer);
    return e ? e : &mc__err_unknown;
}

const char *mc_strerror(int code) {
    return mc__err_get(code, MC__DOM_TE)->msg;
}

const char *mc_store_strerror(int code) {
    return mc__err_get(code, MC__DOM_STORE)->msg;
}

const char *mc_err_name(int code) {
    return mc__err_get(code, MC__DOM_TE)->name;
}

const char *mc_store_err_name(int code) {
    return mc__err_get(code, MC__DOM_STORE)->name;
}
