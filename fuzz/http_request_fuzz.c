/* Fuzzes the HTTP request-head parser and the query helpers with arbitrary bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mooncake/common/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    mc_http_request_t req;
    uint8_t *buf = malloc(size ? size : 1);
    int rc;
    memcpy(buf, data, size);
    rc = mc__http_parse_request(buf, size, 1u << 20, &req);
    if (rc == 1) {
        char val[256], enc[3 * sizeof(req.path)], back[sizeof(req.path)];
        char q[sizeof(enc) + 8];
        if (req.head_len > size || req.head_len > MC_HTTP_MAX_HEAD ||
            req.content_length > (1u << 20) || req.path[0] != '/' ||
            strnlen(req.method, sizeof(req.method)) == sizeof(req.method) ||
            strnlen(req.query, sizeof(req.query)) == sizeof(req.query))
            abort();
        (void)mc__http_query_get(req.query, "key", val, sizeof(val));
        (void)mc__http_query_get(req.query, "", val, sizeof(val));
        /* encode/decode must round-trip any decoded path */
        if (mc__http_url_encode(req.path, enc, sizeof(enc)) != 0)
            abort();
        strcpy(q, "key=");
        strcat(q, enc);
        if (mc__http_query_get(q, "key", back, sizeof(back)) != 0 || strcmp(back, req.path) != 0)
            abort();
    } else if (rc != 0 && rc != -400 && rc != -413 && rc != -414 && rc != -431 && rc != -501 &&
               rc != -505) {
        abort();
    }
    /* The raw input as a query string too. */
    {
        char *s = malloc(size + 1);
        char val[64];
        memcpy(s, data, size);
        s[size] = '\0';
        (void)mc__http_query_get(s, "key", val, sizeof(val));
        free(s);
    }
    free(buf);
    return 0;
}
