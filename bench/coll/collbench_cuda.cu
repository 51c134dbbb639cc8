// CUDA backend of bench/coll: device buffers, the expert version's box kernels (one thread per
// element word of a row, rows over the grid), IPC mappings of other processes' buffers.
#include <ctype.h>
#include <string.h>
#include "collbench_backend.h"
#define BENCH_NAME "collbench"
#include "../common/bench_cuda.cuh"

static char device_name[256];

extern "C" int cb_init(int rank)
{
    cudaDeviceProp p;
    int dev = bench_cuda_init(rank, &p);
    if (dev < 0) return -1;
    // "NVIDIA H100 80GB HBM3" -> "H100"
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s", p.name);
    snprintf(device_name, sizeof device_name, "%s", p.name);
    for (char *save = NULL, *w = strtok_r(tmp, " -", &save); w; w = strtok_r(NULL, " -", &save)) {
        const char *c = w;
        while (isupper((unsigned char)*c)) c++;
        if (c > w && isdigit((unsigned char)*c)) {
            snprintf(device_name, sizeof device_name, "%s", w);
            break;
        }
    }
    return dev;
}
extern "C" int cb_has_ipc(void) { return 1; }
extern "C" const char *cb_device_name(void) { return device_name; }
extern "C" void *cb_alloc(size_t bytes) { return bench_dev_alloc_zero(bytes); }
extern "C" void cb_free(void *p) { bench_dev_free(p); }
extern "C" void cb_put(void *dev, const void *host, size_t bytes) { bench_copy(dev, host, bytes); }
extern "C" void cb_get(void *host, const void *dev, size_t bytes) { bench_copy(host, dev, bytes); }
extern "C" void cb_copy_async(void *dst, const void *src, size_t bytes) { bench_copy_async(dst, src, bytes); }
extern "C" void cb_sync(void) { bench_sync(); }

// Rows of sub[2] elements: W-byte words, a block per row (grid-stride over rows).
template <typename T>
__global__ void k_box(int unpack, char *a, char *d, long s1, long s2, long n0, long n1, long w_per_row, long st0,
                      long st1, long st2, int elem)
{
    long rows = n0 * n1;
    for (long r = blockIdx.x; r < rows; r += gridDim.x) {
        long i = r / n1, j = r - i * n1;
        T *p = (T *)(a + (((st0 + i) * s1 + st1 + j) * s2 + st2) * elem);
        T *q = (T *)(d + r * w_per_row * sizeof(T));
        for (long k = threadIdx.x; k < w_per_row; k += blockDim.x) {
            if (unpack) p[k] = q[k];
            else q[k] = p[k];
        }
    }
}

extern "C" void cb_box(int unpack, void *array, void *dense, const long sizes[3], const long sub[3],
                       const long starts[3], int elem)
{
    long rows = sub[0] * sub[1], rowb = sub[2] * elem;
    if (rows == 0 || rowb == 0) return;
    unsigned grid = (unsigned)(rows < 65535 * 16 ? rows : 65535 * 16);
    if (rowb % 16 == 0 && (starts[2] * elem) % 16 == 0 && (sizes[2] * elem) % 16 == 0)
        k_box<uint4><<<grid, 128, 0, bench_stream>>>(unpack, (char *)array, (char *)dense, sizes[1], sizes[2], sub[0],
                                                     sub[1], rowb / 16, starts[0], starts[1], starts[2], elem);
    else
        k_box<double><<<grid, 128, 0, bench_stream>>>(unpack, (char *)array, (char *)dense, sizes[1], sizes[2], sub[0],
                                                      sub[1], rowb / 8, starts[0], starts[1], starts[2], elem);
    CK(cudaGetLastError());
}

__global__ void k_sum_rows(double *out, const double *rows, int nrows, long n)
{
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        double a = 0;
        for (int r = 0; r < nrows; r++) a += rows[(long)r * n + i];
        out[i] = a;
    }
}

extern "C" void cb_sum_rows(double *out, const double *rows, int nrows, long n)
{
    if (n <= 0) return;
    long blocks = (n + 255) / 256;
    k_sum_rows<<<(unsigned)(blocks < 65535 * 8 ? blocks : 65535 * 8), 256, 0, bench_stream>>>(out, rows, nrows, n);
    CK(cudaGetLastError());
}

extern "C" size_t cb_ipc_handle_size(void) { return sizeof(cudaIpcMemHandle_t); }
extern "C" int cb_ipc_get(void *p, void *handle)
{
    cudaIpcMemHandle_t h;
    if (bench_cuda_try(cudaIpcGetMemHandle(&h, p)) != cudaSuccess) return -1;
    memcpy(handle, &h, sizeof h);
    return 0;
}
extern "C" void *cb_ipc_open(const void *handle)
{
    cudaIpcMemHandle_t h;
    memcpy(&h, handle, sizeof h);
    void *p = NULL;
    cudaError_t e = bench_cuda_try(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess));
    if (e != cudaSuccess) {
        fprintf(stderr, "collbench: cudaIpcOpenMemHandle of a peer's buffer failed: %s (%s)\n", cudaGetErrorName(e),
                cudaGetErrorString(e));
        return NULL;
    }
    return p;
}
extern "C" void cb_ipc_close(void *p)
{
    if (p) CK(cudaIpcCloseMemHandle(p));
}
