/*
 * The MPI functions libgdte_mpi.so defines: one thin shim each. Off (before MPI_Init, after
 * MPI_Finalize, or under GDTE_DISABLE=1) every shim hands its call to the next definition in
 * the chain untouched; on, it calls the internal function that does the work.
 *
 * Deliberately not intercepted, because this design needs nothing there (the request the
 * application holds is the MPI's own, and a device message is an ordinary MPI_PACKED message
 * on the application's (comm, dest, tag)):
 *  - MPI_Cancel of a receive: cancels the staging receive; completion then skips the unpack
 *    (a send the node path carries is not cancelled: it completes);
 *  - MPI_Get_count, MPI_Get_elements(_x): statuses of device receives are restated in the
 *    user's datatype at completion (MPI_Status_set_elements_x), so the MPI answers them;
 *  - MPI_Pack_size: gdte's packed size equals the MPI's for every type on a homogeneous system.
 */
#include "interpose.h"

/* Every shim but MPI_Pack/MPI_Unpack (which queue device work) and MPI_Init (before which
 * nothing can be queued) first waits for the device work gdte deferred: the call may hand a
 * buffer to the MPI or let the application observe one (gdte_ipo_pending_flush, one load when
 * nothing is pending). A new shim does the same. */
#define IPO_OFF_RETURN(name, ...) \
    if (!gdte_ipo_on()) return IPO_NEXT(name)(__VA_ARGS__)

/* A request call that failed leaves MPI_REQUEST_NULL, not whatever the variable held: MPI leaves
 * the handle undefined then, and a program that still waits on it (as many do after a reported
 * error under MPI_ERRORS_RETURN) must not hand the MPI an uninitialized handle. */
static inline int req_result(int rc, MPI_Request *req)
{
    if (rc != MPI_SUCCESS && req) *req = MPI_REQUEST_NULL;
    return rc;
}

/* ---- lifetime ---- */
GDTE_IPO_EXPORT int MPI_Init(int *argc, char ***argv)
{
    int rc = IPO_NEXT(Init)(argc, argv);
    return rc == MPI_SUCCESS ? gdte_ipo_init() : rc;
}

GDTE_IPO_EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = IPO_NEXT(Init_thread)(argc, argv, required, provided);
    if (rc != MPI_SUCCESS) return rc;
    /* What the MPI provides, capped at what gdte supports (its state is under locks, so the
     * cap is MPI_THREAD_MULTIPLE and nothing is lowered). */
    if (provided && *provided > GDTE_IPO_THREAD_MAX) *provided = GDTE_IPO_THREAD_MAX;
    return gdte_ipo_init();
}

GDTE_IPO_EXPORT int MPI_Finalize(void)
{
    gdte_ipo_pending_flush();
    return gdte_ipo_finalize();
}

/* ---- blocking sends ---- */
GDTE_IPO_EXPORT int MPI_Send(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm)
{
    IPO_OFF_RETURN(Send, buf, count, dt, dest, tag, comm);
    gdte_ipo_block_flush();
    return gdte_ipo_send(GDTE_IPO_STD, buf, count, dt, dest, tag, comm);
}

GDTE_IPO_EXPORT int MPI_Ssend(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm)
{
    IPO_OFF_RETURN(Ssend, buf, count, dt, dest, tag, comm);
    gdte_ipo_block_flush();
    return gdte_ipo_send(GDTE_IPO_SYNC, buf, count, dt, dest, tag, comm);
}

GDTE_IPO_EXPORT int MPI_Bsend(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm)
{
    IPO_OFF_RETURN(Bsend, buf, count, dt, dest, tag, comm);
    gdte_ipo_block_flush();
    return gdte_ipo_send(GDTE_IPO_BUFFERED, buf, count, dt, dest, tag, comm);
}

GDTE_IPO_EXPORT int MPI_Rsend(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm)
{
    IPO_OFF_RETURN(Rsend, buf, count, dt, dest, tag, comm);
    gdte_ipo_block_flush();
    return gdte_ipo_send(GDTE_IPO_READY, buf, count, dt, dest, tag, comm);
}

/* ---- nonblocking sends ---- */
GDTE_IPO_EXPORT int MPI_Isend(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm,
                              MPI_Request *req)
{
    IPO_OFF_RETURN(Isend, buf, count, dt, dest, tag, comm, req);
    gdte_ipo_pending_flush();
    return req_result(gdte_ipo_isend(GDTE_IPO_STD, buf, count, dt, dest, tag, comm, req), req);
}

