/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A fake libcupti for CI, where the real one cannot subscribe (no GPU): the four entry points
 * recap resolves, one subscriber, and the callbacks it enabled. The test plays what the real
 * CUPTI does around a host's driver call (API entry, resource callbacks, API exit) through
 * fake_cupti_emit, which calls the subscriber's callback when that id is enabled.
 *
 * recap finds it through RECAP_CUPTI_PATH (set by the test itself). Never installed.
 */
#include <cupti.h>
#include <pthread.h>

#define EXPORT __attribute__((visibility("default")))
#define MAX_ENABLED 64

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static CUpti_CallbackFunc callback;
static void *userdata;
static int subscribed;
static struct {
    CUpti_CallbackDomain domain;
    CUpti_CallbackId id;
} enabled[MAX_ENABLED];
static int nenabled;

EXPORT void fake_cupti_emit(CUpti_CallbackDomain domain, CUpti_CallbackId id, const void *data);

/* A token subscriber handle: recap only hands it back. */
static int the_subscriber;

EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc fn, void *user)
{
    CUptiResult r = CUPTI_SUCCESS;

    if (sub == NULL || fn == NULL)
        return CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&lock);
    if (subscribed) {
        r = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    } else {
        subscribed = 1;
        callback = fn;
        userdata = user;
        nenabled = 0;
        *sub = (CUpti_SubscriberHandle)&the_subscriber;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle sub)
{
    CUptiResult r = CUPTI_SUCCESS;

    pthread_mutex_lock(&lock);
    if (!subscribed || sub != (CUpti_SubscriberHandle)&the_subscriber)
        r = CUPTI_ERROR_INVALID_PARAMETER;
    else
        subscribed = 0, callback = NULL, nenabled = 0;
    pthread_mutex_unlock(&lock);
    return r;
}

EXPORT CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle sub,
                                       CUpti_CallbackDomain domain, CUpti_CallbackId id)
{
    CUptiResult r = CUPTI_SUCCESS;
    int i;

    pthread_mutex_lock(&lock);
    if (!subscribed || sub != (CUpti_SubscriberHandle)&the_subscriber) {
        r = CUPTI_ERROR_INVALID_PARAMETER;
    } else {
        for (i = 0; i < nenabled; i++)
            if (enabled[i].domain == domain && enabled[i].id == id)
                break;
        if (enable && i == nenabled && nenabled < MAX_ENABLED) {
            enabled[nenabled].domain = domain;
            enabled[nenabled++].id = id;
        } else if (!enable && i < nenabled) {
            enabled[i] = enabled[--nenabled];
        }
    }
    pthread_mutex_unlock(&lock);
    return r;
}

EXPORT CUptiResult cuptiGetResultString(CUptiResult r, const char **s)
{
    if (s == NULL)
        return CUPTI_ERROR_INVALID_PARAMETER;
    switch (r) {
    case CUPTI_SUCCESS: *s = "CUPTI_SUCCESS"; break;
    case CUPTI_ERROR_INVALID_PARAMETER: *s = "CUPTI_ERROR_INVALID_PARAMETER"; break;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
        *s = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED";
        break;
    default: *s = "CUPTI_ERROR_UNKNOWN"; break;
    }
    return CUPTI_SUCCESS;
}

/* Calls the subscriber's callback as CUPTI would, when it enabled (domain, id). */
EXPORT void fake_cupti_emit(CUpti_CallbackDomain domain, CUpti_CallbackId id, const void *data)
{
    CUpti_CallbackFunc fn = NULL;
    void *user = NULL;
    int i;

    pthread_mutex_lock(&lock);
    for (i = 0; subscribed && i < nenabled; i++)
        if (enabled[i].domain == domain && enabled[i].id == id) {
            fn = callback;
            user = userdata;
        }
    pthread_mutex_unlock(&lock);
    if (fn != NULL)
        fn(user, domain, id, data);
}
