// CUDA backend of the halo3d benchmark: device grids and the expert baseline's hand-written
// face pack/unpack kernels (one thread per element, coalesced along the fastest face index),
// everything on one non-blocking stream. Built only with GDTE_GPU=CUDA.
#include "halo3d_backend.h"
#define BENCH_NAME "halo3d"
#include "../common/bench_cuda.cuh"

static char device_name[256];

extern "C" int hb_init(int local_rank)
{
    cudaDeviceProp p;
    int dev = bench_cuda_init(local_rank, &p);
    if (dev < 0) return -2;
    snprintf(device_name, sizeof device_name, "%s", p.name);
    for (char *c = device_name; *c; c++)
        if (*c == ' ' || *c == ',') *c = '-';
    return dev;
}

extern "C" const char *hb_device_name(void) { return device_name; }

extern "C" void *hb_dev_alloc(size_t bytes) { return bench_dev_alloc_zero(bytes); }
extern "C" void hb_dev_free(void *p) { bench_dev_free(p); }
extern "C" void *hb_pinned_alloc(size_t bytes)
{
    void *p = NULL;
    CK(cudaMallocHost(&p, bytes));
    return p;
}
extern "C" void hb_pinned_free(void *p)
{
    if (p) CK(cudaFreeHost(p));
}
extern "C" void hb_memcpy(void *dst, const void *src, size_t bytes) { bench_copy(dst, src, bytes); }
extern "C" void hb_memcpy_async(void *dst, const void *src, size_t bytes) { bench_copy_async(dst, src, bytes); }
extern "C" void hb_sync(void) { bench_sync(); }

// Face element q = a * n + c (c fastest) <-> grid cell with coordinate `dim` fixed at `at`.
__global__ void face_kernel(double *grid, int n, int dim, int at, double *buf, int unpack)
{
    size_t total = (size_t)n * n;
    size_t N = (size_t)n + 2;
    for (size_t q = blockIdx.x * (size_t)blockDim.x + threadIdx.x; q < total; q += (size_t)gridDim.x * blockDim.x) {
        size_t a = q / n + 1, c = q % n + 1;
        size_t i, j, k;
        if (dim == 0) i = at, j = a, k = c;
        else if (dim == 1) i = a, j = at, k = c;
        else i = a, j = c, k = at;
        size_t o = (i * N + j) * N + k;
        if (unpack) grid[o] = buf[q];
        else buf[q] = grid[o];
    }
}

static void launch(double *grid, hb_face_t f, double *buf, int unpack)
{
    size_t total = (size_t)f.n * f.n;
    int threads = 256;
    size_t blocks = (total + threads - 1) / threads;
    if (blocks > 65535) blocks = 65535;
    face_kernel<<<(unsigned)blocks, threads, 0, bench_stream>>>(grid, f.n, f.dim, f.at, buf, unpack);
    CK(cudaGetLastError());
}

extern "C" void hb_pack_face(const double *grid, hb_face_t f, double *buf) { launch((double *)grid, f, buf, 0); }
extern "C" void hb_unpack_face(double *grid, hb_face_t f, const double *buf) { launch(grid, f, (double *)buf, 1); }