GDTE_IPO_EXPORT int MPI_Issend(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm,
                               MPI_Request *req)
{
    IPO_OFF_RETURN(Issend, buf, count, dt, dest, tag, comm, req);
    gdte_ipo_pending_flush();
    return req_result(gdte_ipo_isend(GDTE_IPO_SYNC, buf, count, dt, dest, tag, comm, req), req);
}

GDTE_IPO_EXPORT int MPI_Ibsend(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm,
                               MPI_Request *req)
{
    IPO_OFF_RETURN(Ibsend, buf, count, dt, dest, tag, comm, req);
    gdte_ipo_pending_flush();
    return req_result(gdte_ipo_isend(GDTE_IPO_BUFFERED, buf, count, dt, dest, tag, comm, req), req);
}

GDTE_IPO_EXPORT int MPI_Irsend(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm,
                               MPI_Request *req)
{
    IPO_OFF_RETURN(Irsend, buf, count, dt, dest, tag, comm, req);
    gdte_ipo_pending_flush();
    return req_result(gdte_ipo_isend(GDTE_IPO_READY, buf, count, dt, dest, tag, comm, req), req);
}

/* ---- receives ---- */
GDTE_IPO_EXPORT int MPI_Recv(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
                             MPI_Status *status)
{
    IPO_OFF_RETURN(Recv, buf, count, dt, source, tag, comm, status);
    gdte_ipo_block_flush();
    return gdte_ipo_recv(buf, count, dt, source, tag, comm, status);
}

GDTE_IPO_EXPORT int MPI_Irecv(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
                              MPI_Request *req)
{
    IPO_OFF_RETURN(Irecv, buf, count, dt, source, tag, comm, req);
    gdte_ipo_pending_flush();
    return req_result(gdte_ipo_irecv(buf, count, dt, source, tag, comm, req), req);
}

GDTE_IPO_EXPORT int MPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype sdt, int dest, int stag, void *rbuf,
                                 int rcount, MPI_Datatype rdt, int source, int rtag, MPI_Comm comm, MPI_Status *status)
{
    IPO_OFF_RETURN(Sendrecv, sbuf, scount, sdt, dest, stag, rbuf, rcount, rdt, source, rtag, comm, status);
    gdte_ipo_block_flush();
    return gdte_ipo_sendrecv(sbuf, scount, sdt, dest, stag, rbuf, rcount, rdt, source, rtag, comm, status);
}

GDTE_IPO_EXPORT int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype dt, int dest, int stag, int source,
                                         int rtag, MPI_Comm comm, MPI_Status *status)
{
    IPO_OFF_RETURN(Sendrecv_replace, buf, count, dt, dest, stag, source, rtag, comm, status);
    gdte_ipo_block_flush();
    return gdte_ipo_sendrecv_replace(buf, count, dt, dest, stag, source, rtag, comm, status);
}

GDTE_IPO_EXPORT int MPI_Mrecv(void *buf, int count, MPI_Datatype dt, MPI_Message *msg, MPI_Status *status)
{
    IPO_OFF_RETURN(Mrecv, buf, count, dt, msg, status);
    gdte_ipo_block_flush();
    return gdte_ipo_mrecv(buf, count, dt, msg, status);
}

GDTE_IPO_EXPORT int MPI_Imrecv(void *buf, int count, MPI_Datatype dt, MPI_Message *msg, MPI_Request *req)
{
    IPO_OFF_RETURN(Imrecv, buf, count, dt, msg, req);
    gdte_ipo_pending_flush();
    return req_result(gdte_ipo_imrecv(buf, count, dt, msg, req), req);
}

GDTE_IPO_EXPORT int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message *msg, MPI_Status *status)
{
    IPO_OFF_RETURN(Mprobe, source, tag, comm, msg, status);
    gdte_ipo_block_flush();
    MPI_Status st;
    int rc, flag = 1;
    if (gdte_ipo_node_on()) {
        flag = 0;
        while ((rc = IPO_NEXT(Improbe)(source, tag, comm, &flag, msg, &st)) == MPI_SUCCESS && !flag)
            gdte_ipo_node_progress();
    } else {
        rc = IPO_NEXT(Mprobe)(source, tag, comm, msg, &st);
    }
    if (rc == MPI_SUCCESS) {
        gdte_ipo_message_note(*msg, comm);
        if (gdte_ipo_node_on()) gdte_ipo_node_probe_fix(comm, &st);
    }
    gdte_ipo_status_out(status, &st);
    return rc;
}

