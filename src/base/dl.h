/* The real dlsym. recap interposes dlsym itself when preloaded (hooks/procaddress.c), so its own
 * lookups go around that interposer. */
#ifndef RECAP_BASE_DL_H
#define RECAP_BASE_DL_H

void *recap__dlsym(void *handle, const char *name);

#endif
