/*
 * gdte demo: an ordinary MPI program, 2 ranks, derived datatypes on device buffers.
 *   1. a 3-D halo exchange (6 faces as subarray types) on a periodic 2x1x1 decomposition;
 *   2. a matrix-transpose ping-pong (contiguous send, column-vector type receive).
 * Nothing in it calls gdte: run it with LD_PRELOAD=libgdte_mpi.so and the interposer makes the
 * device buffers work on an MPI that is not GPU-aware. Each result, the plain-MPI reference's
 * too, is checked against the values it must have, and the gdte result also against the
 * reference byte for byte.
 * Without a GPU (or built without CUDA) the "device" buffers are host memory that the
 * interposer is told to treat as device memory (GDTE_FAKE_DEVICE=1), so the same gdte path runs
 * on its host backend; every row then says "host memory posing as device memory".
 * Run: mpirun -np 2 -x LD_PRELOAD=/full/path/libgdte_mpi.so [-x GDTE_FAKE_DEVICE=1] gdte_demo [n] [m]
 *   n: halo grid edge (default 64), m: matrix edge (default 1024)
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef GDTE_DEMO_CUDA
#include <cuda_runtime.h>
#endif

extern int gdte_fake_device_register(void *ptr, size_t size) __attribute__((weak));
extern int64_t gdte_mpi_counter(const char *name) __attribute__((weak));

static int rank, use_gpu, interposed;
static char device_memory[300] = "host memory posing as device memory";

static void die(const char *msg)
{
    fprintf(stderr, "demo[%d]: %s\n", rank, msg);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static void *dev_alloc(size_t n)
{
    void *p = NULL;
#ifdef GDTE_DEMO_CUDA
    if (use_gpu) {
        if (cudaMalloc(&p, n) != cudaSuccess) die("cudaMalloc failed");
        return p;
    }
#endif
    p = malloc(n);
    if (!p) die("out of memory");
    if (gdte_fake_device_register && gdte_fake_device_register(p, n) != 0) die("fake device registration failed");
    return p;
}

static void copy(void *dst, const void *src, size_t n)
{
#ifdef GDTE_DEMO_CUDA
    if (use_gpu) {
        if (cudaMemcpy(dst, src, n, cudaMemcpyDefault) != cudaSuccess) die("cudaMemcpy failed");
        return;
    }
#endif
    memcpy(dst, src, n);
}

static double value(long x, long y, long z) { return (double)((x * 73856093L) ^ (y * 19349663L) ^ (z * 83492791L)) * 1e-3; }

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, cmp_dbl);
    return t[n / 2];
}

typedef struct row {
    const char *test, *memory, *path;
    double bytes, usec;
    int ok;
} row_t;

/* 1 on every rank when `ok` holds on every rank. */
static int all_ranks(int ok)
{
    int all;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    return all;
}

/* ---- 3-D halo exchange ---- */
typedef struct halo {
    MPI_Datatype send[6], recv[6];
    int peer[6], tag_send[6], tag_recv[6];
} halo_t;

static void halo_types(halo_t *h, int n, int left, int right)
{
    /* grid (n+2)^3 doubles, C order [z][y][x]; direction d: axis d/2, side d%2 (0 low, 1 high) */
    int sizes[3] = {n + 2, n + 2, n + 2};
    for (int d = 0; d < 6; d++) {
        int axis = d / 2, high = d % 2; /* axis 0 = x (fastest, index 2 in C order) */
        int cidx = 2 - axis;
        int sub[3] = {n, n, n}, s_start[3] = {1, 1, 1}, r_start[3] = {1, 1, 1};
        sub[cidx] = 1;
        s_start[cidx] = high ? n : 1;     /* interior face next to that side */
        r_start[cidx] = high ? n + 1 : 0; /* halo on that side */
        MPI_Type_create_subarray(3, sizes, sub, s_start, MPI_ORDER_C, MPI_DOUBLE, &h->send[d]);
        MPI_Type_create_subarray(3, sizes, sub, r_start, MPI_ORDER_C, MPI_DOUBLE, &h->recv[d]);
        MPI_Type_commit(&h->send[d]);
        MPI_Type_commit(&h->recv[d]);
        h->peer[d] = axis == 0 ? (high ? right : left) : rank; /* y, z periodic within the rank */
        h->tag_send[d] = d;                                    /* sent towards side d ... */
        h->tag_recv[d] = d ^ 1;                                /* ... arrives on the opposite side */
    }
}

static void halo_exchange(const halo_t *h, double *grid)
{
    MPI_Request rq[12];
    for (int d = 0; d < 6; d++)
        MPI_Irecv(grid, 1, h->recv[d], h->peer[d], h->tag_recv[d], MPI_COMM_WORLD, &rq[d]);
    for (int d = 0; d < 6; d++)
        MPI_Isend(grid, 1, h->send[d], h->peer[d], h->tag_send[d], MPI_COMM_WORLD, &rq[6 + d]);
    MPI_Waitall(12, rq, MPI_STATUSES_IGNORE);
}

/* Every face halo holds its neighbour's interior value (x across ranks, y and z periodic
 * within the rank). */
