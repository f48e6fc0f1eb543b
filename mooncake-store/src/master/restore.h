/* Restoring the master from its metadata log (persist.h has the format), and the dump that
 * compaction writes: the state side of the log, which the log reaches only through the
 * mc__persist_state_t that lifecycle (master.c) fills with these. */
#ifndef MC_STORE_MASTER_RESTORE_H
#define MC_STORE_MASTER_RESTORE_H
#include <stddef.h>
#include <stdint.h>

#include "mooncake/common/frame.h"

typedef struct mc__master mc__master_t;

/* Replays the log file at path into m (whose shards and registry are empty);
 * 0 or a code with a message in err. */
int mc__persist_replay(mc__master_t *m, const char *path, char *err, size_t cap);
/* The same for a log already in memory (path names it in messages); fuzzed. */
int mc__persist_replay_buf(mc__master_t *m, const uint8_t *data, size_t len, const char *path,
                           char *err, size_t cap);
/* Writes m's whole state as records into b (a compacted log's body). */
int mc__persist_dump(mc__master_t *m, mc_buf_t *b);
#endif