GDTE_IPO_EXPORT int MPI_Improbe(int source, int tag, MPI_Comm comm, int *flag, MPI_Message *msg, MPI_Status *status)
{
    IPO_OFF_RETURN(Improbe, source, tag, comm, flag, msg, status);
    gdte_ipo_pending_flush();
    MPI_Status st;
    int rc = IPO_NEXT(Improbe)(source, tag, comm, flag, msg, &st);
    if (rc == MPI_SUCCESS && *flag) {
        gdte_ipo_message_note(*msg, comm);
        if (gdte_ipo_node_on()) gdte_ipo_node_probe_fix(comm, &st);
    }
    gdte_ipo_status_out(status, &st);
    return rc;
}

/* Probes report a marker (the node path) with its message's size. */
GDTE_IPO_EXPORT int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    IPO_OFF_RETURN(Probe, source, tag, comm, status);
    gdte_ipo_block_flush();
    if (!gdte_ipo_node_on()) return IPO_NEXT(Probe)(source, tag, comm, status);
    MPI_Status st;
    int rc, flag = 0;
    while ((rc = IPO_NEXT(Iprobe)(source, tag, comm, &flag, &st)) == MPI_SUCCESS && !flag) gdte_ipo_node_progress();
    if (rc == MPI_SUCCESS) gdte_ipo_node_probe_fix(comm, &st);
    gdte_ipo_status_out(status, &st);
    return rc;
}

GDTE_IPO_EXPORT int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status)
{
    IPO_OFF_RETURN(Iprobe, source, tag, comm, flag, status);
    gdte_ipo_pending_flush();
    if (!gdte_ipo_node_on()) return IPO_NEXT(Iprobe)(source, tag, comm, flag, status);
    MPI_Status st;
    int rc = IPO_NEXT(Iprobe)(source, tag, comm, flag, &st);
    if (rc == MPI_SUCCESS && *flag) gdte_ipo_node_probe_fix(comm, &st);
    gdte_ipo_status_out(status, &st);
    return rc;
}

GDTE_IPO_EXPORT int MPI_Cancel(MPI_Request *req)
{
    IPO_OFF_RETURN(Cancel, req);
    return gdte_ipo_cancel(req);
}

/* ---- persistent requests ---- */
GDTE_IPO_EXPORT int MPI_Send_init(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm,
                                  MPI_Request *req)
{
    IPO_OFF_RETURN(Send_init, buf, count, dt, dest, tag, comm, req);
    gdte_ipo_pending_flush();
    return req_result(gdte_ipo_send_init(GDTE_IPO_STD, buf, count, dt, dest, tag, comm, req), req);
}

GDTE_IPO_EXPORT int MPI_Ssend_init(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm,
                                   MPI_Request *req)
{
    IPO_OFF_RETURN(Ssend_init, buf, count, dt, dest, tag, comm, req);
    gdte_ipo_pending_flush();
    return req_result(gdte_ipo_send_init(GDTE_IPO_SYNC, buf, count, dt, dest, tag, comm, req), req);
}

GDTE_IPO_EXPORT int MPI_Bsend_init(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm,
                                   MPI_Request *req)
{
    IPO_OFF_RETURN(Bsend_init, buf, count, dt, dest, tag, comm, req);
    gdte_ipo_pending_flush();
    return req_result(gdte_ipo_send_init(GDTE_IPO_BUFFERED, buf, count, dt, dest, tag, comm, req), req);
}

GDTE_IPO_EXPORT int MPI_Rsend_init(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm,
                                   MPI_Request *req)
{
    IPO_OFF_RETURN(Rsend_init, buf, count, dt, dest, tag, comm, req);
    gdte_ipo_pending_flush();
    return req_result(gdte_ipo_send_init(GDTE_IPO_READY, buf, count, dt, dest, tag, comm, req), req);
}

GDTE_IPO_EXPORT int MPI_Recv_init(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
                                  MPI_Request *req)
{
    IPO_OFF_RETURN(Recv_init, buf, count, dt, source, tag, comm, req);
    gdte_ipo_pending_flush();
    return req_result(gdte_ipo_recv_init(buf, count, dt, source, tag, comm, req), req);
}

