/* Staging pool (see staging.h for the policy). */
#include <pthread.h>
#include <stdlib.h>
#include "staging.h"
#include "gpu/gpu.h"
#include "util/util.h"

#define STAGE_MIN_SHIFT 12 /* 4 KiB: below that the class bookkeeping costs more than it saves */
#define STAGE_CLASSES 30   /* up to 2^41 bytes */
#define STAGE_POOLS 3      /* host, device, fake device */

static pthread_mutex_t stage_lock = PTHREAD_MUTEX_INITIALIZER;
static gdte_stage_t *free_list[STAGE_POOLS][STAGE_CLASSES];
static gdte_stage_stats_t stats;
static int64_t stage_max;
static int overflow_warned;

static int pool_of(gdte_stage_kind_t kind, int fake)
{
    return kind == GDTE_STAGE_HOST ? 0 : (fake ? 2 : 1);
}

static int class_of(size_t size, size_t *class_size_p)
{
    int c = 0;
    size_t s = (size_t)1 << STAGE_MIN_SHIFT;
    while (s < size && c < STAGE_CLASSES - 1) {
        s <<= 1;
        c++;
    }
    *class_size_p = s;
    return s >= size ? c : -1;
}

static gdte_status_t sys_alloc(gdte_stage_t *s)
{
    if (gdte_fault_hit(GDTE_KNOB_FAULT_STAGING_OOM)) /* injected: as if the system had no memory left */
        return s->kind == GDTE_STAGE_DEVICE ? GDTE_ERR_NO_DEVICE_MEMORY : GDTE_ERR_NO_MEMORY;
    if (s->kind == GDTE_STAGE_DEVICE && !s->fake) return gdte_gpu_malloc(&s->ptr, s->size);
    if (s->kind == GDTE_STAGE_HOST && gdte_gpu_available()) {
        /* Mapped, so small messages can be packed straight into it by a kernel (zero copy). */
        gdte_status_t st = gdte_gpu_host_alloc(&s->ptr, s->size, 1);
        if (st == GDTE_OK) {
            s->pinned = 1;
            return GDTE_OK;
        }
        gdte_warn("pinned staging allocation of %zu bytes failed (%s); using pageable memory", s->size,
                  gdte_gpu_last_error());
    }
    void *p = NULL;
    if (posix_memalign(&p, 4096, s->size ? s->size : 1)) return GDTE_ERR_NO_MEMORY;
    s->ptr = p;
    return GDTE_OK;
}

static void sys_free(gdte_stage_t *s)
{
    if (s->kind == GDTE_STAGE_DEVICE && !s->fake)
        gdte_gpu_free(s->ptr);
    else if (s->pinned)
        gdte_gpu_host_free(s->ptr);
    else
        free(s->ptr);
    free(s);
}

gdte_status_t gdte_stage_init(void)
{
    pthread_mutex_lock(&stage_lock);
    stage_max = gdte_knob(GDTE_KNOB_STAGING_MAX);
    pthread_mutex_unlock(&stage_lock);
    return GDTE_OK;
}

/* Drop cached buffers, largest first, until `need` more bytes fit under the cap. Called with
 * the lock held. */
static void trim_locked(int64_t need)
{
    for (int c = STAGE_CLASSES - 1; c >= 0 && stats.bytes_held + need > stage_max; c--) {
        for (int p = 0; p < STAGE_POOLS && stats.bytes_held + need > stage_max; p++) {
            while (free_list[p][c] && stats.bytes_held + need > stage_max) {
                gdte_stage_t *s = free_list[p][c];
                free_list[p][c] = s->next;
                stats.bytes_held -= (int64_t)s->size;
                sys_free(s);
            }
        }
    }
}

gdte_status_t gdte_stage_acquire(gdte_stage_kind_t kind, int fake, size_t size, gdte_stage_t **stage_p)
{
    size_t csize;
    int c = class_of(size, &csize);
    if (c < 0) return GDTE_ERR_NO_DEVICE_MEMORY;
    int p = pool_of(kind, fake);
    pthread_mutex_lock(&stage_lock);
    gdte_stage_t *s = free_list[p][c];
    if (s) {
        free_list[p][c] = s->next;
        s->next = NULL;
        stats.reuses++;
        stats.bytes_in_use += (int64_t)s->size;
        pthread_mutex_unlock(&stage_lock);
        *stage_p = s;
        return GDTE_OK;
    }
    int overflow = 0;
    if (stats.bytes_held + (int64_t)csize > stage_max) trim_locked((int64_t)csize);
    if (stats.bytes_held + (int64_t)csize > stage_max) {
        overflow = 1;
        stats.overflows++;
        if (!overflow_warned) {
            overflow_warned = 1;
            gdte_warn("staging in use passes GDTE_STAGING_MAX=%lld bytes; a buffer of %zu bytes is allocated "
                      "for this message only (raise GDTE_STAGING_MAX to keep it pooled)",
                      (long long)stage_max, csize);
        }
    } else {
        stats.bytes_held += (int64_t)csize;
        stats.bytes_in_use += (int64_t)csize;
    }
    stats.allocs++;
    pthread_mutex_unlock(&stage_lock);

    /* The system allocation runs unlocked (pinned allocations can take milliseconds). */
    s = calloc(1, sizeof *s);
    gdte_status_t st = GDTE_ERR_NO_MEMORY;
    if (s) {
        s->size = csize;
        s->kind = kind;
        s->fake = kind == GDTE_STAGE_DEVICE ? fake : 0;
        s->overflow = overflow;
        st = sys_alloc(s);
    }
    if (st != GDTE_OK) {
        gdte_error("staging allocation of %zu bytes (%s) failed: %s", csize,
                   kind == GDTE_STAGE_HOST ? "host" : "device", gdte_status_string(st));
        free(s);
        pthread_mutex_lock(&stage_lock);
        if (!overflow) {
            stats.bytes_held -= (int64_t)csize;
            stats.bytes_in_use -= (int64_t)csize;
        }
        pthread_mutex_unlock(&stage_lock);
        return st == GDTE_ERR_NO_MEMORY && kind == GDTE_STAGE_DEVICE ? GDTE_ERR_NO_DEVICE_MEMORY : st;
    }
    *stage_p = s;
    return GDTE_OK;
}

void gdte_stage_release(gdte_stage_t *s)
{
    if (!s) return;
    if (s->overflow) {
        sys_free(s);
        return;
    }
    size_t csize;
    int c = class_of(s->size, &csize);
    int p = pool_of(s->kind, s->fake);
    pthread_mutex_lock(&stage_lock);
    stats.bytes_in_use -= (int64_t)s->size;
    s->next = free_list[p][c];
    free_list[p][c] = s;
    pthread_mutex_unlock(&stage_lock);
}

void gdte_stage_finalize(void)
{
    pthread_mutex_lock(&stage_lock);
    for (int p = 0; p < STAGE_POOLS; p++)
        for (int c = 0; c < STAGE_CLASSES; c++)
            while (free_list[p][c]) {
                gdte_stage_t *s = free_list[p][c];
                free_list[p][c] = s->next;
                stats.bytes_held -= (int64_t)s->size;
                sys_free(s);
            }
    if (stats.bytes_in_use)
        gdte_warn("%lld bytes of staging still in use at finalize (requests never completed)",
                  (long long)stats.bytes_in_use);
    pthread_mutex_unlock(&stage_lock);
}

void gdte_stage_get_stats(gdte_stage_stats_t *stats_p)
{
    pthread_mutex_lock(&stage_lock);
    *stats_p = stats;
    pthread_mutex_unlock(&stage_lock);
}
