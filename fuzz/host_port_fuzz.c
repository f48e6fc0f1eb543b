/* Fuzzes host:port splitting (segment names, master addresses, metadata URLs all go through it).
 * Input: one byte choosing the host buffer's capacity, then the string. The host buffer is a
 * heap block of exactly that capacity so ASan sees any write past it; what splits must name a
 * port in range and split again to the same parts once rebuilt. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mooncake/common/sock.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *s = NULL, *host = NULL, *again = NULL, *rebuilt = NULL;
    size_t cap, n;
    uint16_t port = 0, port2 = 0;
    if (size < 1)
        return 0;
    /* 0 means "plenty" so that most inputs reach the port part; else 1..255 bytes */
    cap = data[0] ? data[0] : 300;
    n = size - 1;
    s = malloc(n + 1);
    memcpy(s, data + 1, n);
    s[n] = '\0';
    host = malloc(cap);
    if (mc__split_host_port(s, host, cap, &port) == 0) {
        size_t hl = strnlen(host, cap);
        int bracket;
        /* the host is a non-empty C string inside its buffer, taken from the input */
        if (hl == 0 || hl == cap || hl > strlen(s) || !strstr(s, host))
            abort();
        /* Rebuild: a host with a ':' or a leading '[' needs brackets; one that needs them and
         * holds a ']' cannot be written at all (the splitter takes the first ']'): skipped. */
        bracket = strchr(host, ':') != NULL || host[0] == '[';
        if (!(bracket && strchr(host, ']'))) {
            rebuilt = malloc(hl + 16);
            snprintf(rebuilt, hl + 16, bracket ? "[%s]:%u" : "%s:%u", host, (unsigned)port);
            again = malloc(hl + 1);
            if (mc__split_host_port(rebuilt, again, hl + 1, &port2) != 0 ||
                strcmp(again, host) != 0 || port2 != port)
                abort();
        }
    }
    free(rebuilt);
    free(again);
    free(host);
    free(s);
    return 0;
}
