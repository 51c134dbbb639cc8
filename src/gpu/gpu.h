/*
 * gpu.h: the GPU runtime calls gdte uses, behind one C interface. Implemented once in the HIP
 * dialect (gpu_runtime.c with gpu_compat.h mapping HIP names to CUDA for nvcc builds), and as
 * a stub (gpu_none.c) when gdte is built without a GPU backend. A build with a backend on a
 * machine without a usable device behaves like the stub at run time (gdte_gpu_available() == 0).
 *
 * May call: src/util. Called by: src/engine is not allowed to; src/kernels and above are.
 */
#ifndef GDTE_GPU_H
#define GDTE_GPU_H

#include <stddef.h>
#include <stdint.h>
#include "gdte.h"

typedef enum { GDTE_GPU_BACKEND_NONE = 0, GDTE_GPU_BACKEND_CUDA = 1, GDTE_GPU_BACKEND_HIP = 2 } gdte_gpu_backend_t;

/* Compile-time backend; run-time availability is gdte_gpu_available(). */
gdte_gpu_backend_t gdte_gpu_backend(void);
const char *gdte_gpu_backend_name(void);

/* Called by gdte_init: probes the runtime, selects `device` (-1: keep current). Returns
 * GDTE_OK also when no device is found (then gdte_gpu_available() is 0). */
gdte_status_t gdte_gpu_init(int device);
void gdte_gpu_finalize(void);
int gdte_gpu_available(void);
int gdte_gpu_device_count(void);
int gdte_gpu_current_device(void);
gdte_status_t gdte_gpu_set_device(int device);

typedef struct gdte_gpu_props {
    char name[256];
    int sm_count;
    int l2_bytes;
    int max_threads_per_sm;
    int warp_size;
    int pci_bus, pci_device, pci_domain;
    size_t total_mem;
    int mps; /* contexts of different processes share the GPU through MPS (CUDA; 0 where unknown) */
} gdte_gpu_props_t;
gdte_status_t gdte_gpu_get_props(int device, gdte_gpu_props_t *props_p);
gdte_status_t gdte_gpu_can_access_peer(int device, int peer, int *can_p);
gdte_status_t gdte_gpu_enable_peer(int peer); /* from the current device; idempotent */

/* Memory */
gdte_status_t gdte_gpu_malloc(void **ptr_p, size_t size);
gdte_status_t gdte_gpu_free(void *ptr);
/* Page-locked host memory; `mapped`: also addressable by the device (zero copy). */
gdte_status_t gdte_gpu_host_alloc(void **ptr_p, size_t size, int mapped);
gdte_status_t gdte_gpu_host_free(void *ptr);
gdte_status_t gdte_gpu_host_register(void *ptr, size_t size);
gdte_status_t gdte_gpu_host_unregister(void *ptr);
gdte_status_t gdte_gpu_host_device_pointer(void *host, void **dev_p);
/* Uncached lookup: callers go through the cache in src/kernels (gdte_mem_query). */
gdte_status_t gdte_gpu_pointer_query(const void *ptr, gdte_mem_info_t *info_p);
/* The allocation (device or managed) containing `ptr`: its first byte and size. */
gdte_status_t gdte_gpu_mem_range(const void *ptr, void **base_p, size_t *size_p);
/* The runtime's unique id of the allocation holding `ptr`, never reused within the process (0:
 * memory the runtime does not know, e.g. pageable host memory or an allocation freed since).
 * GDTE_ERR_UNSUPPORTED where the runtime has no such query. */
gdte_status_t gdte_gpu_buffer_id(const void *ptr, uint64_t *id_p);
gdte_status_t gdte_gpu_memset(void *ptr, int value, size_t size);
gdte_status_t gdte_gpu_memset_async(void *ptr, int value, size_t size, gdte_stream_t s);

/* Copies: any direction (the runtime infers it from unified addresses). gdte_gpu_memcpy
 * returns when the bytes are at `dst`, also from pageable host memory (where the runtime's
 * own blocking copy may return before its last DMA lands). */
