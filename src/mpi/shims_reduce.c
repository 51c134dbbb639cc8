/*
 * The reduction calls libgdte_mpi.so defines (interpose_reduce.h): one thin shim each. Off
 * (before MPI_Init, after MPI_Finalize, GDTE_DISABLE=1), straight to the next definition in
 * the chain. On, deferred GPU work is completed first (the MPI may read what it produced);
 * then, only when a device buffer is possible and the MPI cannot read one, the call goes
 * through gdte's mirrors; otherwise (no GPU and no fake device, or a GPU-aware MPI) to the MPI
 * as it is. MPI_Reduce_local on device buffers runs gdte's reduction kernels in both cases.
 * The persistent forms (Open MPI's MPIX_<name>_init, MPI-4's MPI_<name>_init) are here where
 * the MPI's headers declare them.
 */
#include "interpose_reduce.h"

#define BLOCKING ((gdte_red_how_t){.req = NULL})
#define NONBLOCKING(r) ((gdte_red_how_t){.req = (r)})

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
    return gdte_red_reduce(sendbuf, recvbuf, count, datatype, op, root, comm, BLOCKING);
}

GDTE_IPO_EXPORT int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                                int root, MPI_Comm comm, MPI_Request *request)
{
    RED_PASS(Ireduce, sendbuf, recvbuf, count, datatype, op, root, comm, request);
    return gdte_red_reduce(sendbuf, recvbuf, count, datatype, op, root, comm, NONBLOCKING(request));
}

GDTE_IPO_EXPORT int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                                  MPI_Comm comm)
{
    RED_PASS(Allreduce, sendbuf, recvbuf, count, datatype, op, comm);
    return gdte_red_allreduce(sendbuf, recvbuf, count, datatype, op, comm, BLOCKING);
}

GDTE_IPO_EXPORT int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                                   MPI_Comm comm, MPI_Request *request)
{
    RED_PASS(Iallreduce, sendbuf, recvbuf, count, datatype, op, comm, request);
    return gdte_red_allreduce(sendbuf, recvbuf, count, datatype, op, comm, NONBLOCKING(request));
}

GDTE_IPO_EXPORT int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype,
                                       MPI_Op op, MPI_Comm comm)
{
    RED_PASS(Reduce_scatter, sendbuf, recvbuf, recvcounts, datatype, op, comm);
    return gdte_red_reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, BLOCKING);
}

GDTE_IPO_EXPORT int MPI_Ireduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
                                        MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request)
{
    RED_PASS(Ireduce_scatter, sendbuf, recvbuf, recvcounts, datatype, op, comm, request);
    return gdte_red_reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, NONBLOCKING(request));
}

GDTE_IPO_EXPORT int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype,
                                             MPI_Op op, MPI_Comm comm)
{
    RED_PASS(Reduce_scatter_block, sendbuf, recvbuf, recvcount, datatype, op, comm);
    return gdte_red_reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, BLOCKING);
}

GDTE_IPO_EXPORT int MPI_Ireduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype,
                                              MPI_Op op, MPI_Comm comm, MPI_Request *request)
{
    RED_PASS(Ireduce_scatter_block, sendbuf, recvbuf, recvcount, datatype, op, comm, request);
    return gdte_red_reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, NONBLOCKING(request));
}

GDTE_IPO_EXPORT int MPI_Scan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                             MPI_Comm comm)
{
    RED_PASS(Scan, sendbuf, recvbuf, count, datatype, op, comm);
    return gdte_red_scan(0, sendbuf, recvbuf, count, datatype, op, comm, BLOCKING);
}

GDTE_IPO_EXPORT int MPI_Iscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                              MPI_Comm comm, MPI_Request *request)
{
    RED_PASS(Iscan, sendbuf, recvbuf, count, datatype, op, comm, request);
    return gdte_red_scan(0, sendbuf, recvbuf, count, datatype, op, comm, NONBLOCKING(request));
}

GDTE_IPO_EXPORT int MPI_Exscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                               MPI_Comm comm)
{
    RED_PASS(Exscan, sendbuf, recvbuf, count, datatype, op, comm);
    return gdte_red_scan(1, sendbuf, recvbuf, count, datatype, op, comm, BLOCKING);
}

GDTE_IPO_EXPORT int MPI_Iexscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                                MPI_Comm comm, MPI_Request *request)
{
    RED_PASS(Iexscan, sendbuf, recvbuf, count, datatype, op, comm, request);
    return gdte_red_scan(1, sendbuf, recvbuf, count, datatype, op, comm, NONBLOCKING(request));
}

