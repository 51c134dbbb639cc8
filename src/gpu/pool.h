/*
 * pool.h: the staging pool, one implementation for every layer that stages bytes (the
 * protocols' per-context pools in src/protocols/staging.h, the interposer's process-wide pool
 * in src/mpi/staging.h). It lives here, the lowest layer that can allocate pinned and device
 * memory, so that both may call it.
 *
 * Buffers come in power-of-two sizes from 4 KiB (a size class below that costs more in
 * bookkeeping than it saves) and go back to a free list per (share, kind, size) when put back,
 * so a steady stream of transfers of similar sizes allocates nothing after warm-up: pinned
 * allocation costs milliseconds.
 *
 * A pool is split into up to GDTE_GPU_POOL_SHARES shares, each with a budget of bytes it may
 * hold (in use + cached): the protocols give senders, receivers and RDMA rings their own share,
 * so that a side waiting for its peer can never hold the memory that peer needs; the
 * interposer has one. When a miss would pass its share's budget, the share's cached buffers
 * are freed first, largest first. If the bytes in use alone would pass it:
 *   - a HARD pool answers GDTE_INPROGRESS (retry once other buffers come back; a request
 *     larger than the whole budget is GDTE_ERR_NO_DEVICE_MEMORY);
 *   - a SOFT pool allocates the buffer outside the pool for that one use and frees it when it is
 *     put back (counted in `overflows`, warned once). The interposer never blocks for space:
 *     the buffers that would free it may belong to requests that only the caller can complete.
 * A pool may bound the free buffers it keeps per (share, kind, size): max(retain_min,
 * retain_bytes / size); more are freed when put back, so a burst of many small outstanding
 * transfers does not stay resident after it completes.
 *
 * Kinds: HOST is pinned and mapped for the GPU when one is available (the buffer's `pinned`
 * says whether it is), pageable otherwise; DEVICE is device memory, or with `fake` host memory
 * standing in for it (the interposer's GDTE_FAKE_DEVICE); PAGEABLE is guarded host memory never
 * registered with the runtime, whose pages cost nothing until written (a landing that usually
 * receives a few bytes). Host memory comes in one of two forms:
 *   - GUARDED: mmap'ed with one inaccessible page after its last byte and registered with the
 *     runtime (pageable, warned, if registering fails). A receive posted at the buffer's end
 *     (src/mpi/staging.h, gdte_stage_tail) makes an MPI that writes past the receive's count
 *     fault there instead of corrupting other memory. Fake device memory is guarded too.
 *   - PLAIN: the runtime's pinned, mapped allocation (an error if it fails: the protocols pack
 *     into it with kernels) or page-aligned malloc without a GPU.
 *
 * GDTE_FAULT_STAGING_OOM makes the K-th system allocation of the process fail once.
 *
 * Thread-safe: one mutex per pool; system allocations and frees run outside it (pinning and
 * unpinning can take milliseconds). May call: src/util.
 */
#ifndef GDTE_GPU_POOL_H
#define GDTE_GPU_POOL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include "gdte.h"

typedef enum {
    GDTE_GPU_POOL_HOST = 0,
    GDTE_GPU_POOL_DEVICE = 1,
    GDTE_GPU_POOL_PAGEABLE = 2,
    GDTE_GPU_POOL_KINDS_
} gdte_gpu_pool_kind_t;
typedef enum { GDTE_GPU_POOL_HARD = 0, GDTE_GPU_POOL_SOFT = 1 } gdte_gpu_pool_limit_t;
typedef enum { GDTE_GPU_POOL_PLAIN = 0, GDTE_GPU_POOL_GUARDED = 1 } gdte_gpu_pool_host_t;

#define GDTE_GPU_POOL_SHARES 3
#define GDTE_GPU_POOL_MIN_LOG 12 /* 4 KiB */
#define GDTE_GPU_POOL_MAX_LOG 41 /* 2 TiB, past any GDTE_STAGING_MAX */
#define GDTE_GPU_POOL_LISTS_ 4   /* free lists per share and size: host, device, fake device, pageable */

