/*
 * gpu_runtime.c: gpu.h over the GPU runtime, written once against HIP names (gpu_compat.h maps
 * them to CUDA for CUDA builds). Plain C, compiled by the host compiler.
 *
 * A build with a backend must also run where there is no driver or no device (CI, login
 * nodes): gdte_gpu_init then succeeds with gdte_gpu_available() == 0, and every call behaves
 * like the stub in gpu_none.c. Runtime errors are logged once, here, with the runtime's own
 * text, and mapped to GDTE_ERR_NO_DEVICE_MEMORY (allocation failures) or GDTE_ERR_GPU.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <stdatomic.h>
#include "gpu.h"
#include "gpu_compat.h"
#include "util/util.h"

#define MAX_DEVICES 64

static int available;
static int ndevices;
static pthread_mutex_t props_lock = PTHREAD_MUTEX_INITIALIZER;
static gdte_gpu_props_t props_cache[MAX_DEVICES];
static int props_valid[MAX_DEVICES];
static _Thread_local char last_error[320] = "no error";

static gdte_status_t fail(hipError_t e, const char *call)
{
    snprintf(last_error, sizeof last_error, "%s: %s (%s)", call, hipGetErrorString(e), hipGetErrorName(e));
    gdte_error("GPU runtime: %s", last_error);
    /* Clear the thread's sticky copy so the next, unrelated call does not report it again. */
    (void)hipGetLastError();
    return e == hipErrorOutOfMemory ? GDTE_ERR_NO_DEVICE_MEMORY : GDTE_ERR_GPU;
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        hipError_t e_ = (call);                                                                    \
        if (e_ != hipSuccess) return fail(e_, #call);                                              \
    } while (0)
#define NEED_DEVICE()                                                                              \
    do {                                                                                           \
        if (!available) return GDTE_ERR_NO_DEVICE;                                                 \
    } while (0)

gdte_gpu_backend_t gdte_gpu_backend(void)
{
#if defined(GDTE_GPU_HIP) || defined(__HIP_PLATFORM_AMD__)
    return GDTE_GPU_BACKEND_HIP;
#else
    return GDTE_GPU_BACKEND_CUDA;
#endif
}
const char *gdte_gpu_backend_name(void) { return GDTE_COMPAT_VENDOR; }

gdte_status_t gdte_gpu_init(int device)
{
    int n = 0;
    hipError_t e = hipGetDeviceCount(&n);
    available = 0;
    ndevices = 0;
    if (e != hipSuccess || n <= 0) {
        /* No driver or no device is a normal condition for a GPU build: report it quietly. */
        snprintf(last_error, sizeof last_error, "no usable GPU: %s", e != hipSuccess ? hipGetErrorString(e) : "0 devices");
        gdte_info("%s; running without the GPU backend", last_error);
        (void)hipGetLastError();
        return GDTE_OK;
    }
    if (device >= n) {
        gdte_error("GPU %d requested, %d present", device, n);
        return GDTE_ERR_INVALID_ARG;
    }
    if (device >= 0) CHECK(hipSetDevice(device));
    /* Create the context now, so the first pack does not pay for it and a broken device shows
     * here rather than in the middle of a message. */
    e = hipFree(NULL);
    if (e != hipSuccess) {
        snprintf(last_error, sizeof last_error, "GPU present but unusable: %s", hipGetErrorString(e));
        gdte_warn("%s; running without the GPU backend", last_error);
        (void)hipGetLastError();
        return GDTE_OK;
    }
    ndevices = n;
    available = 1;
    return GDTE_OK;
}

void gdte_gpu_finalize(void)
{
    pthread_mutex_lock(&props_lock);
    memset(props_valid, 0, sizeof props_valid);
    pthread_mutex_unlock(&props_lock);
    available = 0;
}

int gdte_gpu_available(void) { return available; }
int gdte_gpu_device_count(void) { return available ? ndevices : 0; }

int gdte_gpu_current_device(void)
{
    int d = -1;
    if (!available || hipGetDevice(&d) != hipSuccess) return -1;
    return d;
}

gdte_status_t gdte_gpu_set_device(int device)
{
    NEED_DEVICE();
    if (device < 0 || device >= ndevices) return GDTE_ERR_INVALID_ARG;
    CHECK(hipSetDevice(device));
    return GDTE_OK;
}

/* Contexts created on `device` are shared through MPS: CUDA's cudaDevAttrMpsEnabled (133, by
 * number so that headers before CUDA 12.x compile; a runtime that does not know it says 0). HIP
 * has no multi-process service. */
