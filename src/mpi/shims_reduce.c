/*
 * The reduction calls libgdte_mpi.so defines (interpose_reduce.h): one thin shim each. Off
 * (before MPI_Init, after MPI_Finalize, GDTE_DISABLE=1), straight to the next definition in
 * the chain. On, deferred GPU work is completed first (the MPI may read what it produced);
 * then, only when a device buffer is possible and the MPI cannot read one, the call goes
 * through gdte's mirrors; otherwise (no GPU and no fake device, or a GPU-aware MPI) to the MPI
 * as it is. MPI_Reduce_local on device buffers runs gdte's reduction kernels in both cases.
 */
#include "interpose_reduce.h"

#define RED_PASS(name, ...)                                                      \
    do {                                                                         \
        if (!gdte_ipo_on()) return RED_NEXT(name)(__VA_ARGS__);                  \
        gdte_ipo_pending_flush();                                                \
        if (!gdte_red_checking()) return RED_NEXT(name)(__VA_ARGS__);            \
    } while (0)

GDTE_IPO_EXPORT int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                               MPI_Comm comm)
{
    RED_PASS(Reduce, sendbuf, recvbuf, count, datatype, op, root, comm);
    return gdte_red_reduce(sendbuf, recvbuf, count, datatype, op, root, comm, NULL);
}

GDTE_IPO_EXPORT int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                                int root, MPI_Comm comm, MPI_Request *request)
{
    RED_PASS(Ireduce, sendbuf, recvbuf, count, datatype, op, root, comm, request);
    return gdte_red_reduce(sendbuf, recvbuf, count, datatype, op, root, comm, request);
}

GDTE_IPO_EXPORT int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                                  MPI_Comm comm)
{
    RED_PASS(Allreduce, sendbuf, recvbuf, count, datatype, op, comm);
    return gdte_red_allreduce(sendbuf, recvbuf, count, datatype, op, comm, NULL);
}

GDTE_IPO_EXPORT int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                                   MPI_Comm comm, MPI_Request *request)
{
    RED_PASS(Iallreduce, sendbuf, recvbuf, count, datatype, op, comm, request);
    return gdte_red_allreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
}

GDTE_IPO_EXPORT int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype,
                                       MPI_Op op, MPI_Comm comm)
{
    RED_PASS(Reduce_scatter, sendbuf, recvbuf, recvcounts, datatype, op, comm);
    return gdte_red_reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, NULL);
}

GDTE_IPO_EXPORT int MPI_Ireduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
                                        MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request)
{
    RED_PASS(Ireduce_scatter, sendbuf, recvbuf, recvcounts, datatype, op, comm, request);
    return gdte_red_reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, request);
}

GDTE_IPO_EXPORT int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype,
                                             MPI_Op op, MPI_Comm comm)
{
    RED_PASS(Reduce_scatter_block, sendbuf, recvbuf, recvcount, datatype, op, comm);
    return gdte_red_reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, NULL);
}

GDTE_IPO_EXPORT int MPI_Ireduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype,
                                              MPI_Op op, MPI_Comm comm, MPI_Request *request)
{
    RED_PASS(Ireduce_scatter_block, sendbuf, recvbuf, recvcount, datatype, op, comm, request);
    return gdte_red_reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, request);
}

GDTE_IPO_EXPORT int MPI_Scan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                             MPI_Comm comm)
{
    RED_PASS(Scan, sendbuf, recvbuf, count, datatype, op, comm);
    return gdte_red_scan(0, sendbuf, recvbuf, count, datatype, op, comm, NULL);
}

GDTE_IPO_EXPORT int MPI_Iscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                              MPI_Comm comm, MPI_Request *request)
{
    RED_PASS(Iscan, sendbuf, recvbuf, count, datatype, op, comm, request);
    return gdte_red_scan(0, sendbuf, recvbuf, count, datatype, op, comm, request);
}

GDTE_IPO_EXPORT int MPI_Exscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                               MPI_Comm comm)
{
    RED_PASS(Exscan, sendbuf, recvbuf, count, datatype, op, comm);
    return gdte_red_scan(1, sendbuf, recvbuf, count, datatype, op, comm, NULL);
}

GDTE_IPO_EXPORT int MPI_Iexscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                                MPI_Comm comm, MPI_Request *request)
{
    RED_PASS(Iexscan, sendbuf, recvbuf, count, datatype, op, comm, request);
    return gdte_red_scan(1, sendbuf, recvbuf, count, datatype, op, comm, request);
}

GDTE_IPO_EXPORT int MPI_Reduce_local(const void *inbuf, void *inoutbuf, int count, MPI_Datatype datatype, MPI_Op op)
{
    if (!gdte_ipo_on()) return RED_NEXT(Reduce_local)(inbuf, inoutbuf, count, datatype, op);
    gdte_ipo_pending_flush();
    return gdte_red_reduce_local(inbuf, inoutbuf, count, datatype, op);
}
