/* The master's metadata on local disk, so that a restart forgets nothing that was acknowledged
 * (no HA needed): a log of what changed, replayed at start (restore.c) and compacted then.
 *
 * What is logged is what a restarted master needs to serve every acknowledged object from the
 * same bytes and to never hand out space that anyone may still touch: segment mounts and drops,
 * every allocation and free of segment space (so reservations of unfinished puts, upsert
 * shadows, task targets and graveyard space survive as allocated), and the published state of
 * each complete object (key, size, flags, replicas) under its version, or its removal.
 *
 * Records are appended to an in-memory buffer by the code that changes the state (under its own
 * locks; the log's lock is a leaf). Every RPC commits before its reply leaves: the buffer is
 * written and fdatasync'ed, one thread syncing for everyone waiting (group commit). Records are
 * in the order the changes were made, so a reply that is durable carries every change before
 * it. A write or sync that fails stops the master (fail-stop): the log holds exactly what was
 * acknowledged, and a restart restores it.
 *
 * File: DIR/master.log, an 8-byte magic then records (u32 length, u32 CRC-32 of the payload,
 * payload: u8 type, fields as below; integers little-endian, str = u32 length + bytes), then
 * zeros. A torn tail (the crash came mid-write) ends the replay. */
#ifndef MC_STORE_MASTER_PERSIST_H
#define MC_STORE_MASTER_PERSIST_H
#include <stddef.h>
#include <stdint.h>

#include "mooncake/common/frame.h"

#define MC__LOG_MAGIC "MCMLOG01"
#define MC__LOG_FILE "master.log"

enum {
    /* u64 serial, str name, u64 base, u64 size, u64 epoch, 16-byte owner */
    MC__R_SEG_MOUNT = 1,
    /* u64 serial: the segment and everything in it are gone */
    MC__R_SEG_DROP = 2,
    /* u64 serial, u64 offset, u64 len */
    MC__R_ALLOC = 3,
    /* u64 serial, u64 offset */
    MC__R_FREE = 4,
    /* u64 version, str key, u64 size, u8 flags, u64 soft pin left (ms), u32 n,
     * n x (u64 serial, u64 offset, u64 len) */
    MC__R_OBJ_SET = 5,
    /* u64 version */
    MC__R_OBJ_DEL = 6,
    /* u64 version, str key, u64 size, u64 disk id: the disk whose directory has that id holds
     * a durable copy of key (a LOCAL_DISK replica, disk.h) */
    MC__R_DISK_SET = 7,
    /* str key: no disk holds a copy of key any more (removed, replaced, dropped by its node) */
    MC__R_DISK_DEL = 8,
};

typedef struct mc__master mc__master_t;
struct mc__segment;
struct mc__object;

/* What the log needs from the state it records and never reads itself: replaying a log into
 * an empty master and writing the whole state as records (a compacted log's body). Lifecycle
 * (master.c) wires restore.c's functions here, so the log, a sink the model reports to, calls
 * nothing above it. */
typedef struct mc__persist_state {
    int (*replay)(mc__master_t *m, const char *path, char *err, size_t cap);
    int (*replay_buf)(mc__master_t *m, const uint8_t *data, size_t len, const char *path, char *err,
                      size_t cap);
    int (*dump)(mc__master_t *m, mc_buf_t *b);
} mc__persist_state_t;

/* Opens (creating) dir's log for appending; with restore, replays it into m first and rewrites
 * it compacted. 0, or a code with a message in err. */
int mc__persist_open(mc__master_t *m, const char *dir, int restore, const mc__persist_state_t *st,
                     char *err, size_t cap);
/* HA: the same with the log in etcd (persist_etcd.h), for the leader of m->cfg.ha_term: reads
 * and replays it, then installs the restored state as this term's snapshot. */
int mc__persist_open_ha(mc__master_t *m, const mc__persist_state_t *st, char *err, size_t cap);
void mc__persist_close(mc__master_t *m);

/* Emitters (no-ops when the master keeps no log). */
void mc__persist_seg_mount(mc__master_t *m, const struct mc__segment *seg);
void mc__persist_seg_drop(mc__master_t *m, const struct mc__segment *seg);
void mc__persist_alloc(mc__master_t *m, const struct mc__segment *seg, uint64_t off, uint64_t len);
void mc__persist_free(mc__master_t *m, const struct mc__segment *seg, uint64_t off);
/* With the object's shard locked (its replicas' segments are looked up inside). */
void mc__persist_obj_set(mc__master_t *m, struct mc__object *o);
void mc__persist_obj_del(mc__master_t *m, const struct mc__object *o);
/* With the disk view's lock held (a leaf above the log's). */
void mc__persist_disk_set(mc__master_t *m, const uint8_t *key, uint32_t len, uint64_t version,
                          uint64_t size, uint64_t disk_id);
void mc__persist_disk_del(mc__master_t *m, const uint8_t *key, uint32_t len);
/* The monitor's part: rewrites the log from the state once it grew past its limit. */
void mc__persist_maybe_compact(mc__master_t *m);
/* Makes every record emitted so far durable; returns 0 when it is. A local log that cannot be
 * written stops the process; in HA, -1 says the log in etcd no longer records (this master was
 * fenced out): nothing may be acknowledged, the master serves nothing more (m->fenced) and the
 * supervisor is told (cfg.ha_lost). */
int mc__persist_commit(mc__master_t *m);

/* Record bodies (between record_begin and record_end), for the emitters and the dump. */
void mc__persist_put_seg(mc_buf_t *b, const struct mc__segment *seg);
void mc__persist_put_alloc(mc_buf_t *b, uint64_t serial, uint64_t off, uint64_t len);
void mc__persist_put_obj(mc__master_t *m, mc_buf_t *b, const struct mc__object *o, uint64_t now);
void mc__persist_put_disk(mc_buf_t *b, const uint8_t *key, uint32_t len, uint64_t version,
                          uint64_t size, uint64_t disk_id);
/* One record appended to b. */
void mc__persist_record_begin(mc_buf_t *b, size_t *at);
void mc__persist_record_end(mc_buf_t *b, size_t at);
#endif
