/* Master RPC protocol: message types, the one request struct both sides share, and encoders /
 * decoders with no I/O (bytes in, structs out), so every decoder can be fuzzed.
 *
 * Every message is one frame of mooncake/common/frame.h. A request body always starts with the
 * 16-byte client id; the rest depends on the type:
 *
 *   MOUNT_SEGMENT      str segment_name, u64 base, u64 size, u64 epoch, u8 flags
 *   UNMOUNT_SEGMENT    str segment_name, u64 base
 *   PUT_START / UPSERT_START
 *                      u32 n, n x (str key, u64 value_len), config
 *   PUT_END / PUT_REVOKE / UPSERT_END / UPSERT_REVOKE
 *                      u32 n, n x (str key, u64 version): the version the start gave
 *   PUT_RESERVE        u32 n_slots (1..MC_MP_MAX_SLOTS), u64 slot_len, config: placements
 *                      reserved ahead, no key yet (see "Put slots" below)
 *   PUT_COMMIT         u32 n, n x (str key, u64 value_len, u64 slot): each key becomes a finished
 *                      object in the slot its PUT_RESERVE gave (value_len <= slot_len); a
 *                      value_len of 0 gives the slot back unused (the key is then only a label)
 *   PUT_COMMIT_FOR     u32 n, n x (client_id, str key, u64 value_len, u64 slot): PUT_COMMIT
 *                      entries of other clients, each naming the client whose slot it commits,
 *                      sent by a holder that forwards its writers' commits in one request
 *   GET_REPLICA_LIST / EXIST / SEGMENT_UNREACHABLE
 *                      u32 n, n x str key (segment names for SEGMENT_UNREACHABLE)
 *   REMOVE             u8 force, u32 n, n x str key
 *   REPLICA_CLEAR      str segment_name (may be empty: every replica), u32 n, n x str key
 *   REMOVE_ALL         u8 force [, str regex]: with a regex (POSIX extended, matched anywhere in
 *                      the key) only the objects whose keys match
 *   HEARTBEAT          u32 n_mounted: segments the client holds mounted (absent from older
 *                      clients: then an unknown client is told to remount, as before)
 *   UNREGISTER_CLIENT  (nothing more): a clean leave; the master unmounts every segment of the
 *                      client and forgets it now, as an expiry would, but counts it as a leave
 *   DISK_ANNOUNCE / DISK_FETCH / DISK_DONE / STORAGE_CONFIG and their replies: disk_proto.h
 *   config:            u32 replica_num, u8 flags (1 soft pin, 2 hard pin, 4 soft unpin),
 *                      u64 soft_pin_ttl_ms,
 *                      u32 n_preferred, n_preferred x str segment_name
 *
 * Single-key operations are batches of one on the wire. Replies carry MC_FRAME_F_REPLY and the
 * request id; a request that failed as a whole carries MC_FRAME_F_ERROR and (i32 code, str msg).
 * Reply bodies:
 *
 *   MOUNT / UNMOUNT / UNREGISTER_CLIENT
 *                                   (empty)
 *   PUT_END / PUT_REVOKE / REMOVE / SEGMENT_UNREACHABLE / UPSERT_END / UPSERT_REVOKE /
 *   REPLICA_CLEAR / PUT_COMMIT / PUT_COMMIT_FOR
 *                                   u32 n, n x i32 code
 *   EXIST                           u32 n, n x i32 (1 present, 0 absent, or a negative code)
 *   PUT_START / GET_REPLICA_LIST / UPSERT_START / PUT_RESERVE
 *                                   u32 n, n x key_replicas (PUT_RESERVE: n_slots of them)
 *   key_replicas:                   i32 code, u64 object size, u64 lease_ttl_ms (PUT_START,
 *                                   UPSERT_START: the version its end names), u32 n_replicas,
 *                                   n_replicas x (str segment_name, u64 addr, u64 size,
 *                                   u64 epoch, u8 status)
 *   REMOVE_ALL                      i64 removed count
 *   HEARTBEAT                       u8 status (MC_MP_CLIENT_*), u64 view_version
 *
 * Incarnations: a segment is mounted with an epoch, the incarnation of its memory that its owner
 * serves (the owner's engine refuses requests that name another). Every replica in a reply names
 * the epoch of the segment it was placed in; clients pass it with each transfer, so a placement
 * that outlived its incarnation (a master restart, an expiry and remount) fails instead of
 * touching the next incarnation's bytes. MOUNT with MC_MP_MOUNT_F_CHECK mounts nothing: it
 * answers 0 when the master holds exactly this mount (name, base, epoch) for the client, else
 * SEGMENT_NOT_FOUND, so that a reconnecting owner starts a new incarnation only when the master
 * really forgot the old one.
 *
 * Put slots: a client that puts small objects reserves placements ahead (PUT_RESERVE: each slot
 * is a put start without a key, logged and held like one, discarded after the same timeout),
 * writes an object's bytes into a slot it holds, and then sends one PUT_COMMIT, which records
 * the object exactly as a PUT_END would (on disk before the reply). A put then costs its write
 * and one round trip; the reserve's round trip is shared by the next puts. A slot is the
 * client's alone (its key names the client id), and a commit for a key that exists keeps the
 * first value and leaves the slot reserved (OBJECT_ALREADY_EXISTS), for the client to reuse.
 * PUT_COMMIT_FOR carries the commits of several clients in one request (a holder forwarding the
 * commits its writers sent with their bytes, so that they share the master's round trip): each
 * entry is served exactly as a PUT_COMMIT entry from the client it names. The master trusts the
 * forwarder as it trusts any client of the cluster; the slot's version is the only check.
 */
