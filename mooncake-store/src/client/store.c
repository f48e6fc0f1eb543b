/* Client lifecycle: engine, master connection, the contributed segment, staging, heartbeats. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/backend.h"
#include "client/direct.h"
#include "client/dummy.h"
#include "client/replica_renew.h"
#include "client/store_disk.h"
#include "client/store_internal.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/auth.h"
#include "mooncake/common/log.h"
#include "mooncake/common/proc.h"
#include "mooncake/common/random.h"
#include "mooncake/common/time.h"

#define MC__DEFAULT_HEARTBEAT_MS 1000
#define MC__DEFAULT_RPC_TIMEOUT_MS 5000
#define MC__STORE_PORT_LO                                                                          \
    12300 /* the reference store's range for a local_hostname without port                         \
           */
#define MC__STORE_PORT_HI 14300

int mc__store_create(mc_store_t **out) {
    mc_store_t *s;
    if (!out)
        return MC_ERR_INVALID_PARAMS;
    s = mc__calloc(1, sizeof(*s));
    if (s && !(s->suspects = mc__suspects_create())) {
        mc__free(s);
        s = NULL;
    }
    if (s && mc__gate_init(&s->gate) != 0) {
        mc__suspects_destroy(s->suspects, 0);
        mc__free(s);
        s = NULL;
    }
    if (!s)
        return MC_ERR_INTERNAL_ERROR;
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->hb_mu, NULL);
    pthread_cond_init(&s->hb_cv, NULL);
    pthread_rwlock_init(&s->reg_lock, NULL);
    pthread_rwlock_init(&s->seg_rw, NULL);
    mc__put_sessions_init(&s->sessions);
    mc__put_slots_init(&s->slots);
    mc__forwarder_init(&s->fwd);
    pthread_mutex_init(&s->extras_mu, NULL);
    pthread_mutex_init(&s->disk_mu, NULL);
    atomic_init(&s->state, MC__STORE_NEW);
    atomic_init(&s->master_ok, 0);
    mc__staging_init(&s->staging, NULL, 0);
    *out = s;
    return 0;
}

static void mc__deadline_in(struct timespec *ts, int ms) {
    *ts = mc__realtime_after_ms(ms > 0 ? (uint64_t)ms : 0);
}

/* The loop both background threads run: step, then wait one heartbeat interval or until
 * close sets hb_stop. */
static void mc__every_heartbeat(mc_store_t *s, void (*step)(mc_store_t *)) {
    int interval =
        s->cfg.heartbeat_interval_ms > 0 ? s->cfg.heartbeat_interval_ms : MC__DEFAULT_HEARTBEAT_MS;
    pthread_mutex_lock(&s->hb_mu);
    while (!s->hb_stop) {
        struct timespec ts;
        pthread_mutex_unlock(&s->hb_mu);
        step(s);
        pthread_mutex_lock(&s->hb_mu);
        mc__deadline_in(&ts, interval);
        while (!s->hb_stop)
            if (pthread_cond_timedwait(&s->hb_cv, &s->hb_mu, &ts) == ETIMEDOUT)
                break;
    }
    pthread_mutex_unlock(&s->hb_mu);
}

/* The master expires clients that stop heartbeating; when it forgot us (restart, expiry), the
 * master client mounts our segment again inside the heartbeat call. */
static void mc__heartbeat_step(mc_store_t *s) {
    uint8_t status = 0;
    int rc = mc__master_client_heartbeat(s->master, &status);
    atomic_store(&s->master_ok, rc == 0);
    if (rc != 0)
        MC_DEBUG("store: heartbeat failed: %s", mc_store_strerror(rc));
    else if (status == MC_MP_CLIENT_NEED_REMOUNT && s->cfg.global_segment_size > 0)
        MC_WARN("store: the master had forgotten this client; segment mounted again");
    if (rc == 0) /* right after the reply that may carry a new view */
        mc__store_abort_dropped(s);
}

/* Work the master hands out with its heartbeats and timed local work, on a thread of its own
 * so that a long copy never delays a heartbeat (the master would expire us): replica tasks
 * assigned to this client, and extra segments whose grace period passed. */
