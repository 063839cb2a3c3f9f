/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/handle.h"
#include "driver/driver.h"
#include "rng/exchange.h"
#include "rng/generator.h"
#include "rng/port.h"

recap_status_t recap__generator_new_state(recap_generator_h gen, uint64_t seed, uint64_t offset,
                                          recap__genstate_t **s_p)
{
    return gen->kind->new_state(gen, seed, offset, s_p);
}

void recap__generator_drive(recap_generator_h gen, int delta)
{
    __atomic_add_fetch(&gen->drivers, delta, __ATOMIC_RELAXED);
}

recap_status_t recap_generator_create(int device, recap_generator_h *gen_p)
{
    recap_generator_h gen;
    recap_status_t st;

    RECAP_CHECK_ARG(gen_p != NULL, "gen_p is NULL");
    if (device != RECAP_DEVICE_HOST) {
        int count;

        if (device < 0)
            return recap__fail(RECAP_ERR_NO_DEVICE, "device %d: use RECAP_DEVICE_HOST (-1) for "
                               "the host or a CUDA ordinal", device);
        st = recap__device_count(&count);
        if (st != RECAP_OK)
            return st;
        if (device >= count)
            return recap__fail(RECAP_ERR_NO_DEVICE, "device %d does not exist (%d devices)",
                               device, count);
    }
    gen = calloc(1, sizeof(*gen));
    if (gen == NULL)
        return recap__fail(RECAP_ERR_NO_MEMORY, "generator");
    gen->state = recap__genstate_new(device, RECAP_DEFAULT_SEED, 0);
    if (gen->state == NULL) {
        free(gen);
        return recap__fail(RECAP_ERR_NO_MEMORY, "generator state");
    }
    gen->device = device;
    gen->kind = &recap__own_kind;
    gen->magic = RECAP_MAGIC_GENERATOR;
    st = recap__handle_register(gen, RECAP_MAGIC_GENERATOR);
    if (st != RECAP_OK) {
        recap__genstate_unref(gen->state);
        free(gen);
        return st;
    }
    *gen_p = gen;
    return RECAP_OK;
}

recap_status_t recap_generator_destroy(recap_generator_h gen)
{
    int drivers;

    RECAP_CHECK_LIVE(gen, RECAP_MAGIC_GENERATOR, "generator");
    RECAP_CHECK_NOT_IN_FRAMEWORK_OP("recap_generator_destroy");
    drivers = __atomic_load_n(&gen->drivers, __ATOMIC_RELAXED);
    if (drivers > 0)
        return recap__fail(RECAP_ERR_STATE, "generator destroyed while %d tracker%s drive%s it: "
                           "destroy the tracker%s first", drivers, drivers == 1 ? "" : "s",
                           drivers == 1 ? "s" : "", drivers == 1 ? "" : "s");
    gen->kind->unlink(gen); /* first: a scope reading it in another thread finishes */
    RECAP_CHECK_ARG(recap__handle_unregister(gen, RECAP_MAGIC_GENERATOR),
                    "generator %p destroyed twice at once", (void *)gen);
    gen->magic = RECAP_MAGIC_DEAD;
    recap__genstate_unref(gen->state);
    gen->kind->release(gen);
    free(gen);
    return RECAP_OK;
}

recap_status_t recap_generator_device(recap_generator_h gen, int *device_p)
{
    RECAP_CHECK_HANDLE(gen, RECAP_MAGIC_GENERATOR, "generator");
    RECAP_CHECK_ARG(device_p != NULL, "device_p is NULL");
    *device_p = gen->device;
    return RECAP_OK;
}

__thread const recap__lock_t *recap__gen_lock_held __attribute__((tls_model("initial-exec")));

static recap__genstate_t *lock_state(recap_generator_h gen)
{
    recap__gen_lock(gen);
    return gen->state;
}

static void unlock_state(recap_generator_h gen)
{
    recap__gen_unlock(gen);
}