#ifndef MC_STORE_PROTO_MASTER_PROTO_H
#define MC_STORE_PROTO_MASTER_PROTO_H
#include <stddef.h>
#include <stdint.h>

#include "mooncake/common/frame.h"

/* Limits enforced by both encoder and decoder. */
#define MC_MP_MAX_BODY (72u << 20)  /* bytes in one frame body */
#define MC_MP_MAX_BATCH 16384u      /* keys in one frame; the client splits longer batches */
#define MC_MP_MAX_KEY 4096u         /* key length in bytes (1..MAX) */
#define MC_MP_MAX_SEGMENT_NAME 255u /* TE segment name length */
#define MC_MP_MAX_REPLICA_NUM 8u    /* replicas per object */
#define MC_MP_MAX_PREFERRED 8u      /* preferred segments in one config */
#define MC_MP_CLIENT_ID_LEN 16u
#define MC_MP_MAX_SEGMENT_SIZE (1ull << 50) /* bytes in one mounted segment (1 PiB) */
#define MC_MP_MAX_SLOTS 1024u               /* slots one PUT_RESERVE asks for */
/* The contract between a client's replica-location cache and the master: a client reads through
 * a granted replica list for at most MC_MP_CACHED_LEASE_MS from sending the request that got it
 * (or the lease, when shorter); a request that takes a leased value away (an upsert's new value,
 * a forced remove) answers only once MC_MP_CACHED_LEASE_MS + MC_MP_CACHED_LEASE_SLACK_MS have
 * passed since the value's last get (or the lease ended, when sooner), and a forced removal
 * holds the value's space that long. So a read that starts after such an answer never returns
 * the value that went, and no cached read ever touches space given to another value. Short,
 * because those requests wait it out. A plain remove, eviction and replica clear wait for the
 * whole lease, as before. */
#define MC_MP_CACHED_LEASE_MS 200u
#define MC_MP_CACHED_LEASE_SLACK_MS 50u

/* Every message type of the master RPC, in one table: the enum, the names, the body-shape
 * predicates the codec uses, the reference's metric names and the master's dispatch rows are all
 * generated from it, so adding a type is one row here (and its body in the codec). Columns:
 *
 *   X(TYPE, name, value, body, op, ref_single, ref_batch)
 *
 *   TYPE        MC_MP_<TYPE>
 *   name        the op label of the mooncake_master_* metrics and of the logs ("put_start")
 *   value       the type byte on the wire: never renumber a row (the numbering has no gaps now,
 *               but a removed type must leave its number unused)
 *   body        MC_MP_B_* bits: the request body is a key batch, each key with a u64, then a
 *               config; 0: a body of its own, coded by hand in master_proto.c
 *   op          the master's dispatch row that serves it (mc__row_<op> in master/ops.c)
 *   ref_single  the reference's metric family for a call with one key ("" for none)
 *   ref_batch   the same for its batch call ("" for none)
 *
 * The task and disk rows are kept as maps of their own (see task_proto.h and disk_proto.h for
 * their bodies), so their families can be told apart (mc__mp_is_task). */
