/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Handle validity. Each public object (generator, tracker, snapshot, states object, plain engine,
 * region, manager, checkpoint) starts with a magic number of its kind, poisoned when the
 * object is destroyed, so an entry point handed a forged handle, or one whose object is gone and
 * whose memory has not been reused, fails with RECAP_ERR_INVALID_ARG instead of taking a lock
 * that was never initialized (a spin forever) or following garbage pointers. The check is one
 * load, cheap enough for fork/unfork.
 *
 * Destroy does not read the object before it knows the handle is live: a set of live handles
 * answers that, so a double destroy is refused without touching freed memory (and stays quiet
 * under ASan and valgrind). A handle whose memory was reused for a new object of the same kind
 * cannot be told from that object: handles are plain pointers, with no room for a generation.
 */
#ifndef RECAP_BASE_HANDLE_H
#define RECAP_BASE_HANDLE_H

#include <stdint.h>

#include "base/atfork.h"
#include "base/error.h"

#define RECAP_MAGIC_GENERATOR 0x4e455247u  /* "GREN" */
#define RECAP_MAGIC_TRACKER 0x4b435254u    /* "TRCK" */
#define RECAP_MAGIC_SNAPSHOT 0x50414e53u   /* "SNAP" */
#define RECAP_MAGIC_STATES 0x54415453u     /* "STAT" */
#define RECAP_MAGIC_PLAIN_ENGINE 0x54534f48u /* "HOST" */
#define RECAP_MAGIC_REGION 0x4e474552u     /* "REGN" */
#define RECAP_MAGIC_MANAGER 0x5247414du    /* "MAGR" */
#define RECAP_MAGIC_CHECKPOINT 0x54504b43u /* "CKPT" */
#define RECAP_MAGIC_DEAD 0x44414544u       /* "DEAD": written by destroy */

/* Records a new object of kind `magic` as live; RECAP_ERR_NO_MEMORY (nothing recorded) when the
 * set cannot grow. */
recap_status_t recap__handle_register(void *h, uint32_t magic);
/* Forgets a live object of kind `magic`; 0 (nothing changed) when h is not one (destroyed
 * already, never created, or another kind). */
int recap__handle_unregister(void *h, uint32_t magic);

/* For an entry point: fails with RECAP_ERR_INVALID_ARG unless h is a live object of its kind. */
#define RECAP_CHECK_HANDLE(h, magic_, kind)                                                  \
    do {                                                                                     \
        RECAP_CHECK_ARG((h) != NULL, kind " is NULL");                                       \
        RECAP_CHECK_ARG((h)->magic == (magic_), kind " handle %p is not live (destroyed, or " \
                        "never created)", (void *)(h));                                      \
    } while (0)

/* Whether h is a live object of kind `magic`, without reading *h. */
int recap__handle_live(const void *h, uint32_t magic);

/* For a destroy, first thing: fails with RECAP_ERR_INVALID_ARG, without reading *h, unless h is a
 * live object of its kind (a double destroy, a forged handle). The destroy then unregisters h
 * once it has decided to go ahead (refusing if another thread's destroy got there first). */
#define RECAP_CHECK_LIVE(h, magic_, kind)                                                    \
    do {                                                                                     \
        RECAP_CHECK_ARG((h) != NULL, kind " is NULL");                                       \
        RECAP_CHECK_ARG(recap__handle_live((h), (magic_)), kind " handle %p is not live "    \
                        "(destroyed already, or never created)", (void *)(h));               \
    } while (0)

void recap__handle_atfork(recap__atfork_t when);

#endif
