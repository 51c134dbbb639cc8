// CUDA backend of bench/mpi: device buffers, copies on one non-blocking stream, and the IPC
// mapping of the peer's buffer for the raw baseline. No kernels. Built only with GDTE_GPU=CUDA
// (CMake) or by tools/device_run.sh's standalone build against another MPI. A CUDA call that
// may fail here (no device, IPC refused) leaves no error pending for the MPI or gdte.
#include <ctype.h>
#include <string.h>
#include "mpibench_backend.h"
#define BENCH_NAME "mpibench"
#include "../common/bench_cuda.cuh"

static char device_name[256], device_key[64];

// "NVIDIA H100 80GB HBM3" -> "H100": the first word (split at ' ' and '-') made of capitals
// then a digit; else the whole name with '-' for ' ' and ','.
static void short_name(const char *full, char *out, size_t n)
{
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s", full);
    for (char *save = NULL, *w = strtok_r(tmp, " -", &save); w; w = strtok_r(NULL, " -", &save)) {
        const char *c = w;
        while (isupper((unsigned char)*c)) c++;
        if (c > w && isdigit((unsigned char)*c)) {
            snprintf(out, n, "%s", w);
            return;
        }
    }
    snprintf(out, n, "%s", full);
    for (char *c = out; *c; c++)
        if (*c == ' ' || *c == ',') *c = '-';
}

extern "C" int mb_init(int rank)
{
    cudaDeviceProp p;
    int dev = bench_cuda_init(rank, &p);
    if (dev < 0) return -1;
    short_name(p.name, device_name, sizeof device_name);
    CK(cudaDeviceGetPCIBusId(device_key, sizeof device_key, dev));
    return dev;
}

extern "C" const char *mb_device_name(void) { return device_name; }
extern "C" const char *mb_device_key(void) { return device_key; }

extern "C" void *mb_alloc(size_t bytes)
{
    void *p = NULL;
    CK(cudaMalloc(&p, bytes ? bytes : 1));
    return p;
}
extern "C" void mb_free(void *p) { bench_dev_free(p); }
extern "C" void mb_memcpy(void *dst, const void *src, size_t bytes) { bench_copy(dst, src, bytes); }
extern "C" void mb_copy_async(void *dst, const void *src, size_t bytes) { bench_copy_async(dst, src, bytes); }
extern "C" void mb_sync(void) { bench_sync(); }

extern "C" size_t mb_ipc_handle_size(void) { return sizeof(cudaIpcMemHandle_t); }
extern "C" int mb_ipc_get(void *p, void *handle)
{
    cudaIpcMemHandle_t h;
    cudaError_t e = bench_cuda_try(cudaIpcGetMemHandle(&h, p));
    if (e != cudaSuccess) {
        fprintf(stderr, "mpibench: cudaIpcGetMemHandle: %s\n", cudaGetErrorString(e));
        return -1;
    }
    memcpy(handle, &h, sizeof h);
    return 0;
}
// `handle`: the peer process's handle (a process cannot open its own).
extern "C" void *mb_ipc_open(const void *handle)
{
    cudaIpcMemHandle_t h;
    memcpy(&h, handle, sizeof h);
    void *p = NULL;
    cudaError_t e = bench_cuda_try(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess));
    if (e != cudaSuccess) {
        fprintf(stderr, "mpibench: cudaIpcOpenMemHandle: %s\n", cudaGetErrorString(e));
        return NULL;
    }
    return p;
}
extern "C" void mb_ipc_close(void *p)
{
    if (p) CK(cudaIpcCloseMemHandle(p));
}
