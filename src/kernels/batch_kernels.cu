/*
 * batch_kernels.cu: the batched GPU executor (kernels.h, gdte_gpu_exec_batch). One kernel moves
 * the whole packed stream of every piece of a work list between its user buffer and its place in
 * one packed buffer: all the peers' parts of one collective call in one launch, where one
 * gdte_gpu_exec per peer would pay a launch (and on a shared GPU a context switch) each.
 *
 * The work list is batch_plan.h's, shared with the host backend (batch_host.c): each piece's
 * stream cut into chunks of GDTE_BATCH_CHUNK bytes, the chunks of all pieces numbered in one
 * sequence. Every thread block takes chunks of it (grid-stride), finds the piece by a binary
 * search over the pieces' first chunk numbers, and moves its chunk by the piece's layout kind,
 * reading the layout through layout.h as host_exec.c and pack_kernels.cu do:
 *  - CONTIG:  one cooperative copy, in the widest words the two addresses' congruence allows;
 *  - STRIDED: long blocks (>= BLONG bytes) one after the other, each a cooperative copy; short
 *             blocks one word per thread, words of the width W that divides the block length,
 *             every stride and both base addresses (computed on the host per piece);
 *  - UNITS:   one warp per unit (the units of repetitions after the first found by index), the
 *             part of the unit inside the chunk copied by the warp's lanes.
 * Only this file's own helpers are used: the per-layout kernels of pack_kernels.cu are tuned
 * for one layout per launch. One source for CUDA and HIP (gpu_compat.h), and for the CPU
 * emulator of tests/gpu (the launch goes through GDTE_LAUNCH with one argument, as there).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "gpu/gpu_compat.h"
extern "C" {
#include "kernels.h"
#include "batch_plan.h"
#include "gpu/gpu.h"
#include "util/util.h"
}

#define BNT 256            /* threads per block */
#define BLONG 512          /* STRIDED blocks at least this long are copied block by block */
#define BMAX_GRID (1 << 20) /* at most this many blocks; they stride over the chunks */

#ifndef GDTE_LAUNCH
#define GDTE_LAUNCH(grid, block, stream, arg, ...) \
    ((void)hipGetLastError(), __VA_ARGS__<<<(grid), (block), 0, (stream)>>>(arg))
#endif

typedef gdte_batch_item_t bpiece;

/* The kernel's one argument: the work list (device memory) and its size. */
struct bargs {
    const bpiece *pieces;
    int n;
    int64_t nchunks;
};

template <typename T> __device__ __forceinline__ void mv(char *d, const char *s) { *(T *)d = *(const T *)s; }

/* Copy n bytes by threads t, t+T, ...: bytes up to the first address aligned to W, W-byte words,
 * the bytes after the last whole word. dst and src are congruent modulo W. */
template <int W, typename T>
__device__ __forceinline__ void copy_w(char *dst, const char *src, int64_t n, int t, int T_)
{
    int64_t head = (int64_t)((W - ((uintptr_t)dst & (W - 1))) & (W - 1));
    if (head > n) head = n;
    for (int64_t i = t; i < head; i += T_) dst[i] = src[i];
    int64_t nw = (n - head) / W;
    char *d = dst + head;
    const char *s = src + head;
    for (int64_t i = t; i < nw; i += T_) mv<T>(d + i * W, s + i * W);
    for (int64_t i = head + nw * W + t; i < n; i += T_) dst[i] = src[i];
}

__device__ __forceinline__ void coop_copy(char *dst, const char *src, int64_t n, int t, int T_)
{
    uintptr_t x = (uintptr_t)dst ^ (uintptr_t)src;
    if ((x & 15) == 0 && n >= 64)
        copy_w<16, uint4>(dst, src, n, t, T_);
    else if ((x & 7) == 0 && n >= 16)
        copy_w<8, unsigned long long>(dst, src, n, t, T_);
    else if ((x & 3) == 0 && n >= 8)
        copy_w<4, uint32_t>(dst, src, n, t, T_);
    else
        for (int64_t i = t; i < n; i += T_) dst[i] = src[i];
}

