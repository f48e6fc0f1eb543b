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
 * and the fuzz harness run the same code. */
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
    uint32_t pad; /* not in the header: the zero bytes after the record up to the next
                     MC_BREC_ALIGN boundary (or the file's end), as the scanner found them */
};

/* Writes the 32-byte header of r (its hdr_crc computed here). */
void mc__brec_encode(const struct mc__brec *r, uint8_t out[MC_BREC_HDR]);

/* Decodes a header (pad is set to 0). 0 if it is well formed (a known magic, hdr_crc matches,
 * key_len in range); -1 otherwise. Does not check that the record fits in its file (the scanner
 * does). */
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
};

/* Called for every record whose header is intact; key is the key bytes (NUL-terminated, only
 * for MC_BREC_OK). Returning non-zero stops the scan with that value. */
typedef int (*mc__brec_visit_fn)(void *ctx, uint64_t off, const struct mc__brec *r, const char *key,
                                 enum mc__brec_verdict v);

/* Walks the records of a bucket of file_len bytes from offset 0, each record followed by its
 * padding if it has any (r->pad when visit is called; the next record starts after it). Stops at
 * the first header that is malformed or whose record runs past file_len: *valid_end is that offset
 * (everything from it on is a torn tail or garbage and cannot be walked). Values are read in chunks
 * of scratch_len bytes through scratch (>= MC_BREC_MAX_KEY + 1 bytes). Returns 0, -1 on a read
 * error, or what visit returned. */
int mc__brec_scan(mc__brec_read_fn rd, void *rd_ctx, uint64_t file_len, uint8_t *scratch,
                  size_t scratch_len, mc__brec_visit_fn visit, void *visit_ctx,
                  uint64_t *valid_end);
#endif
