/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The answers capture/ gives the RNG layer (rng/port.h), installed when librecap loads, before
 * any call can draw: rng/ asks through this table and never calls into capture/.
 */
#include "config.h"

#include "capture/capture.h"
#include "capture/internal.h"
#include "rng/port.h"

static recap_status_t of_stream(recap_stream_t stream, struct recap__capture **cap_p)
{
    return recap__capture_of_stream((CUstream)stream, cap_p);
}

static const recap__capture_port_t port = {
    .of_stream = of_stream,
    .draw = recap__capture_draw,
    .rel_get = recap__capture_rel_get,
    .rel_set = recap__capture_rel_set,
    .moved = recap__capture_moved,
    .state_gone = recap__slots_state_gone,
    .needs_registration = recap_capture_needs_registration,
};

/* 101: the first priority open to programs, so librecap's other constructors find it installed. */
__attribute__((constructor(101))) static void install(void)
{
    recap__capture_port_install(&port);
}
