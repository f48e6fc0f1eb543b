/* The admin port of a master with HA between its terms: a standby, as the reference's answers
 * it. Orchestrators probe every master's /health (a Kubernetes liveness probe, a container
 * HEALTHCHECK), so a standby that did not answer would be restarted over and over; and an
 * operator asks any master who leads (/leader). Everything that reads the store's state (keys,
 * segments, metrics of objects) is the leader's: 503 here, naming the leader when known. */
#include "master/standby_http.h"

#include <stdio.h>
#include <string.h>

#include "mooncake/common/alloc.h"
#include "mooncake/common/http.h"
#include "mooncake/error.h"

struct mc__standby_http {
    mc_election_t *election;
    mc_http_server_t *server;
};

#define MC__STANDBY_TEXT "text/plain"
#define MC__STANDBY_JSON "application/json"

/* The leader's "host:port" as a JSON fragment, or an empty string when none is known. */
static void mc__leader_field(mc__standby_http_t *s, const char *name, char *out, size_t cap) {
    char leader[MC_ELECTION_MAX_ADDR];
    out[0] = '\0';
    if (s->election && mc__election_leader(s->election, leader, sizeof(leader)) == 0 &&
        !strpbrk(leader, "\"\\"))
        snprintf(out, cap, ",\"%s\":\"%s\"", name, leader);
}

static void mc__standby_handle(void *ctx, const mc_http_request_t *req, mc_http_response_t *resp) {
    mc__standby_http_t *s = ctx;
    char field[MC_ELECTION_MAX_ADDR + 32];
    char body[MC_ELECTION_MAX_ADDR + 160];
    int n;
    if (strcmp(req->method, "GET") != 0 && strcmp(req->method, "HEAD") != 0) {
        mc__http_respond(resp, 405, MC__STANDBY_TEXT, "only GET is served here\n", 24);
        return;
    }
    if (!strcmp(req->path, "/health")) {
        mc__leader_field(s, "leader_address", field, sizeof(field));
        n = snprintf(body, sizeof(body),
                     "{\"status\":\"ok\",\"role\":\"standby\",\"ha_state\":\"standby\","
                     "\"service_ready\":false%s}",
                     field);
        mc__http_respond(resp, 200, MC__STANDBY_JSON, body, (size_t)n);
    } else if (!strcmp(req->path, "/role")) {
        mc__http_respond(resp, 200, MC__STANDBY_TEXT, "standby", 7);
    } else if (!strcmp(req->path, "/ha_status")) {
        mc__http_respond(resp, 200, MC__STANDBY_TEXT, "standby", 7);
    } else if (!strcmp(req->path, "/leader")) {
        mc__leader_field(s, "leader_address", field, sizeof(field));
        n = snprintf(body, sizeof(body), "{\"present\":%s%s}", field[0] ? "true" : "false", field);
        mc__http_respond(resp, 200, MC__STANDBY_JSON, body, (size_t)n);
    } else {
        mc__leader_field(s, "leader", field, sizeof(field));
        n = snprintf(body, sizeof(body),
                     "{\"error\":\"this master is a standby: ask the leader\"%s}", field);
        mc__http_respond(resp, 503, MC__STANDBY_JSON, body, (size_t)n);
    }
}

int mc__standby_http_start(const mc__master_config_t *cfg, mc_election_t *election,
                           mc__standby_http_t **out) {
    const char *host =
        cfg->metrics_address && *cfg->metrics_address ? cfg->metrics_address : cfg->rpc_address;
    mc__standby_http_t *s;
    int rc;
    *out = NULL;
    if (cfg->metrics_port < 0 || cfg->metrics_port > 65535)
        return MC_ERR_INVALID_PARAMS;
    s = mc__calloc(1, sizeof(*s));
    if (!s)
        return MC_ERR_MEMORY;
    s->election = election;
    rc = mc__http_server_start(host, (uint16_t)cfg->metrics_port, 0, mc__standby_handle, s,
                               &s->server);
    if (rc) {
        mc__free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void mc__standby_http_stop(mc__standby_http_t *s) {
    if (!s)
        return;
    mc__http_server_stop(s->server);
    mc__free(s);
}
