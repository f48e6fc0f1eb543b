/* Segment descriptor JSON codec (cJSON). Addresses travel as decimal strings because JSON numbers
 * are doubles and lose bits above 2^53. */
#include "desc.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h> /* qsort */
#include <string.h>

#include "mooncake/common/alloc.h"
#include "mooncake/error.h"

static int mc__json_add_u64(cJSON *o, const char *k, uint64_t v) {
    char tmp[24];
    snprintf(tmp, sizeof(tmp), "%" PRIu64, v);
    return cJSON_AddStringToObject(o, k, tmp) ? 0 : -1;
}

int mc__desc_encode(const mc__desc_t *d, char **json) {
    cJSON *root = cJSON_CreateObject();
    cJSON *bufs = NULL;
    char *s = NULL;
    int rc = MC_ERR_MEMORY;
    *json = NULL;
    if (!root)
        goto out;
    if (!cJSON_AddStringToObject(root, "name", d->name) ||
        mc__json_add_u64(root, "instance_id", d->instance_id) ||
        !cJSON_AddStringToObject(root, "host_id", d->host_id) ||
        !cJSON_AddStringToObject(root, "rpc_host", d->rpc_host) ||
        !cJSON_AddNumberToObject(root, "rpc_port", d->rpc_port) ||
        !cJSON_AddStringToObject(root, "shm_socket", d->shm_socket))
        goto out;
    if (d->fabric_addr_len) {
        cJSON *f = cJSON_AddObjectToObject(root, "fabric");
        char hex[2 * MC__DESC_FABRIC_ADDR_MAX + 1];
        for (size_t i = 0; i < d->fabric_addr_len && i < MC__DESC_FABRIC_ADDR_MAX; i++)
            snprintf(hex + 2 * i, 3, "%02x", d->fabric_addr[i]);
        hex[2 * d->fabric_addr_len] = 0;
        if (!f || !cJSON_AddStringToObject(f, "provider", d->fabric_prov) ||
            !cJSON_AddStringToObject(f, "addr", hex) ||
            !cJSON_AddBoolToObject(f, "virt_addr", d->fabric_virt))
            goto out;
    }
    bufs = cJSON_AddArrayToObject(root, "buffers");
    if (!bufs)
        goto out;
    for (size_t i = 0; i < d->nbufs; i++) {
        cJSON *b = cJSON_CreateObject();
        if (!b)
            goto out;
        cJSON_AddItemToArray(bufs, b);
        if (mc__json_add_u64(b, "addr", d->bufs[i].addr) ||
            mc__json_add_u64(b, "length", d->bufs[i].len) ||
            !cJSON_AddStringToObject(b, "location", d->bufs[i].location) ||
            !cJSON_AddNumberToObject(b, "shm", (double)d->bufs[i].shm_id) ||
            (d->bufs[i].epoch && mc__json_add_u64(b, "epoch", d->bufs[i].epoch)) ||
            (d->bufs[i].has_fkey && mc__json_add_u64(b, "fkey", d->bufs[i].fkey)))
            goto out;
    }
    s = cJSON_PrintUnformatted(root);
    if (!s)
        goto out;
    *json = mc__strdup(s);
    rc = *json ? 0 : MC_ERR_MEMORY;
out:
    cJSON_free(s);
    cJSON_Delete(root);
    return rc;
}

static int mc__json_str(const cJSON *o, const char *k, char *out, size_t cap) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    size_t n;
    if (!cJSON_IsString(v) || !v->valuestring)
        return -1;
    n = strlen(v->valuestring);
    if (n >= cap)
        return -1;
    memcpy(out, v->valuestring, n + 1);
    return 0;
}

static int mc__json_u64(const cJSON *o, const char *k, uint64_t *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    const char *s;
    uint64_t acc = 0;
    if (cJSON_IsNumber(v)) {
        if (v->valuedouble < 0 || v->valuedouble > 9007199254740992.0)
            return -1;
        *out = (uint64_t)v->valuedouble;
        return 0;
    }
    if (!cJSON_IsString(v) || !v->valuestring || !*v->valuestring)
        return -1;
    for (s = v->valuestring; *s; s++) {
        uint64_t d = (uint64_t)(*s - '0');
        if (*s < '0' || *s > '9' || acc > (UINT64_MAX - d) / 10)
            return -1;
        acc = acc * 10 + d;
    }
    *out = acc;
    return 0;
}

