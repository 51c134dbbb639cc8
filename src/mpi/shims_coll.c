/*
 * The collectives libgdte_mpi.so carries on device buffers (interpose_coll.c): one thin shim
 * each, blocking, nonblocking and persistent (Open MPI's MPIX_<name>_init and MPI-4's
 * MPI_<name>_init, where the MPI's headers declare them), all from interpose_coll.h's table.
 * Off (before MPI_Init, after MPI_Finalize, GDTE_DISABLE=1) a shim hands its call to the next
 * definition untouched; on, it first completes GPU work gdte deferred (the MPI may read what it
 * produced), then describes its arguments for gdte_ipo_coll. The parameter lists are refuse.h's
 * shapes, which follow this mpi.h.
 */
#include "interpose_coll.h"
#include "refuse.h"

/* Off: the next definition; on: gdte_ipo_coll on the arguments `a`. */
#define COLL_RUN(...)                                          \
    do {                                                       \
        const gdte_coll_args_t a = {__VA_ARGS__};              \
        if (!gdte_ipo_on()) return gdte_ipo_coll_next(&a);     \
        if (a.req) gdte_ipo_pending_flush();                   \
        else gdte_ipo_block_flush();                           \
        return gdte_ipo_coll(&a);                              \
    } while (0)

/* Blocking (req NULL) and nonblocking shims of one collective. */
#define COLL_PAIR(name, iname, OP, params, args, ...)                                         \
    GDTE_IPO_EXPORT int MPI_##name(GDTE_PI_UNPAREN params, MPI_Comm comm)                     \
    {                                                                                         \
        COLL_RUN(.op = GDTE_COLL_##OP, __VA_ARGS__, .comm = comm, .req = NULL);               \
    }                                                                                         \
    GDTE_IPO_EXPORT int MPI_##iname(GDTE_PI_UNPAREN params, MPI_Comm comm, MPI_Request *request) \
    {                                                                                         \
        if (!request && gdte_ipo_on()) return gdte_ipo_null_request(comm, "MPI_" #iname);     \
        COLL_RUN(.op = GDTE_COLL_##OP, __VA_ARGS__, .comm = comm, .req = request);            \
    }
GDTE_COLL_LIST(COLL_PAIR)

/* The persistent form `fname` of naming `kind`. */
#define COLL_INIT(fname, kind, OP, params, ...)                                                              \
    GDTE_IPO_EXPORT int fname(GDTE_PI_UNPAREN params, MPI_Comm comm, MPI_Info info, MPI_Request *request)    \
    {                                                                                                        \
        if (!request && gdte_ipo_on()) return gdte_ipo_null_request(comm, #fname);                          \
        COLL_RUN(.op = GDTE_COLL_##OP, __VA_ARGS__, .comm = comm, .req = request, .init = kind, .info = info); \
    }
#ifdef GDTE_HAVE_MPIX_PCOLL
#define COLL_INIT_MPIX(name, iname, OP, params, args, ...) \
    COLL_INIT(MPIX_##name##_init, GDTE_PINIT_MPIX, OP, params, __VA_ARGS__)
GDTE_COLL_LIST(COLL_INIT_MPIX)
#endif
#ifdef GDTE_HAVE_MPI4_PCOLL
#define COLL_INIT_MPI4(name, iname, OP, params, args, ...) \
    COLL_INIT(MPI_##name##_init, GDTE_PINIT_MPI4, OP, params, __VA_ARGS__)
GDTE_COLL_LIST(COLL_INIT_MPI4)
#endif
