/* The public gdte_comm_* / gdte_msg_* calls (gdte.h) over the protocol layer (proto.h). */
#include <sched.h>
#include "proto_int.h"

GDTE_API gdte_status_t gdte_comm_create(const gdte_comm_params_t *params, gdte_comm_h *comm_p)
{
    if (!params || !comm_p) return GDTE_ERR_INVALID_ARG;
    gdte_proto_ctx_params_t p = {.field_mask = 0};
    if (params->field_mask & GDTE_COMM_FIELD_RANK) {
        p.field_mask |= GDTE_PROTO_CTX_FIELD_RANK;
        p.rank = params->rank;
    }
    if (params->field_mask & GDTE_COMM_FIELD_SIZE) {
        p.field_mask |= GDTE_PROTO_CTX_FIELD_SIZE;
        p.size = params->size;
    }
    if (params->field_mask & GDTE_COMM_FIELD_ALLGATHER) {
        p.field_mask |= GDTE_PROTO_CTX_FIELD_ALLGATHER;
        p.allgather = params->allgather;
    }
    if (params->field_mask & GDTE_COMM_FIELD_ALLGATHER_ARG) {
        p.field_mask |= GDTE_PROTO_CTX_FIELD_ALLGATHER_ARG;
        p.allgather_arg = params->allgather_arg;
    }
    return gdte_proto_ctx_create(&p, comm_p);
}

GDTE_API gdte_status_t gdte_comm_destroy(gdte_comm_h comm) { return gdte_proto_ctx_destroy(comm); }

GDTE_API gdte_status_t gdte_comm_progress(gdte_comm_h comm)
{
    if (!comm) return GDTE_ERR_INVALID_ARG;
    gdte_proto_progress(comm);
    return GDTE_OK;
}

GDTE_API gdte_status_t gdte_msg_isend(gdte_comm_h comm, const void *buf, int64_t count, gdte_type_h type, int peer,
                                      uint64_t tag, const gdte_msg_params_t *params, gdte_msg_req_h *req_p)
{
    return gdte_proto_send_nb(comm, buf, count, type, peer, tag, params, req_p);
}

GDTE_API gdte_status_t gdte_msg_irecv(gdte_comm_h comm, void *buf, int64_t count, gdte_type_h type, int peer,
                                      uint64_t tag, const gdte_msg_params_t *params, gdte_msg_req_h *req_p)
{
    return gdte_proto_recv_nb(comm, buf, count, type, peer, tag, params, req_p);
}

GDTE_API gdte_status_t gdte_msg_test(gdte_msg_req_h *req_p, gdte_msg_status_t *status_p)
{
    if (!req_p) return GDTE_ERR_INVALID_ARG;
    gdte_msg_req_h req = *req_p;
    if (!req) return GDTE_OK;
    gdte_status_t st = gdte_proto_req_check(req, status_p);
    if (st == GDTE_INPROGRESS) {
        gdte_proto_progress(gdte_proto_req_ctx(req));
        st = gdte_proto_req_check(req, status_p);
        if (st == GDTE_INPROGRESS) return st;
    }
    gdte_proto_req_free(req);
    *req_p = NULL;
    return st;
}

GDTE_API gdte_status_t gdte_msg_wait(gdte_msg_req_h *req_p, gdte_msg_status_t *status_p)
{
    unsigned idle = 0;
    for (;;) {
        gdte_status_t st = gdte_msg_test(req_p, status_p);
        if (st != GDTE_INPROGRESS) return st;
        /* Busy polling, but let an oversubscribed peer run now and then. */
        if (++idle % 1024 == 0) sched_yield();
    }
}

GDTE_API gdte_status_t gdte_msg_cancel(gdte_msg_req_h req) { return gdte_proto_req_cancel(req); }

GDTE_API gdte_status_t gdte_msg_iprobe(gdte_comm_h comm, int peer, uint64_t tag, uint64_t tag_mask, int *flag_p,
                                       gdte_msg_status_t *status_p)
{
    return gdte_proto_probe(comm, peer, tag, tag_mask, flag_p, status_p);
}
