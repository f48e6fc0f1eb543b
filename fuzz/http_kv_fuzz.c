/* Fuzzes the HTTP metadata store's handler as its server drives it: the input is a pipeline of
 * requests, each head parsed by mc__http_parse_request and its Content-Length body (a heap copy
 * of exactly that size) handed to mc__http_kv_store_handle. Every answer must be one the
 * protocol knows, a value put must read back byte for byte, and a deleted key must be gone. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http_kv_store.h"
#include "mooncake/common/alloc.h"
#include "mooncake/common/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The request struct holds a 60 KiB query: static, not on the stack. */
static mc_http_request_t g_req, g_get;

static int mc__fuzz_known_status(int st) {
    return st == 200 || st == 400 || st == 404 || st == 405 || st == 413 || st == 500 || st == 507;
}

/* Reads the key back with a GET built from the same request, as a peer would. */
static void mc__fuzz_get(mc_http_kv_store_t *s, const mc_http_request_t *req,
                         mc_http_response_t *resp) {
    memcpy(&g_get, req, sizeof(g_get));
    strcpy(g_get.method, "GET");
    g_get.body = NULL;
    g_get.body_len = 0;
    g_get.content_length = 0;
    memset(resp, 0, sizeof(*resp));
    mc__http_kv_store_handle(s, &g_get, resp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    mc_http_kv_store_t *s = NULL;
    uint8_t *buf = malloc(size ? size : 1);
    size_t off = 0;
    memcpy(buf, data, size);
    if (mc__http_kv_store_create(&s) != 0)
        abort();
    for (int i = 0; i < 64 && off < size; i++) {
        mc_http_response_t resp = {0}, check = {0};
        uint8_t *body = NULL;
        size_t avail;
        if (mc__http_parse_request(buf + off, size - off, MC_HTTP_KV_MAX_VALUE, &g_req) != 1)
            break;
        avail = size - off - g_req.head_len;
        if (g_req.content_length > avail)
            break; /* the server would wait for the rest of the body */
        body = malloc(g_req.content_length ? g_req.content_length : 1);
        memcpy(body, buf + off + g_req.head_len, g_req.content_length);
        g_req.body = body;
        g_req.body_len = g_req.content_length;
        mc__http_kv_store_handle(s, &g_req, &resp);
        if (!mc__fuzz_known_status(resp.status) || (resp.body_len && !resp.body))
            abort();
        if (resp.status == 200 && !strcmp(g_req.method, "PUT")) {
            mc__fuzz_get(s, &g_req, &check);
            if (check.status != 200 || check.body_len != g_req.body_len ||
                (check.body_len && memcmp(check.body, body, check.body_len) != 0))
                abort();
        } else if (resp.status == 200 && !strcmp(g_req.method, "DELETE")) {
            mc__fuzz_get(s, &g_req, &check);
            if (check.status != 404)
                abort();
        }
        mc__free(check.body);
        mc__free(resp.body);
        free(body);
        off += g_req.head_len + g_req.content_length;
    }
    mc__http_kv_store_stop(s);
    free(buf);
    return 0;
}
