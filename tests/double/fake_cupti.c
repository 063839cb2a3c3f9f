/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A fake libcupti for CI, where the real one cannot subscribe (no GPU): the entry points recap
 * resolves, one subscriber, and the callbacks it enabled. The test plays what the real CUPTI
 * does around a host's driver call (API entry, resource callbacks, API exit) through
 * fake_cupti_emit, which calls the subscriber's callback when that id is enabled.
 *
 * As CUDA 13's CUPTI, it has cuptiSubscribe_v2: a subscriber gives its name, and a refused one
 * learns the holder's ("CUPTI for NAME"). Built with FAKE_CUPTI_V1_ONLY it is an older CUPTI
 * without it. FAKE_CUPTI_HELD_BY=NAME at load makes a profiler called NAME hold it already.
 *
 * recap finds it through RECAP_CUPTI_PATH (set by the test itself). Never installed.
 */
#include <cupti.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "recap.h" /* RECAP_API, the one export macro */
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

RECAP_API void fake_cupti_emit(CUpti_CallbackDomain domain, CUpti_CallbackId id, const void *data);
RECAP_API const char *fake_cupti_subscriber_name(void);
RECAP_API void fake_cupti_hold(const char *name);
RECAP_API void fake_cupti_release(void);

/* The subscriber's name as CUPTI reports it ("CUPTI for recap"); "" for a v1 subscriber. */
static char holder_name[64];

/* A token subscriber handle: recap only hands it back. */
static int the_subscriber;

/* One subscriber at a time; `name` NULL for the v1 call. A refused v2 caller gets the holder's
 * name in `old`. */
static CUptiResult subscribe(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc fn, void *user,
                             const char *name, char *old, size_t old_len)
{
    CUptiResult r = CUPTI_SUCCESS;

    if (sub == NULL || fn == NULL)
        return CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&lock);
    if (subscribed) {
        r = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
        if (old != NULL && old_len > 0)
            snprintf(old, old_len, "%s", holder_name);
    } else {
        subscribed = 1;
        callback = fn;
        userdata = user;
        nenabled = 0;
        snprintf(holder_name, sizeof(holder_name), name ? "CUPTI for %s" : "", name);
        *sub = (CUpti_SubscriberHandle)&the_subscriber;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

RECAP_API CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc fn, void *user)
{
    return subscribe(sub, fn, user, NULL, NULL, 0);
}

#if !defined(FAKE_CUPTI_V1_ONLY) && defined(CUpti_SubscriberParams_STRUCT_SIZE)
RECAP_API CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc fn,
                                     void *user, CUpti_SubscriberParams *p)
{
    if (p != NULL && p->structSize < CUpti_SubscriberParams_STRUCT_SIZE)
        return CUPTI_ERROR_INVALID_PARAMETER;
    return subscribe(sub, fn, user, p ? p->subscriberName : NULL, p ? p->oldSubscriberName : NULL,
                     p ? p->oldSubscriberSize : 0);
}
#endif

/* A profiler takes CUPTI (it never gets callbacks: only recap's are played). */
static void profiler_callback(void *user, CUpti_CallbackDomain d, CUpti_CallbackId id,
                              const void *data)
{
    (void)user, (void)d, (void)id, (void)data;
}

RECAP_API void fake_cupti_hold(const char *name)
{
    CUpti_SubscriberHandle h;

    subscribe(&h, (CUpti_CallbackFunc)profiler_callback, NULL, name, NULL, 0);
}

/* The profiler lets go. */
RECAP_API void fake_cupti_release(void)
{
    cuptiUnsubscribe((CUpti_SubscriberHandle)&the_subscriber);
}

__attribute__((constructor)) static void held_at_load(void)
{
    const char *name = getenv("FAKE_CUPTI_HELD_BY");

    if (name != NULL && *name != '\0')
        fake_cupti_hold(name);
}

RECAP_API const char *fake_cupti_subscriber_name(void)
{
    return holder_name;
}

RECAP_API CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle sub)
{
    CUptiResult r = CUPTI_SUCCESS;

    pthread_mutex_lock(&lock);
    if (!subscribed || sub != (CUpti_SubscriberHandle)&the_subscriber)
        r = CUPTI_ERROR_INVALID_PARAMETER;
    else
        subscribed = 0, callback = NULL, nenabled = 0, holder_name[0] = '\0';
    pthread_mutex_unlock(&lock);
    return r;
}

RECAP_API CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle sub,
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

RECAP_API CUptiResult cuptiGetResultString(CUptiResult r, const char **s)
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
RECAP_API void fake_cupti_emit(CUpti_CallbackDomain domain, CUpti_CallbackId id, const void *data)
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