typedef struct gdte_gpu_pool_buf {
    void *ptr;
    size_t size;               /* usable bytes: the power of two the request was rounded up to */
    gdte_gpu_pool_kind_t kind;
    uint8_t fake;              /* DEVICE kind backed by host memory */
    uint8_t pinned;            /* HOST kind: registered with or allocated by the runtime (DMA-able, mapped) */
    uint8_t overflow;          /* outside the pool (SOFT limit passed): freed when put back */
    uint8_t share;
    uint8_t log2;
    uint8_t guarded;           /* host memory mmap'ed with a guard page after it */
    struct gdte_gpu_pool_buf *next;
} gdte_gpu_pool_buf_t;

typedef struct gdte_gpu_pool_stats {
    int64_t allocs;       /* buffers allocated from the system, pooled and overflow */
    int64_t reuses;       /* buffers handed out again from the free lists */
    int64_t overflows;    /* buffers allocated outside the pool (SOFT) */
    int64_t bytes_held;   /* pool bytes, in use + cached, every share */
    int64_t bytes_in_use; /* pool bytes handed out and not yet put back */
    int64_t peak_held;    /* the most bytes_held ever */
} gdte_gpu_pool_stats_t;

typedef struct gdte_gpu_pool_params {
    const char *name;                          /* for log lines: "interposer", "protocols" */
    int64_t budget[GDTE_GPU_POOL_SHARES];      /* bytes each share may hold; 0: the share is unused */
    gdte_gpu_pool_limit_t limit;
    gdte_gpu_pool_host_t host;
    int retain_min;                            /* free buffers kept per list: max(retain_min, */
    int64_t retain_bytes;                      /* retain_bytes / size); both 0: no bound */
} gdte_gpu_pool_params_t;

typedef struct gdte_gpu_pool {
    pthread_mutex_t lock;
    gdte_gpu_pool_params_t params;
    int closed;                                /* destroyed: buffers put back are freed */
    int overflow_warned;
    size_t page_size;
    int64_t held[GDTE_GPU_POOL_SHARES];        /* in use + cached + charged, per share */
    gdte_gpu_pool_stats_t stats;
    gdte_gpu_pool_buf_t *free_list[GDTE_GPU_POOL_SHARES][GDTE_GPU_POOL_LISTS_][GDTE_GPU_POOL_MAX_LOG + 1];
    int free_count[GDTE_GPU_POOL_SHARES][GDTE_GPU_POOL_LISTS_][GDTE_GPU_POOL_MAX_LOG + 1];
} gdte_gpu_pool_t;

gdte_status_t gdte_gpu_pool_init(gdte_gpu_pool_t *pool, const gdte_gpu_pool_params_t *params);
/* Frees every cached buffer and warns about bytes still in use: they are left alone (a
 * transfer never completed may still be the target of a DMA). The pool's lock stays valid:
 * buffers put back later are freed, a get is GDTE_ERR_NOT_INITIALIZED, the stats stay. */
void gdte_gpu_pool_destroy(gdte_gpu_pool_t *pool);
/* A buffer of at least `size` bytes of `kind` (`fake`: DEVICE kind backed by host memory) from
 * `share`. GDTE_OK with *buf_p; GDTE_INPROGRESS from a HARD pool whose share is full for now;
 * GDTE_ERR_NO_DEVICE_MEMORY past the largest size (or, HARD, past the share's whole budget);
 * GDTE_ERR_NO_MEMORY / GDTE_ERR_NO_DEVICE_MEMORY / the runtime's error when the system has none. */
gdte_status_t gdte_gpu_pool_get(gdte_gpu_pool_t *pool, int share, gdte_gpu_pool_kind_t kind, int fake, size_t size,
                                gdte_gpu_pool_buf_t **buf_p);
/* Gives a buffer back (NULL: nothing). */
void gdte_gpu_pool_put(gdte_gpu_pool_t *pool, gdte_gpu_pool_buf_t *buf);
/* Bytes held elsewhere that count against a share's budget (positive to charge, negative to
 * credit back): memory a caller allocates itself for the same purpose, such as the protocols'
 * emulated device segments. Not in the pool's stats. */
void gdte_gpu_pool_charge(gdte_gpu_pool_t *pool, int share, int64_t bytes);
/* What is left of a share's budget (negative when charges passed it). */
int64_t gdte_gpu_pool_room(gdte_gpu_pool_t *pool, int share);
int64_t gdte_gpu_pool_budget(const gdte_gpu_pool_t *pool, int share);
void gdte_gpu_pool_get_stats(gdte_gpu_pool_t *pool, gdte_gpu_pool_stats_t *stats_p);

#endif