GDTE_IPO_EXPORT int MPI_Reduce_local(const void *inbuf, void *inoutbuf, int count, MPI_Datatype datatype, MPI_Op op)
{
    if (!gdte_ipo_on()) return RED_NEXT(Reduce_local)(inbuf, inoutbuf, count, datatype, op);
    gdte_ipo_pending_flush();
    return gdte_red_reduce_local(inbuf, inoutbuf, count, datatype, op);
}

/* ---- persistent forms: N(name) is the naming's function name, `kind` the naming ---- */
#define RED_PASS_INIT(N, name, ...)                                                                      \
    do {                                                                                                 \
        if (!gdte_ipo_on() || (gdte_ipo_pending_flush(), !gdte_red_checking()))                          \
            return gdte_red_init_next_g[kind].name ? gdte_red_init_next_g[kind].name(__VA_ARGS__) : MPI_ERR_INTERN; \
    } while (0)
#define PERSISTENT ((gdte_red_how_t){.req = request, .init = kind, .info = info})
#define RED_INITS(N, K)                                                                                         \
    GDTE_IPO_EXPORT int N(Reduce)(RF_REDUCE_P, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request)    \
    {                                                                                                           \
        const gdte_pinit_t kind = K;                                                                            \
        RED_PASS_INIT(N, Reduce, sendbuf, recvbuf, count, datatype, op, root, comm, info, request);              \
        return gdte_red_reduce(sendbuf, recvbuf, count, datatype, op, root, comm, PERSISTENT);                  \
    }                                                                                                           \
    GDTE_IPO_EXPORT int N(Allreduce)(RF_REDUCE_P, MPI_Comm comm, MPI_Info info, MPI_Request *request)           \
    {                                                                                                           \
        const gdte_pinit_t kind = K;                                                                            \
        RED_PASS_INIT(N, Allreduce, sendbuf, recvbuf, count, datatype, op, comm, info, request);                 \
        return gdte_red_allreduce(sendbuf, recvbuf, count, datatype, op, comm, PERSISTENT);                     \
    }                                                                                                           \
    GDTE_IPO_EXPORT int N(Reduce_scatter)(RF_RSCAT_P, MPI_Comm comm, MPI_Info info, MPI_Request *request)       \
    {                                                                                                           \
        const gdte_pinit_t kind = K;                                                                            \
        RED_PASS_INIT(N, Reduce_scatter, sendbuf, recvbuf, recvcounts, datatype, op, comm, info, request);       \
        return gdte_red_reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, PERSISTENT);           \
    }                                                                                                           \
    GDTE_IPO_EXPORT int N(Reduce_scatter_block)(RF_RSCATB_P, MPI_Comm comm, MPI_Info info, MPI_Request *request) \
    {                                                                                                           \
        const gdte_pinit_t kind = K;                                                                            \
        RED_PASS_INIT(N, Reduce_scatter_block, sendbuf, recvbuf, recvcount, datatype, op, comm, info, request);  \
        return gdte_red_reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, PERSISTENT);      \
    }                                                                                                           \
    GDTE_IPO_EXPORT int N(Scan)(RF_REDUCE_P, MPI_Comm comm, MPI_Info info, MPI_Request *request)                \
    {                                                                                                           \
        const gdte_pinit_t kind = K;                                                                            \
        RED_PASS_INIT(N, Scan, sendbuf, recvbuf, count, datatype, op, comm, info, request);                      \
        return gdte_red_scan(0, sendbuf, recvbuf, count, datatype, op, comm, PERSISTENT);                       \
    }                                                                                                           \
    GDTE_IPO_EXPORT int N(Exscan)(RF_REDUCE_P, MPI_Comm comm, MPI_Info info, MPI_Request *request)              \
    {                                                                                                           \
        const gdte_pinit_t kind = K;                                                                            \
        RED_PASS_INIT(N, Exscan, sendbuf, recvbuf, count, datatype, op, comm, info, request);                    \
        return gdte_red_scan(1, sendbuf, recvbuf, count, datatype, op, comm, PERSISTENT);                       \
    }

#ifdef GDTE_HAVE_MPIX_PCOLL
#define MPIX_NAME(n) MPIX_##n##_init
RED_INITS(MPIX_NAME, GDTE_PINIT_MPIX)
#endif
#ifdef GDTE_HAVE_MPI4_PCOLL
#define MPI4_NAME(n) MPI_##n##_init
RED_INITS(MPI4_NAME, GDTE_PINIT_MPI4)
#endif