gdte_status_t gdte_gpu_memcpy(void *dst, const void *src, size_t size);
gdte_status_t gdte_gpu_memcpy_async(void *dst, const void *src, size_t size, gdte_stream_t s);
gdte_status_t gdte_gpu_memcpy2d_async(void *dst, size_t dpitch, const void *src, size_t spitch,
                                      size_t width, size_t height, gdte_stream_t s);
/* `depth` planes of `height` rows of `width` bytes; row k of plane j at j*pitch*rows + k*pitch on
 * each side (rows: a plane's stride in rows, at least `height`). One copy-engine operation. */
gdte_status_t gdte_gpu_memcpy3d_async(void *dst, size_t dpitch, size_t drows, const void *src, size_t spitch,
                                      size_t srows, size_t width, size_t height, size_t depth, gdte_stream_t s);
gdte_status_t gdte_gpu_memcpy_peer_async(void *dst, int dst_dev, const void *src, int src_dev,
                                         size_t size, gdte_stream_t s);

/* Streams and events */
gdte_status_t gdte_gpu_stream_create(gdte_stream_t *s_p); /* non-blocking stream */
/* A non-blocking stream of the device's highest priority: its kernels' blocks are dispatched
 * before those of kernels already queued on ordinary streams. */
gdte_status_t gdte_gpu_stream_create_urgent(gdte_stream_t *s_p);
gdte_status_t gdte_gpu_stream_destroy(gdte_stream_t s);
gdte_status_t gdte_gpu_stream_synchronize(gdte_stream_t s);
typedef void *gdte_gpu_event_t;
gdte_status_t gdte_gpu_event_create(gdte_gpu_event_t *e_p, int timing);
gdte_status_t gdte_gpu_event_destroy(gdte_gpu_event_t e);
gdte_status_t gdte_gpu_event_record(gdte_gpu_event_t e, gdte_stream_t s);
/* GDTE_OK when done, GDTE_INPROGRESS when not yet. */
gdte_status_t gdte_gpu_event_query(gdte_gpu_event_t e);
gdte_status_t gdte_gpu_event_synchronize(gdte_gpu_event_t e);
gdte_status_t gdte_gpu_event_elapsed_ms(gdte_gpu_event_t start, gdte_gpu_event_t stop, float *ms_p);
gdte_status_t gdte_gpu_stream_wait_event(gdte_stream_t s, gdte_gpu_event_t e);
gdte_status_t gdte_gpu_device_synchronize(void);

/* Graphs: what is queued on `s` between capture_begin and capture_end, replayed by
 * graph_launch (benchmarks: replays have no launch gaps; repeated identical packs). */
typedef void *gdte_gpu_graph_t;
gdte_status_t gdte_gpu_capture_begin(gdte_stream_t s);
gdte_status_t gdte_gpu_capture_end(gdte_stream_t s, gdte_gpu_graph_t *g_p);
gdte_status_t gdte_gpu_graph_launch(gdte_gpu_graph_t g, gdte_stream_t s);
gdte_status_t gdte_gpu_graph_destroy(gdte_gpu_graph_t g);

/* IPC: handles are opaque bytes, sent to a peer process as they are. */
#define GDTE_GPU_IPC_HANDLE_BYTES 64
typedef struct gdte_gpu_ipc_handle { unsigned char bytes[GDTE_GPU_IPC_HANDLE_BYTES]; } gdte_gpu_ipc_handle_t;
gdte_status_t gdte_gpu_ipc_get_handle(void *dev_ptr, gdte_gpu_ipc_handle_t *h_p);
gdte_status_t gdte_gpu_ipc_open(const gdte_gpu_ipc_handle_t *h, void **dev_ptr_p);
gdte_status_t gdte_gpu_ipc_close(void *dev_ptr);

/* Incremented whenever gdte releases an address range (free, host free, unregister, IPC
 * close): caches of address ranges compare it to know when to drop their entries. */
uint64_t gdte_gpu_unmap_epoch(void);

/* Last runtime error text (thread-local), for logs. */
const char *gdte_gpu_last_error(void);

#endif
