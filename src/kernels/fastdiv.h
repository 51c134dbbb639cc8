/*
 * fastdiv.h: unsigned division by a divisor known on the host before a kernel runs, as a
 * multiply-high, a subtraction, an addition and two shifts (Granlund and Montgomery, "Division
 * by invariant integers using multiplication", PLDI 1994, figure 4.1). GPUs have no integer
 * divider: `/` is a subroutine of about 20 instructions on 32-bit values and several times
 * that on 64-bit ones, and the FLAT kernel divides for every word it moves. Plain C in the
 * common CUDA/HIP dialect, like layout.h: the host prepares a gdte_fastdiv_t, kernels get it
 * by value in their arguments. tests/kernels/fastdiv_test.c checks it against `/`.
 */
#ifndef GDTE_KERNELS_FASTDIV_H
#define GDTE_KERNELS_FASTDIV_H

#include <stdint.h>
#include "engine/layout.h" /* GDTE_HD */

typedef struct gdte_fastdiv {
    uint64_t d;        /* the divisor, >= 1 */
    uint64_t m64;      /* multiplier for 64-bit dividends */
    uint32_t m32;      /* multiplier for 32-bit dividends; valid only when d < 2^32 */
    int32_t sh1, sh2;  /* with l = ceil(log2 d): min(l, 1) and max(l - 1, 0) */
} gdte_fastdiv_t;

/* High halves of products. Device code (and the CPU emulator of tests/gpu/emu, which defines
 * GDTE_GPU_EMULATOR and host versions of the intrinsics) uses the hardware's multiply-high. */
GDTE_HD uint32_t gdte_mulhi32(uint32_t a, uint32_t b)
{
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__) || defined(GDTE_GPU_EMULATOR)
    return __umulhi(a, b);
#else
    return (uint32_t)(((uint64_t)a * b) >> 32);
#endif
}

GDTE_HD uint64_t gdte_mulhi64(uint64_t a, uint64_t b)
{
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__) || defined(GDTE_GPU_EMULATOR)
    return __umul64hi(a, b);
#else
    uint64_t al = (uint32_t)a, ah = a >> 32, bl = (uint32_t)b, bh = b >> 32;
    uint64_t lh = al * bh, hl = ah * bl;
    uint64_t mid = ((al * bl) >> 32) + (uint32_t)lh + (uint32_t)hl;
    return ah * bh + (lh >> 32) + (hl >> 32) + (mid >> 32);
#endif
}

/* Host only. d >= 1 (any 64-bit value); the 32-bit multiplier is made when d < 2^32. */
static inline void gdte_fastdiv_init(gdte_fastdiv_t *f, uint64_t d)
{
    int l = 0; /* ceil(log2 d) */
    while (l < 64 && ((uint64_t)1 << l) < d) l++;
    f->d = d;
    f->sh1 = l < 1 ? l : 1;
    f->sh2 = l > 1 ? l - 1 : 0;
    /* m = floor(2^N * (2^l - d) / d) + 1 for N = 64 and N = 32; 2^l - d < d. */
    uint64_t a = (l == 64 ? 0 : (uint64_t)1 << l) - d, q = 0, r = a;
    for (int i = 0; i < 64; i++) { /* long division of a * 2^64 by d, one bit at a time */
        uint64_t top = r >> 63;
        r <<= 1;
        q <<= 1;
        if (top || r >= d) {
            r -= d;
            q |= 1;
        }
    }
    f->m64 = q + 1;
    f->m32 = d <= UINT32_MAX ? (uint32_t)((a << 32) / d + 1) : 0; /* a < 2^31 there */
}

/* n / d for n < 2^32; needs d < 2^32. */
GDTE_HD uint32_t gdte_fastdiv32(const gdte_fastdiv_t *f, uint32_t n)
{
    uint32_t t = gdte_mulhi32(f->m32, n);
    return (t + ((n - t) >> f->sh1)) >> f->sh2;
}

/* n / d for any 64-bit n. */
GDTE_HD uint64_t gdte_fastdiv64(const gdte_fastdiv_t *f, uint64_t n)
{
    uint64_t t = gdte_mulhi64(f->m64, n);
    return (t + ((n - t) >> f->sh1)) >> f->sh2;
}

#endif
