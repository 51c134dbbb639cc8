/* Staging buffer pool: see staging.h. */
#include <stdlib.h>
#include <string.h>
#include "staging.h"
#include "gpu/gpu.h"
#include "util/util.h"

void gdte_stg_init(gdte_stg_pool_t *pool, int64_t staging_max, int gpu, int rings)
{
    memset(pool, 0, sizeof *pool);
    pool->gpu = gpu;
    if (rings) {
        /* Rings are device memory held for the life of a peer; keep them to a quarter. */
        pool->budget[GDTE_STG_SEND] = staging_max / 8 * 3;
        pool->budget[GDTE_STG_RECV] = staging_max / 8 * 3;
        pool->budget[GDTE_STG_RING] = staging_max / 4;
    } else {
        pool->budget[GDTE_STG_SEND] = staging_max / 2;
        pool->budget[GDTE_STG_RECV] = staging_max / 2;
        pool->budget[GDTE_STG_RING] = 0;
    }
}

static void raw_free(const gdte_stg_pool_t *pool, gdte_stg_buf_t *b)
{
    if (b->kind == GDTE_STG_DEVICE) gdte_gpu_free(b->ptr);
    else if (pool->gpu) gdte_gpu_host_free(b->ptr);
    else free(b->ptr);
    free(b);
}

static void release(gdte_stg_pool_t *pool, gdte_stg_buf_t *b)
{
    pool->held[b->cls] -= b->size;
    pool->total_held -= b->size;
    raw_free(pool, b);
}

void gdte_stg_destroy(gdte_stg_pool_t *pool)
{
    for (int k = 0; k < GDTE_STG_KIND_COUNT_; k++)
        for (int c = 0; c < GDTE_STG_CLASS_COUNT_; c++)
            for (int l = 0; l <= GDTE_STG_MAX_LOG; l++) {
                gdte_stg_buf_t *b = pool->free_list[k][c][l];
                while (b) {
                    gdte_stg_buf_t *n = b->next;
                    release(pool, b);
                    b = n;
                }
                pool->free_list[k][c][l] = NULL;
            }
    if (pool->total_held) gdte_warn("staging: %lld bytes still in use at destruction", (long long)pool->total_held);
}

/* Free cached buffers of a class (largest first) until `need` more bytes fit its budget. */
static int evict(gdte_stg_pool_t *pool, gdte_stg_class_t cls, int64_t need)
{
    for (int l = GDTE_STG_MAX_LOG; l >= 0; l--)
        for (int k = 0; k < GDTE_STG_KIND_COUNT_; k++)
            while (pool->free_list[k][cls][l] && pool->held[cls] + need > pool->budget[cls]) {
                gdte_stg_buf_t *b = pool->free_list[k][cls][l];
                pool->free_list[k][cls][l] = b->next;
                release(pool, b);
            }
    return pool->held[cls] + need <= pool->budget[cls];
}

gdte_status_t gdte_stg_get(gdte_stg_pool_t *pool, gdte_stg_kind_t kind, gdte_stg_class_t cls, int64_t size,
                           gdte_stg_buf_t **buf_p)
{
    if (size <= 0) size = 1;
    int l = gdte_log2_ceil(size);
    if (l < GDTE_STG_MIN_LOG) l = GDTE_STG_MIN_LOG;
    if (l > GDTE_STG_MAX_LOG) return GDTE_ERR_NO_DEVICE_MEMORY;
    int64_t bytes = (int64_t)1 << l;
    gdte_stg_buf_t *b = pool->free_list[kind][cls][l];
    if (b) {
        pool->free_list[kind][cls][l] = b->next;
        b->next = NULL;
        *buf_p = b;
        return GDTE_OK;
    }
    if (bytes > pool->budget[cls]) return GDTE_ERR_NO_DEVICE_MEMORY;
    if (!evict(pool, cls, bytes)) return GDTE_INPROGRESS;
    b = calloc(1, sizeof *b);
    if (!b) return GDTE_ERR_NO_MEMORY;
    gdte_status_t st = GDTE_OK;
    if (kind == GDTE_STG_DEVICE) {
        st = gdte_gpu_malloc(&b->ptr, (size_t)bytes);
    } else if (pool->gpu) {
        st = gdte_gpu_host_alloc(&b->ptr, (size_t)bytes, 1);
    } else if (posix_memalign(&b->ptr, 4096, (size_t)bytes)) {
        st = GDTE_ERR_NO_MEMORY;
    }
    if (st != GDTE_OK) {
        gdte_error("staging: cannot allocate %lld bytes of %s memory: %s", (long long)bytes,
                   kind == GDTE_STG_DEVICE ? "device" : (pool->gpu ? "pinned" : "host"), gdte_status_name(st));
        free(b);
        return st == GDTE_ERR_NO_MEMORY ? st : GDTE_ERR_NO_DEVICE_MEMORY;
    }
    b->size = bytes;
    b->kind = (uint8_t)kind;
    b->cls = (uint8_t)cls;
    b->log2 = (uint8_t)l;
    pool->held[cls] += bytes;
    pool->total_held += bytes;
    if (pool->total_held > pool->peak) pool->peak = pool->total_held;
    pool->allocs++;
    *buf_p = b;
    return GDTE_OK;
}

void gdte_stg_put(gdte_stg_pool_t *pool, gdte_stg_buf_t *b)
{
    if (!b) return;
    b->next = pool->free_list[b->kind][b->cls][b->log2];
    pool->free_list[b->kind][b->cls][b->log2] = b;
}

int64_t gdte_stg_frag_limit(const gdte_stg_pool_t *pool, gdte_stg_class_t cls)
{
    int64_t lim = gdte_pow2_floor(pool->budget[cls] / 4);
    return lim < 4096 ? 4096 : lim;
}
