/*
 * bench/coll: collectives on device buffers through gdte's interposer (LD_PRELOAD=
 * libgdte_mpi.so), each beside an expert version in the same run.
 *
 *   alltoallw_transpose     a 3-D FFT-style slab transpose of an N^3 array of complex doubles:
 *                           x-slabs [N/P][N][N] to y-slabs [N][N/P][N], subarray types on both
 *                           sides, one MPI_Alltoallw on device buffers;
 *   neighbor_alltoallw_halo the 6 faces of an n^3 block of doubles per rank (ghost layers
 *                           around it), subarray faces, MPI_Neighbor_alltoallw on a periodic
 *                           Cartesian communicator (2x2x1 on 4 ranks);
 *   allgather, bcast        MPI_BYTE messages of 1 KiB .. 64 MiB on device buffers;
 *   allreduce               MPI_SUM of doubles, 1 KiB .. 64 MiB per rank, on device buffers (the
 *                           expert pulls every rank's vector by IPC and sums them with one
 *                           kernel; the values are small integers, so every order of the sum
 *                           gives the same bits).
 * The expert version packs by hand (one box kernel per block into a dense device buffer), moves
 * the dense bytes by raw CUDA IPC copies between the processes (each pulls what it receives
 * from the others' dense send buffers, between two barriers), and unpacks by hand. Without
 * CUDA (CI) the buffers are host memory registered as fake device memory and the expert's
 * dense buffers move by MPI on host memory.
 *
 * Each timing is the slowest rank's time of one call, the median of --iters. The gdte call's
 * result is verified once per size against the same call on host copies (which the interposer
 * hands to the MPI untouched), the expert's against the values each cell must hold.
 *
 * CSV (--csv, appended, header when new): device,commit,gpus,mpi,benchmark,ranks,size,
 * median_us,ratio_to_expert,pack_launches,unpack_launches,expert_us. size: N or n for the grids,
 * bytes per rank for allgather/bcast; ratio_to_expert = expert time / gdte time; pack_launches
 * and unpack_launches: gdte's batched pack and unpack launches per call on rank 0.
 *
 * Usage: collbench [--bench all|transpose|halo|allgather|bcast|allreduce] [--sizes-transpose 256,512]
 *        [--sizes-halo 128,256] [--sizes-bytes 1K,...,64M] [--iters N] [--warmup N]
 *        [--mpi-label L] [--csv FILE]
 */
#include <getopt.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "collbench_backend.h"

extern int64_t gdte_mpi_counter(const char *name) __attribute__((weak));
extern int gdte_fake_device_register(void *ptr, size_t size) __attribute__((weak));
extern int gdte_fake_device_unregister(void *ptr) __attribute__((weak));

#ifndef COLLBENCH_COMMIT
#define COLLBENCH_COMMIT "unknown"
#endif
/* The commit measured: $GDTETEST_COMMIT (a device run of a working tree), else the configured one. */
static const char *commit(void) { return getenv("GDTETEST_COMMIT") ? getenv("GDTETEST_COMMIT") : COLLBENCH_COMMIT; }

static int rank, np, iters = 10, warmup = 2, gpu = -1, gpus, failures; /* gpus: distinct GPUs the ranks use */
static const char *mpi_label = "mpi", *csv_path;
static void *peer_map[64]; /* IPC mappings of the others' dense send buffers */

static int64_t counter(const char *n) { return gdte_mpi_counter ? gdte_mpi_counter(n) : -1; }

static void *dev_alloc(size_t n)
{
    void *p = cb_alloc(n);
    if (gpu < 0 && gdte_fake_device_register) gdte_fake_device_register(p, n ? n : 1);
    return p;
}
static void dev_free(void *p)
{
    if (gpu < 0 && gdte_fake_device_unregister) gdte_fake_device_unregister(p);
    cb_free(p);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof *t, cmp_d);
    return n ? t[n / 2] : 0;
}

