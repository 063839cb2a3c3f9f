/* SPDX-License-Identifier: Apache-2.0 */
/* A plugin that needs the shim (tests/dlsym/shim.c): dlopen'ed RTLD_LOCAL by tests/dlsym/client.c. */
#define EXPORT __attribute__((visibility("default")))

int dlsym_shim_gpa(const char *symbol, void **pfn);
int dlsym_shim_launch(void *exec, void *stream);
EXPORT int dlsym_plugin_gpa(const char *symbol, void **pfn);
EXPORT int dlsym_plugin_launch(void *exec, void *stream);

EXPORT int dlsym_plugin_launch(void *exec, void *stream)
{
    return dlsym_shim_launch(exec, stream);
}

EXPORT int dlsym_plugin_gpa(const char *symbol, void **pfn)
{
    return dlsym_shim_gpa(symbol, pfn);
}