/* A framework generator's value is the framework's current state (its value form), whichever
 * object is installed (its kind's get and set). */
recap_status_t recap__generator_get_value(recap_generator_h gen, uint64_t *seed, uint64_t *offset)
{
    recap_status_t st;

    recap__gen_lock(gen);
    st = gen->kind->get(gen, seed, offset);
    recap__gen_unlock(gen);
    return st;
}

recap_status_t recap__generator_set_value(recap_generator_h gen, uint64_t seed, uint64_t offset)
{
    recap_status_t st;

    recap__gen_lock(gen);
    st = gen->kind->set(gen, seed, offset);
    recap__gen_unlock(gen);
    return st;
}

/* Locks the generator and takes it for `claim` (NULL: nothing to take) by the claim's rule in
 * rng/exchange.h; 0, unlocked, when another tracker holds it: *holder_p is the holder that rule
 * saw (every claim is made under this lock and the holder gives it back with one store,
 * tracker/fork.c, so a second load could find it given back and name no holder). */
static int lock_taken(recap_generator_h gen, struct recap_tracker *claim,
                      struct recap_tracker **holder_p)
{
    recap__gen_lock(gen);
    if (recap__generator_take_fast(gen, claim, holder_p))
        return 1;
    recap__gen_unlock(gen);
    return 0;
}

static void untake(recap_generator_h gen, struct recap_tracker *claim)
{
    if (claim != NULL)
        __atomic_store_n(&gen->forker, NULL, __ATOMIC_RELAXED);
}

/* rng/exchange.h's fast path, from outside a tracker's lock section. */
static int try_exchange(recap_generator_h gen, struct recap_tracker *claim, uint64_t *seed,
                        uint64_t *offset)
{
    int done;

    if (gen->kind != &recap__own_kind)
        return 0; /* the fast path is recap's own kind's: no section to enter for nothing */
    recap__lock_section_enter();
    done = recap__generator_try_exchange(gen, recap__gen_lock_held == &gen->lock, claim, seed,
                                         offset);
    recap__lock_section_leave();
    return done;
}

static int try_install(recap_generator_h gen, struct recap_tracker *claim, recap__genstate_t *s,
                       recap__genstate_t **old_p)
{
    int done;

    if (gen->kind != &recap__own_kind)
        return 0;
    recap__lock_section_enter();
    done = recap__generator_try_install(gen, recap__gen_lock_held == &gen->lock, claim, s, old_p);
    recap__lock_section_leave();
    return done;
}

/* The fast path first (recap's own state outside captures: rng/exchange.h), then whatever the
 * generator's kind does under its lock. */
recap_status_t recap__generator_exchange_value(recap_generator_h gen, struct recap_tracker *claim,
                                               uint64_t *seed, uint64_t *offset,
                                               struct recap_tracker **holder_p)
{
    recap_status_t st;
    uint64_t s, o;

    if (try_exchange(gen, claim, seed, offset))
        return RECAP_OK;
    if (!lock_taken(gen, claim, holder_p))
        return RECAP_ERR_STATE;
    st = gen->kind->get(gen, &s, &o);
    if (st == RECAP_OK)
        st = gen->kind->set(gen, *seed, *offset);
    if (st != RECAP_OK)
        untake(gen, claim);
    recap__gen_unlock(gen);
    if (st == RECAP_OK) {
        *seed = s;
        *offset = o;
    }
    return st;
}

recap_status_t recap__generator_install_genstate(recap_generator_h gen, struct recap_tracker *claim,
                                                 recap__genstate_t *s, recap__genstate_t **old_p,
                                                 struct recap_tracker **holder_p)
{
    recap__genstate_t *old;
    recap_status_t st;

    if (try_install(gen, claim, s, old_p))
        return RECAP_OK;
    if (!lock_taken(gen, claim, holder_p))
        return RECAP_ERR_STATE;
    st = gen->kind->install(gen, s, &old);
    if (st != RECAP_OK)
        untake(gen, claim);
    recap__gen_unlock(gen);
    if (st == RECAP_OK)
        *old_p = old;
    return st;
}

