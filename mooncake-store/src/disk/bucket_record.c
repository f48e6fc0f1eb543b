/* The bucket record codec and scanner (format in bucket_record.h). */
#include "disk/bucket_record.h"

#include <string.h>

#include "mooncake/common/crc32.h"
#include "mooncake/common/frame.h"

void mc__brec_encode(const struct mc__brec *r, uint8_t out[MC_BREC_HDR]) {
    mc__le_put(out, r->magic, 4);
    mc__le_put(out + 4, r->key_len, 4);
    mc__le_put(out + 8, r->value_len, 8);
    mc__le_put(out + 16, r->seq, 8);
    mc__le_put(out + 24, r->data_crc, 4);
    mc__le_put(out + 28, mc__crc32(0, out + 4, 24), 4);
}

int mc__brec_decode(const uint8_t in[MC_BREC_HDR], struct mc__brec *r) {
    r->magic = (uint32_t)mc__le_get(in, 4);
    r->key_len = (uint32_t)mc__le_get(in + 4, 4);
    r->value_len = mc__le_get(in + 8, 8);
    r->seq = mc__le_get(in + 16, 8);
    r->data_crc = (uint32_t)mc__le_get(in + 24, 4);
    r->pad = 0;
    r->span = 0;
    if (r->magic != MC_BREC_LIVE && r->magic != MC_BREC_DEAD)
        return -1;
    if ((uint32_t)mc__le_get(in + 28, 4) != mc__crc32(0, in + 4, 24))
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

/* What a walk carries besides its position. */
struct scan {
    mc__brec_read_fn rd;
    void *ctx;
    uint64_t file_len;
    uint8_t *scratch;
    size_t scratch_len;
    char *key;       /* MC_BREC_MAX_KEY + 1 bytes */
    uint64_t budget; /* bytes the data checks of rejected candidates may still read */
};

/* Whether r, decoded at off (whatever its magic), is a whole record: it fits in the file, its key
 * and value pass data_crc, and a live one's key holds no NUL. 1 or 0, -1 on a read error. A
 * rejected candidate's bytes are charged to the budget, so that headers forged inside a value
 * (each claiming a long record) cannot make the search quadratic; once it is spent nothing more
 * validates. */
static int validates(struct scan *sc, uint64_t off, const struct mc__brec *r) {
    uint64_t left = sc->file_len - off - MC_BREC_HDR;
    if (r->key_len > left || r->value_len > left - r->key_len)
        return 0;
    uint64_t cost = (uint64_t)r->key_len + r->value_len;
    if (cost > sc->budget)
        return 0;
    int ok = 0;
    if (check_data(sc->rd, sc->ctx, off, r, sc->scratch, sc->scratch_len, sc->key, &ok) != 0)
        return -1;
    if (ok && r->magic == MC_BREC_LIVE && memchr(sc->key, 0, r->key_len))
        ok = 0;
    if (!ok)
        sc->budget -= cost;
    return ok;
}

/* Counts a candidate repair of the header at off: *found and *got when it validates. */
static int try_candidate(struct scan *sc, uint64_t off, const uint8_t h[MC_BREC_HDR], int *found,
                         struct mc__brec *got) {
    struct mc__brec r;
    if (mc__brec_decode(h, &r) != 0)
        return 0;
    int v = validates(sc, off, &r);
    if (v < 0)
        return -1;
    if (v) {
        (*found)++;
        *got = r;
    }
    return 0;
}

/* The record at off, whose header fails to decode, found again as one damaged byte: the magic
 * alone (bytes 4..31 still pass hdr_crc: it leaves the magic out), or one byte of 4..31 with
 * any of its 255 other values (7140 repairs, found through the CRC's linearity). 1 and *out
 * when exactly one repair gives a record that validates completely, 0 when none or more than
 * one does, -1 on a read error. Knowing the damaged record's length keeps the walk off its value's
 * bytes, which may hold anything, record images included. */
static int repair(struct scan *sc, uint64_t off, const uint8_t hdr[MC_BREC_HDR],
                  struct mc__brec *out) {
    uint8_t h[MC_BREC_HDR];
    int found = 0;
    struct mc__brec got = {0};
    memcpy(h, hdr, sizeof h);
    uint32_t magic = (uint32_t)mc__le_get(h, 4);
    if (magic != MC_BREC_LIVE && magic != MC_BREC_DEAD) {
        mc__le_put(h, MC_BREC_DEAD,
                   4); /* decode wants a known magic; the rest is checked as it is */
        if (try_candidate(sc, off, h, &found, &got) != 0)
            return -1;
    } else {
        /* The header CRC is affine: for messages of one length crc(h ^ e) = crc(h) ^ crc(e) ^
         * crc(0), so what flipping a byte does to it is the XOR of what its bits do. 192
         * checksums find every one-byte repair that passes, instead of one per repair tried. */
        static const uint8_t zero[24];
        uint32_t c0 = mc__crc32(0, zero, sizeof zero);
        uint32_t have =
            mc__crc32(0, h + 4, 24) ^ (uint32_t)mc__le_get(h + 28, 4); /* what a repair must undo */
        for (int i = 0; i < 28 && found < 2; i++) {
            uint32_t d[256];
            d[0] = 0;
            for (int b = 0; b < 8 && i < 24; b++) {
                uint8_t e[24] = {0};
                e[i] = (uint8_t)(1u << b);
                d[1u << b] = mc__crc32(0, e, sizeof e) ^ c0;
            }
            for (unsigned x = 1; x < 256; x++) /* a byte of the stored CRC changes it as is */
                d[x] = i < 24 ? d[x & (x - 1)] ^ d[x & (0u - x)] : (uint32_t)x << (8 * (i - 24));
            for (unsigned x = 1; x < 256 && found < 2; x++) {
                if (d[x] != have)
                    continue;
                h[4 + i] ^= (uint8_t)x;
                int rc = try_candidate(sc, off, h, &found, &got);
                h[4 + i] ^= (uint8_t)x;
                if (rc != 0)
                    return -1;
            }
        }
    }
    if (found != 1)
        return 0;
    *out = got;
    return 1;
}

#define RESYNC_WIN 8192u

/* The first offset after off where a record validates completely (*next): 1, 0 when there is
 * none (or the budget ran out), -1 on a read error. Buffered records start at any byte, so every
 * byte is a candidate, but one is checked only where the four bytes of a magic are. */
static int resync(struct scan *sc, uint64_t off, uint64_t *next) {
    uint8_t win[RESYNC_WIN];
    uint64_t pos = off + 1;
    while (sc->file_len - pos >= MC_BREC_HDR) {
        uint64_t avail = sc->file_len - pos;
        size_t n = avail < RESYNC_WIN ? (size_t)avail : RESYNC_WIN;
        if (sc->rd(sc->ctx, pos, win, n) != 0)
            return -1;
        size_t last = n - MC_BREC_HDR; /* candidates whose whole header is in the window */
        for (size_t i = 0; i <= last; i++) {
            const uint8_t *m = memchr(win + i, 'M', last + 1 - i);
            if (!m)
                break;
            i = (size_t)(m - win);
            uint32_t magic = (uint32_t)mc__le_get(m, 4);
            struct mc__brec r;
            if ((magic != MC_BREC_LIVE && magic != MC_BREC_DEAD) || mc__brec_decode(m, &r) != 0)
                continue;
            int v = validates(sc, pos + i, &r);
            if (v != 0) {
                *next = pos + i;
                return v;
            }
            if (sc->budget == 0)
                return 0;
        }
        pos += last + 1;
    }
    return 0;
}

/* A malformed header at off: 1 with r describing the damaged span (see MC_BREC_DAMAGED), 0 when
 * nothing intact follows it (a torn tail), -1 on a read error. */
static int damaged(struct scan *sc, uint64_t off, const uint8_t hdr[MC_BREC_HDR],
                   struct mc__brec *r) {
    int k = repair(sc, off, hdr, r);
    if (k < 0)
        return -1;
    if (k == 1) {
        uint64_t end = off + mc__brec_size(r->key_len, r->value_len);
        if (pad_len(sc->rd, sc->ctx, end, sc->file_len, sc->scratch, &r->pad) != 0)
            return -1;
        r->magic = MC_BREC_DEAD;
        r->span = end - off + r->pad;
        return 1;
    }
    uint64_t next = 0;
    k = resync(sc, off, &next);
    if (k <= 0)
        return k;
    memset(r, 0, sizeof *r);
    r->span = next - off;
    if (r->span >= MC_BREC_HDR + 1) {
        r->magic = MC_BREC_DEAD;
        r->key_len = 1;
        r->value_len = r->span - MC_BREC_HDR - 1;
    }
    return 1;
}

int mc__brec_scan(mc__brec_read_fn rd, void *rd_ctx, uint64_t file_len, uint8_t *scratch,
                  size_t scratch_len, mc__brec_visit_fn visit, void *visit_ctx,
                  uint64_t *valid_end) {
    char key[MC_BREC_MAX_KEY + 1];
    /* A resync may read every byte once more, and rejected candidates as much again. */
    struct scan sc = {rd, rd_ctx, file_len, scratch, scratch_len, key, file_len + (1u << 20)};
    uint64_t off = 0;
    int rc = 0;
    while (file_len - off >= MC_BREC_HDR) {
        uint8_t hdr[MC_BREC_HDR];
        struct mc__brec r;
        if (rd(rd_ctx, off, hdr, sizeof hdr) != 0) {
            rc = -1;
            goto out;
        }
        if (mc__brec_decode(hdr, &r) != 0) {
            int k = damaged(&sc, off, hdr, &r);
            if (k < 0) {
                rc = -1;
                goto out;
            }
            if (k == 0)
                break;
            rc = visit(visit_ctx, off, &r, NULL, MC_BREC_DAMAGED);
            if (rc != 0)
                goto out;
            off += r.span;
            continue;
        }
        /* Sizes are bounded by the bytes left before any arithmetic can wrap. A header that
         * passes its checksum and overruns the file is a torn tail, not damage. */
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
        r.span = end - off + r.pad;
        rc = visit(visit_ctx, off, &r, v == MC_BREC_OK ? key : NULL, v);
        if (rc != 0)
            goto out;
        off = end + r.pad;
    }
out:
    *valid_end = off;
    return rc;
}