static void mc__maint_step(mc_store_t *s) {
    if (atomic_load(&s->master_ok))
        mc__store_run_tasks(s);
    mc__store_extras_tick(s);
    if (atomic_load(&s->master_ok))
        mc__put_slots_release(s, 0); /* slots left unused give their space back */
}

static void *mc__heartbeat_main(void *arg) {
    mc__every_heartbeat(arg, mc__heartbeat_step);
    return NULL;
}

static void *mc__maint_main(void *arg) {
    mc__every_heartbeat(arg, mc__maint_step);
    return NULL;
}

/* A setup step failed: logged, and kept for mc_store_setup_error, so a program's last line can
 * name the cause (the returned code is the reference's, often just INVALID_PARAMS). */
__attribute__((format(printf, 2, 3))) static void mc__setup_failed(mc_store_t *s, const char *fmt,
                                                                   ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->setup_error, sizeof(s->setup_error), fmt, ap); /* cut when longer: a hint */
    va_end(ap);
    MC_ERROR("store: %s", s->setup_error);
}

static int mc__setup_engine(mc_store_t *s) {
    mc_engine_options_t eo;
    int rc;
    if (s->cfg.engine) {
        s->engine = s->cfg.engine;
        s->own_engine = 0;
        return 0;
    }
    rc = mc_engine_create(&s->engine);
    if (rc != 0) {
        mc__setup_failed(s, "cannot create the transfer engine: %s", mc_strerror(rc));
        return mc__store_engine_code_for(rc, MC__ENG_SETUP);
    }
    s->own_engine = 1;
    memset(&eo, 0, sizeof(eo));
    eo.local_server_name = s->cfg.local_hostname;
    eo.metadata_conn = s->cfg.metadata_server;
    eo.protocol = s->cfg.protocol;
    eo.device_name = s->cfg.device_name;
    eo.cluster_secret = s->cfg.cluster_secret;
    eo.cluster_secret_file = s->cfg.cluster_secret_file;
    /* A bare host ("localhost", an IP: what vLLM and SGLang pass) gets a port from the
     * reference's store range, and the segment name carries it: two processes of one host
     * would otherwise mount under one name and read only their own objects. */
    if (!getenv("MC_MIN_RPC_PORT") && !getenv("MC_MAX_RPC_PORT")) { /* else the user's range */
        eo.rpc_port_lo = MC__STORE_PORT_LO;
        eo.rpc_port_hi = MC__STORE_PORT_HI;
    }
    eo.name_with_port = 1;
    rc = mc_engine_init(s->engine, &eo);
    if (rc != 0) {
        mc__setup_failed(
            s, "the transfer engine could not start on %s (protocol %s, metadata %s): %s",
            s->cfg.local_hostname[0] ? s->cfg.local_hostname : "this host",
            s->cfg.protocol[0] ? s->cfg.protocol : "tcp",
            s->cfg.metadata_server[0] ? s->cfg.metadata_server : "P2PHANDSHAKE", mc_strerror(rc));
        rc = mc__store_engine_code_for(rc, MC__ENG_SETUP);
    }
    return rc;
}

/* A fresh incarnation number: random, so that neither a later incarnation of this process nor
 * a restarted process serving the same name at the same addresses can ever match a placement
 * made in another one. Never 0 (untagged). */
static uint64_t mc__new_epoch(void) {
    uint64_t e = 0;
    do
        mc__random_fill(&e, sizeof(e));
    while (e == 0);
    return e;
}

/* The master forgot our segment (it restarted, or expired us): placements in the old
 * incarnation may still sit in stalled writers and readers, and the master's new allocator will
 * hand the same offsets out again. So the old memory goes (the engine waits out, then cuts,
 * requests inside it; its pages go even where same-host peers still map them) and a new one
 * with a new epoch takes its place before the master may place anything in it. Its contents are
 * lost either way: the master no longer knows any object in it. */
