/*
 * kernels.h: executors of a gdte_layout_t. The host executor (host_exec.c) and the GPU
 * kernels (pack_kernels.cu, one source for CUDA and HIP) interpret the same layout through
 * layout.h. May call: src/engine, src/gpu, src/util.
 */
#ifndef GDTE_KERNELS_H
#define GDTE_KERNELS_H

#include "gdte.h"
#include "layout.h"

typedef enum { GDTE_DIR_PACK = 0, GDTE_DIR_UNPACK = 1 } gdte_dir_t;

/* Host executor: bytes [offset, offset+len) of the packed stream of L.
 * PACK:   user = source buffer, packed = destination (packed[0] is stream byte `offset`).
 * UNPACK: packed = source, user = destination. */
void gdte_host_exec(const gdte_layout_t *L, gdte_dir_t dir, void *user, void *packed,
                    int64_t offset, int64_t len);

/* GPU executor: the same on `stream`, asynchronously. L->units must point to device memory
 * (or be NULL when L->kind != UNITS). `max_blocks` 0: enough to fill the GPU.
 * Chooses the kernel variant (contig/strided/tiled/DEV warp/DEV thread) from L. */
gdte_status_t gdte_gpu_exec(const gdte_layout_t *L, gdte_dir_t dir, void *user, void *packed,
                            int64_t offset, int64_t len, gdte_stream_t stream, int max_blocks);

/* Kernel variant the GPU executor would choose for L (for tests and gdte_info). */
typedef enum {
    GDTE_KVAR_NONE = 0,
    GDTE_KVAR_CONTIG,
    GDTE_KVAR_STRIDED,
    GDTE_KVAR_TILED,
    GDTE_KVAR_DEV_WARP,
    GDTE_KVAR_DEV_THREAD,
} gdte_kvar_t;
gdte_kvar_t gdte_gpu_exec_variant(const gdte_layout_t *L, gdte_dir_t dir);
/* Force a variant (tests only; GDTE_KVAR_NONE restores automatic choice). An impossible
 * forced variant falls back to automatic choice. */
void gdte_gpu_exec_force_variant(gdte_kvar_t v);

#endif
