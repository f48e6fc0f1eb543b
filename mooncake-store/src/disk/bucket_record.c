/* The bucket record codec and scanner (format in bucket_record.h). */
#include "disk/bucket_record.h"

#include <string.h>

#include "mooncake/common/crc32.h"

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static uint64_t get64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

void mc__brec_encode(const struct mc__brec *r, uint8_t out[MC_BREC_HDR]) {
    put32(out, r->magic);
    put32(out + 4, r->key_len);
    put64(out + 8, r->value_len);
    put64(out + 16, r->seq);
    put32(out + 24, r->data_crc);
    put32(out + 28, mc__crc32(0, out + 4, 24));
}

int mc__brec_decode(const uint8_t in[MC_BREC_HDR], struct mc__brec *r) {
    r->magic = get32(in);
    r->key_len = get32(in + 4);
    r->value_len = get64(in + 8);
    r->seq = get64(in + 16);
    r->data_crc = get32(in + 24);
    r->pad = 0;
    if (r->magic != MC_BREC_LIVE && r->magic != MC_BREC_DEAD)
        return -1;
    if (get32(in + 28) != mc__crc32(0, in + 4, 24))
        return -1;
    if (r->key_len == 0 || r->key_len > MC_BREC_MAX_KEY)
        return -1;
    return 0;
}

/* CRC of the key and value of the record at off, reading the value in scratch-sized chunks; the
 * key is left NUL-terminated at the start of scratch. */
static int check_data(mc__brec_read_fn rd, void *ctx, uint64_t off, const struct mc__brec *r,
                      uint8_t *scratch, size_t scratch_len, char *key, int *ok) {
    uint64_t pos = off + MC_BREC_HDR;
    if (rd(ctx, pos, key, r->key_len) != 0)
        return -1;
    key[r->key_len] = '\0';
    uint32_t crc = mc__crc32(0, key, r->key_len);
    pos += r->key_len;
    uint64_t left = r->value_len;
    while (left > 0) {
        size_t n = left < scratch_len ? (size_t)left : scratch_len;
        if (rd(ctx, pos, scratch, n) != 0)
            return -1;
        crc = mc__crc32(crc, scratch, n);
        pos += n;
        left -= n;
    }
    *ok = crc == r->data_crc;
    return 0;
}

/* The zero padding after a record ending at end: up to the next MC_BREC_ALIGN boundary or the
 * file's end, and only if every byte of it is zero (anything else is the next record, or garbage
 * that the header check stops at). scratch holds at least MC_BREC_ALIGN - 1 bytes. */
static int pad_len(mc__brec_read_fn rd, void *ctx, uint64_t end, uint64_t file_len,
                   uint8_t *scratch, uint32_t *pad) {
    uint64_t bound = (end + MC_BREC_ALIGN - 1) & ~(uint64_t)(MC_BREC_ALIGN - 1);
    if (bound > file_len)
        bound = file_len;
    *pad = 0;
    if (bound <= end)
        return 0;
    size_t n = (size_t)(bound - end);
    if (rd(ctx, end, scratch, n) != 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (scratch[i] != 0)
            return 0;
    *pad = (uint32_t)n;
    return 0;
}

int mc__brec_scan(mc__brec_read_fn rd, void *rd_ctx, uint64_t file_len, uint8_t *scratch,
                  size_t scratch_len, mc__brec_visit_fn visit, void *visit_ctx,
                  uint64_t *valid_end) {
    char key[MC_BREC_MAX_KEY + 1];
    uint64_t off = 0;
    int rc = 0;
    while (file_len - off >= MC_BREC_HDR) {
        uint8_t hdr[MC_BREC_HDR];
        struct mc__brec r;
        if (rd(rd_ctx, off, hdr, sizeof hdr) != 0) {
            rc = -1;
            goto out;
        }
        if (mc__brec_decode(hdr, &r) != 0)
            break;
        /* Sizes are bounded by the bytes left before any arithmetic can wrap. */
        uint64_t left = file_len - off - MC_BREC_HDR;
        if (r.key_len > left || r.value_len > left - r.key_len)
            break;
        enum mc__brec_verdict v = MC_BREC_DEADREC;
        if (r.magic == MC_BREC_LIVE) {
            int ok = 0;
            if (check_data(rd, rd_ctx, off, &r, scratch, scratch_len, key, &ok) != 0) {
                rc = -1;
                goto out;
            }
            /* A key with a NUL in it passes no check a writer makes: never index it. */
            v = ok && !memchr(key, 0, r.key_len) ? MC_BREC_OK : MC_BREC_BADCRC;
        }
        uint64_t end = off + mc__brec_size(r.key_len, r.value_len);
        if (pad_len(rd, rd_ctx, end, file_len, scratch, &r.pad) != 0) {
            rc = -1;
            goto out;
        }
        rc = visit(visit_ctx, off, &r, v == MC_BREC_OK ? key : NULL, v);
        if (rc != 0)
            goto out;
        off = end + r.pad;
    }
out:
    *valid_end = off;
    return rc;
}
