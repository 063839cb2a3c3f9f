/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Replaying a recorded call: the copied argument values with each buffer argument replaced by
 * what the engine says the function receives for the buffer of this run, then ffi_call.
 */
#include "config.h"

#include <string.h>

#include "base/error.h"
#include "region/region.h"

recap_status_t recap__engine_fail(recap_status_t st, const char *op, int arg)
{
    char why[256];

    if (st == RECAP_OK)
        st = RECAP_ERR_INVALID_ARG; /* the operation "succeeded" without giving a buffer */
    /* The engine's message (if it set one through recap) is in the same buffer we write to. */
    strncpy(why, recap_last_error(), sizeof(why) - 1);
    why[sizeof(why) - 1] = '\0';
    if (arg >= 0)
        return recap__fail(st, "engine operation %s (argument %d) failed: %s", op, arg, why);
    return recap__fail(st, "engine operation %s failed: %s", op, why);
}

static recap_status_t map_buffers(recap__rec_t *r, const uint8_t *pos, unsigned n,
                                  const recap_buffer_t *bufs, recap_value_t *vals)
{
    recap_status_t st;
    unsigned k;

    for (k = 0; k < n; k++) {
        if (r->ops->buffer_arg == NULL) {
            vals[pos[k]].ptr = bufs[pos[k]];
            continue;
        }
        st = r->ops->buffer_arg(r->engine, bufs[pos[k]], &vals[pos[k]].ptr);
        if (st != RECAP_OK)
            return recap__engine_fail(st, "buffer_arg", pos[k]);
    }
    return RECAP_OK;
}

/* libffi widens small integer returns to ffi_arg; floats and doubles come back as they are. */
static recap_value_t return_value(recap_type_t t, const void *rv)
{
    recap_value_t v = {.u64 = 0};

    switch (t) {
    case RECAP_TYPE_INT32: v.i32 = (int32_t) * (const ffi_sarg *)rv; break;
    case RECAP_TYPE_UINT32: v.u32 = (uint32_t) * (const ffi_arg *)rv; break;
    case RECAP_TYPE_INT64:
    case RECAP_TYPE_UINT64: memcpy(&v.u64, rv, 8); break;
    case RECAP_TYPE_FLOAT: memcpy(&v.f32, rv, sizeof(float)); break;
    case RECAP_TYPE_DOUBLE: memcpy(&v.f64, rv, sizeof(double)); break;
    case RECAP_TYPE_POINTER: memcpy(&v.ptr, rv, sizeof(void *)); break;
    default: break;
    }
    return v;
}

recap_status_t recap__call_invoke(recap__rec_t *r, const recap_buffer_t *bufs)
{
    recap_signature_h s = r->sig;
    recap_value_t vals[RECAP_MAX_ARGS];
    void *avalues[RECAP_MAX_ARGS];
    union {
        ffi_arg a;
        double d;
        uint64_t u;
        void *p;
    } rv = {0};
    recap_status_t st;
    uint32_t i;

    memcpy(vals, r->args, s->nargs * sizeof(vals[0]));
    st = map_buffers(r, s->in, s->nin, bufs, vals);
    if (st == RECAP_OK)
        st = map_buffers(r, s->out, s->nout, bufs, vals);
    if (st != RECAP_OK)
        return st;
    /* Every member of recap_value_t starts at its address, so it is the argument's address. */
    for (i = 0; i < s->nargs; i++)
        avalues[i] = &vals[i];
    ffi_call(&s->cif, FFI_FN(r->fn), &rv, avalues);
    r->ret = return_value(s->ret, &rv);
    return RECAP_OK;
}
