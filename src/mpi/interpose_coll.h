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
#include "gpu/gpu.h"

/* Which call a collective is: the blocking or nonblocking form (req says which), or the
 * persistent form of one naming, which sets *req to an inactive persistent request: Open MPI's
 * MPIX_<name>_init (its pcollreq extension, mpi-ext.h; GDTE_HAVE_MPIX_PCOLL, refuse.h) or
 * MPI-4's MPI_<name>_init (GDTE_HAVE_MPI4_PCOLL), where the MPI's headers declare them. */
typedef enum { GDTE_PINIT_NONE = 0, GDTE_PINIT_MPIX, GDTE_PINIT_MPI4 } gdte_pinit_t;
/* The next definition of the persistent form of MPI_<name> in naming `init` (the profiling name
 * when there is none; NULL when this MPI's headers do not declare that naming). */
void *gdte_pinit_resolve(gdte_pinit_t init, const char *name);
/* A call's name for messages, per form: blocking, nonblocking, Open MPI's persistent, MPI-4's. */
#define GDTE_PINIT_NAMES(x, ix) {"MPI_" x, "MPI_" ix, "MPIX_" x "_init", "MPI_" x "_init"}
static inline const char *gdte_pinit_name(const char *const names[4], gdte_pinit_t init, const MPI_Request *req)
{
    return names[init == GDTE_PINIT_MPI4 ? 3 : init == GDTE_PINIT_MPIX ? 2 : req != NULL];
}
/* Set `field` to the next definition of MPI_<name> (interpose_core.c says why), or PMPI_<name>. */
#define GDTE_RESOLVE_NEXT(field, name)                                     \
    field = (__typeof__(field))dlsym(RTLD_NEXT, "MPI_" #name);             \
    if (!field) field = PMPI_##name;
/* The MPI's call of one form: the persistent one of naming `init` from the table `itab` of
 * next definitions per naming (MPI_ERR_INTERN where the MPI has none), else the nonblocking
 * (req) or blocking one from the table `next`; the arguments before the communicator. */
#define GDTE_PCALL(itab, next, init, info, req, comm, name, iname, ...)                                       \
    ((init) != GDTE_PINIT_NONE                                                                              \
         ? ((itab)[(init)].name ? (itab)[(init)].name(__VA_ARGS__, comm, info, req) : MPI_ERR_INTERN)        \
     : (req) ? (next).iname(__VA_ARGS__, comm, req)                                                          \
             : (next).name(__VA_ARGS__, comm))

/* clang-format off */
/* Every collective carried, in one table:
 *     X(name, nonblocking name, op, (parameters before comm), (the MPI's arguments), sides...)
 *  - op: its gdte_coll_op_t, GDTE_COLL_<op>;
 *  - parameters: the C binding (refuse.h's shapes), for the shims and the persistent forms;
 *  - the MPI's arguments before comm, from the sides the MPI is given (s, r: eff_t pointers; rb:
 *    r's buffer) and the call's description a (gdte_ipo_coll_next, interpose_coll.c);
 *  - sides: the designated initializers of gdte_coll_args_t that describe the application's
 *    arguments (the shims, shims_coll.c), COLL_S_* and COLL_R_* below. */
#define COLL_SIDE_U(b, n, t) {.buf = (b), .count = (n), .type = (t)}
#define COLL_SIDE_V(b, c, d, t) {.buf = (b), .counts = (c), .displs = (d), .type = (t)}
#define COLL_S_U .s = COLL_SIDE_U(sendbuf, sendcount, sendtype)
#define COLL_R_U .r = COLL_SIDE_U(recvbuf, recvcount, recvtype)
#define COLL_S_V(d) .s = COLL_SIDE_V(sendbuf, sendcounts, d, sendtype)
#define COLL_R_V(d) .r = COLL_SIDE_V(recvbuf, recvcounts, d, recvtype)
#define COLL_S_W(D) .s = {.buf = sendbuf, .counts = sendcounts, .D = sdispls, .types = sendtypes}
#define COLL_R_W(D) .r = {.buf = recvbuf, .counts = recvcounts, .D = rdispls, .types = recvtypes}
#define COLL_A_U s->buf, s->count, s->type, rb, r->count, r->type
#define COLL_A_GV s->buf, s->count, s->type, rb, r->counts, r->displs, r->type
#define COLL_A_SV s->buf, s->counts, s->displs, s->type, rb, r->count, r->type
#define COLL_A_V s->buf, s->counts, s->displs, s->type, rb, r->counts, r->displs, r->type
#define COLL_A_W(D) s->buf, s->counts, s->D, s->types, rb, r->counts, r->D, r->types
#define GDTE_COLL_LIST(X) \
    X(Alltoall, Ialltoall, ALLTOALL, (RF_GATHER_P), (COLL_A_U), COLL_S_U, COLL_R_U) \
    X(Alltoallv, Ialltoallv, ALLTOALLV, (RF_ALLTOALLV_P), (COLL_A_V), COLL_S_V(sdispls), COLL_R_V(rdispls)) \
    X(Alltoallw, Ialltoallw, ALLTOALLW, (RF_ALLTOALLW_P(int)), (COLL_A_W(displs)), COLL_S_W(displs), COLL_R_W(displs)) \
    X(Neighbor_alltoall, Ineighbor_alltoall, NALLTOALL, (RF_GATHER_P), (COLL_A_U), COLL_S_U, COLL_R_U) \
    X(Neighbor_alltoallv, Ineighbor_alltoallv, NALLTOALLV, (RF_ALLTOALLV_P), (COLL_A_V), COLL_S_V(sdispls), \
      COLL_R_V(rdispls)) \
    X(Neighbor_alltoallw, Ineighbor_alltoallw, NALLTOALLW, (RF_ALLTOALLW_P(MPI_Aint)), (COLL_A_W(adispls)), \
      COLL_S_W(adispls), COLL_R_W(adispls)) \
    X(Neighbor_allgather, Ineighbor_allgather, NALLGATHER, (RF_GATHER_P), (COLL_A_U), COLL_S_U, COLL_R_U) \
    X(Neighbor_allgatherv, Ineighbor_allgatherv, NALLGATHERV, (RF_GATHERV_P), (COLL_A_GV), COLL_S_U, COLL_R_V(displs)) \
    X(Allgather, Iallgather, ALLGATHER, (RF_GATHER_P), (COLL_A_U), COLL_S_U, COLL_R_U) \
    X(Allgatherv, Iallgatherv, ALLGATHERV, (RF_GATHERV_P), (COLL_A_GV), COLL_S_U, COLL_R_V(displs)) \
    X(Gather, Igather, GATHER, (RF_GATHER_P, int root), (COLL_A_U, a->root), COLL_S_U, COLL_R_U, .root = root) \
    X(Gatherv, Igatherv, GATHERV, (RF_GATHERV_P, int root), (COLL_A_GV, a->root), COLL_S_U, COLL_R_V(displs), \
      .root = root) \
    X(Scatter, Iscatter, SCATTER, (RF_GATHER_P, int root), (COLL_A_U, a->root), COLL_S_U, COLL_R_U, .root = root) \
    X(Scatterv, Iscatterv, SCATTERV, (RF_SCATTERV_P, int root), (COLL_A_SV, a->root), COLL_S_V(displs), COLL_R_U, \
      .root = root) \
    /* one buffer: the root's is its send side, the others' their receive side; the MPI gets `r` */ \
    X(Bcast, Ibcast, BCAST, (RF_BCAST_P), (rb, r->count, r->type, a->root), .s = COLL_SIDE_U(buffer, count, datatype), \
      .r = COLL_SIDE_U(buffer, count, datatype), .root = root)
/* clang-format on */

#define GDTE_PI_UNPAREN(...) __VA_ARGS__
/* The next definitions of the blocking and nonblocking forms. */
typedef struct gdte_coll_next {
#define GDTE_X_COLL_FIELD(name, iname, ...) __typeof__(&PMPI_##name) name; __typeof__(&PMPI_##iname) iname;
    GDTE_COLL_LIST(GDTE_X_COLL_FIELD)
#undef GDTE_X_COLL_FIELD
} gdte_coll_next_t;
extern gdte_coll_next_t gdte_coll_next_g;

/* The next definitions of one naming of the persistent forms (NULL where the MPI has none). */
typedef struct gdte_coll_init_next {
#define GDTE_X_COLL_INIT_FIELD(name, iname, OP, params, ...) \
    int (*name)(GDTE_PI_UNPAREN params, MPI_Comm, MPI_Info, MPI_Request *);
    GDTE_COLL_LIST(GDTE_X_COLL_INIT_FIELD)
#undef GDTE_X_COLL_INIT_FIELD
} gdte_coll_init_next_t;

typedef enum {
#define GDTE_X_COLL_OP(name, iname, OP, ...) GDTE_COLL_##OP,
    GDTE_COLL_LIST(GDTE_X_COLL_OP)
#undef GDTE_X_COLL_OP
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
/* Hand the MPI's request `handle` of a collective or reduction to the application through the
 * record r (gdte_ipo_req_new), into the request table: a nonblocking call's (active) or a
 * persistent one's (inactive; each MPI_Start/MPI_Startall calls start). Completion calls
 * finish, the record's release fini; ctx is theirs. */
void gdte_coll_req_insert(gdte_ipo_req_t *r, MPI_Request handle, MPI_Comm comm, int persistent,
                          int (*start)(gdte_ipo_req_t *), int (*finish)(gdte_ipo_req_t *, MPI_Status *, int),
                          void (*fini)(gdte_ipo_req_t *), void *ctx);
/* A stream of gdte's own (*s, made at first use with its event *ev) ordered after the work the
 * application has queued on the legacy default stream, as a blocking stream would be: the
 * collectives' batches and the reduction kernels run on one each. Caller holds the lock that
 * guards *s and *ev. */
gdte_status_t gdte_coll_stream_after_app(gdte_stream_t *s, gdte_gpu_event_t *ev);
/* Counters of the collectives (gdte_mpi_counter): -1 for a name that is not one of them. */
int64_t gdte_ipo_coll_counter(const char *name);

#endif
