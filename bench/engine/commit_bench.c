/*
 * bench/engine/commit_bench: what MPI_Type_commit costs a host-only program, run with and
 * without the interposer preloaded (the caller compares). 100,000 commits and frees of a small
 * vector type, then one commit of an indexed type of 2x10^6 blocks (time and resident memory).
 * Prints one line: label commit_us_per_type indexed_commit_ms rss_growth_kb.
 * Usage: mpirun -n 1 [-x LD_PRELOAD=.../libgdte_mpi.so] commit_bench LABEL
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

static long rss_kb(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    const int n = 100000;
    double t0 = MPI_Wtime();
    for (int i = 0; i < n; i++) {
        MPI_Datatype t;
        MPI_Type_vector(4 + i % 7, 2, 5, MPI_DOUBLE, &t);
        MPI_Type_commit(&t);
        MPI_Type_free(&t);
    }
    double per = (MPI_Wtime() - t0) / n * 1e6;
    const int nb = 2000000;
    int *len = malloc(nb * sizeof *len), *disp = malloc(nb * sizeof *disp);
    for (int i = 0; i < nb; i++) {
        len[i] = 1 + i % 3;
        disp[i] = 5 * i;
    }
    long r0 = rss_kb();
    MPI_Datatype big;
    MPI_Type_indexed(nb, len, disp, MPI_INT, &big);
    t0 = MPI_Wtime();
    MPI_Type_commit(&big);
    double ms = (MPI_Wtime() - t0) * 1e3;
    long grow = rss_kb() - r0;
    MPI_Type_free(&big);
    printf("%s %.3f %.1f %ld\n", argc > 1 ? argv[1] : "run", per, ms, grow);
    free(len);
    free(disp);
    MPI_Finalize();
    return 0;
}
