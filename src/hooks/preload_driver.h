/* SPDX-License-Identifier: Apache-2.0 */
/* The driver wrappers, for procaddress.c to hand out from cuGetProcAddress and dlsym. */
#ifndef RECAP_HOOKS_PRELOAD_DRIVER_H
#define RECAP_HOOKS_PRELOAD_DRIVER_H

/* One row per exported variant: the name programs ask for (cuGetProcAddress takes the base name),
 * the exported symbol, and recap's wrapper of that symbol. */
typedef struct {
    const char *base;
    const char *symbol;
    void *wrapper;
} recap__driver_hook_t;

extern const recap__driver_hook_t recap__driver_hooks[];
extern const unsigned recap__ndriver_hooks;

#endif