static int mc__store_new_incarnation(void *ctx, const char *name, uint64_t size, uint64_t *base,
                                     uint64_t *epoch) {
    mc_store_t *s = ctx;
    void *p = NULL;
    uint64_t e = mc__new_epoch();
    int rc;
    (void)name;
    if (*base != (uint64_t)(uintptr_t)s->segment)
        return mc__store_extras_remount(s, base, epoch); /* an extra segment, by its base */
    mc__prefault_stop(&s->prefault);
    pthread_rwlock_wrlock(&s->seg_rw);
    if (s->segment)
        mc_engine_free_managed(s->engine, s->segment);
    s->segment = NULL;
    rc = mc_engine_alloc_managed_epoch(s->engine, (size_t)size, e, &p);
    if (rc == 0) {
        s->segment = p;
        s->segment_epoch = e;
        *base = (uint64_t)(uintptr_t)p;
        *epoch = e;
    }
    pthread_rwlock_unlock(&s->seg_rw);
    /* in the background even where setup faulted in first: this runs on the master client's
     * thread, which must not stall on it */
    if (rc == 0 && mc__prefault_mode() != MC__PREFAULT_OFF)
        mc__prefault_start(&s->prefault, p, (size_t)size, MC__PREFAULT_BACKGROUND);
    if (rc != 0) {
        MC_ERROR("store: cannot allocate a new incarnation of the %llu-byte segment: %s",
                 (unsigned long long)size, mc_strerror(rc));
        return mc__store_engine_code_for(rc, MC__ENG_ALLOC);
    }
    MC_WARN("store: the master forgot segment %s; serving a new incarnation of it (its old "
            "contents are dropped)",
            s->hostname);
    return 0;
}

