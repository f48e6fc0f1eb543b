/* The transport list: the one place that names every transport (transport.h). Adding a
 * transport is its own file(s), an id, and one entry here. Order matters twice: it is the order
 * of init (and reverse of close), and the order in which carries() is asked, so the cheapest
 * transport that can carry a request comes first. Only the engine's lifecycle reads the list
 * (once, at create) and hands it to the core in e->tps: the core's files reach transports only
 * through that, so none of them depends on a transport's file while transports call the core. */
#include "transports/transport.h"

static const mc__transport_t *const mc__list[] = {&mc__tp_local, &mc__tp_shm, &mc__tp_fabric,
                                                  &mc__tp_tcp};

const mc__transport_t *const *mc__transport_list(size_t *n) {
    *n = sizeof(mc__list) / sizeof(mc__list[0]);
    return mc__list;
}
