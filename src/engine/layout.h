/*
 * layout.h: the execution form of a committed type, and the arithmetic that maps a byte of
 * the packed stream to its place in the user buffer. Plain C in the common CUDA/HIP dialect:
 * the host backend and the GPU kernels include this same file, so both interpret a plan the
 * same way.
 */
#ifndef GDTE_ENGINE_LAYOUT_H
#define GDTE_ENGINE_LAYOUT_H

#include <stdint.h>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define GDTE_HD __host__ __device__ __forceinline__
#else
#define GDTE_HD static inline
#endif

#define GDTE_MAX_DIMS 8

enum {
    GDTE_LAYOUT_KIND_EMPTY = 0,
    GDTE_LAYOUT_KIND_CONTIG = 1,
    GDTE_LAYOUT_KIND_STRIDED = 2,
    GDTE_LAYOUT_KIND_UNITS = 3,
};

/* One DEV work unit: `len` bytes at `src` in the user buffer (relative to layout.disp plus
 * the repetition's offset) are bytes [packed, packed + len) of one repetition's packed
 * stream. Units are sorted by `packed` and cover a repetition without gaps. `align` is the
 * largest power of two <= 16 dividing src and packed (the kernel combines it with the
 * buffer addresses to pick its access width for the aligned middle). */
typedef struct gdte_unit {
    int64_t src;
    int64_t packed;
    int32_t len;
    int32_t align;
} gdte_unit_t;

/* A run: one contiguous piece of a repetition before it is cut into units, the compact form of
 * a DEV plan. Its units are gdte_run_unit(run, k) for k < gdte_run_nunits(run), at index
 * first_unit + k of the unit array. Plans with long pieces upload runs and let the device
 * cut them (a run per 2 KiB-unit column of a triangle is 1/16 of the units' bytes). */
typedef struct gdte_run {
    int64_t src;
    int64_t packed;
    int64_t len;
    int64_t first_unit;
} gdte_run_t;

/*
 * Count elements of a committed type, ready to execute. Passed by value to kernels.
 *  CONTIG:  `blocklen` bytes at disp.
 *  STRIDED: blocks of `blocklen` bytes on a grid: block (i0..i_{n-1}) is at
 *           disp + sum(i_k * stride[k]); packed order is i0 fastest.
 *  UNITS:   the unit array describes one repetition of `rep_bytes` packed bytes; repetitions
 *           form a grid of count[]/stride[] (i0 fastest), repetition r at disp + offset(r).
 */
typedef struct gdte_layout {
    int32_t kind;
    int32_t ndims;
    int64_t disp;
    int64_t blocklen;
    int64_t total; /* packed bytes of the whole operation */
    int64_t true_lb; /* first byte element 0 touches, relative to the buffer (the type's true lb) */
    int64_t count[GDTE_MAX_DIMS];
    int64_t stride[GDTE_MAX_DIMS];
    /* UNITS only */
    const gdte_unit_t *units; /* host or device copy, as the executor needs */
    int64_t nunits;
    int64_t rep_bytes;
    int32_t max_unit_len;
    /* Largest power of two <= 16 dividing disp, blocklen and every stride (STRIDED/CONTIG),
     * or disp, rep strides and every unit's src/packed (UNITS). */
    int32_t align;
} gdte_layout_t;

/* Offset (relative to the buffer) of the block with linear index `b` of a STRIDED layout. */
GDTE_HD int64_t gdte_layout_block_offset(const gdte_layout_t *L, int64_t b)
{
    int64_t off = L->disp;
    for (int k = 0; k < L->ndims; k++) {
        int64_t c = L->count[k];
        int64_t q = b / c;
        off += (b - q * c) * L->stride[k];
        b = q;
    }
    return off;
}

/* Offset of repetition `r` of a UNITS layout (without units' own src). */
GDTE_HD int64_t gdte_layout_rep_offset(const gdte_layout_t *L, int64_t r)
{
    return gdte_layout_block_offset(L, r);
}

/* Index of the unit containing packed byte `q` (0 <= q < rep_bytes) of one repetition. */
GDTE_HD int64_t gdte_layout_find_unit(const gdte_unit_t *units, int64_t nunits, int64_t q)
{
    int64_t lo = 0, hi = nunits - 1;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (units[mid].packed <= q)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* The rule that cuts pieces into units, shared by the host plan builder and the device. */
GDTE_HD int64_t gdte_run_nunits(const gdte_run_t *r, int64_t unit_size)
{
    return (r->len + unit_size - 1) / unit_size;
}
GDTE_HD gdte_unit_t gdte_run_unit(const gdte_run_t *r, int64_t k, int64_t unit_size)
{
    gdte_unit_t u;
    int64_t done = k * unit_size, rest = r->len - done;
    u.src = r->src + done;
    u.packed = r->packed + done;
    u.len = (int32_t)(rest < unit_size ? rest : unit_size);
    uint64_t v = (uint64_t)(u.src | u.packed) | 16u; /* largest power of two <= 16 dividing both */
    u.align = (int32_t)(v & (~v + 1));
    return u;
}

/* Number of blocks of a STRIDED layout. */
GDTE_HD int64_t gdte_layout_nblocks(const gdte_layout_t *L)
{
    int64_t n = 1;
    for (int k = 0; k < L->ndims; k++) n *= L->count[k];
    return n;
}

#endif