GDTE_IPO_EXPORT int MPI_Start(MPI_Request *req)
{
    IPO_OFF_RETURN(Start, req);
    gdte_ipo_pending_flush();
    return gdte_ipo_start(req);
}

GDTE_IPO_EXPORT int MPI_Startall(int n, MPI_Request reqs[])
{
    IPO_OFF_RETURN(Startall, n, reqs);
    gdte_ipo_pending_flush();
    return gdte_ipo_startall(n, reqs);
}

GDTE_IPO_EXPORT int MPI_Request_free(MPI_Request *req)
{
    IPO_OFF_RETURN(Request_free, req);
    gdte_ipo_pending_flush();
    return gdte_ipo_request_free(req);
}

GDTE_IPO_EXPORT int MPI_Request_get_status(MPI_Request req, int *flag, MPI_Status *status)
{
    IPO_OFF_RETURN(Request_get_status, req, flag, status);
    gdte_ipo_pending_flush();
    return gdte_ipo_request_get_status(req, flag, status);
}

/* ---- completion ---- */
GDTE_IPO_EXPORT int MPI_Wait(MPI_Request *req, MPI_Status *status)
{
    IPO_OFF_RETURN(Wait, req, status);
    gdte_ipo_pending_flush();
    return gdte_ipo_wait(req, status);
}

GDTE_IPO_EXPORT int MPI_Test(MPI_Request *req, int *flag, MPI_Status *status)
{
    IPO_OFF_RETURN(Test, req, flag, status);
    gdte_ipo_pending_flush();
    return gdte_ipo_test(req, flag, status);
}

GDTE_IPO_EXPORT int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status statuses[])
{
    IPO_OFF_RETURN(Waitall, n, reqs, statuses);
    gdte_ipo_pending_flush();
    return gdte_ipo_waitall(n, reqs, statuses);
}

GDTE_IPO_EXPORT int MPI_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status statuses[])
{
    IPO_OFF_RETURN(Testall, n, reqs, flag, statuses);
    gdte_ipo_pending_flush();
    return gdte_ipo_testall(n, reqs, flag, statuses);
}

GDTE_IPO_EXPORT int MPI_Waitany(int n, MPI_Request reqs[], int *index, MPI_Status *status)
{
    IPO_OFF_RETURN(Waitany, n, reqs, index, status);
    gdte_ipo_pending_flush();
    return gdte_ipo_waitany(n, reqs, index, status);
}

GDTE_IPO_EXPORT int MPI_Testany(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *status)
{
    IPO_OFF_RETURN(Testany, n, reqs, index, flag, status);
    gdte_ipo_pending_flush();
    return gdte_ipo_testany(n, reqs, index, flag, status);
}

GDTE_IPO_EXPORT int MPI_Waitsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[])
{
    IPO_OFF_RETURN(Waitsome, n, reqs, outcount, indices, statuses);
    gdte_ipo_pending_flush();
    return gdte_ipo_waitsome(n, reqs, outcount, indices, statuses);
}

GDTE_IPO_EXPORT int MPI_Testsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[])
{
    IPO_OFF_RETURN(Testsome, n, reqs, outcount, indices, statuses);
    gdte_ipo_pending_flush();
    return gdte_ipo_testsome(n, reqs, outcount, indices, statuses);
}

/* ---- pack / unpack ---- */
GDTE_IPO_EXPORT int MPI_Pack(const void *inbuf, int incount, MPI_Datatype dt, void *outbuf, int outsize,
                             int *position, MPI_Comm comm)
{
    IPO_OFF_RETURN(Pack, inbuf, incount, dt, outbuf, outsize, position, comm);
    return gdte_ipo_pack(inbuf, incount, dt, outbuf, outsize, position, comm);
}

GDTE_IPO_EXPORT int MPI_Unpack(const void *inbuf, int insize, int *position, void *outbuf, int outcount,
                               MPI_Datatype dt, MPI_Comm comm)
{
    IPO_OFF_RETURN(Unpack, inbuf, insize, position, outbuf, outcount, dt, comm);
    return gdte_ipo_unpack(inbuf, insize, position, outbuf, outcount, dt, comm);
}

