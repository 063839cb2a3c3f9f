/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What dlsym answers for the CUDA names librecap exports, as the process would answer without
 * librecap (lookup.c says how). The dlsym interposer (procaddress.c) then hands out
 * recap's wrapper where that answer is the function the wrapper forwards to.
 */
#ifndef RECAP_HOOKS_LOOKUP_H
#define RECAP_HOOKS_LOOKUP_H

#include "base/dl.h"

/* librecap's own exported definition of `name`, or NULL: an interposed CUDA name when it starts
 * with "cu". Reads librecap's symbol table, takes no lock, safe anywhere. */
RECAP_NO_SANITIZE_EARLY void *recap__lookup_own(const char *name);

/* dlsym(handle, name) for a caller at `caller` as if librecap were not loaded: RTLD_DEFAULT and
 * RTLD_NEXT are resolved for the caller's object, and librecap's own definition is never the
 * answer (except for a handle to librecap itself). Loads and initializes nothing. */
void *recap__lookup_without_recap(void *handle, const char *name, const void *caller);

/* The loaded CUDA driver's definition of `name` ($RECAP_CUDA_DRIVER, else libcuda.so.1), or NULL
 * when no driver is loaded: never loads or initializes the driver. */
void *recap__lookup_loaded_driver(const char *name);

/* A per-call-site cache of answers, valid until the next dlopen or dlclose (glibc's
 * counts of loads and unloads, read under its lock). get returns 1 with the answer stored for
 * (handle, caller, name) in generation `gen`; put stores one computed after
 * recap__lookup_generation returned `gen`. */
typedef struct {
    unsigned long long adds, subs;
    int valid;
} recap_lookup_gen_t;
recap_lookup_gen_t recap__lookup_generation(void);
int recap__lookup_cache_get(recap_lookup_gen_t gen, void *handle, const void *caller,
                            const char *name, void **answer_p);
void recap__lookup_cache_put(recap_lookup_gen_t gen, void *handle, const void *caller,
                             const char *name, void *answer);

/* The CUDA runtime's definition of `name` that recap's runtime wrapper forwards to: the next one
 * after librecap's, else the first loaded libcudart's (Python extensions load theirs
 * RTLD_LOCAL), or NULL. Loads nothing. */
void *recap__lookup_runtime(const char *name);

/* After an answer: dlerror() as glibc leaves it (no pending error after a success; an "undefined
 * symbol" error after a NULL answer). */
void recap__lookup_set_dlerror(const char *name, void *answer);

#endif
