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

/* Rule RULE of reduce.h as a functor, f_RULE (one per rule: MIN and MAX serve two families). */
#define RED_FUNCTOR(OP, RULE, ...)                                                     \
    template <typename T, typename UT> struct f_##RULE {                               \
        static __device__ __forceinline__ void apply(T &o, const T &i) { RULE(T, UT, o, i); } \
    };
GDTE_RED_INT_RULES(RED_FUNCTOR, )
RED_FUNCTOR(SUM, GDTE_RED_FSUM, )
RED_FUNCTOR(PROD, GDTE_RED_FPROD, )
GDTE_RED_PAIR_RULES(RED_FUNCTOR, )

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

/* The kernel of `op` by the rules of one family (reduce.h) on elements T (unsigned twin UT). */
#define RED_CASE(OP, RULE, T, UT) \
    case GDTE_ROP_##OP: return launch<T, f_##RULE<T, UT> >(in, io, n, s);
template <typename T, typename UT> static gdte_status_t int_ops(gdte_rop_t op, const void *in, void *io, int64_t n,
                                                                gdte_stream_t s)
{
    switch (op) {
        GDTE_RED_INT_RULES(RED_CASE, T, UT)
    default: return GDTE_ERR_UNSUPPORTED;
    }
}

template <typename T> static gdte_status_t float_ops(gdte_rop_t op, const void *in, void *io, int64_t n, gdte_stream_t s)
{
    switch (op) {
        GDTE_RED_FLOAT_RULES(RED_CASE, T, T)
    default: return GDTE_ERR_UNSUPPORTED;
    }
}

template <typename P> static gdte_status_t pair_ops(gdte_rop_t op, const void *in, void *io, int64_t n, gdte_stream_t s)
{
    switch (op) {
        GDTE_RED_PAIR_RULES(RED_CASE, P, P)
    default: return GDTE_ERR_UNSUPPORTED;
    }
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
