/* An etcd v3 client over etcd's JSON gateway (HTTP/1.1 POST to /v3/..., keys and values in
 * base64), so the default wheel needs no gRPC: put, range (prefix, paging), delete range, txn,
 * leases with a keep-alive thread, and watch on a chunked stream.
 *
 * Endpoints: "h1:2379,h2:2379" (also ';' between them, and "http://" before each, as the
 * reference's connection strings write them). A call tries the endpoint that answered last, then
 * the others in order, all within one deadline (the client's timeout_ms): a dead endpoint costs
 * a refused connect, a stalled one at most its share of the deadline. An endpoint that answers
 * "unavailable" (no leader, a member cut off) is skipped like a dead one.
 *
 * Retries and ambiguity: a call that failed before its request reached a server is tried on the
 * next endpoint. One whose request was sent but got no answer may have been applied; put, range,
 * delete, lease keep-alive and revoke are retried anyway (repeating them is harmless), a txn is
 * not: it returns MC_ERR_ETCD_TRANSACTION_FAIL and the caller reads back what happened.
 *
 * Return codes: 0; MC_ERR_INVALID_ARGUMENT; MC_ERR_MEMORY; MC_ERR_ETCD_KEY_NOT_EXIST (a get of an
 * absent key, a lease that is gone); MC_ERR_ETCD_CTX_CANCELLED (the deadline passed with no
 * endpoint answering); MC_ERR_ETCD_OPERATION_ERROR (etcd refused the request, or no endpoint
 * could be reached: etcd's own message is logged); MC_ERR_MALFORMED_JSON (an answer that is not
 * etcd's: bad JSON, bad base64, too large). The client is thread-safe: calls from many threads
 * share it (each call is one connection). */
#ifndef MC_COMMON_ETCD_H
#define MC_COMMON_ETCD_H
#include <stddef.h>
#include <stdint.h>

#define MC_ETCD_MAX_ENDPOINTS 16
#define MC_ETCD_DEFAULT_TIMEOUT_MS 5000
/* A response larger than this is refused as malformed (a range page, a txn). */
#define MC_ETCD_MAX_RESPONSE (64u << 20)
/* One watch message (a batch of events) at most this large. */
#define MC_ETCD_MAX_WATCH_MSG (16u << 20)

typedef struct mc_etcd mc_etcd_t;

/* Parses endpoints and makes a client; nothing is contacted yet. timeout_ms <= 0 picks
 * MC_ETCD_DEFAULT_TIMEOUT_MS. MC_ERR_INVALID_ARGUMENT for an empty list, a bad host:port, a
 * scheme other than http:// or more than MC_ETCD_MAX_ENDPOINTS. */
int mc__etcd_open(const char *endpoints, int timeout_ms, mc_etcd_t **out);
void mc__etcd_close(mc_etcd_t *c);
size_t mc__etcd_endpoint_count(const mc_etcd_t *c);
int mc__etcd_timeout(const mc_etcd_t *c);

/* One key/value as etcd holds it. key and value are mc__malloc'ed and NUL-terminated (not
 * counted in the lengths) so text keys can be used as strings. */
typedef struct mc_etcd_kv {
    uint8_t *key;
    size_t key_len;
    uint8_t *value;
    size_t value_len;
    int64_t create_revision, mod_revision, version, lease;
} mc_etcd_kv_t;

typedef struct mc_etcd_kvs {
    mc_etcd_kv_t *kvs;
    size_t n;
    int more;         /* more keys in the range than were returned (paging) */
    int64_t count;    /* keys in the whole range */
    int64_t revision; /* the store's revision the answer was read at */
} mc_etcd_kvs_t;
void mc__etcd_kv_free(mc_etcd_kv_t *kv);
void mc__etcd_kvs_free(mc_etcd_kvs_t *r);

/* lease 0: none. *revision (may be NULL) receives the revision of the write. */
int mc__etcd_put(mc_etcd_t *c, const void *key, size_t key_len, const void *val, size_t val_len,
                 int64_t lease, int64_t *revision);
/* One key: MC_ERR_ETCD_KEY_NOT_EXIST when absent. */
int mc__etcd_get(mc_etcd_t *c, const void *key, size_t key_len, mc_etcd_kv_t *out);
/* Keys in [key, range_end) (range_end NULL: key alone; "\0" of length 1: every key >= key),
 * at most limit of them (0: all) read at revision (0: latest). */
int mc__etcd_range(mc_etcd_t *c, const void *key, size_t key_len, const void *range_end,
                   size_t range_end_len, int64_t limit, int64_t revision, mc_etcd_kvs_t *out);
/* Every key starting with prefix, fetched page_size keys per request (0: 1000), all pages read at
 * the first page's revision so the result is one consistent snapshot. */
int mc__etcd_range_prefix(mc_etcd_t *c, const void *prefix, size_t prefix_len, int64_t page_size,
                          mc_etcd_kvs_t *out);
/* The range_end that makes [prefix, end) the keys starting with prefix: the prefix with its last
 * byte below 0xff incremented and what follows dropped; "\0" (length 1) when there is none
 * (an empty prefix or all 0xff: every key). out needs prefix_len (or 1) bytes. */
