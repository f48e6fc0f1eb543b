/* The on-disk record of one object in a bucket file, and the scanner that walks a bucket.
 *
 * A bucket file is a sequence of records with no file header; each record is
 *
 *   off  size  field
 *     0     4  magic      MC_BREC_LIVE ("MCOB") or MC_BREC_DEAD ("MCDD": removed/overwritten)
 *     4     4  key_len    1..MC_BREC_MAX_KEY
 *     8     8  value_len  bytes of value
 *    16     8  seq        store-wide sequence number: the highest seq of a key wins on rescan
 *    24     4  data_crc   CRC-32 of the key bytes followed by the value bytes
 *    28     4  hdr_crc    CRC-32 of bytes 4..27 (not the magic, so killing a record in place by
 *                         rewriting its magic keeps the header verifiable and skippable)
 *    32        key, then value
 *
 * all little-endian. A store that writes with O_DIRECT pads every record with zero bytes up to the
 * next multiple of MC_BREC_ALIGN, so that the next one starts on a block boundary; one that writes
 * buffered does not pad. The scanner tells padding from a record by its bytes: a record's magic is
 * never zero, so zeros after a record up to the next boundary are its padding, whichever mode
 * wrote the bucket. The decoder trusts nothing: a bucket can be the torn output of a crash or
 * any bytes at all. The scanner does no I/O itself: it reads through a callback, so the rescan
 * and the fuzz harness run the same code.
 *
 * A header that fails its check in the middle of a bucket costs that record only: the scanner
 * first tries to repair it as one damaged byte (the magic alone, which hdr_crc leaves out, or
 * any one byte of 4..31, with each of its other 255 values) and, when exactly one repair gives a
 * record that validates completely (header, lengths within the file, data_crc), steps over that
 * record exactly. Otherwise it resynchronises: the next offset where a record validates
 * completely. Records start at any byte (buffered ones are not aligned), so every byte is a
 * candidate, but only where the four magic bytes are, so the cost is one pass over the span plus
 * the data checks of the rare headers that pass their hdr_crc. The damaged span is reported
 * (MC_BREC_DAMAGED), never served: its magic, LIVE or DEAD, is not trusted, so a removed
 * record is never taken for a live one. With no valid record after it, the damage is a torn
 * tail and the walk ends there, as before. */
#ifndef MC_DISK_BUCKET_RECORD_H
#define MC_DISK_BUCKET_RECORD_H
#include <stddef.h>
#include <stdint.h>

#define MC_BREC_LIVE 0x424F434Du /* "MCOB" */
#define MC_BREC_DEAD 0x4444434Du /* "MCDD" */
#define MC_BREC_HDR 32u
#define MC_BREC_MAX_KEY 4096u
#define MC_BREC_ALIGN                                                                              \
    4096u /* O_DIRECT writes' record alignment (a multiple of any logical block                    \
             size up to 4 KiB) */

struct mc__brec {
    uint32_t magic;
    uint32_t key_len;
    uint64_t value_len;
    uint64_t seq;
    uint32_t data_crc;
    uint32_t pad;  /* not in the header: the zero bytes after the record up to the next
                      MC_BREC_ALIGN boundary (or the file's end), as the scanner found them */
    uint64_t span; /* not in the header: bytes from the record's offset to where the walk goes
                      on (the record and its padding, or a damaged span) */
};

/* Writes the 32-byte header of r (its hdr_crc computed here). */
void mc__brec_encode(const struct mc__brec *r, uint8_t out[MC_BREC_HDR]);

/* Decodes a header (pad and span are set to 0). 0 if it is well formed (a known magic, hdr_crc
 * matches, key_len in range); -1 otherwise. Does not check that the record fits in its file (the
 * scanner does). */
int mc__brec_decode(const uint8_t in[MC_BREC_HDR], struct mc__brec *r);

/* Total bytes of a record: header, key and value. */
static inline uint64_t mc__brec_size(uint64_t key_len, uint64_t value_len) {
    return MC_BREC_HDR + key_len + value_len;
}

/* Reads exactly len bytes at off into buf: 0, or -1 (I/O error or short). */
typedef int (*mc__brec_read_fn)(void *ctx, uint64_t off, void *buf, size_t len);

/* What the scanner found at one offset. */
enum mc__brec_verdict {
    MC_BREC_OK = 0,  /* live record, data_crc verified; key holds its key */
    MC_BREC_DEADREC, /* a well-formed dead record: skip it */
    MC_BREC_BADCRC,  /* header intact, data fails its checksum (or the key holds a NUL): skip
                        it, never serve it */
    MC_BREC_DAMAGED, /* a header that fails its check, with a valid record (or a repair of it)
                        after it: r->span bytes skipped, never served. r is a dead header that
                        covers the span exactly (the repaired one, magic MC_BREC_DEAD, when the
                        repair worked; else key_len 1 and the rest as value, seq 0), for the
                        caller to write over the damage; key_len 0 when the span is too short
                        to hold one (under MC_BREC_HDR + 1 bytes) */
};

/* Called for every record whose header is intact; key is the key bytes (NUL-terminated, only
 * for MC_BREC_OK). Returning non-zero stops the scan with that value. */
typedef int (*mc__brec_visit_fn)(void *ctx, uint64_t off, const struct mc__brec *r, const char *key,
                                 enum mc__brec_verdict v);

/* Walks the records of a bucket of file_len bytes from offset 0, each record followed by its
 * padding if it has any (r->pad when visit is called; the next record starts r->span bytes after
 * off). A malformed header with an intact record after it is reported as MC_BREC_DAMAGED and
 * stepped over. Stops at a header whose record runs past file_len (a torn tail), or a malformed
 * one with no intact record after it: *valid_end is that offset (everything from it on is a torn
 * tail or garbage and cannot be walked). Values are read in chunks of scratch_len bytes through
 * scratch (>= MC_BREC_MAX_KEY + 1 bytes). Returns 0, -1 on a read error, or what visit
 * returned. */
int mc__brec_scan(mc__brec_read_fn rd, void *rd_ctx, uint64_t file_len, uint8_t *scratch,
                  size_t scratch_len, mc__brec_visit_fn visit, void *visit_ctx,
                  uint64_t *valid_end);
#endif
