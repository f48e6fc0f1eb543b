/* Segment descriptors: what a peer needs to reach an engine's registered memory. Encoded as JSON
 * for both metadata back ends (the RPC port's GET_DESC and the HTTP key/value store). No I/O. */
#ifndef MC_TE_DESC_H
#define MC_TE_DESC_H

#include <stddef.h>
#include <stdint.h>

#define MC__DESC_MAX_JSON (16u << 20)
#define MC__DESC_MAX_BUFFERS 65536
#define MC__DESC_FABRIC_ADDR_MAX 256 /* bytes of a libfabric endpoint name */

typedef struct mc__desc_buf {
    uint64_t addr;
    uint64_t len;
    char location[64];
    int64_t shm_id; /* >= 0: a managed buffer same-host peers may map; -1: tcp only */
    uint64_t epoch; /* the buffer's incarnation (0: untagged) */
    int has_fkey;   /* registered with the owner's fabric provider: fkey is its remote key */
    uint64_t fkey;
} mc__desc_buf_t;

typedef struct mc__desc {
    char name[256];
    uint64_t instance_id;
    char host_id[384];
    char rpc_host[256];
    uint16_t rpc_port;
    char shm_socket[108]; /* abstract unix socket ("@..."), empty when none */
    /* The fabric transport's endpoint ("fabric" in the JSON; absent in older descriptors and
     * from engines without it): provider name, endpoint address, and whether remote addresses
     * are virtual (else offsets into the buffer). fabric_addr_len 0: none. */
    char fabric_prov[64];
    uint8_t fabric_addr[MC__DESC_FABRIC_ADDR_MAX];
    size_t fabric_addr_len;
    int fabric_virt;
    size_t nbufs;
    mc__desc_buf_t *bufs; /* sorted by addr */
} mc__desc_t;

/* Returns 0 or MC_ERR_MEMORY; *json is mc__malloc'ed and NUL-terminated. */
int mc__desc_encode(const mc__desc_t *d, char **json);
/* Parses and validates (sizes, overlapping buffers, string lengths). Returns 0,
 * MC_ERR_MALFORMED_JSON or MC_ERR_MEMORY. */
int mc__desc_decode(const char *json, size_t len, mc__desc_t **out);
void mc__desc_free(mc__desc_t *d);
/* Index of the buffer holding [addr, addr+len), or -1. */
long mc__desc_find(const mc__desc_t *d, uint64_t addr, uint64_t len);
#endif
