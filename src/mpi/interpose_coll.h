/*
 * interpose_coll.h: collectives on device buffers (interpose_coll.c), called by the shims of
 * shims_coll.c. Every collective is described by one argument struct, whatever its form: each
 * side (send, receive) has the fields its form uses, the others zero.
 *
 * May call: what interpose.h may call.
 */
#ifndef GDTE_MPI_INTERPOSE_COLL_H
#define GDTE_MPI_INTERPOSE_COLL_H

#include "interpose.h"

/* The calls carried, each with its nonblocking form: X(name) gives MPI_<name> and MPI_I<lower>. */
#define GDTE_COLL_NEXT_LIST(X)                                                                               \
    X(Alltoall) X(Ialltoall) X(Alltoallv) X(Ialltoallv) X(Alltoallw) X(Ialltoallw) X(Neighbor_alltoall)        \
    X(Ineighbor_alltoall) X(Neighbor_alltoallv) X(Ineighbor_alltoallv) X(Neighbor_alltoallw)                   \
    X(Ineighbor_alltoallw) X(Neighbor_allgather) X(Ineighbor_allgather) X(Neighbor_allgatherv)                 \
    X(Ineighbor_allgatherv) X(Allgather) X(Iallgather) X(Allgatherv) X(Iallgatherv) X(Gather) X(Igather)       \
    X(Gatherv) X(Igatherv) X(Scatter) X(Iscatter) X(Scatterv) X(Iscatterv) X(Bcast) X(Ibcast)

typedef struct gdte_coll_next {
#define GDTE_X_COLL_FIELD(name) __typeof__(&PMPI_##name) name;
    GDTE_COLL_NEXT_LIST(GDTE_X_COLL_FIELD)
#undef GDTE_X_COLL_FIELD
} gdte_coll_next_t;
extern gdte_coll_next_t gdte_coll_next_g;
#define COLL_NEXT(name) (gdte_coll_next_g.name)

typedef enum {
    GDTE_COLL_ALLTOALL = 0,
    GDTE_COLL_ALLTOALLV,
    GDTE_COLL_ALLTOALLW,
    GDTE_COLL_NALLTOALL,
    GDTE_COLL_NALLTOALLV,
    GDTE_COLL_NALLTOALLW,
    GDTE_COLL_NALLGATHER,
    GDTE_COLL_NALLGATHERV,
    GDTE_COLL_ALLGATHER,
    GDTE_COLL_ALLGATHERV,
    GDTE_COLL_GATHER,
    GDTE_COLL_GATHERV,
    GDTE_COLL_SCATTER,
    GDTE_COLL_SCATTERV,
    GDTE_COLL_BCAST,
    GDTE_COLL_OPS_
} gdte_coll_op_t;

/* One side of a collective as the application gave it. */
typedef struct gdte_coll_side_args {
    const void *buf;
    int count;                 /* uniform forms: elements per block */
    const int *counts;         /* v and w forms: per block */
    const int *displs;         /* v forms: in extents; Alltoallw: in bytes */
    const MPI_Aint *adispls;   /* Neighbor_alltoallw: in bytes */
    MPI_Datatype type;         /* uniform and v forms */
    const MPI_Datatype *types; /* w forms */
} gdte_coll_side_args_t;

typedef struct gdte_coll_args {
    gdte_coll_op_t op;
    gdte_coll_side_args_t s, r; /* Bcast: the buffer on both */
    int root;                   /* rooted forms */
    MPI_Comm comm;
    MPI_Request *req;           /* nonblocking forms: where the request goes; NULL: blocking */
} gdte_coll_args_t;

/* Carry a collective: host buffers go to the MPI as they are; device buffers are packed into
 * staging by one batched launch, the MPI's own collective runs on bytes, and one batched launch
 * unpacks (at completion for the nonblocking forms). Returns an MPI error code. */
int gdte_ipo_coll(const gdte_coll_args_t *a);
/* The same collective on the application's arguments, untouched. */
int gdte_ipo_coll_next(const gdte_coll_args_t *a);
/* Counters of the collectives (gdte_mpi_counter): -1 for a name that is not one of them. */
int64_t gdte_ipo_coll_counter(const char *name);

#endif
