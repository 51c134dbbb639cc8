/* Staging pool: see pool.h for the policy. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <utlist.h>
#include "gpu.h"
#include "pool.h"
#include "util/util.h"

/* The free list of a buffer: host, device, host memory standing in for the device, pageable. */
static int list_of(gdte_gpu_pool_kind_t kind, int fake)
{
    return kind == GDTE_GPU_POOL_PAGEABLE ? 3 : kind == GDTE_GPU_POOL_HOST ? 0 : (fake ? 2 : 1);
}

static int log2_ceil(size_t size)
{
    int l = GDTE_GPU_POOL_MIN_LOG;
    while (l <= GDTE_GPU_POOL_MAX_LOG && ((size_t)1 << l) < size) l++;
    return l;
}

static int on_device(const gdte_gpu_pool_buf_t *b)
{
    return b->kind == GDTE_GPU_POOL_DEVICE && !b->fake;
}

gdte_status_t gdte_gpu_pool_init(gdte_gpu_pool_t *pool, const gdte_gpu_pool_params_t *params)
{
    if (!pool || !params) return GDTE_ERR_INVALID_ARG;
    memset(pool, 0, sizeof *pool);
    if (pthread_mutex_init(&pool->lock, NULL) != 0) return GDTE_ERR_NO_MEMORY;
    pool->params = *params;
    if (!pool->params.name) pool->params.name = "staging";
    long ps = sysconf(_SC_PAGESIZE);
    pool->page_size = ps > 0 ? (size_t)ps : 4096;
    return GDTE_OK;
}

/* ---- system memory ----------------------------------------------------------------------- */

/* GUARDED host memory: one inaccessible page after the buffer's last byte. Registered with the
 * runtime when a GPU is present, so that small transfers can be packed straight into it by a
 * kernel; a failure to register leaves it pageable (the buffer says so). */
static gdte_status_t host_map(const gdte_gpu_pool_t *pool, gdte_gpu_pool_buf_t *b)
{
    size_t len = b->size + pool->page_size;
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return GDTE_ERR_NO_MEMORY;
    if (mprotect((char *)p + b->size, pool->page_size, PROT_NONE) != 0) {
        munmap(p, len);
        return GDTE_ERR_NO_MEMORY;
    }
    b->ptr = p;
    b->guarded = 1;
    if (b->kind == GDTE_GPU_POOL_HOST && gdte_gpu_available()) {
        if (gdte_gpu_host_register(p, b->size) == GDTE_OK)
            b->pinned = 1;
        else
            gdte_warn("%s staging: pinning %zu bytes failed (%s); using pageable memory", pool->params.name, b->size,
                      gdte_gpu_last_error());
    }
    return GDTE_OK;
}

static gdte_status_t sys_alloc(const gdte_gpu_pool_t *pool, gdte_gpu_pool_buf_t *b)
{
    if (gdte_fault_hit(GDTE_KNOB_FAULT_STAGING_OOM)) /* injected: as if the system had no memory left */
        return b->kind == GDTE_GPU_POOL_DEVICE ? GDTE_ERR_NO_DEVICE_MEMORY : GDTE_ERR_NO_MEMORY;
    if (on_device(b)) return gdte_gpu_malloc(&b->ptr, b->size);
    /* Host memory standing in for the device is guarded too: a GPU-aware MPI is emulated by the
     * host one, whose truncation overrun it must stop the same way. */
    if (pool->params.host == GDTE_GPU_POOL_GUARDED || b->fake || b->kind == GDTE_GPU_POOL_PAGEABLE)
        return host_map(pool, b);
    if (gdte_gpu_available()) {
        gdte_status_t st = gdte_gpu_host_alloc(&b->ptr, b->size, 1);
        if (st == GDTE_OK) b->pinned = 1;
        return st;
    }
    return posix_memalign(&b->ptr, 4096, b->size) == 0 ? GDTE_OK : GDTE_ERR_NO_MEMORY;
}

static void sys_free(const gdte_gpu_pool_t *pool, gdte_gpu_pool_buf_t *b)
{
    if (on_device(b)) {
        gdte_gpu_free(b->ptr);
    } else if (b->guarded) {
        if (b->pinned) gdte_gpu_host_unregister(b->ptr);
        munmap(b->ptr, b->size + pool->page_size);
    } else if (b->pinned) {
        gdte_gpu_host_free(b->ptr);
    } else {
        free(b->ptr);
    }
    free(b);
}

/* ---- the pool ---------------------------------------------------------------------------- */

