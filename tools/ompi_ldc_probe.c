/* A probe of the MPI alone (host buffers, nothing of gdte's): process 1 receives `n` elements
 * of MPI_C_LONG_DOUBLE_COMPLEX (or `ld`: MPI_LONG_DOUBLE, `ldi`: MPI_LONG_DOUBLE_INT) through a
 * vector of stride 2 from process 0, which sends them as MPI_PACKED (how 0), as the same
 * elements contiguous (how 1) or as bytes (how 2), and says how many elements arrived wrong.
 * Open MPI 4.1.6 as the GPU machine has it aborts in its unpack for 32-byte elements past the
 * eager size (docs/RELIABILITY.md). Run by tools/device_run.sh, section ompi_probe:
 *   mpicc -o ompi_ldc_probe tools/ompi_ldc_probe.c && mpirun -np 2 ./ompi_ldc_probe HOW N [ld|ldi] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int how = atoi(argv[1]), n = atoi(argv[2]);
    MPI_Datatype el = argc > 3 && !strcmp(argv[3], "ld") ? MPI_LONG_DOUBLE : argc > 3 && !strcmp(argv[3], "ldi") ? MPI_LONG_DOUBLE_INT : MPI_C_LONG_DOUBLE_COMPLEX;
    MPI_Aint lb, ext;
    MPI_Type_get_extent(el, &lb, &ext);
    int esz;
    MPI_Type_size(el, &esz);
    MPI_Datatype v;
    MPI_Type_vector(n, 1, 2, el, &v);
    MPI_Type_commit(&v);
    char *a = calloc(2 * n + 2, ext), *b = calloc(2 * n + 2, ext);
    for (size_t i = 0; i < (size_t)(2 * n) * ext; i++) a[i] = (char)(i * 7 + 1);
    int psz = 0, pos = 0;
    MPI_Pack_size(n, el, MPI_COMM_WORLD, &psz);
    char *p = malloc(psz);
    MPI_Pack(a, n, el, p, psz, &pos, MPI_COMM_WORLD);
    if (rank == 0) {
        if (how == 0) MPI_Send(p, pos, MPI_PACKED, 1, 5, MPI_COMM_WORLD);
        else if (how == 1) MPI_Send(a, n, el, 1, 5, MPI_COMM_WORLD);
        else MPI_Send(p, pos, MPI_BYTE, 1, 5, MPI_COMM_WORLD);
    } else if (rank == 1) {
        MPI_Status st;
        MPI_Recv(b, 1, v, 0, 5, MPI_COMM_WORLD, &st);
        int bad = 0;
        for (int i = 0; i < n; i++) if (memcmp(b + 2 * (size_t)i * ext, a + (size_t)i * ext, esz)) bad++;
        printf("how %d n %d el %d bytes: %d bad elements\n", how, n, esz, bad);
    }
    MPI_Finalize();
    return 0;
}
