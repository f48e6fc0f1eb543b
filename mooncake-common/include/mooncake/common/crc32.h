/* CRC-32 (IEEE 802.3, the zlib / PNG polynomial), for checksums that other tools can compute
 * too (Python's zlib.crc32 gives the same value). */
#ifndef MC_COMMON_CRC32_H
#define MC_COMMON_CRC32_H
#include <stddef.h>
#include <stdint.h>

/* The CRC of len bytes continuing from crc (start with 0). */
uint32_t mc__crc32(uint32_t crc, const void *data, size_t len);
#endif