static int halo_correct(const double *g, int n, int nranks)
{
    long gx = (long)nranks * n;
    for (int z = 1; z <= n; z++)
        for (int y = 1; y <= n; y++) {
            size_t row = ((size_t)z * (n + 2) + y) * (n + 2);
            long xl = ((long)rank * n - 1 + gx) % gx, xr = ((long)rank * n + n) % gx;
            if (g[row] != value(xl, y - 1, z - 1) || g[row + n + 1] != value(xr, y - 1, z - 1)) return 0;
            size_t ylo = ((size_t)z * (n + 2) + 0) * (n + 2) + y, zlo = ((size_t)0 * (n + 2) + z) * (n + 2) + y;
            if (g[ylo] != value(rank * n + y - 1, n - 1, z - 1) || g[zlo] != value(rank * n + y - 1, z - 1, n - 1))
                return 0;
        }
    return 1;
}

static void run_halo(int n, int nranks, row_t *dev_row, row_t *host_row)
{
    int left = (rank + nranks - 1) % nranks, right = (rank + 1) % nranks;
    halo_t h;
    halo_types(&h, n, left, right);
    size_t cells = (size_t)(n + 2) * (n + 2) * (n + 2), bytes = cells * sizeof(double);
    double *init = malloc(bytes), *hostgrid = malloc(bytes), *back = malloc(bytes);
    if (!init || !hostgrid || !back) die("out of memory");
    for (int z = 0; z < n + 2; z++)
        for (int y = 0; y < n + 2; y++)
            for (int x = 0; x < n + 2; x++) {
                size_t i = ((size_t)z * (n + 2) + y) * (n + 2) + x;
                int interior = x >= 1 && x <= n && y >= 1 && y <= n && z >= 1 && z <= n;
                init[i] = interior ? value(rank * n + x - 1, y - 1, z - 1) : -1.0; /* halos poisoned */
            }
    double *grid = dev_alloc(bytes);
    copy(grid, init, bytes);
    const int iters = 20;
    double t[64];
    for (int it = -3; it < iters; it++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        halo_exchange(&h, grid);
        if (it >= 0) t[it] = MPI_Wtime() - t0;
    }
    copy(back, grid, bytes);
    dev_row->usec = median(t, iters) * 1e6;
    /* The same exchange through plain MPI on host buffers. */
    memcpy(hostgrid, init, bytes);
    for (int it = -3; it < iters; it++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        halo_exchange(&h, hostgrid);
        if (it >= 0) t[it] = MPI_Wtime() - t0;
    }
    host_row->usec = median(t, iters) * 1e6;
    /* The reference must be right, and gdte's result right and identical to it. */
    host_row->ok = all_ranks(halo_correct(hostgrid, n, nranks));
    dev_row->ok = all_ranks(halo_correct(back, n, nranks) && memcmp(back, hostgrid, bytes) == 0);
    dev_row->bytes = host_row->bytes = (double)n * n * sizeof(double) * 6;
    for (int d = 0; d < 6; d++) {
        MPI_Type_free(&h.send[d]);
        MPI_Type_free(&h.recv[d]);
    }
    free(init);
    free(hostgrid);
    free(back);
}

/* ---- transpose ping-pong ---- */
/* After the round trip rank 1 holds A^T and rank 0 holds (A^T)^T = A. */
static int transpose_correct(const double *got, const double *a, int m)
{
    for (size_t i = 0; i < (size_t)m; i++)
        for (size_t j = 0; j < (size_t)m; j++)
            if (got[i * m + j] != (rank == 1 ? a[j * m + i] : a[i * m + j])) return 0;
    return 1;
}

