/* Notifies of the reference C interface: {name, msg} strings over mc_engine_notify_*. */
#include <string.h>

#include "compat_internal.h"
#include "mooncake/common/alloc.h"
#include "transfer_engine_c.h"

int mc__compat_send_notify(mc__compat_t *c, const char *peer, const char *name, const char *msg) {
    return mc_engine_notify_send(c->engine, peer, name ? name : "", msg ? msg : "",
                                 msg ? strlen(msg) : 0);
}

int genNotifyInEngine(transfer_engine_t engine, uint64_t target_id, notify_msg_t notify_msg) {
    mc__compat_t *c = engine;
    char *peer = NULL;
    int rc;
    if (!c || target_id > INT32_MAX)
        return MC_ERR_INVALID_ARGUMENT;
    if (target_id == LOCAL_SEGMENT)
        peer = mc__strdup(mc_engine_local_name(c->engine));
    else
        peer = mc__compat_segment_name(c, (mc_segment_id_t)target_id);
    if (!peer)
        return MC_ERR_INVALID_ARGUMENT;
    rc = mc__compat_send_notify(c, peer, notify_msg.name, notify_msg.msg);
    mc__free(peer);
    return rc;
}

notify_msg_t *getNotifsFromEngine(transfer_engine_t engine, int *size) {
    mc__compat_t *c = engine;
    mc_notify_t *in = NULL;
    notify_msg_t *out = NULL;
    size_t n = 0, made = 0;
    if (size)
        *size = 0;
    if (!c || !size)
        goto out;
    if (mc_engine_notifies_fetch(c->engine, &in, &n) != 0 || n == 0 || n > INT32_MAX)
        goto out;
    out = mc__calloc(n, sizeof(*out));
    if (!out)
        goto out;
    for (made = 0; made < n; made++) {
        /* The payload arrives as bytes; callers read it as a C string. */
        out[made].name = mc__strdup(in[made].name ? in[made].name : "");
        out[made].msg = in[made].msg ? mc__strndup((const char *)in[made].msg, in[made].msg_len)
                                     : mc__strdup("");
        if (!out[made].name || !out[made].msg) {
            made++;
            freeNotifsMsgBuf(out, (int)made);
            out = NULL;
            goto out;
        }
    }
    *size = (int)n;
out:
    if (in)
        mc_engine_notifies_free(in, n);
    return out;
}

int freeNotifsMsgBuf(notify_msg_t *msg, int size) {
    if (!msg)
        return 0;
    for (int i = 0; i < size; i++) {
        mc__free(msg[i].name);
        mc__free(msg[i].msg);
    }
    mc__free(msg);
    return 0;
}
