/*
 * gpu_compat.h: the HIP runtime names gdte uses, for either vendor.
 *
 * gdte's GPU code (gpu_runtime.c, pack_kernels.cu) is written once against HIP names. A HIP
 * build includes HIP's own header. A CUDA build maps each name here onto the CUDA runtime: we
 * do not use HIP's NVIDIA-side headers because HIP 5.x's do not compile against CUDA 13
 * (cudaDeviceProp and cudaMemAdvise changed). Only what gdte calls is mapped; add a name here
 * before using it. Where the two runtimes differ in more than a name (pointer attributes,
 * address ranges), a small inline helper gives one behaviour.
 */
#ifndef GDTE_GPU_COMPAT_H
#define GDTE_GPU_COMPAT_H

#include <stddef.h>

#if defined(GDTE_GPU_HIP) || defined(__HIP_PLATFORM_AMD__) || defined(__HIP__)
/* ------------------------------------------------------------------------------------------ */
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__ 1
#endif
#if defined(__HIPCC__) || defined(__HIP__)
#include <hip/hip_runtime.h>
#else
#include <hip/hip_runtime_api.h>
#endif

/* HIP 5.x names the pointer's memory type `memoryType` and reports managed memory as a flag;
 * HIP 6 renamed it `type`. */
static inline int gdte_compat_attr_kind(const hipPointerAttribute_t *a)
{
    if (a->isManaged) return 3;
    switch (a->memoryType) {
    case hipMemoryTypeDevice: return 2;
    case hipMemoryTypeHost: return 1;
    default: return 0;
    }
}
/* HIP has the driver-level call in its runtime. */
static inline hipError_t gdte_compat_mem_range(const void *p, void **base_p, size_t *size_p)
{
    hipDeviceptr_t base = 0;
    hipError_t e = hipMemGetAddressRange(&base, size_p, (hipDeviceptr_t)p);
    if (e == hipSuccess) *base_p = (void *)base;
    return e;
}
/* The runtime's unique id of the allocation holding `p` (0: memory the runtime does not know). */
static inline hipError_t gdte_compat_buffer_id(const void *p, unsigned long long *id_p)
{
    unsigned long long id = 0;
    hipError_t e = hipPointerGetAttribute(&id, HIP_POINTER_ATTRIBUTE_BUFFER_ID, (hipDeviceptr_t)p);
    if (e == hipErrorInvalidValue) {
        (void)hipGetLastError();
        id = 0;
        e = hipSuccess;
    }
    *id_p = id;
    return e;
}
/* HIP 5.x fails pointer queries on memory it never saw instead of reporting "unregistered". */
#define GDTE_COMPAT_UNKNOWN_PTR_IS_ERROR 1
#define GDTE_COMPAT_VENDOR "hip"

#else /* CUDA */
/* ------------------------------------------------------------------------------------------ */
#if defined(__CUDACC__)
#include <cuda_runtime.h>
#else
#include <cuda_runtime_api.h>
#endif

typedef cudaError_t hipError_t;
typedef cudaStream_t hipStream_t;
typedef cudaEvent_t hipEvent_t;
typedef struct cudaDeviceProp hipDeviceProp_t;
typedef struct cudaPointerAttributes hipPointerAttribute_t;
typedef cudaIpcMemHandle_t hipIpcMemHandle_t;
typedef cudaGraph_t hipGraph_t;
typedef cudaGraphExec_t hipGraphExec_t;

#define hipSuccess cudaSuccess
#define hipErrorNotReady cudaErrorNotReady
#define hipErrorOutOfMemory cudaErrorMemoryAllocation
#define hipErrorNoDevice cudaErrorNoDevice
#define hipErrorInsufficientDriver cudaErrorInsufficientDriver
#define hipErrorInvalidValue cudaErrorInvalidValue
#define hipErrorAlreadyMapped cudaErrorAlreadyMapped
#define hipErrorPeerAccessAlreadyEnabled cudaErrorPeerAccessAlreadyEnabled
#define hipErrorHostMemoryAlreadyRegistered cudaErrorHostMemoryAlreadyRegistered

#define hipGetErrorString cudaGetErrorString
#define hipGetErrorName cudaGetErrorName
#define hipGetLastError cudaGetLastError
#define hipPeekAtLastError cudaPeekAtLastError

#define hipGetDeviceCount cudaGetDeviceCount
#define hipGetDevice cudaGetDevice
#define hipSetDevice cudaSetDevice
#define hipGetDeviceProperties cudaGetDeviceProperties
#define hipDeviceCanAccessPeer cudaDeviceCanAccessPeer
#define hipDeviceEnablePeerAccess cudaDeviceEnablePeerAccess
#define hipDeviceSynchronize cudaDeviceSynchronize
#define hipDriverGetVersion cudaDriverGetVersion
#define hipRuntimeGetVersion cudaRuntimeGetVersion

#define hipMalloc cudaMalloc
#define hipFree cudaFree
#define hipHostMalloc cudaHostAlloc
#define hipHostMallocDefault cudaHostAllocDefault
#define hipHostMallocPortable cudaHostAllocPortable
#define hipHostMallocMapped cudaHostAllocMapped
#define hipHostFree cudaFreeHost
#define hipHostRegister cudaHostRegister
#define hipHostRegisterPortable cudaHostRegisterPortable
#define hipHostRegisterMapped cudaHostRegisterMapped
#define hipHostUnregister cudaHostUnregister
#define hipHostGetDevicePointer cudaHostGetDevicePointer
#define hipPointerGetAttributes cudaPointerGetAttributes
#define hipMemset cudaMemset
#define hipMemsetAsync cudaMemsetAsync
#define hipMemcpy cudaMemcpy
#define hipMemcpyAsync cudaMemcpyAsync
#define hipMemcpy2DAsync cudaMemcpy2DAsync
#define hipMemcpy3DAsync cudaMemcpy3DAsync
#define hipErrorInvalidPitchValue cudaErrorInvalidPitchValue
#define hipMemcpy3DParms struct cudaMemcpy3DParms /* a struct tag in C */
#define hipMemcpyPeerAsync cudaMemcpyPeerAsync
#define hipMemcpyDefault cudaMemcpyDefault
#define hipMemcpyHostToDevice cudaMemcpyHostToDevice
#define hipMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define hipMemcpyDeviceToDevice cudaMemcpyDeviceToDevice