recap_status_t recap_generator_manual_seed(recap_generator_h gen, uint64_t seed)
{
    RECAP_CHECK_HANDLE(gen, RECAP_MAGIC_GENERATOR, "generator");
    RECAP_CHECK_NOT_IN_FRAMEWORK_OP("recap_generator_manual_seed");
    return recap__generator_set_value(gen, seed, 0);
}

recap_status_t recap_generator_seed(recap_generator_h gen, uint64_t *seed_p)
{
    uint64_t offset;

    RECAP_CHECK_HANDLE(gen, RECAP_MAGIC_GENERATOR, "generator");
    RECAP_CHECK_ARG(seed_p != NULL, "seed_p is NULL");
    RECAP_CHECK_NOT_IN_FRAMEWORK_OP("recap_generator_seed");
    return recap__generator_get_value(gen, seed_p, &offset);
}

recap_status_t recap_generator_offset(recap_generator_h gen, uint64_t *offset_p)
{
    uint64_t seed;

    RECAP_CHECK_HANDLE(gen, RECAP_MAGIC_GENERATOR, "generator");
    RECAP_CHECK_ARG(offset_p != NULL, "offset_p is NULL");
    RECAP_CHECK_NOT_IN_FRAMEWORK_OP("recap_generator_offset");
    return recap__generator_get_value(gen, &seed, offset_p);
}

recap_status_t recap_generator_get_state(recap_generator_h gen, uint8_t state[RECAP_STATE_BYTES])
{
    uint64_t seed, offset;

    recap_status_t st;

    RECAP_CHECK_HANDLE(gen, RECAP_MAGIC_GENERATOR, "generator");
    RECAP_CHECK_ARG(state != NULL, "state is NULL");
    RECAP_CHECK_NOT_IN_FRAMEWORK_OP("recap_generator_get_state");
    st = recap__generator_get_value(gen, &seed, &offset);
    if (st == RECAP_OK)
        recap__state_encode(seed, offset, state);
    return st;
}

recap_status_t recap_generator_set_state(recap_generator_h gen,
                                         const uint8_t state[RECAP_STATE_BYTES])
{
    uint64_t seed = 0, offset = 0;
    recap_status_t st;

    RECAP_CHECK_HANDLE(gen, RECAP_MAGIC_GENERATOR, "generator");
    RECAP_CHECK_ARG(state != NULL, "state is NULL");
    RECAP_CHECK_NOT_IN_FRAMEWORK_OP("recap_generator_set_state");
    st = recap__state_decode(state, &seed, &offset);
    if (st != RECAP_OK)
        return st;
    return recap__generator_set_value(gen, seed, offset);
}

recap_status_t recap__generator_draw(recap_generator_h gen, recap_stream_t stream, uint64_t inc,
                                     recap_philox_args_t *args)
{
    struct recap__capture *cap = NULL;
    recap_status_t st = RECAP_OK;

    RECAP_CHECK_NOT_IN_FRAMEWORK_OP("a draw");
    if (gen->device != RECAP_DEVICE_HOST) {
        st = recap__stream_check_device((CUstream)stream, gen->device);
        if (st != RECAP_OK)
            return st;
        st = recap__port->of_stream(stream, &cap);
    }
    return gen->kind->draw(gen, cap, st, stream, inc, args);
}

/* ------------------------------------------------------------------ recap's own kind */

static recap_status_t own_get(recap_generator_h gen, uint64_t *seed, uint64_t *offset)
{
    return recap__genstate_get_value(gen->state, seed, offset);
}

static recap_status_t own_set(recap_generator_h gen, uint64_t seed, uint64_t offset)
{
    return recap__genstate_set_value(gen->state, seed, offset);
}

static recap_status_t own_install(recap_generator_h gen, recap__genstate_t *s,
                                  recap__genstate_t **old_p)
{
    *old_p = gen->state;
    gen->state = s;
    return RECAP_OK;
}

