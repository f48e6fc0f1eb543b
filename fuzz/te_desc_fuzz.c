/* Fuzzes the segment descriptor JSON decoder (peers and the metadata service supply it): it
 * must reject or return buffers that are sorted, non-empty, non-wrapping and non-overlapping,
 * and what decodes must survive an encode/decode round trip unchanged. The transports then read
 * their own parts of it (shm's socket, fabric's endpoint and keys), as a peer's fetch does. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "desc.h"
#include "mooncake/common/alloc.h"
#include "te_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An engine holding only the transport table: what mc__transports_desc_parsed walks. */
static const mc_engine_t *table_engine(void) {
    static mc_engine_t e;
    if (!e.tps)
        e.tps = mc__transport_list(&e.ntp);
    return &e;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    mc__desc_t *d = NULL, *d2 = NULL;
    char *json = NULL;
    if (mc__desc_decode((const char *)data, size, &d) != 0)
        return 0;
    for (size_t i = 0; i < d->nbufs; i++) {
        if (d->bufs[i].len == 0 || d->bufs[i].addr + d->bufs[i].len < d->bufs[i].addr)
            abort();
        if (i && d->bufs[i - 1].addr + d->bufs[i - 1].len > d->bufs[i].addr)
            abort();
        if (mc__desc_find(d, d->bufs[i].addr, d->bufs[i].len) != (long)i)
            abort();
    }
    mc__transports_desc_parsed(table_engine(), d);
    if (d->reach & ~((1u << MC__TP_COUNT) - 1))
        abort();
    if (mc__desc_encode(d, &json) == 0) {
        if (mc__desc_decode(json, strlen(json), &d2) != 0 || d2->nbufs != d->nbufs ||
            d2->instance_id != d->instance_id || d2->rpc_port != d->rpc_port ||
            d2->nparts != d->nparts)
            abort();
        for (size_t i = 0; i < d->nparts; i++)
            if (strcmp(d->parts[i].name, d2->parts[i].name) ||
                strcmp(d->parts[i].json, d2->parts[i].json))
                abort();
        for (size_t i = 0; i < d->nbufs; i++)
            if (memcmp(&d->bufs[i], &d2->bufs[i], sizeof(d->bufs[i])))
                abort();
    }
    mc__desc_free(d2);
    mc__free(json);
    mc__desc_free(d);
    return 0;
}
