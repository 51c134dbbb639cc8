/*
 * packbatch: K boxes packed with MPI_Pack into one device buffer and sent, the way a halo code
 * that builds one message per neighbour does (issue 13, item 5). 2 ranks; the boxes are the 6
 * faces of an n^3 block of doubles with a halo of 1 ((n+2)^3 grid, subarray types: x faces are
 * n rows of n doubles, y faces n rows at a plane's stride, z faces single doubles at a row's
 * stride). One cycle, timed on rank 0:
 *
 *   rank 0: K x MPI_Pack(face -> packed, position)   MPI_Send(packed, MPI_PACKED)   MPI_Recv(ack)
 *   rank 1: MPI_Recv(packed)   K x MPI_Unpack(packed -> ghost face)   MPI_Send(ack)
 *
 * Methods (the same message through the same MPI in each):
 *   mpi_pack       as above (through libgdte_mpi.so: the packs and unpacks between device
 *                  buffers are deferred; the send, and the ack on the receiver, wait once);
 *   mpi_pack_each  as above with a no-op intercepted MPI call (MPI_Sendrecv to MPI_PROC_NULL)
 *                  after every MPI_Pack/MPI_Unpack: one wait per call, what gdte did before;
 *   copy           the baseline: the same number of bytes moved by one device-to-device
 *                  cudaMemcpyAsync + stream synchronisation into the send buffer (and out of the
 *                  receive buffer), the same send and ack: the cost of the message with an ideal
 *                  (contiguous) pack.
 * mpi_pack's result is verified after its first cycle against the MPI's own MPI_Pack/MPI_Unpack
 * on host copies (every byte of the receiver's grid); a failure prints VERIFY FAILED, exit 1.
 *
 * CSV (--csv, appended; header written when the file is empty):
 *   device,commit,gpus,n,boxes,method,bytes,median_us,ratio_to_copy,syncs_send,syncs_recv
 * median_us: per cycle; ratio_to_copy: copy's time / this one; syncs_*: the interposer's
 * pack_syncs per cycle on each rank (empty without the interposer).
 *
 * Memory: --mem device (cudaMalloc; CUDA builds) or --mem host (registered as fake device
 * memory when libgdte_mpi.so is preloaded: with GDTE_FAKE_DEVICE=1 the interposer's paths run
 * without a GPU, as the CI test does; the figures then measure host code only).
 *
 * Usage: mpirun -np 2 -x LD_PRELOAD=libgdte_mpi.so packbatch [--mem device|host]
 *        [--sizes 64,128,256] [--iters 50] [--warmup 5] [--methods mpi_pack,mpi_pack_each,copy]
 *        [--csv FILE]
 */
#include <getopt.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mpibench_mem.h"

#ifndef PACKBATCH_COMMIT
#define PACKBATCH_COMMIT "unknown"
#endif

extern int64_t gdte_mpi_counter(const char *name) __attribute__((weak));

enum { M_PACK, M_EACH, M_COPY, M_COUNT };
static const char *method_name[M_COUNT] = {"mpi_pack", "mpi_pack_each", "copy"};
#define BOXES 6
#define POISON 0xA5
#define MAX_SIZES 32
enum { TAG_DATA = 200, TAG_ACK };

static int rank, device_mem;
static MPI_Comm comm;


static void *buf_alloc(size_t n) { return mbm_alloc(n, device_mem, "packbatch"); }
static void buf_free(void *p) { mbm_free(p, device_mem); }
static void copy_sync(void *dst, const void *src, size_t n) { mbm_copy(dst, src, n, device_mem); }

/* ---- the block ------------------------------------------------------------------------------ */
typedef struct {
    int n;
    size_t grid_bytes, packed_bytes;
    MPI_Datatype sface[BOXES], rface[BOXES]; /* interior faces sent, ghost faces received */
    unsigned char *grid, *packed, *contig;    /* device (or fake device) */
    unsigned char *host;                      /* host image of a grid */
} block_t;

