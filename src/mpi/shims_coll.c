/*
 * The collectives libgdte_mpi.so carries on device buffers (interpose_coll.c): one thin shim
 * each, blocking, nonblocking and persistent (Open MPI's MPIX_<name>_init and MPI-4's
 * MPI_<name>_init, where the MPI's headers declare them). Off (before MPI_Init, after MPI_Finalize, GDTE_DISABLE=1) a
 * shim hands its call to the next definition untouched; on, it first completes GPU work gdte
 * deferred (the MPI may read what it produced), then describes its arguments for
 * gdte_ipo_coll. The parameter lists are refuse.h's shapes, which follow this mpi.h.
 */
#include "interpose_coll.h"
#include "refuse.h"

#define SIDE_U(b, n, t) {.buf = (b), .count = (n), .type = (t)}
#define SIDE_V(b, c, d, t) {.buf = (b), .counts = (c), .displs = (d), .type = (t)}
#define SIDE_W(b, c, d, t) {.buf = (b), .counts = (c), .displs = (d), .types = (t)}
#define SIDE_WA(b, c, d, t) {.buf = (b), .counts = (c), .adispls = (d), .types = (t)}

/* Off: the next definition; on: gdte_ipo_coll on the arguments `a`. */
#define COLL_RUN(a)                                 \
    do {                                            \
        if (!gdte_ipo_on()) return gdte_ipo_coll_next(&(a)); \
        gdte_ipo_pending_flush();                   \
        return gdte_ipo_coll(&(a));                 \
    } while (0)

/* Blocking (req NULL) and nonblocking shims of one collective from one argument description. */
#define COLL_PAIR(name, iname, params, ...)                                                \
    GDTE_IPO_EXPORT int name(params, MPI_Comm comm)                                      \
    {                                                                                    \
        gdte_coll_args_t a = {__VA_ARGS__, .comm = comm, .req = NULL};                   \
        COLL_RUN(a);                                                                     \
    }                                                                                    \
    GDTE_IPO_EXPORT int iname(params, MPI_Comm comm, MPI_Request *request)               \
    {                                                                                    \
        gdte_coll_args_t a = {__VA_ARGS__, .comm = comm, .req = request};                \
        COLL_RUN(a);                                                                     \
    }
#define COLL_PAIR_ROOT(name, iname, params, ...)                                              \
    GDTE_IPO_EXPORT int name(params, int root, MPI_Comm comm)                               \
    {                                                                                       \
        gdte_coll_args_t a = {__VA_ARGS__, .root = root, .comm = comm, .req = NULL};        \
        COLL_RUN(a);                                                                        \
    }                                                                                       \
    GDTE_IPO_EXPORT int iname(params, int root, MPI_Comm comm, MPI_Request *request)        \
    {                                                                                       \
        gdte_coll_args_t a = {__VA_ARGS__, .root = root, .comm = comm, .req = request};     \
        COLL_RUN(a);                                                                        \
    }
#define P(...) __VA_ARGS__

/* ---- alltoall ---- */
COLL_PAIR(MPI_Alltoall, MPI_Ialltoall, P(RF_GATHER_P), .op = GDTE_COLL_ALLTOALL,
          .s = SIDE_U(sendbuf, sendcount, sendtype), .r = SIDE_U(recvbuf, recvcount, recvtype))
COLL_PAIR(MPI_Alltoallv, MPI_Ialltoallv, P(RF_ALLTOALLV_P), .op = GDTE_COLL_ALLTOALLV,
          .s = SIDE_V(sendbuf, sendcounts, sdispls, sendtype), .r = SIDE_V(recvbuf, recvcounts, rdispls, recvtype))
COLL_PAIR(MPI_Alltoallw, MPI_Ialltoallw, P(RF_ALLTOALLW_P(int)), .op = GDTE_COLL_ALLTOALLW,
          .s = SIDE_W(sendbuf, sendcounts, sdispls, sendtypes), .r = SIDE_W(recvbuf, recvcounts, rdispls, recvtypes))

/* ---- neighborhood ---- */
COLL_PAIR(MPI_Neighbor_alltoall, MPI_Ineighbor_alltoall, P(RF_GATHER_P), .op = GDTE_COLL_NALLTOALL,
          .s = SIDE_U(sendbuf, sendcount, sendtype), .r = SIDE_U(recvbuf, recvcount, recvtype))
COLL_PAIR(MPI_Neighbor_alltoallv, MPI_Ineighbor_alltoallv, P(RF_ALLTOALLV_P), .op = GDTE_COLL_NALLTOALLV,
          .s = SIDE_V(sendbuf, sendcounts, sdispls, sendtype), .r = SIDE_V(recvbuf, recvcounts, rdispls, recvtype))
