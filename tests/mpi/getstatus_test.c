/*
 * MPI_Request_get_status on nonblocking collectives and reductions of device buffers: when it
 * says complete, the result must already be in the application's buffer (the standard's
 * meaning of completion), before the MPI_Wait that frees the request; the wait then reports
 * the same and does not unpack or copy back a second time.
 *  - MPI_Iallreduce (MPI_SUM of doubles) and MPI_Ialltoall (a vector type on both sides), on
 *    device buffers, each against the values it must have.
 */
#include "mpitest.h"

enum { N = 1000 };

static void poll_done(MPI_Request r)
{
    int flag = 0;
    MPI_Status st;
    while (!flag) MT_MPI(MPI_Request_get_status(r, &flag, &st));
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv);
    for (int dev = 1; dev >= 0; dev--) {
        /* Allreduce: element i of rank r is r + i; the sum is size*i + size*(size-1)/2. */
        double *in = mt_alloc(dev, N * sizeof(double)), *out = mt_alloc(dev, N * sizeof(double));
        double *h = malloc(N * sizeof(double));
        for (int i = 0; i < N; i++) h[i] = mt_rank + i;
        mt_put(in, h, N * sizeof(double));
        for (int i = 0; i < N; i++) h[i] = -1;
        mt_put(out, h, N * sizeof(double));
        MPI_Request r;
        MT_MPI(MPI_Iallreduce(in, out, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &r));
        poll_done(r);
        mt_get(h, out, N * sizeof(double));
        int bad = -1;
        for (int i = 0; i < N && bad < 0; i++)
            if (h[i] != (double)mt_size * i + mt_size * (mt_size - 1) / 2.0) bad = i;
        MT_CHECK(bad < 0, "dev %d: Iallreduce result not in the buffer when MPI_Request_get_status said complete (element %d: %g)",
                 dev, bad, bad >= 0 ? h[bad] : 0.0);
        MT_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        mt_get(h, out, N * sizeof(double));
        bad = -1;
        for (int i = 0; i < N && bad < 0; i++)
            if (h[i] != (double)mt_size * i + mt_size * (mt_size - 1) / 2.0) bad = i;
        MT_CHECK(bad < 0, "dev %d: Iallreduce result after MPI_Wait (element %d)", dev, bad);
        MT_CHECK(r == MPI_REQUEST_NULL, "dev %d: MPI_Wait did not free the request", dev);
        mt_free(dev, in);
        mt_free(dev, out);
        free(h);

        /* Alltoall of a vector type (2 of every 3 ints): block k of rank r holds 1000r + k. */
        MPI_Datatype v;
        MPI_Type_vector(4, 2, 3, MPI_INT, &v);
        MPI_Type_commit(&v);
        MPI_Aint lb, ext;
        MPI_Type_get_extent(v, &lb, &ext);
        size_t span = (size_t)ext * mt_size;
        int *sb = mt_alloc(dev, span), *rb = mt_alloc(dev, span), *hs = malloc(span), *hr = malloc(span);
        for (int k = 0; k < mt_size; k++)
            for (int j = 0; j < (int)(ext / sizeof(int)); j++) hs[k * (ext / sizeof(int)) + j] = 1000 * mt_rank + k;
        mt_put(sb, hs, span);
        memset(hr, 0x5a, span);
        mt_put(rb, hr, span);
        MT_MPI(MPI_Ialltoall(sb, 1, v, rb, 1, v, MPI_COMM_WORLD, &r));
        poll_done(r);
        mt_get(hr, rb, span);
        int ok = 1;
        for (int k = 0; k < mt_size; k++)
            for (int j = 0; j < (int)(ext / sizeof(int)); j++) {
                int in_type = j % 3 < 2;
                int got = hr[k * (ext / sizeof(int)) + j], want = 1000 * k + mt_rank;
                if (in_type ? got != want : got != 0x5a5a5a5a) ok = 0;
            }
        MT_CHECK(ok, "dev %d: Ialltoall result not in the buffer when MPI_Request_get_status said complete", dev);
        MT_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        mt_get(hr, rb, span);
        for (int k = 0; k < mt_size; k++) MT_CHECK(hr[k * (ext / sizeof(int))] == 1000 * k + mt_rank, "dev %d: after Wait", dev);
        MPI_Type_free(&v);
        mt_free(dev, sb);
        mt_free(dev, rb);
        free(hs);
        free(hr);
    }
    return mt_finish("getstatus_test");
}
