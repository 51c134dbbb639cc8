/*
 * staging.h: bounded, reused staging buffers for the protocols (pinned host memory mapped
 * for the GPU, plain host memory without a GPU, and device memory).
 *
 * Pinned allocation costs milliseconds, so freed buffers stay cached on a free list per
 * (kind, class, power-of-two size) and are handed out again. GDTE_STAGING_MAX bounds the bytes
 * held (in use and cached) and is split between classes: senders, receivers and RDMA rings
 * each have their own share, so a side that waits for its peer can never hold the memory the
 * other side needs to make that peer progress (a full pool makes a request wait, never drop).
 */
#ifndef GDTE_PROTO_STAGING_H
#define GDTE_PROTO_STAGING_H

#include <stdint.h>
#include "gdte.h"

typedef enum { GDTE_STG_HOST = 0, GDTE_STG_DEVICE = 1, GDTE_STG_KIND_COUNT_ } gdte_stg_kind_t;
typedef enum { GDTE_STG_SEND = 0, GDTE_STG_RECV = 1, GDTE_STG_RING = 2, GDTE_STG_CLASS_COUNT_ } gdte_stg_class_t;

#define GDTE_STG_MIN_LOG 12 /* smallest buffer: 4 KiB */
#define GDTE_STG_MAX_LOG 40

typedef struct gdte_stg_buf {
    void *ptr;
    int64_t size; /* usable bytes: a power of two >= the request */
    uint8_t kind, cls, log2;
    struct gdte_stg_buf *next;
} gdte_stg_buf_t;

typedef struct gdte_stg_pool {
    int gpu;                                    /* host buffers are pinned and mapped */
    int64_t budget[GDTE_STG_CLASS_COUNT_];
    int64_t held[GDTE_STG_CLASS_COUNT_];        /* in use + cached */
    int64_t total_held, peak, allocs;
    gdte_stg_buf_t *free_list[GDTE_STG_KIND_COUNT_][GDTE_STG_CLASS_COUNT_][GDTE_STG_MAX_LOG + 1];
} gdte_stg_pool_t;

/* `gpu`: host buffers are pinned and mapped; `rings`: keep a share for RDMA rings. */
void gdte_stg_init(gdte_stg_pool_t *pool, int64_t staging_max, int gpu, int rings);
void gdte_stg_destroy(gdte_stg_pool_t *pool);
/* GDTE_OK with *buf_p; GDTE_INPROGRESS when the class's budget is exhausted for now (retry
 * after other buffers come back); an error when memory cannot be had at all. */
gdte_status_t gdte_stg_get(gdte_stg_pool_t *pool, gdte_stg_kind_t kind, gdte_stg_class_t cls, int64_t size,
                           gdte_stg_buf_t **buf_p);
void gdte_stg_put(gdte_stg_pool_t *pool, gdte_stg_buf_t *buf);
/* Largest buffer a message of this class should ask for, so that several messages can hold
 * one each at the same time. */
int64_t gdte_stg_frag_limit(const gdte_stg_pool_t *pool, gdte_stg_class_t cls);

static inline int gdte_log2_ceil(int64_t v)
{
    int l = 0;
    while (l < 62 && ((int64_t)1 << l) < v) l++;
    return l;
}
static inline int64_t gdte_pow2_floor(int64_t v)
{
    int64_t p = 1;
    while (p <= v / 2) p <<= 1;
    return p;
}

#endif
