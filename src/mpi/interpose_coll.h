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
#include "refuse.h" /* the parameter shapes, and Open MPI's mpi-ext.h */

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

/* Persistent forms, where the MPI's headers declare them: Open MPI's MPIX_<name>_init (its
 * pcollreq extension, mpi-ext.h; GDTE_HAVE_MPIX_PCOLL, refuse.h) and MPI-4's MPI_<name>_init
 * (GDTE_HAVE_MPI4_PCOLL). X(name, (parameters before comm)) for the collectives carried. */
#define GDTE_COLL_INIT_LIST(X)                                                                             \
    X(Alltoall, (RF_GATHER_P)) X(Alltoallv, (RF_ALLTOALLV_P)) X(Alltoallw, (RF_ALLTOALLW_P(int)))          \
    X(Neighbor_alltoall, (RF_GATHER_P)) X(Neighbor_alltoallv, (RF_ALLTOALLV_P))                            \
    X(Neighbor_alltoallw, (RF_ALLTOALLW_P(MPI_Aint))) X(Neighbor_allgather, (RF_GATHER_P))                 \
    X(Neighbor_allgatherv, (RF_GATHERV_P)) X(Allgather, (RF_GATHER_P)) X(Allgatherv, (RF_GATHERV_P))       \
    X(Gather, (RF_GATHER_P, int root)) X(Gatherv, (RF_GATHERV_P, int root)) X(Scatter, (RF_GATHER_P, int root)) \
    X(Scatterv, (RF_SCATTERV_P, int root)) X(Bcast, (RF_BCAST_P))

#define GDTE_PI_UNPAREN(...) __VA_ARGS__
/* The next definitions of one naming of the persistent forms (NULL where the MPI has none). */
typedef struct gdte_coll_init_next {
#define GDTE_X_COLL_INIT_FIELD(name, params) int (*name)(GDTE_PI_UNPAREN params, MPI_Comm, MPI_Info, MPI_Request *);
    GDTE_COLL_INIT_LIST(GDTE_X_COLL_INIT_FIELD)
#undef GDTE_X_COLL_INIT_FIELD
} gdte_coll_init_next_t;

/* Which call a collective is: the blocking or nonblocking form (req says which), or the
 * persistent form of one naming, which sets *req to an inactive persistent request. */
typedef enum { GDTE_PINIT_NONE = 0, GDTE_PINIT_MPIX, GDTE_PINIT_MPI4 } gdte_pinit_t;
/* The persistent form's name of one naming ("MPIX_" or "MPI_" before, "_init" after). */
const char *gdte_pinit_prefix(gdte_pinit_t init);
/* The next definition of the persistent form of MPI_<name> in naming `init` (the profiling name
 * when there is none; NULL when this MPI's headers do not declare that naming). */
void *gdte_pinit_resolve(gdte_pinit_t init, const char *name);

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
    MPI_Request *req;           /* nonblocking and persistent forms: where the request goes; NULL: blocking */
    gdte_pinit_t init;          /* persistent forms: which naming (their MPI_Info below) */
    MPI_Info info;
} gdte_coll_args_t;

/* Carry a collective: host buffers go to the MPI as they are; device buffers are packed into
 * staging by one batched launch, the MPI's own collective runs on bytes, and one batched launch
 * unpacks (at completion for the nonblocking forms). A persistent form sets up the sides and
 * their staging once and hands the MPI's persistent collective the staged bytes; each
 * MPI_Start/MPI_Startall then packs by one batched launch (the request's start hook) and each
 * completion unpacks by one. Returns an MPI error code. */
int gdte_ipo_coll(const gdte_coll_args_t *a);
/* The same collective on the application's arguments, untouched. */
int gdte_ipo_coll_next(const gdte_coll_args_t *a);
/* Counters of the collectives (gdte_mpi_counter): -1 for a name that is not one of them. */
int64_t gdte_ipo_coll_counter(const char *name);

#endif
