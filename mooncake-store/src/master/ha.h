/* Master high availability: several mooncake_master processes, one leader elected in etcd
 * (election.h), the others standing by.
 *
 * The supervisor runs one master (master.h) per term of leadership: when this process is
 * elected it starts a master whose metadata log is in etcd (persist_etcd.h), so the master
 * begins with every object the previous leaders acknowledged, and serves; when it loses the term
 * (the lease ran out, the key was taken, the log could not record) it stops that master and
 * campaigns again, to start afresh from etcd if elected once more. Nothing of a term's state
 * outlives it in memory: what a later term serves is what etcd recorded. */
#ifndef MC_STORE_MASTER_HA_H
#define MC_STORE_MASTER_HA_H
#include <stdint.h>

#include "master/master.h"

typedef struct mc__ha mc__ha_t;

/* Called from the supervisor's thread when this process starts leading (m: the master it
 * serves, term) and when it stops (m NULL, term of the leadership that ended). */
typedef void (*mc__ha_change_fn)(void *ctx, mc__master_t *m, int64_t term);

/* Starts campaigning with cfg (cfg->enable_ha set; its strings must outlive the supervisor).
 * 0, or a code: the configuration is refused, or etcd cannot be reached now. */
int mc__ha_start(const mc__master_config_t *cfg, mc__ha_change_fn on_change, void *ctx,
                 mc__ha_t **out);
/* Stops the master it runs (if leading), resigns, and frees. NULL is a no-op. */
void mc__ha_stop(mc__ha_t *h);
#endif
