/* Output of mooncake_transfer_bench: a few aligned text lines, or one JSON object (--json). */
#include <cjson/cJSON.h>
#include <stdio.h>

#include "mooncake/common/version.h"
#include "transfer_bench.h"

static int bench_report_json(const bench_opts_t *o, const char *segment, const bench_result_t *r) {
    cJSON *j = cJSON_CreateObject();
    cJSON *rounds = NULL;
    char *s = NULL;
    int use_tcp = bench_uses_tcp(o, r->protocol_used);
    if (!j)
        return MC_ERR_MEMORY;
    cJSON_AddStringToObject(j, "tool", PROG);
    cJSON_AddStringToObject(j, "version", MC_VERSION_STRING);
    cJSON_AddStringToObject(j, "mode", o->mode);
    cJSON_AddStringToObject(j, "segment_id", segment);
    cJSON_AddStringToObject(j, "protocol", o->protocol);
    cJSON_AddStringToObject(j, "protocol_used", r->protocol_used);
    cJSON_AddStringToObject(j, "operation", o->operation);
    cJSON_AddNumberToObject(j, "block_size", (double)o->block_size);
    cJSON_AddNumberToObject(j, "batch_size", (double)o->batch_size);
    cJSON_AddNumberToObject(j, "threads", (double)o->threads);
    cJSON_AddNumberToObject(j, "buffer_size", (double)o->buffer_size);
    cJSON_AddNumberToObject(j, "duration_s", r->seconds);
    cJSON_AddNumberToObject(j, "blocks", (double)r->blocks);
    cJSON_AddNumberToObject(j, "bytes", (double)r->bytes);
    cJSON_AddNumberToObject(j, "gbps", r->gbps);
    cJSON_AddStringToObject(j, "latency_unit", "block");
    cJSON_AddNumberToObject(j, "lat_p50_us", r->lat_p50_us);
    cJSON_AddNumberToObject(j, "lat_p99_us", r->lat_p99_us);
    cJSON_AddNumberToObject(j, "lat_max_us", r->lat_max_us);
    if (o->report_limits) {
        cJSON_AddNumberToObject(j, "memcpy_gbps", r->memcpy_gbps);
        cJSON_AddNumberToObject(j, "tcp_pump_gbps", r->tcp_gbps);
        cJSON_AddStringToObject(j, "limit", use_tcp ? "tcp_pump" : "memcpy");
        cJSON_AddNumberToObject(j, "ratio", r->ratio_median);
        rounds = cJSON_AddArrayToObject(j, "rounds");
        for (int i = 0; rounds && i < r->nrounds; i++) {
            cJSON *x = cJSON_CreateObject();
            if (!x || !cJSON_AddItemToArray(rounds, x)) {
                cJSON_Delete(x);
                break;
            }
            cJSON_AddNumberToObject(x, "gbps", r->rounds[i].gbps);
            cJSON_AddNumberToObject(x, "memcpy_gbps", r->rounds[i].memcpy_gbps);
            cJSON_AddNumberToObject(x, "tcp_pump_gbps", r->rounds[i].tcp_gbps);
            cJSON_AddNumberToObject(x, "ratio", r->rounds[i].ratio);
        }
    }
    s = cJSON_PrintUnformatted(j);
    if (s)
        printf("%s\n", s);
    cJSON_free(s);
    cJSON_Delete(j);
    return s ? 0 : MC_ERR_MEMORY;
}

int bench_report(const bench_opts_t *o, const char *segment, const bench_result_t *r) {
    int use_tcp = bench_uses_tcp(o, r->protocol_used);
    if (o->json)
        return bench_report_json(o, segment, r);
    printf(PROG " %s: %s %s over %s (asked %s), block %llu B x batch %lld, %lld thread(s), "
                "%d round(s) of %.1f s\n",
           MC_VERSION_STRING, o->mode, o->operation, r->protocol_used, o->protocol,
           (unsigned long long)o->block_size, (long long)o->batch_size, (long long)o->threads,
           r->nrounds, o->duration);
    printf("  throughput : %.*f %s/s (%llu blocks, %.3f GB in %.2f s)\n", (int)o->report_precision,
           r->gbps * 1e9 / bench_unit_bytes(o->report_unit), o->report_unit,
           (unsigned long long)r->blocks, (double)r->bytes / 1e9, r->seconds);
    printf("  latency    : p50 %.1f us, p99 %.1f us, max %.1f us per block (submit to completion, "
           "%lld block(s) per batch)\n",
           r->lat_p50_us, r->lat_p99_us, r->lat_max_us, (long long)o->batch_size);
    if (!o->report_limits)
        return 0;
    printf("  limits     : memcpy %.3f GB/s, tcp pump %.3f GB/s (1 thread/stream, same block and "
           "buffer; best window)\n",
           r->memcpy_gbps, r->tcp_gbps);
    for (int i = 0; i < r->nrounds; i++)
        printf("  round %-4d : %.3f GB/s vs %s %.3f GB/s (best of the windows before and after) "
               "= %.3f\n",
               i + 1, r->rounds[i].gbps, use_tcp ? "tcp pump" : "memcpy",
               use_tcp ? r->rounds[i].tcp_gbps : r->rounds[i].memcpy_gbps, r->rounds[i].ratio);
    printf("  ratio      : %.3f of %s (median of rounds)\n", r->ratio_median,
           use_tcp ? "tcp pump" : "memcpy");
    return 0;
}
