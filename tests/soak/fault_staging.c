/*
 * Staging out of memory, forced by GDTE_FAULT_STAGING_OOM=1: the first staging allocation of
 * each rank fails. With MPI_ERRORS_RETURN, the device-buffer call that needed it must fail with
 * MPI_ERR_NO_MEM having sent or posted nothing; the same call again must then work, the data
 * must arrive intact, and no stray message may be left behind.
 * An ordinary MPI program; gdte is reached only through the preloaded library's weak hooks.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern int gdte_fake_device_register(void *ptr, size_t size) __attribute__((weak));
extern int64_t gdte_mpi_counter(const char *name) __attribute__((weak));

static int rank;
static void die(const char *m)
{
    fprintf(stderr, "fault_staging[%d]: FAIL: %s\n", rank, m);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (!gdte_fake_device_register) die("run under LD_PRELOAD=libgdte_mpi.so GDTE_FAKE_DEVICE=1");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    enum { N = 4096 };
    MPI_Datatype v; /* every other double of 2N */
    MPI_Type_vector(N, 1, 2, MPI_DOUBLE, &v);
    MPI_Type_commit(&v);
    double *buf = malloc(2 * N * sizeof(double));
    if (!buf || gdte_fake_device_register(buf, 2 * N * sizeof(double))) die("buffer");
    int rc, cls;
    if (rank == 0) {
        for (int i = 0; i < 2 * N; i++) buf[i] = i;
        rc = MPI_Send(buf, 1, v, 1, 7, MPI_COMM_WORLD);
        MPI_Error_class(rc, &cls);
        if (rc == MPI_SUCCESS || cls != MPI_ERR_NO_MEM) die("the first send should fail with MPI_ERR_NO_MEM");
        printf("fault_staging[0]: first device send refused with MPI_ERR_NO_MEM, as injected\n");
        if (MPI_Send(buf, 1, v, 1, 7, MPI_COMM_WORLD) != MPI_SUCCESS) die("the retried send failed");
        if (MPI_Send(buf, 0, MPI_DOUBLE, 1, 8, MPI_COMM_WORLD) != MPI_SUCCESS) die("end marker");
    } else if (rank == 1) {
        for (int i = 0; i < 2 * N; i++) buf[i] = -1.0;
        MPI_Request rq;
        rc = MPI_Irecv(buf, 1, v, 0, 7, MPI_COMM_WORLD, &rq);
        MPI_Error_class(rc, &cls);
        if (rc == MPI_SUCCESS || cls != MPI_ERR_NO_MEM) die("the first receive should fail with MPI_ERR_NO_MEM");
        printf("fault_staging[1]: first device receive refused with MPI_ERR_NO_MEM, as injected\n");
        MPI_Status st;
        if (MPI_Recv(buf, 1, v, 0, 7, MPI_COMM_WORLD, &st) != MPI_SUCCESS) die("the retried receive failed");
        for (int i = 0; i < 2 * N; i++)
            if (buf[i] != (i % 2 ? -1.0 : (double)i)) die("wrong data after the retry");
        /* The refused send sent nothing: only the end marker is left. */
        if (MPI_Recv(NULL, 0, MPI_DOUBLE, 0, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE) != MPI_SUCCESS) die("end marker");
        int flag = 1;
        MPI_Iprobe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        if (flag) die("a stray message arrived: the refused send was not refused");
        printf("fault_staging[1]: retry delivered intact data, nothing stray\n");
    }
    MPI_Type_free(&v);
    MPI_Barrier(MPI_COMM_WORLD);
    if (gdte_mpi_counter && (gdte_mpi_counter("requests_live") != 0 || gdte_mpi_counter("stage_bytes_in_use") != 0))
        die("requests or staging left behind");
    MPI_Finalize();
    return 0;
}
