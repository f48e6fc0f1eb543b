/* --enable_http_metadata_server: the TE's HTTP metadata store, served from the master process so
 * a deployment needs one service less (as the reference master offers). */
#include "http_kv_store.h"
#include "master/master_internal.h"

int mc__meta_start(mc__master_t *m) {
    mc_http_kv_store_t *s = NULL;
    int rc = mc__http_kv_store_start_auth(m->cfg.http_metadata_server_host,
                                          (uint16_t)m->cfg.http_metadata_server_port, &m->auth, &s);
    if (rc == 0)
        m->meta_store = s;
    return rc;
}

void mc__meta_stop(mc__master_t *m) {
    if (m->meta_store)
        mc__http_kv_store_stop(m->meta_store);
    m->meta_store = NULL;
}

uint16_t mc__meta_port(const mc__master_t *m) {
    return m->meta_store ? mc__http_kv_store_port(m->meta_store) : 0;
}
