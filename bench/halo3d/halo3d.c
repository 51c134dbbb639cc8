/*
 * halo3d: time per 3-D halo exchange (6 faces of an n^3 grid of doubles per rank, subarray
 * types, 2 ranks on a periodic 2x1x1 decomposition) under an MPI that is not GPU-aware:
 *
 *   gdte          MPI_Isend/Irecv of the device grid with subarray types, through
 *                 libgdte_mpi.so (LD_PRELOAD): the unmodified-application way;
 *   expert        (a) hand-written pack kernels into contiguous device buffers, copies to pinned
 *                 host memory, contiguous sends; the mirror image on receipt;
 *   whole_extent  (b) copy the whole grid to a host mirror, send with the subarray types from
 *                 there (the MPI's CPU datatype engine), copy the whole grid back;
 *   per_block     (c) one device-host copy per contiguous block of each face (what a
 *                 datatype-unaware staging layer does), contiguous sends.
 *
 * Every method's result is checked (ghost cells against their analytic values) before it is
 * timed. Output: a table, and CSV rows `device,commit,gpus,n,method,median_us,ratio_to_expert`
 * appended to --csv. With the host backend (no CUDA) the "device" grid is host memory
 * registered as fake device memory (GDTE_FAKE_DEVICE=1), so the benchmark runs in CI; its
 * figures measure the host code paths only.
 *
 * Usage: mpirun -np 2 [-x LD_PRELOAD=libgdte_mpi.so] halo3d [--sizes 128,256,512]
 *        [--iters 20] [--warmup 3] [--methods gdte,expert,whole_extent,per_block] [--csv FILE]
 */
#include <getopt.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "halo3d_backend.h"

#ifndef HALO3D_COMMIT
#define HALO3D_COMMIT "unknown"
#endif

extern int64_t gdte_mpi_counter(const char *name) __attribute__((weak));

enum { M_GDTE, M_EXPERT, M_WHOLE, M_BLOCK, M_COUNT };
static const char *method_name[M_COUNT] = {"gdte", "expert", "whole_extent", "per_block"};

static int rank, nranks;

typedef struct {
    int n, N;
    size_t cells;
    MPI_Comm cart;
    int lo[3], hi[3], coords[3];
    MPI_Datatype sface[3][2], rface[3][2]; /* [dim][0: low side, 1: high side] */
    hb_face_t sf[3][2], rf[3][2];
} grid_t;

static double value(const grid_t *g, int gi, int gj, int gk)
{
    int G0 = 2 * g->n, G = g->n;
    gi = (gi + G0) % G0;
    gj = (gj + G) % G;
    gk = (gk + G) % G;
    return gi * 1e6 + gj * 1e3 + gk + (double)((gi * 7919 + gj * 104729 + gk * 1299709) % 1000003) / 1000003.0;
}

static size_t at(const grid_t *g, int i, int j, int k) { return ((size_t)i * g->N + j) * g->N + k; }

static void setup(grid_t *g, int n)
{
    g->n = n;
    g->N = n + 2;
    g->cells = (size_t)g->N * g->N * g->N;
    int dims[3] = {2, 1, 1}, periods[3] = {1, 1, 1};
    MPI_Cart_create(MPI_COMM_WORLD, 3, dims, periods, 0, &g->cart);
    int r;
    MPI_Comm_rank(g->cart, &r);
    MPI_Cart_coords(g->cart, r, 3, g->coords);
    for (int d = 0; d < 3; d++) {
        MPI_Cart_shift(g->cart, d, 1, &g->lo[d], &g->hi[d]);
        int sizes[3] = {g->N, g->N, g->N}, sub[3] = {n, n, n}, st[3] = {1, 1, 1};
        sub[d] = 1;
        int s_at[2] = {1, n}, r_at[2] = {0, n + 1};
        for (int s = 0; s < 2; s++) {
            st[d] = s_at[s];
            MPI_Type_create_subarray(3, sizes, sub, st, MPI_ORDER_C, MPI_DOUBLE, &g->sface[d][s]);
            MPI_Type_commit(&g->sface[d][s]);
            st[d] = r_at[s];
            MPI_Type_create_subarray(3, sizes, sub, st, MPI_ORDER_C, MPI_DOUBLE, &g->rface[d][s]);
            MPI_Type_commit(&g->rface[d][s]);
            g->sf[d][s] = (hb_face_t){n, d, s_at[s]};
            g->rf[d][s] = (hb_face_t){n, d, r_at[s]};
        }
    }
}

