/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Call signatures: recap's type codes checked and turned into a libffi call interface once, so
 * recording and replaying a call costs no preparation.
 */
#include "config.h"

#include <stdlib.h>

#include "base/error.h"
#include "region/region.h"

/* The libffi type of a code, or NULL for an unknown one. */
static ffi_type *ffi_of(recap_type_t t)
{
    switch (t) {
    case RECAP_TYPE_VOID: return &ffi_type_void;
    case RECAP_TYPE_INT32: return &ffi_type_sint32;
    case RECAP_TYPE_INT64: return &ffi_type_sint64;
    case RECAP_TYPE_UINT32: return &ffi_type_uint32;
    case RECAP_TYPE_UINT64: return &ffi_type_uint64;
    case RECAP_TYPE_FLOAT: return &ffi_type_float;
    case RECAP_TYPE_DOUBLE: return &ffi_type_double;
    case RECAP_TYPE_POINTER:
    case RECAP_TYPE_BUFFER:
    case RECAP_TYPE_BUFFER_OUT: return &ffi_type_pointer;
    }
    return NULL;
}

static recap_status_t check_types(recap_type_t ret, const recap_type_t *args, size_t nargs)
{
    size_t i;

    if (ffi_of(ret) == NULL)
        return recap__fail(RECAP_ERR_INVALID_ARG, "unknown return type code %d", (int)ret);
    if (ret == RECAP_TYPE_BUFFER || ret == RECAP_TYPE_BUFFER_OUT)
        return recap__fail(RECAP_ERR_INVALID_ARG,
                           "a buffer cannot be a return type (pass outputs as BUFFER_OUT)");
    if (nargs > RECAP_MAX_ARGS)
        return recap__fail(RECAP_ERR_INVALID_ARG, "%zu arguments (at most %d)", nargs,
                           RECAP_MAX_ARGS);
    if (nargs > 0 && args == NULL)
        return recap__fail(RECAP_ERR_INVALID_ARG, "%zu argument types but args is NULL", nargs);
    for (i = 0; i < nargs; i++) {
        if (ffi_of(args[i]) == NULL)
            return recap__fail(RECAP_ERR_INVALID_ARG, "argument %zu: unknown type code %d", i,
                               (int)args[i]);
        if (args[i] == RECAP_TYPE_VOID)
            return recap__fail(RECAP_ERR_INVALID_ARG, "argument %zu: VOID is a return type", i);
    }
    return RECAP_OK;
}

recap_status_t recap_signature_create(recap_type_t ret, const recap_type_t *args, size_t nargs,
                                      recap_signature_h *sig_p)
{
    recap_signature_h s;
    recap_status_t st;
    size_t i;

    RECAP_CHECK_ARG(sig_p != NULL, "sig_p is NULL");
    st = check_types(ret, args, nargs);
    if (st != RECAP_OK)
        return st;
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return recap__fail(RECAP_ERR_NO_MEMORY, "signature");
    s->refs = 1;
    s->ret = ret;
    s->nargs = (uint32_t)nargs;
    for (i = 0; i < nargs; i++) {
        s->types[i] = args[i];
        s->atypes[i] = ffi_of(args[i]);
        if (args[i] == RECAP_TYPE_BUFFER)
            s->in[s->nin++] = (uint8_t)i;
        else if (args[i] == RECAP_TYPE_BUFFER_OUT)
            s->out[s->nout++] = (uint8_t)i;
    }
    if (ffi_prep_cif(&s->cif, FFI_DEFAULT_ABI, (unsigned)nargs, ffi_of(ret), s->atypes) != FFI_OK) {
        free(s);
        return recap__fail(RECAP_ERR_UNSUPPORTED, "libffi cannot prepare this signature");
    }
    *sig_p = s;
    return RECAP_OK;
}

void recap__signature_ref(recap_signature_h sig)
{
    __atomic_add_fetch(&sig->refs, 1, __ATOMIC_RELAXED);
}

void recap__signature_unref(recap_signature_h sig)
{
    if (__atomic_sub_fetch(&sig->refs, 1, __ATOMIC_ACQ_REL) == 0)
        free(sig);
}

recap_status_t recap_signature_destroy(recap_signature_h sig)
{
    RECAP_CHECK_ARG(sig != NULL, "signature is NULL");
    recap__signature_unref(sig);
    return RECAP_OK;
}