/* The slowest rank's time of each run of fn. */
typedef void (*run_fn)(void *);
static double time_median(run_fn fn, void *arg)
{
    double *t = malloc(sizeof(double) * (size_t)iters);
    for (int i = 0; i < warmup + iters; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        fn(arg);
        double dt = MPI_Wtime() - t0, mx;
        MPI_Allreduce(&dt, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (i >= warmup) t[i - warmup] = mx * 1e6;
    }
    double m = median(t, iters);
    free(t);
    return m;
}

static void csv_row(const char *bench, long size, double us, double expert_us, double packs, double unpacks)
{
    if (rank != 0) return;
    printf("%-24s ranks %d size %-9ld gdte %10.1f us  expert %10.1f us  ratio %.3f  launches/call %.1f pack %.1f unpack\n",
           bench, np, size, us, expert_us, us > 0 ? expert_us / us : 0, packs, unpacks);
    if (!csv_path) return;
    FILE *f = fopen(csv_path, "a+");
    if (!f) return;
    fseek(f, 0, SEEK_END);
    if (ftell(f) == 0)
        fprintf(f, "device,commit,gpus,mpi,benchmark,ranks,size,median_us,ratio_to_expert,pack_launches,unpack_launches,"
                   "expert_us\n");
    fprintf(f, "%s,%s,%d,%s,%s,%d,%ld,%.2f,%.4f,%.2f,%.2f,%.2f\n", cb_device_name(), commit(), gpus, mpi_label,
            bench, np, size, us, us > 0 ? expert_us / us : 0, packs, unpacks, expert_us);
    fclose(f);
}

/* ---- the exchange of dense buffers for the expert versions ---- */
/* Every rank's dense send buffer is mapped once per size (IPC). xfer[i]: bytes rank i receives
 * from each peer: from peer p at offset soff(p, i) of p's buffer into roff(p) of its own. */
typedef struct {
    char *dsend, *drecv;
    size_t dsend_bytes;
    long (*soff)(void *ctx, int from, int to); /* offset in `from`'s dense send buffer */
    long (*roff)(void *ctx, int from);         /* offset in my dense receive buffer */
    long (*len)(void *ctx, int from);          /* bytes I receive from `from` (0: none) */
    void *ctx;
} xchg_t;

static void ipc_open_all(xchg_t *x)
{
    if (!cb_has_ipc()) return;
    size_t hs = cb_ipc_handle_size();
    char *mine = calloc(1, CB_IPC_HANDLE_MAX), *all = calloc((size_t)np, CB_IPC_HANDLE_MAX);
    if (cb_ipc_get(x->dsend, mine)) fprintf(stderr, "collbench: IPC handle failed\n");
    MPI_Allgather(mine, CB_IPC_HANDLE_MAX, MPI_BYTE, all, CB_IPC_HANDLE_MAX, MPI_BYTE, MPI_COMM_WORLD);
    for (int p = 0; p < np; p++) {
        peer_map[p] = p == rank ? x->dsend : cb_ipc_open(all + (size_t)p * CB_IPC_HANDLE_MAX);
        if (!peer_map[p]) {
            fprintf(stderr, "[rank %d] collbench: the expert cannot map rank %d's buffer; stopping\n", rank, p);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
    }
    (void)hs;
    free(mine);
    free(all);
}
static void ipc_close_all(void)
{
    if (!cb_has_ipc()) return;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int p = 0; p < np; p++)
        if (p != rank) cb_ipc_close(peer_map[p]);
}

/* Raw exchange: every rank pulls its pieces from the others' dense buffers (IPC), or, without
 * IPC, the same pieces by MPI point to point on host memory. */
static void exchange(xchg_t *x)
{
    if (cb_has_ipc()) {
        cb_sync();
        MPI_Barrier(MPI_COMM_WORLD); /* every sender's dense buffer is packed */
        for (int p = 0; p < np; p++) {
            long n = x->len(x->ctx, p);
            if (n > 0) cb_copy_async(x->drecv + x->roff(x->ctx, p), (char *)peer_map[p] + x->soff(x->ctx, p, rank), (size_t)n);
        }
        cb_sync();
        MPI_Barrier(MPI_COMM_WORLD); /* nobody packs over a buffer another is still reading */
        return;
    }
    MPI_Request *q = malloc(sizeof(MPI_Request) * 2 * (size_t)np);
    int nq = 0;
    for (int p = 0; p < np; p++) {
        long n = x->len(x->ctx, p);
        if (n > 0) MPI_Irecv(x->drecv + x->roff(x->ctx, p), (int)n, MPI_BYTE, p, 5, MPI_COMM_WORLD, &q[nq++]);
    }
    /* what p receives from me: my piece for p */
    for (int p = 0; p < np; p++) {
        long n = x->len(x->ctx, p); /* symmetric exchanges only: what I get from p is what p gets from me */
        if (n > 0) MPI_Isend(x->dsend + x->soff(x->ctx, rank, p), (int)n, MPI_BYTE, p, 5, MPI_COMM_WORLD, &q[nq++]);
    }
    MPI_Waitall(nq, q, MPI_STATUSES_IGNORE);
    free(q);
}

/* ---- alltoallw_transpose ---- */
typedef struct {
    long N, b; /* b = N / P */
    double *xs, *ys, *hx, *hy; /* device x-slab, y-slab; host copies */
    char *dsend, *drecv;
    MPI_Datatype st[64], rt[64];
    int cnt[64], dsp[64];
    xchg_t x;
} tr_t;

static double fval(long gx, long gy, long gz) { return (double)gx * 1e6 + (double)gy * 1e3 + (double)gz; }
static long tr_blk(void *c) { tr_t *t = c; return t->b * t->b * t->N * 16; }
static long tr_soff(void *c, int from, int to) { (void)from; return (long)to * tr_blk(c); }
static long tr_roff(void *c, int from) { return (long)from * tr_blk(c); }
static long tr_len(void *c, int from) { (void)from; return tr_blk(c); }

static void tr_gdte(void *a)
{
    tr_t *t = a;
    MPI_Alltoallw(t->xs, t->cnt, t->dsp, t->st, t->ys, t->cnt, t->dsp, t->rt, MPI_COMM_WORLD);
}
static void tr_expert(void *a)
{
    tr_t *t = a;
    long N = t->N, b = t->b;
    for (int j = 0; j < np; j++) {
        long sz[3] = {b, N, N}, sub[3] = {b, b, N}, st[3] = {0, j * b, 0};
        cb_box(0, t->xs, t->dsend + (size_t)j * tr_blk(t), sz, sub, st, 16);
    }
    exchange(&t->x);
    for (int i = 0; i < np; i++) {
        long sz[3] = {N, b, N}, sub[3] = {b, b, N}, st[3] = {i * b, 0, 0};
        cb_box(1, t->ys, t->drecv + (size_t)i * tr_blk(t), sz, sub, st, 16);
    }
    cb_sync();
}

static void bench_transpose(long N)
{
    if (N % np) {
        if (rank == 0) printf("alltoallw_transpose: N=%ld not divisible by %d ranks, skipped\n", N, np);
        return;
    }
    tr_t t;
    memset(&t, 0, sizeof t);
    t.N = N;
    t.b = N / np;
    size_t n = (size_t)t.b * N * N; /* complex elements per slab */
    t.xs = dev_alloc(n * 16);
    t.ys = dev_alloc(n * 16);
    t.hx = malloc(n * 16);
    t.hy = malloc(n * 16);
    t.dsend = cb_alloc(n * 16);
    t.drecv = cb_alloc(n * 16);
    for (long x = 0; x < t.b; x++)
        for (long y = 0; y < N; y++)
            for (long z = 0; z < N; z++) {
                size_t i = (size_t)((x * N + y) * N + z);
                t.hx[2 * i] = fval(rank * t.b + x, y, z);
                t.hx[2 * i + 1] = -t.hx[2 * i];
            }
    cb_put(t.xs, t.hx, n * 16);
    int xsz[3] = {(int)t.b, (int)N, (int)N}, ysz[3] = {(int)N, (int)t.b, (int)N}, sub[3] = {(int)t.b, (int)t.b, (int)N};
    for (int j = 0; j < np; j++) {
        int s0[3] = {0, j * (int)t.b, 0}, r0[3] = {j * (int)t.b, 0, 0};
        MPI_Type_create_subarray(3, xsz, sub, s0, MPI_ORDER_C, MPI_C_DOUBLE_COMPLEX, &t.st[j]);
        MPI_Type_create_subarray(3, ysz, sub, r0, MPI_ORDER_C, MPI_C_DOUBLE_COMPLEX, &t.rt[j]);
        MPI_Type_commit(&t.st[j]);
        MPI_Type_commit(&t.rt[j]);
        t.cnt[j] = 1;
        t.dsp[j] = 0;
    }
    /* verify: gdte's result against the MPI's on host copies, and against the values */
    tr_gdte(&t);
    double *ref = malloc(n * 16), *got = malloc(n * 16);
    MPI_Alltoallw(t.hx, t.cnt, t.dsp, t.st, ref, t.cnt, t.dsp, t.rt, MPI_COMM_WORLD);
    cb_get(got, t.ys, n * 16);
    int bad = memcmp(got, ref, n * 16) != 0;
    for (long x = 0; x < N && !bad; x++)
        for (long y = 0; y < t.b && !bad; y++) {
            size_t i = (size_t)((x * t.b + y) * N + 5 % N);
            bad = ref[2 * i] != fval(x, rank * t.b + y, 5 % N);
        }
    t.x = (xchg_t){t.dsend, t.drecv, n * 16, tr_soff, tr_roff, tr_len, &t};
    ipc_open_all(&t.x);
    memset(t.hy, 0, n * 16);
    cb_put(t.ys, t.hy, n * 16);
    tr_expert(&t);
    cb_get(got, t.ys, n * 16);
    int bad_e = memcmp(got, ref, n * 16) != 0;
    if (bad || bad_e) {
        fprintf(stderr, "[rank %d] alltoallw_transpose N=%ld: VERIFY FAILED (%s)\n", rank, N, bad ? "gdte" : "expert");
        failures++;
    }
    free(ref);
    free(got);
    int64_t p0 = counter("coll_pack_launches"), u0 = counter("coll_unpack_launches");
    double g = time_median(tr_gdte, &t);
    double packs = (double)(counter("coll_pack_launches") - p0) / (warmup + iters);
    double unpacks = (double)(counter("coll_unpack_launches") - u0) / (warmup + iters);
    double e = time_median(tr_expert, &t);
    csv_row("alltoallw_transpose", N, g, e, packs, unpacks);
    ipc_close_all();
    for (int j = 0; j < np; j++) MPI_Type_free(&t.st[j]), MPI_Type_free(&t.rt[j]);
    dev_free(t.xs);
    dev_free(t.ys);
    cb_free(t.dsend);
    cb_free(t.drecv);
    free(t.hx);
    free(t.hy);
}

/* ---- neighbor_alltoallw_halo ---- */
typedef struct {
    long n, m; /* interior n^3, array m^3 with m = n + 2 */
    MPI_Comm cart;
    double *a;
    char *dsend, *drecv;
    int src[6], dst[6];
    MPI_Datatype sf[6], rf[6];
    int cnt[6];
    MPI_Aint dsp[6];
    xchg_t x;
} halo_t;

/* Face b = 2d + k: the interior layer next to side k (0: low) of dimension d; the ghost layer
 * on that side. */
static void face(const halo_t *h, int b, int ghost, long st[3], long sub[3])
{
    int d = b / 2, k = b % 2;
    for (int e = 0; e < 3; e++) st[e] = 1, sub[e] = h->n;
    sub[d] = 1;
    st[d] = ghost ? (k ? h->n + 1 : 0) : (k ? h->n : 1);
}
static long face_bytes(const halo_t *h, int b)
{
    long st[3], sub[3];
    face(h, b, 0, st, sub);
    return sub[0] * sub[1] * sub[2] * 8;
}
static long fb_off(const halo_t *h, int b)
{
    long o = 0;
    for (int i = 0; i < b; i++) o += face_bytes(h, i);
    return o;
}
static long h_soff(void *c, int from, int to)
{
    (void)c, (void)from, (void)to;
    return 0; /* the halo's expert moves face by face (halo_expert) */
}
static long h_roff(void *c, int from)
{
    (void)c, (void)from;
    return 0;
}
static long h_len(void *c, int from)
{
    (void)c, (void)from;
    return 0;
}

static void halo_gdte(void *a)
{
    halo_t *h = a;
    MPI_Neighbor_alltoallw(h->a, h->cnt, h->dsp, h->sf, h->a, h->cnt, h->dsp, h->rf, h->cart);
}

/* Expert: 6 face kernels into the dense buffer, each ghost pulled from the neighbour's dense
 * buffer (its face on the opposite side), 6 unpack kernels. */
static void halo_expert(void *arg)
{
    halo_t *h = arg;
    long sz[3] = {h->m, h->m, h->m}, st[3], sub[3];
    for (int b = 0; b < 6; b++) {
        face(h, b, 0, st, sub);
        cb_box(0, h->a, h->dsend + fb_off(h, b), sz, sub, st, 8);
    }
    if (cb_has_ipc()) {
        cb_sync();
        MPI_Barrier(h->cart);
        for (int b = 0; b < 6; b++) {
            int opp = b ^ 1, p = h->src[b];
            if (p == MPI_PROC_NULL) continue;
            int wp;
            MPI_Group g, w;
            MPI_Comm_group(h->cart, &g);
            MPI_Comm_group(MPI_COMM_WORLD, &w);
            MPI_Group_translate_ranks(g, 1, &p, w, &wp);
            MPI_Group_free(&g);
            MPI_Group_free(&w);
            cb_copy_async(h->drecv + fb_off(h, b), (char *)peer_map[wp] + fb_off(h, opp), (size_t)face_bytes(h, b));
        }
        cb_sync();
        MPI_Barrier(h->cart);
    } else {
        MPI_Request q[12];
        for (int b = 0; b < 6; b++) {
            MPI_Irecv(h->drecv + fb_off(h, b), (int)face_bytes(h, b), MPI_BYTE, h->src[b], b, h->cart, &q[b]);
            /* face b goes to the neighbour on side b, which files it as ghost b ^ 1 */
            MPI_Isend(h->dsend + fb_off(h, b), (int)face_bytes(h, b), MPI_BYTE, h->dst[b], b ^ 1, h->cart, &q[6 + b]);
        }
        MPI_Waitall(12, q, MPI_STATUSES_IGNORE);
    }
    for (int b = 0; b < 6; b++) {
        face(h, b, 1, st, sub);
        cb_box(1, h->a, h->drecv + fb_off(h, b), sz, sub, st, 8);
    }
    cb_sync();
}

static void bench_halo(long n)
{
    halo_t h;
    memset(&h, 0, sizeof h);
    h.n = n;
    h.m = n + 2;
    int dims[3] = {0, 0, 0}, per[3] = {1, 1, 1}, coords[3];
    if (np == 4) dims[0] = 2, dims[1] = 2, dims[2] = 1;
    MPI_Dims_create(np, 3, dims);
    MPI_Cart_create(MPI_COMM_WORLD, 3, dims, per, 0, &h.cart);
    int crank;
    MPI_Comm_rank(h.cart, &crank);
    MPI_Cart_coords(h.cart, crank, 3, coords);
    for (int d = 0; d < 3; d++) MPI_Cart_shift(h.cart, d, 1, &h.src[2 * d], &h.dst[2 * d + 1]);
    for (int d = 0; d < 3; d++) h.dst[2 * d] = h.src[2 * d], h.src[2 * d + 1] = h.dst[2 * d + 1];
    size_t cells = (size_t)(h.m * h.m * h.m), bytes = cells * 8;
    double *host = malloc(bytes), *ref = malloc(bytes), *got = malloc(bytes);
    for (long i = 0; i < h.m; i++)
        for (long j = 0; j < h.m; j++)
            for (long k = 0; k < h.m; k++) {
                int ghost = i == 0 || j == 0 || k == 0 || i == h.m - 1 || j == h.m - 1 || k == h.m - 1;
                host[(i * h.m + j) * h.m + k] = ghost ? -1.0 : fval(coords[0] * n + i - 1, coords[1] * n + j - 1, coords[2] * n + k - 1);
            }
    h.a = dev_alloc(bytes);
    cb_put(h.a, host, bytes);
    int sz[3] = {(int)h.m, (int)h.m, (int)h.m};
    for (int b = 0; b < 6; b++) {
        long st[3], sub[3];
        int s3[3], u3[3];
        face(&h, b, 0, st, sub);
        for (int e = 0; e < 3; e++) s3[e] = (int)st[e], u3[e] = (int)sub[e];
        MPI_Type_create_subarray(3, sz, u3, s3, MPI_ORDER_C, MPI_DOUBLE, &h.sf[b]);
        face(&h, b, 1, st, sub);
        for (int e = 0; e < 3; e++) s3[e] = (int)st[e];
        MPI_Type_create_subarray(3, sz, u3, s3, MPI_ORDER_C, MPI_DOUBLE, &h.rf[b]);
        MPI_Type_commit(&h.sf[b]);
        MPI_Type_commit(&h.rf[b]);
        h.cnt[b] = 1;
        h.dsp[b] = 0;
    }
    h.dsend = cb_alloc((size_t)fb_off(&h, 6));
    h.drecv = cb_alloc((size_t)fb_off(&h, 6));
    /* verify gdte against the MPI on a host copy (the same pairing of blocks, whatever the MPI's
     * rule for a neighbour met twice), the expert against the periodic values */
    halo_gdte(&h);
    memcpy(ref, host, bytes);
    MPI_Neighbor_alltoallw(ref, h.cnt, h.dsp, h.sf, ref, h.cnt, h.dsp, h.rf, h.cart);
    cb_get(got, h.a, bytes);
    int bad = memcmp(got, ref, bytes) != 0;
    h.x = (xchg_t){h.dsend, h.drecv, (size_t)fb_off(&h, 6), h_soff, h_roff, h_len, &h};
    ipc_open_all(&h.x);
    cb_put(h.a, host, bytes);
    halo_expert(&h);
    cb_get(got, h.a, bytes);
    long N[3] = {dims[0] * n, dims[1] * n, dims[2] * n};
    int bad_e = 0;
    for (long i = 0; i < h.m && !bad_e; i++)
        for (long j = 0; j < h.m && !bad_e; j++)
            for (long k = 0; k < h.m && !bad_e; k++) {
                int out = (i == 0 || i == h.m - 1) + (j == 0 || j == h.m - 1) + (k == 0 || k == h.m - 1);
                if (out != 1) continue; /* faces only, not edges or corners */
                long g[3] = {coords[0] * n + i - 1, coords[1] * n + j - 1, coords[2] * n + k - 1};
                for (int e = 0; e < 3; e++) g[e] = (g[e] + N[e]) % N[e];
                bad_e = got[(i * h.m + j) * h.m + k] != fval(g[0], g[1], g[2]);
            }
    if (bad || bad_e) {
        fprintf(stderr, "[rank %d] neighbor_alltoallw_halo n=%ld: VERIFY FAILED (%s)\n", rank, n, bad ? "gdte" : "expert");
        failures++;
    }
    int64_t p0 = counter("coll_pack_launches"), u0 = counter("coll_unpack_launches");
    double gt = time_median(halo_gdte, &h);
    double packs = (double)(counter("coll_pack_launches") - p0) / (warmup + iters);
    double unpacks = (double)(counter("coll_unpack_launches") - u0) / (warmup + iters);
    double e = time_median(halo_expert, &h);
    csv_row("neighbor_alltoallw_halo", n, gt, e, packs, unpacks);
    ipc_close_all();
    for (int b = 0; b < 6; b++) MPI_Type_free(&h.sf[b]), MPI_Type_free(&h.rf[b]);
    dev_free(h.a);
    cb_free(h.dsend);
    cb_free(h.drecv);
    free(host);
    free(ref);
    free(got);
    MPI_Comm_free(&h.cart);
}

/* ---- allgather, bcast ---- */
typedef struct {
    long s;
    char *sb, *rb;
    int bcast;
    xchg_t x;
} ag_t;
static long ag_soff(void *c, int from, int to)
{
    (void)c, (void)from, (void)to;
    return 0;
}
static long ag_roff(void *c, int from)
{
    ag_t *a = c;
    return a->bcast ? 0 : from * a->s;
}
static long ag_len(void *c, int from)
{
    ag_t *a = c;
    if (a->bcast) return from == 0 && rank != 0 ? a->s : 0;
    return a->s;
}
static void ag_gdte(void *p)
{
    ag_t *a = p;
    if (a->bcast) MPI_Bcast(a->rb, (int)a->s, MPI_BYTE, 0, MPI_COMM_WORLD);
    else MPI_Allgather(a->sb, (int)a->s, MPI_BYTE, a->rb, (int)a->s, MPI_BYTE, MPI_COMM_WORLD);
}
/* Expert: no packing (the bytes are dense): each rank pulls from the others' buffers. */
static void ag_expert(void *p)
{
    ag_t *a = p;
    if (!cb_has_ipc()) {
        if (a->bcast) MPI_Bcast(a->x.drecv, (int)a->s, MPI_BYTE, 0, MPI_COMM_WORLD);
        else MPI_Allgather(a->x.dsend, (int)a->s, MPI_BYTE, a->x.drecv, (int)a->s, MPI_BYTE, MPI_COMM_WORLD);
        return;
    }
    exchange(&a->x);
}
static void bench_bytes(long s, int bcast)
{
    ag_t a;
    memset(&a, 0, sizeof a);
    a.s = s;
    a.bcast = bcast;
    size_t rbytes = bcast ? (size_t)s : (size_t)s * np;
    a.sb = dev_alloc((size_t)s);
    a.rb = dev_alloc(rbytes);
    char *h = malloc(rbytes), *ref = malloc(rbytes), *got = malloc(rbytes);
    for (long i = 0; i < s; i++) h[i] = (char)(rank * 31 + i * 7);
    cb_put(a.sb, h, (size_t)s);
    if (bcast) cb_put(a.rb, h, (size_t)s);
    ag_gdte(&a);
    if (bcast) {
        memcpy(ref, h, (size_t)s);
        MPI_Bcast(ref, (int)s, MPI_BYTE, 0, MPI_COMM_WORLD);
    } else {
        MPI_Allgather(h, (int)s, MPI_BYTE, ref, (int)s, MPI_BYTE, MPI_COMM_WORLD);
    }
    cb_get(got, a.rb, rbytes);
    int bad = memcmp(got, ref, rbytes) != 0;
    if (bad) {
        size_t i = 0, nbad = 0;
        while (i < rbytes && got[i] == ref[i]) i++;
        for (size_t j = i; j < rbytes; j++) nbad += got[j] != ref[j];
        fprintf(stderr, "[rank %d] %s %ld: gdte differs first at byte %zu (block %zu, got %d, want %d), %zu bytes differ\n",
                rank, bcast ? "bcast" : "allgather", s, i, i / (size_t)s, got[i], ref[i], nbad);
    }
    /* the expert's buffers: plain device memory (not through gdte) */
    char *es = cb_alloc(bcast ? rbytes : (size_t)s), *er = cb_alloc(rbytes);
    cb_put(es, h, (size_t)s);
    if (bcast && rank == 0) cb_put(er, h, (size_t)s);
    a.x = (xchg_t){bcast ? er : es, er, (size_t)s, ag_soff, ag_roff, ag_len, &a};
    if (!bcast && cb_has_ipc()) cb_put(er + (size_t)rank * s, h, (size_t)s);
    ipc_open_all(&a.x);
    ag_expert(&a);
    if (!bcast && cb_has_ipc()) cb_put(er + (size_t)rank * s, h, (size_t)s); /* own block: no transfer needed */
    cb_get(got, er, rbytes);
    int bad_e = memcmp(got, ref, rbytes) != 0;
    if (bad || bad_e) {
        fprintf(stderr, "[rank %d] %s %ld: VERIFY FAILED (%s)\n", rank, bcast ? "bcast" : "allgather", s,
                bad ? "gdte" : "expert");
        failures++;
    }
    int64_t p0 = counter("coll_pack_launches"), u0 = counter("coll_unpack_launches");
    double g = time_median(ag_gdte, &a);
    double packs = (double)(counter("coll_pack_launches") - p0) / (warmup + iters);
    double unpacks = (double)(counter("coll_unpack_launches") - u0) / (warmup + iters);
    double e = time_median(ag_expert, &a);
    csv_row(bcast ? "bcast" : "allgather", s, g, e, packs, unpacks);
    ipc_close_all();
    dev_free(a.sb);
    dev_free(a.rb);
    cb_free(es);
    cb_free(er);
    free(h);
    free(ref);
    free(got);
}

/* ---- allreduce ---- */
typedef struct {
    long s; /* bytes per rank */
    double *sb, *rb, *er;
    ag_t ag; /* the expert's gather of every rank's vector into er */
} ar_t;
static void ar_gdte(void *p)
{
    ar_t *a = p;
    MPI_Allreduce(a->sb, a->rb, (int)(a->s / 8), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}
static void ar_expert(void *p)
{
    ar_t *a = p;
    ag_expert(&a->ag);
    cb_sum_rows(a->rb, a->er, np, a->s / 8);
    cb_sync();
}
static void bench_allreduce(long s)
{
    ar_t a;
    memset(&a, 0, sizeof a);
    a.s = s;
    long n = s / 8;
    double *h = malloc((size_t)s), *ref = malloc((size_t)s), *got = malloc((size_t)s);
    for (long i = 0; i < n; i++) h[i] = (double)((rank * 31 + i * 7) % 1000);
    MPI_Allreduce(h, ref, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    a.sb = dev_alloc((size_t)s);
    a.rb = dev_alloc((size_t)s);
    cb_put(a.sb, h, (size_t)s);
    ar_gdte(&a);
    cb_get(got, a.rb, (size_t)s);
    int bad = memcmp(got, ref, (size_t)s) != 0;
    /* the expert's buffers: plain device memory */
    double *es = cb_alloc((size_t)s), *eres = cb_alloc((size_t)s);
    a.er = cb_alloc((size_t)s * (size_t)np);
    cb_put(es, h, (size_t)s);
    cb_put((char *)a.er + (size_t)rank * (size_t)s, h, (size_t)s); /* its own row stays */
    a.ag.s = s;
    a.ag.x = (xchg_t){(char *)es, (char *)a.er, (size_t)s, ag_soff, ag_roff, ag_len, &a.ag};
    ipc_open_all(&a.ag.x);
    double *grb = a.rb;
    a.rb = eres;
    ar_expert(&a);
    cb_get(got, eres, (size_t)s);
    int bad_e = memcmp(got, ref, (size_t)s) != 0;
    if (bad || bad_e) {
        fprintf(stderr, "[rank %d] allreduce %ld: VERIFY FAILED (%s)\n", rank, s, bad ? "gdte" : "expert");
        failures++;
    }
    double e = time_median(ar_expert, &a);
    a.rb = grb;
    int64_t p0 = counter("coll_pack_launches"), u0 = counter("coll_unpack_launches");
    double g = time_median(ar_gdte, &a);
    double packs = (double)(counter("coll_pack_launches") - p0) / (warmup + iters);
    double unpacks = (double)(counter("coll_unpack_launches") - u0) / (warmup + iters);
    csv_row("allreduce", s, g, e, packs, unpacks);
    ipc_close_all();
    dev_free(a.sb);
    dev_free(a.rb);
    cb_free(es);
    cb_free(eres);
    cb_free(a.er);
    free(h);
    free(ref);
    free(got);
}

static int parse_list(const char *s, long *out, int max)
{
    int n = 0;
    while (s && *s && n < max) {
        char *end;
        long v = strtol(s, &end, 10);
        if (*end == 'K' || *end == 'k') v <<= 10, end++;
        else if (*end == 'M' || *end == 'm') v <<= 20, end++;
        out[n++] = v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') break;
    }
    return n;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    const char *which = "all";
    long tsz[8] = {256, 512}, hsz[8] = {128, 256}, bsz[32];
    int nt = 2, nh = 2, nb = 0;
    for (long b = 1024; b <= (64L << 20); b *= 4) bsz[nb++] = b;
    static const struct option opts[] = {
        {"bench", required_argument, 0, 'b'},     {"sizes-transpose", required_argument, 0, 't'},
        {"sizes-halo", required_argument, 0, 'H'}, {"sizes-bytes", required_argument, 0, 's'},
        {"iters", required_argument, 0, 'i'},     {"warmup", required_argument, 0, 'w'},
        {"mpi-label", required_argument, 0, 'L'}, {"csv", required_argument, 0, 'c'},
        {0, 0, 0, 0}};
    int o, bad = 0;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'b': which = optarg; break;
        case 't': nt = parse_list(optarg, tsz, 8); break;
        case 'H': nh = parse_list(optarg, hsz, 8); break;
        case 's': nb = parse_list(optarg, bsz, 32); break;
        case 'i': iters = atoi(optarg); break;
        case 'w': warmup = atoi(optarg); break;
        case 'L': mpi_label = optarg; break;
        case 'c': csv_path = optarg; break;
        default: bad = 1;
        }
    }
    if (bad || optind < argc) {
        if (rank == 0)
            fprintf(stderr, "usage: collbench [--bench all|transpose|halo|allgather|bcast|allreduce] [--sizes-transpose N,...] [--sizes-halo N,...]"
                            " [--sizes-bytes B,...] [--iters N] [--warmup N] [--mpi-label L] [--csv FILE]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (np > 64) {
        if (rank == 0) fprintf(stderr, "collbench: at most 64 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    gpu = cb_init(rank);
    {
        /* GPU indices of every rank (each picks rank % GPUs): the CSV's gpus column. */
        int g[64];
        MPI_Allgather(&gpu, 1, MPI_INT, g, 1, MPI_INT, MPI_COMM_WORLD);
        for (int i = 0; i < np; i++) {
            int seen = g[i] < 0;
            for (int j = 0; j < i && !seen; j++) seen = g[j] == g[i];
            gpus += !seen;
        }
    }
    if (rank == 0)
        printf("collbench: %d ranks on %d GPU(s), %s, gdte interposer: %s, commit %s\n", np, gpus, gpu >= 0 ? cb_device_name() : "host memory (fake device)",
               gdte_mpi_counter ? "present" : "absent", commit());
    int all = !strcmp(which, "all");
    if (all || !strcmp(which, "transpose"))
        for (int i = 0; i < nt; i++) bench_transpose(tsz[i]);
    if (all || !strcmp(which, "halo"))
        for (int i = 0; i < nh; i++) bench_halo(hsz[i]);
    if (all || !strcmp(which, "allgather"))
        for (int i = 0; i < nb; i++) bench_bytes(bsz[i], 0);
    if (all || !strcmp(which, "bcast"))
        for (int i = 0; i < nb; i++) bench_bytes(bsz[i], 1);
    if (all || !strcmp(which, "allreduce"))
        for (int i = 0; i < nb; i++) bench_allreduce(bsz[i]);
    int tf = 0;
    MPI_Allreduce(&failures, &tf, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("collbench: %s\n", tf ? "VERIFY FAILED" : "all results verified");
    MPI_Finalize();
    return tf ? 1 : 0;
}