/* a / b, both >= 0: 32-bit division when both fit. */
__device__ __forceinline__ int64_t bdiv(int64_t a, int64_t b)
{
    if ((((uint64_t)a | (uint64_t)b) >> 32) == 0) return (int64_t)((uint32_t)a / (uint32_t)b);
    return a / b;
}

/* Offset of block `b` of a STRIDED layout (layout.h's gdte_layout_block_offset with bdiv). */
__device__ __forceinline__ int64_t block_off(const gdte_layout_t &L, int64_t b)
{
    int64_t off = L.disp;
    for (int k = 0; k < L.ndims; k++) {
        int64_t c = L.count[k];
        int64_t q = bdiv(b, c);
        off += (b - q * c) * L.stride[k];
        b = q;
    }
    return off;
}

template <int DIR> __device__ __forceinline__ void move(char *u, char *p, int64_t n, int t, int T_)
{
    if (DIR == GDTE_DIR_PACK)
        coop_copy(p, u, n, t, T_);
    else
        coop_copy(u, p, n, t, T_);
}

/* The other side of user byte u at packed offset s: the packed stream, or for a mirror piece the
 * same place in the second buffer. */
__device__ __forceinline__ char *other(const bpiece &P, const char *u, int64_t s)
{
    return P.mirror ? P.packed + (u - P.user) : P.packed + s;
}

template <int DIR, typename T>
__device__ __forceinline__ void strided_words(const bpiece &P, int64_t lo, int64_t hi, int W)
{
    const gdte_layout_t &L = P.L;
    for (int64_t x = lo / W + threadIdx.x; x < hi / W; x += blockDim.x) {
        int64_t byte = x * W;
        int64_t b = bdiv(byte, L.blocklen);
        char *u = P.user + block_off(L, b) + (byte - b * L.blocklen);
        char *p = other(P, u, byte);
        if (DIR == GDTE_DIR_PACK)
            mv<T>(p, u);
        else
            mv<T>(u, p);
    }
}

template <int DIR> __device__ void do_strided(const bpiece &P, int64_t lo, int64_t hi)
{
    const gdte_layout_t &L = P.L;
    const int64_t bl = L.blocklen;
    if (bl >= BLONG) {
        for (int64_t b = bdiv(lo, bl); b * bl < hi; b++) {
            int64_t s = b * bl > lo ? b * bl : lo, e = (b + 1) * bl < hi ? (b + 1) * bl : hi;
            char *u = P.user + block_off(L, b) + (s - b * bl);
            move<DIR>(u, other(P, u, s), e - s, threadIdx.x, blockDim.x);
        }
        return;
    }
    switch (P.word) {
    case 16: strided_words<DIR, uint4>(P, lo, hi, 16); break;
    case 8: strided_words<DIR, unsigned long long>(P, lo, hi, 8); break;
    case 4: strided_words<DIR, uint32_t>(P, lo, hi, 4); break;
    case 2: strided_words<DIR, uint16_t>(P, lo, hi, 2); break;
    default: strided_words<DIR, uint8_t>(P, lo, hi, 1); break;
    }
}

