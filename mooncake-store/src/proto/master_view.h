/* Where the leader master is, for everyone who talks to one: the master view key that the
 * masters' election (master/election.h) writes in etcd, read by clients, storage nodes and tools.
 *
 * Key: "mooncake-store/<cluster_id>/master_view" (the reference's layout; a trailing '/' of
 * cluster_id dropped). Value: the leader's RPC address "host:port" as raw bytes. A client names
 * an HA cluster with a master address of the form "etcd://h1:2379,h2:2379" (or ';' between the
 * endpoints, as the reference writes them); its cluster id comes from MC_STORE_CLUSTER_ID, else
 * MC_MASTER_VIEW_DEFAULT_CLUSTER_ID, as the reference's clients take it. */
#ifndef MC_STORE_PROTO_MASTER_VIEW_H
#define MC_STORE_PROTO_MASTER_VIEW_H
#include <stddef.h>

#define MC_MASTER_VIEW_KEY_PREFIX "mooncake-store/"
#define MC_MASTER_VIEW_KEY_SUFFIX "/master_view"
#define MC_MASTER_VIEW_DEFAULT_CLUSTER_ID "mooncake_cluster"
#define MC_MASTER_VIEW_MAX_CLUSTER_ID 256
#define MC_MASTER_VIEW_KEY_MAX                                                                     \
    (sizeof(MC_MASTER_VIEW_KEY_PREFIX) + MC_MASTER_VIEW_MAX_CLUSTER_ID +                           \
     sizeof(MC_MASTER_VIEW_KEY_SUFFIX))
#define MC_MASTER_VIEW_SCHEME "etcd://"

/* Writes the view key (NUL-terminated) into buf: its length, or MC_ERR_INVALID_ARGUMENT for an
 * empty (or over-long) cluster id or a buffer too small. */
int mc__master_view_key(const char *cluster_id, char *buf, size_t cap);

/* The etcd endpoints of a master address "etcd://...", or NULL when addr names one master. */
const char *mc__master_view_endpoints(const char *addr);

/* The cluster id a client uses: MC_STORE_CLUSTER_ID when set and not empty, else the default. */
const char *mc__master_view_cluster_id(void);

/* Resolves the current leader once: 0 and its address in out_addr, MC_ERR_ETCD_KEY_NOT_EXIST
 * when no leader holds the key, MC_ERR_INVALID_ARGUMENT when cap is too small for it (or the
 * arguments are bad), or the etcd client's error. timeout_ms <= 0: the etcd client's default. */
int mc__master_view_get(const char *endpoints, const char *cluster_id, char *out_addr, size_t cap,
                        int timeout_ms);
#endif
