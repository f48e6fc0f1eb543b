/* Segment descriptors: what a peer needs to reach an engine's registered memory. Encoded as JSON
 * for both metadata back ends (the RPC port's GET_DESC and the HTTP key/value store). No I/O. */
#ifndef MC_TE_DESC_H
#define MC_TE_DESC_H

#include <stddef.h>
#include <stdint.h>

#define MC__DESC_MAX_JSON (16u << 20)
#define MC__DESC_MAX_BUFFERS 65536
#define MC__DESC_MAX_PARTS 8 /* transports' own parts of one descriptor */

typedef struct mc__desc_buf {
    uint64_t addr;
    uint64_t len;
    char location[64];
    int64_t shm_id; /* >= 0: a managed buffer same-host peers may map; -1: not shareable */
    uint64_t epoch; /* the buffer's incarnation (0: untagged) */
} mc__desc_buf_t;

/* A transport's own part of a descriptor, "transports": {"<name>": {...}} in the JSON. The codec
 * checks only that it is an object and keeps its text; what it means is the named transport's
 * business: after decoding, the transport table hands each part to its transport, which keeps
 * what it read of it in priv (freed with the descriptor by priv_free). */
typedef struct mc__desc_part {
    char name[32];
    char *json; /* the object, unformatted (mc__malloc'ed) */
    void *priv;
    void (*priv_free)(void *priv);
} mc__desc_part_t;

typedef struct mc__desc {
    char name[256];
    uint64_t instance_id;
    char host_id[384];
    char rpc_host[256];
    uint16_t rpc_port;
    size_t nbufs;
    mc__desc_buf_t *bufs; /* sorted by addr */
    size_t nparts;
    mc__desc_part_t parts[MC__DESC_MAX_PARTS];
    /* Set by the transport table once the parts are read: bit (1 << id) for each transport
     * whose part was there and well formed, i.e. that can reach this peer. */
    uint32_t reach;
} mc__desc_t;

/* Returns 0 or MC_ERR_MEMORY; *json is mc__malloc'ed and NUL-terminated. */
int mc__desc_encode(const mc__desc_t *d, char **json);
/* Parses and validates (sizes, overlapping buffers, string lengths). Returns 0,
 * MC_ERR_MALFORMED_JSON or MC_ERR_MEMORY. */
int mc__desc_decode(const char *json, size_t len, mc__desc_t **out);
void mc__desc_free(mc__desc_t *d);
/* Frees the parts of a descriptor that lives elsewhere (one being built on the stack). */
void mc__desc_free_parts(mc__desc_t *d);
/* Adds a copy of a part (json: one object) for encoding. 0, MC_ERR_MEMORY, or
 * MC_ERR_INVALID_ARGUMENT (no room, a name too long or already there). */
int mc__desc_add_part(mc__desc_t *d, const char *name, const char *json);
/* The part published under name, or NULL. */
mc__desc_part_t *mc__desc_part(const mc__desc_t *d, const char *name);
/* What the named transport read of its part (priv), or NULL when there is none. */
void *mc__desc_priv(const mc__desc_t *d, const char *name);

/* For transports reading their parts (cJSON objects): a string that fits cap, and an unsigned
 * 64-bit value written as a decimal string or a JSON number below 2^53. 0 or -1. */
struct cJSON;
int mc__desc_json_str(const struct cJSON *o, const char *k, char *out, size_t cap);
int mc__desc_json_u64(const struct cJSON *o, const char *k, uint64_t *out);
int mc__desc_json_add_u64(struct cJSON *o, const char *k, uint64_t v);
/* Index of the buffer holding [addr, addr+len), or -1. */
long mc__desc_find(const mc__desc_t *d, uint64_t addr, uint64_t len);
#endif
