/*
 * refuse.h: the MPI calls that take a buffer and that gdte does not carry, in one table.
 *
 * An MPI that cannot read device memory would read such a buffer from the CPU and crash. For
 * each call below, libgdte_mpi.so defines a shim (shims_refuse.c) that looks at the memory
 * kind of the buffers the call will really touch and, when one is device memory and the MPI
 * underneath is not GPU-aware (gdte_ipo_gpu_aware() == 0), returns MPI_ERR_BUFFER through
 * the error handler of the call's communicator, window or file, with a log line naming the
 * call and the buffer. Otherwise (a GPU-aware MPI, host buffers) the call goes to the MPI
 * untouched. The same table gives gdte_info its coverage facts and the README its Coverage
 * rows (kept in step by the readme_coverage test).
 *
 * One entry:
 *     X(family, name, (parameters), (arguments), handle kind, handle, probes)
 *  - family: a GDTE_REFUSE_FAMILIES id;
 *  - name: the full C name; PMPI_<...> (P##name) is the fallback when no next definition
 *    exists;
 *  - parameters and arguments: the C binding as this mpi.h declares it;
 *  - handle kind: COMM (the communicator's handler), WIN, FH (a file's), or WORLD for calls
 *    with no handle (MPI_COMM_WORLD's handler); handle: the parameter that holds it;
 *  - probes: one RF_* per buffer, each RF_x(cond, buffer, ...), looked at only when `cond`
 *    (an expression over the parameters) says the MPI will touch that buffer:
 *      RF_BYTES(cond, buf, nbytes)          nbytes bytes from buf.
 *    Zero counts and MPI_DATATYPE_NULL are skipped by the probes.
 *
 * Every collective with a buffer is carried now, blocking, nonblocking and persistent (Open MPI's
 * MPIX_*_init, MPI-4's MPI_*_init where mpi.h declares them): interpose_coll.c, interpose_reduce.c.
 * Their parameter shapes stay here, shared by their shims.
 *
 * This header needs no gdte internals: it may be included wherever <mpi.h> is found (gdte_info
 * expands only the family and name columns).
 */
#ifndef GDTE_MPI_REFUSE_H
#define GDTE_MPI_REFUSE_H

#include <mpi.h>
#if defined(OPEN_MPI) && OPEN_MPI && defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif
#endif

/* The persistent collectives the MPI declares: Open MPI's MPIX_<name>_init (its pcollreq
 * extension) and MPI-4's MPI_<name>_init. gdte carries them (shims_coll.c, shims_reduce.c). */
#if defined(OMPI_HAVE_MPI_EXT_PCOLLREQ) && OMPI_HAVE_MPI_EXT_PCOLLREQ
#define GDTE_HAVE_MPIX_PCOLL 1
#endif
#if defined(MPI_VERSION) && MPI_VERSION >= 4
#define GDTE_HAVE_MPI4_PCOLL 1
#endif

/* What gdte carries (shims.c, GDTE_IPO_NEXT_LIST; shims_coll.c, interpose_coll.h's GDTE_COLL_LIST;
 * shims_reduce.c, interpose_reduce.h's GDTE_RED_LIST and MPI_Reduce_local; interpose_io.c;
 * interpose_rma.c), in words, for gdte_info and the README. */
#define GDTE_MPI_CARRIED                                                                                  \
    "point-to-point, persistent, completion, pack (external32 too), the buffer of buffered sends, MPI-IO, one-sided " \
    "(device buffers through host mirrors, device windows through host copies), collectives (alltoall, gather, scatter, bcast families), " \
    "neighborhood collectives and reductions (blocking, nonblocking and persistent, the blocking ones GPU to GPU " \
    "within the node, reductions of predefined operations from GDTE_MPI_REDUCE_NODE_MIN bytes)"

/* F(id, key): key names the family in gdte_info's output and in the README's Coverage rows. */
#define GDTE_REFUSE_FAMILIES(F) F(RMA, "dynamic-windows")

/* ---- parameter shapes of the collectives (shims_coll.c, shims_reduce.c, the persistent forms) ---- */
#define RF_GATHER_P                                                                                          \
    const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype
#define RF_GATHERV_P                                                                                              \
    const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int displs[], \
        MPI_Datatype recvtype
#define RF_SCATTERV_P                                                                                             \
    const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype, void *recvbuf, int recvcount, \
        MPI_Datatype recvtype
#define RF_ALLTOALLV_P                                                                                            \
    const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype, void *recvbuf,           \
        const int recvcounts[], const int rdispls[], MPI_Datatype recvtype
#define RF_ALLTOALLW_P(D)                                                                                           \
    const void *sendbuf, const int sendcounts[], const D sdispls[], const MPI_Datatype sendtypes[], void *recvbuf,      \
        const int recvcounts[], const D rdispls[], const MPI_Datatype recvtypes[]
#define RF_REDUCE_P const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op
#define RF_RSCAT_P const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op
#define RF_RSCATB_P const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op
#define RF_BCAST_P void *buffer, int count, MPI_Datatype datatype, int root

/* clang-format off */
#define GDTE_REFUSE_LIST(X) \
    /* ---- one-sided: dynamic windows (interpose_rma.c carries the rest) ---- */ \
    X(RMA, MPI_Win_attach, (MPI_Win win, void *base, MPI_Aint size), (win, base, size), WIN, win, RF_BYTES(1, base, size))
/* clang-format on */

#endif
