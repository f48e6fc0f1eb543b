#include "mooncake/common/random.h"

#include <stdint.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "mooncake/common/time.h"

void mc__random_fill(void *p, size_t n) {
    uint8_t *out = p;
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom(out + got, n - got, 0);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    for (size_t i = got; i < n; i += 8) {
        uint64_t v = mc__now_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)(out + i) ^
                     mc__wall_ms() * 0x9E3779B97F4A7C15ull;
        memcpy(out + i, &v, n - i < 8 ? n - i : 8);
    }
}
