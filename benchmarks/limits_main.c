/* mc_limits: the host's single-thread memcpy and single-stream loopback TCP bandwidth, the two
 * limits mooncake_transfer_bench prints its results against. */
#include <stdio.h>

#include "limits.h"
#include "mooncake/common/config.h"
#include "mooncake/common/version.h"
#include "mooncake/error.h"

int main(int argc, char **argv) {
    uint64_t block = 1u << 20, buffer = 256u << 20;
    double duration = 2.0;
    int json = 0;
    double mem = 0, tcp = 0;
    int rc;
    const mc_flag_t flags[] = {
        {"block_size", MC_FLAG_SIZE, &block, "bytes per memcpy / per send()"},
        {"buffer_size", MC_FLAG_SIZE, &buffer, "bytes cycled through on each side"},
        {"duration", MC_FLAG_DOUBLE, &duration, "seconds per measurement"},
        {"json", MC_FLAG_BOOL, &json, "print one JSON object instead of text"},
    };
    rc = mc__flags_parse(argc, argv, flags, sizeof(flags) / sizeof(flags[0]), "mc_limits",
                         MC_VERSION_STRING, "host memcpy and loopback TCP limits");
    if (rc != 0)
        return rc > 0 ? 0 : 2;
    if (block == 0 || buffer < block || duration <= 0) {
        fprintf(stderr, "mc_limits: need 0 < block_size <= buffer_size and duration > 0\n");
        return 2;
    }
    rc = mc__bench_memcpy_gbps(block, buffer, duration, &mem);
    if (rc == 0)
        rc = mc__bench_tcp_pump_gbps(block, buffer, duration, &tcp);
    if (rc != 0) {
        fprintf(stderr, "mc_limits: %s\n", mc_strerror(rc));
        return 1;
    }
    if (json)
        printf("{\"block_size\": %llu, \"buffer_size\": %llu, \"memcpy_gbps\": %.3f, "
               "\"tcp_pump_gbps\": %.3f}\n",
               (unsigned long long)block, (unsigned long long)buffer, mem, tcp);
    else
        printf("block %llu B, buffer %llu B: memcpy %.3f GB/s, tcp pump %.3f GB/s\n",
               (unsigned long long)block, (unsigned long long)buffer, mem, tcp);
    return 0;
}
