/* mooncake_master's command line and config file: every flag the reference's master takes, each
 * either supported with the reference's meaning and default, accepted with no effect (a knob of a
 * feature that is off), or refused naming the feature it would turn on. docs/master.md lists
 * which is which. The binary calls mc__master_opts_load and starts mc__master_start(&o->cfg).
 *
 * Order: defaults, then the file named by --config_path (JSON, or YAML by its .yaml / .yml
 * name), then the command line, which wins over the file. */
#ifndef MC_STORE_MASTER_MASTER_FLAGS_H
#define MC_STORE_MASTER_MASTER_FLAGS_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "master/master.h"
#include "mooncake/common/config.h"

#define MC__MASTER_MAX_FLAGS 128

/* The value of a flag this master has no use for, kept so that it can be checked and refused. */
typedef union mc__master_compat_val {
    int b;
    int64_t i;
    double d;
    const char *s;
} mc__master_compat_val_t;

typedef struct mc__master_opts {
    mc__master_config_t cfg;
    const char *config_path;
    /* Reference spellings that mc__master_opts_finish resolves into cfg. */
    int64_t rpc_port;    /* > 0 wins over port */
    int64_t max_threads; /* rpc_thread_num 0: min(max_threads, CPUs) */
    uint64_t default_kv_lease_ttl_ms, default_kv_soft_pin_ttl_ms, max_kv_soft_pin_ttl_ms;
    int64_t rpc_conn_timeout_seconds;
    const char *rpc_interface;
    char rpc_interface_addr[64];
    const char *ha_backend_type, *ha_backend_connstring, *etcd_endpoints; /* -> cfg HA fields */
    mc__master_compat_val_t compat[MC__MASTER_MAX_FLAGS];
    mc_flag_t table[MC__MASTER_MAX_FLAGS];
    char help_[MC__MASTER_MAX_FLAGS][96]; /* --help text of the flags above that have none */
    size_t n;
    FILE *warn;  /* where notes go (unknown keys, flags with no effect); NULL: nowhere */
    void *doc_;  /* the parsed config file, which string values point into */
    char *text_; /* the YAML text, likewise */
} mc__master_opts_t;

/* Defaults (the reference's) and the flag table. */
void mc__master_opts_init(mc__master_opts_t *o);
void mc__master_opts_free(mc__master_opts_t *o);

/* Parses argv, the config file and argv again, then mc__master_opts_finish. Returns 0 (start),
 * 1 (--help or --version printed: exit 0) or 2 (a usage error, already printed on stderr with
 * the program name: exit 2). */
int mc__master_opts_load(mc__master_opts_t *o, int argc, char **argv);

/* Applies a config file to the table: JSON unless the name ends in .yaml or .yml. Unknown keys
 * are noted on o->warn and skipped. 0, or MC_ERR_INVALID_ARGUMENT with the reason in err. */
int mc__master_opts_load_file(mc__master_opts_t *o, const char *path, char *err, size_t cap);

/* Resolves the reference's spellings into cfg, refuses what turns on a missing feature, notes
 * flags with no effect, and runs mc__master_config_validate. 0, or MC_ERR_INVALID_ARGUMENT with
 * the reason in err. */
int mc__master_opts_finish(mc__master_opts_t *o, char *err, size_t cap);
#endif