/* Free cached buffers of a share, largest first, until `need` more bytes fit its budget; the
 * buffers go on `*out` to be freed once the lock is dropped. Whether they now fit. */
static int trim_locked(gdte_gpu_pool_t *pool, int share, int64_t need, gdte_gpu_pool_buf_t **out)
{
    int64_t budget = pool->params.budget[share];
    for (int l = GDTE_GPU_POOL_MAX_LOG; l >= GDTE_GPU_POOL_MIN_LOG && pool->held[share] + need > budget; l--)
        for (int k = 0; k < GDTE_GPU_POOL_LISTS_ && pool->held[share] + need > budget; k++)
            while (pool->free_list[share][k][l] && pool->held[share] + need > budget) {
                gdte_gpu_pool_buf_t *b = pool->free_list[share][k][l];
                LL_DELETE(pool->free_list[share][k][l], b);
                pool->free_count[share][k][l]--;
                pool->held[share] -= (int64_t)b->size;
                pool->stats.bytes_held -= (int64_t)b->size;
                LL_PREPEND(*out, b);
            }
    return pool->held[share] + need <= budget;
}

static void free_all(const gdte_gpu_pool_t *pool, gdte_gpu_pool_buf_t *list)
{
    gdte_gpu_pool_buf_t *b, *tmp;
    LL_FOREACH_SAFE(list, b, tmp) sys_free(pool, b);
}

gdte_status_t gdte_gpu_pool_get(gdte_gpu_pool_t *pool, int share, gdte_gpu_pool_kind_t kind, int fake, size_t size,
                                gdte_gpu_pool_buf_t **buf_p)
{
    if (share < 0 || share >= GDTE_GPU_POOL_SHARES || (unsigned)kind >= GDTE_GPU_POOL_KINDS_)
        return GDTE_ERR_INVALID_ARG;
    int l = log2_ceil(size);
    if (l > GDTE_GPU_POOL_MAX_LOG) return GDTE_ERR_NO_DEVICE_MEMORY;
    fake = kind == GDTE_GPU_POOL_DEVICE && fake;
    int k = list_of(kind, fake);
    size_t bytes = (size_t)1 << l;
    gdte_gpu_pool_buf_t *b, *trimmed = NULL;
    int overflow = 0;

    pthread_mutex_lock(&pool->lock);
    if (pool->closed) {
        pthread_mutex_unlock(&pool->lock);
        return GDTE_ERR_NOT_INITIALIZED;
    }
    if ((b = pool->free_list[share][k][l])) {
        LL_DELETE(pool->free_list[share][k][l], b);
        pool->free_count[share][k][l]--;
        b->next = NULL;
        pool->stats.reuses++;
        pool->stats.bytes_in_use += (int64_t)bytes;
        pthread_mutex_unlock(&pool->lock);
        *buf_p = b;
        return GDTE_OK;
    }
    int64_t budget = pool->params.budget[share];
    if (pool->params.limit == GDTE_GPU_POOL_HARD && (int64_t)bytes > budget) {
        pthread_mutex_unlock(&pool->lock);
        return GDTE_ERR_NO_DEVICE_MEMORY;
    }
    if (!trim_locked(pool, share, (int64_t)bytes, &trimmed)) {
        if (pool->params.limit == GDTE_GPU_POOL_HARD) {
            pthread_mutex_unlock(&pool->lock);
            free_all(pool, trimmed);
            return GDTE_INPROGRESS;
        }
        overflow = 1;
        if (!pool->overflow_warned) {
            pool->overflow_warned = 1;
            gdte_warn("%s staging in use passes GDTE_STAGING_MAX=%lld bytes; a buffer of %zu bytes is allocated "
                      "for this use only (raise GDTE_STAGING_MAX to keep it pooled)",
                      pool->params.name, (long long)budget, bytes);
        }
    } else {
        /* Reserved before the allocation, which runs unlocked, so that no other caller can
         * pass the budget meanwhile. */
        pool->held[share] += (int64_t)bytes;
        pool->stats.bytes_held += (int64_t)bytes;
        pool->stats.bytes_in_use += (int64_t)bytes;
    }
    pthread_mutex_unlock(&pool->lock);
    free_all(pool, trimmed);

    gdte_status_t st = GDTE_ERR_NO_MEMORY;
    if ((b = calloc(1, sizeof *b))) {
        b->size = bytes;
        b->kind = kind;
        b->fake = (uint8_t)fake;
        b->overflow = (uint8_t)overflow;
        b->share = (uint8_t)share;
        b->log2 = (uint8_t)l;
        st = sys_alloc(pool, b);
        if (st == GDTE_ERR_NO_MEMORY && kind == GDTE_GPU_POOL_DEVICE) st = GDTE_ERR_NO_DEVICE_MEMORY;
    }
    pthread_mutex_lock(&pool->lock);
    if (st != GDTE_OK) {
        if (!overflow) {
            pool->held[share] -= (int64_t)bytes;
            pool->stats.bytes_held -= (int64_t)bytes;
            pool->stats.bytes_in_use -= (int64_t)bytes;
        }
    } else {
        pool->stats.allocs++;
        if (overflow) pool->stats.overflows++;
        if (pool->stats.bytes_held > pool->stats.peak_held) pool->stats.peak_held = pool->stats.bytes_held;
    }
    pthread_mutex_unlock(&pool->lock);
    if (st != GDTE_OK) {
        gdte_error("%s staging: cannot allocate %zu bytes of %s memory: %s", pool->params.name, bytes,
                   kind == GDTE_GPU_POOL_HOST ? "host" : (fake ? "fake device" : "device"), gdte_status_string(st));
        free(b);
        return st;
    }
    *buf_p = b;
    return GDTE_OK;
}