template <int DIR> __device__ void do_units(const bpiece &P, int64_t lo, int64_t hi, int64_t *g0_s)
{
    const gdte_layout_t &L = P.L;
    const gdte_unit_t *U = L.units;
    const int64_t nu = L.nunits, rb = L.rep_bytes, nreps = bdiv(L.total, rb);
    if (threadIdx.x == 0) {
        int64_t rep = bdiv(lo, rb);
        *g0_s = rep * nu + gdte_layout_find_unit(U, nu, lo - rep * rb);
    }
    __syncthreads();
    {
        /* A unit holding the whole chunk (units longer than a chunk): the whole block copies it,
         * not one warp. */
        int64_t g = *g0_s, rep = bdiv(g, nu), i = g - rep * nu;
        gdte_unit_t un = U[i];
        int64_t start = rep * rb + un.packed;
        if (start <= lo && start + un.len >= hi) {
            char *u = P.user + gdte_layout_rep_offset(&L, rep) + un.src + (lo - start);
            move<DIR>(u, other(P, u, lo), hi - lo, threadIdx.x, blockDim.x);
            return;
        }
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    for (int64_t g = *g0_s + warp;; g += nwarps) {
        int64_t rep = bdiv(g, nu), i = g - rep * nu;
        if (rep >= nreps) break;
        gdte_unit_t un = U[i];
        int64_t start = rep * rb + un.packed;
        if (start >= hi) break;
        int64_t s = start > lo ? start : lo, e = start + un.len < hi ? start + un.len : hi;
        if (s >= e) continue;
        char *u = P.user + gdte_layout_rep_offset(&L, rep) + un.src + (s - start);
        move<DIR>(u, other(P, u, s), e - s, lane, 32);
    }
}

template <int DIR> __global__ void __launch_bounds__(BNT) k_batch(bargs A)
{
    __shared__ int64_t g0_s;
    for (int64_t c = blockIdx.x; c < A.nchunks; c += gridDim.x) {
        /* The piece holding chunk c (batch_plan.h). */
        const bpiece &P = A.pieces[gdte_batch_find(A.pieces, A.n, c)];
        int64_t a, b;
        gdte_batch_chunk(&P, c, &a, &b);
        switch (P.L.kind) {
        case GDTE_LAYOUT_KIND_CONTIG:
            move<DIR>(P.user + P.L.disp + a, other(P, P.user + P.L.disp + a, a), b - a, threadIdx.x, blockDim.x);
            break;
        case GDTE_LAYOUT_KIND_STRIDED: do_strided<DIR>(P, a, b); break;
        case GDTE_LAYOUT_KIND_UNITS: do_units<DIR>(P, a, b, &g0_s); break;
        default: break;
        }
        __syncthreads(); /* g0_s is rewritten for the next chunk */
    }
}

extern "C" size_t gdte_gpu_exec_batch_scratch(int n) { return (size_t)(n > 0 ? n : 1) * sizeof(bpiece); }

extern "C" gdte_status_t gdte_gpu_exec_batch(const gdte_batch_piece_t *pieces, int n, gdte_dir_t dir, void *packed,
                                             void *dscratch, gdte_stream_t stream)
{
    if (n <= 0) return GDTE_OK;
    if (!pieces || !dscratch) return GDTE_ERR_INVALID_ARG;
    /* The list on the stack for the usual few pieces, as the host backend's (batch_host.c). */
    bpiece small[16], *h = n <= 16 ? small : (bpiece *)malloc((size_t)n * sizeof *h);
    if (!h) return GDTE_ERR_NO_MEMORY;
    int64_t nch = 0;
    gdte_status_t st = gdte_batch_plan(pieces, n, packed, h, &nch);
    hipError_t e = hipSuccess;
    if (st == GDTE_OK && nch > 0)
        e = hipMemcpyAsync(dscratch, h, (size_t)n * sizeof *h, hipMemcpyHostToDevice, (hipStream_t)stream);
    /* A pageable source: the runtime has read `h` when the copy returns (or failed), so it may go. */
    if (h != small) free(h);
    if (st != GDTE_OK || nch == 0) return st;
    if (e != hipSuccess) {
        gdte_error("batched executor: work list upload failed: %s", hipGetErrorString(e));
        return GDTE_ERR_GPU;
    }
    unsigned grid = (unsigned)(nch < BMAX_GRID ? nch : BMAX_GRID);
    bargs A = {(const bpiece *)dscratch, n, nch};
    if (dir == GDTE_DIR_PACK)
        GDTE_LAUNCH(dim3(grid), dim3(BNT), (hipStream_t)stream, A, k_batch<GDTE_DIR_PACK>);
    else
        GDTE_LAUNCH(dim3(grid), dim3(BNT), (hipStream_t)stream, A, k_batch<GDTE_DIR_UNPACK>);
    e = hipGetLastError();
    if (e != hipSuccess) {
        gdte_error("batched executor: launch failed: %s", hipGetErrorString(e));
        return GDTE_ERR_GPU;
    }
    gdte_exec_batch_note(dir);
    return GDTE_OK;
}
