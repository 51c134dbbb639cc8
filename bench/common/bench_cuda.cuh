// What the CUDA backends of the MPI benchmarks (bench/mpi/mpibench_cuda.cu,
// bench/halo3d/halo3d_cuda.cu) have in common: the fatal check, the choice of GPU, the one
// non-blocking stream every copy goes on, and the copies themselves. Included by relative path
// ("../common/bench_cuda.cuh") so that a backend still compiles alone with plain nvcc
// (tools/device_run.sh builds bench/mpi that way against another MPI).
//
// Define BENCH_NAME (the program's name, a string literal) before including: CK's message
// starts with it.
#ifndef GDTE_BENCH_COMMON_BENCH_CUDA_CUH
#define GDTE_BENCH_COMMON_BENCH_CUDA_CUH
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef BENCH_NAME
#error "define BENCH_NAME before including bench_cuda.cuh"
#endif

// A CUDA call that must succeed: otherwise print it and abort.
#define CK(call)                                                                                 \
    do {                                                                                         \
        cudaError_t e_ = (call);                                                                 \
        if (e_ != cudaSuccess) {                                                                 \
            fprintf(stderr, BENCH_NAME ": %s failed: %s (%s:%d)\n", #call, cudaGetErrorString(e_), \
                    __FILE__, __LINE__);                                                         \
            abort();                                                                             \
        }                                                                                        \
    } while (0)

// A CUDA call that may fail (the benchmark goes on without what it was for): its result, with
// the runtime's last error cleared, so that no later cudaGetLastError/cudaPeekAtLastError in
// the benchmark, the MPI or gdte's interposer sees this failure as its own.
static inline cudaError_t bench_cuda_try(cudaError_t e)
{
    if (e != cudaSuccess) (void)cudaGetLastError();
    return e;
}

// The backend's stream: every copy and kernel of the benchmark goes on it.
static cudaStream_t bench_stream;

// Selects GPU `index % (number of GPUs)`, creates the stream (once) and reads the GPU's
// properties into *prop. Returns the device, or -1 (with a message) when there is none.
static inline int bench_cuda_init(int index, cudaDeviceProp *prop)
{
    int n = 0;
    if (bench_cuda_try(cudaGetDeviceCount(&n)) != cudaSuccess || n == 0) {
        fprintf(stderr, BENCH_NAME ": no CUDA device\n");
        return -1;
    }
    int dev = index % n;
    CK(cudaSetDevice(dev));
    if (!bench_stream) CK(cudaStreamCreateWithFlags(&bench_stream, cudaStreamNonBlocking));
    CK(cudaGetDeviceProperties(prop, dev));
    return dev;
}
// Any direction, on the stream; bench_sync waits for it.
static inline void bench_copy_async(void *dst, const void *src, size_t bytes)
{
    CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, bench_stream));
}
static inline void bench_sync(void) { CK(cudaStreamSynchronize(bench_stream)); }
// Any direction, synchronous.
static inline void bench_copy(void *dst, const void *src, size_t bytes)
{
    bench_copy_async(dst, src, bytes);
    bench_sync();
}
// Zeroed device memory, ready for any stream: the memset runs on the legacy default stream,
// which bench_stream (non-blocking) does not wait for, so it is completed here.
static inline void *bench_dev_alloc_zero(size_t bytes)
{
    void *p = NULL;
    CK(cudaMalloc(&p, bytes ? bytes : 1));
    CK(cudaMemset(p, 0, bytes ? bytes : 1));
    CK(cudaDeviceSynchronize());
    return p;
}
static inline void bench_dev_free(void *p)
{
    if (p) CK(cudaFree(p));
}

#endif
