/* SPDX-License-Identifier: Apache-2.0 */
/* Plain buffers as the host program sees them. */
#include "config.h"

#include "base/error.h"
#include "base/handle.h"
#include "plain/plain.h"

recap_status_t recap_plain_buffer_create(recap_plain_engine_h engine, size_t bytes, int needs_grad,
                                         recap_buffer_t *buf_p)
{
    recap__pbuf_t *b;
    recap_status_t st;

    RECAP_CHECK_HANDLE(engine, RECAP_MAGIC_PLAIN_ENGINE, "plain engine");
    RECAP_CHECK_ARG(buf_p != NULL, "NULL argument");
    RECAP_CHECK_ARG(bytes > 0, "buffer of 0 bytes");
    st = recap__pbuf_alloc(engine, bytes, needs_grad, &b);
    if (st == RECAP_OK)
        *buf_p = b;
    return st;
}

recap_status_t recap_plain_buffer_destroy(recap_buffer_t buf)
{
    recap__pbuf_t *b;
    recap_status_t st = recap__pbuf_check(buf, &b);

    if (st == RECAP_OK)
        recap__pbuf_free(b);
    return st;
}

recap_status_t recap_plain_buffer_data(recap_buffer_t buf, void **data_p)
{
    recap__pbuf_t *b;
    recap_status_t st = recap__pbuf_check(buf, &b);

    if (st != RECAP_OK)
        return st;
    RECAP_CHECK_ARG(data_p != NULL, "data_p is NULL");
    recap__lock(&b->engine->lock);
    *data_p = b->st->block != NULL ? b->st->block->data : NULL;
    recap__unlock(&b->engine->lock);
    return RECAP_OK;
}

recap_status_t recap_plain_buffer_bytes(recap_buffer_t buf, size_t *bytes_p)
{
    recap__pbuf_t *b;
    recap_status_t st = recap__pbuf_check(buf, &b);

    if (st != RECAP_OK)
        return st;
    RECAP_CHECK_ARG(bytes_p != NULL, "bytes_p is NULL");
    *bytes_p = b->bytes;
    return RECAP_OK;
}

recap_status_t recap_plain_buffer_set_needs_grad(recap_buffer_t buf, int needs_grad)
{
    recap__pbuf_t *b;
    recap_status_t st = recap__pbuf_check(buf, &b);

    if (st == RECAP_OK)
        b->needs_grad = needs_grad != 0;
    return st;
}
