/* CRC-32, reflected, polynomial 0xEDB88320, one table lookup per byte. */
#include "mooncake/common/crc32.h"

#include <pthread.h>

static uint32_t mc__crc_table[256];
static pthread_once_t mc__crc_once = PTHREAD_ONCE_INIT;

static void mc__crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        mc__crc_table[i] = c;
    }
}

uint32_t mc__crc32(uint32_t crc, const void *data, size_t len) {
    const uint8_t *p = data;
    pthread_once(&mc__crc_once, mc__crc_init);
    crc = ~crc;
    while (len--)
        crc = mc__crc_table[(crc ^ *p++) & 0xFFu] ^ (crc >> 8);
    return ~crc;
}
