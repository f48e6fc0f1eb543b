/* For harnesses whose code under test prints on nearly every input (one error line per refused
 * file or flag, usage text for --help): logs of millions of lines slow the run and fill the disk.
 * This points the C streams the project prints to at /dev/null. libFuzzer keeps the stream it
 * took at start and the sanitizers write to descriptor 2, so their reports still reach the log.
 * Call it from LLVMFuzzerInitialize. */
#ifndef MC_FUZZ_QUIET_H
#define MC_FUZZ_QUIET_H
#include <stdio.h>

static inline void mc__fuzz_quiet(void) {
    FILE *null = fopen("/dev/null", "w");
    if (null) {
        stdout = null;
        stderr = null;
    }
}
#endif
