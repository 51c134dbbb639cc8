// CUDA backend of bench/mpi: device buffers, copies on one non-blocking stream, and the IPC
// mapping of the peer's buffer for the raw baseline. No kernels. Built only with GDTE_GPU=CUDA
// (CMake) or by tools/device_run.sh's standalone build against another MPI.
#include <cuda_runtime.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mpibench_backend.h"

static cudaStream_t stream;
static char device_name[256], device_key[64];

#define CK(call)                                                                                 \
    do {                                                                                         \
        cudaError_t e_ = (call);                                                                 \
        if (e_ != cudaSuccess) {                                                                 \
            fprintf(stderr, "mpibench: %s failed: %s (%s:%d)\n", #call, cudaGetErrorString(e_), \
                    __FILE__, __LINE__);                                                         \
            abort();                                                                             \
        }                                                                                        \
    } while (0)

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
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        fprintf(stderr, "mpibench: no CUDA device\n");
        return -1;
    }
    int dev = rank % n;
    CK(cudaSetDevice(dev));
    if (!stream) CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, dev));
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
extern "C" void mb_free(void *p)
{
    if (p) CK(cudaFree(p));
}
extern "C" void mb_memcpy(void *dst, const void *src, size_t bytes)
{
    CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream));
    CK(cudaStreamSynchronize(stream));
}
extern "C" void mb_copy_async(void *dst, const void *src, size_t bytes)
{
    CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream));
}
extern "C" void mb_sync(void) { CK(cudaStreamSynchronize(stream)); }

extern "C" size_t mb_ipc_handle_size(void) { return sizeof(cudaIpcMemHandle_t); }
extern "C" int mb_ipc_get(void *p, void *handle)
{
    cudaIpcMemHandle_t h;
    if (cudaIpcGetMemHandle(&h, p) != cudaSuccess) return -1;
    memcpy(handle, &h, sizeof h);
    return 0;
}
extern "C" void *mb_ipc_open(const void *handle)
{
    cudaIpcMemHandle_t h;
    memcpy(&h, handle, sizeof h);
    void *p = NULL;
    cudaError_t e = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess);
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