static int device_mps(int device)
{
#if defined(__HIP_PLATFORM_AMD__)
    (void)device;
    return 0;
#else
    int v = 0;
    if (cudaDeviceGetAttribute(&v, (enum cudaDeviceAttr)133, device) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return v != 0;
#endif
}

gdte_status_t gdte_gpu_get_props(int device, gdte_gpu_props_t *props_p)
{
    NEED_DEVICE();
    if (device < 0) device = gdte_gpu_current_device();
    if (device < 0 || device >= ndevices || device >= MAX_DEVICES || !props_p) return GDTE_ERR_INVALID_ARG;
    gdte_status_t st = GDTE_OK;
    pthread_mutex_lock(&props_lock);
    if (!props_valid[device]) {
        hipDeviceProp_t p;
        hipError_t e = hipGetDeviceProperties(&p, device);
        if (e != hipSuccess) {
            st = fail(e, "hipGetDeviceProperties");
        } else {
            gdte_gpu_props_t *c = &props_cache[device];
            memset(c, 0, sizeof *c);
            snprintf(c->name, sizeof c->name, "%s", p.name);
            c->sm_count = p.multiProcessorCount;
            c->l2_bytes = p.l2CacheSize;
            c->max_threads_per_sm = p.maxThreadsPerMultiProcessor;
            c->warp_size = p.warpSize;
            c->pci_bus = p.pciBusID;
            c->pci_device = p.pciDeviceID;
            c->pci_domain = p.pciDomainID;
            c->total_mem = p.totalGlobalMem;
            c->mps = device_mps(device);
            props_valid[device] = 1;
        }
    }
    if (st == GDTE_OK) *props_p = props_cache[device];
    pthread_mutex_unlock(&props_lock);
    return st;
}

gdte_status_t gdte_gpu_can_access_peer(int device, int peer, int *can_p)
{
    if (can_p) *can_p = 0;
    NEED_DEVICE();
    int c = 0;
    if (device == peer) {
        c = 1;
    } else {
        CHECK(hipDeviceCanAccessPeer(&c, device, peer));
    }
    if (can_p) *can_p = c;
    return GDTE_OK;
}

gdte_status_t gdte_gpu_enable_peer(int peer)
{
    NEED_DEVICE();
    if (peer == gdte_gpu_current_device()) return GDTE_OK;
    hipError_t e = hipDeviceEnablePeerAccess(peer, 0);
    if (e == hipErrorPeerAccessAlreadyEnabled) {
        (void)hipGetLastError();
        return GDTE_OK;
    }
    CHECK(e);
    return GDTE_OK;
}

/* ---- memory ---- */
gdte_status_t gdte_gpu_malloc(void **ptr_p, size_t size)
{
    NEED_DEVICE();
    void *p = NULL;
    CHECK(hipMalloc(&p, size ? size : 1));
    *ptr_p = p;
    return GDTE_OK;
}

/* Counts every release of an address range (free, IPC close, unregister) and every host
 * registration: the memory-kind cache above this layer drops its answers when it moves, so a
 * range gdte released and the OS reused for host memory is never taken for device memory, nor
 * a range gdte registered for pageable memory. */
static _Atomic uint64_t unmap_epoch;
uint64_t gdte_gpu_unmap_epoch(void) { return unmap_epoch; }

gdte_status_t gdte_gpu_free(void *ptr)
{
    NEED_DEVICE();
    if (ptr) {
        unmap_epoch++;
        CHECK(hipFree(ptr));
    }
    return GDTE_OK;
}

gdte_status_t gdte_gpu_host_alloc(void **ptr_p, size_t size, int mapped)
{
    NEED_DEVICE();
    void *p = NULL;
    unsigned flags = hipHostMallocPortable | (mapped ? hipHostMallocMapped : 0);
    CHECK(hipHostMalloc(&p, size ? size : 1, flags));
    *ptr_p = p;
    return GDTE_OK;
}

gdte_status_t gdte_gpu_host_free(void *ptr)
{
    NEED_DEVICE();
    if (ptr) {
        unmap_epoch++;
        CHECK(hipHostFree(ptr));
    }
    return GDTE_OK;
}

gdte_status_t gdte_gpu_host_register(void *ptr, size_t size)
{
    NEED_DEVICE();
    hipError_t e = hipHostRegister(ptr, size, hipHostRegisterPortable | hipHostRegisterMapped);
    unmap_epoch++; /* the range's memory kind changed (or may have): cached answers go */
    if (e == hipErrorHostMemoryAlreadyRegistered) {
        (void)hipGetLastError();
        return GDTE_OK;
    }
    CHECK(e);
    return GDTE_OK;
}

gdte_status_t gdte_gpu_host_unregister(void *ptr)
{
    NEED_DEVICE();
    unmap_epoch++;
    CHECK(hipHostUnregister(ptr));
    return GDTE_OK;
}

gdte_status_t gdte_gpu_host_device_pointer(void *host, void **dev_p)
{
    NEED_DEVICE();
    void *d = NULL;
    CHECK(hipHostGetDevicePointer(&d, host, 0));
    *dev_p = d;
    return GDTE_OK;
}

gdte_status_t gdte_gpu_pointer_query(const void *ptr, gdte_mem_info_t *info_p)
{
    gdte_mem_info_t in = {GDTE_MEM_HOST, -1};
    if (!available || !ptr) {
        *info_p = in;
        return GDTE_OK;
    }
    hipPointerAttribute_t a;
    memset(&a, 0, sizeof a);
    hipError_t e = hipPointerGetAttributes(&a, ptr);
    if (e != hipSuccess) {
        if (GDTE_COMPAT_UNKNOWN_PTR_IS_ERROR && e == hipErrorInvalidValue) {
            (void)hipGetLastError(); /* memory the runtime never saw: plain host memory */
            *info_p = in;
            return GDTE_OK;
        }
        return fail(e, "hipPointerGetAttributes");
    }
    switch (gdte_compat_attr_kind(&a)) {
    case GDTE_COMPAT_MEM_DEVICE: in.kind = GDTE_MEM_DEVICE; in.device = a.device; break;
    case GDTE_COMPAT_MEM_MANAGED: in.kind = GDTE_MEM_MANAGED; in.device = a.device; break;
    case GDTE_COMPAT_MEM_HOST: in.kind = GDTE_MEM_PINNED; break;
    default: break;
    }
    *info_p = in;
    return GDTE_OK;
}

gdte_status_t gdte_gpu_mem_range(const void *ptr, void **base_p, size_t *size_p)
{
    NEED_DEVICE();
    void *b = NULL;
    size_t n = 0;
    hipError_t e = gdte_compat_mem_range(ptr, &b, &n);
    if (e != hipSuccess) {
        /* Not an error worth a log line: the caller falls back to an uncached answer. */
        (void)hipGetLastError();
        return GDTE_ERR_UNSUPPORTED;
    }
    *base_p = b;
    *size_p = n;
    return GDTE_OK;
}

gdte_status_t gdte_gpu_buffer_id(const void *ptr, uint64_t *id_p)
{
    NEED_DEVICE();
    unsigned long long id = 0;
    if (gdte_compat_buffer_id(ptr, &id) != hipSuccess) {
        (void)hipGetLastError();
        return GDTE_ERR_UNSUPPORTED;
    }
    *id_p = (uint64_t)id;
    return GDTE_OK;
}

gdte_status_t gdte_gpu_memset(void *ptr, int value, size_t size)
{
    NEED_DEVICE();
    CHECK(hipMemset(ptr, value, size));
    return GDTE_OK;
}

gdte_status_t gdte_gpu_memset_async(void *ptr, int value, size_t size, gdte_stream_t s)
{
    NEED_DEVICE();
    CHECK(hipMemsetAsync(ptr, value, size, (hipStream_t)s));
    return GDTE_OK;
}

/* ---- copies ---- */
gdte_status_t gdte_gpu_memcpy(void *dst, const void *src, size_t size)
{
    NEED_DEVICE();
    if (!size) return GDTE_OK;
    /* The stream's synchronize, not the copy's return, says the DMA is done. */
    CHECK(hipMemcpyAsync(dst, src, size, hipMemcpyDefault, NULL));
    CHECK(hipStreamSynchronize(NULL));
    return GDTE_OK;
}

gdte_status_t gdte_gpu_memcpy_async(void *dst, const void *src, size_t size, gdte_stream_t s)
{
    NEED_DEVICE();
    if (size) CHECK(hipMemcpyAsync(dst, src, size, hipMemcpyDefault, (hipStream_t)s));
    return GDTE_OK;
}

gdte_status_t gdte_gpu_memcpy2d_async(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                                      size_t height, gdte_stream_t s)
{
    NEED_DEVICE();
    if (width && height) CHECK(hipMemcpy2DAsync(dst, dpitch, src, spitch, width, height, hipMemcpyDefault, (hipStream_t)s));
    return GDTE_OK;
}

gdte_status_t gdte_gpu_memcpy3d_async(void *dst, size_t dpitch, size_t drows, const void *src, size_t spitch,
                                      size_t srows, size_t width, size_t height, size_t depth, gdte_stream_t s)
{
    NEED_DEVICE();
    if (!width || !height || !depth) return GDTE_OK;
    hipMemcpy3DParms p;
    memset(&p, 0, sizeof p);
    p.srcPtr.ptr = (void *)src;
    p.srcPtr.pitch = spitch;
    p.srcPtr.xsize = width;
    p.srcPtr.ysize = srows;
    p.dstPtr.ptr = dst;
    p.dstPtr.pitch = dpitch;
    p.dstPtr.xsize = width;
    p.dstPtr.ysize = drows;
    p.extent.width = width;
    p.extent.height = height;
    p.extent.depth = depth;
    p.kind = hipMemcpyDefault;
    hipError_t e = hipMemcpy3DAsync(&p, (hipStream_t)s);
    if (e == hipErrorInvalidValue || e == hipErrorInvalidPitchValue) {
        /* A shape the runtime does not take (a limit on pitches or extents): nothing was queued,
         * the caller moves the data another way. */
        (void)hipGetLastError();
        return GDTE_ERR_UNSUPPORTED;
    }
    CHECK(e);
    return GDTE_OK;
}

gdte_status_t gdte_gpu_memcpy_peer_async(void *dst, int dst_dev, const void *src, int src_dev, size_t size,
                                         gdte_stream_t s)
{
    NEED_DEVICE();
    if (size) CHECK(hipMemcpyPeerAsync(dst, dst_dev, src, src_dev, size, (hipStream_t)s));
    return GDTE_OK;
}

/* ---- streams and events ---- */
gdte_status_t gdte_gpu_stream_create(gdte_stream_t *s_p)
{
    NEED_DEVICE();
    hipStream_t s;
    CHECK(hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
    *s_p = (gdte_stream_t)s;
    return GDTE_OK;
}

gdte_status_t gdte_gpu_stream_create_urgent(gdte_stream_t *s_p)
{
    NEED_DEVICE();
    int least = 0, greatest = 0;
    CHECK(hipDeviceGetStreamPriorityRange(&least, &greatest));
    hipStream_t s;
    CHECK(hipStreamCreateWithPriority(&s, hipStreamNonBlocking, greatest));
    *s_p = (gdte_stream_t)s;
    return GDTE_OK;
}

gdte_status_t gdte_gpu_stream_destroy(gdte_stream_t s)
{
    NEED_DEVICE();
    if (s) CHECK(hipStreamDestroy((hipStream_t)s));
    return GDTE_OK;
}

gdte_status_t gdte_gpu_stream_synchronize(gdte_stream_t s)
{
    if (!available) return GDTE_OK;
    CHECK(hipStreamSynchronize((hipStream_t)s));
    return GDTE_OK;
}

gdte_status_t gdte_gpu_event_create(gdte_gpu_event_t *e_p, int timing)
{
    NEED_DEVICE();
    hipEvent_t e;
    CHECK(hipEventCreateWithFlags(&e, timing ? hipEventDefault : hipEventDisableTiming));
    *e_p = (gdte_gpu_event_t)e;
    return GDTE_OK;
}

gdte_status_t gdte_gpu_event_destroy(gdte_gpu_event_t e)
{
    NEED_DEVICE();
    if (e) CHECK(hipEventDestroy((hipEvent_t)e));
    return GDTE_OK;
}

gdte_status_t gdte_gpu_event_record(gdte_gpu_event_t e, gdte_stream_t s)
{
    NEED_DEVICE();
    CHECK(hipEventRecord((hipEvent_t)e, (hipStream_t)s));
    return GDTE_OK;
}

gdte_status_t gdte_gpu_event_query(gdte_gpu_event_t e)
{
    if (!available) return GDTE_OK;
    hipError_t r = hipEventQuery((hipEvent_t)e);
    if (r == hipErrorNotReady) {
        (void)hipGetLastError();
        return GDTE_INPROGRESS;
    }
    CHECK(r);
    return GDTE_OK;
}

gdte_status_t gdte_gpu_event_synchronize(gdte_gpu_event_t e)
{
    if (!available) return GDTE_OK;
    CHECK(hipEventSynchronize((hipEvent_t)e));
    return GDTE_OK;
}

gdte_status_t gdte_gpu_event_elapsed_ms(gdte_gpu_event_t start, gdte_gpu_event_t stop, float *ms_p)
{
    NEED_DEVICE();
    float ms = 0;
    CHECK(hipEventElapsedTime(&ms, (hipEvent_t)start, (hipEvent_t)stop));
    *ms_p = ms;
    return GDTE_OK;
}

gdte_status_t gdte_gpu_stream_wait_event(gdte_stream_t s, gdte_gpu_event_t e)
{
    NEED_DEVICE();
    CHECK(hipStreamWaitEvent((hipStream_t)s, (hipEvent_t)e, 0));
    return GDTE_OK;
}

gdte_status_t gdte_gpu_device_synchronize(void)
{
    if (!available) return GDTE_OK;
    CHECK(hipDeviceSynchronize());
    return GDTE_OK;
}

/* ---- graphs ---- */
gdte_status_t gdte_gpu_capture_begin(gdte_stream_t s)
{
    NEED_DEVICE();
    CHECK(hipStreamBeginCapture((hipStream_t)s, hipStreamCaptureModeRelaxed));
    return GDTE_OK;
}

gdte_status_t gdte_gpu_capture_end(gdte_stream_t s, gdte_gpu_graph_t *g_p)
{
    NEED_DEVICE();
    hipGraph_t g;
    hipGraphExec_t x;
    CHECK(hipStreamEndCapture((hipStream_t)s, &g));
    hipError_t e = hipGraphInstantiateWithFlags(&x, g, 0);
    (void)hipGraphDestroy(g);
    CHECK(e);
    *g_p = (gdte_gpu_graph_t)x;
    return GDTE_OK;
}

gdte_status_t gdte_gpu_graph_launch(gdte_gpu_graph_t g, gdte_stream_t s)
{
    NEED_DEVICE();
    CHECK(hipGraphLaunch((hipGraphExec_t)g, (hipStream_t)s));
    return GDTE_OK;
}

gdte_status_t gdte_gpu_graph_destroy(gdte_gpu_graph_t g)
{
    NEED_DEVICE();
    if (g) CHECK(hipGraphExecDestroy((hipGraphExec_t)g));
    return GDTE_OK;
}

/* ---- IPC ---- */
_Static_assert(sizeof(hipIpcMemHandle_t) <= GDTE_GPU_IPC_HANDLE_BYTES, "IPC handle does not fit");

gdte_status_t gdte_gpu_ipc_get_handle(void *dev_ptr, gdte_gpu_ipc_handle_t *h_p)
{
    NEED_DEVICE();
    hipIpcMemHandle_t h;
    hipError_t e = hipIpcGetMemHandle(&h, dev_ptr);
    if (e == hipErrorInvalidValue) {
        /* Memory the legacy IPC cannot export (managed, stream-ordered pools, VMM): the
         * caller copies into memory it can export, nothing to report. */
        (void)hipGetLastError();
        return GDTE_ERR_UNSUPPORTED;
    }
    CHECK(e);
    memset(h_p, 0, sizeof *h_p);
    memcpy(h_p->bytes, &h, sizeof h);
    return GDTE_OK;
}

gdte_status_t gdte_gpu_ipc_open(const gdte_gpu_ipc_handle_t *h, void **dev_ptr_p)
{
    NEED_DEVICE();
    hipIpcMemHandle_t hh;
    memcpy(&hh, h->bytes, sizeof hh);
    void *p = NULL;
    hipError_t e = hipIpcOpenMemHandle(&p, hh, hipIpcMemLazyEnablePeerAccess);
    if (e == hipErrorAlreadyMapped) {
        /* Memory of the exporter still mapped here under an older handle (it freed and
         * allocated again at that address): the caller unmaps the stale mapping and retries. */
        (void)hipGetLastError();
        return GDTE_ERR_INVALID_ARG;
    }
    CHECK(e);
    *dev_ptr_p = p;
    return GDTE_OK;
}

gdte_status_t gdte_gpu_ipc_close(void *dev_ptr)
{
    NEED_DEVICE();
    unmap_epoch++;
    CHECK(hipIpcCloseMemHandle(dev_ptr));
    return GDTE_OK;
}

const char *gdte_gpu_last_error(void) { return last_error; }