COLL_PAIR(MPI_Neighbor_alltoallw, MPI_Ineighbor_alltoallw, P(RF_ALLTOALLW_P(MPI_Aint)), .op = GDTE_COLL_NALLTOALLW,
          .s = SIDE_WA(sendbuf, sendcounts, sdispls, sendtypes), .r = SIDE_WA(recvbuf, recvcounts, rdispls, recvtypes))
COLL_PAIR(MPI_Neighbor_allgather, MPI_Ineighbor_allgather, P(RF_GATHER_P), .op = GDTE_COLL_NALLGATHER,
          .s = SIDE_U(sendbuf, sendcount, sendtype), .r = SIDE_U(recvbuf, recvcount, recvtype))
COLL_PAIR(MPI_Neighbor_allgatherv, MPI_Ineighbor_allgatherv, P(RF_GATHERV_P), .op = GDTE_COLL_NALLGATHERV,
          .s = SIDE_U(sendbuf, sendcount, sendtype), .r = SIDE_V(recvbuf, recvcounts, displs, recvtype))

/* ---- gather family ---- */
COLL_PAIR(MPI_Allgather, MPI_Iallgather, P(RF_GATHER_P), .op = GDTE_COLL_ALLGATHER,
          .s = SIDE_U(sendbuf, sendcount, sendtype), .r = SIDE_U(recvbuf, recvcount, recvtype))
COLL_PAIR(MPI_Allgatherv, MPI_Iallgatherv, P(RF_GATHERV_P), .op = GDTE_COLL_ALLGATHERV,
          .s = SIDE_U(sendbuf, sendcount, sendtype), .r = SIDE_V(recvbuf, recvcounts, displs, recvtype))
COLL_PAIR_ROOT(MPI_Gather, MPI_Igather, P(RF_GATHER_P), .op = GDTE_COLL_GATHER,
               .s = SIDE_U(sendbuf, sendcount, sendtype), .r = SIDE_U(recvbuf, recvcount, recvtype))
COLL_PAIR_ROOT(MPI_Gatherv, MPI_Igatherv, P(RF_GATHERV_P), .op = GDTE_COLL_GATHERV,
               .s = SIDE_U(sendbuf, sendcount, sendtype), .r = SIDE_V(recvbuf, recvcounts, displs, recvtype))
COLL_PAIR_ROOT(MPI_Scatter, MPI_Iscatter, P(RF_GATHER_P), .op = GDTE_COLL_SCATTER,
               .s = SIDE_U(sendbuf, sendcount, sendtype), .r = SIDE_U(recvbuf, recvcount, recvtype))
COLL_PAIR_ROOT(MPI_Scatterv, MPI_Iscatterv, P(RF_SCATTERV_P), .op = GDTE_COLL_SCATTERV,
               .s = SIDE_V(sendbuf, sendcounts, displs, sendtype), .r = SIDE_U(recvbuf, recvcount, recvtype))

/* ---- broadcast: the one buffer on both sides (the root's is its send side) ---- */
GDTE_IPO_EXPORT int MPI_Bcast(RF_BCAST_P, MPI_Comm comm)
{
    gdte_coll_args_t a = {.op = GDTE_COLL_BCAST, .s = SIDE_U(buffer, count, datatype),
                          .r = SIDE_U(buffer, count, datatype), .root = root, .comm = comm, .req = NULL};
    COLL_RUN(a);
}

GDTE_IPO_EXPORT int MPI_Ibcast(RF_BCAST_P, MPI_Comm comm, MPI_Request *request)
{
    gdte_coll_args_t a = {.op = GDTE_COLL_BCAST, .s = SIDE_U(buffer, count, datatype),
                          .r = SIDE_U(buffer, count, datatype), .root = root, .comm = comm, .req = request};
    COLL_RUN(a);
}

/* ---- persistent forms: X(name, init) defines <prefix>name_init for the naming `init` ---- */
#define COLL_INIT(fname, kind, params, ...)                                                               \
    GDTE_IPO_EXPORT int fname(params, MPI_Comm comm, MPI_Info info, MPI_Request *request)                 \
    {                                                                                                     \
        gdte_coll_args_t a = {__VA_ARGS__, .comm = comm, .req = request, .init = kind, .info = info};     \
        COLL_RUN(a);                                                                                      \
    }
#define COLL_INIT_ROOT(fname, kind, params, ...)                                                                \
    GDTE_IPO_EXPORT int fname(params, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request)             \
    {                                                                                                           \
        gdte_coll_args_t a = {__VA_ARGS__, .root = root, .comm = comm, .req = request, .init = kind, .info = info}; \
        COLL_RUN(a);                                                                                            \
    }