static int mc__hexval(char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* The optional "fabric" object: absent is fine (older engines, no fabric); present, it must be
 * whole and well formed. */
static int mc__desc_fabric(const cJSON *root, mc__desc_t *d) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, "fabric");
    const cJSON *virt;
    char hex[2 * MC__DESC_FABRIC_ADDR_MAX + 1];
    size_t n;
    if (!f)
        return 0;
    virt = cJSON_GetObjectItemCaseSensitive(f, "virt_addr");
    if (!cJSON_IsObject(f) || mc__json_str(f, "provider", d->fabric_prov, sizeof(d->fabric_prov)) ||
        !d->fabric_prov[0] || mc__json_str(f, "addr", hex, sizeof(hex)) || !cJSON_IsBool(virt))
        return -1;
    n = strlen(hex);
    if (n == 0 || n % 2)
        return -1;
    for (size_t i = 0; i < n / 2; i++) {
        int hi = mc__hexval(hex[2 * i]), lo = mc__hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        d->fabric_addr[i] = (uint8_t)(hi << 4 | lo);
    }
    d->fabric_addr_len = n / 2;
    d->fabric_virt = cJSON_IsTrue(virt);
    return 0;
}

static int mc__desc_buf_cmp(const void *a, const void *b) {
    const mc__desc_buf_t *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

int mc__desc_decode(const char *json, size_t len, mc__desc_t **out) {
    cJSON *root = NULL;
    const cJSON *bufs, *b;
    mc__desc_t *d = NULL;
    uint64_t v = 0;
    size_t n = 0, i = 0;
    int rc = MC_ERR_MALFORMED_JSON;
    *out = NULL;
    if (!json || len > MC__DESC_MAX_JSON)
        goto out;
    root = cJSON_ParseWithLength(json, len);
    if (!cJSON_IsObject(root))
        goto out;
    d = mc__calloc(1, sizeof(*d));
    if (!d) {
        rc = MC_ERR_MEMORY;
        goto out;
    }
    if (mc__json_str(root, "name", d->name, sizeof(d->name)) ||
        mc__json_u64(root, "instance_id", &d->instance_id) ||
        mc__json_str(root, "host_id", d->host_id, sizeof(d->host_id)) ||
        mc__json_str(root, "rpc_host", d->rpc_host, sizeof(d->rpc_host)) ||
        mc__json_u64(root, "rpc_port", &v) || v == 0 || v > 65535 ||
        mc__json_str(root, "shm_socket", d->shm_socket, sizeof(d->shm_socket)))
        goto out;
    d->rpc_port = (uint16_t)v;
    if (mc__desc_fabric(root, d))
        goto out;
    bufs = cJSON_GetObjectItemCaseSensitive(root, "buffers");
    if (!cJSON_IsArray(bufs))
        goto out;
    n = (size_t)cJSON_GetArraySize(bufs);
    if (n > MC__DESC_MAX_BUFFERS)
        goto out;
    if (n) {
        d->bufs = mc__calloc(n, sizeof(*d->bufs));
        if (!d->bufs) {
            rc = MC_ERR_MEMORY;
            goto out;
        }
    }
    cJSON_ArrayForEach(b, bufs) {
        mc__desc_buf_t *db = &d->bufs[i];
        const cJSON *shm = cJSON_GetObjectItemCaseSensitive(b, "shm");
        if (i >= n || !cJSON_IsObject(b) || mc__json_u64(b, "addr", &db->addr) ||
            mc__json_u64(b, "length", &db->len) || db->len == 0 || db->addr + db->len < db->addr ||
            mc__json_str(b, "location", db->location, sizeof(db->location)) ||
            !cJSON_IsNumber(shm) || shm->valuedouble < -1 || shm->valuedouble > 1e15)
            goto out;
        db->shm_id = (int64_t)shm->valuedouble;
        /* absent: an untagged buffer */
        if (cJSON_GetObjectItemCaseSensitive(b, "epoch") && mc__json_u64(b, "epoch", &db->epoch))
            goto out;
        /* absent: not reachable over the fabric transport */
        if (cJSON_GetObjectItemCaseSensitive(b, "fkey")) {
            if (mc__json_u64(b, "fkey", &db->fkey))
                goto out;
            db->has_fkey = 1;
        }
        i++;
    }
    d->nbufs = i;
    if (d->nbufs)
        qsort(d->bufs, d->nbufs, sizeof(*d->bufs), mc__desc_buf_cmp);
    for (i = 1; i < d->nbufs; i++)
        if (d->bufs[i - 1].addr + d->bufs[i - 1].len > d->bufs[i].addr)
            goto out;
    *out = d;
    d = NULL;
    rc = 0;
out:
    mc__desc_free(d);
    cJSON_Delete(root);
    return rc;
}

void mc__desc_free(mc__desc_t *d) {
    if (!d)
        return;
    mc__free(d->bufs);
    mc__free(d);
}

long mc__desc_find(const mc__desc_t *d, uint64_t addr, uint64_t len) {
    size_t lo = 0, hi;
    if (!d || len == 0 || addr + len < addr)
        return -1;
    hi = d->nbufs;
    /* the last buffer starting at or below addr is the only candidate (buffers do not overlap) */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (d->bufs[mid].addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return -1;
    lo--;
    if (addr - d->bufs[lo].addr <= d->bufs[lo].len &&
        len <= d->bufs[lo].len - (addr - d->bufs[lo].addr))
        return (long)lo;
    return -1;
}