#define MC_MP_B_KEYS 0x1u     /* u32 n, n x str key */
#define MC_MP_B_KEY_U64 0x2u  /* each key followed by a u64 (a value length or a version) */
#define MC_MP_B_CONFIG 0x4u   /* the keys followed by a config */
#define MC_MP_B_KEY_SLOT 0x8u /* each key's u64 followed by a second one (a slot) */
/* each key preceded by a client id (MC_MP_CLIENT_ID_LEN bytes): whose slot the entry names */
#define MC_MP_B_KEY_CLIENT 0x10u
#define MC_MP_B_PUT (MC_MP_B_KEYS | MC_MP_B_KEY_U64 | MC_MP_B_CONFIG)
#define MC_MP_B_VERSIONS (MC_MP_B_KEYS | MC_MP_B_KEY_U64)

#define MC_MP_CORE_MAP(X)                                                                          \
    X(MOUNT_SEGMENT, mount_segment, 1, 0, mount, "mount_segment", "")                              \
    X(UNMOUNT_SEGMENT, unmount_segment, 2, 0, mount, "unmount_segment", "")                        \
    X(PUT_START, put_start, 3, MC_MP_B_PUT, put_start, "put_start", "batch_put_start")             \
    X(PUT_END, put_end, 4, MC_MP_B_VERSIONS, codes, "put_end", "batch_put_end")                    \
    X(PUT_REVOKE, put_revoke, 5, MC_MP_B_VERSIONS, codes, "put_revoke", "batch_put_revoke")        \
    X(GET_REPLICA_LIST, get_replica_list, 6, MC_MP_B_KEYS, get, "get_replica_list",                \
      "batch_get_replica_list")                                                                    \
    X(EXIST, exist, 7, MC_MP_B_KEYS, codes, "exist_key", "batch_exist_key")                        \
    X(REMOVE, remove, 8, MC_MP_B_KEYS, codes, "remove", "")                                        \
    /* the reference's remove_all and remove_by_regex: metrics.c tells them apart */               \
    X(REMOVE_ALL, remove_all, 9, 0, remove_all, "", "")                                            \
    X(HEARTBEAT, heartbeat, 10, 0, heartbeat, "ping", "")                                          \
    /* A client could not move bytes to or from these segments: the master places nothing more     \
     * on them until their owner heartbeats again (a dead node would otherwise take a share of     \
     * every put until client_ttl expires it). */                                                  \
    X(SEGMENT_UNREACHABLE, segment_unreachable, 11, MC_MP_B_KEYS, codes, "", "")                   \
    /* Insert or replace: the new value is written to new space while readers keep the old one;    \
     * its end swaps them (see ops.c). The version names this writer's placement, so an end        \
     * never publishes another writer's unfinished bytes. */                                       \
    X(UPSERT_START, upsert_start, 12, MC_MP_B_PUT, put_start, "", "")                              \
    X(UPSERT_END, upsert_end, 13, MC_MP_B_VERSIONS, codes, "", "")                                 \
    X(UPSERT_REVOKE, upsert_revoke, 14, MC_MP_B_VERSIONS, codes, "", "")                           \
    /* Drops the replicas of unleased objects (all of them, or those on one segment). */           \
    X(REPLICA_CLEAR, replica_clear, 15, MC_MP_B_KEYS, codes, "", "batch_replica_clear")            \
    /* A client that closes cleanly says so: it is not counted or logged as expired. */            \
    X(UNREGISTER_CLIENT, unregister_client, 16, 0, unregister, "", "")                             \
    /* Put slots (see the top): placements reserved ahead, then one commit per put or batch. */    \
    X(PUT_RESERVE, put_reserve, 24, 0, put_start, "", "")                                          \
    X(PUT_COMMIT, put_commit, 25, MC_MP_B_KEYS | MC_MP_B_KEY_U64 | MC_MP_B_KEY_SLOT, put_commit,   \
      "", "")                                                                                      \
    /* PUT_COMMIT entries of several clients, forwarded in one request by the holder of their      \
     * slots: each entry names its client (the request's client id is the forwarder's). */         \
    X(PUT_COMMIT_FOR, put_commit_for, 27,                                                          \
      MC_MP_B_KEYS | MC_MP_B_KEY_CLIENT | MC_MP_B_KEY_U64 | MC_MP_B_KEY_SLOT, put_commit, "", "")

