/* The local topology in the reference's JSON shape: {"cpu:N": [[preferred NICs], [other NICs]]}
 * for each NUMA node. This build drives no RDMA NICs, so both lists are empty; the nodes are
 * read from sysfs so callers iterating the reference's keys find the same ones. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mooncake/transfer_engine.h"

static int by_value(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int mc_engine_local_topology(char *buf, size_t cap, size_t *needed) {
    int nodes[1024];
    size_t n = 0, len = 0;
    DIR *d;
    struct dirent *ent;
    if ((!buf && cap) || !needed)
        return MC_ERR_INVALID_ARGUMENT;
    d = opendir("/sys/devices/system/node");
    while (d && (ent = readdir(d)) && n < sizeof(nodes) / sizeof(nodes[0])) {
        char *end = NULL;
        long v;
        if (strncmp(ent->d_name, "node", 4) != 0 || ent->d_name[4] < '0' || ent->d_name[4] > '9')
            continue;
        v = strtol(ent->d_name + 4, &end, 10);
        if (*end == '\0' && v >= 0 && v < 1 << 20)
            nodes[n++] = (int)v;
    }
    if (d)
        closedir(d);
    if (n == 0) /* no sysfs (containers may hide it): one node, as a single-socket host has */
        nodes[n++] = 0;
    qsort(nodes, n, sizeof(nodes[0]), by_value);
    /* measure and write in one pass: snprintf with a zero-size tail only counts */
    len += (size_t)snprintf(buf, cap, "{");
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(len < cap ? buf + len : NULL, len < cap ? cap - len : 0,
                                "%s\"cpu:%d\": [[], []]", i ? ", " : "", nodes[i]);
    len += (size_t)snprintf(len < cap ? buf + len : NULL, len < cap ? cap - len : 0, "}");
    *needed = len + 1;
    return len < cap ? 0 : MC_ERR_INVALID_ARGUMENT;
}
