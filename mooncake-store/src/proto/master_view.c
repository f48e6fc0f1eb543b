/* Reading the master view (master_view.h). */
#include "proto/master_view.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mooncake/common/etcd.h"
#include "mooncake/error.h"

int mc__master_view_key(const char *cluster_id, char *buf, size_t cap) {
    size_t n;
    int w;
    if (!cluster_id || !buf)
        return MC_ERR_INVALID_ARGUMENT;
    n = strlen(cluster_id);
    if (n && cluster_id[n - 1] == '/')
        n--;
    if (n == 0 || n > MC_MASTER_VIEW_MAX_CLUSTER_ID)
        return MC_ERR_INVALID_ARGUMENT;
    w = snprintf(buf, cap, "%s%.*s%s", MC_MASTER_VIEW_KEY_PREFIX, (int)n, cluster_id,
                 MC_MASTER_VIEW_KEY_SUFFIX);
    if (w < 0 || (size_t)w >= cap)
        return MC_ERR_INVALID_ARGUMENT;
    return w;
}

const char *mc__master_view_endpoints(const char *addr) {
    size_t n = sizeof(MC_MASTER_VIEW_SCHEME) - 1;
    if (!addr || strncmp(addr, MC_MASTER_VIEW_SCHEME, n) != 0)
        return NULL;
    return addr + n;
}

const char *mc__master_view_cluster_id(void) {
    const char *id = getenv("MC_STORE_CLUSTER_ID");
    return id && *id ? id : MC_MASTER_VIEW_DEFAULT_CLUSTER_ID;
}

int mc__master_view_get(const char *endpoints, const char *cluster_id, char *out_addr, size_t cap,
                        int timeout_ms) {
    char key[MC_MASTER_VIEW_KEY_MAX];
    mc_etcd_t *c = NULL;
    mc_etcd_kv_t kv;
    int kl, rc;
    if (!endpoints || !out_addr || cap == 0)
        return MC_ERR_INVALID_ARGUMENT;
    kl = mc__master_view_key(cluster_id, key, sizeof(key));
    if (kl < 0)
        return kl;
    rc = mc__etcd_open(endpoints, timeout_ms, &c);
    if (rc)
        return rc;
    rc = mc__etcd_get(c, key, (size_t)kl, &kv);
    if (rc == 0) {
        if (kv.value_len >= cap || kv.value_len == 0) {
            rc = kv.value_len ? MC_ERR_INVALID_ARGUMENT : MC_ERR_ETCD_KEY_NOT_EXIST;
        } else {
            memcpy(out_addr, kv.value, kv.value_len);
            out_addr[kv.value_len] = '\0';
        }
        mc__etcd_kv_free(&kv);
    }
    mc__etcd_close(c);
    return rc;
}