GDTE_IPO_EXPORT int MPI_Pack_external(const char datarep[], const void *inbuf, int incount, MPI_Datatype dt,
                                      void *outbuf, MPI_Aint outsize, MPI_Aint *position)
{
    IPO_OFF_RETURN(Pack_external, datarep, inbuf, incount, dt, outbuf, outsize, position);
    return gdte_ipo_pack_external(datarep, inbuf, incount, dt, outbuf, outsize, position);
}

GDTE_IPO_EXPORT int MPI_Unpack_external(const char datarep[], const void *inbuf, MPI_Aint insize, MPI_Aint *position,
                                        void *outbuf, int outcount, MPI_Datatype dt)
{
    IPO_OFF_RETURN(Unpack_external, datarep, inbuf, insize, position, outbuf, outcount, dt);
    return gdte_ipo_unpack_external(datarep, inbuf, insize, position, outbuf, outcount, dt);
}

/* ---- the buffer of buffered sends ---- */
GDTE_IPO_EXPORT int MPI_Buffer_attach(void *buffer, int size)
{
    IPO_OFF_RETURN(Buffer_attach, buffer, size);
    gdte_ipo_pending_flush();
    return gdte_ipo_buffer_attach(buffer, size);
}

GDTE_IPO_EXPORT int MPI_Buffer_detach(void *buffer_addr, int *size)
{
    IPO_OFF_RETURN(Buffer_detach, buffer_addr, size);
    gdte_ipo_block_flush(); /* it waits for the buffered messages to leave */
    return gdte_ipo_buffer_detach(buffer_addr, size);
}

/* ---- datatypes ---- */
/* MPI_Type_commit is not intercepted: a type is imported into gdte at its first use with
 * device memory (gdte_ipo_type), so programs that never use one pay nothing for it. */
GDTE_IPO_EXPORT int MPI_Type_free(MPI_Datatype *dt)
{
    IPO_OFF_RETURN(Type_free, dt);
    gdte_ipo_pending_flush();
    return gdte_ipo_type_free(dt);
}

/* ---- communicators: each new one gets its shadow (the node path, interpose_node.c) ----
 * Collective calls: every member makes the shadow alike. */
#define NODE_NEW(call, newcomm)                                             \
    do {                                                                    \
        if (gdte_ipo_on()) gdte_ipo_block_flush();                          \
        int rc_ = (call);                                                   \
        if (rc_ == MPI_SUCCESS && gdte_ipo_on() && gdte_ipo_node_on())      \
            gdte_ipo_node_comm_new(*(newcomm));                            \
        return rc_;                                                         \
    } while (0)

GDTE_IPO_EXPORT int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm) { NODE_NEW(IPO_NEXT(Comm_dup)(comm, newcomm), newcomm); }
GDTE_IPO_EXPORT int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm)
{
    NODE_NEW(IPO_NEXT(Comm_dup_with_info)(comm, info, newcomm), newcomm);
}
GDTE_IPO_EXPORT int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm)
{
    NODE_NEW(IPO_NEXT(Comm_split)(comm, color, key, newcomm), newcomm);
}
GDTE_IPO_EXPORT int MPI_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm *newcomm)
{
    NODE_NEW(IPO_NEXT(Comm_split_type)(comm, type, key, info, newcomm), newcomm);
}
GDTE_IPO_EXPORT int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm)
{
    NODE_NEW(IPO_NEXT(Comm_create)(comm, group, newcomm), newcomm);
}
GDTE_IPO_EXPORT int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm *newcomm)
{
    NODE_NEW(IPO_NEXT(Comm_create_group)(comm, group, tag, newcomm), newcomm);
}
GDTE_IPO_EXPORT int MPI_Cart_create(MPI_Comm comm, int ndims, const int dims[], const int periods[], int reorder,
                                    MPI_Comm *newcomm)
{
    NODE_NEW(IPO_NEXT(Cart_create)(comm, ndims, dims, periods, reorder, newcomm), newcomm);
}
GDTE_IPO_EXPORT int MPI_Cart_sub(MPI_Comm comm, const int remain[], MPI_Comm *newcomm)
{
    NODE_NEW(IPO_NEXT(Cart_sub)(comm, remain, newcomm), newcomm);
}
GDTE_IPO_EXPORT int MPI_Graph_create(MPI_Comm comm, int nnodes, const int index[], const int edges[], int reorder,
                                     MPI_Comm *newcomm)
{
    NODE_NEW(IPO_NEXT(Graph_create)(comm, nnodes, index, edges, reorder, newcomm), newcomm);
}
/* Open MPI 4.1's MPI_Dist_graph_create (topo/base's distribute, which topo/treematch runs on the
 * *old* communicator before it allocates the new one's CID) receives the edges from
 * MPI_ANY_SOURCE with the fixed tags -50 and -51, which lie in libnbc's range of tags for
 * nonblocking collectives on that communicator (-27, -28, ... one per operation). When the
 * communicator has seen 23 or 24 nonblocking collectives (communicator creations count: each
 * CID allocation is two or more MPI_Iallreduce), the CID allocation of the new communicator
 * uses tag -50 or -51 too: a process still receiving edges takes a faster one's allreduce
 * message, and every process then waits forever in ompi_comm_nextcid. The plain MPI hangs the
 * same way (23 or 24 MPI_Ibarrier on MPI_COMM_WORLD before the call); the interposer's own
 * communicators (the node communicator, its finalize and shadow duplicates of MPI_COMM_WORLD)
 * merely move programs onto that count. So the graph is made from a fresh copy of `comm`
 * (MPI_Comm_create with its whole group: no attribute callbacks run), whose libnbc tags start
 * over; the result is the same communicator (same group, ranks, info, error handler). */
