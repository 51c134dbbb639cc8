/*
 * staging.h: the protocols' staging buffers (pinned host memory mapped for the GPU, plain host
 * memory without a GPU, and device memory), one pool of src/gpu/pool.h per context.
 *
 * Pinned allocation costs milliseconds, so freed buffers stay cached on a free list per
 * (class, kind, power-of-two size) and are handed out again. GDTE_STAGING_MAX bounds the bytes
 * held (in use and cached) and is split between classes (the pool's shares): senders,
 * receivers and RDMA rings each have their own share, so a side that waits for its peer can
 * never hold the memory the other side needs to make that peer progress. The bound is hard: a
 * full share makes a request wait, never drop.
 */
#ifndef GDTE_PROTO_STAGING_H
#define GDTE_PROTO_STAGING_H

#include <stdint.h>
#include "gdte.h"
#include "gpu/pool.h"

typedef enum { GDTE_STG_HOST = GDTE_GPU_POOL_HOST, GDTE_STG_DEVICE = GDTE_GPU_POOL_DEVICE } gdte_stg_kind_t;
typedef enum { GDTE_STG_SEND = 0, GDTE_STG_RECV = 1, GDTE_STG_RING = 2, GDTE_STG_CLASS_COUNT_ } gdte_stg_class_t;

/* A buffer: `ptr`, `size` (usable bytes, a power of two >= the request), `kind`, `share` (its
 * class). */
typedef gdte_gpu_pool_buf_t gdte_stg_buf_t;
typedef gdte_gpu_pool_t gdte_stg_pool_t;

/* `rings`: keep a share for RDMA rings. */
gdte_status_t gdte_stg_init(gdte_stg_pool_t *pool, int64_t staging_max, int rings);
void gdte_stg_destroy(gdte_stg_pool_t *pool);
/* GDTE_OK with *buf_p; GDTE_INPROGRESS when the class's budget is exhausted for now (retry
 * after other buffers come back); an error when memory cannot be had at all. */
static inline gdte_status_t gdte_stg_get(gdte_stg_pool_t *pool, gdte_stg_kind_t kind, gdte_stg_class_t cls,
                                         int64_t size, gdte_stg_buf_t **buf_p)
{
    return gdte_gpu_pool_get(pool, (int)cls, (gdte_gpu_pool_kind_t)kind, 0, size > 0 ? (size_t)size : 0, buf_p);
}
static inline void gdte_stg_put(gdte_stg_pool_t *pool, gdte_stg_buf_t *buf) { gdte_gpu_pool_put(pool, buf); }
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
