/* Host identity: boot id + hostname tells two processes whether they share a kernel (and thus
 * can share memory), which an IP address cannot (containers, several NICs). */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "mooncake/common/sock.h"
#include "mooncake/error.h"

static pthread_once_t mc__host_once = PTHREAD_ONCE_INIT;
static char mc__host_id_buf[384]; /* written once under pthread_once, read-only after */

static void mc__host_id_init(void) {
    char boot[64] = "noboot";
    char name[256] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
    if (f) {
        if (fgets(boot, sizeof(boot), f))
            boot[strcspn(boot, "\r\n")] = '\0';
        fclose(f);
    }
    if (gethostname(name, sizeof(name) - 1) != 0)
        strcpy(name, "localhost");
    name[sizeof(name) - 1] = '\0';
    snprintf(mc__host_id_buf, sizeof(mc__host_id_buf), "%s/%s", boot, name);
}

const char *mc__host_id(void) {
    pthread_once(&mc__host_once, mc__host_id_init);
    return mc__host_id_buf;
}

int mc__local_ip(char *out, size_t cap) {
    struct ifaddrs *ifs = NULL;
    const char *found = "127.0.0.1";
    char tmp[INET_ADDRSTRLEN];
    if (!out || cap < INET_ADDRSTRLEN)
        return MC_ERR_INVALID_ARGUMENT;
    if (getifaddrs(&ifs) == 0) {
        for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
            if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP) ||
                (i->ifa_flags & IFF_LOOPBACK))
                continue;
            if (inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, tmp,
                          sizeof(tmp))) {
                found = tmp;
                break;
            }
        }
        freeifaddrs(ifs);
    }
    snprintf(out, cap, "%s", found);
    return 0;
}
