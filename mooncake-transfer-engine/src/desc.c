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

int mc__desc_json_add_u64(cJSON *o, const char *k, uint64_t v) {
    char tmp[24];
    snprintf(tmp, sizeof(tmp), "%" PRIu64, v);
    return cJSON_AddStringToObject(o, k, tmp) ? 0 : -1;
}

/* "transports": {"<name>": <part>, ...}, present only when some transport published a part */
static int mc__desc_encode_parts(cJSON *root, const mc__desc_t *d) {
    cJSON *tps;
    if (!d->nparts)
        return 0;
    tps = cJSON_AddObjectToObject(root, "transports");
    if (!tps)
        return MC_ERR_MEMORY;
    for (size_t i = 0; i < d->nparts; i++) {
        cJSON *part = cJSON_Parse(d->parts[i].json);
        if (!cJSON_IsObject(part)) { /* added through mc__desc_add_part, which checked it */
            cJSON_Delete(part);
            return MC_ERR_MEMORY;
        }
        cJSON_AddItemToObject(tps, d->parts[i].name, part);
    }
    return 0;
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
        mc__desc_json_add_u64(root, "instance_id", d->instance_id) ||
        !cJSON_AddStringToObject(root, "host_id", d->host_id) ||
        !cJSON_AddStringToObject(root, "rpc_host", d->rpc_host) ||
        !cJSON_AddNumberToObject(root, "rpc_port", d->rpc_port) || mc__desc_encode_parts(root, d))
        goto out;
    bufs = cJSON_AddArrayToObject(root, "buffers");
    if (!bufs)
        goto out;
    for (size_t i = 0; i < d->nbufs; i++) {
        cJSON *b = cJSON_CreateObject();
        if (!b)
            goto out;
        cJSON_AddItemToArray(bufs, b);
        if (mc__desc_json_add_u64(b, "addr", d->bufs[i].addr) ||
            mc__desc_json_add_u64(b, "length", d->bufs[i].len) ||
            !cJSON_AddStringToObject(b, "location", d->bufs[i].location) ||
            !cJSON_AddNumberToObject(b, "shm", (double)d->bufs[i].shm_id) ||
            (d->bufs[i].epoch && mc__desc_json_add_u64(b, "epoch", d->bufs[i].epoch)))
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

int mc__desc_json_str(const cJSON *o, const char *k, char *out, size_t cap) {
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

int mc__desc_json_u64(const cJSON *o, const char *k, uint64_t *out) {
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

/* The optional "transports" object: each member an object, kept as text for its transport. */
static int mc__desc_decode_parts(const cJSON *root, mc__desc_t *d) {
    const cJSON *tps = cJSON_GetObjectItemCaseSensitive(root, "transports"), *p;
    if (!tps)
        return 0;
    if (!cJSON_IsObject(tps))
        return MC_ERR_MALFORMED_JSON;
    cJSON_ArrayForEach(p, tps) {
        char *text;
        int rc;
        if (!cJSON_IsObject(p) || !p->string)
            return MC_ERR_MALFORMED_JSON;
        text = cJSON_PrintUnformatted(p);
        if (!text)
            return MC_ERR_MEMORY;
        rc = mc__desc_add_part(d, p->string, text);
        cJSON_free(text);
        if (rc)
            return rc == MC_ERR_MEMORY ? rc : MC_ERR_MALFORMED_JSON;
    }
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
    if (mc__desc_json_str(root, "name", d->name, sizeof(d->name)) ||
        mc__desc_json_u64(root, "instance_id", &d->instance_id) ||
        mc__desc_json_str(root, "host_id", d->host_id, sizeof(d->host_id)) ||
        mc__desc_json_str(root, "rpc_host", d->rpc_host, sizeof(d->rpc_host)) ||
        mc__desc_json_u64(root, "rpc_port", &v) || v == 0 || v > 65535)
        goto out;
    d->rpc_port = (uint16_t)v;
    rc = mc__desc_decode_parts(root, d);
    if (rc)
        goto out;
    rc = MC_ERR_MALFORMED_JSON;
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
        if (i >= n || !cJSON_IsObject(b) || mc__desc_json_u64(b, "addr", &db->addr) ||
            mc__desc_json_u64(b, "length", &db->len) || db->len == 0 ||
            db->addr + db->len < db->addr ||
            mc__desc_json_str(b, "location", db->location, sizeof(db->location)) ||
            !cJSON_IsNumber(shm) || shm->valuedouble < -1 || shm->valuedouble > 1e15)
            goto out;
        db->shm_id = (int64_t)shm->valuedouble;
        /* absent: an untagged buffer */
        if (cJSON_GetObjectItemCaseSensitive(b, "epoch") &&
            mc__desc_json_u64(b, "epoch", &db->epoch))
            goto out;
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

void mc__desc_free_parts(mc__desc_t *d) {
    for (size_t i = 0; i < d->nparts; i++) {
        if (d->parts[i].priv && d->parts[i].priv_free)
            d->parts[i].priv_free(d->parts[i].priv);
        mc__free(d->parts[i].json);
    }
    d->nparts = 0;
}

void mc__desc_free(mc__desc_t *d) {
    if (!d)
        return;
    mc__desc_free_parts(d);
    mc__free(d->bufs);
    mc__free(d);
}

int mc__desc_add_part(mc__desc_t *d, const char *name, const char *json) {
    mc__desc_part_t *p;
    if (!name || !json || d->nparts >= MC__DESC_MAX_PARTS ||
        strlen(name) >= sizeof(d->parts[0].name) || mc__desc_part(d, name))
        return MC_ERR_INVALID_ARGUMENT;
    p = &d->parts[d->nparts];
    memset(p, 0, sizeof(*p));
    p->json = mc__strdup(json);
    if (!p->json)
        return MC_ERR_MEMORY;
    strcpy(p->name, name);
    d->nparts++;
    return 0;
}

mc__desc_part_t *mc__desc_part(const mc__desc_t *d, const char *name) {
    for (size_t i = 0; d && i < d->nparts; i++)
        if (!strcmp(d->parts[i].name, name))
            return (mc__desc_part_t *)&d->parts[i];
    return NULL;
}

void *mc__desc_priv(const mc__desc_t *d, const char *name) {
    const mc__desc_part_t *p = mc__desc_part(d, name);
    return p ? p->priv : NULL;
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