static void block_make(block_t *b, int n)
{
    memset(b, 0, sizeof *b);
    b->n = n;
    int N = n + 2, sizes[3] = {N, N, N};
    for (int d = 0; d < 3; d++)
        for (int side = 0; side < 2; side++) {
            int sub[3] = {n, n, n}, ss[3] = {1, 1, 1}, rs[3] = {1, 1, 1};
            sub[d] = 1;
            ss[d] = side ? n : 1;     /* the interior plane next to the ghost plane */
            rs[d] = side ? n + 1 : 0; /* the ghost plane */
            int k = 2 * d + side;
            MPI_Type_create_subarray(3, sizes, sub, ss, MPI_ORDER_C, MPI_DOUBLE, &b->sface[k]);
            MPI_Type_create_subarray(3, sizes, sub, rs, MPI_ORDER_C, MPI_DOUBLE, &b->rface[k]);
            MPI_Type_commit(&b->sface[k]);
            MPI_Type_commit(&b->rface[k]);
        }
    b->grid_bytes = (size_t)N * N * N * sizeof(double);
    b->packed_bytes = (size_t)BOXES * n * n * sizeof(double);
    b->grid = buf_alloc(b->grid_bytes);
    b->packed = buf_alloc(b->packed_bytes);
    b->contig = buf_alloc(b->packed_bytes);
    b->host = malloc(b->grid_bytes);
}
static void block_free(block_t *b)
{
    for (int k = 0; k < BOXES; k++) {
        MPI_Type_free(&b->sface[k]);
        MPI_Type_free(&b->rface[k]);
    }
    buf_free(b->grid);
    buf_free(b->packed);
    buf_free(b->contig);
    free(b->host);
}
static void fill_sender(unsigned char *p, size_t n)
{
    double *d = (double *)p;
    for (size_t i = 0; i < n / sizeof(double); i++) d[i] = (double)i * 1.25 + 0.5;
}

/* ---- one cycle ------------------------------------------------------------------------------ */
static void flush_point(void)
{
    MPI_Sendrecv(NULL, 0, MPI_BYTE, MPI_PROC_NULL, 0, NULL, 0, MPI_BYTE, MPI_PROC_NULL, 0, comm, MPI_STATUS_IGNORE);
}

