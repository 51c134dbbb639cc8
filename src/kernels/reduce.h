/*
 * reduce.h: element-wise reduction of two arrays, inout[i] = op(inout[i], in[i]), for the
 * predefined operations on builtin numeric element types, on the GPU (reduce_kernels.cu, one
 * CUDA/HIP source) and on the host (reduce_host.c, the twin that fake-device mode and the
 * tests use). Both apply the same per-element rule (the GDTE_RED_* macros below), so for one
 * pair of inputs they produce the same bytes.
 *
 * The rule is Open MPI's orientation: `out = f(out, in)` with MIN/MAX keeping `out` unless
 * `in` is strictly smaller/larger, and MINLOC/MAXLOC taking the smaller index on ties. Signed
 * SUM and PROD wrap (computed in the unsigned type of the same width, as the hardware does).
 * Which operation is valid on which MPI datatype is the MPI layer's business (src/mpi); this
 * layer knows element types only. May call: src/gpu, src/util.
 */
#ifndef GDTE_KERNELS_REDUCE_H
#define GDTE_KERNELS_REDUCE_H

#include <stdint.h>
#include "gdte.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    GDTE_ROP_SUM = 0,
    GDTE_ROP_PROD,
    GDTE_ROP_MIN,
    GDTE_ROP_MAX,
    GDTE_ROP_LAND,
    GDTE_ROP_LOR,
    GDTE_ROP_LXOR,
    GDTE_ROP_BAND,
    GDTE_ROP_BOR,
    GDTE_ROP_BXOR,
    GDTE_ROP_MINLOC,
    GDTE_ROP_MAXLOC,
    GDTE_ROP_COUNT_
} gdte_rop_t;

/* Element types. The *_INT pairs are the C layouts of MPI's pair types: struct { value; int
 * index; } with the value type's alignment. */
typedef enum {
    GDTE_RT_I8 = 0,
    GDTE_RT_U8,
    GDTE_RT_I16,
    GDTE_RT_U16,
    GDTE_RT_I32,
    GDTE_RT_U32,
    GDTE_RT_I64,
    GDTE_RT_U64,
    GDTE_RT_F32,
    GDTE_RT_F64,
    GDTE_RT_BOOL, /* C _Bool: one byte, 0 or 1 */
    GDTE_RT_FLOAT_INT,
    GDTE_RT_DOUBLE_INT,
    GDTE_RT_LONG_INT, /* int64_t value */
    GDTE_RT_2INT,
    GDTE_RT_SHORT_INT,
    GDTE_RT_COUNT_
} gdte_rtype_t;

/* Bytes of one element of `t`. */
int64_t gdte_reduce_elem_size(gdte_rtype_t t);
/* 1 when the pair (op, t) has a rule here: integers take every operation but MINLOC/MAXLOC;
 * floating point SUM, PROD, MIN, MAX; BOOL the logical ones; pairs MINLOC and MAXLOC. */
int gdte_reduce_supported(gdte_rop_t op, gdte_rtype_t t);
/* inout[i] = op(inout[i], in[i]) for i < n, on the host. Unsupported pairs: GDTE_ERR_UNSUPPORTED,
 * nothing written. `in` and `inout` may be the same array, not otherwise overlap. */
gdte_status_t gdte_reduce_host(gdte_rop_t op, gdte_rtype_t t, const void *in, void *inout, int64_t n);
/* The same on the GPU, both arrays device memory (or mapped), queued on `stream`. Without a
 * GPU backend GDTE_ERR_NO_DEVICE. */
gdte_status_t gdte_reduce_gpu(gdte_rop_t op, gdte_rtype_t t, const void *in, void *inout, int64_t n,
                              gdte_stream_t stream);

/* Inputs one launch of gdte_reduce_gpu_n reads; more take further launches. */
#define GDTE_REDUCE_MAX_INPUTS 8
/* out[i] = in[0][i] op in[1][i] op ... op in[nin-1][i], left to right (the order MPI's
 * canonical reduction of ranks 0..nin-1 takes), for i < n; nin == 1 copies, nin == 0 writes
 * nothing. `out` may be one of the first GDTE_REDUCE_MAX_INPUTS inputs (each element is read
 * before it is written; a later one: GDTE_ERR_INVALID_ARG), and must not otherwise overlap
 * them. The host twin and the GPU form give the same bytes; the GPU
 * form reads every input once per GDTE_REDUCE_MAX_INPUTS of them (one launch each, the later
 * ones taking `out` as their first input). */
gdte_status_t gdte_reduce_host_n(gdte_rop_t op, gdte_rtype_t t, const void *const *in, int nin, void *out, int64_t n);
gdte_status_t gdte_reduce_gpu_n(gdte_rop_t op, gdte_rtype_t t, const void *const *in, int nin, void *out, int64_t n,
                                gdte_stream_t stream);

#ifdef __cplusplus
}
#endif

/* ---- the per-element rules, shared by the host twin and the kernels ----
 * o: the inout element (an lvalue), i: the input element. Integer SUM/PROD take the unsigned
 * type `UT` of the element's width. */