/* Master-driven replica tasks (task_proto.h): any client creates and queries them; the client
 * that owns the source replica fetches its tasks with its heartbeats, moves the bytes and
 * reports. CREATE is the reference's CreateCopyTask and CreateMoveTask: metrics.c counts those
 * by the task's type. */
#define MC_MP_TASK_MAP(X)                                                                          \
    X(TASK_CREATE, task_create, 17, 0, task, "", "")                                               \
    X(TASK_QUERY, task_query, 18, 0, task, "query_task", "")                                       \
    X(TASK_FETCH, task_fetch, 19, 0, task, "fetch_tasks", "")                                      \
    X(TASK_REPORT, task_report, 20, 0, task, "update_task", "") /* MarkTaskToComplete */

/* The disk tier (disk_proto.h): a storage node with a disk directory announces what its disk
 * holds, fetches the offload / delete / promote work the master has for it, and reports the
 * offloads it finished. */
#define MC_MP_DISK_MAP(X)                                                                          \
    X(DISK_ANNOUNCE, disk_announce, 21, MC_MP_B_VERSIONS, codes, "", "")                           \
    X(DISK_FETCH, disk_fetch, 22, 0, disk_fetch, "", "")                                           \
    X(DISK_DONE, disk_done, 23, MC_MP_B_VERSIONS, codes, "", "")                                   \
    /* The reference's GetStorageConfig: where the shared-filesystem tier lives (--root_fs_dir) */ \
    X(STORAGE_CONFIG, storage_config, 26, 0, storage_config, "", "")

#define MC_MP_TYPE_MAP(X) MC_MP_CORE_MAP(X) MC_MP_TASK_MAP(X) MC_MP_DISK_MAP(X)

enum mc__mp_type {
#define MC__MP_ENUM(T, name, value, body, op, single, batch) MC_MP_##T = value,
    MC_MP_TYPE_MAP(MC__MP_ENUM)
#undef MC__MP_ENUM
};

/* One past the largest type value (sizes per-type arrays): the size of a union of one char
 * array per row, value + 1 long, is the largest of them, whatever order the rows come in. */
union mc__mp_type_span {
#define MC__MP_SPAN(T, name, value, body, op, single, batch) char T[(value) + 1];
    MC_MP_TYPE_MAP(MC__MP_SPAN)
#undef MC__MP_SPAN
};
enum { MC_MP_TYPE_MAX_ = (int)sizeof(union mc__mp_type_span) };

/* Heartbeat status. NEED_REMOUNT: the master holds fewer segments of this client than the client
 * has mounted (it restarted, or expired the client after client_ttl); the client must mount its
 * segments again. A client with no segments (a pure client) is always OK. */
enum { MC_MP_CLIENT_OK = 0, MC_MP_CLIENT_NEED_REMOUNT = 1 };
#define MC_MP_MOUNTS_UNKNOWN UINT32_MAX

/* Replica status as seen by clients. */
enum { MC_MP_REPLICA_PROCESSING = 0, MC_MP_REPLICA_COMPLETE = 1 };
/* A LOCAL_DISK replica (disk_proto.h): segment_name is the owning node's disk endpoint
 * ("host:port"), addr 0, epoch the version of the disk copy. Readers that predate the disk tier
 * skip it as they skip any replica that is not COMPLETE. */
#define MC_MP_REPLICA_DISK 2u

/* MOUNT flags. */
#define MC_MP_MOUNT_F_CHECK 0x1u

