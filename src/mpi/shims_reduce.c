/*
 * The reduction calls libgdte_mpi.so defines (interpose_reduce.h): one thin shim each, from
 * interpose_reduce.h's table. Off (before MPI_Init, after MPI_Finalize, GDTE_DISABLE=1), straight
 * to the next definition in the chain. On, deferred GPU work is completed first (the MPI may read
 * what it produced); then, when a device buffer is possible, the call goes to gdte: the blocking
 * forms within the node GPU to GPU where they can (interpose_reduce_node.c, also under a
 * GPU-aware MPI), else through gdte's mirrors when the MPI cannot read device memory, else to
 * the MPI as it is; with no GPU and no fake device, straight to the MPI. MPI_Reduce_local on device buffers runs gdte's reduction kernels in both
 * cases. The persistent forms (Open MPI's MPIX_<name>_init, MPI-4's MPI_<name>_init) are here
 * where the MPI's headers declare them.
 */
#include "interpose_reduce.h"

/* The body of a shim: off, or on without a device buffer possible, the next definition's call
 * `next`; else gdte's `carry`. `flush`: gdte_ipo_block_flush for a blocking call (which may
 * block inside the MPI), gdte_ipo_pending_flush for the others. */
#define RED_SHIM_F(flush, next, carry)                                         \
    do {                                                                       \
        if (!gdte_ipo_on() || (flush(), !gdte_red_checking() && !gdte_red_node_possible())) \
            return next;                                                       \
        return carry;                                                          \
    } while (0)
#define RED_SHIM(next, carry) RED_SHIM_F(gdte_ipo_pending_flush, next, carry)
#define HOW(...) ((gdte_red_how_t){__VA_ARGS__})

/* Blocking (req NULL) and nonblocking shims of one reduction. */
#define RED_PAIR(name, iname, params, args, f)                                                         \
    GDTE_IPO_EXPORT int MPI_##name(GDTE_PI_UNPAREN params, MPI_Comm comm)                              \
    {                                                                                                  \
        RED_SHIM_F(gdte_ipo_block_flush, RED_NEXT(name)(GDTE_PI_UNPAREN args, comm),                   \
                   gdte_red_##f(GDTE_PI_UNPAREN args, comm, HOW(.req = NULL)));                        \
    }                                                                                                  \
    GDTE_IPO_EXPORT int MPI_##iname(GDTE_PI_UNPAREN params, MPI_Comm comm, MPI_Request *request)       \
    {                                                                                                  \
        if (!request && gdte_ipo_on()) return gdte_ipo_null_request(comm, "MPI_" #iname);              \
        RED_SHIM(RED_NEXT(iname)(GDTE_PI_UNPAREN args, comm, request),                                 \
                 gdte_red_##f(GDTE_PI_UNPAREN args, comm, HOW(.req = request)));                       \
    }
GDTE_RED_LIST(RED_PAIR)

GDTE_IPO_EXPORT int MPI_Reduce_local(const void *inbuf, void *inoutbuf, int count, MPI_Datatype datatype, MPI_Op op)
{
    if (!gdte_ipo_on()) return RED_NEXT(Reduce_local)(inbuf, inoutbuf, count, datatype, op);
    gdte_ipo_pending_flush();
    return gdte_red_reduce_local(inbuf, inoutbuf, count, datatype, op);
}

/* The persistent form `fname` of naming `kind` (MPI_ERR_INTERN where the MPI has no next one). */
#define RED_INIT(fname, kind, name, params, args, f)                                                      \
    GDTE_IPO_EXPORT int fname(GDTE_PI_UNPAREN params, MPI_Comm comm, MPI_Info info, MPI_Request *request) \
    {                                                                                                     \
        if (!request && gdte_ipo_on()) return gdte_ipo_null_request(comm, #fname);                       \
        RED_SHIM(gdte_red_init_next_g[kind].name                                                          \
                     ? gdte_red_init_next_g[kind].name(GDTE_PI_UNPAREN args, comm, info, request)         \
                     : MPI_ERR_INTERN,                                                                    \
                 gdte_red_##f(GDTE_PI_UNPAREN args, comm, HOW(.req = request, .init = kind, .info = info))); \
    }
#ifdef GDTE_HAVE_MPIX_PCOLL
#define RED_INIT_MPIX(name, iname, params, args, f) RED_INIT(MPIX_##name##_init, GDTE_PINIT_MPIX, name, params, args, f)
GDTE_RED_LIST(RED_INIT_MPIX)
#endif
#ifdef GDTE_HAVE_MPI4_PCOLL
#define RED_INIT_MPI4(name, iname, params, args, f) RED_INIT(MPI_##name##_init, GDTE_PINIT_MPI4, name, params, args, f)
GDTE_RED_LIST(RED_INIT_MPI4)
#endif
