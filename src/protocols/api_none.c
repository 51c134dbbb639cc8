/* The gdte_comm_* / gdte_msg_* calls in a build without UCX (GDTE_WITH_UCX=OFF): every call
 * says so, and the library still links for programs that only pack. */
#include "gdte.h"

GDTE_API gdte_status_t gdte_comm_create(const gdte_comm_params_t *params, gdte_comm_h *comm_p)
{
    (void)params;
    (void)comm_p;
    return GDTE_ERR_UNSUPPORTED;
}
GDTE_API gdte_status_t gdte_comm_destroy(gdte_comm_h comm)
{
    (void)comm;
    return GDTE_ERR_UNSUPPORTED;
}
GDTE_API gdte_status_t gdte_comm_progress(gdte_comm_h comm)
{
    (void)comm;
    return GDTE_ERR_UNSUPPORTED;
}
GDTE_API gdte_status_t gdte_msg_isend(gdte_comm_h c, const void *b, int64_t n, gdte_type_h t, int p, uint64_t tag,
                                      const gdte_msg_params_t *prm, gdte_msg_req_h *r)
{
    (void)c, (void)b, (void)n, (void)t, (void)p, (void)tag, (void)prm, (void)r;
    return GDTE_ERR_UNSUPPORTED;
}
GDTE_API gdte_status_t gdte_msg_irecv(gdte_comm_h c, void *b, int64_t n, gdte_type_h t, int p, uint64_t tag,
                                      const gdte_msg_params_t *prm, gdte_msg_req_h *r)
{
    (void)c, (void)b, (void)n, (void)t, (void)p, (void)tag, (void)prm, (void)r;
    return GDTE_ERR_UNSUPPORTED;
}
GDTE_API gdte_status_t gdte_msg_test(gdte_msg_req_h *r, gdte_msg_status_t *s)
{
    (void)r, (void)s;
    return GDTE_ERR_UNSUPPORTED;
}
GDTE_API gdte_status_t gdte_msg_wait(gdte_msg_req_h *r, gdte_msg_status_t *s)
{
    (void)r, (void)s;
    return GDTE_ERR_UNSUPPORTED;
}
GDTE_API gdte_status_t gdte_msg_cancel(gdte_msg_req_h r)
{
    (void)r;
    return GDTE_ERR_UNSUPPORTED;
}
GDTE_API gdte_status_t gdte_msg_iprobe(gdte_comm_h c, int p, uint64_t t, uint64_t m, int *f, gdte_msg_status_t *s)
{
    (void)c, (void)p, (void)t, (void)m, (void)f, (void)s;
    return GDTE_ERR_UNSUPPORTED;
}
