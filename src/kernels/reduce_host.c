/* The host twin of reduce_kernels.cu (see reduce.h): the same per-element rules, one loop per
 * (operation, element type). Fake-device mode runs it where the GPU would run the kernel. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "reduce.h"

int64_t gdte_reduce_elem_size(gdte_rtype_t t)
{
    switch (t) {
#define GDTE_X_SZ(id, T, UT) \
    case GDTE_RT_##id: return (int64_t)sizeof(T);
        GDTE_RED_INTS(GDTE_X_SZ)
        GDTE_RED_FLOATS(GDTE_X_SZ)
#undef GDTE_X_SZ
    case GDTE_RT_BOOL: return 1;
#define GDTE_X_PSZ(id, VT) \
    case GDTE_RT_##id: return (int64_t)sizeof(gdte_red_pair_##id##_t);
        GDTE_RED_PAIRS(GDTE_X_PSZ)
#undef GDTE_X_PSZ
    default: return 0;
    }
}

int gdte_reduce_supported(gdte_rop_t op, gdte_rtype_t t)
{
    if ((unsigned)op >= GDTE_ROP_COUNT_ || (unsigned)t >= GDTE_RT_COUNT_) return 0;
    if (t <= GDTE_RT_U64) return op <= GDTE_ROP_BXOR;
    if (t == GDTE_RT_F32 || t == GDTE_RT_F64) return op <= GDTE_ROP_MAX;
    if (t == GDTE_RT_BOOL) return op == GDTE_ROP_LAND || op == GDTE_ROP_LOR || op == GDTE_ROP_LXOR;
    return op == GDTE_ROP_MINLOC || op == GDTE_ROP_MAXLOC;
}

#define RED_LOOP(RULE, T, UT)                                  \
    do {                                                       \
        const T *a_ = (const T *)in;                           \
        T *o_ = (T *)inout;                                    \
        for (int64_t j_ = 0; j_ < n; j_++) RULE(T, UT, o_[j_], a_[j_]); \
    } while (0)

/* The loop of `op` by the rules of one family (reduce.h) on elements T (unsigned twin UT). */
#define RED_CASE(OP, RULE, T, UT)                    \
    case GDTE_ROP_##OP: RED_LOOP(RULE, T, UT); break;
#define RED_OPS(RULES, T, UT)       \
    switch (op) {                   \
        RULES(RED_CASE, T, UT)      \
    default: break;                 \
    }

gdte_status_t gdte_reduce_host(gdte_rop_t op, gdte_rtype_t t, const void *in, void *inout, int64_t n)
{
    if (!gdte_reduce_supported(op, t)) return GDTE_ERR_UNSUPPORTED;
    if (n <= 0) return GDTE_OK;
    if (!in || !inout) return GDTE_ERR_INVALID_ARG;
    switch (t) {
#define GDTE_X_INT(id, T, UT) \
    case GDTE_RT_##id: RED_OPS(GDTE_RED_INT_RULES, T, UT) break;
        GDTE_RED_INTS(GDTE_X_INT)
#undef GDTE_X_INT
#define GDTE_X_FLT(id, T, UT) \
    case GDTE_RT_##id: RED_OPS(GDTE_RED_FLOAT_RULES, T, UT) break;
        GDTE_RED_FLOATS(GDTE_X_FLT)
#undef GDTE_X_FLT
    case GDTE_RT_BOOL: RED_OPS(GDTE_RED_INT_RULES, uint8_t, uint8_t) break;
#define GDTE_X_PAIR(id, VT) \
    case GDTE_RT_##id: RED_OPS(GDTE_RED_PAIR_RULES, gdte_red_pair_##id##_t, gdte_red_pair_##id##_t) break;
        GDTE_RED_PAIRS(GDTE_X_PAIR)
#undef GDTE_X_PAIR
    default: return GDTE_ERR_UNSUPPORTED;
    }
    return GDTE_OK;
}

gdte_status_t gdte_reduce_host_n(gdte_rop_t op, gdte_rtype_t t, const void *const *in, int nin, void *out, int64_t n)
{
    if (!gdte_reduce_supported(op, t)) return GDTE_ERR_UNSUPPORTED;
    if (n <= 0 || nin <= 0) return GDTE_OK;
    if (!in || !out) return GDTE_ERR_INVALID_ARG;
    for (int k = 0; k < nin; k++)
        if (!in[k] || (k >= GDTE_REDUCE_MAX_INPUTS && in[k] == out)) return GDTE_ERR_INVALID_ARG;
    size_t bytes = (size_t)(n * gdte_reduce_elem_size(t));
    /* Accumulate in `out` unless a later input is `out` itself: the first input's copy would
     * overwrite it before it is read; then in a buffer of our own. */
    void *acc = out;
    for (int k = 1; k < nin; k++)
        if (in[k] == out) acc = NULL;
    if (!acc && !(acc = malloc(bytes))) return GDTE_ERR_NO_MEMORY;
    if (acc != in[0]) memmove(acc, in[0], bytes);
    gdte_status_t st = GDTE_OK;
    for (int k = 1; k < nin && st == GDTE_OK; k++) st = gdte_reduce_host(op, t, in[k], acc, n);
    if (acc != out) {
        if (st == GDTE_OK) memcpy(out, acc, bytes);
        free(acc);
    }
    return st;
}