static double cycle(block_t *b, int m)
{
    char ack = 0;
    int total = (int)b->packed_bytes;
    MPI_Barrier(comm);
    double t0 = MPI_Wtime();
    if (rank == 0) {
        if (m == M_COPY) {
            if (device_mem) {
                mb_copy_async(b->packed, b->contig, b->packed_bytes);
                mb_sync();
            } else {
                memcpy(b->packed, b->contig, b->packed_bytes);
            }
        } else {
            int pos = 0;
            for (int k = 0; k < BOXES; k++) {
                MPI_Pack(b->grid, 1, b->sface[k], b->packed, total, &pos, comm);
                if (m == M_EACH) flush_point();
            }
        }
        MPI_Send(b->packed, total, MPI_PACKED, 1, TAG_DATA, comm);
        MPI_Recv(&ack, 1, MPI_CHAR, 1, TAG_ACK, comm, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
        MPI_Recv(b->packed, total, MPI_PACKED, 0, TAG_DATA, comm, MPI_STATUS_IGNORE);
        if (m == M_COPY) {
            if (device_mem) {
                mb_copy_async(b->contig, b->packed, b->packed_bytes);
                mb_sync();
            } else {
                memcpy(b->contig, b->packed, b->packed_bytes);
            }
        } else {
            int pos = 0;
            for (int k = 0; k < BOXES; k++) {
                MPI_Unpack(b->packed, total, &pos, b->grid, 1, b->rface[k], comm);
                if (m == M_EACH) flush_point();
            }
        }
        MPI_Send(&ack, 1, MPI_CHAR, 0, TAG_ACK, comm); /* the interposer waits for the unpacks first */
    }
    return MPI_Wtime() - t0;
}

/* The receiver's grid after one mpi_pack cycle against the MPI's own packing on host copies. */
static int verify(block_t *b)
{
    if (rank == 0) {
        fill_sender(b->host, b->grid_bytes);
        copy_sync(b->grid, b->host, b->grid_bytes);
    } else if (rank == 1) {
        memset(b->host, POISON, b->grid_bytes);
        copy_sync(b->grid, b->host, b->grid_bytes);
    }
    cycle(b, M_PACK);
    if (rank != 1) return 0;
    unsigned char *src = malloc(b->grid_bytes), *want = malloc(b->grid_bytes), *stream = malloc(b->packed_bytes);
    fill_sender(src, b->grid_bytes);
    memset(want, POISON, b->grid_bytes);
    int pos = 0, total = (int)b->packed_bytes;
    for (int k = 0; k < BOXES; k++) MPI_Pack(src, 1, b->sface[k], stream, total, &pos, MPI_COMM_SELF);
    pos = 0;
    for (int k = 0; k < BOXES; k++) MPI_Unpack(stream, total, &pos, want, 1, b->rface[k], MPI_COMM_SELF);
    copy_sync(b->host, b->grid, b->grid_bytes);
    size_t i = 0;
    while (i < b->grid_bytes && b->host[i] == want[i]) i++;
    int bad = i != b->grid_bytes;
    if (bad)
        fprintf(stderr, "[%d] VERIFY FAILED: n %d: grid byte %zu is 0x%02x, want 0x%02x\n", rank, b->n, i, b->host[i],
                want[i]);
    free(src);
    free(want);
    free(stream);
    return bad;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int64_t syncs(void) { return gdte_mpi_counter ? gdte_mpi_counter("pack_syncs") : -1; }

/* Median cycle time (rank 0's), and the pack_syncs per cycle of each rank. */
static double measure(block_t *b, int m, int warmup, int iters, double *ssend, double *srecv)
{
    for (int i = 0; i < warmup; i++) cycle(b, m);
    double *t = malloc((size_t)iters * sizeof *t);
    int64_t s0 = syncs();
    for (int i = 0; i < iters; i++) t[i] = cycle(b, m);
    double per = syncs() >= 0 ? (double)(syncs() - s0) / iters : -1, both[2] = {per, per};
    MPI_Gather(&per, 1, MPI_DOUBLE, rank == 0 ? both : NULL, 1, MPI_DOUBLE, 0, comm);
    qsort(t, (size_t)iters, sizeof *t, cmp_double);
    double med = iters % 2 ? t[iters / 2] : 0.5 * (t[iters / 2 - 1] + t[iters / 2]);
    free(t);
    MPI_Bcast(&med, 1, MPI_DOUBLE, 0, comm);
    *ssend = both[0];
    *srecv = both[1];
    return med;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    comm = MPI_COMM_WORLD;
#ifdef PACKBATCH_CUDA
    device_mem = 1;
#endif
    int sizes[MAX_SIZES] = {64, 128, 256}, nsizes = 3, iters = 50, warmup = 5, use[M_COUNT] = {1, 1, 1};
    const char *csv_path = NULL;
    static struct option opts[] = {{"mem", required_argument, 0, 'm'},     {"sizes", required_argument, 0, 's'},
                                   {"iters", required_argument, 0, 'i'},   {"warmup", required_argument, 0, 'w'},
                                   {"methods", required_argument, 0, 'M'}, {"csv", required_argument, 0, 'c'},
                                   {0, 0, 0, 0}};
    int c, bad_opt = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'm': device_mem = !strcmp(optarg, "device"); bad_opt |= !device_mem && strcmp(optarg, "host"); break;
        case 's': {
            nsizes = 0;
            for (char *s = optarg; s && *s && nsizes < MAX_SIZES; s = strchr(s, ',') ? strchr(s, ',') + 1 : NULL)
                sizes[nsizes++] = atoi(s);
            break;
        }
        case 'i': iters = atoi(optarg); break;
        case 'w': warmup = atoi(optarg); break;
        case 'M':
            for (int k = 0; k < M_COUNT; k++) use[k] = strstr(optarg, method_name[k]) != NULL;
            /* "mpi_pack" is a prefix of "mpi_pack_each": asked for only when listed alone. */
            use[M_PACK] = 0;
            for (const char *s = optarg; (s = strstr(s, "mpi_pack")); s += 8)
                if (s[8] == ',' || s[8] == 0) use[M_PACK] = 1;
            break;
        case 'c': csv_path = optarg; break;
        default: bad_opt = 1;
        }
    }
    if (bad_opt || size != 2 || iters < 1) {
        if (rank == 0)
            fprintf(stderr, "usage: mpirun -np 2 packbatch [--mem device|host] [--sizes 64,128,256] [--iters N] "
                            "[--warmup N] [--methods mpi_pack,mpi_pack_each,copy] [--csv FILE]\n");
        MPI_Finalize();
        return 2;
    }
    const char *device = "host", *commit = PACKBATCH_COMMIT;
    if (getenv("GDTETEST_COMMIT") && *getenv("GDTETEST_COMMIT")) commit = getenv("GDTETEST_COMMIT");
    int gpus = 0;
    if (device_mem) {
        int ok = mb_init(rank) >= 0, all = 0;
        MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
        if (!all) {
            MPI_Finalize();
            return 2;
        }
        device = mb_device_name();
        char keys[2][64] = {{0}};
        snprintf(keys[0], sizeof keys[0], "%s", mb_device_key());
        MPI_Gather(keys[0], 64, MPI_CHAR, rank == 0 ? keys : NULL, 64, MPI_CHAR, 0, comm);
        gpus = strcmp(keys[0], keys[1]) ? 2 : 1;
    }
    FILE *csv = NULL;
    if (rank == 0) {
        printf("packbatch: %s memory on %s, %d GPU(s), interposer %s, %d boxes (faces of n^3 doubles), %d iterations "
               "after %d\n",
               device_mem ? "device" : "host", device, gpus, gdte_mpi_counter ? "present" : "absent", BOXES, iters,
               warmup);
        printf("%6s %-14s %10s %12s %14s %10s %10s\n", "n", "method", "bytes", "median_us", "ratio_to_copy",
               "syncs_send", "syncs_recv");
        if (csv_path && (csv = fopen(csv_path, "a+"))) {
            fseek(csv, 0, SEEK_END);
            if (ftell(csv) == 0)
                fprintf(csv, "device,commit,gpus,n,boxes,method,bytes,median_us,ratio_to_copy,syncs_send,syncs_recv\n");
        }
    }
    int failed = 0;
    for (int si = 0; si < nsizes && !failed; si++) {
        block_t b;
        block_make(&b, sizes[si]);
        int bad = rank < 2 ? verify(&b) : 0;
        MPI_Allreduce(&bad, &failed, 1, MPI_INT, MPI_MAX, comm);
        if (failed) {
            block_free(&b);
            break;
        }
        double t[M_COUNT] = {0}, ss[M_COUNT], sr[M_COUNT];
        /* The baseline first: every row's ratio needs it. */
        for (int k = M_COUNT - 1; k >= 0; k--)
            if (use[k] || k == M_COPY) t[k] = measure(&b, k, warmup, iters, &ss[k], &sr[k]);
        for (int k = 0; k < M_COUNT && rank == 0; k++) {
            if (!use[k]) continue;
            char ratio[32] = "", s1[32] = "", s2[32] = "";
            if (t[k] > 0) snprintf(ratio, sizeof ratio, "%.3f", t[M_COPY] / t[k]);
            if (ss[k] >= 0) snprintf(s1, sizeof s1, "%.2f", ss[k]);
            if (sr[k] >= 0) snprintf(s2, sizeof s2, "%.2f", sr[k]);
            printf("%6d %-14s %10zu %12.2f %14s %10s %10s\n", b.n, method_name[k], b.packed_bytes, t[k] * 1e6, ratio,
                   s1, s2);
            if (csv)
                fprintf(csv, "%s,%s,%d,%d,%d,%s,%zu,%.2f,%s,%s,%s\n", device, commit, gpus, b.n, BOXES, method_name[k],
                        b.packed_bytes, t[k] * 1e6, ratio, s1, s2);
        }
        fflush(stdout);
        block_free(&b);
    }
    if (csv) fclose(csv);
    MPI_Finalize();
    return failed ? 1 : 0;
}
