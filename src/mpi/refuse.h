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
 *      RF_BUF(cond, buf, count, type)       count (MPI_Count) elements of type from buf;
 *      RF_VEC(cond, buf, counts, displs, type, blocks)
 *                                           blocks blocks of counts[i] elements at displs[i]
 *                                           extents of type (the lowest and the highest);
 *      RF_VECW(cond, buf, counts, idispls, adispls, types, blocks)
 *                                           the same with byte displacements (int or MPI_Aint,
 *                                           the other NULL) and a type per block;
 *      RF_BYTES(cond, buf, nbytes)          nbytes bytes from buf.
 *    MPI_IN_PLACE, zero counts and MPI_DATATYPE_NULL are skipped by the probes. The
 *    conditions and counts use RF_PEERS(comm) (the processes a collective exchanges blocks
 *    with: the remote group's size on an intercommunicator), RF_INDEG/RF_OUTDEG(comm) (a
 *    topology's neighbours), RF_AT_ROOT(root, comm) (this process is the root, or MPI_ROOT),
 *    RF_NONROOT(root) (this process contributes to a rooted collective: always on an
 *    intracommunicator, outside the root's group on an intercommunicator), RF_SUM(counts, comm)
 *    and RF_MINE(counts, comm) (the sum of the local group's counts, this rank's).
 *
 * This header needs no gdte internals: it may be included wherever <mpi.h> is found (gdte_info
 * expands only the family and name columns). Open MPI's persistent collectives (MPIX_*_init,
 * its pcollreq extension) are in the table when its <mpi-ext.h> declares them.
 */
#ifndef GDTE_MPI_REFUSE_H
#define GDTE_MPI_REFUSE_H

#include <mpi.h>
#if defined(OPEN_MPI) && OPEN_MPI && defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif
#endif

#if defined(OMPI_HAVE_MPI_EXT_PCOLLREQ) && OMPI_HAVE_MPI_EXT_PCOLLREQ
#define GDTE_RF_PCOLL(...) __VA_ARGS__
#else
#define GDTE_RF_PCOLL(...)
#endif

/* What gdte carries (shims.c, GDTE_IPO_NEXT_LIST; shims_coll.c, GDTE_COLL_NEXT_LIST; shims_reduce.c,
 * GDTE_RED_NEXT_LIST), in words, for gdte_info and the README. */
#define GDTE_MPI_CARRIED                                                                                  \
    "point-to-point, persistent, completion, pack, collectives (alltoall, gather, scatter, bcast families), " \
    "neighborhood collectives, reductions"

/* F(id, key): key names the family in gdte_info's output and in the README's Coverage rows. */
#define GDTE_REFUSE_FAMILIES(F) \
    F(COLL, "collectives") F(NBR, "neighborhood") F(RMA, "one-sided") F(IO, "MPI-IO") F(LOCAL, "local")

/* ---- shapes: parameters (_P), arguments (_A) and probes (_R) shared by the variants ---- */
#define RF_GATHER_P                                                                                          \
    const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype
#define RF_GATHER_A sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype
#define RF_GATHERV_P                                                                                              \
    const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int displs[], \
        MPI_Datatype recvtype
#define RF_GATHERV_A sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype
#define RF_SCATTERV_P                                                                                             \
    const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype, void *recvbuf, int recvcount, \
        MPI_Datatype recvtype
#define RF_SCATTERV_A sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype
#define RF_ALLTOALLV_P                                                                                            \
    const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype, void *recvbuf,           \
        const int recvcounts[], const int rdispls[], MPI_Datatype recvtype
#define RF_ALLTOALLV_A sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype
#define RF_ALLTOALLW_P(D)                                                                                           \
    const void *sendbuf, const int sendcounts[], const D sdispls[], const MPI_Datatype sendtypes[], void *recvbuf,      \
        const int recvcounts[], const D rdispls[], const MPI_Datatype recvtypes[]
#define RF_ALLTOALLW_A sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes
#define RF_REDUCE_P const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op
#define RF_REDUCE_A sendbuf, recvbuf, count, datatype, op
#define RF_RSCAT_P const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op
#define RF_RSCAT_A sendbuf, recvbuf, recvcounts, datatype, op
#define RF_RSCATB_P const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op
#define RF_RSCATB_A sendbuf, recvbuf, recvcount, datatype, op
#define RF_BCAST_P void *buffer, int count, MPI_Datatype datatype, int root
#define RF_BCAST_A buffer, count, datatype, root

#define RF_ALLGATHER_R RF_BUF(1, sendbuf, sendcount, sendtype) RF_BUF(1, recvbuf, (MPI_Count)recvcount * RF_PEERS(comm), recvtype)
#define RF_ALLGATHERV_R RF_BUF(1, sendbuf, sendcount, sendtype) RF_VEC(1, recvbuf, recvcounts, displs, recvtype, RF_PEERS(comm))
#define RF_ALLTOALL_R                                                      \
    RF_BUF(1, sendbuf, (MPI_Count)sendcount * RF_PEERS(comm), sendtype) \
    RF_BUF(1, recvbuf, (MPI_Count)recvcount * RF_PEERS(comm), recvtype)
#define RF_ALLTOALLV_R                                                    \
    RF_VEC(1, sendbuf, sendcounts, sdispls, sendtype, RF_PEERS(comm)) \
    RF_VEC(1, recvbuf, recvcounts, rdispls, recvtype, RF_PEERS(comm))
#define RF_ALLTOALLW_R                                                                 \
    RF_VECW(1, sendbuf, sendcounts, sdispls, NULL, sendtypes, RF_PEERS(comm)) \
    RF_VECW(1, recvbuf, recvcounts, rdispls, NULL, recvtypes, RF_PEERS(comm))
#define RF_REDUCE_ALL_R RF_BUF(1, sendbuf, count, datatype) RF_BUF(1, recvbuf, count, datatype)
#define RF_BCAST_R RF_BUF(root != MPI_PROC_NULL, buffer, count, datatype)
#define RF_GATHER_R             \
    RF_BUF(RF_NONROOT(root), sendbuf, sendcount, sendtype) \
    RF_BUF(RF_AT_ROOT(root, comm), recvbuf, (MPI_Count)recvcount * RF_PEERS(comm), recvtype)
#define RF_GATHERV_R                                          \
    RF_BUF(RF_NONROOT(root), sendbuf, sendcount, sendtype) \
    RF_VEC(RF_AT_ROOT(root, comm), recvbuf, recvcounts, displs, recvtype, RF_PEERS(comm))
#define RF_SCATTER_R                                                                             \
    RF_BUF(RF_AT_ROOT(root, comm), sendbuf, (MPI_Count)sendcount * RF_PEERS(comm), sendtype) \
    RF_BUF(RF_NONROOT(root), recvbuf, recvcount, recvtype)
#define RF_SCATTERV_R                                                                     \
    RF_VEC(RF_AT_ROOT(root, comm), sendbuf, sendcounts, displs, sendtype, RF_PEERS(comm)) \
    RF_BUF(RF_NONROOT(root), recvbuf, recvcount, recvtype)
#define RF_REDUCE_R                                         \
    RF_BUF(RF_NONROOT(root), sendbuf, count, datatype) \
    RF_BUF(RF_AT_ROOT(root, comm), recvbuf, count, datatype)
#define RF_RSCAT_R                                                \
    RF_BUF(1, sendbuf, RF_SUM(recvcounts, comm), datatype) \
    RF_BUF(1, recvbuf, RF_MINE(recvcounts, comm), datatype)
#define RF_RSCATB_R                                                     \
    RF_BUF(1, sendbuf, (MPI_Count)recvcount * RF_PEERS(comm), datatype) \
    RF_BUF(1, recvbuf, recvcount, datatype)
#define RF_NALLGATHER_R \
    RF_BUF(1, sendbuf, sendcount, sendtype) RF_BUF(1, recvbuf, (MPI_Count)recvcount * RF_INDEG(comm), recvtype)
#define RF_NALLGATHERV_R \
    RF_BUF(1, sendbuf, sendcount, sendtype) RF_VEC(1, recvbuf, recvcounts, displs, recvtype, RF_INDEG(comm))
#define RF_NALLTOALL_R                                                       \
    RF_BUF(1, sendbuf, (MPI_Count)sendcount * RF_OUTDEG(comm), sendtype) \
    RF_BUF(1, recvbuf, (MPI_Count)recvcount * RF_INDEG(comm), recvtype)
#define RF_NALLTOALLV_R                                                     \
    RF_VEC(1, sendbuf, sendcounts, sdispls, sendtype, RF_OUTDEG(comm)) \
    RF_VEC(1, recvbuf, recvcounts, rdispls, recvtype, RF_INDEG(comm))
#define RF_NALLTOALLW_R                                                                 \
    RF_VECW(1, sendbuf, sendcounts, NULL, sdispls, sendtypes, RF_OUTDEG(comm)) \
    RF_VECW(1, recvbuf, recvcounts, NULL, rdispls, recvtypes, RF_INDEG(comm))

/* One-sided: the origin (and result, compare) buffers; the target's memory was looked at when
 * its window was created or attached. MPI_PROC_NULL targets and MPI_NO_OP origins are not
 * touched. */
#define RF_RMA_P(cv)                                                                                      \
    cv void *origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank, MPI_Aint target_disp, \
        int target_count, MPI_Datatype target_datatype
#define RF_RMA_A origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, target_datatype
#define RF_RMA_R RF_BUF(target_rank != MPI_PROC_NULL, origin_addr, origin_count, origin_datatype)
#define RF_GETACC_P                                                                                           \
    const void *origin_addr, int origin_count, MPI_Datatype origin_datatype, void *result_addr, int result_count, \
        MPI_Datatype result_datatype, int target_rank, MPI_Aint target_disp, int target_count,                  \
        MPI_Datatype target_datatype, MPI_Op op
#define RF_GETACC_A                                                                                          \
    origin_addr, origin_count, origin_datatype, result_addr, result_count, result_datatype, target_rank, target_disp, \
        target_count, target_datatype, op
#define RF_GETACC_R                                                                                     \
    RF_BUF(target_rank != MPI_PROC_NULL && op != MPI_NO_OP, origin_addr, origin_count, origin_datatype) \
    RF_BUF(target_rank != MPI_PROC_NULL, result_addr, result_count, result_datatype)

/* MPI-IO: the user buffer; a split collective's _end looks at the buffer's first byte. */
#define RF_IOAT_P(cv) MPI_File fh, MPI_Offset offset, cv void *buf, int count, MPI_Datatype datatype
#define RF_IOAT_A fh, offset, buf, count, datatype
#define RF_IO_P(cv) MPI_File fh, cv void *buf, int count, MPI_Datatype datatype
#define RF_IO_A fh, buf, count, datatype
#define RF_IO_R RF_BUF(1, buf, count, datatype)
#define RF_IOEND_R RF_BYTES(1, buf, 1)

/* clang-format off */
#define GDTE_REFUSE_LIST(X) \
    /* ---- collectives: blocking, nonblocking, persistent (Open MPI's MPIX_*_init); the blocking and \
     * nonblocking alltoall, gather, scatter and bcast forms are carried (shims_coll.c) ---- */ \
    GDTE_RF_PCOLL(X(COLL, MPIX_Allgather_init, (RF_GATHER_P, MPI_Comm comm, MPI_Info info, MPI_Request *request), (RF_GATHER_A, comm, info, request), COMM, comm, RF_ALLGATHER_R)) \
    GDTE_RF_PCOLL(X(COLL, MPIX_Allgatherv_init, (RF_GATHERV_P, MPI_Comm comm, MPI_Info info, MPI_Request *request), (RF_GATHERV_A, comm, info, request), COMM, comm, RF_ALLGATHERV_R)) \
    GDTE_RF_PCOLL(X(COLL, MPIX_Allreduce_init, (RF_REDUCE_P, MPI_Comm comm, MPI_Info info, MPI_Request *request), (RF_REDUCE_A, comm, info, request), COMM, comm, RF_REDUCE_ALL_R)) \
    GDTE_RF_PCOLL(X(COLL, MPIX_Alltoall_init, (RF_GATHER_P, MPI_Comm comm, MPI_Info info, MPI_Request *request), (RF_GATHER_A, comm, info, request), COMM, comm, RF_ALLTOALL_R)) \
    GDTE_RF_PCOLL(X(COLL, MPIX_Alltoallv_init, (RF_ALLTOALLV_P, MPI_Comm comm, MPI_Info info, MPI_Request *request), (RF_ALLTOALLV_A, comm, info, request), COMM, comm, RF_ALLTOALLV_R)) \
    GDTE_RF_PCOLL(X(COLL, MPIX_Alltoallw_init, (RF_ALLTOALLW_P(int), MPI_Comm comm, MPI_Info info, MPI_Request *request), (RF_ALLTOALLW_A, comm, info, request), COMM, comm, RF_ALLTOALLW_R)) \
    GDTE_RF_PCOLL(X(COLL, MPIX_Bcast_init, (RF_BCAST_P, MPI_Comm comm, MPI_Info info, MPI_Request *request), (RF_BCAST_A, comm, info, request), COMM, comm, RF_BCAST_R)) \
    GDTE_RF_PCOLL(X(COLL, MPIX_Exscan_init, (RF_REDUCE_P, MPI_Comm comm, MPI_Info info, MPI_Request *request), (RF_REDUCE_A, comm, info, request), COMM, comm, RF_REDUCE_ALL_R)) \
    GDTE_RF_PCOLL(X(COLL, MPIX_Gather_init, (RF_GATHER_P, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request), (RF_GATHER_A, root, comm, info, request), COMM, comm, RF_GATHER_R)) \
    GDTE_RF_PCOLL(X(COLL, MPIX_Gatherv_init, (RF_GATHERV_P, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request), (RF_GATHERV_A, root, comm, info, request), COMM, comm, RF_GATHERV_R)) \
    GDTE_RF_PCOLL(X(COLL, MPIX_Reduce_init, (RF_REDUCE_P, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request), (RF_REDUCE_A, root, comm, info, request), COMM, comm, RF_REDUCE_R)) \
    GDTE_RF_PCOLL(X(COLL, MPIX_Reduce_scatter_init, (RF_RSCAT_P, MPI_Comm comm, MPI_Info info, MPI_Request *request), (RF_RSCAT_A, comm, info, request), COMM, comm, RF_RSCAT_R)) \
    GDTE_RF_PCOLL(X(COLL, MPIX_Reduce_scatter_block_init, (RF_RSCATB_P, MPI_Comm comm, MPI_Info info, MPI_Request *request), (RF_RSCATB_A, comm, info, request), COMM, comm, RF_RSCATB_R)) \
    GDTE_RF_PCOLL(X(COLL, MPIX_Scan_init, (RF_REDUCE_P, MPI_Comm comm, MPI_Info info, MPI_Request *request), (RF_REDUCE_A, comm, info, request), COMM, comm, RF_REDUCE_ALL_R)) \
    GDTE_RF_PCOLL(X(COLL, MPIX_Scatter_init, (RF_GATHER_P, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request), (RF_GATHER_A, root, comm, info, request), COMM, comm, RF_SCATTER_R)) \
    GDTE_RF_PCOLL(X(COLL, MPIX_Scatterv_init, (RF_SCATTERV_P, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request), (RF_SCATTERV_A, root, comm, info, request), COMM, comm, RF_SCATTERV_R)) \
    /* ---- neighborhood collectives (the topology gives the block counts): the persistent forms; \
     * the others are carried (shims_coll.c) ---- */ \
    GDTE_RF_PCOLL(X(NBR, MPIX_Neighbor_allgather_init, (RF_GATHER_P, MPI_Comm comm, MPI_Info info, MPI_Request *request), (RF_GATHER_A, comm, info, request), COMM, comm, RF_NALLGATHER_R)) \
    GDTE_RF_PCOLL(X(NBR, MPIX_Neighbor_allgatherv_init, (RF_GATHERV_P, MPI_Comm comm, MPI_Info info, MPI_Request *request), (RF_GATHERV_A, comm, info, request), COMM, comm, RF_NALLGATHERV_R)) \
    GDTE_RF_PCOLL(X(NBR, MPIX_Neighbor_alltoall_init, (RF_GATHER_P, MPI_Comm comm, MPI_Info info, MPI_Request *request), (RF_GATHER_A, comm, info, request), COMM, comm, RF_NALLTOALL_R)) \
    GDTE_RF_PCOLL(X(NBR, MPIX_Neighbor_alltoallv_init, (RF_ALLTOALLV_P, MPI_Comm comm, MPI_Info info, MPI_Request *request), (RF_ALLTOALLV_A, comm, info, request), COMM, comm, RF_NALLTOALLV_R)) \
    GDTE_RF_PCOLL(X(NBR, MPIX_Neighbor_alltoallw_init, (RF_ALLTOALLW_P(MPI_Aint), MPI_Comm comm, MPI_Info info, MPI_Request *request), (RF_ALLTOALLW_A, comm, info, request), COMM, comm, RF_NALLTOALLW_R)) \
    /* ---- one-sided ---- */ \
    X(RMA, MPI_Put, (RF_RMA_P(const), MPI_Win win), (RF_RMA_A, win), WIN, win, RF_RMA_R) \
    X(RMA, MPI_Rput, (RF_RMA_P(const), MPI_Win win, MPI_Request *request), (RF_RMA_A, win, request), WIN, win, RF_RMA_R) \
    X(RMA, MPI_Get, (RF_RMA_P(), MPI_Win win), (RF_RMA_A, win), WIN, win, RF_RMA_R) \
    X(RMA, MPI_Rget, (RF_RMA_P(), MPI_Win win, MPI_Request *request), (RF_RMA_A, win, request), WIN, win, RF_RMA_R) \
    X(RMA, MPI_Accumulate, (RF_RMA_P(const), MPI_Op op, MPI_Win win), (RF_RMA_A, op, win), WIN, win, RF_RMA_R) \
    X(RMA, MPI_Raccumulate, (RF_RMA_P(const), MPI_Op op, MPI_Win win, MPI_Request *request), (RF_RMA_A, op, win, request), WIN, win, RF_RMA_R) \
    X(RMA, MPI_Get_accumulate, (RF_GETACC_P, MPI_Win win), (RF_GETACC_A, win), WIN, win, RF_GETACC_R) \
    X(RMA, MPI_Rget_accumulate, (RF_GETACC_P, MPI_Win win, MPI_Request *request), (RF_GETACC_A, win, request), WIN, win, RF_GETACC_R) \
    X(RMA, MPI_Fetch_and_op, \
      (const void *origin_addr, void *result_addr, MPI_Datatype datatype, int target_rank, MPI_Aint target_disp, MPI_Op op, MPI_Win win), \
      (origin_addr, result_addr, datatype, target_rank, target_disp, op, win), WIN, win, \
      RF_BUF(target_rank != MPI_PROC_NULL && op != MPI_NO_OP, origin_addr, 1, datatype) \
      RF_BUF(target_rank != MPI_PROC_NULL, result_addr, 1, datatype)) \
    X(RMA, MPI_Compare_and_swap, \
      (const void *origin_addr, const void *compare_addr, void *result_addr, MPI_Datatype datatype, int target_rank, MPI_Aint target_disp, MPI_Win win), \
      (origin_addr, compare_addr, result_addr, datatype, target_rank, target_disp, win), WIN, win, \
      RF_BUF(target_rank != MPI_PROC_NULL, origin_addr, 1, datatype) \
      RF_BUF(target_rank != MPI_PROC_NULL, compare_addr, 1, datatype) \
      RF_BUF(target_rank != MPI_PROC_NULL, result_addr, 1, datatype)) \
    X(RMA, MPI_Win_create, (void *base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, MPI_Win *win), \
      (base, size, disp_unit, info, comm, win), COMM, comm, RF_BYTES(1, base, size)) \
    X(RMA, MPI_Win_attach, (MPI_Win win, void *base, MPI_Aint size), (win, base, size), WIN, win, RF_BYTES(1, base, size)) \
    /* ---- MPI-IO ---- */ \
    X(IO, MPI_File_read_at, (RF_IOAT_P(), MPI_Status *status), (RF_IOAT_A, status), FH, fh, RF_IO_R) \
    X(IO, MPI_File_read_at_all, (RF_IOAT_P(), MPI_Status *status), (RF_IOAT_A, status), FH, fh, RF_IO_R) \
    X(IO, MPI_File_write_at, (RF_IOAT_P(const), MPI_Status *status), (RF_IOAT_A, status), FH, fh, RF_IO_R) \
    X(IO, MPI_File_write_at_all, (RF_IOAT_P(const), MPI_Status *status), (RF_IOAT_A, status), FH, fh, RF_IO_R) \
    X(IO, MPI_File_iread_at, (RF_IOAT_P(), MPI_Request *request), (RF_IOAT_A, request), FH, fh, RF_IO_R) \
    X(IO, MPI_File_iwrite_at, (RF_IOAT_P(const), MPI_Request *request), (RF_IOAT_A, request), FH, fh, RF_IO_R) \
    X(IO, MPI_File_iread_at_all, (RF_IOAT_P(), MPI_Request *request), (RF_IOAT_A, request), FH, fh, RF_IO_R) \
    X(IO, MPI_File_iwrite_at_all, (RF_IOAT_P(const), MPI_Request *request), (RF_IOAT_A, request), FH, fh, RF_IO_R) \
    X(IO, MPI_File_read, (RF_IO_P(), MPI_Status *status), (RF_IO_A, status), FH, fh, RF_IO_R) \
    X(IO, MPI_File_read_all, (RF_IO_P(), MPI_Status *status), (RF_IO_A, status), FH, fh, RF_IO_R) \
    X(IO, MPI_File_write, (RF_IO_P(const), MPI_Status *status), (RF_IO_A, status), FH, fh, RF_IO_R) \
    X(IO, MPI_File_write_all, (RF_IO_P(const), MPI_Status *status), (RF_IO_A, status), FH, fh, RF_IO_R) \
    X(IO, MPI_File_iread, (RF_IO_P(), MPI_Request *request), (RF_IO_A, request), FH, fh, RF_IO_R) \
    X(IO, MPI_File_iwrite, (RF_IO_P(const), MPI_Request *request), (RF_IO_A, request), FH, fh, RF_IO_R) \
    X(IO, MPI_File_iread_all, (RF_IO_P(), MPI_Request *request), (RF_IO_A, request), FH, fh, RF_IO_R) \
    X(IO, MPI_File_iwrite_all, (RF_IO_P(const), MPI_Request *request), (RF_IO_A, request), FH, fh, RF_IO_R) \
    X(IO, MPI_File_read_shared, (RF_IO_P(), MPI_Status *status), (RF_IO_A, status), FH, fh, RF_IO_R) \
    X(IO, MPI_File_write_shared, (RF_IO_P(const), MPI_Status *status), (RF_IO_A, status), FH, fh, RF_IO_R) \
    X(IO, MPI_File_iread_shared, (RF_IO_P(), MPI_Request *request), (RF_IO_A, request), FH, fh, RF_IO_R) \
    X(IO, MPI_File_iwrite_shared, (RF_IO_P(const), MPI_Request *request), (RF_IO_A, request), FH, fh, RF_IO_R) \
    X(IO, MPI_File_read_ordered, (RF_IO_P(), MPI_Status *status), (RF_IO_A, status), FH, fh, RF_IO_R) \
    X(IO, MPI_File_write_ordered, (RF_IO_P(const), MPI_Status *status), (RF_IO_A, status), FH, fh, RF_IO_R) \
    X(IO, MPI_File_read_at_all_begin, (RF_IOAT_P()), (RF_IOAT_A), FH, fh, RF_IO_R) \
    X(IO, MPI_File_read_at_all_end, (MPI_File fh, void *buf, MPI_Status *status), (fh, buf, status), FH, fh, RF_IOEND_R) \
    X(IO, MPI_File_write_at_all_begin, (RF_IOAT_P(const)), (RF_IOAT_A), FH, fh, RF_IO_R) \
    X(IO, MPI_File_write_at_all_end, (MPI_File fh, const void *buf, MPI_Status *status), (fh, buf, status), FH, fh, RF_IOEND_R) \
    X(IO, MPI_File_read_all_begin, (RF_IO_P()), (RF_IO_A), FH, fh, RF_IO_R) \
    X(IO, MPI_File_read_all_end, (MPI_File fh, void *buf, MPI_Status *status), (fh, buf, status), FH, fh, RF_IOEND_R) \
    X(IO, MPI_File_write_all_begin, (RF_IO_P(const)), (RF_IO_A), FH, fh, RF_IO_R) \
    X(IO, MPI_File_write_all_end, (MPI_File fh, const void *buf, MPI_Status *status), (fh, buf, status), FH, fh, RF_IOEND_R) \
    X(IO, MPI_File_read_ordered_begin, (RF_IO_P()), (RF_IO_A), FH, fh, RF_IO_R) \
    X(IO, MPI_File_read_ordered_end, (MPI_File fh, void *buf, MPI_Status *status), (fh, buf, status), FH, fh, RF_IOEND_R) \
    X(IO, MPI_File_write_ordered_begin, (RF_IO_P(const)), (RF_IO_A), FH, fh, RF_IO_R) \
    X(IO, MPI_File_write_ordered_end, (MPI_File fh, const void *buf, MPI_Status *status), (fh, buf, status), FH, fh, RF_IOEND_R) \
    /* ---- local calls: no communication, but the MPI reads or writes the buffer ---- */ \
    X(LOCAL, MPI_Pack_external, \
      (const char datarep[], const void *inbuf, int incount, MPI_Datatype datatype, void *outbuf, MPI_Aint outsize, MPI_Aint *position), \
      (datarep, inbuf, incount, datatype, outbuf, outsize, position), WORLD, MPI_COMM_WORLD, \
      RF_BUF(1, inbuf, incount, datatype) RF_BYTES(1, outbuf, outsize)) \
    X(LOCAL, MPI_Unpack_external, \
      (const char datarep[], const void *inbuf, MPI_Aint insize, MPI_Aint *position, void *outbuf, int outcount, MPI_Datatype datatype), \
      (datarep, inbuf, insize, position, outbuf, outcount, datatype), WORLD, MPI_COMM_WORLD, \
      RF_BYTES(1, inbuf, insize) RF_BUF(1, outbuf, outcount, datatype)) \
    X(LOCAL, MPI_Buffer_attach, (void *buffer, int size), (buffer, size), WORLD, MPI_COMM_WORLD, RF_BYTES(1, buffer, size))
/* clang-format on */

#endif