static int mc__setup_memory(mc_store_t *s) {
    void *p = NULL;
    int rc;
    if (s->cfg.global_segment_size > 0) {
        uint64_t e = mc__new_epoch();
        rc = mc_engine_alloc_managed_epoch(s->engine, (size_t)s->cfg.global_segment_size, e, &p);
        if (rc != 0) {
            mc__setup_failed(s, "cannot allocate a %llu-byte global segment: %s",
                             (unsigned long long)s->cfg.global_segment_size, mc_strerror(rc));
            return mc__store_engine_code_for(rc, MC__ENG_ALLOC);
        }
        pthread_rwlock_wrlock(&s->seg_rw);
        s->segment = p;
        s->segment_size = (size_t)s->cfg.global_segment_size;
        s->segment_epoch = e;
        pthread_rwlock_unlock(&s->seg_rw);
        mc__prefault_start(&s->prefault, p, s->segment_size, mc__prefault_mode());
    }
    if (s->cfg.local_buffer_size > 0) {
        rc = mc_engine_alloc_managed(s->engine, (size_t)s->cfg.local_buffer_size, &p);
        if (rc != 0) {
            mc__setup_failed(s, "cannot allocate a %llu-byte local buffer: %s",
                             (unsigned long long)s->cfg.local_buffer_size, mc_strerror(rc));
            return mc__store_engine_code_for(rc, MC__ENG_ALLOC);
        }
        s->staging_mem = p;
        mc__staging_fini(&s->staging);
        rc = mc__staging_init(&s->staging, p, (size_t)s->cfg.local_buffer_size);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Undoes setup in reverse; used by a failed setup and by destroy. */
static void mc__teardown(mc_store_t *s) {
    mc__forwarder_stop(s);            /* its calls in flight use the master connection */
    mc__disk_tier_stop(s->disk_tier); /* it works through the master connection and segment */
    s->disk_tier = NULL;
    if (s->hb_started) {
        pthread_mutex_lock(&s->hb_mu);
        s->hb_stop = 1;
        pthread_cond_broadcast(&s->hb_cv);
        pthread_mutex_unlock(&s->hb_mu);
        pthread_join(s->hb_thread, NULL);
        s->hb_started = 0;
    }
    if (s->maint_started) { /* woken by the same hb_stop broadcast */
        pthread_join(s->maint_thread, NULL);
        s->maint_started = 0;
    }
    mc__replica_renew_stop(s); /* it works through the master connection and the cache */
    mc__put_sessions_revoke_all(s);
    mc__put_slots_release(s, 1);
    mc__store_extras_teardown(s);
    if (s->master && s->master_known) {
        /* A clean leave: the master unmounts our segments and forgets us now, rather than count
         * us as expired client_ttl later. A master without the call still gets the unmount. */
        int rc = mc__master_client_unregister(s->master);
        if (rc == MC_ERR_NOT_IMPLEMENTED && s->segment)
            rc = mc__master_client_unmount_segment(s->master, s->hostname,
                                                   (uint64_t)(uintptr_t)s->segment);
        if (rc != 0)
            MC_WARN("store: leaving the master failed: %s", mc_store_strerror(rc));
    }
    s->master_known = 0;
    if (s->be->disconnect)
        s->be->disconnect(s);
    mc__master_client_close(s->master);
    s->master = NULL;
    mc__replica_cache_destroy(s->rcache);
    s->rcache = NULL;
    mc__prefault_stop(&s->prefault);
    pthread_rwlock_wrlock(&s->seg_rw);
    if (s->engine && s->segment)
        mc_engine_free_managed(s->engine, s->segment);
    s->segment = NULL;
    s->segment_size = 0;
    s->segment_epoch = 0;
    pthread_rwlock_unlock(&s->seg_rw);
}

/* Frees what the teardown leaves: the staging buffer, our own engine (its port and memory) and
 * our registrations in a shared engine. Not while buffers from get_buffer still live in the
 * staging buffer, unless force (destroy): they would point into freed memory. Returns 0, or
 * MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS when it had to leave everything for later. */
static int mc__store_release(mc_store_t *s, int force) {
    size_t busy;
    busy = mc__staging_in_use(&s->staging);
    if (busy && !force)
        return MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS;
    if (s->engine && s->staging_mem)
        mc_engine_free_managed(s->engine, s->staging_mem);
    s->staging_mem = NULL;
    mc__staging_fini(&s->staging);
    mc__staging_init(&s->staging, NULL, 0);
    if (s->be->release)
        s->be->release(s);
    /* A shared engine outlives us: leave none of our registrations behind in it. */
    for (size_t i = 0; !s->own_engine && s->engine && i < s->nregs; i++)
        mc_engine_unregister_memory(s->engine, s->regs[i].base);
    s->nregs = 0;
    if (s->own_engine)
        mc_engine_destroy(s->engine);
    s->engine = NULL;
    s->own_engine = 0;
    return 0;
}

/* A closed store sets up again from scratch, as if the handle were new: close released
 * everything unless get_buffer buffers were still out then; they must be freed by now. */
static int mc__store_reset(mc_store_t *s) {
    int rc = mc__store_release(s, 0);
    if (rc != 0) {
        MC_ERROR("store: buffers from get_buffer are still in use; free them before setting "
                 "this store up again");
        return rc;
    }
    atomic_store(&s->state, MC__STORE_NEW);
    return 0;
}

/* The start both setups share: the arguments are checked, then s->mu is taken (the caller lets
 * it go, also when this fails: *locked says) and a closed store goes back to a new handle's
 * state. 0 when the store is NEW now and the setup may go on, else the code to return. */
static int mc__setup_begin(mc_store_t *s, const void *cfg, int *locked) {
    int rc;
    *locked = 0;
    if (!s || !cfg)
        return MC_ERR_INVALID_PARAMS;
    if (mc__store_inherited(s))
        return mc__store_refuse_inherited(s);
    pthread_mutex_lock(&s->mu);
    *locked = 1;
    s->setup_error[0] = '\0';
    if (atomic_load(&s->state) == MC__STORE_CLOSED && (rc = mc__store_reset(s)) != 0)
        return rc;
    return atomic_load(&s->state) == MC__STORE_NEW ? 0 : MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS;
}

int mc__store_setup(mc_store_t *s, const mc_store_config_t *cfg, const mc__store_backend_t *be) {
    mc_auth_t auth;
    int locked;
    int rc = mc__setup_begin(s, cfg, &locked);
    int timeout;
    if (!locked)
        return rc;
    if (rc != 0)
        goto out;
    rc = MC_ERR_INVALID_PARAMS;
    mc__gate_own(&s->gate);
    s->be = be;
    s->cfg = *cfg;
    if (!s->cfg.master_server_addr[0]) {
        mc__setup_failed(s, "no master address");
        goto out;
    }
    timeout = s->cfg.rpc_timeout_ms > 0 ? s->cfg.rpc_timeout_ms : MC__DEFAULT_RPC_TIMEOUT_MS;
    if (mc__auth_init(&auth, s->cfg.cluster_secret, s->cfg.cluster_secret_file) != 0) {
        mc__setup_failed(s, "the cluster secret cannot be used");
        rc = MC_ERR_INVALID_PARAMS;
        goto out;
    }
    /* The master first: a master that is down fails setup fast, before memory is taken. */
    rc =
        mc__master_client_connect_auth(s->cfg.master_server_addr, timeout, NULL, &auth, &s->master);
    /* A TCP connect only proves that something accepted it (a master whose connection table is
     * full accepts and closes): one round trip proves that the master answers. */
    if (rc == 0)
        rc = mc__master_client_heartbeat(s->master, NULL);
    if (rc != 0) {
        mc__setup_failed(s, "cannot reach the master at %s: %s", s->cfg.master_server_addr,
                         mc_store_strerror(rc));
        goto out;
    }
    s->master_known = 1;
    if (s->cfg.replica_cache_entries > MC__REPLICA_CACHE_MAX_ENTRIES) {
        mc__setup_failed(s, "replica_cache_entries %llu is more than %u",
                         (unsigned long long)s->cfg.replica_cache_entries,
                         MC__REPLICA_CACHE_MAX_ENTRIES);
        rc = MC_ERR_INVALID_PARAMS;
        goto out;
    }
    rc = mc__replica_cache_create((size_t)s->cfg.replica_cache_entries, &s->rcache);
    if (rc != 0)
        goto out;
    rc = mc__setup_engine(s);
    if (rc != 0)
        goto out;
    snprintf(s->hostname, sizeof(s->hostname), "%s", mc_engine_local_name(s->engine));
    s->direct_mem = strcmp(mc_engine_protocol(s->engine), "tcp") == 0 ||
                    strcmp(mc_engine_protocol(s->engine), "shm") == 0;
    rc = mc__setup_memory(s);
    if (rc != 0)
        goto out;
    /* Every mount (the global segment, extra ones) comes back in a new incarnation. */
    mc__master_client_set_remount_hook(s->master, mc__store_new_incarnation, s);
    if (s->segment) {
        rc = mc__master_client_mount_segment_epoch(s->master, s->hostname,
                                                   (uint64_t)(uintptr_t)s->segment, s->segment_size,
                                                   s->segment_epoch);
        if (rc != 0) {
            mc__setup_failed(s, "mounting segment %s at the master failed: %s", s->hostname,
                             mc_store_strerror(rc));
            goto out;
        }
    }
    atomic_store(&s->master_ok, 1);
    mc__forwarder_start(s);
    s->hb_stop = 0;
    if (pthread_create(&s->hb_thread, NULL, mc__heartbeat_main, s) != 0) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    s->hb_started = 1;
    if (pthread_create(&s->maint_thread, NULL, mc__maint_main, s) != 0) {
        rc = MC_ERR_INTERNAL_ERROR;
        goto out;
    }
    s->maint_started = 1;
    rc = mc__replica_renew_start(s);
    if (rc != 0)
        goto out;
    {
        char why[200] = "";
        rc = s->cfg.enable_ssd_offload ? mc__store_disk_start(s)
                                       : mc__store_shared_start(s, why, sizeof(why));
        if (rc != 0) {
            mc__setup_failed(s, "%s", why[0] ? why : "the disk tier cannot start (see the log)");
            goto out;
        }
    }
    atomic_store(&s->state, MC__STORE_READY);
    rc = 0;
out:
    if (rc != 0 && s && cfg && atomic_load(&s->state) == MC__STORE_NEW) {
        /* nothing of a failed setup stays behind: a retry starts from a new handle's state */
        mc__teardown(s);
        if (mc__store_reset(s) == 0)
            mc__gate_disown(&s->gate);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int mc__store_setup_dummy(mc_store_t *s, const mc_store_dummy_config_t *cfg,
                          const mc__store_backend_t *be) {
    const mc__store_backend_t *was;
    int locked;
    int rc = mc__setup_begin(s, cfg, &locked);
    if (!locked)
        return rc;
    if (rc != 0)
        goto out;
    was = s->be;
    s->be = be;
    rc = mc__dummy_attach(s, cfg);
    if (rc != 0) {
        s->be = was;
        goto out;
    }
    mc__gate_own(&s->gate);
    atomic_store(&s->state, MC__STORE_READY);
out:
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int mc_store_close(mc_store_t *s) {
    int rc = 0;
    if (!s)
        return MC_ERR_INVALID_PARAMS;
    /* A fork() child's copy is its parent's to close: a close here would unmount the parent's
     * segment at the master and stop the parent's engine. Destroy lets the child's copy go. */
    if (mc__store_inherited(s))
        return mc__store_refuse_inherited(s);
    pthread_mutex_lock(&s->mu);
    if (atomic_load(&s->state) != MC__STORE_READY) {
        rc = MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS;
        goto out;
    }
    atomic_store(&s->state, MC__STORE_CLOSED);
    /* s->mu makes this the only closer: shut returns 1 */
    (void)mc__gate_shut(&s->gate);
    mc__gate_wait_calls(&s->gate);
    mc__teardown(s);
    /* The port, the memory and the engine go now (as the reference's close frees them), so a
     * new store may take the same name at once; with get_buffer buffers still out, at the next
     * setup or at destroy. With nothing left, no process holds the handle any more. */
    if (mc__store_release(s, 0) == 0)
        mc__gate_disown(&s->gate);
    /* open again for a later setup; until then the state turns every call away */
    mc__gate_reopen(&s->gate);
out:
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* Destroy in a fork() child of the process that set the store up: the child's own copies go
 * (its descriptors of the master and node connections, closed without shutdown(), which would
 * cut the parent's too; its mappings of the engine's memory and pool blocks; its heap), and
 * nothing is said to the master, the node or the engine's peers. No lock is taken: a parent's
 * thread may have held one at the fork. The background threads are not in this process. */
static void mc__store_forget(mc_store_t *s) {
    if (s->be->forget)
        s->be->forget(s);
    mc__master_client_close(s->master);
    if (s->own_engine)
        mc_engine_destroy(s->engine); /* an inherited engine: it forgets its own copies */
    mc__free(s->regs);
    mc__free(s->extras);
    mc__put_slots_forget(&s->slots);
    mc__suspects_destroy(s->suspects, 1);
    mc__free(s);
}

void mc_store_destroy(mc_store_t *s) {
    if (!s)
        return;
    if (mc__store_inherited(s)) {
        mc__store_forget(s);
        return;
    }
    mc_store_close(s);
    (void)mc__store_release(s, 1);
    mc__staging_fini(&s->staging);
    mc__free(s->regs);
    mc__put_sessions_fini(&s->sessions);
    mc__put_slots_fini(&s->slots);
    mc__forwarder_fini(&s->fwd);
    mc__free(s->extras);
    pthread_mutex_destroy(&s->extras_mu);
    mc__store_disk_conns_close(s);
    pthread_mutex_destroy(&s->disk_mu);
    pthread_rwlock_destroy(&s->reg_lock);
    pthread_rwlock_destroy(&s->seg_rw);
    mc__gate_destroy(&s->gate);
    mc__suspects_destroy(s->suspects, 0);
    pthread_cond_destroy(&s->hb_cv);
    pthread_mutex_destroy(&s->hb_mu);
    pthread_mutex_destroy(&s->mu);
    mc__free(s);
}

int mc__direct_health_check(mc_store_t *s) {
    uint8_t status = 0;
    int rc;
    if (mc__store_enter(s) != 0)
        return 1;
    rc = mc__master_client_heartbeat(s->master, &status);
    atomic_store(&s->master_ok, rc == 0);
    mc__store_leave(s);
    return rc == 0 ? 0 : 2;
}

const char *mc_store_hostname(const mc_store_t *s) {
    return s ? s->hostname : "";
}

mc_engine_t *mc_store_engine(mc_store_t *s) {
    return s ? s->engine : NULL;
}

const char *mc_store_setup_error(const mc_store_t *s) {
    return s ? s->setup_error : "";
}