size_t mc__etcd_prefix_end(const void *prefix, size_t prefix_len, uint8_t *out);
/* *deleted (may be NULL) receives how many keys were removed (0 is not an error). */
int mc__etcd_delete(mc_etcd_t *c, const void *key, size_t key_len, const void *range_end,
                    size_t range_end_len, int64_t *deleted);

/* Drops history before revision (watches and ranges at older revisions then fail). */
int mc__etcd_compact(mc_etcd_t *c, int64_t revision);

/* --- transactions: if every compare holds, the success ops run, else the failure ops --- */
enum {
    MC_ETCD_CMP_VERSION,
    MC_ETCD_CMP_CREATE,
    MC_ETCD_CMP_MOD,
    MC_ETCD_CMP_VALUE,
    MC_ETCD_CMP_LEASE
};
enum { MC_ETCD_EQUAL, MC_ETCD_GREATER, MC_ETCD_LESS, MC_ETCD_NOT_EQUAL };
typedef struct mc_etcd_cmp {
    int target; /* MC_ETCD_CMP_* */
    int result; /* MC_ETCD_EQUAL, ... */
    const void *key;
    size_t key_len;
    int64_t number;    /* version, create/mod revision or lease, by target */
    const void *value; /* MC_ETCD_CMP_VALUE */
    size_t value_len;
} mc_etcd_cmp_t;

enum { MC_ETCD_OP_PUT, MC_ETCD_OP_RANGE, MC_ETCD_OP_DELETE };
typedef struct mc_etcd_op {
    int type; /* MC_ETCD_OP_* */
    const void *key;
    size_t key_len;
    const void *range_end; /* RANGE, DELETE; NULL: the key alone */
    size_t range_end_len;
    const void *value; /* PUT */
    size_t value_len;
    int64_t lease; /* PUT */
} mc_etcd_op_t;

typedef struct mc_etcd_txn_result {
    int succeeded;         /* 1: the compares held and the success ops ran */
    int64_t revision;      /* the store's revision after the txn */
    size_t n;              /* ops of the branch that ran */
    mc_etcd_kvs_t *ranges; /* one per op of that branch: a RANGE op's keys, empty for others */
    int64_t *deleted;      /* one per op: a DELETE op's count, 0 for others */
} mc_etcd_txn_result_t;
void mc__etcd_txn_result_free(mc_etcd_txn_result_t *r);
/* Returns 0 whichever branch ran (out->succeeded tells which); out may be NULL. */
int mc__etcd_txn(mc_etcd_t *c, const mc_etcd_cmp_t *cmps, size_t ncmp, const mc_etcd_op_t *success,
                 size_t nsuccess, const mc_etcd_op_t *failure, size_t nfailure,
                 mc_etcd_txn_result_t *out);

/* --- leases --- */
/* A lease of ttl_s seconds; *id in: the id wanted (0: etcd picks one), out: the lease. *granted_ttl
 * (may be NULL): what etcd gave. */
int mc__etcd_lease_grant(mc_etcd_t *c, int64_t ttl_s, int64_t *id, int64_t *granted_ttl);
/* One refresh; *ttl (may be NULL) the TTL restarted. MC_ERR_ETCD_KEY_NOT_EXIST: expired/revoked. */
int mc__etcd_lease_keepalive(mc_etcd_t *c, int64_t id, int64_t *ttl);
/* Ends the lease now; its keys are deleted. MC_ERR_ETCD_KEY_NOT_EXIST when already gone. */
int mc__etcd_lease_revoke(mc_etcd_t *c, int64_t id);
/* Remaining TTL in seconds (-1: expired), and the granted TTL (may be NULL). */
int mc__etcd_lease_ttl(mc_etcd_t *c, int64_t id, int64_t *remaining, int64_t *granted);

/* A thread that refreshes a lease every ttl/3 seconds (no more often than every 200 ms).
 * When the lease is found gone, or no refresh succeeded for a whole TTL (it has then expired on
 * the servers' clock), lost(ctx, id, err) is called once from that thread and refreshing stops.
 * lost may be NULL. stop joins the thread and does not revoke. */
typedef struct mc_etcd_keeper mc_etcd_keeper_t;
typedef void (*mc_etcd_lease_lost_fn)(void *ctx, int64_t id, int err);
int mc__etcd_keeper_start(mc_etcd_t *c, int64_t id, int64_t ttl_s, mc_etcd_lease_lost_fn lost,
                          void *ctx, mc_etcd_keeper_t **out);
/* 1 while the lease is believed alive. */
int mc__etcd_keeper_alive(const mc_etcd_keeper_t *k);
void mc__etcd_keeper_stop(mc_etcd_keeper_t *k);