#define hipStreamCreateWithFlags cudaStreamCreateWithFlags
#define hipStreamCreateWithPriority cudaStreamCreateWithPriority
#define hipDeviceGetStreamPriorityRange cudaDeviceGetStreamPriorityRange
#define hipStreamNonBlocking cudaStreamNonBlocking
#define hipStreamDestroy cudaStreamDestroy
#define hipStreamSynchronize cudaStreamSynchronize
#define hipStreamWaitEvent cudaStreamWaitEvent

#define hipEventCreateWithFlags cudaEventCreateWithFlags
#define hipEventDefault cudaEventDefault
#define hipEventDisableTiming cudaEventDisableTiming
#define hipEventDestroy cudaEventDestroy
#define hipEventRecord cudaEventRecord
#define hipEventQuery cudaEventQuery
#define hipEventSynchronize cudaEventSynchronize
#define hipEventElapsedTime cudaEventElapsedTime

#define hipIpcGetMemHandle cudaIpcGetMemHandle
#define hipIpcOpenMemHandle cudaIpcOpenMemHandle
#define hipIpcCloseMemHandle cudaIpcCloseMemHandle
#define hipIpcMemLazyEnablePeerAccess cudaIpcMemLazyEnablePeerAccess

#define hipOccupancyMaxActiveBlocksPerMultiprocessor cudaOccupancyMaxActiveBlocksPerMultiprocessor

#define hipStreamBeginCapture cudaStreamBeginCapture
#define hipStreamCaptureModeRelaxed cudaStreamCaptureModeRelaxed
#define hipStreamEndCapture cudaStreamEndCapture
#define hipGraphInstantiateWithFlags cudaGraphInstantiateWithFlags
#define hipGraphLaunch cudaGraphLaunch
#define hipGraphExecDestroy cudaGraphExecDestroy
#define hipGraphDestroy cudaGraphDestroy


static inline int gdte_compat_attr_kind(const hipPointerAttribute_t *a)
{
    switch (a->type) {
    case cudaMemoryTypeManaged: return 3;
    case cudaMemoryTypeDevice: return 2;
    case cudaMemoryTypeHost: return 1;
    default: return 0;
    }
}

/* Driver calls the CUDA runtime has no counterpart for are fetched through the runtime's entry
 * point table, so that libgdte never links libcuda (a build must load on machines without a
 * driver). NULL when the driver lacks it. Each caller keeps the answer in a static of its own. */
static inline void *gdte_compat_driver_fn(const char *name)
{
    void *f = NULL;
    enum cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion(name, &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
        return NULL;
    return f;
}

/* The allocation holding `p`: cuMemGetAddressRange. */
typedef int (*gdte_compat_cu_range_fn)(unsigned long long *base, size_t *size, unsigned long long ptr);
static inline hipError_t gdte_compat_mem_range(const void *p, void **base_p, size_t *size_p)
{
    static gdte_compat_cu_range_fn fn;
    static int looked;
    if (!looked) {
        fn = (gdte_compat_cu_range_fn)gdte_compat_driver_fn("cuMemGetAddressRange");
        looked = 1;
    }
    if (!fn) return cudaErrorNotSupported;
    unsigned long long base = 0;
    if (fn(&base, size_p, (unsigned long long)(size_t)p) != 0) return cudaErrorInvalidValue;
    *base_p = (void *)(size_t)base;
    return cudaSuccess;
}

/* The driver's unique id of the allocation holding `p` (CU_POINTER_ATTRIBUTE_BUFFER_ID: never
 * reused within a process; 0: memory the driver does not know). cuPointerGetAttributes, not the
 * singular call: for memory the driver does not know it succeeds with id 0, where the singular
 * call fails (a failing driver call is slow, about 1 us on an H100, and an error to
 * compute-sanitizer). */
typedef int (*gdte_compat_cu_attrs_fn)(unsigned n, int *attributes, void **data, unsigned long long ptr);
static inline hipError_t gdte_compat_buffer_id(const void *p, unsigned long long *id_p)
{
    static gdte_compat_cu_attrs_fn fn;
    static int looked;
    if (!looked) {
        fn = (gdte_compat_cu_attrs_fn)gdte_compat_driver_fn("cuPointerGetAttributes");
        looked = 1;
    }
    if (!fn) return cudaErrorNotSupported;
    unsigned long long id = 0;
    int attr = 7; /* CU_POINTER_ATTRIBUTE_BUFFER_ID */
    void *data = &id;
    if (fn(1, &attr, &data, (unsigned long long)(size_t)p) != 0) id = 0;
    *id_p = id;
    return cudaSuccess;
}
#define GDTE_COMPAT_UNKNOWN_PTR_IS_ERROR 0
#define GDTE_COMPAT_VENDOR "cuda"
#endif

/* Memory kinds returned by gdte_compat_attr_kind. */
enum { GDTE_COMPAT_MEM_UNREGISTERED = 0, GDTE_COMPAT_MEM_HOST = 1, GDTE_COMPAT_MEM_DEVICE = 2, GDTE_COMPAT_MEM_MANAGED = 3 };

#endif