static void teardown(grid_t *g)
{
    for (int d = 0; d < 3; d++)
        for (int s = 0; s < 2; s++) {
            MPI_Type_free(&g->sface[d][s]);
            MPI_Type_free(&g->rface[d][s]);
        }
    MPI_Comm_free(&g->cart);
}

static void init_host(const grid_t *g, double *h)
{
    for (int i = 0; i < g->N; i++)
        for (int j = 0; j < g->N; j++)
            for (int k = 0; k < g->N; k++) {
                int in = i >= 1 && i <= g->n && j >= 1 && j <= g->n && k >= 1 && k <= g->n;
                h[at(g, i, j, k)] =
                    in ? value(g, g->coords[0] * g->n + i - 1, g->coords[1] * g->n + j - 1, g->coords[2] * g->n + k - 1)
                       : -1.0;
            }
}

static int verify(const grid_t *g, const double *h)
{
    int bad = 0;
    for (int i = 0; i < g->N; i++)
        for (int j = 0; j < g->N; j++)
            for (int k = 0; k < g->N; k++) {
                int c[3] = {i, j, k}, out = 0;
                for (int d = 0; d < 3; d++) out += c[d] == 0 || c[d] == g->n + 1;
                double want = out > 1 ? -1.0
                                      : value(g, g->coords[0] * g->n + i - 1, g->coords[1] * g->n + j - 1,
                                              g->coords[2] * g->n + k - 1);
                bad += h[at(g, i, j, k)] != want;
            }
    return bad;
}

/* Contiguous blocks of a face in packed order: (offset in cells, length in cells). */
static size_t face_blocks(const grid_t *g, hb_face_t f, size_t *off, size_t *len)
{
    size_t nb = 0;
    int n = g->n;
    if (f.dim == 2) {
        for (int i = 1; i <= n; i++)
            for (int j = 1; j <= n; j++) {
                if (off) off[nb] = at(g, i, j, f.at), len[nb] = 1;
                nb++;
            }
    } else {
        for (int a = 1; a <= n; a++) {
            if (off) off[nb] = f.dim == 0 ? at(g, f.at, a, 1) : at(g, a, f.at, 1), len[nb] = (size_t)n;
            nb++;
        }
    }
    return nb;
}

typedef struct {
    double *grid;          /* device */
    double *mirror;        /* whole_extent: pinned host copy of the grid */
    double *dsend[6], *drecv[6]; /* expert: device face buffers */
    double *hsend[6], *hrecv[6]; /* expert, per_block: pinned face buffers */
    size_t *boff[6], *blen[6];   /* per_block: blocks of send faces [0..5] and receive faces */
    size_t *rboff[6], *rblen[6];
    size_t nblk[6], rnblk[6];
} bufs_t;

