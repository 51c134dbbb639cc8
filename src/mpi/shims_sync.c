/*
 * Calls with no buffer that may block inside the MPI: MPI_Barrier (which also merges device
 * windows, see gdte_ipo_rma_barrier_merge), and collective creation and release of windows, files
 * and connections (the synchronisation calls of windows, MPI_Win_create and MPI_Win_free are
 * interpose_rma.c's, which does the same first). gdte carries nothing here; it defines them so that, before the MPI may block,
 * the nonblocking device sends to other nodes whose fragments are still being packed are
 * posted (gdte_ipo_block_flush: it waits for the GPU alone). Without it a program that posts an
 * MPI_Isend and enters MPI_Barrier, while its receiver waits in MPI_Recv for that message before
 * its own barrier, would hang. Off (before MPI_Init, after MPI_Finalize, GDTE_DISABLE=1), and on
 * with nothing pending, a shim costs two loads before the next definition in the chain.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include "interpose.h"

/* clang-format off */
#define GDTE_SYNC_LIST(X)                                                                                   \
    X(MPI_Win_start, (MPI_Group group, int assert, MPI_Win win), (group, assert, win))                      \
    X(MPI_Win_allocate, (MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void *baseptr,          \
                         MPI_Win *win), (size, disp_unit, info, comm, baseptr, win))                        \
    X(MPI_Win_allocate_shared, (MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void *baseptr,   \
                                MPI_Win *win), (size, disp_unit, info, comm, baseptr, win))                 \
    X(MPI_Win_create_dynamic, (MPI_Info info, MPI_Comm comm, MPI_Win *win), (info, comm, win))              \
    X(MPI_File_open, (MPI_Comm comm, const char *filename, int amode, MPI_Info info, MPI_File *fh),         \
      (comm, filename, amode, info, fh))                                                                    \
    X(MPI_File_close, (MPI_File *fh), (fh))                                                                 \
    X(MPI_File_sync, (MPI_File fh), (fh))                                                                   \
    X(MPI_File_set_view, (MPI_File fh, MPI_Offset disp, MPI_Datatype etype, MPI_Datatype filetype,          \
                          const char *datarep, MPI_Info info), (fh, disp, etype, filetype, datarep, info))  \
    X(MPI_File_set_size, (MPI_File fh, MPI_Offset size), (fh, size))                                        \
    X(MPI_File_preallocate, (MPI_File fh, MPI_Offset size), (fh, size))                                     \
    X(MPI_Comm_accept, (const char *port_name, MPI_Info info, int root, MPI_Comm comm, MPI_Comm *newcomm),  \
      (port_name, info, root, comm, newcomm))                                                               \
    X(MPI_Comm_connect, (const char *port_name, MPI_Info info, int root, MPI_Comm comm, MPI_Comm *newcomm), \
      (port_name, info, root, comm, newcomm))                                                               \
    X(MPI_Comm_disconnect, (MPI_Comm *comm), (comm))
/* clang-format on */

/* The next definitions in the chain (see interpose_core.c for why not PMPI_ directly). */
static struct {
#define GDTE_X_SYNC_FIELD(name, params, args) __typeof__(&P##name) name;
    GDTE_SYNC_LIST(GDTE_X_SYNC_FIELD)
#undef GDTE_X_SYNC_FIELD
} sync_next;

__attribute__((constructor)) static void sync_resolve_next(void)
{
#define GDTE_X_SYNC_RESOLVE(name, params, args)                           \
    sync_next.name = (__typeof__(sync_next.name))dlsym(RTLD_NEXT, #name); \
    if (!sync_next.name) sync_next.name = P##name;
    GDTE_SYNC_LIST(GDTE_X_SYNC_RESOLVE)
#undef GDTE_X_SYNC_RESOLVE
}

#define GDTE_X_SYNC_SHIM(name, params, args)          \
    GDTE_IPO_EXPORT int name params                   \
    {                                                 \
        if (gdte_ipo_on()) gdte_ipo_block_flush();    \
        return sync_next.name args;                   \
    }
GDTE_SYNC_LIST(GDTE_X_SYNC_SHIM)
#undef GDTE_X_SYNC_SHIM

static __typeof__(&PMPI_Barrier) barrier_next;
__attribute__((constructor)) static void barrier_resolve_next(void)
{
    barrier_next = (__typeof__(barrier_next))dlsym(RTLD_NEXT, "MPI_Barrier");
    if (!barrier_next) barrier_next = PMPI_Barrier;
}

/* MPI_Barrier also merges this process's device windows before and after the MPI's barrier, for
 * programs written for the unified memory model (gdte_ipo_rma_barrier_merge says why). */
GDTE_IPO_EXPORT int MPI_Barrier(MPI_Comm comm)
{
    if (!gdte_ipo_on()) return barrier_next(comm);
    gdte_ipo_block_flush();
    int before = gdte_ipo_rma_barrier_merge(); /* the barrier still happens: the peers are in it */
    int rc = barrier_next(comm);
    int after = gdte_ipo_rma_barrier_merge();
    return rc != MPI_SUCCESS ? rc : before != MPI_SUCCESS ? before : after;
}