static void run_transpose(int m, row_t *dev_row, row_t *host_row)
{
    MPI_Datatype col, colr, tr;
    MPI_Type_vector(m, 1, m, MPI_DOUBLE, &col);
    MPI_Type_create_resized(col, 0, sizeof(double), &colr);
    MPI_Type_contiguous(m, colr, &tr); /* receiving row i of the sender into column i */
    MPI_Type_commit(&tr);
    size_t bytes = (size_t)m * m * sizeof(double);
    double *a = malloc(bytes), *hb = malloc(bytes), *back = malloc(bytes);
    if (!a || !hb || !back) die("out of memory");
    for (size_t i = 0; i < (size_t)m * m; i++) a[i] = value((long)(i / m), (long)(i % m), 7);
    double *d = dev_alloc(bytes);
    const int iters = 10;
    double t[64];
    for (int pass = 0; pass < 2; pass++) { /* 0: device buffers through gdte, 1: plain MPI on host */
        double *buf = pass == 0 ? d : hb;
        for (int it = -2; it < iters; it++) {
            if (pass == 0) copy(buf, a, bytes); else memcpy(buf, a, bytes);
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            if (rank == 0) { /* send contiguous, receive the transpose of what comes back */
                MPI_Send(buf, m * m, MPI_DOUBLE, 1, 1, MPI_COMM_WORLD);
                MPI_Recv(buf, 1, tr, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (rank == 1) {
                MPI_Recv(buf, 1, tr, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, m * m, MPI_DOUBLE, 0, 2, MPI_COMM_WORLD);
            }
            if (it >= 0) t[it] = MPI_Wtime() - t0;
        }
        (pass == 0 ? dev_row : host_row)->usec = median(t, iters) * 1e6;
    }
    copy(back, d, bytes);
    host_row->ok = all_ranks(transpose_correct(hb, a, m));
    dev_row->ok = all_ranks(transpose_correct(back, a, m) && memcmp(back, hb, bytes) == 0);
    dev_row->bytes = host_row->bytes = 2.0 * bytes; /* a round trip */
    MPI_Type_free(&tr);
    MPI_Type_free(&colr);
    MPI_Type_free(&col);
    free(a);
    free(hb);
    free(back);
}

/* Over both ranks: {device messages staged through the MPI, device messages sent GPU to GPU}. */
static void counters(long long c[2])
{
    long long mine[2] = {gdte_mpi_counter ? (long long)gdte_mpi_counter("sends") : 0,
                         gdte_mpi_counter ? (long long)gdte_mpi_counter("node_sends") : 0};
    MPI_Allreduce(mine, c, 2, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
}

static const char *device_path(int interposed, int use_gpu, long long staged, long long node)
{
    if (!interposed) return "MPI only (not gdte)";
    if (node > 0 && staged > 0) return use_gpu ? "gdte: GPU to GPU + staged MPI" : "gdte: node path + staged MPI";
    if (node > 0) return use_gpu ? "gdte: GPU to GPU (node path)" : "gdte: host backend, node path";
    return use_gpu ? "gdte: GPU pack, staged MPI" : "gdte: host pack, staged MPI";
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (nranks != 2) die("run with 2 ranks");
    int n = argc > 1 ? atoi(argv[1]) : 64, m = argc > 2 ? atoi(argv[2]) : 1024;
    if (n < 2 || m < 2) die("sizes must be >= 2");
#ifdef GDTE_DEMO_CUDA
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) == cudaSuccess && ndev > 0) {
        cudaSetDevice(rank % ndev);
        struct cudaDeviceProp p;
        cudaGetDeviceProperties(&p, rank % ndev);
        snprintf(device_memory, sizeof device_memory, "device memory (%s)", p.name);
        use_gpu = 1;
    }
#endif
    interposed = gdte_fake_device_register != NULL;
    if (!use_gpu && !interposed)
        die("no GPU and no gdte interposer: run under mpirun -x LD_PRELOAD=/full/path/libgdte_mpi.so -x GDTE_FAKE_DEVICE=1");
    row_t rows[4] = {{"halo3d 2x1x1", NULL, NULL, 0, 0, 0}, {"halo3d 2x1x1", NULL, NULL, 0, 0, 0},
                     {"transpose ping-pong", NULL, NULL, 0, 0, 0}, {"transpose ping-pong", NULL, NULL, 0, 0, 0}};
    /* What carried each device row, from gdte's counters over both ranks: messages sent GPU to
     * GPU within the node (node_sends) and messages staged through the MPI (sends). */
    long long c0[2], c1[2], c2[2], all_staged = 0;
    counters(c0);
    run_halo(n, nranks, &rows[0], &rows[1]);
    counters(c1);
    run_transpose(m, &rows[2], &rows[3]);
    counters(c2);
    rows[0].path = device_path(interposed, use_gpu, c1[0] - c0[0], c1[1] - c0[1]);
    rows[2].path = device_path(interposed, use_gpu, c2[0] - c1[0], c2[1] - c1[1]);
    /* Proof that gdte carried the device-buffer messages, not the MPI alone. */
    all_staged = (c2[0] - c0[0]) + (c2[1] - c0[1]);
    rows[0].memory = rows[2].memory = device_memory;
    rows[1].memory = rows[3].memory = "host memory";
    rows[1].path = rows[3].path = "plain MPI (reference)";
    if (rank == 0) {
        printf("\ngdte demo: 2 ranks; halo grid %d^3 doubles per rank, transpose %dx%d doubles\n", n, m, m);
        if (!use_gpu)
            printf("no GPU: the \"device\" buffers are host memory that gdte treats as device memory "
                   "(GDTE_FAKE_DEVICE=1), so gdte's path runs on its host backend\n");
        printf("%-20s %-36s %-28s %11s %10s %8s %8s\n", "test", "memory", "path", "bytes/iter", "us/iter", "GB/s",
               "verified");
        for (int i = 0; i < 4; i++)
            printf("%-20s %-36s %-28s %11.0f %10.1f %8.2f %8s\n", rows[i].test, rows[i].memory, rows[i].path,
                   rows[i].bytes, rows[i].usec, rows[i].bytes / rows[i].usec * 1e-3, rows[i].ok ? "yes" : "NO");
        printf("verified: each result against the values it must have; gdte's rows also byte for byte against the\n"
               "plain-MPI rows. Device-buffer messages carried by gdte: %lld\n", all_staged);
    }
    if (interposed && all_staged == 0) die("the interposer carried no message: it is not intercepting");
    int ok = rows[0].ok && rows[1].ok && rows[2].ok && rows[3].ok;
    MPI_Finalize();
    return ok ? 0 : 1;
}
