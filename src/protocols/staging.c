/* The protocols' staging: a HARD pool of src/gpu/pool.h per context (see staging.h). */
#include "staging.h"

gdte_status_t gdte_stg_init(gdte_stg_pool_t *pool, int64_t staging_max, int rings)
{
    gdte_gpu_pool_params_t p = {.name = "protocols", .limit = GDTE_GPU_POOL_HARD, .host = GDTE_GPU_POOL_PLAIN};
    if (rings) {
        /* Rings are device memory held for the life of a peer; keep them to a quarter. */
        p.budget[GDTE_STG_SEND] = staging_max / 8 * 3;
        p.budget[GDTE_STG_RECV] = staging_max / 8 * 3;
        p.budget[GDTE_STG_RING] = staging_max / 4;
    } else {
        p.budget[GDTE_STG_SEND] = staging_max / 2;
        p.budget[GDTE_STG_RECV] = staging_max / 2;
    }
    return gdte_gpu_pool_init(pool, &p);
}

void gdte_stg_destroy(gdte_stg_pool_t *pool) { gdte_gpu_pool_destroy(pool); }

int64_t gdte_stg_frag_limit(const gdte_stg_pool_t *pool, gdte_stg_class_t cls)
{
    int64_t lim = gdte_pow2_floor(gdte_gpu_pool_budget(pool, (int)cls) / 4);
    return lim < 4096 ? 4096 : lim;
}
