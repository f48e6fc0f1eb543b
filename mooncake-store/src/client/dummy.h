/* A store handle attached to a local storage node (see mooncake/store_dummy.h): the dummy
 * backend row (mc__store_dummy, backend.h) runs its calls there. Only its setup is named from
 * outside store_dummy.c. */
#ifndef MC_STORE_CLIENT_DUMMY_H
#define MC_STORE_CLIENT_DUMMY_H
#include "mooncake/store.h"
#include "mooncake/store_dummy.h"

/* Connects (s->mu held by the caller, the state NEW, s->be the dummy row): 0 or a code; the
 * dummy's state is in place on success. */
int mc__dummy_attach(mc_store_t *s, const mc_store_dummy_config_t *cfg);
#endif
