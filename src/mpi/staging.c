/* Staging pool (see staging.h for the policy). */
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include "staging.h"
#include "gpu/gpu.h"
#include "util/util.h"

#define STAGE_MIN_SHIFT 12 /* 4 KiB: below that the class bookkeeping costs more than it saves */
#define STAGE_CLASSES 30   /* up to 2^41 bytes */
#define STAGE_POOLS 3      /* host, device, fake device */
/* Free buffers kept per class: as many as fit in STAGE_RETAIN_BYTES, and at least
 * STAGE_RETAIN_MIN (a window of 64 large messages, as an OSU-style bandwidth loop keeps in
 * flight, would otherwise be unpinned and pinned again on every iteration). More are returned
 * to the system on release, so a burst of many small outstanding messages does not stay
 * resident after it completes. GDTE_STAGING_MAX caps the whole pool above this. */
#define STAGE_RETAIN_MIN 64
#define STAGE_RETAIN_BYTES (8 << 20)

static pthread_mutex_t stage_lock = PTHREAD_MUTEX_INITIALIZER;
static gdte_stage_t *free_list[STAGE_POOLS][STAGE_CLASSES];
static int free_count[STAGE_POOLS][STAGE_CLASSES];
static size_t page_size;
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

/* Host staging is mapped with one inaccessible page after its last byte. A receive is posted at
 * the end of the buffer (gdte_stage_tail), so an MPI that writes a longer message than the
 * receive's count (Open MPI's shared-memory single-copy path reads the sender's whole message
 * into the receive buffer before it reports the truncation) runs into the guard page, where
 * the kernel's process_vm_readv stops with EFAULT, instead of into other memory. */
static gdte_status_t host_map(gdte_stage_t *s)
{
    size_t len = s->size + page_size;
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return GDTE_ERR_NO_MEMORY;
    if (mprotect((char *)p + s->size, page_size, PROT_NONE) != 0) {
        munmap(p, len);
        return GDTE_ERR_NO_MEMORY;
    }
    s->ptr = p;
    if (s->kind == GDTE_STAGE_HOST && gdte_gpu_available()) {
        /* Pinned and mapped, so small messages can be packed straight into it by a kernel. */
        if (gdte_gpu_host_register(p, s->size) == GDTE_OK)
            s->pinned = 1;
        else
            gdte_warn("pinning %zu bytes of staging failed (%s); using pageable memory", s->size,
                      gdte_gpu_last_error());
    }
    return GDTE_OK;
}

static gdte_status_t sys_alloc(gdte_stage_t *s)
{
    if (gdte_fault_hit(GDTE_KNOB_FAULT_STAGING_OOM)) /* injected: as if the system had no memory left */
        return s->kind == GDTE_STAGE_DEVICE ? GDTE_ERR_NO_DEVICE_MEMORY : GDTE_ERR_NO_MEMORY;
    if (s->kind == GDTE_STAGE_DEVICE && !s->fake) return gdte_gpu_malloc(&s->ptr, s->size);
    /* Host memory standing in for device staging gets the guard page too: a GPU-aware MPI is
     * emulated by the host one, whose truncation overrun it must stop the same way. */
    return host_map(s);
}

static void sys_free(gdte_stage_t *s)
{
    if (s->kind == GDTE_STAGE_DEVICE && !s->fake) {
        gdte_gpu_free(s->ptr);
    } else {
        if (s->pinned) gdte_gpu_host_unregister(s->ptr);
        munmap(s->ptr, s->size + page_size);
    }
    free(s);
}

void *gdte_stage_tail(const gdte_stage_t *s, size_t n)
{
    if (s->kind == GDTE_STAGE_DEVICE && !s->fake) return s->ptr;
    size_t r = (n + 63) & ~(size_t)63;
    if (r > s->size) r = s->size;
    return (char *)s->ptr + (s->size - r);
}

gdte_status_t gdte_stage_init(void)
{
    pthread_mutex_lock(&stage_lock);
    stage_max = gdte_knob(GDTE_KNOB_STAGING_MAX);
    long ps = sysconf(_SC_PAGESIZE);
    page_size = ps > 0 ? (size_t)ps : 4096;
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
                free_count[p][c]--;
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
        free_count[p][c]--;
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
    int retain = (int)(STAGE_RETAIN_BYTES / csize);
    if (retain < STAGE_RETAIN_MIN) retain = STAGE_RETAIN_MIN;
    pthread_mutex_lock(&stage_lock);
    stats.bytes_in_use -= (int64_t)s->size;
    if (free_count[p][c] >= retain) {
        stats.bytes_held -= (int64_t)s->size;
        pthread_mutex_unlock(&stage_lock);
        sys_free(s); /* unlocked: unpinning can take a while */
        return;
    }
    s->next = free_list[p][c];
    free_list[p][c] = s;
    free_count[p][c]++;
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
                free_count[p][c]--;
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
