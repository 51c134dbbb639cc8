/* The interposer's staging: one pool of src/gpu/pool.h for the process (see staging.h). */
#include <stdatomic.h>
#include <string.h>
#include "staging.h"
#include "util/util.h"

/* Free buffers kept per class: as many as fit in RETAIN_BYTES, and at least RETAIN_MIN (a
 * window of 64 large messages, as an OSU-style bandwidth loop keeps in flight, would otherwise
 * be unpinned and pinned again on every iteration). GDTE_STAGING_MAX caps the whole pool. */
#define RETAIN_MIN 64
#define RETAIN_BYTES (8 << 20)

static gdte_gpu_pool_t pool;
static atomic_int pool_up; /* initialised once; stays so after finalize (stats, late releases) */

gdte_status_t gdte_stage_init(void)
{
    if (atomic_load_explicit(&pool_up, memory_order_acquire)) return GDTE_OK;
    gdte_gpu_pool_params_t p = {
        .name = "interposer",
        .budget = {gdte_knob(GDTE_KNOB_STAGING_MAX)},
        .limit = GDTE_GPU_POOL_SOFT,
        .host = GDTE_GPU_POOL_GUARDED,
        .retain_min = RETAIN_MIN,
        .retain_bytes = RETAIN_BYTES,
    };
    gdte_status_t st = gdte_gpu_pool_init(&pool, &p);
    if (st == GDTE_OK) atomic_store_explicit(&pool_up, 1, memory_order_release);
    return st;
}

void gdte_stage_finalize(void)
{
    if (atomic_load_explicit(&pool_up, memory_order_acquire)) gdte_gpu_pool_destroy(&pool);
}

gdte_status_t gdte_stage_acquire(gdte_stage_kind_t kind, int fake, size_t size, gdte_stage_t **stage_p)
{
    if (!atomic_load_explicit(&pool_up, memory_order_acquire)) return GDTE_ERR_NOT_INITIALIZED;
    return gdte_gpu_pool_get(&pool, 0, kind, fake, size, stage_p);
}

void gdte_stage_release(gdte_stage_t *s)
{
    if (s) gdte_gpu_pool_put(&pool, s);
}

void *gdte_stage_tail(const gdte_stage_t *s, size_t n)
{
    if (s->kind == GDTE_STAGE_DEVICE && !s->fake) return s->ptr;
    size_t r = (n + 63) & ~(size_t)63;
    if (r > s->size) r = s->size;
    return (char *)s->ptr + (s->size - r);
}

void gdte_stage_get_stats(gdte_stage_stats_t *stats_p)
{
    if (atomic_load_explicit(&pool_up, memory_order_acquire))
        gdte_gpu_pool_get_stats(&pool, stats_p);
    else
        memset(stats_p, 0, sizeof *stats_p);
}
