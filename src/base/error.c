/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/log.h"
#include "base/text.h"

/*
 * One buffer per thread, so messages never race: allocated at the thread's first failure and
 * freed when the thread ends (a pthread key's destructor). Thread-local storage holds only the
 * two pointers, in the initial-exec model: librecap's whole TLS block is static TLS, which a late
 * dlopen (Python's ctypes, a framework plugin) must find in glibc's small surplus, so it stays a
 * few words (tests/package/late_dlopen.sh). Without memory for a buffer, the message is the
 * status's.
 */
#define MESSAGE_LEN 512
static __thread char *buffer __attribute__((tls_model("initial-exec")));
static __thread const char *message __attribute__((tls_model("initial-exec")));
static pthread_key_t key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static int have_key;

/* At thread exit. A later failure in another key's destructor allocates again (glibc runs the
 * destructors again for keys set meanwhile). */
static void buffer_free(void *p)
{
    free(p);
    buffer = NULL;
    message = NULL;
}

static void key_create(void)
{
    have_key = pthread_key_create(&key, buffer_free) == 0;
}

static char *thread_buffer(void)
{
    if (buffer == NULL) {
        pthread_once(&key_once, key_create);
        buffer = malloc(MESSAGE_LEN);
        if (buffer != NULL && have_key)
            pthread_setspecific(key, buffer);
    }
    return buffer;
}

recap_status_t recap__fail(recap_status_t status, const char *fmt, ...)
{
    char *buf = thread_buffer();
    va_list ap;
    int n;

    if (buf == NULL) {
        message = recap_strerror(status);
        return status;
    }
    va_start(ap, fmt);
    n = vsnprintf(buf, MESSAGE_LEN, fmt, ap);
    va_end(ap);
    if (n >= MESSAGE_LEN) { /* a long name in it: the message says it was cut, at a character */
        size_t keep = MESSAGE_LEN - sizeof(RECAP__TEXT_CUT);

        while (keep > 0 && ((unsigned char)buf[keep] & 0xC0) == 0x80)
            keep--;
        memcpy(buf + keep, RECAP__TEXT_CUT, sizeof(RECAP__TEXT_CUT));
    }
    message = buf;
    recap__log(RECAP_LOG_DEBUG, "%s: %s", recap_strerror(status), buf);
    return status;
}

const char *recap_last_error(void)
{
    return message != NULL ? message : "";
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
