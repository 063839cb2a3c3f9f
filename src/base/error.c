/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>

#include "base/error.h"
#include "base/log.h"

/* One buffer per thread: messages never race and need no allocation. */
static _Thread_local char last_error[512];

recap_status_t recap__fail(recap_status_t status, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(last_error, sizeof(last_error), fmt, ap);
    va_end(ap);
    recap__log(RECAP_LOG_DEBUG, "%s: %s", recap_strerror(status), last_error);
    return status;
}

const char *recap_last_error(void)
{
    return last_error;
}

const char *recap_strerror(recap_status_t status)
{
    switch (status) {
    case RECAP_OK: return "success";
    case RECAP_ERR_INVALID_ARG: return "invalid argument";
    case RECAP_ERR_NO_MEMORY: return "out of memory";
    case RECAP_ERR_NO_DRIVER: return "no CUDA driver";
    case RECAP_ERR_NO_DEVICE: return "no such CUDA device";
    case RECAP_ERR_WRONG_DEVICE: return "buffer or stream on another device";
    case RECAP_ERR_CUDA: return "CUDA driver call failed";
    case RECAP_ERR_MISALIGNED: return "offset not a multiple of 4";
    case RECAP_ERR_NOT_FOUND: return "not found";
    case RECAP_ERR_EXISTS: return "already exists";
    case RECAP_ERR_DUPLICATE_SEED: return "seed already used";
    case RECAP_ERR_STATE: return "not allowed in the current state";
    case RECAP_ERR_NOT_REGISTERED: return "generator not registered with the capture";
    case RECAP_ERR_CORRUPT: return "corrupt or truncated data";
    case RECAP_ERR_VERSION: return "unknown format version";
    case RECAP_ERR_OPTIONS_DIFFER: return "already initialized with other options";
    case RECAP_ERR_UNSUPPORTED: return "unsupported";
    case RECAP_ERR_BUSY: return "resource busy";
    }
    return "unknown status";
}

int recap_abi_version(void)
{
    return (RECAP_ABI_MAJOR << 16) | RECAP_ABI_MINOR;
}

const char *recap_version_string(void)
{
    return PACKAGE_VERSION;
}
