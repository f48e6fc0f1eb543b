/* The checks and conversions of call arguments that every kind of call shares: keys, and the
 * public replicate config in the master protocol's form. */
#include <string.h>

#include "client/store_internal.h"

int mc__store_check_key(const char *key) {
    size_t n;
    if (!key)
        return MC_ERR_INVALID_KEY;
    n = strnlen(key, MC_STORE_MAX_KEY_LEN + 1);
    if (n == 0 || n > MC_STORE_MAX_KEY_LEN)
        return MC_ERR_INVALID_KEY;
    return 0;
}

int mc__store_wire_config(const mc_replicate_config_t *rc, mc__replicate_config_t *out) {
    memset(out, 0, sizeof(*out));
    out->replica_num = 1;
    if (!rc)
        return 0;
    if (rc->replica_num < 1 || rc->replica_num > (int)MC_MP_MAX_REPLICA_NUM ||
        rc->preferred_segment_count > MC_MP_MAX_PREFERRED ||
        (rc->preferred_segment_count && !rc->preferred_segments) ||
        rc->with_soft_pin < MC_SOFT_PIN_PRESERVE || rc->with_soft_pin > MC_SOFT_PIN_DISABLE ||
        (rc->soft_pin_ttl_ms > 0 && rc->with_soft_pin != MC_SOFT_PIN_ENABLE))
        return MC_ERR_INVALID_PARAMS;
    out->replica_num = (uint32_t)rc->replica_num;
    out->flags = (uint8_t)((rc->with_soft_pin == MC_SOFT_PIN_ENABLE ? MC_MP_CFG_SOFT_PIN : 0) |
                           (rc->with_soft_pin == MC_SOFT_PIN_DISABLE ? MC_MP_CFG_SOFT_UNPIN : 0) |
                           (rc->with_hard_pin ? MC_MP_CFG_HARD_PIN : 0));
    out->soft_pin_ttl_ms = rc->soft_pin_ttl_ms > 0 ? (uint64_t)rc->soft_pin_ttl_ms : 0;
    for (size_t i = 0; i < rc->preferred_segment_count; i++) {
        const char *name = rc->preferred_segments[i];
        size_t n = name ? strlen(name) : 0;
        if (n == 0 || n > MC_MP_MAX_SEGMENT_NAME)
            return MC_ERR_INVALID_PARAMS;
        out->preferred[out->n_preferred].p = (const uint8_t *)name;
        out->preferred[out->n_preferred].len = (uint32_t)n;
        out->n_preferred++;
    }
    return 0;
}
