/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#ifdef HAVE_NVTX3
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>

#include "base/nvtx.h"

/* The names a timeline shows, in recap__nvtx_t's order, each with its own color. */
static const struct {
    const char *name;
    uint32_t argb;
} ranges[RECAP_NVTX_COUNT] = {
    {"recap prime", 0xff76b900},          {"recap launch advance", 0xff0071c5},
    {"recap slot write", 0xffe6a100},     {"recap region release", 0xff8a2be2},
    {"recap region rebuild", 0xffd7263d}, {"recap checkpoint recompute", 0xffd7263d},
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static nvtxDomainHandle_t domain; /* NULL with no tool attached: NVTX ignores it then */

static void create_domain(void)
{
    domain = nvtxDomainCreateA("recap");
}

void recap__nvtx_push(recap__nvtx_t what)
{
    nvtxEventAttributes_t a = {0};

    pthread_once(&once, create_domain);
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.colorType = NVTX_COLOR_ARGB;
    a.color = ranges[what].argb;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = ranges[what].name;
    nvtxDomainRangePushEx(domain, &a);
}

void recap__nvtx_pop(void)
{
    nvtxDomainRangePop(domain);
}

#else
/* ISO C wants a translation unit to declare something. */
typedef int recap__nvtx_compiled_out;
#endif
