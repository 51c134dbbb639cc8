/*
 * interpose_reduce.h: reductions on device buffers (interpose_reduce.c), called by the shims of
 * shims_reduce.c. May call: what interpose.h may call, and src/kernels/reduce.h.
 *
 * Under an MPI that cannot read device memory, every device buffer a reduction touches is
 * mirrored in host staging laid out as the application's buffer (same datatype, same
 * displacements), the MPI reduces the mirrors with the application's own datatype and
 * operation (so every datatype and operation the MPI supports works, user-defined ones
 * included), and the result is copied back into the device buffer: only the bytes the
 * datatype touches. MPI_Reduce_local on device buffers runs gdte's reduction kernels
 * (src/kernels/reduce_kernels.cu) for the predefined operations on builtin numeric types.
 */
#ifndef GDTE_MPI_INTERPOSE_REDUCE_H
#define GDTE_MPI_INTERPOSE_REDUCE_H

#include "interpose.h"

/* The MPI functions the reduction shims call next in the chain. */
#define GDTE_RED_NEXT_LIST(X)                                                                               \
    X(Reduce) X(Ireduce) X(Allreduce) X(Iallreduce) X(Reduce_scatter) X(Ireduce_scatter) X(Reduce_scatter_block) \
    X(Ireduce_scatter_block) X(Scan) X(Iscan) X(Exscan) X(Iexscan) X(Reduce_local)

typedef struct gdte_red_next {
#define GDTE_X_RED_FIELD(name) __typeof__(&PMPI_##name) name;
    GDTE_RED_NEXT_LIST(GDTE_X_RED_FIELD)
#undef GDTE_X_RED_FIELD
} gdte_red_next_t;
extern gdte_red_next_t gdte_red_next_g;
#define RED_NEXT(name) (gdte_red_next_g.name)

/* 1 when a device buffer is possible at all and the MPI cannot read one: the reduction shims
 * look at their buffers only then (a GPU or the fake device, and not GPU-aware). */
int gdte_red_checking(void);

int gdte_red_reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op, int root, MPI_Comm comm,
                    MPI_Request *req);
int gdte_red_allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                       MPI_Request *req);
int gdte_red_reduce_scatter(const void *sbuf, void *rbuf, const int rcounts[], MPI_Datatype dt, MPI_Op op,
                            MPI_Comm comm, MPI_Request *req);
int gdte_red_reduce_scatter_block(const void *sbuf, void *rbuf, int rcount, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                                  MPI_Request *req);
/* Scan (exclusive 0) and Exscan (1). */
int gdte_red_scan(int exclusive, const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                  MPI_Request *req);
int gdte_red_reduce_local(const void *in, void *inout, int count, MPI_Datatype dt, MPI_Op op);

#endif