GDTE_IPO_EXPORT int MPI_Dist_graph_create(MPI_Comm comm, int n, const int sources[], const int degrees[],
                                          const int destinations[], const int weights[], MPI_Info info, int reorder,
                                          MPI_Comm *newcomm)
{
    int inter = 1;
    MPI_Group g = MPI_GROUP_NULL;
    MPI_Comm fresh = MPI_COMM_NULL;
    if (!gdte_ipo_on() || comm == MPI_COMM_NULL || PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter ||
        PMPI_Comm_group(comm, &g) != MPI_SUCCESS)
        return IPO_NEXT(Dist_graph_create)(comm, n, sources, degrees, destinations, weights, info, reorder, newcomm);
    int rc = PMPI_Comm_create(comm, g, &fresh);
    PMPI_Group_free(&g);
    if (rc != MPI_SUCCESS || fresh == MPI_COMM_NULL)
        NODE_NEW(IPO_NEXT(Dist_graph_create)(comm, n, sources, degrees, destinations, weights, info, reorder, newcomm),
                 newcomm);
    /* Errors are reported on `comm`, as the application called it; the new communicator gets
     * `comm`'s handler, as MPI_Dist_graph_create gives it. */
    MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
    PMPI_Comm_get_errhandler(comm, &eh);
    PMPI_Comm_set_errhandler(fresh, MPI_ERRORS_RETURN);
    rc = IPO_NEXT(Dist_graph_create)(fresh, n, sources, degrees, destinations, weights, info, reorder, newcomm);
    PMPI_Comm_free(&fresh);
    if (rc == MPI_SUCCESS && *newcomm != MPI_COMM_NULL && eh != MPI_ERRHANDLER_NULL)
        PMPI_Comm_set_errhandler(*newcomm, eh);
    if (eh != MPI_ERRHANDLER_NULL) PMPI_Errhandler_free(&eh);
    if (rc != MPI_SUCCESS) {
        PMPI_Comm_call_errhandler(comm, rc);
        return rc;
    }
    NODE_NEW(rc, newcomm);
}
GDTE_IPO_EXPORT int MPI_Dist_graph_create_adjacent(MPI_Comm comm, int indegree, const int sources[],
                                                   const int sourceweights[], int outdegree, const int destinations[],
                                                   const int destweights[], MPI_Info info, int reorder,
                                                   MPI_Comm *newcomm)
{
    NODE_NEW(IPO_NEXT(Dist_graph_create_adjacent)(comm, indegree, sources, sourceweights, outdegree, destinations,
                                             destweights, info, reorder, newcomm),
             newcomm);
}
GDTE_IPO_EXPORT int MPI_Intercomm_create(MPI_Comm local, int local_leader, MPI_Comm peer, int remote_leader, int tag,
                                         MPI_Comm *newcomm)
{
    NODE_NEW(IPO_NEXT(Intercomm_create)(local, local_leader, peer, remote_leader, tag, newcomm), newcomm);
}
GDTE_IPO_EXPORT int MPI_Intercomm_merge(MPI_Comm inter, int high, MPI_Comm *newcomm)
{
    NODE_NEW(IPO_NEXT(Intercomm_merge)(inter, high, newcomm), newcomm);
}