/* Config flags. */
#define MC_MP_CFG_SOFT_PIN 0x1u
#define MC_MP_CFG_HARD_PIN 0x2u
/* Neither soft-pin bit: an upsert keeps the replaced object's soft pin (PRESERVE). */
#define MC_MP_CFG_SOFT_UNPIN 0x4u
/* A storage node copies a disk object back into memory (promotion on hit): the put is allowed on
 * a key that exists only on disk, and the disk copy stays (it holds the same bytes). */
#define MC_MP_CFG_PROMOTE 0x8u

/* A byte string borrowed from someone else's buffer (not NUL-terminated). */
typedef struct mc__mp_str {
    const uint8_t *p;
    uint32_t len;
} mc__mp_str_t;

typedef struct mc__replicate_config {
    uint32_t replica_num;     /* 1..MC_MP_MAX_REPLICA_NUM */
    uint8_t flags;            /* MC_MP_CFG_* */
    uint64_t soft_pin_ttl_ms; /* 0: the master's default_kv_soft_pin_ttl */
    uint32_t n_preferred;
    mc__mp_str_t preferred[MC_MP_MAX_PREFERRED];
} mc__replicate_config_t;

/* One decoded (or to-be-encoded) request. Strings borrow from the frame body (decode) or from
 * the caller (encode); keys / value_lens are arrays of n_keys. */
typedef struct mc__mp_request {
    uint8_t type;
    uint64_t request_id;
    uint8_t client_id[MC_MP_CLIENT_ID_LEN];
    uint32_t n_keys;
    mc__mp_str_t *keys;
    /* PUT_COMMIT_FOR: the client whose slot each key goes into */
    uint8_t (*key_clients)[MC_MP_CLIENT_ID_LEN];
    uint64_t *value_lens; /* PUT_START / UPSERT_START / PUT_COMMIT(_FOR): lengths; ENDs / REVOKEs:
                             versions */
    uint64_t *slots;      /* PUT_COMMIT(_FOR): the slot (its version) each key goes into */
    uint32_t n_slots;     /* PUT_RESERVE: slots asked for; r->size is their length */
    mc__replicate_config_t config; /* PUT_START / UPSERT_START / PUT_RESERVE only */
    uint8_t force;                 /* REMOVE, REMOVE_ALL */
    mc__mp_str_t pattern;          /* REMOVE_ALL: a regex, or empty for every object */
    mc__mp_str_t segment_name;     /* MOUNT, UNMOUNT, REPLICA_CLEAR (may be empty) */
    uint64_t base, size;           /* MOUNT (size), UNMOUNT (base only); DISK_ANNOUNCE: disk id,
                                      capacity; PUT_RESERVE: the slot length */
    uint64_t epoch;                /* MOUNT */
    uint8_t mount_flags;           /* MOUNT: MC_MP_MOUNT_F_* */
    uint32_t n_mounted;            /* HEARTBEAT; MC_MP_MOUNTS_UNKNOWN when the peer sent none */
    /* Tasks (task_proto.h). CREATE: task_type, object_key, segment_name (the move's source;
     * empty for a copy), targets. QUERY and REPORT: task_id; REPORT: task_code, message.
     * FETCH: max_tasks. */
    uint8_t task_type;
    mc__mp_str_t object_key;
    uint32_t n_targets;
    mc__mp_str_t targets[MC_MP_MAX_REPLICA_NUM];
    uint8_t task_id[MC_MP_CLIENT_ID_LEN];
    int32_t task_code;
    mc__mp_str_t message;
    uint32_t max_tasks; /* also DISK_FETCH's max */
    /* decoder-owned storage; freed by mc__mp_request_free */
    void *owned_;
} mc__mp_request_t;

/* Appends one complete request frame to b. Returns 0, MC_ERR_INVALID_PARAMS (limits broken: empty
 * or long key, batch too large, body too large), MC_ERR_INVALID_KEY, or MC_ERR_MEMORY. */
int mc__mp_encode_request(mc_buf_t *b, const mc__mp_request_t *r);

