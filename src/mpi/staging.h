/*
 * staging.h: the interposer's staging buffers (pinned host memory that MPI sends from and
 * receives into, and device memory the pack pipeline rings through), taken from one
 * process-wide pool of src/gpu/pool.h, whose policy this is:
 *
 * Buffers come in power-of-two size classes from 4 KiB and go back to a free list when
 * released (at most max(64, 8 MiB / size) per class), so a steady stream of messages of
 * similar sizes allocates nothing after warm-up, and a burst of many outstanding messages is
 * given back once it completes. HOST buffers are followed by an inaccessible guard page (see
 * gdte_stage_tail). The bytes the pool holds (in use + cached) stay under GDTE_STAGING_MAX:
 * when a request would pass it, the cache is trimmed first; if buffers in use alone would pass
 * it, the buffer is allocated outside the pool for that message only and freed on release
 * (counted, warned once): the bound is soft. We never block for space: the buffers that would
 * free it may belong to requests that only this thread can complete.
 *
 * Thread-safe. May call: src/gpu, src/util.
 */
#ifndef GDTE_MPI_STAGING_H
#define GDTE_MPI_STAGING_H

#include <stddef.h>
#include <stdint.h>
#include "gdte.h"
#include "gpu/pool.h"

/* HOST: pinned (and mapped) host memory when a GPU is present, else pageable. DEVICE: device
 * memory; host memory when it stands in for a fake device. */
typedef gdte_gpu_pool_kind_t gdte_stage_kind_t;
#define GDTE_STAGE_HOST GDTE_GPU_POOL_HOST
#define GDTE_STAGE_DEVICE GDTE_GPU_POOL_DEVICE
/* PAGEABLE: guarded host memory never pinned (a receive's landing that usually gets a marker). */
#define GDTE_STAGE_PAGEABLE GDTE_GPU_POOL_PAGEABLE

/* A buffer: `ptr`, `size` (usable bytes, the class size), `kind`, `fake` (DEVICE kind backed by
 * host memory), `pinned` (HOST kind registered with the GPU runtime: DMA-able, mapped),
 * `overflow` (outside the pool: freed on release). */
typedef gdte_gpu_pool_buf_t gdte_stage_t;
/* allocs (buffers allocated from the system, pool and overflow), reuses (acquisitions served
 * from the free lists), overflows (acquisitions served outside the pool), bytes_held (pool
 * bytes, in use + cached), bytes_in_use, peak_held. */
typedef gdte_gpu_pool_stats_t gdte_stage_stats_t;

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
