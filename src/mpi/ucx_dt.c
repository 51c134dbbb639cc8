/*
 * gdte types as UCX generic datatypes (gdte_ucx.h).
 *
 * UCX calls start_pack/start_unpack once per operation, then pack(offset, max_length) or
 * unpack(offset, length) per fragment it moves (in order for a send; in any order for a
 * receive under rendezvous), then finish. Each callback is one gdte_pack/gdte_unpack on a byte
 * range of the packed stream: gdte's partial packs exist for exactly this. gdte_pack detects
 * device buffers itself, so the same datatype serves host and device data.
 *
 * Only libgdte's public API is used: this file links against libgdte like any MPI would.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "gdte_ucx.h"

typedef struct dt_ctx {
    gdte_type_h type; /* our own reference (a dup) */
    int64_t count;    /* type elements per UCX element */
    ucp_datatype_t dt;
    struct dt_ctx *next;
} dt_ctx_t;

typedef struct dt_state {
    dt_ctx_t *ctx;
    void *buffer;
    int64_t count; /* type elements in this operation */
    int64_t total; /* packed bytes */
} dt_state_t;

static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static dt_ctx_t *ctx_list;

static void *start(void *context, void *buffer, size_t ucx_count)
{
    dt_ctx_t *c = context;
    dt_state_t *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->ctx = c;
    s->buffer = buffer;
    if (ucx_count > (size_t)INT64_MAX || __builtin_mul_overflow((int64_t)ucx_count, c->count, &s->count) ||
        gdte_type_pack_size(s->count, c->type, &s->total) != GDTE_OK) {
        free(s);
        return NULL;
    }
    return s;
}

static void *start_pack(void *context, const void *buffer, size_t count)
{
    return start(context, (void *)buffer, count);
}

static void *start_unpack(void *context, void *buffer, size_t count) { return start(context, buffer, count); }

static size_t packed_size(void *state) { return (size_t)((dt_state_t *)state)->total; }

static size_t pack(void *state, size_t offset, void *dest, size_t max_length)
{
    dt_state_t *s = state;
    gdte_pack_params_t p = {.field_mask = GDTE_PACK_FIELD_OFFSET, .offset = (int64_t)offset};
    int64_t done = 0;
    gdte_status_t st = gdte_pack(s->buffer, s->count, s->ctx->type, dest, (int64_t)max_length, &p, &done);
    /* UCX's pack callback cannot fail; a failure here is a bug in the caller's arguments (the
     * offsets come from UCX and are always inside the stream). */
    return st == GDTE_OK ? (size_t)done : 0;
}

static ucs_status_t unpack(void *state, size_t offset, const void *src, size_t length)
{
    dt_state_t *s = state;
    if ((int64_t)offset > s->total || (int64_t)length > s->total - (int64_t)offset)
        return UCS_ERR_MESSAGE_TRUNCATED;
    gdte_pack_params_t p = {.field_mask = GDTE_PACK_FIELD_OFFSET, .offset = (int64_t)offset};
    int64_t done = 0;
    gdte_status_t st = gdte_unpack(src, (int64_t)length, s->buffer, s->count, s->ctx->type, &p, &done);
    if (st != GDTE_OK) return st == GDTE_ERR_NO_MEMORY ? UCS_ERR_NO_MEMORY : UCS_ERR_INVALID_PARAM;
    return (size_t)done == length ? UCS_OK : UCS_ERR_MESSAGE_TRUNCATED;
}

static void finish(void *state) { free(state); }

static const ucp_generic_dt_ops_t gdte_dt_ops = {
    .start_pack = start_pack,
    .start_unpack = start_unpack,
    .packed_size = packed_size,
    .pack = pack,
    .unpack = unpack,
    .finish = finish,
};

GDTE_API gdte_status_t gdte_ucx_dt_create(gdte_type_h type, int64_t count, ucp_datatype_t *dt_p)
{
    if (!dt_p || count < 0) return count < 0 ? GDTE_ERR_COUNT : GDTE_ERR_INVALID_ARG;
    gdte_type_info_t info;
    gdte_status_t st = gdte_type_get_info(type, &info);
    if (st != GDTE_OK) return st;
    if (!info.committed) return GDTE_ERR_NOT_COMMITTED;
    dt_ctx_t *c = calloc(1, sizeof *c);
    if (!c) return GDTE_ERR_NO_MEMORY;
    c->count = count;
    /* A dup is our reference: the caller may free its handle while UCX still uses ours. */
    if ((st = gdte_type_dup(type, &c->type)) != GDTE_OK) goto err_free;
    if ((st = gdte_type_commit(c->type)) != GDTE_OK) goto err_type;
    if (ucp_dt_create_generic(&gdte_dt_ops, c, &c->dt) != UCS_OK) {
        st = GDTE_ERR_TRANSPORT;
        goto err_type;
    }
    pthread_mutex_lock(&ctx_lock);
    c->next = ctx_list;
    ctx_list = c;
    pthread_mutex_unlock(&ctx_lock);
    *dt_p = c->dt;
    return GDTE_OK;
err_type:
    gdte_type_free(&c->type);
err_free:
    free(c);
    return st;
}

GDTE_API gdte_status_t gdte_ucx_dt_destroy(ucp_datatype_t dt)
{
    pthread_mutex_lock(&ctx_lock);
    dt_ctx_t **pp = &ctx_list;
    while (*pp && (*pp)->dt != dt) pp = &(*pp)->next;
    dt_ctx_t *c = *pp;
    if (c) *pp = c->next;
    pthread_mutex_unlock(&ctx_lock);
    if (!c) return GDTE_ERR_INVALID_ARG;
    ucp_dt_destroy(dt);
    gdte_type_free(&c->type);
    free(c);
    return GDTE_OK;
}