#define GDTE_RED_SUM(T, UT, o, i) ((o) = (T)((UT)(o) + (UT)(i)))
/* 1u: unsigned arithmetic also for types narrower than int, which promote to (signed) int. */
#define GDTE_RED_PROD(T, UT, o, i) ((o) = (T)((UT)(o) * 1u * (UT)(i)))
#define GDTE_RED_FSUM(T, UT, o, i) ((o) = (o) + (i))
#define GDTE_RED_FPROD(T, UT, o, i) ((o) = (o) * (i))
#define GDTE_RED_MIN(T, UT, o, i) ((o) = (o) < (i) ? (o) : (i))
#define GDTE_RED_MAX(T, UT, o, i) ((o) = (o) > (i) ? (o) : (i))
#define GDTE_RED_LAND(T, UT, o, i) ((o) = (T)((o) && (i)))
#define GDTE_RED_LOR(T, UT, o, i) ((o) = (T)((o) || (i)))
#define GDTE_RED_LXOR(T, UT, o, i) ((o) = (T)(((o) ? 1 : 0) ^ ((i) ? 1 : 0)))
#define GDTE_RED_BAND(T, UT, o, i) ((o) = (T)((o) & (i)))
#define GDTE_RED_BOR(T, UT, o, i) ((o) = (T)((o) | (i)))
#define GDTE_RED_BXOR(T, UT, o, i) ((o) = (T)((o) ^ (i)))
/* Pairs: o and i are structs with fields v and k, assigned field by field: a struct assignment
 * may copy the padding (MPI_DOUBLE_INT, MPI_LONG_INT, MPI_SHORT_INT have some), bytes outside
 * the datatype's map that the MPI never writes and the application may use. */
#define GDTE_RED_MINLOC(T, UT, o, i)                     \
    do {                                                 \
        if ((o).v > (i).v) (o).v = (i).v, (o).k = (i).k; \
        else if ((o).v == (i).v && (i).k < (o).k) (o).k = (i).k; \
    } while (0)
#define GDTE_RED_MAXLOC(T, UT, o, i)                     \
    do {                                                 \
        if ((o).v < (i).v) (o).v = (i).v, (o).k = (i).k; \
        else if ((o).v == (i).v && (i).k < (o).k) (o).k = (i).k; \
    } while (0)

/* Which rule each operation takes, per element family: X(operation, rule, ...), the rest of the
 * arguments passed along; the host twin and the kernels dispatch through these (integers and C
 * bool; floating point; pairs). */
#define GDTE_RED_INT_RULES(X, ...)                                                                        \
    X(SUM, GDTE_RED_SUM, __VA_ARGS__) X(PROD, GDTE_RED_PROD, __VA_ARGS__) X(MIN, GDTE_RED_MIN, __VA_ARGS__) \
    X(MAX, GDTE_RED_MAX, __VA_ARGS__) X(LAND, GDTE_RED_LAND, __VA_ARGS__) X(LOR, GDTE_RED_LOR, __VA_ARGS__) \
    X(LXOR, GDTE_RED_LXOR, __VA_ARGS__) X(BAND, GDTE_RED_BAND, __VA_ARGS__) X(BOR, GDTE_RED_BOR, __VA_ARGS__) \
    X(BXOR, GDTE_RED_BXOR, __VA_ARGS__)
#define GDTE_RED_FLOAT_RULES(X, ...)                                                                        \
    X(SUM, GDTE_RED_FSUM, __VA_ARGS__) X(PROD, GDTE_RED_FPROD, __VA_ARGS__) X(MIN, GDTE_RED_MIN, __VA_ARGS__) \
    X(MAX, GDTE_RED_MAX, __VA_ARGS__)
#define GDTE_RED_PAIR_RULES(X, ...) X(MINLOC, GDTE_RED_MINLOC, __VA_ARGS__) X(MAXLOC, GDTE_RED_MAXLOC, __VA_ARGS__)

/* The pair layouts. */
#define GDTE_RED_PAIRS(X) \
    X(FLOAT_INT, float) X(DOUBLE_INT, double) X(LONG_INT, int64_t) X(2INT, int32_t) X(SHORT_INT, int16_t)
#define GDTE_X_RED_PAIR_T(id, VT) \
    typedef struct {              \
        VT v;                     \
        int32_t k;                \
    } gdte_red_pair_##id##_t;
GDTE_RED_PAIRS(GDTE_X_RED_PAIR_T)
#undef GDTE_X_RED_PAIR_T

/* (id, C type, unsigned twin) of the scalar types, and which rule family each takes. */
#define GDTE_RED_INTS(X)                                                                               \
    X(I8, int8_t, uint8_t) X(U8, uint8_t, uint8_t) X(I16, int16_t, uint16_t) X(U16, uint16_t, uint16_t) \
    X(I32, int32_t, uint32_t) X(U32, uint32_t, uint32_t) X(I64, int64_t, uint64_t) X(U64, uint64_t, uint64_t)
#define GDTE_RED_FLOATS(X) X(F32, float, float) X(F64, double, double)

#endif
