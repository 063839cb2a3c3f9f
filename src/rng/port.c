/* SPDX-License-Identifier: Apache-2.0 */
/* The capture port's table until capture/ installs its own (rng/port.h). */
#include "config.h"

#include "base/error.h"
#include "rng/port.h"

static recap_status_t no_stream(recap_stream_t stream, struct recap__capture **cap_p)
{
    (void)stream;
    *cap_p = NULL;
    return RECAP_OK;
}

static recap_status_t no_draw(struct recap__capture *cap, struct recap__genstate *gs,
                              uint64_t inc, recap_philox_args_t *args)
{
    (void)cap, (void)gs, (void)inc, (void)args;
    return recap__fail(RECAP_ERR_STATE, "a captured draw without capture support");
}

static int no_rel_get(struct recap__genstate *gs, uint64_t *rel)
{
    (void)gs, (void)rel;
    return 0;
}

static int no_rel_set(struct recap__genstate *gs, uint64_t rel, int seed_changed, int before)
{
    (void)gs, (void)rel, (void)seed_changed, (void)before;
    return 0;
}

static int no_moved(struct recap__genstate *gs)
{
    (void)gs;
    return 0;
}

static void no_state_gone(struct recap__genstate *gs)
{
    (void)gs;
}

static recap_status_t no_registration(int *needs_p)
{
    (void)needs_p;
    return recap__fail(RECAP_ERR_UNSUPPORTED, "this build of recap has no capture support");
}

static const recap__capture_port_t none = {no_stream,  no_draw,       no_rel_get,     no_rel_set,
                                           no_moved,   no_state_gone, no_registration};

const recap__capture_port_t *recap__port = &none;
int recap__ncaptures;

void recap__capture_port_install(const recap__capture_port_t *port)
{
    __atomic_store_n(&recap__port, port != NULL ? port : &none, __ATOMIC_RELEASE);
}