/* Decodes a request body of a frame whose header is h. On success fills *out (free it with
 * mc__mp_request_free) and returns 0. Returns MC_ERR_INVALID_PARAMS on a malformed body (short,
 * trailing bytes, count beyond limits or bytes present), MC_ERR_INVALID_KEY on a key outside
 * 1..MC_MP_MAX_KEY, MC_ERR_NOT_IMPLEMENTED on an unknown type, MC_ERR_MEMORY. */
int mc__mp_decode_request(const mc_frame_header_t *h, const uint8_t *body, size_t len,
                          mc__mp_request_t *out);
void mc__mp_request_free(mc__mp_request_t *r);

/* --- replies --- */

typedef struct mc__replica_desc {
    char segment_name[MC_MP_MAX_SEGMENT_NAME + 1]; /* NUL-terminated TE segment name */
    uint64_t addr;                                 /* remote address inside that segment */
    uint64_t size;
    uint64_t epoch; /* incarnation of the segment it was placed in: name it in every transfer */
    uint8_t status; /* MC_MP_REPLICA_* */
} mc__replica_desc_t;

typedef struct mc__key_replicas {
    int32_t code;          /* 0 or a negative MC_ERR_* for this key */
    uint64_t size;         /* object size in bytes */
    uint64_t lease_ttl_ms; /* GET_REPLICA_LIST: how long the granted lease lasts */
    uint64_t version;      /* PUT_START / UPSERT_START: what the end or revoke must name */
    uint32_t n_replicas;
    mc__replica_desc_t replicas[MC_MP_MAX_REPLICA_NUM];
    /* Not on the wire: the reader sets it to the key asked for (a LOCAL_DISK replica is read
     * by key from its node); NULL where nobody did, and then disk replicas are not read. */
    const char *key;
} mc__key_replicas_t;

/* Reply frames: begin appends the header (MC_FRAME_F_REPLY | flags) and returns where the frame
 * starts; end closes it: 0, or MC_ERR_MEMORY when an append to b failed (a failed append leaves
 * b failed, so the writes between them need no checks). */
size_t mc__mp_reply_begin(mc_buf_t *b, uint8_t type, uint16_t flags, uint64_t request_id);
int mc__mp_reply_end(mc_buf_t *b, size_t frame_start);
/* A list reply starts with its count: begin, u32 n, then the caller's n entries, then end. */
int mc__mp_list_reply_begin(mc_buf_t *b, uint8_t type, uint64_t request_id, uint32_t n,
                            size_t *frame_start);

/* Reply encoders append a complete reply frame (header included). */
int mc__mp_encode_error_reply(mc_buf_t *b, uint8_t type, uint64_t request_id, int32_t code,
                              const char *msg);
int mc__mp_encode_empty_reply(mc_buf_t *b, uint8_t type, uint64_t request_id);
int mc__mp_encode_codes_reply(mc_buf_t *b, uint8_t type, uint64_t request_id, uint32_t n,
                              const int32_t *codes);
int mc__mp_encode_replicas_reply(mc_buf_t *b, uint8_t type, uint64_t request_id, uint32_t n,
                                 const mc__key_replicas_t *items);
int mc__mp_encode_remove_all_reply(mc_buf_t *b, uint64_t request_id, int64_t removed);
int mc__mp_encode_heartbeat_reply(mc_buf_t *b, uint64_t request_id, uint8_t status,
                                  uint64_t view_version);

/* Replicas replies are large; the master writes them one key at a time without building
 * mc__key_replicas_t arrays: begin (n), n x item header + replicas, then frame_end. */
int mc__mp_replicas_reply_begin(mc_buf_t *b, uint8_t type, uint64_t request_id, uint32_t n,
                                size_t *frame_start);
int mc__mp_replicas_reply_item(mc_buf_t *b, int32_t code, uint64_t size, uint64_t lease_ttl_ms,
                               uint32_t n_replicas);
int mc__mp_replicas_reply_replica(mc_buf_t *b, const char *segment_name, uint32_t name_len,
                                  uint64_t addr, uint64_t size, uint64_t epoch, uint8_t status);

/* Reply decoders (client side). Each takes the frame header and body. A reply with
 * MC_FRAME_F_ERROR yields its code (negative) and copies its message into err (may be NULL).
 * A malformed reply, or one whose count differs from `n`, is MC_ERR_RPC_FAIL. */
