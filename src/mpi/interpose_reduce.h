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
#include "interpose_coll.h" /* gdte_pinit_t, the parameter shapes */
#include "kernels/reduce.h"

/* clang-format off */
/* The reductions carried, in one table: X(name, nonblocking name, (parameters before comm), (the
 * same as arguments), f), carried by gdte_red_<f>(arguments, comm, how) below; blocking,
 * nonblocking and persistent (interpose_coll.h's namings). MPI_Reduce_local is apart. */
#define GDTE_RED_LIST(X) \
    X(Reduce, Ireduce, (RF_REDUCE_P, int root), (sendbuf, recvbuf, count, datatype, op, root), reduce) \
    X(Allreduce, Iallreduce, (RF_REDUCE_P), (sendbuf, recvbuf, count, datatype, op), allreduce) \
    X(Reduce_scatter, Ireduce_scatter, (RF_RSCAT_P), (sendbuf, recvbuf, recvcounts, datatype, op), reduce_scatter) \
    X(Reduce_scatter_block, Ireduce_scatter_block, (RF_RSCATB_P), (sendbuf, recvbuf, recvcount, datatype, op), \
      reduce_scatter_block) \
    X(Scan, Iscan, (RF_REDUCE_P), (sendbuf, recvbuf, count, datatype, op), scan) \
    X(Exscan, Iexscan, (RF_REDUCE_P), (sendbuf, recvbuf, count, datatype, op), exscan)
/* clang-format on */

/* The next definitions of the blocking and nonblocking forms, and of MPI_Reduce_local. */
typedef struct gdte_red_next {
#define GDTE_X_RED_FIELD(name, iname, ...) __typeof__(&PMPI_##name) name; __typeof__(&PMPI_##iname) iname;
    GDTE_RED_LIST(GDTE_X_RED_FIELD)
#undef GDTE_X_RED_FIELD
    __typeof__(&PMPI_Reduce_local) Reduce_local;
} gdte_red_next_t;
extern gdte_red_next_t gdte_red_next_g;
#define RED_NEXT(name) (gdte_red_next_g.name)

/* The next definitions of the persistent forms, per naming (gdte_pinit_t; NULL where the MPI has
 * none). */
typedef struct gdte_red_init_next {
#define GDTE_X_RED_INIT_FIELD(name, iname, params, ...) \
    int (*name)(GDTE_PI_UNPAREN params, MPI_Comm, MPI_Info, MPI_Request *);
    GDTE_RED_LIST(GDTE_X_RED_INIT_FIELD)
#undef GDTE_X_RED_INIT_FIELD
} gdte_red_init_next_t;
extern gdte_red_init_next_t gdte_red_init_next_g[3];

/* 1 when a device buffer is possible at all and the MPI cannot read one: the reduction shims
 * look at their buffers only then (a GPU or the fake device, and not GPU-aware). */
int gdte_red_checking(void);

/* How a reduction is called: blocking (req NULL), nonblocking (req, init GDTE_PINIT_NONE), or
 * the persistent form of a naming (req receives an inactive persistent request; info its
 * MPI_Info): the mirrors are made once, each MPI_Start copies the inputs in, each completion
 * copies the result back. */
typedef struct gdte_red_how {
    MPI_Request *req;
    gdte_pinit_t init;
    MPI_Info info;
} gdte_red_how_t;

int gdte_red_reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op, int root, MPI_Comm comm,
                    gdte_red_how_t how);
int gdte_red_allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                       gdte_red_how_t how);
int gdte_red_reduce_scatter(const void *sbuf, void *rbuf, const int rcounts[], MPI_Datatype dt, MPI_Op op,
                            MPI_Comm comm, gdte_red_how_t how);
int gdte_red_reduce_scatter_block(const void *sbuf, void *rbuf, int rcount, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                                  gdte_red_how_t how);
int gdte_red_scan(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                  gdte_red_how_t how);
int gdte_red_exscan(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                    gdte_red_how_t how);
int gdte_red_reduce_local(const void *in, void *inout, int count, MPI_Datatype dt, MPI_Op op);

/* (op, dt) as one of gdte's reduction rules (src/kernels/reduce.h): 1, or 0 where gdte has none
 * (a user-defined operation, a derived datatype, a pair MPI does not allow). */
int gdte_red_rule(MPI_Op op, MPI_Datatype dt, gdte_rop_t *rop, gdte_rtype_t *rt);
/* The memory kind of `n` elements of dt at b (HOST for none or MPI_IN_PLACE). */
gdte_ipo_kind_t gdte_red_kind_of(const void *b, int64_t n, MPI_Datatype dt);

/* ---- the node path (interpose_reduce_node.c) ---- */
typedef enum {
    GDTE_RN_REDUCE,
    GDTE_RN_ALLREDUCE,
    GDTE_RN_REDUCE_SCATTER,
    GDTE_RN_REDUCE_SCATTER_BLOCK,
    GDTE_RN_SCAN,
    GDTE_RN_EXSCAN
} gdte_red_node_kind_t;

/* A blocking reduction as the application called it: count is the elements of Reduce,
 * Allreduce, Scan and Exscan, and the block of Reduce_scatter_block; rcounts Reduce_scatter's. */
typedef struct gdte_red_node_call {
    const char *fn;
    gdte_red_node_kind_t kind;
    const void *sbuf;
    void *rbuf;
    int count;
    const int *rcounts;
    MPI_Datatype dt;
    MPI_Op op;
    int root;
    MPI_Comm comm;
} gdte_red_node_call_t;

/* 1 when the node path may carry a reduction at all in this process (a GPU or the fake device,
 * GDTE_MPI_COLL_NODE on): the shims then look at the call even under a GPU-aware MPI. */
int gdte_red_node_possible(void);
/* Carry the blocking reduction `a` GPU to GPU within the node: 0 when it does not apply (the
 * same answer on every member: the caller goes on as before), else 1 with *rc_p the call's
 * result. */
int gdte_red_node(const gdte_red_node_call_t *a, int *rc_p);
/* "reduce_node", "reduce_node_bytes"; -1 for another name. */
int64_t gdte_red_node_counter(const char *name);

#endif
