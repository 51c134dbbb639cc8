// ctxprobe: what one small GPU operation costs when two processes share one GPU and take turns
// (the pattern of a ping-pong of device messages). Rank 0 and rank 1 alternate: wait for the
// peer's one-byte MPI signal (host memory), run one operation on their own stream, synchronize,
// signal back. Reported per operation and size: half the round trip (one turn), median of
// --iters. Operations: none (signals only), kernel (an empty kernel), d2h / h2d (cudaMemcpyAsync
// between device memory and pinned host memory), d2d (within the process's device memory),
// d2h_2d (cudaMemcpy2DAsync of 8-byte rows at a 16-byte pitch, device to pinned host),
// zc_kernel (a kernel writing mapped pinned host memory), h2d_2d (8-byte rows at a 16-byte pitch,
// pinned host to device), h2d_1row (a 2-D copy of one row), h2d_pageable (from pageable memory),
// h2d_3d (cudaMemcpy3DAsync of one row), h2d_contig2d (a contiguous destination written as 256-byte
// rows from a 512-byte source pitch), h2d_contig2d_sp (two rows, source pitch one byte longer),
// d2d_2d (device to device, 8-byte rows at a 16-byte pitch), d2d_2d_wide (256-byte rows at a
// 512-byte pitch), d2d_contig2d_sp (device to device, two rows, source pitch one byte longer),
// d2h_3d_face / h2d_3d_face (one cudaMemcpy3DAsync of 8-byte rows at a 16-byte pitch, 64 rows a
// plane, planes 66 rows apart: the face of a 3-D grid, between device and pinned host). A diagnostic for where small-message
// latency goes under the interposer, not a benchmark of gdte. Usage: mpirun -np 2 ctxprobe
// [--iters N] [--csv FILE]
#include <mpi.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                      \
        }                                                                                      \
    } while (0)

__global__ void empty_kernel(void) {}
__global__ void fill_kernel(char *dst, const char *src, size_t n)
{
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) dst[i] = src[i];
}