void gdte_gpu_pool_put(gdte_gpu_pool_t *pool, gdte_gpu_pool_buf_t *b)
{
    if (!b) return;
    if (b->overflow) {
        sys_free(pool, b);
        return;
    }
    int s = b->share, k = list_of(b->kind, b->fake), l = b->log2;
    int retain = INT32_MAX;
    if (pool->params.retain_min > 0 || pool->params.retain_bytes > 0) {
        int64_t r = pool->params.retain_bytes / (int64_t)b->size;
        retain = r > pool->params.retain_min ? (int)(r < INT32_MAX ? r : INT32_MAX) : pool->params.retain_min;
    }
    pthread_mutex_lock(&pool->lock);
    pool->stats.bytes_in_use -= (int64_t)b->size;
    if (pool->closed || pool->free_count[s][k][l] >= retain) {
        pool->held[s] -= (int64_t)b->size;
        pool->stats.bytes_held -= (int64_t)b->size;
        pthread_mutex_unlock(&pool->lock);
        sys_free(pool, b);
        return;
    }
    LL_PREPEND(pool->free_list[s][k][l], b);
    pool->free_count[s][k][l]++;
    pthread_mutex_unlock(&pool->lock);
}

void gdte_gpu_pool_destroy(gdte_gpu_pool_t *pool)
{
    gdte_gpu_pool_buf_t *cached = NULL;
    pthread_mutex_lock(&pool->lock);
    for (int s = 0; s < GDTE_GPU_POOL_SHARES; s++)
        for (int k = 0; k < GDTE_GPU_POOL_LISTS_; k++)
            for (int l = GDTE_GPU_POOL_MIN_LOG; l <= GDTE_GPU_POOL_MAX_LOG; l++) {
                gdte_gpu_pool_buf_t *b, *tmp;
                LL_FOREACH_SAFE(pool->free_list[s][k][l], b, tmp)
                {
                    LL_DELETE(pool->free_list[s][k][l], b);
                    pool->held[s] -= (int64_t)b->size;
                    pool->stats.bytes_held -= (int64_t)b->size;
                    LL_PREPEND(cached, b);
                }
                pool->free_count[s][k][l] = 0;
            }
    pool->closed = 1;
    int64_t in_use = pool->stats.bytes_in_use;
    pthread_mutex_unlock(&pool->lock);
    free_all(pool, cached);
    if (in_use)
        gdte_warn("%s staging: %lld bytes still in use at finalize (transfers never completed)", pool->params.name,
                  (long long)in_use);
}

void gdte_gpu_pool_charge(gdte_gpu_pool_t *pool, int share, int64_t bytes)
{
    pthread_mutex_lock(&pool->lock);
    pool->held[share] += bytes;
    pthread_mutex_unlock(&pool->lock);
}

int64_t gdte_gpu_pool_room(gdte_gpu_pool_t *pool, int share)
{
    pthread_mutex_lock(&pool->lock);
    int64_t left = pool->params.budget[share] - pool->held[share];
    pthread_mutex_unlock(&pool->lock);
    return left;
}

int64_t gdte_gpu_pool_budget(const gdte_gpu_pool_t *pool, int share)
{
    return pool->params.budget[share];
}

void gdte_gpu_pool_get_stats(gdte_gpu_pool_t *pool, gdte_gpu_pool_stats_t *stats_p)
{
    pthread_mutex_lock(&pool->lock);
    *stats_p = pool->stats;
    pthread_mutex_unlock(&pool->lock);
}
