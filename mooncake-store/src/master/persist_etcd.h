/* The metadata log of an HA master, kept in etcd (the local log's records, persist.h), so that
 * whichever master is elected next rebuilds every acknowledged object from it.
 *
 * Keys, under P = "mooncake-store/<cluster_id>/metadata/":
 *   P "head"                   "<gen> <log_from>" (decimal text): the snapshot in force and the
 *                              first log entry that follows it
 *   P "snap/<gen>/<chunk>"     the snapshot's records, in chunks (16 and 8 hex digits)
 *   P "log/<seq>"              records appended after it, one group commit (or a part of a
 *                              large one, cut at a record boundary) per entry (16 hex digits)
 * The state is the snapshot of head's gen, then every log entry from log_from on, in order.
 *
 * Fencing: every write is a txn that holds only while the master view key's create_revision is
 * the writer's term (election.h): once a newer leader was elected, or the key expired, an old
 * leader's writes fail, so nothing it acknowledges afterwards was recorded, and it acknowledges
 * nothing it did not record. A log entry's txn also requires the entry to be absent, so a retry
 * after an unanswered txn cannot write it twice. Several commits may be in flight at once; they
 * are acknowledged in order, so entries after a missing one were never acknowledged and are
 * dropped when the log is opened.
 *
 * A snapshot is installed by writing its chunks under a new gen, then one txn that moves head to
 * it and deletes the old gen and the log entries before the new log_from: a crash in between
 * leaves the old head whole. etcd's history is compacted one install behind (watchers of other
 * keys get a snapshot's time to catch up). */
#ifndef MC_STORE_MASTER_PERSIST_ETCD_H
#define MC_STORE_MASTER_PERSIST_ETCD_H
#include <stddef.h>
#include <stdint.h>

#include "mooncake/common/frame.h"

typedef struct mc__elog mc__elog_t;

typedef struct mc__elog_opts {
    const char *endpoints;
    const char *cluster_id;
    int64_t term; /* the create_revision of the master view key this leader created */
    /* 1 while the writer still leads term: bounds the retries of a write etcd does not answer */
    int (*is_leader)(void *ctx, int64_t term);
    void *ctx;
} mc__elog_opts_t;

/* Opens the log and reads it: 0 with *out and the log's content in loaded (the 8-byte magic of
 * a local log, then the snapshot's and the log entries' records), or a code with a message. */
int mc__elog_open(const mc__elog_opts_t *o, mc__elog_t **out, mc_buf_t *loaded, char *err,
                  size_t cap);
void mc__elog_close(mc__elog_t *l);

/* Appending n bytes of whole records as one commit, in two steps so that several commits can be
 * in flight at once: entries counts the log entries they take (0 for data that is not records),
 * reserve takes that many sequence numbers (in the order commits are to be acknowledged), write
 * records them durably: 0, or -1 when they cannot be recorded while this writer leads (fenced
 * out, or etcd unreachable until the lease ran out). A commit is acknowledged only once every
 * commit reserved before it was written: at open, entries after a missing one are dropped. */
size_t mc__elog_entries(const uint8_t *data, size_t n);
uint64_t mc__elog_reserve(mc__elog_t *l, size_t n_entries);
int mc__elog_write(mc__elog_t *l, uint64_t first_seq, const uint8_t *data, size_t n);
/* The three in one, for one writer. */
int mc__elog_append(mc__elog_t *l, const uint8_t *data, size_t n);

/* The sequence number the next reservation starts at (no commit may be in flight); a snapshot
 * taken from now on is installed with it (entries from here are replayed after it). */
uint64_t mc__elog_mark(mc__elog_t *l);
/* Installs body (records) as the snapshot followed by the log from log_from: 0 or -1 (fenced out
 * or etcd unreachable: the old snapshot and log stay in force). May run beside an append. */
int mc__elog_install(mc__elog_t *l, const uint8_t *body, size_t n, uint64_t log_from);
/* Bytes appended since the last install, and the size of the last snapshot installed. */
uint64_t mc__elog_appended(mc__elog_t *l);
uint64_t mc__elog_snapshot_bytes(mc__elog_t *l);
#endif
