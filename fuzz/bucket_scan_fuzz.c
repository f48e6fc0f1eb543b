/* The disk tier's bucket rescan (mooncake-store/src/disk/bucket_record.h): the walk a store runs
 * over every bucket file on open, which after a crash holds whatever bytes the disk kept.
 * Input: the bytes of one bucket file. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "disk/bucket_record.h"
#include "mooncake/common/crc32.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Checked in every build type (assert would vanish under NDEBUG). */
#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond))                                                                               \
            abort();                                                                               \
    } while (0)

struct img {
    const uint8_t *p;
    size_t n;
    uint64_t next; /* where the next record must start */
};

static int rd(void *ctx, uint64_t off, void *buf, size_t len) {
    const struct img *m = ctx;
    if (off > m->n || len > m->n - off)
        return -1;
    memcpy(buf, m->p + off, len);
    return 0;
}

static int visit(void *ctx, uint64_t off, const struct mc__brec *r, const char *key,
                 enum mc__brec_verdict v) {
    struct img *m = ctx;
    if (v == MC_BREC_DAMAGED) {
        /* A span that starts where the walk stood, at a header the decoder refuses, and lies
         * inside the file; the dead header offered for it covers it exactly, when there is one. */
        struct mc__brec d;
        CHECK(off == m->next && !key && r->span >= 1 && r->span <= m->n - off);
        CHECK(m->n - off < MC_BREC_HDR || mc__brec_decode(m->p + off, &d) != 0);
        if (r->key_len) {
            CHECK(r->magic == MC_BREC_DEAD && r->key_len <= MC_BREC_MAX_KEY);
            CHECK(mc__brec_size(r->key_len, r->value_len) + r->pad == r->span);
        } else {
            CHECK(r->span < MC_BREC_HDR + 1);
        }
        m->next = off + r->span;
        return 0;
    }
    uint64_t rs = mc__brec_size(r->key_len, r->value_len);
    /* Records are walked back to back (after the padding of the one before) and lie inside the
     * file. */
    CHECK(off == m->next && off <= m->n && rs <= m->n - off);
    CHECK(r->key_len >= 1 && r->key_len <= MC_BREC_MAX_KEY);
    if (v == MC_BREC_OK) {
        /* What the scanner calls intact really is: a NUL-free key and a matching checksum. */
        CHECK(key && strlen(key) == r->key_len && r->magic == MC_BREC_LIVE);
        CHECK(memcmp(key, m->p + off + MC_BREC_HDR, r->key_len) == 0);
        CHECK(mc__crc32(0, m->p + off + MC_BREC_HDR, r->key_len + r->value_len) == r->data_crc);
    }
    /* Padding: zero bytes only, inside the file, ending on a 4 KiB boundary or at the end. */
    uint64_t end = off + rs;
    CHECK(r->pad < MC_BREC_ALIGN && r->pad <= m->n - end);
    CHECK(r->pad == 0 || (end + r->pad) % MC_BREC_ALIGN == 0 || end + r->pad == m->n);
    for (uint32_t i = 0; i < r->pad; i++)
        CHECK(m->p[end + i] == 0);
    CHECK(r->span == rs + r->pad);
    m->next = end + r->pad;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct img m = {data, size, 0};
    uint8_t scratch[MC_BREC_MAX_KEY + 1];
    uint64_t end = 0;
    int rc = mc__brec_scan(rd, &m, size, scratch, sizeof scratch, visit, &m, &end);
    CHECK(rc == 0 && end == m.next && end <= size);
    /* Whatever stops the walk at end is a header the decoder refuses or a record that overruns. */
    if (size - end >= MC_BREC_HDR) {
        struct mc__brec r;
        if (mc__brec_decode(data + end, &r) == 0)
            CHECK(mc__brec_size(r.key_len, r.value_len) > size - end || r.value_len > size - end);
    }
    return 0;
}
