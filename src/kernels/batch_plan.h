/*
 * batch_plan.h: the batched executor's work list (kernels.h, gdte_batch_piece_t), one definition
 * for the GPU kernel (batch_kernels.cu) and the host backend (batch_host.c). The host's batch,
 * which stands in for the kernel on the fake device (every collective of the MPI tests), walks
 * the same list chunk by chunk, so the list's logic is exercised without a GPU; its own test is
 * tests/kernels/batch_test.c, and the kernel runs on the CPU emulator in tests/gpu.
 *
 * Each piece's packed stream is cut into chunks of GDTE_BATCH_CHUNK bytes, and the chunks of all
 * pieces are numbered in one sequence: a piece's first chunk is its chunk0, and chunk c belongs
 * to the last piece whose chunk0 <= c (a piece without data has its successor's chunk0 and is
 * skipped by taking the last), covering bytes [(c - chunk0) * CHUNK, min(that + CHUNK, total))
 * of its stream. A GPU thread block takes a chunk at a time (grid-stride); the host takes them
 * in order.
 *
 * Plain C in the common CUDA/HIP dialect, as layout.h.
 */
#ifndef GDTE_KERNELS_BATCH_PLAN_H
#define GDTE_KERNELS_BATCH_PLAN_H

#include "kernels.h"

#define GDTE_BATCH_CHUNK 16384 /* bytes of a piece's stream per chunk */

/* A piece as the executors read it: the layout, where its two sides are, its first chunk. */
typedef struct gdte_batch_item {
    gdte_layout_t L; /* L.total 0: a piece without data */
    char *user;
    char *packed; /* the packed buffer + the piece's offset */
    int64_t chunk0;
    int32_t word;   /* STRIDED: the access width of short blocks (1, 2, 4, 8 or 16) */
    int32_t mirror; /* the piece's `mirror`: `packed` is a second buffer of the layout (its user) */
} gdte_batch_item_t;

/* The work list of n pieces around `packed` (batch_host.c): items[0..n) and the number of chunks
 * (0: no data at all). GDTE_ERR_INVALID_ARG for a UNITS piece with data but no units. The width
 * of a STRIDED piece's short blocks divides the layout's alignment, both base addresses and the
 * block length (every block start on both sides then is a multiple of it; chunk starts are
 * multiples of GDTE_BATCH_CHUNK). */
gdte_status_t gdte_batch_plan(const gdte_batch_piece_t *pieces, int n, void *packed, gdte_batch_item_t *items,
                              int64_t *nchunks_p);

/* The piece chunk c (< the number of chunks) belongs to. */
GDTE_HD int gdte_batch_find(const gdte_batch_item_t *items, int n, int64_t c)
{
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (items[mid].chunk0 <= c)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* The bytes [*lo_p, *hi_p) of its piece's stream that chunk c covers. */
GDTE_HD void gdte_batch_chunk(const gdte_batch_item_t *it, int64_t c, int64_t *lo_p, int64_t *hi_p)
{
    int64_t a = (c - it->chunk0) * GDTE_BATCH_CHUNK;
    *lo_p = a;
    *hi_p = a + GDTE_BATCH_CHUNK < it->L.total ? a + GDTE_BATCH_CHUNK : it->L.total;
}

#endif
