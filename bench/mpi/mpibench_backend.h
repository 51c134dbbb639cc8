/*
 * What bench/mpi needs from GPU memory: the CUDA backend (mpibench_cuda.cu, compiled only in
 * CUDA builds) allocates device buffers, copies, and maps the peer's buffer by CUDA IPC for the
 * raw baseline. Builds without CUDA get stubs (mpibench.c) and run with --mem host only.
 */
#ifndef MPIBENCH_BACKEND_H
#define MPIBENCH_BACKEND_H
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MB_IPC_HANDLE_MAX 128 /* bytes; a cudaIpcMemHandle_t is 64 */

/* Select GPU `rank % ngpus`; returns its index, or -1 (with a message) when there is none. */
int mb_init(int rank);
const char *mb_device_name(void);       /* short form: "H100", "H200", ... */
const char *mb_device_key(void);        /* PCI bus id: tells GPUs apart across processes */
void *mb_alloc(size_t bytes);            /* device memory */
void mb_free(void *p);
void mb_memcpy(void *dst, const void *src, size_t bytes); /* any direction, synchronous */
/* Device copy on the backend's stream (src may be a peer's IPC mapping); mb_sync waits. */
void mb_copy_async(void *dst, const void *src, size_t bytes);
void mb_sync(void);
size_t mb_ipc_handle_size(void);
int mb_ipc_get(void *p, void *handle);   /* 0 on success */
void *mb_ipc_open(const void *handle);   /* NULL on failure */
void mb_ipc_close(void *p);

#ifdef __cplusplus
}
#endif
#endif
