/*
 * MPI_Finalize returns although a device receive was freed (MPI_Request_free) while never
 * matched, as it does under plain MPI; the freed receive once made the interposer's finalize
 * wait for it forever. A freed device send that did complete is cleaned up too. CTest's
 * timeout is the check for the hang; the counters check the cleanup.
 */
#include "mpitest.h"

int main(int argc, char **argv)
{
    mt_init(&argc, &argv);
    MPI_Datatype v;
    MPI_Type_vector(16, 2, 3, MPI_INT, &v);
    MPI_Type_commit(&v);
    int *r = mt_devmem_alloc(48 * sizeof(int)), *s = mt_devmem_alloc(48 * sizeof(int));
    MPI_Request q;
    /* Nobody ever sends tag 77. */
    MT_MPI(MPI_Irecv(r, 1, v, MPI_ANY_SOURCE, 77, MPI_COMM_WORLD, &q));
    MT_MPI(MPI_Request_free(&q));
    MT_CHECK(q == MPI_REQUEST_NULL, "freed request not nulled");
    /* A freed send to the next rank, received there. */
    int peer = (mt_rank + 1) % mt_size, from = (mt_rank + mt_size - 1) % mt_size;
    MT_MPI(MPI_Isend(s, 1, v, peer, 5, MPI_COMM_WORLD, &q));
    MT_MPI(MPI_Request_free(&q));
    MT_MPI(MPI_Recv(r, 1, v, from, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    if (mt_expect_gdte()) MT_CHECK(mt_counter("orphans") == 2, "orphans %lld, want 2", (long long)mt_counter("orphans"));
    MPI_Type_free(&v);
    mt_devmem_free(r);
    mt_devmem_free(s);
    int rc = mt_finish("finalize_test");
    /* Reached only if MPI_Finalize returned. */
    return rc;
}
