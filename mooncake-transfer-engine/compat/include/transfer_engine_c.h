/* Source compatibility with the reference Mooncake's C interface (transfer_engine_c.h).
 *
 * Programs written against the reference (NIXL's Mooncake plugin, Rust/Go bindings) build and
 * link against libtransfer_engine unchanged. Names, types, macro values and struct layouts follow
 * the reference; the implementation sits on the mc_engine_* API (mooncake/transfer_engine.h).
 *
 * Conventions kept from the reference: functions returning int give 0 or a negative code (the
 * numbers of mooncake/error.h); openSegment gives a negative code on failure; allocateBatchID
 * gives INVALID_BATCH on failure; strings passed in are copied, never retained. This header is
 * self-contained on purpose: it includes nothing but libc headers. */
#ifndef TRANSFER_ENGINE_C
#define TRANSFER_ENGINE_C

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The reference spells these as macros, not typedefs; code may rely on either form compiling. */
#define segment_handle_t int32_t
#define segment_id_t int32_t
#define file_id_t uint32_t
#define batch_id_t uint64_t
#define LOCAL_SEGMENT (0)
#define INVALID_BATCH UINT64_MAX

#define OPCODE_READ (0)
#define OPCODE_WRITE (1)

/* file_id sits in what older releases left as padding after target_id, so the layout is the same
 * with or without it. It is ignored here (no file segments), so callers that never set it are
 * fine. */
struct transfer_request {
    int opcode;
    void *source;
    segment_id_t target_id;
    file_id_t file_id;
    uint64_t target_offset; /* the peer's virtual address inside memory it registered */
    uint64_t length;
};
typedef struct transfer_request transfer_request_t;

struct notify_msg {
    char *name;
    char *msg;
};
typedef struct notify_msg notify_msg_t;

#define STATUS_WAITING (0)
#define STATUS_PENDING (1)
#define STATUS_INVALID (2)
#define STATUS_CANCELED (3)
#define STATUS_COMPLETED (4)
#define STATUS_TIMEOUT (5)
#define STATUS_FAILED (6)

struct transfer_status {
    int status;
    uint64_t transferred_bytes;
};
typedef struct transfer_status transfer_status_t;

struct segment_desc {
    int type;
    union {
        struct {
            void *addr;
            uint64_t size;
            const char *location;
        } rdma;
        struct {
            const char *file_path;
            const char *subsystem_name;
            const char *proto;
            const char *ip;
            uint64_t port;
        } nvmeof;
    } desc_;
};
typedef struct segment_desc segment_desc_t;

struct buffer_entry {
    void *addr;
    size_t length;
};
typedef struct buffer_entry buffer_entry_t;

typedef void *transfer_engine_t;
typedef void *transport_t;

#if defined(__GNUC__) || defined(__clang__)
#define MC_COMPAT_API __attribute__((visibility("default")))
#else
#define MC_COMPAT_API
#endif

/* Creates and starts an engine. metadata_conn_string: "P2PHANDSHAKE" (NULL/"" too) or
 * "http://host:port/metadata". The segment name is local_server_name (or ip_or_host_name when
 * that is empty), with ":rpc_port" appended when rpc_port is non-zero and the name has no port.
 * Transports are chosen per peer (shm on this host, tcp otherwise) whatever auto_discover says;
 * installTransport only validates the protocol name. NULL on failure. */
MC_COMPAT_API transfer_engine_t createTransferEngine(const char *metadata_conn_string,
                                                     const char *local_server_name,
                                                     const char *ip_or_host_name, uint64_t rpc_port,
                                                     int auto_discover);
MC_COMPAT_API void destroyTransferEngine(transfer_engine_t engine);

/* Writes the engine's segment name ("host:port" with P2PHANDSHAKE) into buf_out. */
MC_COMPAT_API int getLocalIpAndPort(transfer_engine_t engine, char *buf_out, size_t buf_len);

/* "tcp", "shm" and "auto" are served; "rdma" and other hardware protocols fall back to tcp with
 * one warning. Returns NULL for an unknown name. args is ignored. */
MC_COMPAT_API transport_t installTransport(transfer_engine_t engine, const char *proto,
                                           void **args);
MC_COMPAT_API int uninstallTransport(transfer_engine_t engine, const char *proto);

MC_COMPAT_API segment_id_t openSegment(transfer_engine_t engine, const char *segment_name);
MC_COMPAT_API segment_id_t openSegmentNoCache(transfer_engine_t engine, const char *segment_name);
MC_COMPAT_API int closeSegment(transfer_engine_t engine, segment_id_t segment_id);
MC_COMPAT_API int removeLocalSegment(transfer_engine_t engine, const char *segment_name);
MC_COMPAT_API int syncSegmentCache(transfer_engine_t engine);

MC_COMPAT_API int registerLocalMemory(transfer_engine_t engine, void *addr, size_t length,
                                      const char *location, int remote_accessible);
MC_COMPAT_API int unregisterLocalMemory(transfer_engine_t engine, void *addr);
MC_COMPAT_API int registerLocalMemoryBatch(transfer_engine_t engine, buffer_entry_t *buffer_list,
                                           size_t buffer_len, const char *location);
MC_COMPAT_API int unregisterLocalMemoryBatch(transfer_engine_t engine, void **addr_list,
                                             size_t addr_len);

/* File segments are not supported: supportFileBuffer is false, the others fail. */
MC_COMPAT_API bool supportFileBuffer(transfer_engine_t engine);
MC_COMPAT_API int registerLocalFile(transfer_engine_t engine, const char *path, size_t size,
                                    file_id_t *id);
MC_COMPAT_API int unregisterLocalFile(transfer_engine_t engine, const char *path);

MC_COMPAT_API batch_id_t allocateBatchID(transfer_engine_t engine, size_t batch_size);
MC_COMPAT_API int submitTransfer(transfer_engine_t engine, batch_id_t batch_id,
                                 struct transfer_request *entries, size_t count);
/* Like submitTransfer; notify_msg goes to the segment of entries[0] once every task submitted to
 * the batch so far has COMPLETED (noticed by getTransferStatus or freeBatchID). */
MC_COMPAT_API int submitTransferWithNotify(transfer_engine_t engine, batch_id_t batch_id,
                                           struct transfer_request *entries, size_t count,
                                           notify_msg_t notify_msg);
MC_COMPAT_API int getTransferStatus(transfer_engine_t engine, batch_id_t batch_id, size_t task_id,
                                    struct transfer_status *status);
MC_COMPAT_API int freeBatchID(transfer_engine_t engine, batch_id_t batch_id);

/* Returns the received notifies (NULL when none) and their count in *size; release them with
 * freeNotifsMsgBuf. */
MC_COMPAT_API notify_msg_t *getNotifsFromEngine(transfer_engine_t engine, int *size);
MC_COMPAT_API int freeNotifsMsgBuf(notify_msg_t *msg, int size);
/* Sends a notify to an opened segment. */
MC_COMPAT_API int genNotifyInEngine(transfer_engine_t engine, uint64_t target_id,
                                    notify_msg_t notify_msg);

#ifdef __cplusplus
}
#endif
#endif