static recap_status_t own_new_state(recap_generator_h gen, uint64_t seed, uint64_t offset,
                                    recap__genstate_t **s_p)
{
    *s_p = recap__genstate_new(gen->device, seed, offset);
    return *s_p != NULL ? RECAP_OK : recap__fail(RECAP_ERR_NO_MEMORY, "generator state");
}

/* By value outside a capture (the offset advances; RECAP_ERR_INVALID_ARG when it would wrap),
 * through the port inside one (the capture-relative offset advances). */
static recap_status_t own_draw(recap_generator_h gen, struct recap__capture *cap,
                               recap_status_t cap_st, recap_stream_t stream, uint64_t inc,
                               recap_philox_args_t *args)
{
    recap__genstate_t *gs;
    recap_status_t st = RECAP_OK;

    if (cap_st != RECAP_OK)
        return cap_st;
    gs = lock_state(gen);
    if (cap != NULL) {
        st = recap__port->draw(cap, gs, inc, args);
    } else if (recap__genstate_in_capture(gs) && recap__port->moved(gs)) {
        /* Its value (get_state, snapshots) is the capture's while the capture runs; an eager
         * draw uses the launches' base, so the value read would not be the one drawn. */
        st = recap__fail(RECAP_ERR_STATE, "eager draw (stream %p is not capturing) from a "
                         "generator that takes part in a capture still running (it drew or was "
                         "set there): its value is the capture's until the capture ends, and an "
                         "eager draw could not draw from it; draw on the capturing stream, or "
                         "from another generator, or after the capture", stream);
    } else {
        /* An atomic add: a graph launch on another thread may advance the same state. */
        uint64_t before = __atomic_fetch_add(&gs->offset, inc, __ATOMIC_RELAXED);
        if (before + inc < before) {
            __atomic_fetch_sub(&gs->offset, inc, __ATOMIC_RELAXED);
            st = recap__fail(RECAP_ERR_INVALID_ARG, "offset %llu + %llu overflows 64 bits",
                             (unsigned long long)before, (unsigned long long)inc);
        } else {
            args->captured = 0;
            args->seed = __atomic_load_n(&gs->seed, __ATOMIC_RELAXED);
            args->offset = before;
            args->seed_ptr = args->offset_ptr = NULL;
            args->offset_intragraph = 0;
        }
    }
    unlock_state(gen);
    return st;
}

static void own_nothing(recap_generator_h gen)
{
    (void)gen;
}

const recap__gen_kind_t recap__own_kind = {
    .get = own_get,
    .set = own_set,
    .install = own_install,
    .new_state = own_new_state,
    .draw = own_draw,
    .unlink = own_nothing,
    .release = own_nothing,
};

recap_status_t recap_generator_reserve(recap_generator_h gen, recap_stream_t stream, uint64_t n,
                                       recap_philox_args_t *args_p)
{
    recap_philox_args_t a = {0};
    recap_status_t st;

    RECAP_CHECK_HANDLE(gen, RECAP_MAGIC_GENERATOR, "generator");
    RECAP_CHECK_ARG(args_p != NULL, "args_p is NULL");
    RECAP_CHECK_ARG(n > 0, "reserve of 0 values per thread");
    RECAP_CHECK_ARG(n <= UINT64_MAX - 3, "reserve of %llu values overflows",
                    (unsigned long long)n);
    RECAP_CHECK_ARG(gen->device != RECAP_DEVICE_HOST || stream == NULL,
                    "a host generator takes no stream");
    if (gen->fw != NULL)
        return recap__fail(RECAP_ERR_UNSUPPORTED, "recap_generator_reserve on a framework "
                           "generator: its kernels draw through the framework");
    st = recap__generator_draw(gen, stream, (n + 3) & ~(uint64_t)3, &a);
    if (st != RECAP_OK)
        return st;
    *args_p = a;
    return RECAP_OK;
}
