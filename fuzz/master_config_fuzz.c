/* Fuzzes mooncake_master's --config_path loader (master/master_flags.c): the input is the file,
 * read as JSON when it starts with '{', '[' or a digit, else as YAML (the loader picks by the
 * file's name, so the harness keeps one file of each name). A load that fails must say why; one
 * that succeeds leaves string flags pointing into the live document or text, and the result then
 * goes through the same checks the binary runs before it starts. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_quiet.h"
#include "master/master_flags.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char g_json[64], g_yaml[64];

static void mc__fuzz_cleanup(void) {
    unlink(g_json);
    unlink(g_yaml);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    mc__fuzz_quiet();
    snprintf(g_json, sizeof(g_json), "/tmp/mc-fuzz-master-%d.json", (int)getpid());
    snprintf(g_yaml, sizeof(g_yaml), "/tmp/mc-fuzz-master-%d.yaml", (int)getpid());
    atexit(mc__fuzz_cleanup);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static mc__master_opts_t o;
    static const char *defaults[MC__MASTER_MAX_FLAGS];
    int json = size && (data[0] == '{' || data[0] == '[' || (data[0] >= '0' && data[0] <= '9'));
    const char *path = json || !size ? g_json : g_yaml;
    FILE *fp = fopen(path, "wb");
    char err[512];
    if (!fp || (size && fwrite(data, 1, size, fp) != size) || fclose(fp) != 0)
        abort();
    mc__master_opts_init(&o);
    o.warn = NULL;
    if (o.n > MC__MASTER_MAX_FLAGS)
        abort();
    for (size_t i = 0; i < o.n; i++)
        defaults[i] = o.table[i].type == MC_FLAG_STRING ? *(const char **)o.table[i].value : NULL;
    err[0] = '\0';
    if (mc__master_opts_load_file(&o, path, err, sizeof(err)) == 0) {
        /* String flags the file set borrow from it: readable C strings no longer than the file
         * (escapes only shrink); config_path is never taken from the file itself. */
        if (o.config_path)
            abort();
        for (size_t i = 0; i < o.n; i++) {
            const char *v =
                o.table[i].type == MC_FLAG_STRING ? *(const char **)o.table[i].value : NULL;
            if (v && v != defaults[i] && strlen(v) > size)
                abort();
        }
        err[0] = '\0';
        if (mc__master_opts_finish(&o, err, sizeof(err)) != 0 && !err[0])
            abort();
    } else if (!err[0] || strnlen(err, sizeof(err)) == sizeof(err)) {
        abort();
    }
    mc__master_opts_free(&o);
    return 0;
}
