/* The GPU reductions when gdte is built without a GPU backend (reduce.h). */
#include "reduce.h"

gdte_status_t gdte_reduce_gpu(gdte_rop_t op, gdte_rtype_t t, const void *in, void *inout, int64_t n,
                              gdte_stream_t stream)
{
    (void)op; (void)t; (void)in; (void)inout; (void)n; (void)stream;
    return GDTE_ERR_NO_DEVICE;
}

gdte_status_t gdte_reduce_gpu_n(gdte_rop_t op, gdte_rtype_t t, const void *const *in, int nin, void *out, int64_t n,
                                gdte_stream_t stream)
{
    (void)op; (void)t; (void)in; (void)nin; (void)out; (void)n; (void)stream;
    return GDTE_ERR_NO_DEVICE;
}
