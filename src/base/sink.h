/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Where recap writes its own output (RECAP_LOG_FILE, RECAP_REPORT): never somewhere that could
 * block the host. A FIFO nobody reads would hang every process at its first log line or at exit
 * (bash, python3, timeout itself), so the file is opened without waiting and kept only when it is
 * a regular file, a terminal, /dev/null or one of the process's own standard streams.
 */
#ifndef RECAP_BASE_SINK_H
#define RECAP_BASE_SINK_H

/* Opens `path` (what variable `var`=`spec` names) for writing with `flags` (O_APPEND, O_TRUNC;
 * O_WRONLY, O_CREAT and O_CLOEXEC are added). Returns the descriptor, or -1 after one warning on
 * stderr (once per variable) that ends with `fallback` (what happens instead, e.g. "logging to
 * stderr"). */
int recap__sink_open(const char *var, const char *spec, const char *path, int flags,
                     const char *fallback);

#endif
