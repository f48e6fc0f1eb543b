/* Fuzzes mooncake_master's --config_path loader. It is static in the binary's main file, so the
 * harness compiles that file in with its main renamed and calls the loader on the flag table
 * the binary builds; the input is the file, kept in a memfd opened by path. A load that fails
 * must say why; one that succeeds leaves string flags pointing into the live document, and the
 * result then goes through the same range check the binary runs before it starts. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define main mc__fuzz_master_main
#include "../mooncake-store/tools/mooncake_master.c"
#undef main

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int mfd = -1;
    static char path[64];
    mc__master_flags_t f;
    mc_flag_t table[32];
    const char *defaults[32];
    cJSON *doc = NULL;
    char err[512];
    size_t n;
    if (mfd < 0) {
        mfd = memfd_create("mc-fuzz-master-config", MFD_CLOEXEC);
        if (mfd < 0)
            abort();
        snprintf(path, sizeof(path), "/proc/self/fd/%d", mfd);
    }
    if (ftruncate(mfd, 0) != 0 || (size && pwrite(mfd, data, size, 0) != (ssize_t)size))
        abort();
    memset(&f, 0, sizeof(f));
    mc__master_config_defaults(&f.cfg);
    n = mc__master_flag_table(&f, table);
    if (n > sizeof(table) / sizeof(table[0]))
        abort();
    for (size_t i = 0; i < n; i++)
        defaults[i] = table[i].type == MC_FLAG_STRING ? *(const char **)table[i].value : NULL;
    err[0] = '\0';
    if (mc__load_config(path, table, n, &doc, err, sizeof(err)) == 0) {
        /* string flags the file set borrow from the document: readable C strings no longer
         * than the file (JSON escapes only shrink); config_path is never taken from the file itself
         */
        if (!doc || f.config_path)
            abort();
        for (size_t i = 0; i < n; i++) {
            const char *v = table[i].type == MC_FLAG_STRING ? *(const char **)table[i].value : NULL;
            if (v && v != defaults[i] && strlen(v) > size)
                abort();
        }
        err[0] = '\0';
        if (mc__master_config_validate(&f.cfg, err, sizeof(err)) != 0 && !err[0])
            abort();
    } else if (!err[0] || strnlen(err, sizeof(err)) == sizeof(err)) {
        abort();
    }
    cJSON_Delete(doc);
    return 0;
}