static void exchange(int m, const grid_t *g, bufs_t *b)
{
    MPI_Request rq[12];
    int q = 0;
    size_t fcells = (size_t)g->n * g->n;
    switch (m) {
    case M_GDTE:
        for (int d = 0; d < 3; d++) {
            MPI_Irecv(b->grid, 1, g->rface[d][0], g->lo[d], 2 * d, g->cart, &rq[q++]);
            MPI_Irecv(b->grid, 1, g->rface[d][1], g->hi[d], 2 * d + 1, g->cart, &rq[q++]);
        }
        for (int d = 0; d < 3; d++) {
            MPI_Isend(b->grid, 1, g->sface[d][1], g->hi[d], 2 * d, g->cart, &rq[q++]);
            MPI_Isend(b->grid, 1, g->sface[d][0], g->lo[d], 2 * d + 1, g->cart, &rq[q++]);
        }
        MPI_Waitall(q, rq, MPI_STATUSES_IGNORE);
        break;
    case M_WHOLE:
        hb_memcpy(b->mirror, b->grid, g->cells * sizeof(double));
        for (int d = 0; d < 3; d++) {
            MPI_Irecv(b->mirror, 1, g->rface[d][0], g->lo[d], 2 * d, g->cart, &rq[q++]);
            MPI_Irecv(b->mirror, 1, g->rface[d][1], g->hi[d], 2 * d + 1, g->cart, &rq[q++]);
        }
        for (int d = 0; d < 3; d++) {
            MPI_Isend(b->mirror, 1, g->sface[d][1], g->hi[d], 2 * d, g->cart, &rq[q++]);
            MPI_Isend(b->mirror, 1, g->sface[d][0], g->lo[d], 2 * d + 1, g->cart, &rq[q++]);
        }
        MPI_Waitall(q, rq, MPI_STATUSES_IGNORE);
        hb_memcpy(b->grid, b->mirror, g->cells * sizeof(double));
        break;
    case M_EXPERT:
    case M_BLOCK:
        /* Faces numbered 2*d + side; the receive of face (d, 0) pairs with the send of (d, 1). */
        for (int d = 0; d < 3; d++) {
            MPI_Irecv(b->hrecv[2 * d], (int)fcells, MPI_DOUBLE, g->lo[d], 2 * d, g->cart, &rq[q++]);
            MPI_Irecv(b->hrecv[2 * d + 1], (int)fcells, MPI_DOUBLE, g->hi[d], 2 * d + 1, g->cart, &rq[q++]);
        }
        for (int f = 0; f < 6; f++) {
            if (m == M_EXPERT) {
                hb_pack_face(b->grid, g->sf[f / 2][f % 2], b->dsend[f]);
                hb_memcpy_async(b->hsend[f], b->dsend[f], fcells * sizeof(double));
            } else {
                size_t pos = 0;
                for (size_t k = 0; k < b->nblk[f]; k++) {
                    hb_memcpy_async(b->hsend[f] + pos, b->grid + b->boff[f][k], b->blen[f][k] * sizeof(double));
                    pos += b->blen[f][k];
                }
            }
        }
        hb_sync();
        for (int d = 0; d < 3; d++) {
            MPI_Isend(b->hsend[2 * d + 1], (int)fcells, MPI_DOUBLE, g->hi[d], 2 * d, g->cart, &rq[q++]);
            MPI_Isend(b->hsend[2 * d], (int)fcells, MPI_DOUBLE, g->lo[d], 2 * d + 1, g->cart, &rq[q++]);
        }
        MPI_Waitall(q, rq, MPI_STATUSES_IGNORE);
        for (int f = 0; f < 6; f++) {
            if (m == M_EXPERT) {
                hb_memcpy_async(b->drecv[f], b->hrecv[f], fcells * sizeof(double));
                hb_unpack_face(b->grid, g->rf[f / 2][f % 2], b->drecv[f]);
            } else {
                size_t pos = 0;
                for (size_t k = 0; k < b->rnblk[f]; k++) {
                    hb_memcpy_async(b->grid + b->rboff[f][k], b->hrecv[f] + pos, b->rblen[f][k] * sizeof(double));
                    pos += b->rblen[f][k];
                }
            }
        }
        hb_sync();
        break;
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median over `iters` timed exchanges of the slowest rank's time, in microseconds; -1 when the
 * result is wrong. */
static double run_method(int m, const grid_t *g, bufs_t *b, int iters, int warmup)
{
    double *h = malloc(g->cells * sizeof(double));
    init_host(g, h);
    hb_memcpy(b->grid, h, g->cells * sizeof(double));
    exchange(m, g, b);
    hb_memcpy(h, b->grid, g->cells * sizeof(double));
    int bad = verify(g, h), anybad = 0;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    free(h);
    if (anybad) {
        if (rank == 0) fprintf(stderr, "halo3d: method %s gives %d wrong cells at n=%d\n", method_name[m], anybad, g->n);
        return -1;
    }
    for (int i = 0; i < warmup; i++) exchange(m, g, b);
    double *t = malloc(iters * sizeof(double));
    for (int i = 0; i < iters; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        exchange(m, g, b);
        double dt = MPI_Wtime() - t0, mx;
        MPI_Allreduce(&dt, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        t[i] = mx;
    }
    qsort(t, iters, sizeof(double), cmp_double);
    double med = iters % 2 ? t[iters / 2] : 0.5 * (t[iters / 2 - 1] + t[iters / 2]);
    free(t);
    return med * 1e6;
}

static int parse_list(const char *s, int *out, int max)
{
    int n = 0;
    while (s && *s && n < max) {
        out[n++] = atoi(s);
        s = strchr(s, ',');
        if (s) s++;
    }
    return n;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    int sizes[16] = {128, 256, 512}, nsizes = 3, iters = 20, warmup = 3;
    int use[M_COUNT] = {1, 1, 1, 1};
    const char *csv = NULL;
    static const struct option opts[] = {
        {"sizes", required_argument, NULL, 's'}, {"iters", required_argument, NULL, 'i'},
        {"warmup", required_argument, NULL, 'w'}, {"csv", required_argument, NULL, 'c'},
        {"methods", required_argument, NULL, 'm'}, {NULL, 0, NULL, 0},
    };
    opterr = rank == 0; /* one rank reports a bad option */
    for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        switch (c) {
        case 's': nsizes = parse_list(optarg, sizes, 16); break;
        case 'i': iters = atoi(optarg); break;
        case 'w': warmup = atoi(optarg); break;
        case 'c': csv = optarg; break;
        case 'm':
            for (int m = 0; m < M_COUNT; m++) use[m] = strstr(optarg, method_name[m]) != NULL;
            break;
        default: MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (optind < argc) {
        if (rank == 0) fprintf(stderr, "unknown argument %s\n", argv[optind]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (nranks != 2) {
        if (rank == 0) fprintf(stderr, "halo3d runs on exactly 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (iters < 1) iters = 1;
    MPI_Comm node;
    int local = 0;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    MPI_Comm_free(&node);
    int dev = hb_init(local);
    if (dev < -1) MPI_Abort(MPI_COMM_WORLD, 3);
    int devs[2];
    MPI_Allgather(&dev, 1, MPI_INT, devs, 1, MPI_INT, MPI_COMM_WORLD);
    int gpus = dev < 0 ? 0 : (devs[0] == devs[1] ? 1 : 2);
    if (use[M_GDTE] && !(gdte_mpi_counter && gdte_mpi_counter("active") == 1)) {
        if (rank == 0) fprintf(stderr, "halo3d: libgdte_mpi.so not preloaded and active: skipping the gdte method\n");
        use[M_GDTE] = 0;
    }

    /* The commit recorded at configure time, unless the run names its own. */
    const char *commit = getenv("GDTETEST_COMMIT") ? getenv("GDTETEST_COMMIT") : HALO3D_COMMIT;
    FILE *out = NULL;
    if (rank == 0 && csv) {
        out = fopen(csv, "a+");
        if (!out) {
            perror(csv);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        fseek(out, 0, SEEK_END);
        if (ftell(out) == 0) fprintf(out, "device,commit,gpus,n,method,median_us,ratio_to_expert\n");
    }
    if (rank == 0) printf("%-10s %6s %-14s %14s %16s\n", "device", "n", "method", "median_us", "ratio_to_expert");
    int failed = 0;
    for (int s = 0; s < nsizes; s++) {
        grid_t g;
        setup(&g, sizes[s]);
        bufs_t b;
        memset(&b, 0, sizeof b);
        size_t fbytes = (size_t)g.n * g.n * sizeof(double);
        b.grid = hb_dev_alloc(g.cells * sizeof(double));
        if (use[M_WHOLE]) b.mirror = hb_pinned_alloc(g.cells * sizeof(double));
        for (int f = 0; f < 6; f++) {
            b.hsend[f] = hb_pinned_alloc(fbytes);
            b.hrecv[f] = hb_pinned_alloc(fbytes);
            if (use[M_EXPERT]) {
                b.dsend[f] = hb_dev_alloc(fbytes);
                b.drecv[f] = hb_dev_alloc(fbytes);
            }
            b.nblk[f] = face_blocks(&g, g.sf[f / 2][f % 2], NULL, NULL);
            b.boff[f] = malloc(b.nblk[f] * sizeof(size_t));
            b.blen[f] = malloc(b.nblk[f] * sizeof(size_t));
            face_blocks(&g, g.sf[f / 2][f % 2], b.boff[f], b.blen[f]);
            b.rnblk[f] = face_blocks(&g, g.rf[f / 2][f % 2], NULL, NULL);
            b.rboff[f] = malloc(b.rnblk[f] * sizeof(size_t));
            b.rblen[f] = malloc(b.rnblk[f] * sizeof(size_t));
            face_blocks(&g, g.rf[f / 2][f % 2], b.rboff[f], b.rblen[f]);
        }
        double us[M_COUNT];
        for (int m = 0; m < M_COUNT; m++) {
            us[m] = use[m] ? run_method(m, &g, &b, iters, warmup) : 0;
            if (use[m] && us[m] < 0) failed = 1;
        }
        for (int m = 0; m < M_COUNT && rank == 0; m++) {
            if (!use[m] || us[m] < 0) continue;
            double ratio = use[M_EXPERT] && us[M_EXPERT] > 0 ? us[m] / us[M_EXPERT] : 0;
            printf("%-10s %6d %-14s %14.1f %16.3f\n", hb_device_name(), g.n, method_name[m], us[m], ratio);
            if (out)
                fprintf(out, "%s,%s,%d,%d,%s,%.1f,%.3f\n", hb_device_name(), commit, gpus, g.n, method_name[m],
                        us[m], ratio);
        }
        hb_dev_free(b.grid);
        hb_pinned_free(b.mirror);
        for (int f = 0; f < 6; f++) {
            hb_pinned_free(b.hsend[f]);
            hb_pinned_free(b.hrecv[f]);
            hb_dev_free(b.dsend[f]);
            hb_dev_free(b.drecv[f]);
            free(b.boff[f]), free(b.blen[f]), free(b.rboff[f]), free(b.rblen[f]);
        }
        teardown(&g);
    }
    if (out) fclose(out);
    if (rank == 0 && gdte_mpi_counter)
        printf("gdte: %lld device sends, %lld fragments, %lld staging allocations\n", (long long)gdte_mpi_counter("sends"),
               (long long)gdte_mpi_counter("fragments"), (long long)gdte_mpi_counter("stage_allocs"));
    MPI_Finalize();
    return failed;
}

/* ---------------------------------------------------------------------------------------- */
#ifndef HALO3D_CUDA
/* Host backend: "device" memory is host memory registered as fake device memory, so the gdte
 * method goes through the interposer's device path; kernels are C loops. */
extern int gdte_fake_device_register(void *ptr, size_t size) __attribute__((weak));
extern int gdte_fake_device_unregister(void *ptr) __attribute__((weak));

int hb_init(int local_rank)
{
    (void)local_rank;
    return -1;
}
const char *hb_device_name(void) { return "host-fake"; }
void *hb_dev_alloc(size_t bytes)
{
    void *p = calloc(1, bytes);
    if (p && gdte_fake_device_register) gdte_fake_device_register(p, bytes);
    return p;
}
void hb_dev_free(void *p)
{
    if (p && gdte_fake_device_unregister) gdte_fake_device_unregister(p);
    free(p);
}
void *hb_pinned_alloc(size_t bytes) { return calloc(1, bytes); }
void hb_pinned_free(void *p) { free(p); }
void hb_memcpy(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }
void hb_memcpy_async(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }
void hb_sync(void) {}

static void face_loop(double *grid, hb_face_t f, double *buf, int unpack)
{
    int N = f.n + 2;
    size_t q = 0;
    for (int a = 1; a <= f.n; a++)
        for (int c = 1; c <= f.n; c++) {
            int ijk[3];
            ijk[f.dim] = f.at;
            ijk[f.dim == 0 ? 1 : 0] = a;
            ijk[f.dim == 2 ? 1 : 2] = c;
            size_t o = ((size_t)ijk[0] * N + ijk[1]) * N + ijk[2];
            if (unpack) grid[o] = buf[q++];
            else buf[q++] = grid[o];
        }
}
void hb_pack_face(const double *grid, hb_face_t f, double *buf) { face_loop((double *)grid, f, buf, 0); }
void hb_unpack_face(double *grid, hb_face_t f, const double *buf) { face_loop(grid, f, (double *)buf, 1); }
#endif
