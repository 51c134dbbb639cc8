/*
 * reduce_kernels.cu: inout[i] = op(inout[i], in[i]) on the GPU (reduce.h). One source in the
 * common CUDA/HIP dialect, like pack_kernels.cu: nvcc builds it for CUDA, hipcc (-x hip) for
 * HIP, and tests/gpu/emu for the CPU. The per-element rules are reduce.h's macros, the same the
 * host twin (reduce_host.c) applies, so both give the same bytes.
 *
 * One kernel template per (element type, rule): a grid-stride loop, one element per thread per
 * turn. Each element is read twice and written once, so the kernel is bound by memory
 * bandwidth; consecutive threads take consecutive elements (coalesced), and a grid of a few
 * waves keeps every SM's loads in flight.
 */
#include <stdint.h>
#include "gpu/gpu_compat.h"
extern "C" {
#include "reduce.h"
#include "gpu/gpu.h"
#include "util/util.h"
}

#define RNT 256 /* threads per block */

#ifndef GDTE_LAUNCH
#define GDTE_LAUNCH(grid, block, stream, arg, ...) \
    ((void)hipGetLastError(), __VA_ARGS__<<<(grid), (block), 0, (stream)>>>(arg))
#endif

struct red_args {
    const void *in;
    void *inout;
    int64_t n;
};

/* Rule R of reduce.h as a functor. */
#define RED_FUNCTOR(name, RULE)                                                      \
    template <typename T, typename UT> struct name {                                 \
        static __device__ __forceinline__ void apply(T &o, const T &i) { RULE(T, UT, o, i); } \
    };
RED_FUNCTOR(f_sum, GDTE_RED_SUM)
RED_FUNCTOR(f_prod, GDTE_RED_PROD)
RED_FUNCTOR(f_fsum, GDTE_RED_FSUM)
RED_FUNCTOR(f_fprod, GDTE_RED_FPROD)
RED_FUNCTOR(f_min, GDTE_RED_MIN)
RED_FUNCTOR(f_max, GDTE_RED_MAX)
RED_FUNCTOR(f_land, GDTE_RED_LAND)
RED_FUNCTOR(f_lor, GDTE_RED_LOR)
RED_FUNCTOR(f_lxor, GDTE_RED_LXOR)
RED_FUNCTOR(f_band, GDTE_RED_BAND)
RED_FUNCTOR(f_bor, GDTE_RED_BOR)
RED_FUNCTOR(f_bxor, GDTE_RED_BXOR)
RED_FUNCTOR(f_minloc, GDTE_RED_MINLOC)
RED_FUNCTOR(f_maxloc, GDTE_RED_MAXLOC)

template <typename T, typename F> __global__ void k_reduce(red_args a)
{
    const T *in = (const T *)a.in;
    T *io = (T *)a.inout;
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < a.n; j += step) {
        T o = io[j];
        const T i = in[j];
        F::apply(o, i);
        io[j] = o;
    }
}

/* A few waves of resident blocks: enough to cover the memory latency, few enough that each
 * thread walks several elements. */
static int64_t red_grid(int64_t n)
{
    int64_t want = (n + RNT - 1) / RNT;
    gdte_gpu_props_t p;
    int64_t sms = gdte_gpu_get_props(-1, &p) == GDTE_OK && p.sm_count > 0 ? p.sm_count : 64;
    int64_t cap = sms * 8;
    return want < cap ? (want > 0 ? want : 1) : cap;
}

template <typename T, typename F> static gdte_status_t launch(const void *in, void *inout, int64_t n, gdte_stream_t s)
{
    red_args a = {in, inout, n};
    GDTE_LAUNCH((unsigned)red_grid(n), RNT, (hipStream_t)s, a, k_reduce<T, F>);
    hipError_t e = hipGetLastError();
    if (e == hipSuccess) return GDTE_OK;
    gdte_error("GPU reduction kernel: launch failed: %s", hipGetErrorString(e));
    return GDTE_ERR_GPU;
}

template <typename T, typename UT> static gdte_status_t int_ops(gdte_rop_t op, const void *in, void *io, int64_t n,
                                                                gdte_stream_t s)
{
    switch (op) {
    case GDTE_ROP_SUM: return launch<T, f_sum<T, UT> >(in, io, n, s);
    case GDTE_ROP_PROD: return launch<T, f_prod<T, UT> >(in, io, n, s);
    case GDTE_ROP_MIN: return launch<T, f_min<T, UT> >(in, io, n, s);
    case GDTE_ROP_MAX: return launch<T, f_max<T, UT> >(in, io, n, s);
    case GDTE_ROP_LAND: return launch<T, f_land<T, UT> >(in, io, n, s);
    case GDTE_ROP_LOR: return launch<T, f_lor<T, UT> >(in, io, n, s);
    case GDTE_ROP_LXOR: return launch<T, f_lxor<T, UT> >(in, io, n, s);
    case GDTE_ROP_BAND: return launch<T, f_band<T, UT> >(in, io, n, s);
    case GDTE_ROP_BOR: return launch<T, f_bor<T, UT> >(in, io, n, s);
    case GDTE_ROP_BXOR: return launch<T, f_bxor<T, UT> >(in, io, n, s);
    default: return GDTE_ERR_UNSUPPORTED;
    }
}

template <typename T> static gdte_status_t float_ops(gdte_rop_t op, const void *in, void *io, int64_t n, gdte_stream_t s)
{
    switch (op) {
    case GDTE_ROP_SUM: return launch<T, f_fsum<T, T> >(in, io, n, s);
    case GDTE_ROP_PROD: return launch<T, f_fprod<T, T> >(in, io, n, s);
    case GDTE_ROP_MIN: return launch<T, f_min<T, T> >(in, io, n, s);
    case GDTE_ROP_MAX: return launch<T, f_max<T, T> >(in, io, n, s);
    default: return GDTE_ERR_UNSUPPORTED;
    }
}

template <typename P> static gdte_status_t pair_ops(gdte_rop_t op, const void *in, void *io, int64_t n, gdte_stream_t s)
{
    if (op == GDTE_ROP_MINLOC) return launch<P, f_minloc<P, P> >(in, io, n, s);
    return launch<P, f_maxloc<P, P> >(in, io, n, s);
}

extern "C" gdte_status_t gdte_reduce_gpu(gdte_rop_t op, gdte_rtype_t t, const void *in, void *inout, int64_t n,
                                         gdte_stream_t stream)
{
    if (!gdte_reduce_supported(op, t)) return GDTE_ERR_UNSUPPORTED;
    if (n <= 0) return GDTE_OK;
    if (!in || !inout) return GDTE_ERR_INVALID_ARG;
    switch (t) {
#define GDTE_X_INT(id, T, UT) \
    case GDTE_RT_##id: return int_ops<T, UT>(op, in, inout, n, stream);
        GDTE_RED_INTS(GDTE_X_INT)
#undef GDTE_X_INT
    case GDTE_RT_F32: return float_ops<float>(op, in, inout, n, stream);
    case GDTE_RT_F64: return float_ops<double>(op, in, inout, n, stream);
    case GDTE_RT_BOOL: return int_ops<uint8_t, uint8_t>(op, in, inout, n, stream);
#define GDTE_X_PAIR(id, VT) \
    case GDTE_RT_##id: return pair_ops<gdte_red_pair_##id##_t>(op, in, inout, n, stream);
        GDTE_RED_PAIRS(GDTE_X_PAIR)
#undef GDTE_X_PAIR
    default: return GDTE_ERR_UNSUPPORTED;
    }
}