int mc__mp_decode_error(const mc_frame_header_t *h, const uint8_t *body, size_t len, char *err,
                        size_t err_cap);
int mc__mp_decode_codes_reply(const mc_frame_header_t *h, const uint8_t *body, size_t len,
                              uint32_t n, int32_t *codes);
int mc__mp_decode_replicas_reply(const mc_frame_header_t *h, const uint8_t *body, size_t len,
                                 uint32_t n, mc__key_replicas_t *out);
int mc__mp_decode_remove_all_reply(const mc_frame_header_t *h, const uint8_t *body, size_t len,
                                   int64_t *removed);
int mc__mp_decode_heartbeat_reply(const mc_frame_header_t *h, const uint8_t *body, size_t len,
                                  uint8_t *status, uint64_t *view_version);
/* Reads a 16-byte id (a client's or a task's): 0, or -1 when fewer bytes are left. */
int mc__mp_cur_id(mc_cursor_t *cur, uint8_t id[MC_MP_CLIENT_ID_LEN]);
/* The common start of every reply decoder: 0 for a success reply, the error reply's code, or
 * MC_ERR_RPC_FAIL (not a reply, or a body missing). */
int mc__mp_reply_check(const mc_frame_header_t *h, const uint8_t *body, size_t len);
/* mc__mp_reply_check, and a cursor over the body. */
int mc__mp_reply_open(const mc_frame_header_t *h, const uint8_t *body, size_t len,
                      mc_cursor_t *cur);
/* mc__mp_reply_open, then a u32 count of at most limit entries of at least min_entry bytes each:
 * 0 with *n, the error reply's code, or MC_ERR_RPC_FAIL. */
int mc__mp_reply_list(const mc_frame_header_t *h, const uint8_t *body, size_t len, uint32_t limit,
                      size_t min_entry, mc_cursor_t *cur, uint32_t *n);
/* Reads one entry of a list reply at cur into entry: 0, or nonzero for bytes that are no entry. */
typedef int (*mc__mp_entry_fn)(mc_cursor_t *cur, void *entry);
/* mc__mp_reply_list, then each entry read by fn into out (entries of size bytes), and nothing
 * left over: 0 with *n, the error reply's code, or MC_ERR_RPC_FAIL (*n 0). */
int mc__mp_decode_list(const mc_frame_header_t *h, const uint8_t *body, size_t len, uint32_t limit,
                       size_t min_entry, mc__mp_entry_fn fn, void *out, size_t size, uint32_t *n);
/* A reply of one fixed record: mc__mp_reply_open, fn reads the record into out, and nothing is
 * left over: 0, the error reply's code, or MC_ERR_RPC_FAIL. */
int mc__mp_decode_fields(const mc_frame_header_t *h, const uint8_t *body, size_t len,
                         mc__mp_entry_fn fn, void *out);
/* Reads a str of at most max bytes into out (max + 1 bytes), NUL-terminated, its length in *len
 * (may be NULL): 0, or -1 for bytes that are no such str. */
int mc__mp_cur_text(mc_cursor_t *cur, uint32_t max, char *out, uint32_t *len);
/* For MOUNT / UNMOUNT / UNREGISTER_CLIENT: 0, or the error reply's code. */
int mc__mp_decode_empty_reply(const mc_frame_header_t *h, const uint8_t *body, size_t len);

/* What the map says of one type; NULL for a type this build does not know. The reference names
 * are NULL where it has no such metric. */
typedef struct mc__mp_type_info {
    const char *name;
    uint8_t body; /* MC_MP_B_* */
    const char *ref_single;
    const char *ref_batch;
} mc__mp_type_info_t;
const mc__mp_type_info_t *mc__mp_type_info(uint8_t type);

/* The map's name of a type, or "unknown". */
const char *mc__mp_type_name(uint8_t type);
/* 1 for the starts of a write (PUT_START, UPSERT_START: the rows with MC_MP_B_CONFIG): their
 * request carries a config and value lengths, their reply the version the end must name. */
int mc__mp_is_put_start(uint8_t type);
/* 1 for the rows of MC_MP_TASK_MAP. */
int mc__mp_is_task(uint8_t type);
#endif
