/* The master's metadata-log replay (restore.c): a log file read at start, into an empty master.
 * Input: the whole file (magic, then records). Every input must end in a clean refusal or a
 * consistent master that frees cleanly. */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_quiet.h"
#include "master/master.h"
#include "master/persist.h"
#include "master/restore.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    mc__fuzz_quiet(); /* a replay logs what it restored */
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    mc__master_config_t cfg;
    mc__master_t *m = NULL;
    char err[256];
    mc__master_config_defaults(&cfg);
    if (mc__master_new_offline(&cfg, &m) != 0)
        return 0;
    (void)mc__persist_replay_buf(m, data, size, "fuzz", err, sizeof(err));
    mc__master_stop(m);
    return 0;
}
