/*
 * A CPU emulator of the GPU execution model, just large enough to run src/kernels/pack_kernels.cu
 * on a machine without a GPU (CI). It stands in for the CUDA runtime header that gpu_compat.h
 * includes when the file is built as plain C++ (tests/gpu/CMakeLists.txt puts this folder first
 * on the include path for that build only).
 *
 * Each thread of a block is a fiber (ucontext) with its own stack; __syncthreads() switches
 * back to the block's scheduler, which resumes every fiber once per round, so a barrier holds
 * exactly as on the device. Blocks run one after the other; `__shared__` variables are
 * function statics, which is what one resident block at a time needs. "Device memory" is
 * host memory, so AddressSanitizer and UBSan's alignment check watch every kernel access:
 * a 16-byte word at an address that is not 16-byte aligned is reported, as the GPU would fault.
 *
 * What it does not model: concurrency between threads other than at barriers (racecheck on
 * the device covers that), warp-synchronous behaviour (the kernels use none), timing.
 */
#ifndef GDTETEST_CUDA_EMU_H
#define GDTETEST_CUDA_EMU_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <functional>
#include <vector>

/* ---- types ---- */
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct __attribute__((aligned(16))) uint4 {
    unsigned x, y, z, w;
};

typedef int cudaError_t;
enum {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorNoDevice = 100,
    cudaErrorInsufficientDriver = 35,
    cudaErrorNotReady = 600,
    cudaErrorNotSupported = 801,
    cudaErrorPeerAccessAlreadyEnabled = 704,
    cudaErrorHostMemoryAlreadyRegistered = 712,
};
enum cudaMemcpyKind { cudaMemcpyHostToHost, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice, cudaMemcpyDefault };
enum cudaMemoryType { cudaMemoryTypeUnregistered, cudaMemoryTypeHost, cudaMemoryTypeDevice, cudaMemoryTypeManaged };
enum cudaDriverEntryPointQueryResult { cudaDriverEntryPointSuccess = 0 };
enum { cudaEnableDefault = 0 };
typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;
typedef struct CUgraph_st *cudaGraph_t;
typedef struct CUgraphExec_st *cudaGraphExec_t;
struct cudaDeviceProp {
    char name[256];
};
struct cudaPointerAttributes {
    enum cudaMemoryType type;
    int device;
};
typedef struct {
    char reserved[64];
} cudaIpcMemHandle_t;

/* ---- the runtime calls pack_kernels.cu makes ---- */
static inline cudaError_t cudaGetLastError(void) { return cudaSuccess; }
static inline const char *cudaGetErrorString(cudaError_t) { return "emulated error"; }
static inline const char *cudaGetErrorName(cudaError_t) { return "cudaErrorEmulated"; }
static inline cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind, cudaStream_t)
{
    memmove(d, s, n);
    return cudaSuccess;
}
/* A pretend SM holds two blocks of any kernel. */
template <class K> static inline cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *n, K, int, size_t)
{
    *n = 2;
    return cudaSuccess;
}
cudaError_t cudaGetDriverEntryPointByVersion(const char *, void **, unsigned, unsigned long long,
                                             enum cudaDriverEntryPointQueryResult *);

/* ---- execution model ---- */
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)

struct gdte_emu_fiber {
    ucontext_t ctx;
    dim3 tid;
    bool done;
};
extern gdte_emu_fiber *gdte_emu_cur;
extern dim3 gdte_emu_block, gdte_emu_bdim, gdte_emu_gdim;
extern ucontext_t gdte_emu_sched;
extern std::function<void()> *gdte_emu_fn;
extern int64_t gdte_emu_launches;

#define threadIdx (gdte_emu_cur->tid)
#define blockIdx gdte_emu_block
#define blockDim gdte_emu_bdim
#define gridDim gdte_emu_gdim

static inline void __syncthreads(void) { swapcontext(&gdte_emu_cur->ctx, &gdte_emu_sched); }
/* Integer intrinsics. GDTE_GPU_EMULATOR makes src/kernels/fastdiv.h call them as device code
 * does, rather than its portable host arithmetic. */
#define GDTE_GPU_EMULATOR 1
static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b)
{
    return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
template <class T> static inline T min(T a, T b) { return a < b ? a : b; }
template <class T> static inline T max(T a, T b) { return a > b ? a : b; }

void gdte_emu_run(dim3 grid, dim3 block, std::function<void()> fn);

#define GDTE_LAUNCH(grid, block, stream, arg, ...)                                                  \
    do {                                                                                            \
        (void)(stream);                                                                             \
        auto gdte_emu_arg_ = (arg);                                                                 \
        gdte_emu_run((grid), (block), [=]() { __VA_ARGS__(gdte_emu_arg_); });                      \
    } while (0)

#endif