enum { OP_NONE, OP_KERNEL, OP_D2H, OP_H2D, OP_D2D, OP_D2H_2D, OP_ZC_KERNEL, OP_H2D_2D, OP_H2D_1ROW, OP_H2D_PAGEABLE, OP_H2D_3D, OP_H2D_CONTIG2D, OP_H2D_CONTIG2D_SP, OP_D2D_2D, OP_D2D_2D_WIDE, OP_D2D_CONTIG2D_SP, OP_D2H_BATCH, OP_H2D_BATCH, OP_D2D_BATCH, OP_D2H_BATCH_CE, OP_H2D_BATCH_CE, OP_D2D_BATCH_CE, OP_H2D_B3D, OP_D2D_B3D, OP_D2H_3D_FACE, OP_H2D_3D_FACE, OP_COUNT };
static const char *op_names[OP_COUNT] = {"none", "kernel", "d2h", "h2d", "d2d", "d2h_2d", "zc_kernel", "h2d_2d", "h2d_1row", "h2d_pageable", "h2d_3d", "h2d_contig2d", "h2d_contig2d_sp", "d2d_2d", "d2d_2d_wide", "d2d_contig2d_sp", "d2h_batch", "h2d_batch", "d2d_batch", "d2h_batch_ce", "h2d_batch_ce", "d2d_batch_ce", "h2d_b3d", "d2d_b3d", "d2h_3d_face", "h2d_3d_face"};
#define BLK 16 /* the batched ops' block: 16 bytes at a 32-byte device stride */

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, np;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    int iters = 200;
    const char *csv = NULL, *ops = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--csv") && i + 1 < argc) csv = argv[++i];
        else if (!strcmp(argv[i], "--ops") && i + 1 < argc) ops = argv[++i];
    }
    if (np != 2) {
        if (!rank) fprintf(stderr, "ctxprobe: run with 2 ranks\n");
        MPI_Finalize();
        return 2;
    }
    int ndev = 0;
    CK(cudaGetDeviceCount(&ndev));
    CK(cudaSetDevice(rank % ndev));
    const size_t maxn = 256 * 1024;
    char *d0, *d1, *h, *hdev;
    CK(cudaMalloc(&d0, 3 * maxn)); /* the 3-D faces reach 2.07 * n */
    CK(cudaMalloc(&d1, 2 * maxn));
    CK(cudaHostAlloc(&h, 2 * maxn, cudaHostAllocMapped));
    CK(cudaHostGetDevicePointer((void **)&hdev, h, 0));
    char *pageable = (char *)calloc(1, 2 * maxn);
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, rank % ndev));
    const size_t sizes[] = {1024, 16384, 32768, 65536, 262144};
    /* The batched ops' operand lists, for the largest size. */
    const size_t maxb = maxn / BLK;
    void **bd = (void **)malloc(sizeof(void *) * maxb), **bs = (void **)malloc(sizeof(void *) * maxb);
    size_t *bz = (size_t *)malloc(sizeof(size_t) * maxb), aidx = 0;
    struct cudaMemcpy3DBatchOp *b3 = (struct cudaMemcpy3DBatchOp *)calloc(maxb, sizeof *b3);
    for (size_t i = 0; i < maxb; i++) bz[i] = BLK;
    double *t = (double *)malloc(sizeof(double) * iters);
    FILE *f = NULL;
    if (!rank && csv) {
        f = fopen(csv, "a");
        if (f && ftell(f) == 0) fprintf(f, "device,ranks_per_gpu,op,bytes,median_us\n");
    }
    char tok = 0;
    int peer = 1 - rank;
    for (int op = 0; op < OP_COUNT; op++) {
        if (ops) {
            /* --ops: a comma-separated list of op names */
            const char *q = strstr(ops, op_names[op]);
            size_t l = strlen(op_names[op]);
            while (q && !((q == ops || q[-1] == ',') && (q[l] == ',' || q[l] == 0))) q = strstr(q + 1, op_names[op]);
            if (!q) continue;
        }
        for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
            size_t n = sizes[si];
            if ((op == OP_NONE || op == OP_KERNEL) && si > 0) break;
            size_t nb = n / BLK;
            struct cudaMemcpyAttributes at;
            memset(&at, 0, sizeof at);
            at.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
            at.flags = op >= OP_D2H_BATCH_CE ? cudaMemcpyFlagPreferOverlapWithCompute : 0;
            for (size_t i = 0; i < nb; i++) {
                int d2h = op == OP_D2H_BATCH || op == OP_D2H_BATCH_CE, h2d = op == OP_H2D_BATCH || op == OP_H2D_BATCH_CE;
                bs[i] = d2h ? (void *)(d0 + 2 * BLK * i) : h2d ? (void *)(h + BLK * i) : (void *)(d0 + BLK * i);
                bd[i] = d2h ? (void *)(h + BLK * i) : (void *)(d1 + 2 * BLK * i);
                struct cudaMemcpy3DBatchOp *o = &b3[i];
                o->src.type = o->dst.type = cudaMemcpyOperandTypePointer;
                o->src.op.ptr.ptr = op == OP_H2D_B3D ? (void *)(h + (BLK + 2) * i) : (void *)(d0 + (BLK + 2) * i);
                o->src.op.ptr.rowLength = BLK / 2 + 1;
                o->dst.op.ptr.ptr = d1 + 2 * BLK * i;
                o->dst.op.ptr.rowLength = BLK / 2;
                o->extent = make_cudaExtent(BLK / 2, 2, 1);
                o->srcAccessOrder = cudaMemcpySrcAccessOrderStream;
                o->flags = cudaMemcpyFlagPreferOverlapWithCompute;
            }
            for (int it = -10; it < iters; it++) {
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = MPI_Wtime();
                for (int turn = 0; turn < 2; turn++) {
                    if (turn != rank) {
                        MPI_Recv(&tok, 1, MPI_CHAR, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                        continue;
                    }
                    switch (op) {
                    case OP_KERNEL: empty_kernel<<<1, 32, 0, s>>>(); break;
                    case OP_D2H: CK(cudaMemcpyAsync(h, d0, n, cudaMemcpyDeviceToHost, s)); break;
                    case OP_H2D: CK(cudaMemcpyAsync(d0, h, n, cudaMemcpyHostToDevice, s)); break;
                    case OP_D2D: CK(cudaMemcpyAsync(d1, d0, n, cudaMemcpyDeviceToDevice, s)); break;
                    case OP_D2H_2D: CK(cudaMemcpy2DAsync(h, 8, d0, 16, 8, n / 8, cudaMemcpyDeviceToHost, s)); break;
                    case OP_ZC_KERNEL: fill_kernel<<<(unsigned)((n + 255) / 256 < 1024 ? (n + 255) / 256 : 1024), 256, 0, s>>>(hdev, d0, n); break;
                    case OP_H2D_2D: CK(cudaMemcpy2DAsync(d0, 16, h, 8, 8, n / 8, cudaMemcpyHostToDevice, s)); break;
                    case OP_H2D_1ROW: CK(cudaMemcpy2DAsync(d0, n, h, n, n, 1, cudaMemcpyHostToDevice, s)); break;
                    case OP_H2D_PAGEABLE: CK(cudaMemcpyAsync(d0, pageable, n, cudaMemcpyHostToDevice, s)); break;
                    case OP_H2D_3D: {
                        cudaMemcpy3DParms q = {0};
                        q.srcPtr = make_cudaPitchedPtr(h, n, n, 1);
                        q.dstPtr = make_cudaPitchedPtr(d0, n, n, 1);
                        q.extent = make_cudaExtent(n, 1, 1);
                        q.kind = cudaMemcpyHostToDevice;
                        CK(cudaMemcpy3DAsync(&q, s));
                        break;
                    }
                    case OP_D2H_3D_FACE: case OP_H2D_3D_FACE: {
                        cudaMemcpy3DParms q = {0};
                        cudaPitchedPtr g = make_cudaPitchedPtr(d0, 16, 8, 66), hp = make_cudaPitchedPtr(h, 8, 8, 64);
                        q.srcPtr = op == OP_D2H_3D_FACE ? g : hp;
                        q.dstPtr = op == OP_D2H_3D_FACE ? hp : g;
                        q.extent = make_cudaExtent(8, 64, n / (8 * 64));
                        q.kind = op == OP_D2H_3D_FACE ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice;
                        CK(cudaMemcpy3DAsync(&q, s));
                        break;
                    }
                    case OP_H2D_CONTIG2D: /* contiguous destination as 256-byte rows, source rows at a 512-byte pitch */
                        CK(cudaMemcpy2DAsync(d0, 256, h, 512, 256, n / 256, cudaMemcpyHostToDevice, s));
                        break;
                    case OP_H2D_CONTIG2D_SP: /* contiguous both sides, expressed as two rows with a pitch one byte longer at the source */
                        CK(cudaMemcpy2DAsync(d0, n / 2, h, n / 2 + 1, n / 2, 2, cudaMemcpyHostToDevice, s));
                        break;
                    case OP_D2D_2D: CK(cudaMemcpy2DAsync(d1, 16, d0, 8, 8, n / 8, cudaMemcpyDeviceToDevice, s)); break;
                    case OP_D2D_2D_WIDE: CK(cudaMemcpy2DAsync(d1, 512, d0, 256, 256, n / 256, cudaMemcpyDeviceToDevice, s)); break;
                    case OP_D2D_CONTIG2D_SP:
                        CK(cudaMemcpy2DAsync(d1, n / 2, d0, n / 2 + 1, n / 2, 2, cudaMemcpyDeviceToDevice, s));
                        break;
                    case OP_D2H_BATCH: case OP_H2D_BATCH: case OP_D2D_BATCH:
                    case OP_D2H_BATCH_CE: case OP_H2D_BATCH_CE: case OP_D2D_BATCH_CE:
                        CK(cudaMemcpyBatchAsync(bd, bs, bz, nb, &at, &aidx, 1, s));
                        break;
                    case OP_H2D_B3D: case OP_D2D_B3D: CK(cudaMemcpy3DBatchAsync(nb, b3, 0, s)); break;
                    default: break;
                    }
                    CK(cudaStreamSynchronize(s));
                    MPI_Send(&tok, 1, MPI_CHAR, peer, 0, MPI_COMM_WORLD);
                }
                if (it >= 0) t[it] = (MPI_Wtime() - t0) / 2 * 1e6;
            }
            if (!rank) {
                qsort(t, iters, sizeof *t, cmp_d);
                printf("ctxprobe %-10s %7zu B %9.2f us per turn\n", op_names[op], n, t[iters / 2]);
                if (f) fprintf(f, "%s,%d,%s,%zu,%.2f\n", p.name, ndev == 1 ? 2 : 1, op_names[op], n, t[iters / 2]);
            }
        }
    }
    if (f) fclose(f);
    free(t);
    free(bd), free(bs), free(bz), free(b3);
    MPI_Finalize();
    return 0;
}