/* --- watch --- */
enum { MC_ETCD_EVENT_PUT, MC_ETCD_EVENT_DELETE };
typedef struct mc_etcd_event {
    int type;        /* MC_ETCD_EVENT_* */
    mc_etcd_kv_t kv; /* for a DELETE: key and mod_revision (the deletion's) only */
} mc_etcd_event_t;
/* Events of one revision batch, in order; the arrays are freed when the callback returns.
 * err != 0 ends the watch (no more calls): MC_ERR_ETCD_OPERATION_ERROR when etcd canceled it
 * (the start revision was compacted: *revision is then the compact revision, restart after a
 * fresh range), MC_ERR_ETCD_CTX_CANCELLED when no endpoint could be reached again within the
 * client's timeout. */
typedef void (*mc_etcd_watch_fn)(void *ctx, const mc_etcd_event_t *events, size_t n,
                                 int64_t revision, int err);
typedef struct mc_etcd_watch mc_etcd_watch_t;
/* Watches [key, range_end) (range_end as in mc__etcd_range) from start_revision (0: from now).
 * Returns once etcd confirmed the watch, so every change after the return is seen. A broken
 * stream is resumed on any endpoint from the revision after the last one delivered, so no event
 * is lost or repeated. fn runs on the watch's own thread. */
int mc__etcd_watch_start(mc_etcd_t *c, const void *key, size_t key_len, const void *range_end,
                         size_t range_end_len, int64_t start_revision, mc_etcd_watch_fn fn,
                         void *ctx, mc_etcd_watch_t **out);
/* Stops (joins the thread; fn is not called after it returns). Not from inside fn. */
void mc__etcd_watch_stop(mc_etcd_watch_t *w);

/* --- the codec, no I/O (unit tests and fuzz/etcd_fuzz.c) --- */
size_t mc__etcd_b64_len(size_t n); /* encoded length without the NUL */
/* Writes the encoding and a NUL into out (mc__etcd_b64_len(n) + 1 bytes). */
void mc__etcd_b64_encode(const void *in, size_t n, char *out);
/* Strict standard alphabet with padding (what etcd sends): 0 and *out_len, or
 * MC_ERR_MALFORMED_JSON. out needs n / 4 * 3 bytes. */
int mc__etcd_b64_decode(const char *in, size_t n, uint8_t *out, size_t *out_len);

/* Parses etcd's error answer {"error": ..., "message": ..., "code": N}: returns the gRPC code
 * (>= 0) with the message in msg, or -1 when body is not one. */
int mc__etcd_parse_error(const char *body, size_t len, char *msg, size_t cap);
/* The answers of range, txn and lease calls. */
int mc__etcd_parse_range(const char *body, size_t len, mc_etcd_kvs_t *out);
int mc__etcd_parse_txn(const char *body, size_t len, mc_etcd_txn_result_t *out);
/* Header revision of put / delete answers, and a delete's count (may be NULL). */
int mc__etcd_parse_write(const char *body, size_t len, int64_t *revision, int64_t *deleted);
/* grant: ID and TTL; keep-alive (wrapped in "result"): TTL, 0 when the lease is gone. */
int mc__etcd_parse_lease(const char *body, size_t len, int64_t *id, int64_t *ttl);
/* Builds a request body (mc__malloc'ed, NUL-terminated). */
int mc__etcd_build_txn(const mc_etcd_cmp_t *cmps, size_t ncmp, const mc_etcd_op_t *success,
                       size_t nsuccess, const mc_etcd_op_t *failure, size_t nfailure, char **out);

/* The watch stream: an HTTP response head then a chunked body of newline-separated JSON
 * messages. feed() takes bytes as they arrive and calls msg for each whole message. */
typedef struct mc_etcd_stream {
    int state;  /* internal */
    int status; /* the HTTP status once the head is read */
    int chunked;
    uint64_t chunk_left;
    uint8_t *buf; /* the head, then the message being assembled */
    size_t len, cap;
    char size_line[32]; /* a chunk-size line being read */
    size_t size_len;
    size_t max_msg;
} mc_etcd_stream_t;
typedef int (*mc_etcd_msg_fn)(void *ctx, const char *msg, size_t len);
void mc__etcd_stream_init(mc_etcd_stream_t *s, size_t max_msg);
void mc__etcd_stream_free(mc_etcd_stream_t *s);
/* 0, the first non-zero value msg returned, MC_ERR_MALFORMED_JSON for bad framing or a message
 * past max_msg, MC_ERR_MEMORY. After a non-200 head the body is handed to msg as one message
 * when the stream ends (mc__etcd_stream_end). */
int mc__etcd_stream_feed(mc_etcd_stream_t *s, const uint8_t *p, size_t n, mc_etcd_msg_fn msg,
                         void *ctx);
int mc__etcd_stream_end(mc_etcd_stream_t *s, mc_etcd_msg_fn msg, void *ctx);

/* One watch message: {"result": {...}} or {"error": {...}}. */
typedef struct mc_etcd_watch_msg {
    int created, canceled;
    int64_t watch_id, revision, compact_revision;
    mc_etcd_event_t *events;
    size_t n;
    char cancel_reason[256];
} mc_etcd_watch_msg_t;
int mc__etcd_parse_watch_msg(const char *msg, size_t len, mc_etcd_watch_msg_t *out);
void mc__etcd_watch_msg_free(mc_etcd_watch_msg_t *m);
#endif
