/*
 * staging.h: the interposer's bounded pool of staging buffers (pinned host memory that MPI
 * sends from and receives into, and device memory the pack pipeline rings through).
 *
 * Buffers come in power-of-two size classes and go back to a free list when released (a bounded
 * number per class), so a steady stream of messages of similar sizes allocates nothing after
 * warm-up, and a burst of many outstanding messages is given back once it completes. HOST
 * buffers are followed by an inaccessible guard page (see gdte_stage_tail). The bytes the
 * pool holds (in use + cached) stay under GDTE_STAGING_MAX: when a request would pass it, the
 * cache is trimmed first; if buffers in use alone would pass it, the buffer is allocated
 * outside the pool for that message only and freed on release (counted, warned once). We never
 * block for space: the buffers that would free it may belong to requests that only this thread
 * can complete.
 *
 * Thread-safe. May call: src/gpu, src/util.
 */
#ifndef GDTE_MPI_STAGING_H
#define GDTE_MPI_STAGING_H

#include <stddef.h>
#include <stdint.h>
#include "gdte.h"

typedef enum {
    GDTE_STAGE_HOST = 0,   /* pinned (and mapped) host memory when a GPU is present, else malloc */
    GDTE_STAGE_DEVICE = 1, /* device memory; malloc when it stands in for a fake device */
    GDTE_STAGE_KINDS_
} gdte_stage_kind_t;

typedef struct gdte_stage {
    void *ptr;
    size_t size; /* usable bytes (the class size) */
    gdte_stage_kind_t kind;
    int fake;     /* DEVICE kind backed by host memory (GDTE_FAKE_DEVICE) */
    int overflow; /* outside the pool: freed on release */
    int pinned;   /* HOST kind: registered with the GPU runtime (DMA-able, mapped) */
    struct gdte_stage *next;
} gdte_stage_t;

typedef struct gdte_stage_stats {
    int64_t allocs;        /* buffers allocated from the system, pool and overflow */
    int64_t reuses;        /* acquisitions served from the free lists */
    int64_t overflows;     /* acquisitions served outside the pool */
    int64_t bytes_held;    /* pool bytes (in use + cached) */
    int64_t bytes_in_use;
} gdte_stage_stats_t;

gdte_status_t gdte_stage_init(void);
/* Frees every cached buffer; buffers still in use are reported (they leak by design: a request
 * the application never completed may still be the target of a DMA). */
void gdte_stage_finalize(void);
/* A buffer of at least `size` bytes (size 0 gives a valid minimal buffer). `fake`: DEVICE kind
 * backed by host memory. */
gdte_status_t gdte_stage_acquire(gdte_stage_kind_t kind, int fake, size_t size, gdte_stage_t **stage_p);
void gdte_stage_release(gdte_stage_t *stage);
/* Where a receive of `n` bytes is posted: in a HOST buffer its last bytes (64-byte aligned), so
 * that anything written past them hits the guard page that follows every HOST buffer; in a
 * DEVICE buffer its start (device memory has no guard page; the class size is the slack). */
void *gdte_stage_tail(const gdte_stage_t *stage, size_t n);
void gdte_stage_get_stats(gdte_stage_stats_t *stats_p);

#endif
