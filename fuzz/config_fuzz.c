/* Fuzzes value parsing and gflags-style command lines (argv split on newlines). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_quiet.h"
#include "mooncake/common/config.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The flag parser prints a line for every bad command line and the usage for --help. */
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    mc__fuzz_quiet();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    char *argv[33];
    int argc = 1;
    uint64_t sz = 0;
    int64_t i = 0;
    double d = 0;
    int b = 0;
    const char *str = "";
    mc_flag_t flags[] = {
        {"b", MC_FLAG_BOOL, &b, "bool"},     {"i", MC_FLAG_INT, &i, "int"},
        {"d", MC_FLAG_DOUBLE, &d, "double"}, {"s", MC_FLAG_STRING, &str, "string"},
        {"size", MC_FLAG_SIZE, &sz, "size"},
    };
    memcpy(s, data, size);
    s[size] = '\0';
    (void)mc__parse_size(s, &sz);
    (void)mc__parse_i64(s, &i);
    (void)mc__parse_double(s, &d);
    (void)mc__parse_bool(s, &b);
    argv[0] = "fuzz";
    for (char *tok = strtok(s, "\n"); tok && argc < 32; tok = strtok(NULL, "\n"))
        argv[argc++] = tok;
    argv[argc] = NULL;
    (void)mc__flags_parse(argc, argv, flags, 5, "fuzz", "0", "fuzz");
    free(s);
    return 0;
}