#define COLL_INITS(N, kind)                                                                                      \
    COLL_INIT(N(Alltoall), kind, P(RF_GATHER_P), .op = GDTE_COLL_ALLTOALL,                                       \
              .s = SIDE_U(sendbuf, sendcount, sendtype), .r = SIDE_U(recvbuf, recvcount, recvtype))              \
    COLL_INIT(N(Alltoallv), kind, P(RF_ALLTOALLV_P), .op = GDTE_COLL_ALLTOALLV,                                  \
              .s = SIDE_V(sendbuf, sendcounts, sdispls, sendtype), .r = SIDE_V(recvbuf, recvcounts, rdispls, recvtype)) \
    COLL_INIT(N(Alltoallw), kind, P(RF_ALLTOALLW_P(int)), .op = GDTE_COLL_ALLTOALLW,                            \
              .s = SIDE_W(sendbuf, sendcounts, sdispls, sendtypes), .r = SIDE_W(recvbuf, recvcounts, rdispls, recvtypes)) \
    COLL_INIT(N(Neighbor_alltoall), kind, P(RF_GATHER_P), .op = GDTE_COLL_NALLTOALL,                             \
              .s = SIDE_U(sendbuf, sendcount, sendtype), .r = SIDE_U(recvbuf, recvcount, recvtype))              \
    COLL_INIT(N(Neighbor_alltoallv), kind, P(RF_ALLTOALLV_P), .op = GDTE_COLL_NALLTOALLV,                        \
              .s = SIDE_V(sendbuf, sendcounts, sdispls, sendtype), .r = SIDE_V(recvbuf, recvcounts, rdispls, recvtype)) \
    COLL_INIT(N(Neighbor_alltoallw), kind, P(RF_ALLTOALLW_P(MPI_Aint)), .op = GDTE_COLL_NALLTOALLW,              \
              .s = SIDE_WA(sendbuf, sendcounts, sdispls, sendtypes), .r = SIDE_WA(recvbuf, recvcounts, rdispls, recvtypes)) \
    COLL_INIT(N(Neighbor_allgather), kind, P(RF_GATHER_P), .op = GDTE_COLL_NALLGATHER,                           \
              .s = SIDE_U(sendbuf, sendcount, sendtype), .r = SIDE_U(recvbuf, recvcount, recvtype))              \
    COLL_INIT(N(Neighbor_allgatherv), kind, P(RF_GATHERV_P), .op = GDTE_COLL_NALLGATHERV,                        \
              .s = SIDE_U(sendbuf, sendcount, sendtype), .r = SIDE_V(recvbuf, recvcounts, displs, recvtype))     \
    COLL_INIT(N(Allgather), kind, P(RF_GATHER_P), .op = GDTE_COLL_ALLGATHER,                                     \
              .s = SIDE_U(sendbuf, sendcount, sendtype), .r = SIDE_U(recvbuf, recvcount, recvtype))              \
    COLL_INIT(N(Allgatherv), kind, P(RF_GATHERV_P), .op = GDTE_COLL_ALLGATHERV,                                  \
              .s = SIDE_U(sendbuf, sendcount, sendtype), .r = SIDE_V(recvbuf, recvcounts, displs, recvtype))     \
    COLL_INIT_ROOT(N(Gather), kind, P(RF_GATHER_P), .op = GDTE_COLL_GATHER,                                      \
                   .s = SIDE_U(sendbuf, sendcount, sendtype), .r = SIDE_U(recvbuf, recvcount, recvtype))         \
    COLL_INIT_ROOT(N(Gatherv), kind, P(RF_GATHERV_P), .op = GDTE_COLL_GATHERV,                                   \
                   .s = SIDE_U(sendbuf, sendcount, sendtype), .r = SIDE_V(recvbuf, recvcounts, displs, recvtype)) \
    COLL_INIT_ROOT(N(Scatter), kind, P(RF_GATHER_P), .op = GDTE_COLL_SCATTER,                                    \
                   .s = SIDE_U(sendbuf, sendcount, sendtype), .r = SIDE_U(recvbuf, recvcount, recvtype))         \
    COLL_INIT_ROOT(N(Scatterv), kind, P(RF_SCATTERV_P), .op = GDTE_COLL_SCATTERV,                                \
                   .s = SIDE_V(sendbuf, sendcounts, displs, sendtype), .r = SIDE_U(recvbuf, recvcount, recvtype)) \
    GDTE_IPO_EXPORT int N(Bcast)(RF_BCAST_P, MPI_Comm comm, MPI_Info info, MPI_Request *request)                \
    {                                                                                                            \
        gdte_coll_args_t a = {.op = GDTE_COLL_BCAST, .s = SIDE_U(buffer, count, datatype),                        \
                              .r = SIDE_U(buffer, count, datatype), .root = root, .comm = comm, .req = request,   \
                              .init = kind, .info = info};                                                        \
        COLL_RUN(a);                                                                                             \
    }

#ifdef GDTE_HAVE_MPIX_PCOLL
#define MPIX_NAME(n) MPIX_##n##_init
COLL_INITS(MPIX_NAME, GDTE_PINIT_MPIX)
#endif
#ifdef GDTE_HAVE_MPI4_PCOLL
#define MPI4_NAME(n) MPI_##n##_init
COLL_INITS(MPI4_NAME, GDTE_PINIT_MPI4)
#endif
