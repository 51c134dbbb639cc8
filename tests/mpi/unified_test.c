/*
 * Device windows under programs written for the unified memory model (which the MPI reports when
 * gdte is not there), synchronised by MPI_Barrier alone, as MPICH's compare_and_swap and
 * lockcontention2 tests are:
 *  A. every rank but 0 puts its rank into word r of rank 0's window inside a lock/unlock epoch;
 *     MPI_Barrier; rank 0 reads its window memory directly: word r must be r;
 *  B. rank 0 stores 1000 + i into word i of its window memory directly; MPI_Barrier; every other
 *     rank gets the whole window inside a lock/unlock epoch: word i must be 1000 + i;
 *  C. after MPI_Win_free of a window whose memory the application released first (MPICH's
 *     test3 does so), the program goes on (no final merge into the released memory).
 * On device memory (the interposer merges device windows before and after each MPI_Barrier) and
 * on host memory (the MPI alone), np 2 or more. Where the MPI creates no host window at all
 * (its one-sided component unusable on that machine), the program says so and exits 77.
 */
#include "mpitest.h"

enum { W = 64 };

static void phases(int dev)
{
    int *mem = mt_alloc(dev, W * sizeof(int)), h[W];
    for (int i = 0; i < W; i++) h[i] = -1;
    mt_put(mem, h, sizeof h);
    MPI_Win win;
    MT_MPI(MPI_Win_create(mem, W * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
    /* A */
    if (mt_rank != 0) {
        int v = mt_rank;
        MT_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        MT_MPI(MPI_Put(&v, 1, MPI_INT, 0, mt_rank % W, 1, MPI_INT, win));
        MT_MPI(MPI_Win_unlock(0, win));
    }
    MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (mt_rank == 0) {
        mt_get(h, mem, sizeof h);
        for (int r = 1; r < mt_size && r < W; r++)
            MT_CHECK(h[r] == r, "dev %d: A: word %d of rank 0's window is %d after the barrier, want %d", dev, r, h[r], r);
        MT_CHECK(h[0] == -1, "dev %d: A: word 0 changed to %d", dev, h[0]);
        /* B */
        for (int i = 0; i < W; i++) h[i] = 1000 + i;
        mt_put(mem, h, sizeof h);
    }
    MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (mt_rank != 0) {
        int got[W];
        memset(got, 0, sizeof got);
        MT_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        MT_MPI(MPI_Get(got, W, MPI_INT, 0, 0, W, MPI_INT, win));
        MT_MPI(MPI_Win_unlock(0, win));
        int bad = -1;
        for (int i = 0; i < W && bad < 0; i++)
            if (got[i] != 1000 + i) bad = i;
        MT_CHECK(bad < 0, "dev %d: B: word %d read from rank 0 is %d, want %d", dev, bad, bad >= 0 ? got[bad] : 0,
                 1000 + bad);
    }
    MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
    /* C: the memory released before the window. */
    mt_free(dev, mem);
    MT_MPI(MPI_Win_free(&win));
    MT_CHECK(win == MPI_WIN_NULL, "dev %d: C: MPI_Win_free left the handle", dev);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv);
    /* Does the MPI create windows here at all? */
    int probe_mem[4], ok;
    MPI_Win probe;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rc = MPI_Win_create(probe_mem, sizeof probe_mem, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &probe);
    if (rc == MPI_SUCCESS) MPI_Win_free(&probe);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Allreduce(&(int){rc == MPI_SUCCESS}, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!ok) {
        if (mt_rank == 0) printf("unified_test: this MPI creates no window on host memory; skipped\n");
        MPI_Finalize();
        return 77;
    }
    for (int dev = 1; dev >= 0; dev--) phases(dev);
    return mt_finish("unified_test");
}
