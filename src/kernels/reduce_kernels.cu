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

/* gdte_reduce_gpu_n's launch: out = in[0] op ... op in[nin-1]. */
struct red_n_args {
    const void *in[GDTE_REDUCE_MAX_INPUTS];
    void *out;
    int64_t n;
    int nin;
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

/* Each element of every input read once, the result written once: the inputs' loads of one
 * element are independent and all in flight together. */
template <typename T, typename F> __global__ void k_reduce_n(red_n_args a)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < a.n; j += step) {
        T acc = ((const T *)a.in[0])[j];
        for (int k = 1; k < a.nin; k++) {
            const T i = ((const T *)a.in[k])[j];
            F::apply(acc, i);
        }
        ((T *)a.out)[j] = acc;
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

static gdte_status_t launched(void)
{
    hipError_t e = hipGetLastError();
    if (e == hipSuccess) return GDTE_OK;
    gdte_error("GPU reduction kernel: launch failed: %s", hipGetErrorString(e));
    return GDTE_ERR_GPU;
}

/* One launch: k_reduce (two arrays, `nx` NULL) or k_reduce_n (nx: its arguments; in, inout
 * unused). */
template <typename T, typename F>
static gdte_status_t launch(const void *in, void *inout, int64_t n, gdte_stream_t s, const red_n_args *nx)
{
    if (nx) {
        red_n_args a = *nx;
        GDTE_LAUNCH((unsigned)red_grid(n), RNT, (hipStream_t)s, a, k_reduce_n<T, F>);
        return launched();
    }
    red_args a = {in, inout, n};
    GDTE_LAUNCH((unsigned)red_grid(n), RNT, (hipStream_t)s, a, k_reduce<T, F>);
    return launched();
}

/* The kernel of `op` by the rules of one family (reduce.h) on elements T (unsigned twin UT). */
#define RED_CASE(OP, RULE, T, UT) \
    case GDTE_ROP_##OP: return launch<T, f_##RULE<T, UT> >(in, io, n, s, nx);
template <typename T, typename UT> static gdte_status_t int_ops(gdte_rop_t op, const void *in, void *io, int64_t n,
                                                                gdte_stream_t s, const red_n_args *nx)
{
    switch (op) {
        GDTE_RED_INT_RULES(RED_CASE, T, UT)
    default: return GDTE_ERR_UNSUPPORTED;
    }
}

template <typename T>
static gdte_status_t float_ops(gdte_rop_t op, const void *in, void *io, int64_t n, gdte_stream_t s, const red_n_args *nx)
{
    switch (op) {
        GDTE_RED_FLOAT_RULES(RED_CASE, T, T)
    default: return GDTE_ERR_UNSUPPORTED;
    }
}

template <typename P>
static gdte_status_t pair_ops(gdte_rop_t op, const void *in, void *io, int64_t n, gdte_stream_t s, const red_n_args *nx)
{
    switch (op) {
        GDTE_RED_PAIR_RULES(RED_CASE, P, P)
    default: return GDTE_ERR_UNSUPPORTED;
    }
}

/* The launch of (op, t) on elements: two arrays, or nx's inputs. */
static gdte_status_t dispatch(gdte_rop_t op, gdte_rtype_t t, const void *in, void *inout, int64_t n,
                              gdte_stream_t stream, const red_n_args *nx)
{
    switch (t) {
#define GDTE_X_INT(id, T, UT) \
    case GDTE_RT_##id: return int_ops<T, UT>(op, in, inout, n, stream, nx);
        GDTE_RED_INTS(GDTE_X_INT)
#undef GDTE_X_INT
    case GDTE_RT_F32: return float_ops<float>(op, in, inout, n, stream, nx);
    case GDTE_RT_F64: return float_ops<double>(op, in, inout, n, stream, nx);
    case GDTE_RT_BOOL: return int_ops<uint8_t, uint8_t>(op, in, inout, n, stream, nx);
#define GDTE_X_PAIR(id, VT) \
    case GDTE_RT_##id: return pair_ops<gdte_red_pair_##id##_t>(op, in, inout, n, stream, nx);
        GDTE_RED_PAIRS(GDTE_X_PAIR)
#undef GDTE_X_PAIR
    default: return GDTE_ERR_UNSUPPORTED;
    }
}

extern "C" gdte_status_t gdte_reduce_gpu(gdte_rop_t op, gdte_rtype_t t, const void *in, void *inout, int64_t n,
                                         gdte_stream_t stream)
{
    if (!gdte_reduce_supported(op, t)) return GDTE_ERR_UNSUPPORTED;
    if (n <= 0) return GDTE_OK;
    if (!in || !inout) return GDTE_ERR_INVALID_ARG;
    return dispatch(op, t, in, inout, n, stream, NULL);
}

extern "C" gdte_status_t gdte_reduce_gpu_n(gdte_rop_t op, gdte_rtype_t t, const void *const *in, int nin, void *out,
                                           int64_t n, gdte_stream_t stream)
{
    if (!gdte_reduce_supported(op, t)) return GDTE_ERR_UNSUPPORTED;
    if (n <= 0 || nin <= 0) return GDTE_OK;
    if (!in || !out) return GDTE_ERR_INVALID_ARG;
    for (int k = 0; k < nin; k++)
        if (!in[k]) return GDTE_ERR_INVALID_ARG;
    /* Launches of up to GDTE_REDUCE_MAX_INPUTS inputs, each after the first continuing from
     * `out`: an input that is `out` itself must be read by the first launch, before anything is
     * written (reduce.h). */
    for (int k = GDTE_REDUCE_MAX_INPUTS; k < nin; k++)
        if (in[k] == out) return GDTE_ERR_INVALID_ARG;
    int done = 0;
    while (done < nin) {
        red_n_args a;
        memset(&a, 0, sizeof a);
        int k = 0;
        if (done > 0) a.in[k++] = out;
        while (k < GDTE_REDUCE_MAX_INPUTS && done < nin) a.in[k++] = in[done++];
        a.nin = k;
        a.out = out;
        a.n = n;
        gdte_status_t st = dispatch(op, t, NULL, NULL, n, stream, &a);
        if (st != GDTE_OK) return st;
    }
    return GDTE_OK;
}
