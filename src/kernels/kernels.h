/*
 * kernels.h: executors of a gdte_layout_t. The host executor (host_exec.c) and the GPU
 * kernels (pack_kernels.cu, one source for CUDA and HIP) interpret the same layout through
 * layout.h. May call: src/engine, src/gpu, src/util.
 */
#ifndef GDTE_KERNELS_H
#define GDTE_KERNELS_H

#include "gdte.h"
#include "engine/layout.h"

typedef enum { GDTE_DIR_PACK = 0, GDTE_DIR_UNPACK = 1 } gdte_dir_t;

/* Host executor: bytes [offset, offset+len) of the packed stream of L.
 * PACK:   user = source buffer, packed = destination (packed[0] is stream byte `offset`).
 * UNPACK: packed = source, user = destination. */
void gdte_host_exec(const gdte_layout_t *L, gdte_dir_t dir, void *user, void *packed,
                    int64_t offset, int64_t len);

/* GPU executor: the same on `stream`, asynchronously. L->units must point to device memory
 * (or be NULL when L->kind != UNITS). `max_blocks` 0: enough to fill the GPU.
 * Chooses the kernel variant (contig/strided/tiled/flat/DEV warp/DEV thread/periodic) from L. */
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
    GDTE_KVAR_FLAT, /* STRIDED layouts as a copy kernel maps them (pack_kernels.cu) */
    GDTE_KVAR_COPY, /* gdte_gpu_exec_copy (never chosen by gdte_gpu_exec) */
    GDTE_KVAR_PERIODIC, /* UNITS layouts of small repetitions (structs): FLAT's mapping through a
                         * per-repetition word map (pack_kernels.cu) */
} gdte_kvar_t;
gdte_kvar_t gdte_gpu_exec_variant(const gdte_layout_t *L, gdte_dir_t dir);
/* Force a variant (tests only; GDTE_KVAR_NONE restores automatic choice). An impossible
 * forced variant falls back to automatic choice. */
void gdte_gpu_exec_force_variant(gdte_kvar_t v);
/* Cap the access width at `bytes` (1, 2, 4, 8 or 16; 0: no cap), tests only. A TILED kernel
 * that the cap makes impossible falls back to STRIDED. */
void gdte_gpu_exec_force_word(int bytes);
/* FLAT and PERIODIC with 64-bit index arithmetic even where 32-bit would do (tests only: the
 * 64-bit path, needed past 2^32 words, then runs on small layouts too). */
void gdte_gpu_exec_force_wide(int on);
/* The variant the calling thread's last gdte_gpu_exec* launched, and its word size (STRIDED,
 * TILED, FLAT and PERIODIC; 0 for the others, whose width is chosen per unit), for tests' coverage checks. */
void gdte_gpu_exec_last(gdte_kvar_t *variant_p, int *word_p);

/* The GPU executor with more to go on. */
typedef struct gdte_gpu_exec_opts {
    /* Host copy of L->units (optional): with it the DEV kernels get the exact first and last
     * unit of the range, found on the host, instead of scanning whole repetitions. */
    const gdte_unit_t *host_units;
    /* Move only units [unit_lo, unit_hi) of each repetition (unit_hi <= unit_lo: all). Used to
     * pack the part of a plan already uploaded while the rest is still in flight. */
    int64_t unit_lo, unit_hi;
    int max_blocks; /* 0: enough to fill the GPU */
} gdte_gpu_exec_opts_t;
gdte_status_t gdte_gpu_exec_ex(const gdte_layout_t *L, const gdte_gpu_exec_opts_t *opts, gdte_dir_t dir,
                               void *user, void *packed, int64_t offset, int64_t len, gdte_stream_t stream);

/* Bytes [offset, offset+len) of the packed stream, read from `src` through Ls and written to
 * `dst` through Ld, in one kernel on `stream` (no packed copy in between). Ls and Ld: CONTIG or
 * STRIDED (else GDTE_ERR_UNSUPPORTED); the range must lie inside both (GDTE_ERR_OFFSET). */
gdte_status_t gdte_gpu_exec_copy(const gdte_layout_t *Ls, const void *src, const gdte_layout_t *Ld, void *dst,
                                 int64_t offset, int64_t len, gdte_stream_t stream, int max_blocks);

/* The same for two buffers of one UNITS layout (L->units on the device): every unit's bytes in
 * [offset, offset+len) from src to dst, in one kernel (RDMA pull between identical types). */
gdte_status_t gdte_gpu_exec_copy_units(const gdte_layout_t *L, const void *src, void *dst, int64_t offset,
                                       int64_t len, gdte_stream_t stream, int max_blocks);

/* Cut `nruns` runs (device memory) into their units (device memory) on `stream`: the same
 * units the engine made on the host (layout.h's gdte_run_unit), without uploading them. */
gdte_status_t gdte_gpu_expand_units(const gdte_run_t *runs, int64_t nruns, int64_t unit_size, gdte_unit_t *units,
                                    gdte_stream_t stream);

/* ---- Batched executor (batch_kernels.cu for the GPU, batch_host.c on the host) ----
 * Many pieces, each the whole packed stream of `count` elements of some type at its own user
 * buffer, laid end to end (or wherever each piece's `packed` offset says) in one packed buffer:
 * every peer's part of one collective call, moved by ONE kernel launch (one host pass). */
typedef struct gdte_batch_piece {
    gdte_layout_t L; /* UNITS: L.units on the device for the GPU executor, on the host for the host one */
    char *user;      /* the user buffer as given (L.disp is relative to it) */
    int64_t packed;  /* offset of the piece's packed stream in the packed buffer; with no packed
                      * buffer (NULL), the stream's address itself (pieces read from several buffers) */
    int mirror;      /* 1: the other side is a second buffer of the same layout, not a packed stream:
                      * the byte at user + x moves to or from (packed address) + x (a copy between
                      * two buffers of one type, e.g. from a peer's mapped buffer; UNPACK reads the
                      * second buffer). 0: a packed stream. */
} gdte_batch_piece_t;

/* Host executor: every piece, one pass (counted as one batch of direction `dir`). */
void gdte_host_exec_batch(const gdte_batch_piece_t *pieces, int n, gdte_dir_t dir, void *packed);
/* Bytes of device memory gdte_gpu_exec_batch needs as scratch for `n` pieces (its work list). */
size_t gdte_gpu_exec_batch_scratch(int n);
/* GPU executor: the work list is copied into `dscratch` (device memory of at least
 * gdte_gpu_exec_batch_scratch(n) bytes, untouched until the kernel is done) and one kernel moves
 * every piece, on `stream`, asynchronously. `packed` must be device-accessible (device memory or
 * the device pointer of mapped pinned memory). Pieces without data cost nothing; a batch without
 * any data launches nothing and is not counted. */
gdte_status_t gdte_gpu_exec_batch(const gdte_batch_piece_t *pieces, int n, gdte_dir_t dir, void *packed,
                                  void *dscratch, gdte_stream_t stream);
/* Batches run so far in direction `dir` (GPU launches and host passes together). */
int64_t gdte_exec_batch_count(gdte_dir_t dir);
/* Count one batch (the executors call it). */
void gdte_exec_batch_note(gdte_dir_t dir);

#endif
