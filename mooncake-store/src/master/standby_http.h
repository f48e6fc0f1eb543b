/* The admin port of a master with HA while it does not lead (standby_http.c). */
#ifndef MC_STORE_MASTER_STANDBY_HTTP_H
#define MC_STORE_MASTER_STANDBY_HTTP_H
#include "master/election.h"
#include "master/master.h"

typedef struct mc__standby_http mc__standby_http_t;

/* Serves the admin port (cfg->metrics_port on --metrics_address, else --rpc_address) until the
 * master of a won term takes it over. The election, when given, names the leader. */
int mc__standby_http_start(const mc__master_config_t *cfg, mc_election_t *election,
                           mc__standby_http_t **out);
void mc__standby_http_stop(mc__standby_http_t *s); /* NULL is a no-op */

#endif
