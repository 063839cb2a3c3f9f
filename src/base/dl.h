/* SPDX-License-Identifier: Apache-2.0 */
/* libc's dlsym, dlopen and dlclose. recap interposes dlsym itself when preloaded
 * (src/hooks/procaddress.c), so its own lookups go around that interposer; and the interposer runs
 * inside sanitizer runtimes' initialization (ASan and TSan resolve their interceptors through
 * dlsym(RTLD_NEXT)), where their dlopen and pthread_once interceptors cannot work yet, so it uses
 * these and nothing they intercept. */
#ifndef RECAP_BASE_DL_H
#define RECAP_BASE_DL_H

/* On functions the dlsym interposer runs: instrumented by ASan or TSan, they would touch shadow
 * memory that does not exist yet while the sanitizer initializes (when recap itself is built
 * with a sanitizer). */
#define RECAP_NO_SANITIZE_EARLY __attribute__((no_sanitize("address", "thread")))

typedef void *(*recap__dlsym_fn)(void *, const char *);

RECAP_NO_SANITIZE_EARLY void *recap__dlsym(void *handle, const char *name);
/* libc's dlsym itself, for a tail call (never NULL: a fallback that answers NULL if none was found). */
RECAP_NO_SANITIZE_EARLY recap__dlsym_fn recap__real_dlsym(void);
RECAP_NO_SANITIZE_EARLY void *recap__dlopen(const char *file, int mode);
RECAP_NO_SANITIZE_EARLY int recap__dlclose(void *handle);

#endif
