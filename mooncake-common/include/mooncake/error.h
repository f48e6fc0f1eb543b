/* The one error table shared by the Transfer Engine and the Store.
 *
 * Every public function returns 0 on success or one of these negative codes. Values match the
 * reference Mooncake's so Python callers see the same integers. The TE and Store tables of the
 * reference overlap in value (-1, -101, -200, ...): both names exist here with the same number;
 * mc_strerror() describes a code in TE terms, mc_store_strerror() in Store terms. */
#ifndef MOONCAKE_ERROR_H
#define MOONCAKE_ERROR_H

#include "mooncake/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(NAME, value, domain, message); domain is TE, STORE or BOTH. */
#define MC_ERRNO_MAP(X)                                                                            \
    X(OK, 0, BOTH, "success")                                                                      \
    X(INVALID_ARGUMENT, -1, TE, "invalid argument")                                                \
    X(TOO_MANY_REQUESTS, -2, TE, "too many requests")                                              \
    X(ADDRESS_NOT_REGISTERED, -3, TE, "address not registered")                                    \
    X(BATCH_BUSY, -4, TE, "batch still has unfinished tasks")                                      \
    X(DEVICE_NOT_FOUND, -6, TE, "device not found")                                                \
    X(ADDRESS_OVERLAPPED, -7, TE, "address range overlaps a registered one")                       \
    X(DNS, -101, TE, "host name could not be resolved")                                            \
    X(SOCKET, -102, TE, "socket error")                                                            \
    X(MALFORMED_JSON, -103, TE, "malformed JSON")                                                  \
    X(REJECT_HANDSHAKE, -104, TE, "peer rejected the handshake")                                   \
    X(METADATA, -200, TE, "metadata error")                                                        \
    X(ENDPOINT, -201, TE, "endpoint error")                                                        \
    X(CONTEXT, -202, TE, "context error")                                                          \
    X(NUMA, -300, TE, "NUMA error")                                                                \
    X(CLOCK, -301, TE, "clock error")                                                              \
    X(MEMORY, -302, TE, "out of memory")                                                           \
    X(NOT_IMPLEMENTED, -303, TE, "not implemented")                                                \
    X(INTERNAL_ERROR, -1, STORE, "internal error")                                                 \
    X(BUFFER_OVERFLOW, -10, STORE, "buffer too small")                                             \
    X(SHARD_INDEX_OUT_OF_RANGE, -100, STORE, "shard index out of range")                           \
    X(SEGMENT_NOT_FOUND, -101, STORE, "segment not found")                                         \
    X(SEGMENT_ALREADY_EXISTS, -102, STORE, "segment already exists")                               \
    X(CLIENT_NOT_FOUND, -103, STORE, "client not found")                                           \
    X(NO_AVAILABLE_HANDLE, -200, STORE, "no space available, even after eviction")                 \
    X(INVALID_VERSION, -300, STORE, "invalid version")                                             \
    X(INVALID_KEY, -400, STORE, "invalid key")                                                     \
    X(WRITE_FAIL, -500, STORE, "write failed")                                                     \
    X(INVALID_PARAMS, -600, STORE, "invalid parameters")                                           \
    X(ILLEGAL_CLIENT, -601, STORE, "illegal client")                                               \
    X(INVALID_WRITE, -700, STORE, "invalid write")                                                 \
    X(INVALID_READ, -701, STORE, "invalid read")                                                   \
    X(INVALID_REPLICA, -702, STORE, "invalid replica")                                             \
    X(REPLICA_IS_NOT_READY, -703, STORE, "replica is not ready")                                   \
    X(OBJECT_NOT_FOUND, -704, STORE, "object not found")                                           \
    X(OBJECT_ALREADY_EXISTS, -705, STORE, "object already exists")                                 \
    X(OBJECT_HAS_LEASE, -706, STORE, "object has a lease")                                         \
    X(LEASE_EXPIRED, -707, STORE, "lease expired")                                                 \
    X(OBJECT_HAS_REPLICATION_TASK, -708, STORE, "object has a replication task in progress")       \
    X(TRANSFER_FAIL, -800, STORE, "transfer failed")                                               \
    X(CHECKSUM_MISMATCH, -801, STORE, "checksum mismatch")                                         \
    X(RPC_FAIL, -900, STORE, "RPC to the master failed")                                           \
    X(ETCD_OPERATION_ERROR, -1000, STORE, "etcd operation failed")                                 \
    X(ETCD_KEY_NOT_EXIST, -1001, STORE, "key not found in etcd")                                   \
    X(ETCD_TRANSACTION_FAIL, -1002, STORE, "etcd transaction failed")                              \
    X(ETCD_CTX_CANCELLED, -1003, STORE, "etcd call cancelled: deadline passed")                    \
    X(UNAVAILABLE_IN_CURRENT_STATUS, -1010, STORE, "unavailable in the current status")            \
    X(UNAVAILABLE_IN_CURRENT_MODE, -1011, STORE, "unavailable in the current mode")                \
    X(FILE_NOT_FOUND, -1100, STORE, "file not found")                                              \
    X(TASK_NOT_FOUND, -1400, STORE, "task not found")                                              \
    X(TASK_PENDING_LIMIT_EXCEEDED, -1401, STORE, "too many unfinished tasks")                      \
    X(JOB_NOT_FOUND, -1402, STORE, "job not found")

#define MC__ERR_ENUM(name, value, domain, msg) MC_ERR_##name = (value),
enum mc_err { MC_ERRNO_MAP(MC__ERR_ENUM) };
#undef MC__ERR_ENUM

/* Message for a code, read as a Transfer Engine code (falls back to the Store meaning). */
MC_API const char *mc_strerror(int code);
/* Message for a code, read as a Store code (falls back to the TE meaning). */
MC_API const char *mc_store_strerror(int code);
/* Symbolic name without prefix ("ADDRESS_NOT_REGISTERED"), TE meaning first; "UNKNOWN" if none. */
MC_API const char *mc_err_name(int code);
MC_API const char *mc_store_err_name(int code);

#ifdef __cplusplus
}
#endif
#endif
